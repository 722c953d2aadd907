"""C1, easy-first: does a masked DLM commit function words first and content last?

The measurement of ``notebooks/01_easy_first.md`` (SPEC.md section 5, C1):
unconditional samples decoded one token per step in confidence order, every
generated token's normalized decode time ``r`` and word class, then the order
of content against function words overall (AUC with a sequence bootstrap), per
decile of decode order, with position and frequency held fixed (clustered
OLS), against random remasking, and under Fast-dLLM's threshold rule (SPEC.md
section 2.2). ``measure`` returns every value the page glues, under its glue
name, and the tables and arrays the page shows and draws.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from ..decoding.config import DecodeConfig
from ..decoding.decode import generate
from ..measures import order
from ..measures.tagger import CONTENT, FUNCTION, PUNCT
from ..worlds import World
from . import parameters
from .common import Measurement, Models
from .parameters import shared

PRIMARY, RANDOM = "confidence", "random"
CLASS_ORDER = [CONTENT, FUNCTION, PUNCT]
CLASS_LABEL = {CONTENT: "content", FUNCTION: "function", PUNCT: "glue (punctuation)"}
SUMMARY_COLUMNS = {  # class_order's keys -> the summary table's columns, in order
    "n_content": "n_content", "n_function": "n_function", "n_punct": "n_glue",
    "n_special": "n_special", "mean_content": "mean r content",
    "mean_function": "mean r function", "mean_punct": "mean r glue", "auc": "AUC",
    "auc_lo": "AUC low", "auc_hi": "AUC high", "p": "Mann-Whitney p"}
REGRESSIONS = {"content only": dict(position=False, frequency=False),
               "+ position": dict(position=True, frequency=False),
               "+ position + frequency": dict(position=True, frequency=True)}
PARALLEL_COLUMNS = ["tokens_per_step", "parallel_fraction", "auc", "auc_lo", "auc_hi",
                    "content_single", "content_parallel", "function_single",
                    "function_parallel", "glue_single", "glue_parallel"]


def blocked_name(block_length: int) -> str:
    return f"confidence, blocks of {block_length}"


def threshold_names(threshold: float, thresholds) -> dict[float, str]:
    """Threshold -> its decoder's name: the main one first, then the lower ones
    from the highest down (a repeated threshold runs once)."""
    return {v: f"threshold {v:g}"
            for v in dict.fromkeys([threshold, *sorted(thresholds, reverse=True)])}


def decoders(gen_length: int, block_length: int, temperature: float, threshold: float,
             thresholds, in_blocks: bool = False) -> dict[str, DecodeConfig]:
    """The page's decoders, in decode order (each decoder is one random stream).

    Confidence order in one block (the claim), random remasking (the control),
    LLaDA's semi-autoregressive blocks, and Fast-dLLM's threshold rule at each
    threshold in one block. ``in_blocks`` (a world whose ``order_in_blocks``):
    every decoder runs in blocks of ``block_length``, which must then hold at
    least one token per decile of decode order.
    """
    if in_blocks and block_length < order.N_BINS:
        raise ValueError(
            f"block_length must be at least {order.N_BINS} when the order is "
            f"measured inside blocks (one token per decile), got {block_length}")
    blocks = block_length if in_blocks else None  # None: one block over all
    out = {
        PRIMARY: order.one_token_per_step(gen_length, blocks, temperature=temperature),
        RANDOM: order.one_token_per_step(gen_length, blocks, remasking="random",
                                         temperature=temperature),
        blocked_name(block_length): order.one_token_per_step(
            gen_length, block_length, temperature=temperature),
    }
    for v, name in threshold_names(threshold, thresholds).items():
        out[name] = DecodeConfig(gen_length=gen_length, block_length=blocks,
                                 rule="threshold", threshold=v, temperature=temperature)
    return out


def decode_all(denoiser, tokenizer, prompt, configs: dict[str, DecodeConfig], *,
               seed: int, lexicon, counts, device="cpu",
               block_length: int | None = None):
    """Decode ``prompt`` with every decoder, each from its own seeded row streams.

    Returns (results, token tables, seconds), each keyed by decoder name; the
    token table has one row per generated token (``order.token_table``), its
    decode time counted inside blocks of ``block_length`` when given
    (``order.block_times``). A greedy decoder whose configuration repeats an
    earlier one's is not decoded again (greedy decodes do not draw from the
    streams): it shares that result, and its seconds are the earlier ones.
    """
    results, tables, seconds = {}, {}, {}
    n = prompt.shape[0]
    for stream, (name, cfg) in enumerate(configs.items()):
        same = next((k for k in results if cfg.temperature == 0 and configs[k] == cfg),
                    None)
        if same is not None:
            results[name], tables[name] = results[same], tables[same].copy()
            seconds[name] = seconds[same]
            continue
        t0 = time.perf_counter()
        gens = order.row_generators(seed, n, device=device, stream=stream)
        results[name] = generate(denoiser, prompt, cfg, generator=gens)
        seconds[name] = time.perf_counter() - t0
        tables[name] = order.token_table(results[name], tokenizer, lexicon, counts,
                                         block_length)
    return results, tables, seconds


def sample_rows(results, tables, tokenizer, n: int = 3) -> pd.DataFrame:
    """The primary decoder's first ``n`` samples with their first and last 8 commits."""
    conf = tables[PRIMARY]
    rows = []
    for s in range(min(n, len(results[PRIMARY].generated))):
        seq = conf[conf.seq == s].sort_values("step")
        rows.append({"text": tokenizer.decode(results[PRIMARY].generated[s].tolist()),
                     "first 8 committed": " ".join(seq.piece.head(8)),
                     "last 8 committed": " ".join(seq.piece.tail(8))})
    return pd.DataFrame(rows)


