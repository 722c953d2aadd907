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

Not every part of a half-width shrinks with questions. alpha_SID is the mean
over S codebooks (seeded k-means IDs and draft heads), and its interval also
resamples the codebooks (``stats.seed_pooled_rate``): the spread between them
gives it a share ``c = 1.96 * sd / sqrt(S)`` (``codebook_share``) that more
questions leave as it is. Given that share and the questions' own ``q`` (the
half-width of a bootstrap over questions alone, the codebooks held fixed:
``codebooks.pooled_acceptance``), its half-width at ``n`` questions and ``S'``
codebooks is ``sqrt(q**2 * n0 / n + c**2 * S / S')``; the condition above is
then solved by search, and no number of questions may do
(``size_to_separate`` returns None), where ``codebooks_to_separate`` asks how
many codebooks would, on the same questions.
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


def codebook_share(spread: float, n_codebooks: int) -> float:
    """The part of a 95 % half-width that the spread between ``n_codebooks``
    codebooks gives a mean over them (``spread``: the standard deviation of the
    single codebooks' rates): 1.96 * spread / sqrt(n_codebooks); 0 when the
    spread is unknown (one codebook, or not finite)."""
    if not (isinstance(n_codebooks, int) and n_codebooks >= 1):
        raise ValueError(f"n_codebooks must be an int >= 1, got {n_codebooks!r}")
    if not math.isfinite(spread) or spread < 0:
        return 0.0
    return Z95 * spread / math.sqrt(n_codebooks)


def shares(questions_share, spread, n_codebooks) -> tuple[float, float] | None:
    """``shares_a`` for a mean over ``n_codebooks`` codebooks: (the questions'
    share, ``codebook_share``), or None where they are unknown (a value not a
    finite number, fewer than two codebooks, or a number of codebooks that is
    not whole), so that the sizes fall back to one shrinking half-width."""
    try:
        q, sd, whole = float(questions_share), float(spread), float(n_codebooks)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(q) and math.isfinite(sd) and whole.is_integer()
            and whole >= 2):
        return None
    return q, codebook_share(sd, int(whole))


def _clears(gap: float, h1: float, h2: float, z: float) -> bool:
    """The module's condition: the gap clears both half-widths and, with the
    stated power, the gap's own noise."""
    return gap >= h1 + h2 + z * math.sqrt(h1**2 + h2**2) / Z95


def _smallest(ok, limit: int = 10**9) -> int | None:
    """The smallest integer m >= 1 with ok(m), for ok monotone in m; None when
    even ``limit`` fails."""
    if not ok(limit):
        return None
    lo, hi = 0, 1
    while not ok(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # ok(hi), not ok(lo) (or lo = 0)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def _checked(a, b, power: float, level: float):
    """(gap, h1, h2, z) for two sides (the half-widths widened to ``level``), or
    None when no size decides."""
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
    return gap, h1 * widen, h2 * widen, NormalDist().inv_cdf(power)


def _calibrated(h1: float, shares_a) -> tuple[float, float]:
    """``a``'s two shares (questions', codebooks') scaled so that together they
    make its interval's own facing half-width ``h1``: the run's interval is
    what its verdict reads, so the model reproduces it at the run's sizes and
    keeps only the split between the two parts from ``shares_a``."""
    q, c = (max(float(x), 0.0) for x in shares_a)
    whole = math.hypot(q, c)
    if not math.isfinite(whole) or whole == 0:
        return h1, 0.0
    return q * h1 / whole, c * h1 / whole


def codebooks_to_separate(a, b, n_codebooks: int, shares_a: tuple[float, float],
                          power: float = 0.8, level: float = 0.95) -> int | None:
    """Codebooks at which the intervals of ``a`` (a mean over ``n_codebooks``
    codebooks, its half-width split in ``shares_a`` = (questions',
    codebooks') as in ``size_to_separate``) and ``b`` (no codebooks) are
    expected to separate with probability ``power``, on the run's questions;
    None when no number of codebooks would (the questions' shares alone are
    too wide) or the estimates coincide."""
    if not (isinstance(n_codebooks, int) and n_codebooks >= 1):
        raise ValueError(f"n_codebooks must be an int >= 1, got {n_codebooks!r}")
    got = _checked(a, b, power, level)
    if got is None:
        return None
    gap, h1, h2, z = got
    q1, c1 = _calibrated(h1, shares_a)
    return _smallest(lambda m: _clears(
        gap, math.hypot(q1, c1 * math.sqrt(n_codebooks / m)), h2, z))


def size_to_separate(a, b, n_a: int, n_b: int | None = None,
                     power: float = 0.8, level: float = 0.95,
                     shares_a: tuple[float, float] | None = None) -> int | None:
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
    n_side) / 1.96) / gap``. ``shares_a``: how ``a``'s half-width splits into
    the questions' share and the codebooks' (``codebook_share``), at 95 %; the
    two are scaled to make ``a``'s own facing half-width together
    (``_calibrated``), ``a``'s half-width at ``n`` is then ``sqrt(q**2 * n_a /
    n + c**2)``, the size is found by search, and None also means that no
    number of questions would separate them."""
    n_b = n_a if n_b is None else n_b
    for n in (n_a, n_b):
        if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
            raise ValueError(f"sizes must be ints >= 1, got {n_a!r}, {n_b!r}")
    got = _checked(a, b, power, level)
    if got is None:
        return None
    gap, h1, h2, z = got
    if shares_a is None:
        root = (h1 * math.sqrt(n_a) + h2 * math.sqrt(n_b)
                + z * math.sqrt(h1**2 * n_a + h2**2 * n_b) / Z95) / gap
        return max(1, math.ceil(root**2))
    q1, c1 = _calibrated(h1, shares_a)
    return _smallest(lambda n: _clears(gap, math.hypot(q1 * math.sqrt(n_a / n), c1),
                                       h2 * math.sqrt(n_b / n), z))


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


def both_to_separate(a, b, n_a: int, n_codebooks: int, shares_a: tuple[float, float],
                     n_b: int | None = None, power: float = 0.8,
                     level: float = 0.95) -> tuple[int, int] | None:
    """(samples, codebooks) that together are expected to separate the
    intervals where neither alone would; one such pair, not the cheapest:
    twice the samples that would do with the codebooks' share gone (at least
    one more than the run's), and the fewest codebooks, not fewer than the
    run's, that then do. ``a``, ``b``, ``n_a``, ``n_b``, ``shares_a`` as in
    ``size_to_separate``; None when the estimates coincide."""
    if not (isinstance(n_codebooks, int) and n_codebooks >= 1):
        raise ValueError(f"n_codebooks must be an int >= 1, got {n_codebooks!r}")
    n_b = n_a if n_b is None else n_b
    got = _checked(a, b, power, level)
    if got is None:
        return None
    gap, h1, h2, z = got
    q1, c1 = _calibrated(h1, shares_a)
    base = _smallest(lambda n: _clears(gap, q1 * math.sqrt(n_a / n),
                                       h2 * math.sqrt(n_b / n), z))
    if base is None:
        return None
    n = max(2 * base, n_a + 1)
    books = _smallest(lambda m: _clears(
        gap, math.hypot(q1 * math.sqrt(n_a / n), c1 * math.sqrt(n_codebooks / m)),
        h2 * math.sqrt(n_b / n), z))
    return None if books is None else (n, max(books, n_codebooks))
