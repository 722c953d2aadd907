"""C7: a stronger model, where content is more determined (notebook 07).

Two measurements on the page's three targets (``small``, ``base``, ``large``):

1. **Determinedness** (SPEC.md section 5, C7; ``measures.determinedness``): on
   the same held-out Brown windows, each measured position masked alone, the
   top-1 probability D (and top-1 accuracy, entropy, P(token in the text)) at
   content and function positions per model, with percentile bootstrap
   intervals over windows, and the ratios ``large / base`` (the headline) and
   ``base / small`` with paired bootstrap intervals.
2. **SSLD with ``large`` as the target** (SPEC.md section 3 and 3.1): the
   strongest token-space accelerator's ``tau_acc`` gives the bar
   ``alpha* = 1 - 1/tau_acc``; the drafts' acceptance ``alpha_SID`` on the
   large target's content anchors, pooled over ``n_codebooks`` codebooks, on
   word-level anchors (the headline) and piece-level anchors (secondary).

``measure`` runs both and returns every value the page records, keyed by its
glue name; the verdict stays with the page.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from ..decoding.denoisers import load_denoiser
from ..measures import determinedness, eos_tail, reuse, stats, tagger
from ..measures.order import row_generators
from ..ssld import (
    accelerators,
    chance_levels,
    codebooks,
    drafting,
    inputs,
    win_condition,
)
from ..worlds import World
from . import parameters
from .common import Measurement
from .parameters import param, shared

ROLES = ("small", "base", "large")  # the page's order of the three targets
KEEP = (tagger.CONTENT, tagger.FUNCTION)
MEASURE_NAMES = {"top1_prob": "D (top-1 probability)", "correct": "top-1 accuracy",
                 "entropy": "entropy (nats)", "p_true": "P(token in the text)"}
SHORT = {"top1_prob": "det", "correct": "acc", "entropy": "entropy", "p_true": "ptrue"}
D_LABEL = MEASURE_NAMES["top1_prob"]
FIRST_PASS_LABEL = "large target itself, first all-masked pass"


# --- the models -----------------------------------------------------------------------


@dataclass
class StrongModels:
    """The page's models: ``names`` role -> model name, ``loaded`` name ->
    (denoiser, tokenizer), each name loaded once, and SSLD's ``draft`` name."""

    names: dict[str, str]
    loaded: dict[str, tuple[Any, Any]]
    draft: str

    def target(self, role: str):
        return self.loaded[self.names[role]][0]

    def tokenizer(self, role: str):
        return self.loaded[self.names[role]][1]


def load_roles(model: str, large_model: str, small_model: str, draft: str, *,
               trust_remote_code: bool = False, device: str = "cpu",
               dtype: str | None = "float32", device_map: str | None = "none"
               ) -> StrongModels:
    """Load the large target, the draft, the reference and the small model, in
    that order, each name once; a model saved without a tokenizer is refused."""
    loaded = {}
    for name in dict.fromkeys([large_model, draft, model, small_model]):
        den, tok = load_denoiser(name, trust_remote_code=trust_remote_code,
                                 device=device, dtype=dtype, device_map=device_map)
        if tok is None:
            raise ValueError(
                f"{name!r} has no tokenizer saved next to it; save one there")
        loaded[name] = (den, tok)
    return StrongModels({"small": small_model, "base": model, "large": large_model},
                        loaded, draft)


def parameter_counts(models: StrongModels) -> dict[str, int]:
    """Parameters of each role's model."""
    return {role: sum(p.numel() for p in models.target(role).model.parameters())
            for role in ROLES}


def models_table(models: StrongModels, n_params: dict[str, int]) -> pd.DataFrame:
    """One row per role: its model name, parameters and vocabulary."""
    return pd.DataFrame({role: {"model": models.names[role],
                                "parameters": n_params[role],
                                "vocabulary": models.target(role).vocab_size}
                         for role in ROLES}).T


# --- determinedness (SPEC.md section 5, C7) -------------------------------------------


