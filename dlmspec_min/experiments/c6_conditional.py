"""C6 (SPEC.md section 5): the C1-C3 key figures without and with a real prompt.

``measure`` runs the whole measurement of ``notebooks/06_conditional.md``: two
prompt sets on one seed (``[BOS]`` alone, and held-out Brown sentence
beginnings), ``ssld.conditional.key_figures`` on each, the side-by-side table
with its disjoint-interval comparison, and the sentences the page's prose
reads. It returns a ``ConditionalMeasurement`` whose ``values`` are the
page's glued claim values (verdicts excepted: the page applies the rule of
``book/claims.yml`` to them), whose ``tables`` are what the page shows and whose
``figures`` are the key figures of each prompt set, which ``draw_*`` draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from ..measures import eos_tail
from ..measures.tagger import CONTENT, FUNCTION, PUNCT
from ..ssld import codebooks, conditional, drafting, win_condition
from ..worlds import PROSE, World
from . import parameters
from .common import Measurement, Models
from .parameters import param, shared

UNC, PRO = "unconditional ([BOS])", "held-out text prompts"
# the words a world without decodes free of context (math) puts where the page
# compares the two prompt sets
NO_UNC = ("not compared: this world has no decode without context (its models "
          "answer questions)")
COLORS = {UNC: "C0", PRO: "C1"}
# the metrics of conditional.side_by_side the prose compares, with their glue names
COMPARED = {
    "c6_auc_words": "C1: AUC P(r_content > r_function)",
    "c6_alpha_words": "C2: alpha_SID (best draft)",
    "c6_tau_words": "C3: tau_acc (tokens per NFE)",
    "c6_fp_words": "C2: target's first-pass SID accuracy",
}
ACCEPTANCE_FORMAT = {"alpha": "{:.4f}", "low": "{:.4f}", "high": "{:.4f}",
                     "lowest codebook": "{:.4f}", "highest codebook": "{:.4f}",
                     "c": "{:.3f}", "chance sum P(s)^2": "{:.4f}",
                     "majority-ID rate": "{:.4f}"}


@dataclass
class ConditionalMeasurement(Measurement):
    """A ``Measurement`` plus the key figures of each prompt set (``UNC``, ``PRO``)."""

    figures: dict[str, conditional.KeyFigures] = field(default_factory=dict)

    def unconditional_as_claim(self) -> dict[str, float] | None:
        """The unconditional figures under the claim's names (``c6_``), so the C6
        rule can be applied to them as to the prompted ones; None in a world
        without decodes free of context."""
        if UNC not in self.figures:
            return None
        return conditional.claim_values(self.figures[UNC], "c6_")


# --- the two prompt sets ----------------------------------------------------------


def prompt_sets(tokenizer, n_samples: int, prompt_length: int, prompt_seed: int,
                device: str = "cpu", world: World = PROSE) -> dict:
    """``world``'s prompts without and with context, ``n_samples`` each (prose:
    ``[BOS]`` alone and held-out Brown sentence beginnings; SPEC.md section 5, C6:
    prompts that are real text prefixes [DERIVED]). A world without decodes free
    of context (``World.context_free`` False: math, whose every decode answers a
    question) gives the prompted set alone: its held-out questions."""
    if not world.context_free:
        return {PRO: world.prompts(tokenizer, n_samples, seed=prompt_seed,
                                   device=device)}
    without, with_context = world.prompt_pair(tokenizer, n_samples, prompt_length,
                                              seed=prompt_seed, device=device)
    return {UNC: without, PRO: with_context}


def infill_accelerator(target) -> str:
    """SSLD's infill rule: the dual-cache threshold rule, or the plain one for a
    model without a KV cache (the hub's LLaDA / Dream code)."""
    return "Fast-dLLM threshold" + (" + dual cache" if target.supports_cache else "")


# --- the side-by-side comparison --------------------------------------------------


def interval_text(r) -> str:
    """One cell of the side-by-side table: value [low, high], a bound says so."""
    ci = "" if np.isnan(r.low) else f" [{r.low:.4g}, {r.high:.4g}]"
    return ("at least " if r.bound else "") + f"{r.value:.4g}" + ci


def shown_table(long: pd.DataFrame, diff: pd.DataFrame) -> pd.DataFrame:
    """The side-by-side table the page shows: one row per metric, one column per
    prompt set, and whether their 95 % intervals overlap."""
    conds = [c for c in (UNC, PRO) if c in set(long["condition"])]
    shown = long.assign(text=long.apply(interval_text, axis=1)).pivot(
        index="metric", columns="condition", values="text")[conds]
    if diff is not None:  # None: one prompt set, nothing to compare
        shown["95 % intervals overlap"] = diff["overlap"].map(
            {True: "yes", False: "no", None: "—"})
    return shown.loc[long.metric.unique()]


def comparison_words(diff: pd.DataFrame, metric: str) -> str:
    """How ``metric`` with prompts compares with it without (disjoint intervals)."""
    o = diff.loc[metric, "overlap"]
    if o is None or o:
        return ("not distinguishable from the unconditional figure (overlapping 95 % "
                "intervals)")
    return ("higher" if diff.loc[metric, "difference"] > 0 else "lower") + \
        " than without a prompt (disjoint 95 % intervals)"


def bar_position(f: conditional.KeyFigures) -> str:
    """Where alpha_SID's upper 95 % end lies relative to the rule's two bars."""
    if f.alpha_hi < 0.1 * f.alpha_star:
        return "below alpha*/10"
    return "below alpha* but not below alpha*/10" if f.alpha_hi < f.alpha_star \
        else "at or above alpha*"


def reading(figs: dict) -> str:
    """The page's reading of where the draft stands against the bar alpha*."""
    reached = [k for k, f in figs.items() if f.alpha_hi >= f.alpha_star]
    both = len(figs) > 1
    if not reached:
        return (("In both prompt sets" if both else "With prompts") + " the draft "
                "stays below the bar alpha*: the prompt gives the draft context, but "
                "not enough to guess the content anchors' IDs.")
    slower = all(f.e2e["low"] > 1 for f in figs.values())
    few_accepted = all(f.e2e["accepted_share"] < 0.1 for f in figs.values())
    near_one = all(f.tau_hi < 1.5 for f in figs.values())
    near_majority = all(f.alpha <= 1.5 * f.chance_majority for f in figs.values())
    text = "Where the draft's interval reaches alpha*, "
    if near_one:
        text += (
            "the bar is low rather than the acceptance high: at temperature 1 the "
            "strongest accelerator here commits barely more than one token per "
            "forward, so alpha* = 1 - 1/tau_acc is small, and "
            + ("a draft that does little better than always guessing the most frequent "
               "content ID comes near it. " if near_majority
               else "the trained draft comes near it. "))
    text += "Model A's asymptotic condition is then within reach on paper"
    if slower:
        text += (", yet SSLD end to end still spends more forwards than the "
                 "accelerator it infills with" + (", in both prompt sets" if both
                                                   else "") + ": its verify pass "
                 "compares each drafted ID with the target's all-masked first pass"
                 + (", and accepts almost none of them." if few_accepted else "."))
    else:
        text += "; end to end, see the ratios in the table above."
    return text


def summary_line(f: conditional.KeyFigures) -> str:
    """One prompt set's figures in a line of the verdict table."""
    sf = ("at least " if f.shortfall.lower_bound else "") + f"{f.shortfall.value:.1f}x"
    return (f"AUC {f.order['auc']:.3f} (p = {f.order['p']:.2g}); alpha_SID "
            f"{f.alpha:.4f} [{f.alpha_lo:.4f}, {f.alpha_hi:.4f}]; alpha* "
            f"{f.alpha_star:.3f}; shortfall {sf}")


# --- the tables ---------------------------------------------------------------------


def _texts(tokenizer, rows) -> list[str]:
    return [tokenizer.decode(r.tolist(), skip_special_tokens=True) for r in rows]


def continuations(f: conditional.KeyFigures, tokenizer, n: int = 3) -> pd.DataFrame:
    """The first ``n`` texts of the threshold decode the anchors come from, the
    prompt in brackets."""
    ref = f.runs[next(iter(f.runs))]
    P = f.prompt_length
    return pd.DataFrame({"text": [f"[{p}] {g}" for p, g in zip(
        _texts(tokenizer, ref.tokens[:n, :P]), _texts(tokenizer, ref.tokens[:n, P:]),
        strict=True)]})


def acceptance_table(figs: dict) -> pd.DataFrame:
    """Pooled acceptance of every draft per prompt set, with the chance levels."""
    acc = pd.concat({k: f.acceptance for k, f in figs.items()}, names=["condition"])
    conds = acc.index.get_level_values(0)
    acc["chance sum P(s)^2"] = [figs[k].chance for k in conds]
    acc["majority-ID rate"] = [figs[k].chance_majority for k in conds]
    return acc[["alpha", "low", "high", "lowest", "highest", "c", "chance sum P(s)^2",
                "majority-ID rate"]].rename(columns={"lowest": "lowest codebook",
                                                     "highest": "highest codebook"})


def per_codebook_table(figs: dict) -> pd.DataFrame:
    """Each codebook alone (its best draft), for both prompt sets."""
    return pd.concat({k: codebooks.per_codebook(
        f.codebooks, f.runs[next(iter(f.runs))].generated, f.anchors)
        for k, f in figs.items()}, names=["condition"]).round(4)


def order_tables(figs: dict) -> pd.DataFrame:
    """C1's token tables of both prompt sets (content, function, punctuation)."""
    both = pd.concat(f.order_table.assign(condition=k) for k, f in figs.items())
    return both[both.cls.isin([CONTENT, FUNCTION, PUNCT])]


# --- the measurement ----------------------------------------------------------------


def figure_values(figs: dict, diff: pd.DataFrame, n_samples: int, gen_length: int,
                  temperature: float) -> dict:
    """Every claim value the page records, under its glue name, in the page's order
    (the verdicts, which need the registry's rule, excepted)."""
    f_unc, f_pro = figs.get(UNC), figs[PRO]
    head = drafting.HeadDraft.name
    v = conditional.claim_values(f_pro, "c6_")
    if f_unc is not None:  # a world with decodes free of context (prose)
        v |= conditional.claim_values(f_unc, "c6_uncond_")
    v |= {"c6_n_samples": n_samples, "c6_gen_length": gen_length,
          "c6_temperature": temperature, "c6_n_codebooks": len(f_pro.codebooks),
          "c6_best_is_head": int(f_pro.best_draft == head),
          "c6_strongest": f_pro.strongest, "c6_best": f_pro.best_draft}
    if f_unc is not None:
        v |= {"c6_uncond_best_is_head": int(f_unc.best_draft == head),
              "c6_uncond_strongest": f_unc.strongest,
              "c6_uncond_best": f_unc.best_draft}
    v |= {name: NO_UNC if diff is None else comparison_words(diff, metric)
          for name, metric in COMPARED.items()}
    v["c6_bound_words"] = "at least " if f_pro.shortfall.lower_bound else ""
    pos = {k: bar_position(f) for k, f in figs.items()}
    if f_unc is not None:
        v["c6_uncond_bound_words"] = "at least " if f_unc.shortfall.lower_bound else ""
        v["c6_n_differ"] = int((diff["overlap"] == False).sum())  # noqa: E712
        v["c6_n_compared"] = int(diff["overlap"].notna().sum())
        v["c6_bar_words"] = (
            f"lies {pos[PRO]} in both prompt sets" if pos[PRO] == pos[UNC]
            else f"lies {pos[PRO]} with prompts and {pos[UNC]} without")
    else:
        v["c6_bar_words"] = f"lies {pos[PRO]} with prompts"
    v["c6_reading"] = reading(figs)
    v["c6_bar_note"] = win_condition.bar_note(f_pro.alpha_lo, f_pro.alpha_hi,
                                              f_pro.tau_lo, f_pro.tau_hi)
    return v


@dataclass(frozen=True)
class Config(parameters.Coded, parameters.Sequential):
    NOTEBOOK: ClassVar[str] = "06_conditional"

    world: str = shared("world", note="in math, the prompted side only")
    n_samples: int = shared("n_samples", 16,
                            "per prompt set (prompted: one held-out prompt each)")
    prompt_length: int = shared("prompt_length")
    n_train: int = 512
    prompt_seed: int = param(0, "seed of the held-out prompt set (fixed across builds)")


def measure(
    models: Models, world: World, config: Config, *, head_kw: dict | None = None
) -> ConditionalMeasurement:
    """C1-C3's key figures without context and with it (``prompt_sets``), side by
    side.

    Both prompt sets run ``conditional.key_figures`` with the same seed (the same
    per-row random streams), the same codebooks (``codebooks.codebook_seeds(seed,
    n_codebooks)``) and SSLD end to end with ``infill_accelerator``. ``world``
    gives the prompts, roles, token counts and the head's training text;
    ``head_kw`` goes to the SID head's training.
    """
    target, draft, tok = models.target, models.draft, models.tokenizer
    counts = world.token_counts(tok, vocab_size=target.vocab_size)
    book_seeds = codebooks.codebook_seeds(config.seed, config.n_codebooks)
    prompts = prompt_sets(
        tok,
        config.n_samples,
        config.prompt_length,
        config.prompt_seed,
        config.device,
        world,
    )
    figs = {
        name: conditional.key_figures(
            target,
            draft,
            tok,
            prompt,
            world=world,
            settings=config,
            codebook_seeds=book_seeds,
            counts=counts,
            e2e_infill=infill_accelerator(target),
            head_kw=head_kw,
        )
        for name, prompt in prompts.items()
    }
    long = conditional.side_by_side(figs)
    diff = conditional.differences(long, UNC, PRO) if UNC in figs else None
    tables = {
        "prompts": pd.DataFrame({"prompt": _texts(tok, prompts[PRO][:4])}),
        "seconds": pd.DataFrame({k: f.seconds for k, f in figs.items()})
        .round(1)
        .rename_axis("seconds"),
        "continuations": continuations(figs[PRO], tok),
        "side_by_side": shown_table(long, diff),
        "long": long,
        "differences": diff,
        "acceptance": acceptance_table(figs),
        "per_codebook": per_codebook_table(figs),
        "accelerators": pd.concat(
            {k: f.accelerators for k, f in figs.items()}, names=["condition"]
        ).round(3),
    }
    values = figure_values(
        figs, diff, config.n_samples, config.gen_length, config.temperature
    )
    for prefix, cond in (("c6_", PRO), ("c6_uncond_", UNC)):  # beside the bars
        if cond not in figs:
            continue
        f = figs[cond]
        values |= {
            f"{prefix}{k}": x
            for k, x in eos_tail.bar_split(
                f.runs[f.strongest], tok.eos_token_id, config.n_bootstrap, config.seed
            ).items()
        }
    return ConditionalMeasurement(
        values=values,
        tables=tables,
        arrays={"prompts": prompts, "codebook_seeds": book_seeds},
        figures=figs,
    )


# --- the figures --------------------------------------------------------------------

PANELS = [("C1: AUC P(r_content > r_function)", "linear", 0.5, "AUC"),
          ("C2: alpha_SID (best draft)", "log", None, "probability (log scale)"),
          ("C2: target's first-pass SID accuracy", "log", None,
           "probability (log scale)"),
          ("C3: tau_acc (tokens per NFE)", "linear", 1.0, "tokens per NFE"),
          ("C3: SSLD NFE / accelerator NFE", "linear", 1.0, "NFE ratio")]


def draw_side_by_side(m: ConditionalMeasurement):
    """The key figures of both prompt sets with their 95 % intervals, one panel a
    metric (zero hits drawn at half a hit on the log scales)."""
    import matplotlib.pyplot as plt

    figs, long = m.figures, m.tables["long"]
    conds = [c for c in (UNC, PRO) if c in figs]
    floor = 0.5 / max(min(f.n_anchors for f in figs.values()), 1)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 3.4))
    for ax, (metric, scale, ref_line, ylabel) in zip(axes, PANELS, strict=True):
        d = long[long.metric == metric].set_index("condition").loc[conds]
        for i, (cname, r) in enumerate(d.iterrows()):
            v, lo, hi = ((max(x, floor) for x in (r.value, r.low, r.high))
                         if scale == "log" else (r.value, r.low, r.high))
            ax.errorbar([i], [v], yerr=[[v - lo], [hi - v]], fmt="o", ms=7, capsize=5,
                        color=COLORS[cname])
        if ref_line is not None:
            ax.axhline(ref_line, color="k", lw=0.8, ls="--")
        if metric.startswith("C2: alpha"):
            for i, f in enumerate(figs[c] for c in conds):
                ax.hlines([0.1 * f.alpha_star, f.alpha_star], i - 0.3, i + 0.3,
                          color="C2", ls=[":", "-"])
        ax.set_yscale(scale)
        ax.set_xticks(range(len(conds)),
                      [{UNC: "[BOS]", PRO: "prompted"}[c] for c in conds])
        ax.set_xlim(-0.6, len(conds) - 0.4)
        ax.set_title(metric.split(": ", 1)[1], fontsize=10)
        ax.set_ylabel(ylabel)
    plt.tight_layout()
    return fig


