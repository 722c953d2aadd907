"""Semantic IDs, the size-matched random control, chance levels, permutation test."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from dlmspec_min.measures.stats import rate_ci
from dlmspec_min.ssld import semantic
from dlmspec_min.ssld.semantic import (
    cluster_marginal,
    fit_semantic_ids,
    frequency_chance,
    kmeans,
    majority_chance,
    one_sided_p,
    permutation_test,
    random_clusterings,
)

V, D = 60, 6
SPECIAL = (0, 3, 59)


def _embeddings(seed=0, n=V, d=D):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def sid():
    return fit_semantic_ids(_embeddings(), K=7, seed=0, special_ids=SPECIAL)


def _same_partition(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Two labelings induce the same partition (up to renaming labels)."""
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def test_kmeans_recovers_separated_blobs():
    g = torch.Generator().manual_seed(1)
    centers = torch.tensor([[10.0, 0], [0, 10.0], [-10.0, -10.0]])
    truth = torch.arange(3).repeat_interleave(20)
    x = centers[truth] + 0.3 * torch.randn(60, 2, generator=g)
    labels, c = kmeans(x, 3, torch.Generator().manual_seed(0))
    assert _same_partition(labels, truth)
    for k in range(3):  # each centroid is its cluster's mean
        torch.testing.assert_close(c[k], x[labels == k].mean(0))


def test_kmeans_is_deterministic_and_validates():
    x = _embeddings(2)
    a = kmeans(x, 5, torch.Generator().manual_seed(3))[0]
    b = kmeans(x, 5, torch.Generator().manual_seed(3))[0]
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="K must be"):
        kmeans(x, V + 1, torch.Generator())
    with pytest.raises(ValueError, match=r"\(N, D\)"):
        kmeans(x[0], 2, torch.Generator())


def test_every_cluster_is_used_even_with_duplicate_points():
    x = torch.zeros(10, 2)
    x[5:] = 1.0  # only two distinct points, three clusters asked
    labels, _ = kmeans(x, 3, torch.Generator().manual_seed(0))
    assert set(labels.tolist()) == {0, 1, 2}


def test_semantic_ids_cover_regular_tokens_and_bucket_specials(sid):
    special = torch.zeros(V, dtype=torch.bool)
    special[list(SPECIAL)] = True
    assert torch.equal(sid.special, special)
    assert sid.n_clusters == 7 and sid.K == 7 and sid.levels == 1
    assert (sid.flat[special] == sid.special_bucket).all()
    assert (sid.codes[special] == -1).all()
    assert sid.flat[~special].max() < 7 and sid.flat[~special].min() >= 0
    assert int(sid.sizes().sum()) == V - len(SPECIAL)
    assert (sid.sizes() > 0).all()
    ids = torch.tensor([[1, 2], [3, 4]])
    assert torch.equal(sid(ids), sid.flat[ids])


def test_semantic_ids_use_directions_only():
    """Rescaling embedding rows by positive factors leaves the IDs unchanged."""
    emb = _embeddings()
    scale = torch.rand(V, 1, generator=torch.Generator().manual_seed(5)) * 9 + 0.1
    a = fit_semantic_ids(emb, 7, seed=0, special_ids=SPECIAL)
    b = fit_semantic_ids(emb * scale, 7, seed=0, special_ids=SPECIAL)
    assert torch.equal(a.flat, b.flat)


def test_semantic_ids_are_deterministic_and_validate():
    emb = _embeddings()
    a = fit_semantic_ids(emb, 7, seed=4, special_ids=SPECIAL)
    b = fit_semantic_ids(emb, 7, seed=4, special_ids=SPECIAL)
    assert torch.equal(a.flat, b.flat)
    with pytest.raises(ValueError, match="K must be"):
        fit_semantic_ids(emb, V, special_ids=SPECIAL)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        fit_semantic_ids(emb, 4, special_ids=[V])
    with pytest.raises(ValueError, match="levels"):
        fit_semantic_ids(emb, 4, levels=0)


def test_residual_codes_refine_the_first_level():
    emb = _embeddings(7)
    two = fit_semantic_ids(emb, 4, seed=0, special_ids=SPECIAL, levels=2)
    one = fit_semantic_ids(emb, 4, seed=0, special_ids=SPECIAL)
    assert two.levels == 2 and 4 < two.n_clusters <= 16
    assert torch.equal(two.codes[:, 0], one.codes[:, 0])  # same first level
    reg = ~two.special
    # same flat id <=> same whole tuple ("exact" = the whole tuple matches)
    for i, j in itertools.combinations(reg.nonzero().flatten().tolist(), 2):
        same_tuple = bool((two.codes[i] == two.codes[j]).all())
        assert same_tuple == bool(two.flat[i] == two.flat[j])