def order_summaries(tables, block_length: int, *, n_bootstrap: int, seed: int) -> dict:
    """``order.class_order`` of every decoder, plus the blocked decoder's order
    measured by the time within its block (``r_block``, added to its table); the
    blocked decoder's own row is by the time over the whole decode (``r_global``
    where the tables count time inside blocks, ``order.block_times``)."""
    blocked = blocked_name(block_length)
    t = tables[blocked]
    t["r_block"] = order.within_block_time(t, block_length)
    rows = {name: order.class_order(table, n_boot=n_bootstrap, seed=seed)
            for name, table in tables.items()}
    rows[blocked] = order.class_order(t, time="r_global" if "r_global" in t else "r",
                                      n_boot=n_bootstrap, seed=seed)
    rows[f"{blocked} (time within block)"] = order.class_order(
        t, time="r_block", n_boot=n_bootstrap, seed=seed)
    return rows


def summary_table(rows: dict) -> pd.DataFrame:
    """The content-vs-function table as the page shows it (p to two digits)."""
    raw = pd.DataFrame(rows).T[list(SUMMARY_COLUMNS)].rename(columns=SUMMARY_COLUMNS)
    shown = raw.astype({c: int for c in ["n_content", "n_function", "n_glue",
                                         "n_special"]}).round(4)
    shown["Mann-Whitney p"] = raw["Mann-Whitney p"].map(lambda v: f"{v:.2g}")
    return shown


def order_values(rows: dict, block_length: int) -> dict:
    """The glued values of the order summary (confidence order and the controls)."""
    main, rnd = rows[PRIMARY], rows[RANDOM]
    blocked = blocked_name(block_length)
    return {
        "c1_auc": main["auc"], "c1_auc_lo": main["auc_lo"], "c1_auc_hi": main["auc_hi"],
        "c1_auc_p": main["p"], "c1_mean_r_content": main["mean_content"],
        "c1_mean_r_function": main["mean_function"],
        "c1_mean_r_glue": main["mean_punct"],
        "c1_n_content": main["n_content"], "c1_n_function": main["n_function"],
        "c1_n_glue": main["n_punct"],
        "c1_random_auc": rnd["auc"], "c1_random_auc_lo": rnd["auc_lo"],
        "c1_random_auc_hi": rnd["auc_hi"], "c1_random_auc_p": rnd["p"],
        "c1_blocked_auc": rows[blocked]["auc"],
        "c1_blocked_auc_within": rows[f"{blocked} (time within block)"]["auc"],
        "c1_direction": "later" if main["auc"] > 0.5 else "earlier",
        "c1_random_covers": ("covers" if rnd["auc_lo"] <= 0.5 <= rnd["auc_hi"]
                             else "excludes"),
    }


