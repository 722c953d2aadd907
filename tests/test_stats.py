"""Statistics helpers against independent reference computations (no models)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from dlmspec_min.measures import stats


def _pairwise_auc(x, y) -> float:
    """Reference: P(X > Y) + 0.5 P(X = Y) by comparing every pair."""
    x, y = np.asarray(x, float)[:, None], np.asarray(y, float)[None, :]
    return float(((x > y) + 0.5 * (x == y)).mean())


def _grouped_sample(seed=0, n_groups=12, shift=0.0, ties=True):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 8, size=n_groups)
    groups = np.repeat(np.arange(n_groups), sizes)
    values = rng.normal(size=len(groups)) + shift
    if ties:
        values = np.round(values, 1)  # many ties, as decode steps have
    return values, groups


def test_mann_whitney_auc_and_p():
    x, _ = _grouped_sample(0, shift=1.0)
    y, _ = _grouped_sample(1)
    auc, p = stats.mann_whitney(x, y)
    assert auc == pytest.approx(_pairwise_auc(x, y))
    auc_rev, p_rev = stats.mann_whitney(y, x)
    assert auc + auc_rev == pytest.approx(1.0)
    assert p == pytest.approx(p_rev)
    assert p == pytest.approx(sps.mannwhitneyu(x, y, alternative="two-sided").pvalue)
    far, _ = stats.mann_whitney(np.arange(50) + 100, np.arange(50))
    assert far == 1.0
    _, p_same = stats.mann_whitney(np.arange(40) % 7, np.arange(40) % 7)
    assert p_same > 0.9
    with pytest.raises(ValueError, match="non-empty"):
        stats.mann_whitney([], [1.0])


def test_auc_bootstrap_matches_a_resampling_loop():
    x, gx = _grouped_sample(2, shift=0.5)
    y, gy = _grouped_sample(3)
    gx, gy = gx * 10, gy * 10 + 5  # labels need not be 0..S-1, nor shared
    n_boot, seed = 200, 7
    est, lo, hi = stats.auc_bootstrap(x, y, gx, gy, n_boot=n_boot, seed=seed)
    assert est == pytest.approx(_pairwise_auc(x, y))
    # reference: the same draws, realised by concatenating the drawn groups
    labels = np.unique(np.concatenate([gx, gy]))
    idx = np.random.default_rng(seed).integers(0, len(labels), (n_boot, len(labels)))
    boot = []
    for draw in idx:
        xs = np.concatenate([x[gx == labels[i]] for i in draw])
        ys = np.concatenate([y[gy == labels[i]] for i in draw])
        if len(xs) and len(ys):
            boot.append(_pairwise_auc(xs, ys))
    assert lo == pytest.approx(np.quantile(boot, 0.025))
    assert hi == pytest.approx(np.quantile(boot, 0.975))
    assert lo <= est <= hi


def test_auc_bootstrap_interval_narrows_with_more_groups_and_checks_inputs():
    widths = []
    for n in (8, 200):
        x, gx = _grouped_sample(4, n_groups=n, shift=0.3)
        y, gy = _grouped_sample(5, n_groups=n)
        _, lo, hi = stats.auc_bootstrap(x, y, gx, gy, n_boot=300)
        widths.append(hi - lo)
    assert widths[1] < widths[0] / 2
    with pytest.raises(ValueError, match="group label"):
        stats.auc_bootstrap([1.0, 2.0], [0.0], [0], [0])
    with pytest.raises(ValueError, match="n_boot"):
        stats.auc_bootstrap([1.0], [0.0], [0], [1], n_boot=0)


def _sandwich(y, X, groups):
    """Reference cluster-robust covariance with the usual small-sample factor."""
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    e = y - X @ beta
    bread = np.linalg.inv(X.T @ X)
    meat = np.zeros((X.shape[1], X.shape[1]))
    labels = np.unique(groups)
    for g in labels:
        s = X[groups == g].T @ e[groups == g]
        meat += np.outer(s, s)
    n, k, G = len(y), X.shape[1], len(labels)
    factor = G / (G - 1) * (n - 1) / (n - k)
    return beta, np.sqrt(np.diag(factor * bread @ meat @ bread))


def test_clustered_ols_matches_the_sandwich_formula():
    rng = np.random.default_rng(0)
    n_groups, per = 30, 6
    groups = np.repeat(np.arange(n_groups), per)
    u = rng.normal(size=n_groups)[groups]  # a shared shock per cluster
    x1 = rng.integers(0, 2, size=len(groups)).astype(float)
    x2 = rng.normal(size=len(groups))
    y = 0.3 + 0.2 * x1 - 0.1 * x2 + u + 0.5 * rng.normal(size=len(groups))
    X = pd.DataFrame({"const": 1.0, "x1": x1, "x2": x2})
    fit = stats.clustered_ols(y, X, groups)
    beta, se = _sandwich(y, X.to_numpy(), groups)
    np.testing.assert_allclose(fit["coef"], beta, rtol=1e-10)
    np.testing.assert_allclose(fit["se"], se, rtol=1e-8)
    z = fit["coef"] / fit["se"]
    np.testing.assert_allclose(fit["p"], 2 * sps.norm.sf(np.abs(z)), rtol=1e-8)
    assert (fit["low"] < fit["coef"]).all() and (fit["coef"] < fit["high"]).all()
    assert fit.attrs == {"n": len(y), "n_clusters": n_groups}
    # the cluster shock makes the constant's clustered SE exceed the iid one
    iid = np.sqrt(np.diag(np.linalg.inv(X.T @ X)) * np.var(y - X @ beta, ddof=3))
    assert fit.loc["const", "se"] > 1.5 * iid[0]


def test_clustered_ols_rejects_bad_inputs():
    X = pd.DataFrame({"const": np.ones(4)})
    with pytest.raises(ValueError, match="DataFrame"):
        stats.clustered_ols(np.ones(4), np.ones((4, 1)), [0, 0, 1, 1])
    with pytest.raises(ValueError, match="two clusters"):
        stats.clustered_ols(np.arange(4.0), X, [0, 0, 0, 0])
    with pytest.raises(ValueError, match="same number"):
        stats.clustered_ols(np.arange(3.0), X, [0, 0, 1, 1])


def test_seed_pooled_rate_averages_seeds_and_widens_with_their_spread():
    """The estimate is the mean of the per-seed rates; the interval counts the
    spread between seeds (two seeds at 0.1 and 0.5 give an interval spanning
    both), reduces to rate_ci's with one seed, and stays open at zero hits."""
    rng = np.random.default_rng(0)
    trials = np.full(40, 10)
    low = rng.binomial(10, 0.1, size=40)
    high = rng.binomial(10, 0.5, size=40)
    est, lo, hi = stats.seed_pooled_rate(np.stack([low, high]), trials, 2000, 0)
    assert est == pytest.approx((low.sum() + high.sum()) / (2 * trials.sum()))
    assert lo < low.sum() / trials.sum() + 0.03
    assert hi > high.sum() / trials.sum() - 0.03
    # one seed: the sequence bootstrap of rate_ci, up to the draw
    one = stats.seed_pooled_rate(low[None], trials, 4000, 0)
    ref = stats.rate_ci(low, trials, 4000, 0)
    assert one[0] == pytest.approx(ref[0])
    assert one[1] == pytest.approx(ref[1], abs=0.01)
    assert one[2] == pytest.approx(ref[2], abs=0.01)
    # two identical seeds add no spread: the same interval as one seed, up to the draw
    twice = stats.seed_pooled_rate(np.stack([low, low]), trials, 4000, 0)
    assert twice[0] == pytest.approx(one[0])
    assert twice[2] - twice[1] < (hi - lo) / 3
    zero = stats.seed_pooled_rate(np.zeros((3, 40)), trials, 500, 0)
    assert zero[0] == 0 and zero[1] == 0 and zero[2] > 0
    assert stats.seed_pooled_rate(np.stack([low, high]), trials, 500, 7) == \
        stats.seed_pooled_rate(np.stack([low, high]), trials, 500, 7)
    with pytest.raises(ValueError, match="seeds, sequences"):
        stats.seed_pooled_rate(low, trials)
    with pytest.raises(ValueError, match="hits <= trials"):
        stats.seed_pooled_rate(np.stack([trials + 1]), trials)
    with pytest.raises(ValueError, match="n_boot"):
        stats.seed_pooled_rate(low[None], trials, 0)