def test_random_clustering_keeps_the_multiset_of_sizes(sid):
    g = torch.Generator().manual_seed(0)
    codes = random_clusterings(sid, 50, g)  # (50, V)
    sizes = sorted(sid.sizes().tolist())
    for row in codes:
        got = torch.bincount(row[~sid.special], minlength=sid.n_clusters)
        assert sorted(got.tolist()) == sizes  # the multiset of cluster sizes
        assert torch.equal(row[sid.special], sid.flat[sid.special])  # specials fixed
    assert not all(torch.equal(row, sid.flat) for row in codes)
    control = sid.permuted(torch.Generator().manual_seed(1))
    assert control.kind == "random"
    assert sorted(control.sizes().tolist()) == sizes
    assert torch.equal(control.sizes().sort().values, sid.sizes().sort().values)


def test_random_clustering_is_uniform_over_tokens(sid):
    """A token lands in cluster s with probability size_s / n (a permutation)."""
    codes = random_clusterings(sid, 6000, torch.Generator().manual_seed(2))
    token = 1  # a regular token
    freq = torch.bincount(codes[:, token], minlength=sid.n_clusters + 1)[:-1] / 6000
    expected = sid.sizes() / sid.sizes().sum()
    assert float((freq - expected).abs().max()) < 0.03  # ~4 standard errors


def test_cluster_marginal_matches_a_loop(sid):
    probs = torch.softmax(torch.randn(2, 3, V, generator=torch.Generator()
                                      .manual_seed(0)).double(), dim=-1)
    got = cluster_marginal(probs, sid)  # (2, 3, K)
    ref = torch.zeros(2, 3, sid.n_clusters, dtype=torch.double)
    for v in range(V):
        if not sid.special[v]:
            ref[..., sid.flat[v]] += probs[..., v]
    torch.testing.assert_close(got, ref)
    special_mass = probs[..., sid.special].sum(-1)
    torch.testing.assert_close(got.sum(-1) + special_mass, torch.ones(2, 3).double())
    with pytest.raises(ValueError, match="one vocabulary"):
        cluster_marginal(probs[..., :-1], sid)


def test_best_token_in_cluster_matches_brute_force(sid):
    logits = torch.randn(4, V, generator=torch.Generator().manual_seed(3))
    clusters = torch.tensor([0, 2, 5, 6])
    got = semantic.best_token_in_cluster(logits, clusters, sid)
    for i, s in enumerate(clusters.tolist()):
        members = sid.members(s)
        assert int(got[i]) == int(members[logits[i, members].argmax()])
        assert int(sid.flat[got[i]]) == s


def test_chance_levels():
    ids = [0, 0, 1]
    assert frequency_chance(ids, 3) == pytest.approx(5 / 9)
    assert majority_chance(ids, 3) == pytest.approx(2 / 3)
    # sum P(s)^2 is the hit rate of an independent draw from P: simulate it
    rng = np.random.default_rng(0)
    p = np.array([0.5, 0.3, 0.2])
    a, b = rng.choice(3, 200_000, p=p), rng.choice(3, 200_000, p=p)
    assert frequency_chance(a, 3) == pytest.approx(np.mean(a == b), abs=0.005)
    with pytest.raises(ValueError, match="special"):
        frequency_chance([0, 3], 3)
    with pytest.raises(ValueError, match="nothing"):
        frequency_chance([], 3)


def test_uniform_chance(sid):
    assert semantic.uniform_chance(sid) == pytest.approx(1 / 7)


def test_one_sided_p_formula():
    assert one_sided_p([0.1, 0.2, 0.3], 0.0) == pytest.approx(1 / 4)
    assert one_sided_p([0.1, 0.2, 0.3], 0.2) == pytest.approx(3 / 4)
    assert one_sided_p([0.1, 0.2, 0.3], 1.0) == pytest.approx(1.0)


def test_permutation_test_equals_a_reference_loop(sid):
    g = torch.Generator().manual_seed(0)
    d = torch.randint(0, V, (40,), generator=g)
    t = torch.randint(0, V, (40,), generator=g)
    res = permutation_test(d, t, sid, 23, torch.Generator().manual_seed(9), chunk=5)
    direct = float((sid.flat[d] == sid.flat[t]).float().mean())
    assert res.alpha == pytest.approx(direct)
    # the same permutations, drawn chunk by chunk with the same generator
    g2 = torch.Generator().manual_seed(9)
    codes = torch.cat([random_clusterings(sid, n, g2) for n in (5, 5, 5, 5, 3)])
    ref = [float(np.mean([int(c[a]) == int(c[b]) for a, b in zip(d, t, strict=True)]))
           for c in codes]
    np.testing.assert_allclose(res.null, ref)
    assert res.p_random_more == pytest.approx(
        (1 + sum(r <= res.alpha for r in ref)) / 24)