def decile_shares(tables, *, n_bootstrap: int, seed: int) -> pd.DataFrame:
    """Class shares per decile of decode order (``order.bin_shares``), confidence
    order and random remasking in one long table (column ``decoder``)."""
    return pd.concat(
        order.bin_shares(tables[k], n_boot=n_bootstrap, seed=seed).assign(decoder=k)
        for k in [PRIMARY, RANDOM])


def content_by_decile(deciles: pd.DataFrame) -> pd.DataFrame:
    """The content share per decile (columns D1 ... D10), one row per decoder."""
    out = deciles[deciles.cls == CONTENT].pivot(index="decoder", columns="bin",
                                                values="share")
    out.columns = [f"D{b + 1}" for b in out.columns]
    return out


def regressions(tables) -> pd.DataFrame:
    """``order.order_regression`` under each specification, confidence and random
    order; index (decoder, specification, term)."""
    reg = pd.concat({(k, spec): order.order_regression(tables[k], **kw)
                     for k in [PRIMARY, RANDOM] for spec, kw in REGRESSIONS.items()})
    reg.index.names = ["decoder", "specification", "term"]
    return reg


def regression_values(reg: pd.DataFrame) -> dict:
    """The glued regression values: the content coefficient with position and
    frequency held fixed, and how much of the raw gap the controls keep."""
    full = (PRIMARY, "+ position + frequency")
    main = reg.loc[(*full, "content")]
    raw = reg.loc[(PRIMARY, "content only", "content"), "coef"]
    freq = reg.loc[(*full, "log_freq"), "coef"]
    rnd = reg.loc[(RANDOM, "+ position + frequency", "content")]
    return {
        "c1_reg_coef": main["coef"], "c1_reg_se": main["se"], "c1_reg_p": main["p"],
        "c1_reg_lo": main["low"], "c1_reg_hi": main["high"], "c1_reg_freq_coef": freq,
        "c1_reg_raw_coef": raw,
        "c1_reg_pos_coef": reg.loc[(PRIMARY, "+ position", "content"), "coef"],
        "c1_random_reg_coef": rnd["coef"], "c1_random_reg_p": rnd["p"],
        "c1_reg_kept": main["coef"] / raw,
        "c1_freq_direction": "earlier" if freq < 0 else "later",
    }


def regression_table(reg: pd.DataFrame) -> pd.DataFrame:
    """The regression table as the page shows it (no constant, p to two digits)."""
    raw = reg.drop(index="const", level="term")
    shown = raw.round(4)
    shown["p"] = raw["p"].map(lambda v: f"{v:.2g}")
    return shown


def more_or_less(a: float, b: float) -> str:
    """Prose for a > b, from measured shares (nan: a kind of step never occurred)."""
    if np.isnan(a) or np.isnan(b):
        return "not comparable (one kind of step never occurred)"
    return "more" if a > b else "less"


def threshold_values(par: dict, threshold: float) -> dict:
    """The glued values of the threshold rule: every ``order.parallel_summary``
    key at the main threshold (``c1_thr_*``) and the lowest one (``c1_thrlow_*``)."""
    out = {}
    low_v = min(par)
    for prefix, v in [("c1_thr", threshold), ("c1_thrlow", low_v)]:
        out[f"{prefix}_threshold"] = v
        out.update({f"{prefix}_{key}": value for key, value in par[v].items()})
    low = par[low_v]
    out["c1_thr_note"] = (
        "never commits two tokens in one step, so the rule reduces to the "
        "confidence order" if par[threshold]["parallel_fraction"] == 0
        else "commits some tokens in parallel")
    out["c1_thrlow_content_order"] = more_or_less(low["content_single"],
                                                  low["content_parallel"])
    out["c1_thrlow_glue_order"] = more_or_less(low["glue_parallel"], low["glue_single"])
    return out


def threshold_table(par: dict) -> pd.DataFrame:
    """One row per threshold as the page shows it."""
    raw = pd.DataFrame(par).T.rename_axis("threshold")
    shown = raw[PARALLEL_COLUMNS].astype(float).round(3)
    shown["p"] = raw["p"].map(lambda v: f"{v:.2g}")
    return shown