def draw_ecdf(m: ConditionalMeasurement):
    """Cumulative share of each word class committed by decode time r, one panel
    per prompt set."""
    import seaborn as sns

    classes = [CONTENT, FUNCTION, PUNCT]
    label = {CONTENT: "content", FUNCTION: "function", PUNCT: "glue (punctuation)"}
    g = sns.displot(order_tables(m.figures), x="r", hue="cls", col="condition",
                    kind="ecdf", hue_order=classes, height=3, aspect=1.2,
                    col_order=[c for c in (UNC, PRO) if c in m.figures])
    g.set_axis_labels("decode time r", "share committed by r")
    g.set_titles("{col_name}")
    g.legend.set_title("")
    for t in g.legend.texts:
        t.set_text(label[t.get_text()])
    return g.figure


def verdict_table(m: ConditionalMeasurement, paper: str, verdict: str,
                  verdict_piece: str, title: str) -> pd.DataFrame:
    """The paper's statement beside this build's figures and the page's verdicts."""
    f_pro = m.figures[PRO]
    return pd.DataFrame({
        "the paper": [paper + ": the failure persists with prompts", "—", "—", "—"],
        "this build": [summary_line(f_pro), summary_line(m.figures[UNC])
                       if UNC in m.figures else NO_UNC, verdict,
                       f"{verdict_piece} (alpha_SID {f_pro.alpha_piece:.4f} "
                       f"[{f_pro.alpha_piece_lo:.4f}, {f_pro.alpha_piece_hi:.4f}])"],
    }, index=["with prompts (word anchors)", "without (same seed, same rule)",
              "verdict", "verdict, piece-level anchors (secondary)"]).rename_axis(title)