def leave_one_out_by_role(models: StrongModels, held, ref_tok, lexicon,
                          n_positions: int, batch_size: int, seed: int,
                          device: str = "cpu"):
    """Each role's leave-one-out measures on the same words (re-encoded in its
    tokens): (loo, classes, seconds), each keyed by role."""
    loo, classes_of, seconds = {}, {}, {}
    for role in ROLES:
        den, tok = models.loaded[models.names[role]]
        w = determinedness.reencode(held, ref_tok, tok).to(device)  # (n_windows, L)
        cls = np.array([tagger.classes_of_tokens(tok, row.tolist(), lexicon)
                        for row in w.cpu()])
        positions = determinedness.select_positions(cls, KEEP, n_positions or None,
                                                    seed)
        t0 = time.perf_counter()
        loo[role] = determinedness.leave_one_out(den, w, positions, batch_size)
        seconds[role] = time.perf_counter() - t0
        classes_of[role] = cls
    return loo, classes_of, seconds


def determinedness_summary(loo, classes_of, n_bootstrap: int, seed: int):
    """Each measure per role and word class with its bootstrap interval over
    windows: (the long table, per-window (sums, counts) keyed by
    (role, class, measure))."""
    rows, per_window = [], {}
    for role in ROLES:
        for cls in KEEP:
            where = torch.as_tensor(classes_of[role] == cls)
            for m, label in MEASURE_NAMES.items():
                s, n = loo[role].per_row(m, where)
                per_window[role, cls, m] = (s, n)
                est, lo, hi = stats.ratio_bootstrap(s, n, n_bootstrap, seed)
                rows.append(dict(model=role, word_class=cls, measure=label, value=est,
                                 low=lo, high=hi, positions=int(n.sum())))
    return pd.DataFrame(rows), per_window


def summary_values(summary: pd.DataFrame) -> dict[str, Any]:
    """The summary's glue values: c7_{det,acc,entropy,ptrue}[_fn]_{role} and _lo/_hi."""
    values = {}
    for r in summary.itertuples():
        m = next(k for k, v in MEASURE_NAMES.items() if v == r.measure)
        fn = "fn_" if r.word_class == tagger.FUNCTION else ""
        key = f"c7_{SHORT[m]}_{fn}{r.model}"
        values[key], values[key + "_lo"], values[key + "_hi"] = r.value, r.low, r.high
    return values


def position_values(loo, classes_of) -> pd.DataFrame:
    """Every measured position's top-1 probability, by model and word class."""
    def at(role, cls):
        where = torch.as_tensor(classes_of[role] == cls) & loo[role].measured.cpu()
        return loo[role].top1_prob.cpu()[where].numpy()

    return pd.concat([pd.DataFrame({"model": role, "word class": cls,
                                    "top-1 probability": at(role, cls)})
                      for role in ROLES for cls in KEEP])


def determinedness_ratios(per_window, n_bootstrap: int, seed: int) -> pd.DataFrame:
    """large / base and base / small of D, accuracy and P(token in the text),
    paired bootstrap over the same windows; nan where the denominator's sum is 0."""
    rows = []
    for num, den in [("large", "base"), ("base", "small")]:
        for cls in KEEP:
            for m in ("top1_prob", "correct", "p_true"):
                if per_window[den, cls, m][0].sum() > 0:
                    est, lo, hi = stats.paired_ratio_bootstrap(*per_window[num, cls, m],
                                                               *per_window[den, cls, m],
                                                               n_bootstrap, seed)
                else:  # e.g. no correct top-1 at all under the denominator's model
                    est = lo = hi = float("nan")
                rows.append(dict(ratio=f"{num} / {den}", word_class=cls,
                                 measure=MEASURE_NAMES[m], value=est, low=lo, high=hi))
    return pd.DataFrame(rows)


def ratio_of(ratios: pd.DataFrame, r: str, cls: str = tagger.CONTENT,
             measure: str = D_LABEL) -> pd.Series:
    """One row of ``determinedness_ratios``."""
    return ratios[(ratios.ratio == r) & (ratios.word_class == cls)
                  & (ratios.measure == measure)].iloc[0]


