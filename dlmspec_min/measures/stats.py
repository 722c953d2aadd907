"""Statistics helpers: bootstrap over sequences, rank AUCs, clustered regressions.

Everything measured in this book is a ratio of sums over tokens that come in
sequences; tokens of one sequence are not independent, so uncertainty is
always resampled (or clustered) at the sequence level.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95
_LEVEL: list[float] = []  # the levels of the enclosing ``interval_level`` blocks


def current_level() -> float:
    """The level every interval here has when its caller names none: 0.95, or
    that of the innermost ``interval_level`` block (a sequential rule's look,
    ``experiments.sequential``)."""
    return _LEVEL[-1] if _LEVEL else CONFIDENCE


@contextlib.contextmanager
def interval_level(level: float):
    """Within the block, intervals computed without a ``level`` have ``level``
    (e.g. 0.96: a look of a sequential rule at an adjusted level)."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    _LEVEL.append(float(level))
    try:
        yield
    finally:
        _LEVEL.pop()


def ratio_bootstrap(
    num, den, n_boot: int = 2000, seed: int = 0, level: float | None = None
):
    """Estimate sum(num)/sum(den) with a percentile bootstrap CI over sequences.

    ``num`` and ``den`` hold one entry per sequence (e.g. hits and trials).
    Returns (estimate, low, high).
    """
    num, den = np.asarray(num, float), np.asarray(den, float)
    if num.shape != den.shape or num.ndim != 1 or len(num) == 0:
        raise ValueError("num and den must be 1-D arrays of the same, non-zero length")
    if den.sum() <= 0:
        raise ValueError("the denominators sum to zero: nothing was measured")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num), size=(n_boot, len(num)))
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = num[idx].sum(1) / den[idx].sum(1)
    boot = boot[np.isfinite(boot)]
    level = current_level() if level is None else level
    a = (1 - level) / 2
    return (
        float(num.sum() / den.sum()),
        float(np.quantile(boot, a)),
        float(np.quantile(boot, 1 - a)),
    )


def mean_bootstrap(
    values, n_boot: int = 2000, seed: int = 0, level: float | None = None
):
    """Mean of per-sequence values with a percentile bootstrap CI."""
    values = np.asarray(values, float)
    return ratio_bootstrap(values, np.ones_like(values), n_boot, seed, level)


def auc(x, y) -> float:
    """P(X > Y) + 0.5 P(X = Y), the Mann-Whitney AUC of sample x over sample y."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    u = sps.mannwhitneyu(x, y, alternative="two-sided").statistic
    return float(u / (len(x) * len(y)))


# --- C1: rank AUC with its p-value, sequence bootstrap, clustered regression --------


def mann_whitney(x, y) -> tuple[float, float]:
    """AUC = P(X > Y) + 0.5 P(X = Y) of x over y, and the two-sided Mann-Whitney p.

    The p-value treats every observation as independent. Tokens of one sequence
    are not, so back it with ``auc_bootstrap`` (resampling sequences) or a
    sequence-clustered regression (``clustered_ols``).
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.ndim != 1 or y.ndim != 1 or not len(x) or not len(y):
        raise ValueError("x and y must be non-empty 1-D samples")
    res = sps.mannwhitneyu(x, y, alternative="two-sided")
    return float(res.statistic / (len(x) * len(y))), float(res.pvalue)


