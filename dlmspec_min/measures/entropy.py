"""Entropies of token distributions, and the bounds the information view uses.

- ``entropy`` / ``top1_probability``: of a token distribution given by logits,
  in nats, optionally without the mask token (the decoder never proposes it,
  so at temperature 1 it samples from the softmax renormalised without it);
  ``log_probs`` / ``entropy_of_log_probs`` / ``probs_entropy`` are the pieces.
- Bounds (our formalization, DERIVED): ``max_entropy_given_top1`` (a position
  committed at confidence >= tau has entropy at most h(tau) + (1 - tau)
  log(V - 1)) and ``fano_max_hit`` (Fano's inequality: a guess of a K-valued
  variable from information that leaves entropy H hits with probability at
  most the p solving H = h(p) + (1 - p) log(K - 1)).
"""

from __future__ import annotations

import math

import numpy as np
import torch

STAT_DTYPE = torch.float64
FANO_ITERS = 80  # bisection steps (the interval halves each time)


# --- entropies of one distribution ----------------------------------------------------


def log_probs(logits: torch.Tensor, exclude: int | None) -> torch.Tensor:
    """float64 log softmax; token ``exclude`` removed and the rest renormalised."""
    z = logits.to(STAT_DTYPE)
    if exclude is not None:
        if not 0 <= int(exclude) < z.shape[-1]:
            raise ValueError(
                f"exclude={exclude} is not a token id of a vocabulary of {z.shape[-1]}"
            )
        z = z.clone()
        z[..., int(exclude)] = float("-inf")
    return torch.log_softmax(z, dim=-1)


def entropy_of_log_probs(logp: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) from log-probabilities (..., V) -> (...); 0 log 0 = 0."""
    p = logp.exp()
    return -(p * logp.masked_fill(p == 0, 0.0)).sum(-1)  # 0 log 0 = 0


def entropy(logits: torch.Tensor, exclude: int | None = None) -> torch.Tensor:
    """Entropy (nats) of softmax(logits) over the last axis: (..., V) -> (...) float64.

    ``exclude``: a token id left out and the rest renormalised (the decoder's
    proposals never take the mask token).
    """
    return entropy_of_log_probs(log_probs(logits, exclude))


def top1_probability(logits: torch.Tensor, exclude: int | None = None) -> torch.Tensor:
    """The largest probability of softmax(logits): (..., V) -> (...) float64."""
    return log_probs(logits, exclude).amax(-1).exp()


def probs_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of probability vectors (..., K) -> (...) float64; 0 log 0 = 0."""
    p = probs.to(STAT_DTYPE)
    logp = torch.log(p.clamp(min=1e-300))
    return -(p * logp).sum(-1)


# --- bounds (our formalization, DERIVED) ----------------------------------------------


def binary_entropy(p) -> np.ndarray:
    """h(p) = -p log p - (1 - p) log(1 - p) in nats, elementwise (h(0) = h(1) = 0)."""
    p = np.asarray(p, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(p * np.log(p) + (1 - p) * np.log1p(-p))
    return np.where((p <= 0) | (p >= 1), 0.0, h)


def max_entropy_given_top1(p, n: int) -> np.ndarray:
    """The largest entropy (nats) of n outcomes whose top probability is p.

    The rest spread evenly over the other n - 1 outcomes: h(p) + (1 - p) log(n - 1),
    for p in [1/n, 1] (at p = 1/n it is log n).
    """
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"n (outcomes) must be an integer >= 2, got {n!r}")
    p = np.asarray(p, float)
    if np.any((p < 1.0 / n - 1e-12) | (p > 1)):
        raise ValueError(f"a top-1 probability must lie in [1/n, 1] = [{1 / n:.3g}, 1]")
    return binary_entropy(p) + (1 - p) * math.log(n - 1)


def fano_max_hit(H, K: int) -> np.ndarray:
    """Fano's bound: the largest P(guess = S) for a K-valued S with H(S | view) = H.

    Fano: H <= h(Pe) + Pe log(K - 1) with Pe = P(guess != S). The right side
    grows in Pe on [0, 1 - 1/K], so Pe >= its inverse at H and the hit
    probability is at most 1 - Pe. Solved by bisection; H in [0, log K] (nats).
    """
    if not isinstance(K, int) or K < 2:
        raise ValueError(f"K (outcomes) must be an integer >= 2, got {K!r}")
    H = np.asarray(H, float)
    if np.any(H < -1e-12) or np.any(H > math.log(K) + 1e-9):
        raise ValueError(
            f"entropies must lie in [0, log K] = [0, {math.log(K):.4g}] nats")
    lo = np.zeros_like(H)
    hi = np.full_like(H, 1 - 1 / K)
    for _ in range(FANO_ITERS):
        mid = (lo + hi) / 2
        f = binary_entropy(mid) + mid * math.log(K - 1)
        below = f < H
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 1 - hi
