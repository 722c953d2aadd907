"""The crossing grid (regime page, issue 55): K chosen from bits, the first
crossing and its draws, the end-point line's test, drafts summed within clusters."""

import math

import numpy as np
import pytest
import torch

from dlmspec_min.experiments import crossing_grid as cg
from dlmspec_min.ssld.semantic import fit_semantic_ids


def test_choose_K_spans_the_bits_from_K_32_to_where_they_stop_rising():
    bits = {32: 1.0, 45: 1.2, 64: 1.5, 91: 2.0, 128: 2.4, 181: 2.8, 256: 2.96,
            362: 3.0}
    # ceiling 3.0, tolerance 0.05: bits stop rising at 256 (2.96 >= 2.95)
    Ks = cg.choose_K(bits, 3.0, 0.05, 5)
    assert Ks[0] == 32 and Ks[-1] == 256 and len(set(Ks)) == 5
    # the quarter points 1.49, 1.98, 2.47: the ladder K nearest to each
    assert Ks == [32, 64, 91, 128, 256]
    # bits that reach the ceiling at once: the five smallest ladder K
    flat = dict.fromkeys(bits, 3.0)
    assert cg.choose_K(flat, 3.0, 0.05, 5) == [32, 45, 64, 91, 128]
    # never within the tolerance: up to the largest ladder K
    assert cg.choose_K(bits, 9.0, 0.05, 5)[-1] == 362
    with pytest.raises(ValueError, match="at least n_k"):
        cg.choose_K({32: 1.0, 64: 2.0}, 2.0, 0.05, 5)


def test_the_first_crossing_interpolates_the_first_turn_and_marks_the_ends():
    bits = np.array([1.0, 2.0, 3.0, 4.0])
    m = np.array([[-0.2, -0.1, 0.1, 0.2],     # turns between 2 and 3: at 2.5
                  [-0.2, -0.1, -0.05, -0.01],  # never: +inf
                  [0.1, 0.2, 0.3, 0.4],        # above 0 from the first: -inf
                  [0.1, -0.1, 0.1, 0.2],       # first turn from < 0 to >= 0: 2.5
                  [-0.3, 0.0, 0.1, 0.2]])      # reaches 0 exactly at 2
    x = cg.first_crossing(bits, m)
    assert x[0] == pytest.approx(2.5) and x[1] == math.inf and x[2] == -math.inf
    assert x[3] == pytest.approx(2.5) and x[4] == pytest.approx(2.0)
    assert cg.sign_changes(m[3]) == 2 and cg.sign_changes(m[0]) == 1
    assert cg.sign_changes(m[1]) == 0


def test_the_end_point_line_is_rejected_only_where_the_middle_leaves_it():
    rng = np.random.default_rng(0)
    bits = np.array([1.0, 2.0, 3.0, 4.0])
    straight = np.array([-0.3, -0.1, 0.1, 0.3])
    noise = rng.normal(0, 0.02, (2000, 4))
    ok = cg.end_line_test(bits, straight, straight + noise, (0, 3))
    assert ok["line_df"] == 2 and ok["line_p"] > 0.05
    assert ok["line_cross"] == pytest.approx(2.5)
    bent = np.array([-0.3, 0.2, 0.25, 0.3])  # jumps past 0 at once
    bad = cg.end_line_test(bits, bent, bent + noise, (0, 3))
    assert bad["line_p"] < 1e-6 and bad["line_worst"] == pytest.approx(0.3)


def test_margin_draws_resample_questions_jointly_for_the_bar_and_every_point():
    hits = np.array([[2, 2, 2, 2]])  # one codebook, four questions, 2 of 4 hit
    trials = np.array([4, 4, 4, 4])
    nfe = np.array([8.0, 8.0, 8.0, 8.0])  # tau = 32 / 8 = 4: alpha* 0.75
    d = cg.margin_draws([{"hits": hits}, {"hits": hits * 2}], trials, nfe, 32, 50, 0)
    assert d.shape == (50, 2)
    assert np.allclose(d[:, 0], 0.25) and np.allclose(d[:, 1], -0.25)


def test_a_token_distribution_summed_within_clusters_drafts_the_heaviest_cluster():
    V = 6
    sid = fit_semantic_ids(torch.eye(V), 3, seed=0, special_ids=set())
    probs = torch.zeros(1, 2, V, dtype=torch.float64)
    # position 0: two tokens of one cluster outweigh the single most probable token
    members = [sid.members(c).tolist() for c in range(3)]
    big = next(m for m in members if len(m) >= 2)
    lone = next(t for m in members if m != big for t in m)
    probs[0, 0, big[0]] = probs[0, 0, big[1]] = 0.3
    probs[0, 0, lone] = 0.4
    probs[0, 1, lone] = 1.0
    tokens = torch.tensor([[big[0], big[0]]])
    anchors = torch.tensor([[True, True]])
    hits, lack = cg.draft_hits(probs, [sid], tokens, anchors)
    assert hits.tolist() == [[1]]  # position 0 hit, position 1 drafted lone's cluster
    # bits lacked: -log2 0.6 at position 0, position 1 capped (q = 0)
    assert lack == pytest.approx((-math.log2(0.6) - math.log2(1e-300)) / 2)


def test_the_token_head_puts_its_mass_on_the_tokens_seen_at_training_anchors():
    torch.manual_seed(0)
    feats = torch.randn(40, 3, 4)
    targets = torch.randint(0, 5, (40, 3))
    keep = torch.ones(40, 3, dtype=torch.bool)
    keep[:, 2] = False
    head, tokens = cg.fit_token_head(feats, targets, keep, 9)
    assert tokens.tolist() == sorted(set(targets[keep].tolist()))
    p = cg.head_token_probs(head, tokens, feats[:2], 9)
    assert p.shape == (2, 3, 9)
    assert torch.allclose(p.sum(-1), torch.ones(2, 3, dtype=p.dtype))
    assert (p[..., 5:] == 0).all()  # never at a training anchor
    with pytest.raises(ValueError, match="outside the vocabulary"):
        cg.fit_token_head(feats, targets, keep, 3)