def ratio_values(ratios: pd.DataFrame) -> dict[str, Any]:
    """The ratios' glue values, in the page's order."""
    values = {}
    for key, r, cls, measure in [
            ("c7_det_ratio", "large / base", tagger.CONTENT, D_LABEL),
            ("c7_det_ratio_base_small", "base / small", tagger.CONTENT, D_LABEL),
            ("c7_det_ratio_fn", "large / base", tagger.FUNCTION, D_LABEL),
            ("c7_acc_ratio", "large / base", tagger.CONTENT, "top-1 accuracy"),
            ("c7_ptrue_ratio", "large / base", tagger.CONTENT, "P(token in the text)")]:
        x = ratio_of(ratios, r, cls, measure)  # nan when nothing was correct under base
        values[key] = x["value"]
        values[key + "_lo"], values[key + "_hi"] = x["low"], x["high"]
    return values


def function_words_above(summary: pd.DataFrame) -> bool:
    """Whether function positions have a higher D than content ones under every
    model."""
    d_tab = summary[summary.measure == D_LABEL].pivot(
        index="model", columns="word_class", values="value")
    return bool((d_tab[tagger.FUNCTION] > d_tab[tagger.CONTENT]).all())


# --- SSLD with the large target (SPEC.md sections 3 and 3.1) --------------------------


def accelerator_bar(large, prompt, accs, n_tau: int, n_bootstrap: int, seed: int,
                    gens, eos_id: int | None = None) -> dict[str, Any]:
    """The anchors' reference decode and every accelerator on the first ``n_tau``
    samples: the reference decode, the accelerator table (its regime split at
    ``eos_id``), the strongest accelerator, its tau_acc, alpha* = 1 - 1/tau_acc
    and the accelerators' ``runs``."""
    ref = reuse.generate(large, prompt, accs[next(iter(accs))], gens())
    runs = {name: reuse.generate(large, prompt[:n_tau], cfg, gens()[:n_tau])
            for name, cfg in accs.items()}
    table = accelerators.accelerator_table(runs, n_bootstrap, seed, eos_id)
    strongest = accelerators.strongest_accelerator(table)  # ties: fewer token-forwards
    tau_acc = table.loc[strongest, "tokens_per_nfe"]
    return dict(ref=ref, table=table, strongest=strongest, tau_acc=tau_acc,
                a_star=win_condition.alpha_star(tau_acc), runs=runs)


def draft_labels() -> dict[str, str]:
    """Row labels of the acceptance table (the draft may be any model sharing the
    target's vocabulary, hence no model names)."""
    return dict(zip(drafting.DRAFT_NAMES, ["draft, cluster marginal",
                                           "draft + trained SID head"], strict=True)
                ) | {codebooks.FIRST_PASS: FIRST_PASS_LABEL}


def acceptance_tables(books, large, tokens, anchors, anchors_piece, seq_len: int,
                      n_bootstrap: int, seed: int):
    """Pooled acceptance of every prediction on word-level anchors (with each
    draft's cost in target forwards) and on piece-level anchors, and the best
    draft's label: (table, table_piece, best)."""
    first = books[next(iter(books))]
    labels = draft_labels()
    table = codebooks.pooled_acceptance(books, tokens, anchors, n_bootstrap, seed)
    table["c (draft cost, target forwards)"] = [
        drafting.relative_cost(first.outputs[n], large, seq_len) if n in first.outputs
        else 1.0 for n in table.index]
    best = labels[codebooks.best_pooled_draft(table)]
    table = table.rename(index=labels)
    table_piece = codebooks.pooled_acceptance(books, tokens, anchors_piece, n_bootstrap,
                                              seed).rename(index=labels)
    return table, table_piece, best


# --- words for the prose --------------------------------------------------------------


def fn_words(fn_above: bool) -> str:
    return ("function words are more determined than content words under every "
            "model" if fn_above else "function words are not more determined than "
            "content words under every model")