@pytest.mark.parametrize("args, shown", [
    ((13.241379, 10.52, 17.46), "13.2 [10.5, 17.5]"),
    ((0.9641, 0.9312, 0.9951), "0.964 [0.931, 0.995]"),
    ((1.4123, 1.23, 1.59), "1.41 [1.23, 1.59]"),
    ((412.0, 300.0, 520.0), "412 [300, 520]"),
    ((float("nan"), 0.1, 0.2), "not measured"),
    ((float("inf"), 0.1, float("inf")), "unbounded"),
    ((3.19, float("-inf"), 3.87), "3.19 [open, 3.87]"),
    ((3.93, float("-inf"), float("inf")), "3.93 [open, open]"),
    ((0.25,), "0.25"),
    ((0.5, float("nan"), float("nan")), "0.5"),
    ((16 / 3, 16 / 3, 16 / 3 + 1e-15), "5.333"),  # a width of a few ulps
    ((1234.5, float("nan"), float("nan")), "1234"),
    ((0.123456789, 0.12345678, 0.1234568), "0.123457 [0.123457, 0.123457]"),
])
def test_with_interval_keeps_the_digits_its_interval_supports(args, shown):
    assert stats.with_interval(*args) == shown


def test_size_to_separate_follows_its_closed_form():
    from dlmspec_min.measures import power

    a, b = (0.87, 0.82, 0.92), (0.79, 0.73, 0.84)  # gap 0.08, facing 0.05 and 0.05
    n = power.size_to_separate(a, b, 12)
    z = 0.8416212335729143
    root = (0.05 * 12**0.5 * 2 + z * (2 * 0.05**2 * 12) ** 0.5 / 1.959963984540054)
    assert n == int(np.ceil((root / 0.08) ** 2)) == 32
    # at that size, the expected facing half-widths clear the gap with margin
    s = (12 / n) ** 0.5
    assert 0.08 > 0.1 * s
    assert power.size_to_separate(b, a, 12) == n  # symmetric
    assert power.size_to_separate(a, b, 12, power=0.5) < n  # less power, fewer
    assert power.size_to_separate(a, (0.87, 0.8, 0.9), 12) is None  # no gap
    assert power.size_to_separate(a, (np.nan, 0.1, 0.2), 12) is None
    assert power.separated((0.9, 0.85, 0.95), (0.7, 0.6, 0.8))
    assert not power.separated(a, b)
    with pytest.raises(ValueError, match="sizes must be ints"):
        power.size_to_separate(a, b, 0)