def _grouped_samples(x, x_groups, y, y_groups, n_boot):
    """Two 1-D float samples, checked with their group labels and ``n_boot``."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.ndim != 1 or y.ndim != 1 or not len(x) or not len(y):
        raise ValueError("x and y must be non-empty 1-D samples")
    if np.shape(x_groups) != x.shape or np.shape(y_groups) != y.shape:
        raise ValueError("x_groups and y_groups need one group label per observation")
    if not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")
    return x, y


def _group_codes(*groups):
    """Integer codes 0..S-1 shared by several arrays of group labels."""
    allg = np.concatenate([np.asarray(g).ravel() for g in groups])
    _, codes = np.unique(allg, return_inverse=True)
    out, start = [], 0
    for g in groups:
        n = np.asarray(g).size
        out.append(codes[start : start + n])
        start += n
    return out, int(codes.max()) + 1 if len(codes) else 0


def _weighted_auc(c: np.ndarray, f: np.ndarray) -> np.ndarray:
    """AUC from histograms over sorted unique values: c, f (R, U) -> (R,).

    c counts the x sample, f the y sample, column u = the u-th smallest value.
    """
    below = np.cumsum(f, axis=1) - f  # (R, U) y-mass strictly below each value
    num = (c * (below + 0.5 * f)).sum(axis=1)
    den = c.sum(axis=1) * f.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def auc_bootstrap(
    x,
    y,
    x_groups,
    y_groups,
    n_boot: int = 2000,
    seed: int = 0,
    level: float | None = None,
) -> tuple[float, float, float]:
    """AUC of x over y with a percentile CI from resampling groups (sequences).

    ``x_groups``/``y_groups`` give each observation's group (its sequence). A
    bootstrap replicate draws the groups with replacement (``default_rng(seed)``,
    ``integers(0, S, (n_boot, S))``) and takes every observation of a drawn
    group as often as the group was drawn; replicates without an x or a y
    are dropped. Exact and vectorised: histograms over the unique values.
    Returns (estimate, low, high).
    """
    x, y = _grouped_samples(x, x_groups, y, y_groups, n_boot)
    (gx, gy), S = _group_codes(x_groups, y_groups)
    _, inv = np.unique(np.concatenate([x, y]), return_inverse=True)
    U = int(inv.max()) + 1
    C = np.zeros((S, U))
    F = np.zeros((S, U))
    np.add.at(C, (gx, inv[: len(x)]), 1)  # (S, U) x counts per group and value
    np.add.at(F, (gy, inv[len(x) :]), 1)
    est = float(_weighted_auc(C.sum(0, keepdims=True), F.sum(0, keepdims=True))[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, S, size=(n_boot, S))
    W = np.zeros((n_boot, S))
    np.add.at(W, (np.arange(n_boot)[:, None], idx), 1)  # (R, S) draws per group
    boot = _weighted_auc(W @ C, W @ F)
    boot = boot[np.isfinite(boot)]
    level = current_level() if level is None else level
    a = (1 - level) / 2
    return est, float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


def clustered_ols(y, X, groups, level: float | None = None):
    """OLS of y on the columns of X with cluster-robust (sandwich) standard errors.

    statsmodels ``OLS(...).fit(cov_type="cluster")`` with its small-sample
    correction G/(G-1) * (N-1)/(N-K) and normal-based p-values and intervals.
    ``X`` is a DataFrame (include a constant column yourself); ``groups`` one
    cluster label per row (the sequence). Returns a DataFrame indexed by X's
    columns: coef, se, z, p, low, high; ``.attrs`` holds n and n_clusters.
    """
    import pandas as pd
    import statsmodels.api as sm

    y = np.asarray(y, float)
    if not isinstance(X, pd.DataFrame):
        raise ValueError("X must be a pandas DataFrame (its columns name the terms)")
    if y.ndim != 1 or len(y) != len(X) or len(np.asarray(groups)) != len(y):
        raise ValueError("y, X and groups need the same number of rows")
    if len(y) <= X.shape[1]:
        raise ValueError(f"{len(y)} rows cannot fit {X.shape[1]} coefficients")
    (codes,), n_clusters = _group_codes(groups)
    if n_clusters < 2:
        raise ValueError("clustered errors need at least two clusters (sequences)")
    fit = sm.OLS(y, X.astype(float)).fit(cov_type="cluster", cov_kwds={"groups": codes})
    level = current_level() if level is None else level
    ci = fit.conf_int(alpha=1 - level)
    out = pd.DataFrame(
        {
            "coef": fit.params,
            "se": fit.bse,
            "z": fit.tvalues,
            "p": fit.pvalues,
            "low": ci[0],
            "high": ci[1],
        }
    )
    out.attrs.update(n=len(y), n_clusters=n_clusters)
    return out


def rate_ci(hits, trials, n_boot: int = 2000, seed: int = 0,
            level: float | None = None):
    """A hit rate sum(hits)/sum(trials) with a CI that stays honest at zero hits.

    ``hits`` and ``trials`` hold one entry per sequence. The interval is the
    union of the percentile bootstrap over sequences (``ratio_bootstrap``, which
    respects within-sequence dependence but collapses to [0, 0] when nothing
    hit) and the exact Clopper-Pearson interval on the pooled counts (statsmodels
    ``proportion_confint(method="beta")``, which does not collapse). Returns
    (estimate, low, high).
    """
    from statsmodels.stats.proportion import proportion_confint

    level = current_level() if level is None else level
    est, lo, hi = ratio_bootstrap(hits, trials, n_boot, seed, level)
    k, n = int(np.sum(hits)), int(np.sum(trials))
    cp_lo, cp_hi = proportion_confint(k, n, alpha=1 - level, method="beta")
    return est, float(min(lo, cp_lo)), float(max(hi, cp_hi))


def seed_pooled_rate(hits, trials, n_boot: int = 2000, seed: int = 0,
                     level: float | None = None) -> tuple[float, float, float]:
    """A hit rate averaged over S repeats (seeds) of one measurement, with its CI.

    ``hits`` (S, B): hits per seed and sequence, all seeds scored on the same B
    sequences with ``trials`` (B,) trials each. The estimate is the mean over
    seeds of sum(hits[s]) / sum(trials). The interval is a two-level percentile
    bootstrap (each replicate resamples seeds and, jointly for all seeds,
    sequences, so both sources of variation count), united with the exact
    Clopper-Pearson interval on the pooled counts (which stays open at zero
    hits, as in ``rate_ci``). With S = 1 it is ``rate_ci``'s interval up to the
    bootstrap draw. Returns (estimate, low, high).
    """
    from statsmodels.stats.proportion import proportion_confint

    H = np.asarray(hits, float)
    n = np.asarray(trials, float)
    if H.ndim != 2 or n.ndim != 1 or H.shape[1] != len(n) or H.size == 0:
        raise ValueError(f"hits must be (seeds, sequences) and trials (sequences,), "
                         f"got {H.shape} and {n.shape}")
    if n.sum() <= 0 or (n < 0).any() or (H < 0).any() or (H > n).any():
        raise ValueError("trials must be >= 0 with a positive sum, and "
                         "0 <= hits <= trials")
    if not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")
    S, B = H.shape
    est = float((H.sum(1) / n.sum()).mean())
    seq = _group_weights(B, n_boot, seed)  # (n_boot, B)
    seeds = _group_weights(S, n_boot, seed + 1) / S  # (n_boot, S)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_seed = (seq @ H.T) / (seq @ n)[:, None]  # (n_boot, S)
    boot = (per_seed * seeds).sum(1)
    boot = boot[np.isfinite(boot)]
    level = current_level() if level is None else level
    a = (1 - level) / 2
    cp_lo, cp_hi = proportion_confint(int(H.sum()), int(S * n.sum()), alpha=1 - level,
                                      method="beta")
    return (est, float(min(np.quantile(boot, a), cp_lo)),
            float(max(np.quantile(boot, 1 - a), cp_hi)))


def paired_ratio_bootstrap(
    num_a, den_a, num_b, den_b, n_boot: int = 2000, seed: int = 0,
    level: float | None = None,
):
    """(sum(num_a)/sum(den_a)) / (sum(num_b)/sum(den_b)), paired over sequences.

    Two pooled means measured on the SAME sequences (one entry per sequence in
    each of the four arrays, in the same order), e.g. a measure under model A
    over model B. Each bootstrap replicate resamples whole sequences once and
    uses the same indices for A and B, so their correlation is kept. Returns
    (estimate, low, high), a percentile interval.
    """
    arrays = [np.asarray(v, float) for v in (num_a, den_a, num_b, den_b)]
    if any(a.ndim != 1 for a in arrays) or len({len(a) for a in arrays}) != 1 \
            or len(arrays[0]) == 0:
        raise ValueError("num_a, den_a, num_b, den_b must be 1-D arrays of one, "
                         "non-zero length (one entry per sequence)")
    na, da, nb, db = arrays
    if da.sum() <= 0 or db.sum() <= 0 or nb.sum() == 0:
        raise ValueError("a denominator is zero: nothing was measured for one side")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(na), size=(n_boot, len(na)))
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (na[idx].sum(1) / da[idx].sum(1)) / (nb[idx].sum(1) / db[idx].sum(1))
    boot = boot[np.isfinite(boot)]
    level = current_level() if level is None else level
    a = (1 - level) / 2
    est = (na.sum() / da.sum()) / (nb.sum() / db.sum())
    return float(est), float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


# --- C8: differences of pooled means and rank correlations, by sequence -------------


def _group_weights(S: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, S) how often each of S groups is drawn in each bootstrap replicate."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, S, size=(n_boot, S))
    W = np.zeros((n_boot, S))
    np.add.at(W, (np.arange(n_boot)[:, None], idx), 1)
    return W


def mean_difference_bootstrap(
    x, x_groups, y, y_groups, n_boot: int = 2000, seed: int = 0,
    level: float | None = None,
) -> tuple[float, float, float]:
    """mean(x) - mean(y), pooled over observations, with a CI resampling groups.

    ``x_groups``/``y_groups`` give each observation's group (its sequence); a
    replicate draws groups with replacement and takes all their observations
    of both samples (replicates missing x or y are dropped). Returns
    (estimate, low, high), a percentile interval.
    """
    x, y = _grouped_samples(x, x_groups, y, y_groups, n_boot)
    (gx, gy), S = _group_codes(x_groups, y_groups)
    sx, nx = np.bincount(gx, x, S), np.bincount(gx, minlength=S).astype(float)
    sy, ny = np.bincount(gy, y, S), np.bincount(gy, minlength=S).astype(float)
    W = _group_weights(S, n_boot, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (W @ sx) / (W @ nx) - (W @ sy) / (W @ ny)
    boot = boot[np.isfinite(boot)]
    level = current_level() if level is None else level
    a = (1 - level) / 2
    est = float(x.mean() - y.mean())
    return est, float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


def spearman_bootstrap(
    x, y, groups, n_boot: int = 2000, seed: int = 0, level: float | None = None,
) -> tuple[float, float, float, float]:
    """Spearman's rho of (x, y) with its p-value and a CI resampling groups.

    The p-value (scipy, two-sided) treats observations as independent; the
    percentile interval resamples whole groups (sequences) with replacement,
    which keeps their within-group dependence. Replicates in which x or y is
    constant (rho undefined) are dropped. If x or y is constant in the data,
    every output is NaN. Returns (rho, p, low, high).
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.ndim != 1 or x.shape != y.shape or len(x) < 3:
        raise ValueError("x and y must be 1-D samples of the same length >= 3")
    if np.shape(groups) != x.shape:
        raise ValueError("groups needs one group label per observation")
    if not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")
    nan = float("nan")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return nan, nan, nan, nan
    res = sps.spearmanr(x, y)
    (g,), S = _group_codes(groups)
    members = [np.flatnonzero(g == s) for s in range(S)]
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_boot):
        idx = np.concatenate([members[s] for s in rng.integers(0, S, size=S)])
        xb, yb = x[idx], y[idx]
        if np.ptp(xb) > 0 and np.ptp(yb) > 0:
            boot.append(sps.spearmanr(xb, yb).statistic)
    level = current_level() if level is None else level
    a = (1 - level) / 2
    lo, hi = (float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))) \
        if boot else (nan, nan)
    return float(res.statistic), float(res.pvalue), lo, hi


