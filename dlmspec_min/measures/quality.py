"""Quality of decoded text, and speed inside a quality bound (C5).

SPEC.md section 5 (C5), our formalization [DERIVED] of the paper's
"bounded-quality control" ("Speculating the Bottleneck", abstract: the
speedup of relaxed acceptance is fast garbage by an independent judge):

- ``texts_of``: generated token ids -> strings for the judge (special tokens
  dropped, WordPiece pieces joined by the tokenizer).
- ``repetition``: per sequence, the share of n-grams that repeat an earlier
  n-gram of the same sequence, ``1 - distinct / total`` (degenerate text such
  as "the the the" scores near 1).
- ``agreement_drop``: judge top-1 agreement of a baseline minus a method's,
  token-weighted per side, with a paired bootstrap over samples (sample i of
  both decodes comes from the same prompt and random stream).
- ``within_bound``: a method's speedup counts only if its agreement drop is at
  most the stated bound.
"""

from __future__ import annotations

import numpy as np
import torch

from .stats import current_level, mean_bootstrap


def texts_of(tokenizer, tokens: torch.Tensor) -> list[str]:
    """(B, G) token ids -> B strings, special tokens skipped."""
    if tokens.dim() != 2:
        raise ValueError(f"tokens must be (batch, length), got {tuple(tokens.shape)}")
    return [tokenizer.decode(row.tolist(), skip_special_tokens=True) for row in tokens]


def repetition(tokens: torch.Tensor, n: int = 1, ignore=()) -> np.ndarray:
    """Per row of (B, G) ids: 1 - distinct n-grams / n-grams (NaN if none).

    ``ignore``: ids dropped before counting (e.g. special tokens).
    """
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    if tokens.dim() != 2:
        raise ValueError(f"tokens must be (batch, length), got {tuple(tokens.shape)}")
    skip = {int(i) for i in ignore}
    out = []
    for row in tokens.tolist():
        row = [t for t in row if t not in skip]
        grams = [tuple(row[i:i + n]) for i in range(len(row) - n + 1)]
        out.append(1 - len(set(grams)) / len(grams) if grams else float("nan"))
    return np.array(out)


def repetition_ci(tokens: torch.Tensor, n: int = 2, ignore=(), n_boot: int = 2000,
                  seed: int = 0) -> tuple[float, float, float]:
    """Mean ``repetition`` of the rows of (B, G) ids with its percentile bootstrap
    interval over rows (rows with no n-gram left out): (mean, low, high), NaN
    when no row has one."""
    rep = repetition(tokens, n, ignore)
    rep = rep[np.isfinite(rep)]
    if not len(rep):
        return (float("nan"),) * 3
    return tuple(float(x) for x in mean_bootstrap(rep, n_boot, seed))


def _weighted(top1: np.ndarray, n: np.ndarray) -> float:
    return float((top1 * n).sum() / n.sum()) if n.sum() > 0 else float("nan")


def agreement_drop(
    top1_base, n_base, top1_method, n_method, n_boot: int = 2000, seed: int = 0,
    level: float | None = None,
) -> tuple[float, float, float]:
    """Baseline agreement - method agreement, paired sample bootstrap: (est, lo, hi).

    Inputs are the per-text ``top1_agreement`` and ``n_tokens`` columns of
    ``Judge.score`` for the same samples in the same order; each side is
    token-weighted (texts with no token weigh nothing).
    """
    arrays = [np.nan_to_num(np.asarray(a, np.float64))
              for a in (top1_base, n_base, top1_method, n_method)]
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1 or not len(arrays[0]):
        raise ValueError("the four per-text arrays must be 1-D, equal and non-empty")
    tb, nb, tm, nm = arrays
    est = _weighted(tb, nb) - _weighted(tm, nm)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(tb), size=(n_boot, len(tb)))  # (n_boot, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = ((tb * nb)[idx].sum(1) / nb[idx].sum(1)
                - (tm * nm)[idx].sum(1) / nm[idx].sum(1))
    boot = boot[np.isfinite(boot)]
    level = current_level() if level is None else level
    a = (1 - level) / 2
    return est, float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


def accuracy_drop(correct_base, correct_method, n_boot: int = 2000, seed: int = 0,
                  level: float | None = None) -> tuple[float, float, float]:
    """Baseline accuracy - method accuracy over the same samples (per-sample 0/1
    correctness, in the same order), paired sample bootstrap: (est, lo, hi)."""
    ones = np.ones(len(np.asarray(correct_base)))
    return agreement_drop(correct_base, ones, correct_method, ones, n_boot, seed, level)


def within_bound(drop: float, bound: float) -> bool:
    """True iff the quality drop is at most ``bound`` (NaN drops are outside)."""
    if not 0 <= bound <= 1:
        raise ValueError(f"the quality bound must lie in [0, 1], got {bound!r}")
    return bool(np.isfinite(drop) and drop <= bound)