def majority_words(alpha_lo: float, alpha_hi: float, majority: float) -> str:
    return ("The majority-ID rate lies inside the best draft's interval: it has "
            "learned which ID is most frequent, not the content of this sample."
            if alpha_lo <= majority <= alpha_hi
            else "The best draft's interval excludes the majority-ID rate.")


def ratio_words(det_ratio: float, det_ratio_lo: float, paper_ratio: float) -> str:
    return ("not above 1: on these models size does not measurably make content more "
            "determined, unlike the paper's 8B model" if det_ratio_lo <= 1 else
            "above 1: the larger model determines content more, by less than the "
            "paper's factor" if det_ratio < paper_ratio else
            "above 1, and at least the paper's factor")


def alpha_words(alpha_hi: float, a_star: float) -> str:
    return ("far below alpha* (under a tenth of it)" if alpha_hi < 0.1 * a_star else
            "below alpha*, but not by the factor of ten the rule asks for"
            if alpha_hi < a_star else "not below alpha*")


# --- the whole measurement ------------------------------------------------------------


def check_sizes(n_tau: int, n_samples: int) -> None:
    if n_tau > n_samples:
        raise ValueError(f"n_tau = {n_tau} must not exceed n_samples = {n_samples}")


@dataclass(frozen=True)
class Config(parameters.Coded, parameters.Sequential):
    NOTEBOOK: ClassVar[str] = "07_strong_model"

    large_model: str = shared("large_model")
    small_model: str = shared("small_model")
    n_samples: int = shared("n_samples", 32,
                            "unconditional, of the large target (its content anchors)")
    n_windows: int = param(64, "held-out Brown windows measured (of 256)")
    n_positions: int = param(16,
        "content/function positions measured per window (0: all)")
    batch_size: int = param(64, "row copies (one masked position each) per forward")
    n_tau: int = param(6,
        "the first n_tau samples are decoded by every accelerator (tau_acc)")


def measure_determinedness(models: StrongModels, world: World, config: Config,
                           n_params: dict, paper_ratio: float
                           ) -> tuple[dict, dict, dict]:
    """The page's first step: each role's determinedness on ``world``'s held-out
    text (leave-one-out, by word class), its summary and the large-to-base
    ratios; returns (values, tables, arrays)."""
    values, tables, arrays = {}, {}, {}
    lexicon = world.roles()
    ref_tok, held = world.held_out_rows(config.n_windows, config.seed)
    loo, classes_of, seconds = leave_one_out_by_role(
        models,
        held,
        ref_tok,
        lexicon,
        config.n_positions,
        config.batch_size,
        config.seed,
        config.device,
    )
    base_positions = loo["base"].measured.cpu()
    same_positions = all(
        torch.equal(loo[r].measured.cpu(), base_positions) for r in ROLES
    )
    values |= {
        "c7_n_windows": config.n_windows,
        "c7_positions_measured": int(loo["large"].measured.sum()),
        "c7_same_positions": int(same_positions),
    }
    summary, per_window = determinedness_summary(
        loo, classes_of, config.n_bootstrap, config.seed
    )
    values |= summary_values(summary)
    ratios = determinedness_ratios(per_window, config.n_bootstrap, config.seed)
    values |= ratio_values(ratios)
    values["c7_size_ratio"] = n_params["large"] / n_params["base"]
    values["c7_fn_words"] = fn_words(function_words_above(summary))
    values["c7_det_ratio_to_paper"] = values["c7_det_ratio"] / paper_ratio
    for role in ("base", "large"):
        values[f"c7_acc_hits_{role}"] = int(
            per_window[role, tagger.CONTENT, "correct"][0].sum()
        )
    tables |= {"summary": summary, "ratios": ratios}
    arrays |= {
        "loo": loo,
        "classes": classes_of,
        "seconds": seconds,
        "held": held,
        "positions": position_values(loo, classes_of),
    }
    return values, tables, arrays