def test_permutation_test_directions(sid):
    reg = (~sid.special).nonzero().flatten()
    flat = sid.flat[reg]
    # pairs always in DIFFERENT semantic clusters: random clusterings accept more
    i, j = torch.meshgrid(torch.arange(len(reg)), torch.arange(len(reg)), indexing="ij")
    diff = flat[i] != flat[j]
    d, t = reg[i[diff]], reg[j[diff]]
    res = permutation_test(d, t, sid, 200, torch.Generator().manual_seed(0))
    assert res.alpha == 0 and res.null_mean > 0 and res.p_random_more < 0.01
    # pairs always in the SAME cluster: the semantic clustering accepts more
    same = (flat[i] == flat[j]) & (i != j)
    res = permutation_test(reg[i[same]], reg[j[same]], sid, 200,
                           torch.Generator().manual_seed(0))
    assert res.alpha == 1 and res.null_mean < 1 and res.p_random_more == 1
    with pytest.raises(ValueError, match="same non-zero"):
        permutation_test(d[:3], t[:4], sid, 5, torch.Generator())


def test_rate_ci_stays_open_at_zero_hits():
    est, lo, hi = rate_ci(np.zeros(20), np.full(20, 10), seed=0)
    assert est == 0 and lo == 0
    assert hi == pytest.approx(1 - 0.025 ** (1 / 200))  # Clopper-Pearson, k = 0
    est, lo, hi = rate_ci([1, 2, 0, 3], [10, 10, 10, 10], seed=0)
    assert est == pytest.approx(6 / 40) and lo < est < hi


def test_random_minus_semantic_on_synthetic_pairs(sid):
    reg = (~sid.special).nonzero().flatten()
    flat = sid.flat[reg]
    i, j = torch.meshgrid(torch.arange(len(reg)), torch.arange(len(reg)), indexing="ij")
    q = semantic.same_cluster_chance(sid)
    B, G = 6, 10
    g = torch.Generator().manual_seed(1)
    # distinct regular tokens in DIFFERENT semantic clusters: semantic accepts
    # none, a random clustering each with q, so the difference is q exactly
    pick = (flat[i] != flat[j]).nonzero()
    rows = pick[torch.randint(0, len(pick), (B * G,), generator=g)]
    d, t = reg[rows[:, 0]].view(B, G), reg[rows[:, 1]].view(B, G)
    where = torch.ones(B, G, dtype=torch.bool)
    est, lo, hi = semantic.random_minus_semantic(d, t, where, sid, 200, 0)
    assert est == pytest.approx(q) and lo == pytest.approx(q) and hi == pytest.approx(q)
    # distinct tokens in the SAME cluster: semantic accepts all, random q: q - 1
    pick = ((flat[i] == flat[j]) & (i != j)).nonzero()
    rows = pick[torch.randint(0, len(pick), (B * G,), generator=g)]
    d2, t2 = reg[rows[:, 0]].view(B, G), reg[rows[:, 1]].view(B, G)
    est, lo, hi = semantic.random_minus_semantic(d2, t2, where, sid, 200, 0)
    assert est == pytest.approx(q - 1) and hi == pytest.approx(q - 1)
    # half the sequences of each kind: the estimate is their anchor-weighted mean,
    # the interval spans both and covers it
    mixed_d, mixed_t = torch.cat([d[:3], d2[:3]]), torch.cat([t[:3], t2[:3]])
    est, lo, hi = semantic.random_minus_semantic(mixed_d, mixed_t, where, sid, 500, 0)
    assert est == pytest.approx(q - 0.5)
    assert q - 1 <= lo < est < hi <= q
    # it agrees with the closed-form mean and the semantic rate on the anchors
    where = torch.rand(B, G, generator=g) < 0.5
    d3 = torch.randint(0, V, (B, G), generator=g)
    t3 = torch.where(torch.rand(B, G, generator=g) < 0.3, d3,
                     torch.randint(0, V, (B, G), generator=g))
    est, _, _ = semantic.random_minus_semantic(d3, t3, where, sid, 50, 0)
    semantic_rate = float((sid(d3[where]) == sid(t3[where])).double().mean())
    assert est == pytest.approx(
        semantic.expected_random_alpha(d3[where], t3[where], sid) - semantic_rate)
    with pytest.raises(ValueError, match="one shape"):
        semantic.random_minus_semantic(d3, t3[:2], where, sid)