def pooled_mean_bootstrap(
    values, groups, n_boot: int = 2000, seed: int = 0, level: float | None = None,
) -> tuple[float, float, float]:
    """Mean over observations with a percentile CI resampling their groups (sequences).

    ``ratio_bootstrap`` of per-group sums over per-group counts. Returns
    (estimate, low, high).
    """
    values = np.asarray(values, float)
    if values.ndim != 1 or not len(values) or np.shape(groups) != values.shape:
        raise ValueError("values must be a non-empty 1-D sample with one group each")
    (g,), S = _group_codes(groups)
    return ratio_bootstrap(np.bincount(g, values, S), np.bincount(g, minlength=S),
                           n_boot, seed, level)


NOT_MEASURED = "not measured"  # how the book shows a missing value (NaN)
UNBOUNDED = "unbounded"  # an infinite value (a ratio over zero)


def with_interval(value: float, low: float = math.nan, high: float = math.nan) -> str:
    """``value [low, high]`` to the decimals the interval supports: two
    significant digits of its width (13.241, 10.52, 17.46 -> "13.2 [10.5, 17.5]");
    "not measured" for a missing (NaN) value and "unbounded" for an infinite
    one; the value alone (4 significant digits) where the interval is missing
    or has no width; an infinite end shown as "open"; at most 6 decimals. The
    book's one number formatter: the dashboard and the landing page use it."""
    if math.isnan(value):
        return NOT_MEASURED
    if math.isinf(value):
        return UNBOUNDED
    one_open = math.isinf(low) or math.isinf(high)
    if one_open and not (math.isnan(low) or math.isnan(high)):
        shown = [("open" if math.isinf(x) else f"{x:.3g}") for x in (low, high)]
        return f"{value:.3g} [{shown[0]}, {shown[1]}]"
    scale = max(abs(value), abs(low), abs(high), 1e-12) if np.isfinite(low) else 1
    if (not (np.isfinite(low) and np.isfinite(high)) or high <= low
            or (high - low) < 1e-9 * scale):  # no width worth printing
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    decimals = min(6, max(0, 1 - int(np.floor(np.log10(high - low)))))
    return f"{value:.{decimals}f} [{low:.{decimals}f}, {high:.{decimals}f}]"
