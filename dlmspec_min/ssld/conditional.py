"""C6: are the C1-C3 figures an artifact of unconditional generation?

The paper (abstract) says that SSLD's failure "is not an artifact of
unconditional generation". SPEC.md section 5 (C6): repeat C1-C3 with prompts
that are real text prefixes, the draft seeing the prompt [DERIVED]. This module
measures the key figure of each of those claims for ONE prompt set, from the
library pieces the C1-C3 notebooks use, so that a notebook can set two prompt
sets side by side on the same seed: ``order.unconditional_prompt`` ([BOS]) and
held-out Brown prefixes (``order.held_out_prompts``).

- C1 (``order``): one token per step in confidence order, one block spanning
  the generation (in a world whose ``order_in_blocks``, the page's blocks, the
  time counted inside each: ``order.block_times``); AUC P(r_content >
  r_function) with its Mann-Whitney p and a percentile bootstrap CI over
  sequences (``order.class_order``).
- tau_acc (``accelerators.accelerator_table``,
  ``accelerators.strongest_accelerator``): tokens per NFE of every decoder of
  ``accelerators.accelerators`` (threshold, + dual cache, trajectory
  speculation) on the same prompts and per-row random streams; the strongest
  has the most tokens per NFE (ties: fewer token-forwards); alpha* = 1 - 1/tau.
- C2 (``ssld``): oracle content anchors of the target's threshold decode, one
  per content word at its first piece (``inputs.anchor_mask``); the same drafts
  scored on every content piece (``unit="piece"``) give the secondary figure;
  alpha_SID of both SID-mode drafts and of the target's own first pass, each the
  mean over several codebooks (``codebooks.codebooks``,
  ``codebooks.pooled_acceptance``). Every draft and the verify pass read the
  prompt (``inputs.visible_input`` puts it in front of the masks). The trained
  head learns from Brown TRAINING windows whose first P tokens play the prompt
  (``drafting.head_training_data``), i.e. P(SID | prompt, position, content)
  with prompts shaped like the held-out ones ([BOS] and the first tokens of a
  sentence).
- C3: the shortfall alpha*/alpha (``win_condition.shortfall``: with alpha = 0
  it uses the CI's upper end and is a lower bound) and, optionally, SSLD's
  end-to-end NFE over its infill accelerator's NFE.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from ..decoding.config import DecodeResult
from ..measures import order, reuse, stats
from . import accelerators, chance_levels, codebooks, drafting, inputs, win_condition

FIRST_PASS = codebooks.FIRST_PASS
DRAFTS = drafting.DRAFT_NAMES
# the figures of one prompt set that a notebook records (claim_values)
FIGURE_KEYS = (
    "auc", "auc_lo", "auc_hi", "auc_p", "mean_r_content", "mean_r_function",
    "alpha_sid", "alpha_lo", "alpha_hi", "alpha_spread", "alpha_questions_share",
    "target_first_pass", "target_first_pass_lo",
    "target_first_pass_hi", "chance", "chance_majority", "tau_acc", "tau_acc_lo",
    "tau_acc_hi", "alpha_star", "shortfall", "shortfall_is_bound", "n_anchors",
    "prompt_length", "alpha_sid_piece", "alpha_piece_lo", "alpha_piece_hi",
    "continuation_share_of_anchors",
)
E2E_KEYS = ("e2e_ratio", "e2e_ratio_lo", "e2e_ratio_hi", "e2e_accepted_share")


# --- all key figures of one prompt set ------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """What ``key_figures`` runs at: the decode (``gen_length``, ``block_length``,
    ``threshold``, ``temperature``), the codebooks (``K``, ``levels``,
    ``n_train``) and the bootstrap (``n_bootstrap`` replicates, ``seed``, which
    also seeds every decode's row streams). C6's ``Config`` has these fields and
    serves as one."""

    K: int
    gen_length: int
    block_length: int
    threshold: float
    temperature: float
    levels: int = 1
    n_train: int = 2048
    n_bootstrap: int = 2000
    seed: int = 0


@dataclass
class KeyFigures:
    """The C1-C3 key figures of one prompt set (``key_figures``)."""

    prompt_length: int
    order: dict  # order.class_order of the confidence-order decode
    order_table: pd.DataFrame  # order.token_table of that decode
    order_result: DecodeResult
    accelerators: pd.DataFrame  # accelerators.accelerator_table
    runs: dict[str, DecodeResult]
    strongest: str
    tau_acc: float
    tau_lo: float
    tau_hi: float
    alpha_star: float
    anchors: torch.Tensor  # (B, G) bool, oracle content anchors (word level)
    acceptance: pd.DataFrame  # codebooks.pooled_acceptance + column "c" (nan: no draft)
    anchors_piece: torch.Tensor  # (B, G) bool, every content piece (secondary)
    acceptance_piece: pd.DataFrame  # pooled_acceptance of the same drafts on them
    codebooks: dict[int, codebooks.Codebook]  # the codebooks alpha_SID is pooled over
    best_draft: str
    alpha: float
    alpha_lo: float
    alpha_hi: float
    chance: float  # sum_s P(s)^2 over the anchors' IDs (mean over codebooks)
    chance_majority: float  # max_s P(s), the most frequent ID (mean over codebooks)
    shortfall: win_condition.Shortfall
    alpha_piece: float = math.nan  # the best draft's alpha_SID on piece anchors
    alpha_piece_lo: float = math.nan
    alpha_piece_hi: float = math.nan
    continuation_share: float = math.nan  # share of piece anchors continuing a word
    e2e: dict | None = None  # infill, ratio, low, high, accepted_share
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def n_anchors(self) -> int:
        return int(self.anchors.sum())


def _check_prompt(prompt, world, gen_length: int) -> None:
    """A (B, P) prompt, B >= 1, whose rows plus ``gen_length`` fit the head's
    training windows of ``world``."""
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 2 or prompt.shape[0] < 1:
        raise ValueError("prompt must be a (batch, prompt_length) tensor, batch >= 1")
    length = prompt.shape[1] + gen_length
    if world.row_length < length:
        raise ValueError(
            f"the head's training windows hold {world.row_length} tokens, fewer than "
            f"prompt_length + gen_length = {length}: shorten the prompt or the "
            "generation"
        )


def _end_to_end(res, accelerated, anchors, infill: str, n_boot: int,
                seed: int) -> dict:
    """SSLD's end-to-end run against the accelerator it infills with: the ratio of
    their forwards (a bootstrap interval) and the anchors' accepted share."""
    acc_nfe = accelerated.nfe.detach().cpu().double().numpy()
    est, lo, hi = stats.ratio_bootstrap(res.nfe.cpu().numpy(), acc_nfe, n_boot, seed)
    return dict(infill=infill, ratio=est, low=lo, high=hi,
                accepted_share=res.n_accepted.sum().item() / anchors.sum().item())


def key_figures(
    target, draft, tokenizer, prompt: torch.Tensor, *, world, settings: Settings,
    codebook_seeds, counts: np.ndarray | None = None,
    e2e_infill: str | None = None, head_kw: dict | None = None,
) -> KeyFigures:
    """Measure C1's AUC, alpha_SID, tau_acc, alpha*, the shortfall (and SSLD's NFE).

    ``prompt`` (B, P) is the prompt set; every decode uses the same per-row
    random streams (``order.row_generators(seed, B)``), so two prompt sets
    measured with one seed differ only in their prompts. alpha_SID is pooled
    over the codebooks of ``codebook_seeds`` (``codebooks.codebooks``: K k-means
    IDs and both drafts per seed, the head trained on ``n_train`` training rows
    of ``world`` whose first P tokens play the prompt; ``world``'s roles tell
    the anchors). ``e2e_infill`` names an entry of ``accelerators.accelerators``
    to run SSLD end to end with the best draft of the first codebook (None:
    skip). ``head_kw`` goes to ``drafting.train_sid_head`` (e.g. ``steps``).
    """
    _check_prompt(prompt, world, settings.gen_length)
    B, P = prompt.shape
    G, device = settings.gen_length, prompt.device
    block_length, threshold = settings.block_length, settings.threshold
    temperature, seed = settings.temperature, settings.seed
    n_boot = settings.n_bootstrap
    configs = accelerators.accelerators(G, block_length, threshold, temperature,
                                supports_cache=getattr(target, "supports_cache", False))
    if e2e_infill is not None and e2e_infill not in configs:
        raise ValueError(f"e2e_infill {e2e_infill!r} is not one of {list(configs)}")

    def gens():
        return order.row_generators(seed, B, device)

    seconds = {}
    t0 = time.perf_counter()
    blocks = world.order_blocks(block_length)  # C1's decode as its page runs it
    one_per_step = order.one_token_per_step(G, blocks, temperature=temperature)
    res1 = reuse.generate(target, prompt, one_per_step, gens())
    lexicon = world.roles()
    table1 = order.token_table(res1, tokenizer, lexicon, counts, blocks)
    c1 = order.class_order(table1, n_boot=n_boot, seed=seed)
    seconds["C1: one token per step"] = time.perf_counter() - t0

    runs = {}
    for name, cfg in configs.items():
        t0 = time.perf_counter()
        runs[name] = reuse.generate(target, prompt, cfg, gens())
        seconds[name] = time.perf_counter() - t0
    acc = accelerators.accelerator_table(runs, n_boot, seed, tokenizer.eos_token_id)
    strongest = accelerators.strongest_accelerator(acc)
    tau, tau_lo, tau_hi = (
        float(v) for v in acc.loc[strongest, ["tokens_per_nfe", "low", "high"]])
    a_star = win_condition.alpha_star(tau)

    t0 = time.perf_counter()
    ref = runs[next(iter(configs))]  # the plain threshold decode: oracle anchors
    tokens = ref.generated  # (B, G)
    anchors = inputs.anchor_mask(tokenizer, ref.tokens, lexicon)[:, P:]  # (B, G) words
    pieces = inputs.anchor_mask(tokenizer, ref.tokens, lexicon, unit="piece")[:, P:]
    if not anchors.any():
        raise ValueError("the target's decode holds no content token: no anchors to "
                         "draft; decode more or longer samples")
    books = codebooks.codebooks(
        target, draft, tokenizer, world, codebooks.Scored(prompt, tokens, anchors),
        settings, codebook_seeds, head_kw=head_kw)
    first_book = next(iter(books.values()))
    table = codebooks.pooled_acceptance(books, tokens, anchors, n_boot, seed)
    table["c"] = [drafting.relative_cost(first_book.outputs[n], target, P + G)
                  if n in first_book.outputs else math.nan for n in table.index]
    best = codebooks.best_pooled_draft(table)
    alpha, lo, hi = (float(v) for v in table.loc[best, ["alpha", "low", "high"]])
    levels = chance_levels.mean_chance_levels(books, tokens, anchors)
    chance = levels[chance_levels.CHANCE_FREQUENCY]
    majority = levels[chance_levels.CHANCE_MAJORITY]
    # the secondary figure: the same drafts and decode, every content piece an anchor
    table_piece = codebooks.pooled_acceptance(books, tokens, pieces, n_boot, seed)
    a_piece, lo_piece, hi_piece = (
        float(v) for v in table_piece.loc[best, ["alpha", "low", "high"]])
    cont_share = float((pieces & ~anchors).sum()) / float(pieces.sum())
    seconds["drafts"] = time.perf_counter() - t0

    e2e = None
    if e2e_infill is not None:
        t0 = time.perf_counter()
        res = accelerators.draft_then_ssld(target, first_book.drafters[best], prompt,
                                           anchors, first_book.sid, configs[e2e_infill],
                                           gens(), float(table.loc[best, "c"]))
        e2e = _end_to_end(res, runs[e2e_infill], anchors, e2e_infill, n_boot, seed)
        seconds["SSLD end to end"] = time.perf_counter() - t0

    return KeyFigures(
        prompt_length=P, order=c1, order_table=table1, order_result=res1,
        accelerators=acc, runs=runs, strongest=strongest, tau_acc=tau, tau_lo=tau_lo,
        tau_hi=tau_hi, alpha_star=a_star, anchors=anchors, acceptance=table,
        anchors_piece=pieces, acceptance_piece=table_piece, alpha_piece=a_piece,
        alpha_piece_lo=lo_piece, alpha_piece_hi=hi_piece, continuation_share=cont_share,
        codebooks=books, best_draft=best, alpha=alpha, alpha_lo=lo, alpha_hi=hi,
        chance=chance, chance_majority=majority,
        shortfall=win_condition.shortfall(a_star, alpha, hi), e2e=e2e, seconds=seconds,
    )


# --- reporting ------------------------------------------------------------------------


def claim_values(fig: KeyFigures, prefix: str = "c6_") -> dict[str, float]:
    """The recorded scalars of one prompt set, named ``prefix + FIGURE_KEYS``.

    With ``prefix="c6_"`` the dict holds every name the C6 rule in
    ``book/claims.yml`` reads, so ``claims.verdict("C6", ...)`` can be applied
    to any prompt set. The ``E2E_KEYS`` are present only if SSLD was run.
    """
    fp, best = fig.acceptance.loc[FIRST_PASS], fig.acceptance.loc[fig.best_draft]
    v = {
        "auc": fig.order["auc"], "auc_lo": fig.order["auc_lo"],
        "auc_hi": fig.order["auc_hi"], "auc_p": fig.order["p"],
        "mean_r_content": fig.order["mean_content"],
        "mean_r_function": fig.order["mean_function"],
        "alpha_sid": fig.alpha, "alpha_lo": fig.alpha_lo, "alpha_hi": fig.alpha_hi,
        "alpha_spread": best[codebooks.SPREAD],  # measures.power's two shares
        "alpha_questions_share": best[codebooks.QUESTIONS_SHARE],
        "target_first_pass": fp["alpha"], "target_first_pass_lo": fp["low"],
        "target_first_pass_hi": fp["high"], "chance": fig.chance,
        "chance_majority": fig.chance_majority,
        "tau_acc": fig.tau_acc, "tau_acc_lo": fig.tau_lo, "tau_acc_hi": fig.tau_hi,
        "alpha_star": fig.alpha_star, "shortfall": fig.shortfall.value,
        "shortfall_is_bound": int(fig.shortfall.lower_bound),
        "n_anchors": fig.n_anchors, "prompt_length": fig.prompt_length,
        "alpha_sid_piece": fig.alpha_piece, "alpha_piece_lo": fig.alpha_piece_lo,
        "alpha_piece_hi": fig.alpha_piece_hi,
        "continuation_share_of_anchors": fig.continuation_share,
    }
    if fig.e2e is not None:
        v |= {"e2e_ratio": fig.e2e["ratio"], "e2e_ratio_lo": fig.e2e["low"],
              "e2e_ratio_hi": fig.e2e["high"],
              "e2e_accepted_share": fig.e2e["accepted_share"]}
    return {prefix + k: (float(x) if isinstance(x, (float, np.floating)) else int(x))
            for k, x in v.items()}


def side_by_side(figures: dict[str, KeyFigures]) -> pd.DataFrame:
    """A long table: one row per (metric, prompt set) with value, low, high.

    Metrics: C1's AUC, the best draft's alpha_SID, the target's first-pass SID
    accuracy, tau_acc, alpha*, the shortfall alpha*/alpha (``bound`` True when
    it is a lower bound) and, where run, SSLD's NFE over its accelerator's.
    Missing intervals are nan.
    """
    if not figures:
        raise ValueError("no prompt sets given: pass {name: KeyFigures}")
    nan = math.nan
    rows = []
    for cond, f in figures.items():
        fp = f.acceptance.loc[FIRST_PASS]
        items = [
            ("C1: AUC P(r_content > r_function)", f.order["auc"], f.order["auc_lo"],
             f.order["auc_hi"]),
            ("C2: alpha_SID (best draft)", f.alpha, f.alpha_lo, f.alpha_hi),
            ("C2: alpha_SID, piece-level anchors", f.alpha_piece, f.alpha_piece_lo,
             f.alpha_piece_hi),
            ("C2: target's first-pass SID accuracy", fp["alpha"], fp["low"],
             fp["high"]),
            ("C3: tau_acc (tokens per NFE)", f.tau_acc, f.tau_lo, f.tau_hi),
            ("C3: alpha* = 1 - 1/tau_acc", f.alpha_star, nan, nan),
            ("C3: shortfall alpha*/alpha", f.shortfall.value, nan, nan),
        ]
        if f.e2e is not None:
            items.append(("C3: SSLD NFE / accelerator NFE", f.e2e["ratio"],
                          f.e2e["low"], f.e2e["high"]))
        for metric, value, low, high in items:
            rows.append(dict(metric=metric, condition=cond, value=float(value),
                             low=float(low), high=float(high),
                             bound=bool(metric.startswith("C3: shortfall")
                                        and f.shortfall.lower_bound)))
    return pd.DataFrame(rows)


def differences(long: pd.DataFrame, base: str, other: str) -> pd.DataFrame:
    """Per metric of ``side_by_side``: ``other`` - ``base``, their ratio, and overlap.

    ``overlap`` is True when the two 95 % intervals share a point, False when
    they are disjoint (a conservative criterion for a difference: disjoint 95 %
    intervals imply a difference at a level stricter than 5 %), and None where
    a metric has no interval.
    """
    conds = set(long["condition"])
    if base not in conds or other not in conds:
        raise ValueError(f"conditions {base!r} and {other!r} must both be in the "
                         f"table; it holds {sorted(conds)}")
    a = long[long["condition"] == base].set_index("metric")
    b = long[long["condition"] == other].set_index("metric")
    rows = []
    for metric in a.index.intersection(b.index, sort=False):
        x, y = a.loc[metric], b.loc[metric]
        has_ci = not any(math.isnan(v) for v in (x.low, x.high, y.low, y.high))
        rows.append(dict(metric=metric, **{base: x.value, other: y.value},
                         difference=y.value - x.value,
                         ratio=y.value / x.value if x.value else math.nan,
                         overlap=(bool(x.low <= y.high and y.low <= x.high)
                                  if has_ci else None)))
    return pd.DataFrame(rows).set_index("metric")