def ssld_on_large(large, draft_den, tok_l, world: World, scored: codebooks.Scored,
                  anchors_piece, a_star: float, config: Config) -> dict:
    """The page's SSLD step: the codebooks on the large target's decode
    (``scored``), the best draft's alpha_SID on word and piece anchors against
    the bar ``a_star``, the shortfall and the chance levels. Returns values,
    table, books, best, alpha_lo and alpha_hi."""
    prompt, tokens, anchors = scored.prompt, scored.tokens, scored.anchors
    book_seeds = codebooks.codebook_seeds(config.seed, config.n_codebooks)
    values = {}
    t0 = time.perf_counter()
    seq_len = prompt.shape[1] + config.gen_length
    books = codebooks.codebooks(large, draft_den, tok_l, world, scored, config,
                                book_seeds, seq_len=max(world.row_length, seq_len))
    table, table_piece, best = acceptance_tables(
        books,
        large,
        tokens,
        anchors,
        anchors_piece,
        seq_len,
        config.n_bootstrap,
        config.seed,
    )
    alpha, alpha_lo, alpha_hi = table.loc[best, ["alpha", "low", "high"]]
    short = win_condition.shortfall(a_star, alpha, alpha_hi)
    chances = chance_levels.mean_chance_levels(books, tokens, anchors)
    fp = table.loc[FIRST_PASS_LABEL]
    majority = chances[chance_levels.CHANCE_MAJORITY]
    values |= {
        "c7_n_codebooks": len(books),
        "c7_alpha_sid_large": alpha,
        "c7_alpha_lo_large": alpha_lo,
        "c7_alpha_hi_large": alpha_hi,
        "c7_alpha_spread_large": table.loc[best, codebooks.SPREAD],
        "c7_alpha_questions_share_large": table.loc[best, codebooks.QUESTIONS_SHARE],
        "c7_shortfall_large": short.value,
        "c7_shortfall_is_bound": int(short.lower_bound),
        "c7_target_first_pass_large": fp["alpha"],
        "c7_target_first_pass_large_hi": fp["high"],
        "c7_chance_large": chances[chance_levels.CHANCE_FREQUENCY],
        "c7_chance_majority_large": majority,
        "c7_n_anchors_large": int(anchors.sum()),
    }
    # the secondary figure: the same drafts on piece-level anchors (large's tokens)
    alpha_p, alpha_p_lo, alpha_p_hi = table_piece.loc[best, ["alpha", "low", "high"]]
    values |= {
        "c7_alpha_sid_piece_large": alpha_p,
        "c7_alpha_piece_lo_large": alpha_p_lo,
        "c7_alpha_piece_hi_large": alpha_p_hi,
        "c7_continuation_share_of_anchors": float(
            (anchors_piece & ~anchors).sum() / anchors_piece.sum()
        ),
    }
    table["alpha, piece-level anchors"] = table_piece["alpha"]
    values |= {
        "c7_draft_seconds": time.perf_counter() - t0,
        "c7_best": best,
        "c7_shortfall_words": "at least " if short.lower_bound else "",
        "c7_majority_words": majority_words(alpha_lo, alpha_hi, majority),
    }
    return dict(values=values, table=table, books=books, best=best,
                alpha_lo=alpha_lo, alpha_hi=alpha_hi)


