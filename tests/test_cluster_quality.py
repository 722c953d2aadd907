"""C4/C5 additions: the sparse permutation test, its closed form, quality metrics."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from dlmspec_min.measures import quality
from dlmspec_min.ssld import semantic


def _sid(sizes=(3, 2, 1), n_special=2):
    """A hand-made partition: specials first, then clusters of the given sizes."""
    labels = [k for k, s in enumerate(sizes) for _ in range(s)]
    V = n_special + len(labels)
    n_clusters = len(sizes)
    flat = torch.tensor([n_clusters] * n_special + labels)
    special = torch.zeros(V, dtype=torch.bool)
    special[:n_special] = True
    codes = torch.where(special, -1, flat)[:, None]
    return semantic.SemanticIDs(codes=codes, flat=flat, special=special,
                                n_clusters=n_clusters, K=n_clusters)


def _brute_force_alpha(d, t, sid):
    """Mean alpha_clu over EVERY permutation of the regular tokens (exact)."""
    regular = (~sid.special).nonzero().flatten()
    vals = []
    for perm in itertools.permutations(range(len(regular))):
        flat = sid.flat.clone()
        flat[regular] = sid.flat[regular][list(perm)]
        vals.append(float((flat[d] == flat[t]).double().mean()))
    return float(np.mean(vals))


def test_closed_form_equals_enumeration_over_all_permutations():
    sid = _sid()
    d = torch.tensor([2, 2, 3, 0, 1, 7, 4])
    t = torch.tensor([2, 3, 7, 1, 5, 6, 4])  # equal, distinct, special pairs
    assert semantic.expected_random_alpha(d, t, sid) == pytest.approx(
        _brute_force_alpha(d, t, sid), abs=1e-12)
    # sizes 3, 2, 1 over n = 6: (6 + 2 + 0) / 30
    assert semantic.same_cluster_chance(sid) == pytest.approx(8 / 30)


def test_random_labels_keep_sizes_and_specials():
    sid = _sid((4, 3, 2, 1), n_special=3)
    tokens = torch.arange(sid.vocab_size)  # every token: each row is a partition
    labels = semantic.random_labels(sid, tokens, 300, torch.Generator().manual_seed(0))
    assert labels.shape == (300, sid.vocab_size)
    assert (labels[:, :3] == sid.n_clusters).all()
    for row in labels[:, 3:]:
        assert torch.equal(torch.bincount(row, minlength=4), sid.sizes())
    # and the labels are not always the semantic ones
    assert not (labels == sid.flat).all(dim=1).all()


def test_random_labels_match_the_full_permutation_in_distribution():
    sid = _sid((3, 2, 1), n_special=2)
    tokens = torch.tensor([2, 4, 7])
    R = 20000
    fast = semantic.random_labels(sid, tokens, R, torch.Generator().manual_seed(1))
    g2 = torch.Generator().manual_seed(2)
    full = semantic.random_clusterings(sid, R, g2)[:, tokens]
    for a in (fast, full):  # each regular token's label ~ sizes / n
        for j in range(3):
            freq = torch.bincount(a[:, j], minlength=3).double() / R
            want = torch.tensor([3, 2, 1], dtype=torch.float64) / 6.0
            assert torch.allclose(freq, want, atol=0.015)
        merged = (a[:, 0] == a[:, 1]).double().mean().item()
        assert merged == pytest.approx(8 / 30, abs=0.015)


def test_random_labels_reject_repeated_tokens():
    with pytest.raises(ValueError, match="distinct"):
        semantic.random_labels(_sid(), torch.tensor([2, 2]), 5, torch.Generator())


def test_fast_permutation_test_alpha_p_and_null_mean():
    emb = torch.randn(300, 8, generator=torch.Generator().manual_seed(0))
    sid = semantic.fit_semantic_ids(emb, 12, seed=0, special_ids=range(4))
    g = torch.Generator().manual_seed(3)
    d = torch.randint(4, 40, (200,), generator=g)
    t = torch.randint(4, 40, (200,), generator=g)
    t[:30] = d[:30]
    g4 = torch.Generator().manual_seed(4)
    res = semantic.permutation_test_fast(d, t, sid, 4000, g4)
    assert res.alpha == pytest.approx(float((sid(d) == sid(t)).double().mean()))
    assert res.null.shape == (4000,)
    assert res.p_random_more == pytest.approx(
        (1 + np.sum(res.null <= res.alpha)) / 4001)
    assert res.null_mean == pytest.approx(semantic.expected_random_alpha(d, t, sid),
                                          abs=0.01)
    assert res.null.min() >= 30 / 200  # equal tokens always agree
    slow = semantic.permutation_test(d, t, sid, 4000, torch.Generator().manual_seed(5))
    assert slow.null_mean == pytest.approx(res.null_mean, abs=0.01)


def test_fast_permutation_test_is_deterministic_and_degenerate_case():
    sid = _sid()
    d = torch.tensor([2, 3, 4])
    r1 = semantic.permutation_test_fast(d, d, sid, 50, torch.Generator().manual_seed(0))
    r2 = semantic.permutation_test_fast(d, d, sid, 50, torch.Generator().manual_seed(0))
    assert np.array_equal(r1.null, r2.null)
    assert r1.alpha == 1.0 and r1.p_random_more == 1.0  # every null value ties
    with pytest.raises(ValueError):
        semantic.permutation_test_fast(d, d[:2], sid, 5, torch.Generator())


def test_pair_merge_table_counts_confusions():
    sid = _sid((3, 2, 1))  # tokens 2,3,4 | 5,6 | 7
    d = torch.tensor([2, 2, 2, 5, 7, 3])
    t = torch.tensor([3, 3, 5, 6, 7, 3])
    table, share = semantic.pair_merge_table(d, t, sid)
    assert table["count"].tolist() == [2, 1, 1]  # (2,3) twice, then (2,5), (5,6)
    assert table["same semantic cluster"].tolist() == [1, 0, 1]
    assert share == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="no confusions"):
        semantic.pair_merge_table(d, d, sid)


def test_repetition():
    x = torch.tensor([[5, 5, 5, 6], [1, 2, 3, 4], [0, 0, 7, 7]])
    assert quality.repetition(x, 1).tolist() == [0.5, 0.0, 0.5]
    assert quality.repetition(x, 2).tolist() == pytest.approx([1 / 3, 0, 0])
    r = quality.repetition(x, 1, ignore=[0])
    assert r[2] == pytest.approx(0.5)
    assert math.isnan(quality.repetition(torch.tensor([[0, 0]]), 1, ignore=[0])[0])
    with pytest.raises(ValueError):
        quality.repetition(x, 0)


def test_agreement_drop_is_token_weighted_and_paired():
    top1 = np.array([0.5, 0.0, 1.0])
    n = np.array([10, 0, 30])
    est, lo, hi = quality.agreement_drop(top1, n, top1, n, 500, 0)
    assert est == 0 and lo == 0 and hi == 0  # paired: identical sides never differ
    worse = np.array([0.1, 0.0, 0.2])
    est, lo, hi = quality.agreement_drop(top1, n, worse, n, 500, 0)
    assert est == pytest.approx((5 + 30) / 40 - (1 + 6) / 40)
    assert lo <= est <= hi and lo > 0
    with pytest.raises(ValueError):
        quality.agreement_drop(top1, n, worse[:2], n[:2])


def test_within_bound():
    assert quality.within_bound(0.05, 0.05) and not quality.within_bound(0.06, 0.05)
    assert quality.within_bound(-0.1, 0.05)
    assert not quality.within_bound(float("nan"), 0.05)
    rows = torch.tensor([[1, 2, 1, 2, 1, 2], [1, 2, 3, 4, 5, 6], [7, 7, 7, 7, 7, 7]])
    mean, lo, hi = quality.repetition_ci(rows, 2, n_boot=200, seed=0)
    assert mean == pytest.approx((0.6 + 0.0 + 0.8) / 3) and lo <= mean <= hi
    assert all(map(np.isnan, quality.repetition_ci(rows[:, :1], 2)))
    with pytest.raises(ValueError):
        quality.within_bound(0.0, 1.5)


class _Tok:
    def decode(self, ids, skip_special_tokens=True):
        return " ".join(str(i) for i in ids if not (skip_special_tokens and i < 5))


def test_texts_of_drops_specials():
    ids = torch.tensor([[2, 7, 8], [9, 3, 4]])
    assert quality.texts_of(_Tok(), ids) == ["7 8", "9"]