def test_sizes_count_the_codebooks_spread_that_questions_leave_as_it_is():
    """A mean over codebooks: its questions' share shrinks with questions, its
    codebooks' share only with codebooks (measures/power.py). The two shares
    are scaled to make the interval's own facing half-width together."""
    from dlmspec_min.measures import power

    a, b = (0.87, 0.82, 0.92), (0.79, 0.73, 0.84)  # gap 0.08, facing 0.05 and 0.05
    z, Z = 0.8416212335729143, power.Z95

    def clears(h1, h2):
        return 0.08 >= h1 + h2 + z * (h1**2 + h2**2) ** 0.5 / Z

    assert power.codebook_share(0.05, 4) == pytest.approx(Z * 0.05 / 2)
    assert power.codebook_share(float("nan"), 1) == 0.0  # one codebook: unknown
    assert power.shares(0.02, 0.05, 4) == power.shares(0.02, 0.05, 4.0) == \
        (0.02, power.codebook_share(0.05, 4))
    for unknown in ((0.02, float("nan"), 4), (0.02, 0.05, 1), (0.02, 0.05, 4.5),
                    (None, 0.05, 4), (float("inf"), 0.05, 4)):
        assert power.shares(*unknown) is None, unknown
    # no codebooks' share: the search finds the closed form's size
    assert power.size_to_separate(a, b, 12, shares_a=(0.02, 0.0)) == \
        power.size_to_separate(a, b, 12) == 32
    # a's 0.05 split 0.04 : 0.03 (scaled from 0.08 : 0.06): more questions, and
    # the smallest size that clears
    n = power.size_to_separate(a, b, 12, shares_a=(0.08, 0.06))
    assert n > 32
    assert clears(np.hypot(0.04 * (12 / n) ** 0.5, 0.03), 0.05 * (12 / n) ** 0.5)
    m = n - 1
    assert not clears(np.hypot(0.04 * (12 / m) ** 0.5, 0.03), 0.05 * (12 / m) ** 0.5)
    # b's width measured on fewer questions (C7's n_tau) shrinks faster from there
    n_b = power.size_to_separate(a, b, 12, 6, shares_a=(0.08, 0.06))
    assert n_b < n
    assert clears(np.hypot(0.04 * (12 / n_b) ** 0.5, 0.03), 0.05 * (6 / n_b) ** 0.5)
    # mostly codebooks: no number of questions would do, but codebooks would
    wide = (0.87, 0.80, 0.93), (0.79, 0.785, 0.795)  # facing 0.07 and 0.005
    assert power.size_to_separate(*wide, 12, shares_a=(0.01, 0.07)) is None
    k = power.codebooks_to_separate(*wide, 5, (0.01, 0.07))
    q, c = 0.07 * 0.01 / np.hypot(0.01, 0.07), 0.07 * 0.07 / np.hypot(0.01, 0.07)
    assert k > 5  # the run's intervals overlap, so more than the run's codebooks
    assert clears(np.hypot(q, c * (5 / k) ** 0.5), 0.005)
    assert not clears(np.hypot(q, c * (5 / (k - 1)) ** 0.5), 0.005)
    assert power.codebooks_to_separate(a, (0.79, 0.7, 0.87), 5, (0.01, 0.08)) is None
    # (b's own half-width, 0.07, leaves the gap too little whatever the codebooks)
    # neither alone: twice the questions that infinite codebooks would need, and
    # the fewest codebooks (at least the run's) that then do
    a2 = (0.87, 0.80, 0.94)  # facing 0.07, split 0.04 : 0.08
    assert power.size_to_separate(a2, b, 12, shares_a=(0.04, 0.08)) is None
    assert power.codebooks_to_separate(a2, b, 5, (0.04, 0.08)) is None
    grown, books = power.both_to_separate(a2, b, 12, 5, (0.04, 0.08))
    q, c = 0.07 * 0.04 / np.hypot(0.04, 0.08), 0.07 * 0.08 / np.hypot(0.04, 0.08)
    base = next(n for n in range(1, 10**5)
                if clears(q * (12 / n) ** 0.5, 0.05 * (12 / n) ** 0.5))
    assert grown == 2 * base
    s = (12 / grown) ** 0.5
    assert books > 5 and clears(np.hypot(q * s, c * (5 / books) ** 0.5), 0.05 * s)
    assert not clears(np.hypot(q * s, c * (5 / (books - 1)) ** 0.5), 0.05 * s)
    assert power.both_to_separate(a, a, 12, 5, (0.04, 0.08)) is None  # no gap
    with pytest.raises(ValueError, match="n_codebooks"):
        power.codebooks_to_separate(a, b, 0, (0.01, 0.02))


def test_the_spread_between_codebooks_leaves_out_what_the_questions_give_it():
    """codebooks.width_parts: codebooks scored on the same questions differ by
    their own effect and by noise that more questions shrink; the spread keeps
    the first only."""
    from dlmspec_min.ssld import codebooks

    rng = np.random.default_rng(0)
    trials = np.full(200, 8)

    def spread(effects):
        hits = rng.binomial(trials, 0.5 + np.asarray(effects)[:, None])
        return codebooks.width_parts(hits, trials, 500, 1)[0], \
            (hits.sum(1) / trials.sum()).std(ddof=1)

    kept, raw = spread([0.0] * 8)  # no codebook effect: the noise alone
    assert raw > 0.005 and kept < raw / 2
    effects = [-0.15, -0.1, -0.05, 0.0, 0.0, 0.05, 0.1, 0.15]
    kept, raw = spread(effects)
    assert kept == pytest.approx(np.std(effects, ddof=1), rel=0.1)
    assert kept <= raw
    one, q = codebooks.width_parts(np.array([[1, 2, 3]]), np.array([4, 4, 4]), 200)
    assert np.isnan(one) and q > 0  # one codebook: no spread to measure