def measure(
    models: StrongModels,
    world: World,
    config: Config,
    *,
    paper_ratio: float,
    tau_paper: float,
) -> Measurement:
    """Determinedness of the three targets and SSLD on the large one (module doc),
    in ``world`` (its held-out text, prompts, roles and the head's training text).

    ``paper_ratio`` (the paper's "twice as determined") and ``tau_paper`` (its
    accelerator's tokens per forward) come from the registry, as context only.
    ``values``: every glue value of the page but the verdicts and the page's
    runtime, in the page's order. ``tables``: models, summary (long), ratios,
    accelerators, acceptance (word anchors, piece-level alpha beside).
    ``arrays``: loo, classes (by role), seconds (leave-one-out, by role),
    positions (the top-1 probability of every measured position), held (the
    windows), n_clusters, strongest, tau_acc, a_star, best.
    """
    check_sizes(config.n_tau, config.n_samples)
    values, tables, arrays = {}, {}, {}
    n_params = parameter_counts(models)
    for role, n in n_params.items():
        values[f"c7_params_{role}"] = f"{n / 1e6:.1f}M"
    tables["models"] = models_table(models, n_params)

    # the determinedness does not depend on the questions: a sequential run's
    # looks measure it once (measures.reuse)
    det_values, det_tables, arrays = (dict(d) for d in reuse.fitted(
        ("c7_determinedness", reuse.ident(models), reuse.ident(world),
         repr(config.replace(n_samples=1, n_tau=1))),
        lambda: measure_determinedness(models, world, config, n_params, paper_ratio)))
    values |= det_values
    tables |= det_tables
    lexicon = world.roles()

    # SSLD with the large model as the target
    large, tok_l = models.loaded[models.names["large"]]
    draft_den = models.loaded[models.draft][0]
    book_seeds = codebooks.codebook_seeds(config.seed, config.n_codebooks)
    prompt = world.prompts(tok_l, config.n_samples, seed=config.seed,
                           device=config.device)
    P = prompt.shape[1]
    accs = accelerators.accelerators(  # LLaDA's code: no cache
        config.gen_length, config.block_length, config.threshold, config.temperature,
        supports_cache=large.supports_cache)

    def gens():
        """The same seeded stream per sample for every decoder."""
        return row_generators(config.seed, config.n_samples, config.device)

    t0 = time.perf_counter()
    bar = accelerator_bar(large, prompt, accs, config.n_tau, config.n_bootstrap,
                          config.seed, gens, tok_l.eos_token_id)
    ref = bar["ref"]
    tokens = ref.generated  # (B, G)
    anchors = inputs.anchor_mask(tok_l, ref.tokens, lexicon)[:, P:]  # content words
    anchors_piece = inputs.anchor_mask(tok_l, ref.tokens, lexicon, unit="piece")[:, P:]
    decode_seconds = time.perf_counter() - t0
    acc_table, strongest, a_star = bar["table"], bar["strongest"], bar["a_star"]
    values |= {
        "c7_tau_acc_large": bar["tau_acc"],
        "c7_tau_acc_large_lo": acc_table.loc[strongest, "low"],
        "c7_tau_acc_large_hi": acc_table.loc[strongest, "high"],
        "c7_alpha_star_large": a_star,
        "c7_decode_seconds": decode_seconds,
        "c7_strongest": strongest,
    }
    split = eos_tail.bar_split(bar["runs"][strongest], tok_l.eos_token_id,
                             config.n_bootstrap, config.seed)  # the regime by the bar
    values |= {f"c7_{k}": x for k, x in split.items()}

    ssld = ssld_on_large(large, draft_den, tok_l, world,
                         codebooks.Scored(prompt, tokens, anchors), anchors_piece,
                         a_star, config)
    values |= ssld["values"]
    table, books, best = ssld["table"], ssld["books"], ssld["best"]
    alpha_lo, alpha_hi = ssld["alpha_lo"], ssld["alpha_hi"]
    tables |= {"accelerators": acc_table, "acceptance": table}
    arrays |= {
        "n_clusters": books[book_seeds[0]].sid.n_clusters,
        "strongest": strongest,
        "tau_acc": bar["tau_acc"],
        "a_star": a_star,
        "best": best,
    }

    values |= bar_context(values, alpha_lo, alpha_hi, paper_ratio, tau_paper)
    return Measurement(values, tables, arrays)


def bar_context(values: dict, alpha_lo: float, alpha_hi: float, paper_ratio: float,
                tau_paper: float) -> dict:
    """The bar's interval and the paper's own bar, as context for the verdict,
    from the page's ``values`` so far and alpha_SID's interval."""
    tau_lo, tau_hi = values["c7_tau_acc_large_lo"], values["c7_tau_acc_large_hi"]
    a_paper, short_paper, paper_note = win_condition.paper_bar(tau_paper, alpha_hi)
    return {
        "c7_bar_note": win_condition.bar_note(alpha_lo, alpha_hi, tau_lo, tau_hi),
        "c7_paper_bar_alpha_star": a_paper,
        "c7_paper_bar_shortfall_lo": short_paper,
        "c7_paper_bar_note": paper_note,
        "c7_ratio_words": ratio_words(
            values["c7_det_ratio"], values["c7_det_ratio_lo"], paper_ratio
        ),
        "c7_alpha_words": alpha_words(alpha_hi, values["c7_alpha_star_large"]),
    }


