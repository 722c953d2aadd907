"""The win condition: the acceptance SSLD would need to beat token-space decoding.

SPEC.md section 3.1: Model A (speculative-decoding equivalence,
``model_a_*``) and Model B (one verify pass then infill, ``model_b_*``), with
``alpha_star = 1 - 1/tau_acc``; ``shortfall`` is alpha*/alpha, ``paper_bar``
and ``bar_note`` compare the measured alpha with the bar.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# --- the win condition (SPEC.md section 3.1) ------------------------------------------


def alpha_star(tau_acc: float) -> float:
    """The asymptotic bar of Model A (gamma -> inf, c -> 0): 1 - 1/tau_acc."""
    if not tau_acc >= 1:
        raise ValueError(f"tau_acc (tokens per NFE) must be >= 1, got {tau_acc!r}")
    return 1.0 - 1.0 / tau_acc


def bar_note(alpha_lo: float, alpha_hi: float, tau_lo: float, tau_hi: float) -> str:
    """A sentence for a verdict: where alpha's 95 % interval lies against alpha*'s.

    ``alpha*`` = 1 - 1/tau_acc inherits tau_acc's interval (``tau_lo``,
    ``tau_hi``). If it overlaps alpha_SID's interval, the build cannot tell on
    which side of the bar the draft falls and the verdict is *inconclusive*;
    otherwise the note says which side alpha's interval lies on.
    """
    if not (alpha_lo <= alpha_hi and tau_lo <= tau_hi):
        raise ValueError("each interval needs low <= high")
    star_lo, star_hi = alpha_star(tau_lo), alpha_star(tau_hi)
    intervals = (f"The 95 % intervals of alpha_SID ({alpha_lo:.4f}-{alpha_hi:.4f}) "
                 f"and of alpha* ({star_lo:.4f}-{star_hi:.4f}, from tau_acc's)")
    if alpha_lo <= star_hi and star_lo <= alpha_hi:
        return (f"{intervals} overlap: this build cannot tell on which side of the "
                "bar the draft falls, so the verdict is inconclusive, and a build "
                "with more samples or another seed may settle it either way "
                "(formalization chapter, section Seeds).")
    if alpha_hi < star_lo:
        return (f"{intervals} do not overlap: the draft's acceptance lies below the "
                "bar, as the claim says.")
    return (f"{intervals} do not overlap: the draft's acceptance lies above the bar, "
            "against the claim.")


def paper_bar(tau_paper: float, alpha_hi: float) -> tuple[float, float, str]:
    """The paper's own bar beside ours: context for a verdict, never the verdict.

    ``tau_paper`` is the paper's accelerator figure in tokens per forward (read
    from the registry by the caller, never typed in code). Returns
    (alpha*_paper = 1 - 1/tau_paper, the shortfall alpha*_paper / alpha_hi at the
    upper end of alpha_SID's interval, a sentence saying so).
    """
    a_paper = alpha_star(tau_paper)
    short = shortfall(a_paper, alpha_hi, alpha_hi).value
    side = ("short of that bar by this factor" if short > 1
            else "so the draft's interval reaches that bar")
    note = (f"As context, not the verdict: against the paper's own accelerator figure "
            f"({tau_paper:g} tokens per forward, alpha* = {a_paper:.3f}), the upper "
            f"end of alpha_SID's interval ({alpha_hi:.4f}) gives alpha*/alpha_hi = "
            f"{short:.1f}, {side}.")
    return a_paper, short, note


def model_a_tokens_per_cost(alpha, gamma: float, c: float):
    """(1 - alpha^(gamma+1)) / ((1 - alpha)(1 + gamma c)); the limit at alpha = 1."""
    a = np.asarray(alpha, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tokens = np.where(np.isclose(a, 1.0), gamma + 1.0,
                          (1 - a ** (gamma + 1)) / (1 - a))
    out = tokens / (1 + gamma * c)
    return float(out) if out.ndim == 0 else out


def model_a_alpha_needed(tau_acc: float, gamma: float, c: float) -> float:
    """Smallest alpha with Model A's tokens per cost > tau_acc (nan: unreachable).

    Model A's tokens per cost grows with alpha, so a bisection finds it.
    """
    if model_a_tokens_per_cost(1.0, gamma, c) <= tau_acc:
        return float("nan")
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if model_a_tokens_per_cost(mid, gamma, c) > tau_acc:
            hi = mid
        else:
            lo = mid
    return hi


def model_b_alpha_needed(n_anchors: float, delta: float, n_draft: float, c: float):
    """Model B wins iff alpha |A| delta > 1 + n_draft c: returns that bar on alpha."""
    if n_anchors <= 0 or delta <= 0:
        return float("inf")
    return (1 + n_draft * c) / (n_anchors * delta)


def model_b_slowdown(n_acc: float, n_draft: float, c: float) -> float:
    """Model B at alpha = 0: NFE_SSLD / NFE_acc = 1 + (1 + n_draft c) / N_acc."""
    return 1 + (1 + n_draft * c) / n_acc


@dataclass(frozen=True)
class Shortfall:
    value: float  # alpha* / alpha (or alpha* / alpha_hi)
    lower_bound: bool  # True when alpha was 0 and the CI's upper end was used


def shortfall(alpha_star_: float, alpha: float, alpha_hi: float) -> Shortfall:
    """alpha*/alpha; with alpha = 0, alpha*/alpha_hi, a lower bound (never 1/0)."""
    if alpha > 0:
        return Shortfall(alpha_star_ / alpha, False)
    if alpha_hi > 0:
        return Shortfall(alpha_star_ / alpha_hi, True)
    raise ValueError(
        "alpha and its CI's upper end are both 0: the shortfall is unbounded; "
        "measure more anchors (its CI must have a positive upper end)"
    )