@dataclass(frozen=True)
class Config(parameters.Sampled):
    NOTEBOOK: ClassVar[str] = "01_easy_first"

    n_samples: int = shared("n_samples", 24, "unconditional, after the [BOS] prompt")
    gen_length: int = 32
    block_length: int = shared("block_length", 8,
                               "the secondary, semi-autoregressive row's")
    thresholds: list[float] = shared("thresholds")
    n_bootstrap: int = 1000


def decoder_table(results: dict, seconds: dict) -> pd.DataFrame:
    """Each decoder's forwards per sample, tokens per step and seconds."""
    return pd.DataFrame({
        "forwards per sample": {k: r.nfe.float().mean().item()
                                for k, r in results.items()},
        "tokens per step": {k: r.mean_tokens_per_nfe for k, r in results.items()},
        "seconds": seconds,
    }).round(2)


def measure(models: Models, world: World, config: Config) -> Measurement:
    """The whole C1 measurement of notebook 01 (the parameters are the page's;
    only ``models.target`` and its tokenizer are used), in ``world`` (its prompts,
    roles and token counts).

    ``values``: every glued value, in the page's order. ``tables``: decoders
    (forwards, tokens per step, seconds), samples, summary, content_by_decile,
    regression, threshold. ``arrays``: prompt, results and tokens (the per-token
    tables, by decoder), order_rows, deciles, regression (unrounded),
    parallel (threshold -> ``order.parallel_summary``), step_sizes, and
    thresholds (threshold -> decoder name) for the figures.
    """
    target, tokenizer = models.target, models.tokenizer
    lexicon = world.roles()
    counts = world.token_counts(tokenizer, vocab_size=target.vocab_size)
    prompt = world.prompts(
        tokenizer, config.n_samples, seed=config.seed, device=config.device
    )
    thr = threshold_names(config.threshold, config.thresholds)
    in_blocks = world.order_in_blocks
    results, tokens, seconds = decode_all(
        target,
        tokenizer,
        prompt,
        decoders(
            config.gen_length,
            config.block_length,
            config.temperature,
            config.threshold,
            config.thresholds,
            in_blocks=in_blocks,
        ),
        seed=config.seed,
        lexicon=lexicon,
        counts=counts,
        device=config.device,
        block_length=world.order_blocks(config.block_length),
    )
    tables = {"decoders": decoder_table(results, seconds),
              "samples": sample_rows(results, tokens, tokenizer)}
    boot = dict(n_bootstrap=config.n_bootstrap, seed=config.seed)
    rows = order_summaries(tokens, config.block_length, **boot)
    tables["summary"] = summary_table(rows)
    values = order_values(rows, config.block_length)
    values.update(
        c1_n_samples=config.n_samples,
        c1_block_length=config.block_length,
        c1_gen_length=config.gen_length,
        c1_temperature=config.temperature,
        c1_order_unit=(
            f"in blocks of {config.block_length} tokens, its decode "
            "time counted inside each block"
            if in_blocks
            else "in one block over the whole generation"
        ),
    )
    deciles = decile_shares(tokens, **boot)
    by_decile = content_by_decile(deciles)
    tables["content_by_decile"] = by_decile.round(3)
    values["c1_content_first_decile"] = by_decile.loc[PRIMARY, "D1"]
    values["c1_content_last_decile"] = by_decile.loc[PRIMARY, "D10"]
    reg = regressions(tokens)
    values.update(regression_values(reg))
    tables["regression"] = regression_table(reg)
    par = {
        v: order.parallel_summary(
            results[name], tokens[name], n_boot=config.n_bootstrap, seed=config.seed
        )
        for v, name in thr.items()
    }
    tables["threshold"] = threshold_table(par)
    values.update(threshold_values(par, config.threshold))
    sizes = pd.concat(
        order.step_size_shares(
            tokens[name], n_boot=config.n_bootstrap, seed=config.seed
        ).assign(threshold=v)
        for v, name in thr.items()
    )
    arrays = dict(
        prompt=prompt,
        results=results,
        tokens=tokens,
        order_rows=rows,
        deciles=deciles,
        regression=reg,
        parallel=par,
        step_sizes=sizes,
        thresholds=thr,
    )
    return Measurement(values, tables, arrays)