# --- figures --------------------------------------------------------------------------


def draw_measures(summary: pd.DataFrame):
    """The three leave-one-out measures per model, content and function (95 % CIs)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, label in zip(axes, [D_LABEL, "top-1 accuracy", "entropy (nats)"],
                         strict=True):
        d = summary[summary.measure == label]
        for k, cls in enumerate(KEEP):
            e = d[d.word_class == cls]
            x = np.arange(len(e)) + (k - 0.5) * 0.2
            ax.errorbar(x, e.value, yerr=[e.value - e.low, e.high - e.value], fmt="o-",
                        capsize=3, color=f"C{k}", label=cls)
        ax.set_xticks(range(len(ROLES)), list(ROLES))
        ax.set(title=label, xlabel="model")
    axes[0].legend(fontsize=8)
    fig.suptitle("Leave-one-out measures on held-out text (95 % CIs over windows)")
    plt.tight_layout()
    return fig


def draw_ecdf(positions: pd.DataFrame):
    """Empirical CDF of the top-1 probability over measured positions."""
    import seaborn as sns

    g = sns.displot(positions, x="top-1 probability", hue="model", col="word class",
                    kind="ecdf", height=3, aspect=1.3)
    g.figure.suptitle("How determined each position is (empirical CDF)", y=1.04)
    return g.figure


def draw_ratios(ratios: pd.DataFrame, paper_ratio: float):
    """Ratios of D between models (paired 95 % CIs), with 1 and the paper's figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    d = ratios[ratios.measure == D_LABEL].reset_index(drop=True)
    labels = [f"{r.ratio}, {r.word_class}" for r in d.itertuples()]
    ax.errorbar(d.value, range(len(d)), xerr=[d.value - d.low, d.high - d.value],
                fmt="o", color="k", capsize=3,
                label="this build (95 % CI, paired over windows)")
    ax.axvline(1, color="0.3", lw=1)
    ax.axvline(paper_ratio, color="C3", ls="--",
               label=f"the paper: ~{paper_ratio}x (its 8B model; not run here)")
    ax.set_yticks(range(len(d)), labels)
    ax.set(xlabel="ratio of determinedness D", title="How much more determined?")
    ax.legend(fontsize=7, loc="lower right")
    plt.tight_layout()
    return fig


def draw_acceptance(table: pd.DataFrame, a_star: float, tau_acc: float, majority: float,
                    n_anchors: int):
    """alpha_SID of each prediction (log scale, zero hits at half a hit) against
    alpha*, the rule's bar alpha*/10 and the majority-ID rate."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 3.4))
    floor = 0.5 / max(int(n_anchors), 1)  # zero hits are drawn at half a hit
    names = list(table.index)
    shown = table["alpha"].clip(lower=floor)
    ax.errorbar(shown, range(len(names)), xerr=[shown - table["low"].clip(lower=floor),
                table["high"].clip(lower=floor) - shown], fmt="o", color="k", capsize=3)
    ax.axvline(a_star, color="C2",
               label=f"alpha* = {a_star:.3f} (tau_acc = {tau_acc:.2f})")
    ax.axvline(a_star / 10, color="C2", ls=":", label="alpha*/10 (the rule's bar)")
    ax.axvline(majority, color="C3", ls="--", label="majority-ID rate")
    ax.set_yticks(range(len(names)), names)
    ax.set(xscale="log",
           xlabel="alpha_SID on the large target (log; zero at half a hit)",
           title="Anchor acceptance with the larger model as the target (95 % CIs)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.35, -0.3), ncol=3)
    plt.tight_layout()
    return fig
