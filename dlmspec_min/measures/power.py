"""How many questions would decide a verdict: the power calculation of the claims.

A verdict that compares two figures (``alpha_SID`` and the bar ``alpha*``, a
quality drop and its bound) is decided when their 95 % intervals separate.
Both intervals come from bootstraps over the same questions, so each
half-width shrinks as ``1/sqrt(n)``. Measured at ``n0`` questions with a gap
``d`` between the two estimates and facing half-widths ``h1`` and ``h2`` (the
sides that look at each other), the intervals at ``n`` questions are expected
to separate, with probability ``power``, when

    d >= s * (h1 + h2 + z * sqrt(h1**2 + h2**2) / 1.96),   s = sqrt(n0 / n),

``z`` the ``power`` quantile of the normal distribution: the gap must clear
the two half-widths and, with that probability, the estimate's own noise
(the gap's standard error, ``sqrt(h1**2 + h2**2) / 1.96`` at ``n0``). This
takes the gap measured so far for the true one; a smaller true gap needs more.
"""

from __future__ import annotations

import math
from statistics import NormalDist

Z95 = NormalDist().inv_cdf(0.975)


def facing(a: tuple[float, float, float], b: tuple[float, float, float]):
    """(gap, h_a, h_b): the distance between two estimates given as (value, low,
    high) and the half-widths of their intervals on the sides that face each
    other (a's low side and b's high side when a is above b)."""
    (va, la, ha), (vb, lb, hb) = a, b
    if va >= vb:
        return va - vb, va - la, hb - vb
    return vb - va, ha - va, vb - lb


def separated(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    """Whether two (value, low, high) intervals do not overlap."""
    return a[1] > b[2] or b[1] > a[2]


def size_to_separate(a, b, n_a: int, n_b: int | None = None,
                     power: float = 0.8, level: float = 0.95) -> int | None:
    """Questions ``n`` at which the intervals of ``a`` and ``b`` (each (value,
    low, high), measured on ``n_a`` and ``n_b`` questions) are expected to
    separate with probability ``power`` when both are measured on ``n``; None
    when the estimates coincide (no size decides) or an interval is not
    finite. With ``n_b`` None both sides were measured on ``n_a``. ``level``:
    the level of the intervals that must separate at ``n`` (``a`` and ``b`` are
    95 % intervals; a look of the sequential rule at 96 % widens each
    half-width by z(0.98) / z(0.975)).

    Each half-width ``h`` at ``n`` is ``h * sqrt(n_side / n)``, so the module's
    condition solves to ``sqrt(n) = (sum h sqrt(n_side) + z sqrt(sum h**2
    n_side) / 1.96) / gap``."""
    n_b = n_a if n_b is None else n_b
    for n in (n_a, n_b):
        if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
            raise ValueError(f"sizes must be ints >= 1, got {n_a!r}, {n_b!r}")
    if not 0.5 <= power < 1:
        raise ValueError(f"power must lie in [0.5, 1), got {power!r}")
    if not all(math.isfinite(x) for x in (*a, *b)):
        return None
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    gap, h1, h2 = facing(a, b)
    if gap <= 0:
        return None
    widen = NormalDist().inv_cdf(1 - (1 - level) / 2) / Z95
    h1, h2 = h1 * widen, h2 * widen
    z = NormalDist().inv_cdf(power)
    root = (h1 * math.sqrt(n_a) + h2 * math.sqrt(n_b)
            + z * math.sqrt(h1**2 * n_a + h2**2 * n_b) / Z95) / gap
    return max(1, math.ceil(root**2))


def allocate(first: dict[str, int], needed: dict[str, int], seconds: dict[str, float],
             budget: float, pool: int) -> dict[str, int]:
    """Each claim's cap under a time budget: claims in order of the seconds
    their needed size would cost (``seconds[c]`` per question of a grown look,
    times ``needed[c]``, cheapest first; ties by name) get their needed size
    (at most ``pool``, at least ``first[c]``) while ``budget`` lasts; the first
    claim it cannot pay for gets the largest size the rest pays for, and every
    claim after it its ``first`` size (no growth)."""
    caps, left = {}, float(budget)
    order = sorted(needed, key=lambda c: (seconds[c] * needed[c], c))
    for c in order:
        want = max(first[c], min(needed[c], pool))
        cost = seconds[c] * want
        if cost <= left:
            caps[c], left = want, left - cost
            continue
        n = int(left // seconds[c])
        caps[c] = n if n > first[c] else first[c]
        left = 0.0 if n > first[c] else left
    return {c: caps[c] for c in needed}