def draw_ecdf(m: Measurement):
    """Cumulative share of each class committed by decode time r: confidence order,
    random remasking and the lowest threshold run (the page's first figure)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    thr = m.arrays["thresholds"]
    shown = [PRIMARY, RANDOM, thr[min(thr)]]
    long = pd.concat(m.arrays["tokens"][k].assign(decoder=k) for k in shown)
    long = long[long.cls.isin(CLASS_ORDER)]
    g = sns.displot(long, x="r", hue="cls", col="decoder", kind="ecdf",
                    hue_order=CLASS_ORDER, palette=palette(), height=3, aspect=1.05,
                    col_order=shown)
    g.set_axis_labels("decode time r", "share committed by r")
    g.set_titles("{col_name}")
    g.legend.set_title("")
    for t in g.legend.texts:
        t.set_text(CLASS_LABEL[t.get_text()])
    plt.close(g.figure)
    return g.figure


def draw_deciles(m: Measurement):
    """Class shares per decile of decode order with their intervals, confidence
    order (left) and random remasking (right)."""
    import matplotlib.pyplot as plt

    deciles, colors = m.arrays["deciles"], palette()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.3), sharey=True)
    for ax, name in zip(axes, [PRIMARY, RANDOM], strict=True):
        d = deciles[deciles.decoder == name]
        for c in CLASS_ORDER:
            e = d[d.cls == c]
            ax.errorbar(e.bin + 1, e.share, yerr=[e.share - e.low, e.high - e.share],
                        marker="o", ms=4, capsize=2, color=colors[c],
                        label=CLASS_LABEL[c])
        ax.set(title=name, xlabel="decile of decode order (1 = first)",
               xticks=range(1, 11))
    axes[0].set_ylabel("share of committed tokens")
    axes[1].legend(fontsize=8)
    plt.tight_layout()
    plt.close(fig)
    return fig


def draw_threshold(m: Measurement):
    """Per threshold: class shares by step size (top) and every step by its decode
    time and size (bottom)."""
    import matplotlib.pyplot as plt

    thr, sizes, colors = m.arrays["thresholds"], m.arrays["step_sizes"], palette()
    fig, axes = plt.subplots(2, len(thr), figsize=(3.2 * len(thr), 5.6), squeeze=False,
                             sharey="row")
    for j, (v, name) in enumerate(thr.items()):
        ax = axes[0, j]
        d = sizes[sizes.threshold == v]
        labels = list(d["size"].cat.categories[d["size"].cat.codes.unique()])
        x = np.arange(len(labels))
        for i, c in enumerate(CLASS_ORDER):
            e = d[d.cls == c].set_index("size").reindex(labels)
            ax.bar(x + (i - 1) * 0.27, e.share, width=0.27, color=colors[c],
                   label=CLASS_LABEL[c])
            ax.errorbar(x + (i - 1) * 0.27, e.share,
                        yerr=[e.share - e.low, e.high - e.share], fmt="none", c="k",
                        lw=0.8)
        ax.set_xticks(x, [str(s) for s in labels])
        ax.set(title=f"threshold {v:g}", xlabel="tokens committed by the step")
        steps_t = m.arrays["tokens"][name].groupby(
            order.step_keys(m.arrays["tokens"][name])).agg(
            size=("step_size", "first"), r=("r", "first"))
        axes[1, j].scatter(steps_t.r, steps_t["size"], s=8, alpha=0.35, color="0.3")
        axes[1, j].set(xlabel="decode time r of the step", xlim=(-0.05, 1.05))
        axes[1, j].yaxis.set_major_locator(plt.MaxNLocator(integer=True))
    axes[0, 0].set_ylabel("share of the step's tokens")
    axes[1, 0].set_ylabel("tokens committed by the step")
    axes[0, -1].legend(fontsize=8)
    plt.tight_layout()
    plt.close(fig)
    return fig


def palette() -> dict:
    """One colour per class (seaborn's "deep" palette)."""
    import seaborn as sns

    return dict(zip(CLASS_ORDER, sns.color_palette("deep", 3), strict=True))
