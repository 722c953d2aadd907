"""Information view (C8): entropies, the commit-time recorder, the replay, the bounds,
and the sequence-level statistics they feed. Toy denoisers (vocab 16)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import MASK_ID, VOCAB, CachedToyDenoiser, ToyDenoiser, make_prompt
from scipy import stats as sps

from dlmspec_min.decoding.config import DecodeConfig
from dlmspec_min.decoding.decode import generate
from dlmspec_min.measures import entropy, stats
from dlmspec_min.measures.order import one_token_per_step, row_generators
from dlmspec_min.ssld import information as inf
from dlmspec_min.ssld.semantic import cluster_marginal, fit_semantic_ids

G = 8


@pytest.fixture(scope="module")
def sid():
    emb = torch.randn(VOCAB, 4, generator=torch.Generator().manual_seed(0))
    return fit_semantic_ids(emb, 4, seed=0, special_ids=[MASK_ID])


# --- entropies -----------------------------------------------------------------------


def test_entropy_of_uniform_is_log_v_and_of_one_hot_is_zero():
    V = 12
    assert entropy.entropy(torch.zeros(3, V)).tolist() == pytest.approx(
        [math.log(V)] * 3)
    assert float(entropy.entropy(torch.zeros(V), exclude=0)) == pytest.approx(
        math.log(V - 1))
    one_hot = torch.full((V,), -1e9)
    one_hot[4] = 0.0
    assert float(entropy.entropy(one_hot)) == pytest.approx(0.0, abs=1e-9)
    assert float(entropy.top1_probability(one_hot)) == pytest.approx(1.0)
    assert float(entropy.top1_probability(torch.zeros(V), exclude=3)) == pytest.approx(
        1 / (V - 1))


def test_entropy_matches_a_direct_sum_and_leaves_its_input_alone():
    logits = torch.randn(2, 5, 10, generator=torch.Generator().manual_seed(1))
    before = logits.clone()
    p = torch.softmax(logits.double(), -1)
    torch.testing.assert_close(entropy.entropy(logits), -(p * p.log()).sum(-1))
    q = p.clone()
    q[..., 7] = 0
    q = q / q.sum(-1, keepdim=True)
    ref = -(q * q.clamp(min=1e-300).log()).sum(-1)
    torch.testing.assert_close(entropy.entropy(logits, exclude=7), ref)
    assert torch.equal(logits, before)
    with pytest.raises(ValueError, match="not a token id"):
        entropy.entropy(logits, exclude=10)


def test_cluster_entropy_sums_within_clusters_and_drops_specials(sid):
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(2))
    p = torch.softmax(logits.double(), -1)
    q = cluster_marginal(p, sid)
    q = q / q.sum(-1, keepdim=True)
    torch.testing.assert_close(inf.cluster_entropy(logits, sid),
                               -(q * q.log()).sum(-1))
    # all mass inside one cluster: the ID is certain whatever the tokens' spread
    members = sid.members(0)
    inside = torch.full((VOCAB,), -1e9)
    inside[members] = 0.0
    assert float(inf.cluster_entropy(inside, sid)) == pytest.approx(0.0, abs=1e-9)
    # mass on the mask token only is ignored once the rest is renormalised
    mostly_mask = torch.zeros(VOCAB)
    mostly_mask[MASK_ID] = 30.0
    uniform = torch.zeros(VOCAB)
    assert float(inf.cluster_entropy(mostly_mask, sid)) == pytest.approx(
        float(inf.cluster_entropy(uniform, sid)))


# --- the recorder and the replay -----------------------------------------------------

CONFIGS = {
    "one token per step, sampled": (one_token_per_step(G, temperature=1.0), True),
    "threshold, blocks, sampled": (DecodeConfig(gen_length=G, block_length=4,
                                                rule="threshold", threshold=0.3,
                                                temperature=1.0), True),
    "schedule, greedy": (DecodeConfig(gen_length=G, block_length=4, steps=4), False),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_recording_does_not_change_the_decode(name, sid):
    config, sampled = CONFIGS[name]
    prompt = make_prompt(3, 2)
    gens = (lambda: row_generators(0, 3)) if sampled else (lambda: None)
    plain = generate(ToyDenoiser(), prompt, config, gens())
    rec = inf.CommitRecorder(ToyDenoiser(), sid)
    recorded = generate(rec, prompt, config, gens())
    assert torch.equal(plain.tokens, recorded.tokens)
    assert torch.equal(plain.commit_step, recorded.commit_step)
    assert torch.equal(plain.nfe, recorded.nfe)
    assert rec.n_calls == recorded.n_forwards


class Capturing(ToyDenoiser):
    """Keeps every forward's logits: the reference the recorder must agree with."""

    def __init__(self):
        super().__init__()
        self.outputs = []

    def logits(self, x):
        out = super().logits(x)
        self.outputs.append(out.clone())
        return out


@pytest.mark.parametrize("name", list(CONFIGS))
def test_recorded_stats_equal_a_direct_recomputation(name, sid):
    """One row at a time, forward s of the decode is step s: its logits at the
    positions committed at s give the reference entropy, top-1 and ID entropy."""
    config, sampled = CONFIGS[name]
    for row in range(2):
        prompt = make_prompt(1, 2, seed=row)
        gen = row_generators(row, 1) if sampled else None
        cap = Capturing()
        rec = inf.CommitRecorder(cap, sid)
        res = generate(rec, prompt, config, gen)
        got = rec.at_commit(res)
        steps = res.commit_step[0]
        assert len(cap.outputs) == int(res.nfe[0])
        for s, logits in enumerate(cap.outputs, start=1):
            cols = (steps == s).nonzero().flatten()
            at = logits[0, 2 + cols]  # (n, V), prompt length 2
            torch.testing.assert_close(got["entropy"][0, cols],
                                       entropy.entropy(at, exclude=MASK_ID))
            torch.testing.assert_close(got["top1"][0, cols],
                                       entropy.top1_probability(at, exclude=MASK_ID))
            ref_q = inf.cluster_probabilities(
                torch.softmax(at.double().index_fill(-1, torch.tensor([MASK_ID]),
                                                     float("-inf")), -1), sid)
            torch.testing.assert_close(got["sid_entropy"][0, cols],
                                       entropy.probs_entropy(ref_q))
            torch.testing.assert_close(got["sid_top1"][0, cols], ref_q.amax(-1))
        assert not torch.isnan(got["entropy"]).any()


def test_batched_recording_equals_row_by_row(sid):
    config = CONFIGS["threshold, blocks, sampled"][0]
    prompt = make_prompt(4, 2, seed=3)
    rec = inf.CommitRecorder(ToyDenoiser(), sid)
    batched = rec.at_commit(generate(rec, prompt, config, row_generators(5, 4)))
    gens = row_generators(5, 4)
    for b in range(4):
        one = inf.CommitRecorder(ToyDenoiser(), sid)
        r = generate(one, prompt[b:b + 1], config, [gens[b]])
        alone = one.at_commit(r)
        for k in batched:
            torch.testing.assert_close(batched[k][b], alone[k][0])


def test_init_positions_are_nan_and_unseen_states_are_refused(sid):
    config = CONFIGS["threshold, blocks, sampled"][0]
    prompt = make_prompt(2, 2)
    init = torch.full((2, G), MASK_ID)
    init[0, 3] = 5
    rec = inf.CommitRecorder(ToyDenoiser(), sid)
    res = generate(rec, prompt, config, row_generators(0, 2), init=init)
    got = rec.at_commit(res)
    assert torch.isnan(got["entropy"][0, 3])
    assert int(torch.isnan(got["entropy"]).sum()) == 1
    rec.clear()
    with pytest.raises(ValueError, match="never passed to the recorder"):
        rec.at_commit(res)


def test_the_recorder_refuses_a_cache(sid):
    rec = inf.CommitRecorder(CachedToyDenoiser(), sid)
    config = DecodeConfig(gen_length=G, block_length=4, rule="threshold", cache="dual")
    with pytest.raises(ValueError, match="cache"):
        generate(rec, make_prompt(1, 2), config)


def test_commit_logits_replay_matches_the_recorder(sid):
    config = CONFIGS["threshold, blocks, sampled"][0]
    prompt = make_prompt(3, 2, seed=4)
    den = ToyDenoiser()
    rec = inf.CommitRecorder(den, sid)
    res = generate(rec, prompt, config, row_generators(2, 3))
    got = rec.at_commit(res)
    where = torch.rand(3, G, generator=torch.Generator().manual_seed(0)) < 0.5
    where[0, 0] = True
    logits, rows, cols = inf.commit_logits(den, res, where, batch=2)
    assert logits.shape == (int(where.sum()), VOCAB)
    assert torch.equal(torch.stack([rows, cols], 1), where.nonzero())
    torch.testing.assert_close(entropy.entropy(logits, exclude=MASK_ID),
                               got["entropy"][rows, cols])
    with pytest.raises(ValueError, match="where must be"):
        inf.commit_logits(den, res, where[:, :3])


# --- the anchor table ---------------------------------------------------------------


def _toy_draft(sid, B, seed):
    from dlmspec_min.ssld.drafting import Draft

    g = torch.Generator().manual_seed(seed)
    z = torch.randn(B, G, sid.n_clusters, generator=g).double() * 3
    logp = torch.log_softmax(z, -1)
    tokens = torch.randint(0, MASK_ID, (B, G), generator=g)
    return Draft("toy", logp, tokens, flops=1.0)


def test_anchor_table_agrees_with_the_ssld_decoder_and_direct_formulas(sid):
    from dlmspec_min.ssld import decoder
    from dlmspec_min.ssld import information as inf

    B = 4
    den = ToyDenoiser()
    prompt = make_prompt(B, 2, seed=6)
    config = CONFIGS["threshold, blocks, sampled"][0]
    rec = inf.CommitRecorder(den, sid)
    ref = generate(rec, prompt, config, row_generators(0, B))
    tokens = ref.generated
    anchors = ~sid.special[tokens] & (torch.rand(B, G, generator=torch.Generator()
                                                 .manual_seed(1)) < 0.7)
    verify = decoder.verify_logits(den, prompt, G)
    draft = _toy_draft(sid, B, 3)
    clog, _, _ = inf.commit_logits(den, ref, anchors)
    table = inf.anchor_table(tokens, anchors, verify, draft, sid, MASK_ID,
                             commit=rec.at_commit(ref), anchor_commit_logits=clog)
    assert len(table) == int(anchors.sum())
    for mode, col in [("exact", "exact_accepted"), ("relaxed", "relaxed_accepted")]:
        run = decoder.ssld_generate(den, prompt, draft, anchors, sid, config,
                                 row_generators(0, B), c=0.0, mode=mode)
        assert table[col].tolist() == run.accepted[anchors].long().tolist()
    s = sid(tokens)[anchors]
    assert table["exact_hit"].tolist() == (draft.sids[anchors] == s).long().tolist()
    p = torch.softmax(verify.double().index_fill(-1, torch.tensor([MASK_ID]),
                                                 float("-inf")), -1)
    q = cluster_marginal(p, sid)[anchors]  # (N, K), specials already zero
    q = q / q.sum(-1, keepdim=True)
    np.testing.assert_allclose(table["sid_info_verify"],
                               -np.log(q.gather(-1, s[:, None])[:, 0].numpy()))
    np.testing.assert_allclose(table["token_info_verify"],
                               -np.log(p[anchors].gather(-1, tokens[anchors][:, None])
                                       [:, 0].numpy()))
    # the relaxed decoder commits the draft token: faithful iff it is the final token
    same = (draft.tokens[anchors] == tokens[anchors]).long().numpy()
    expected = (table["relaxed_accepted"] * same).tolist()
    assert table["relaxed_faithful"].tolist() == expected
    np.testing.assert_allclose(table["glue_info"],
                               table["sid_info_verify"] - table["sid_info_commit"])
    assert table[["entropy_commit", "sid_entropy_commit"]].notna().all().all()
    with pytest.raises(ValueError, match="rows for"):
        inf.anchor_table(tokens, anchors, verify, draft, sid, MASK_ID,
                         anchor_commit_logits=clog[:1])


def test_binned_rates_counts_by_hand():
    import pandas as pd

    table = pd.DataFrame({"seq": [0, 0, 1, 1, 2, 2], "x": [1, 2, 3, 4, 5, 6],
                          "hit": [1, 0, 1, 1, 0, 0], "acc": [1, 1, 0, 1, 0, 1]})
    out = inf.binned_rates(table, "x", {"hit": ("hit", None),
                                        "hit | acc": ("hit", "acc")}, n_bins=2,
                           n_boot=100, means=["x"])
    got = out.set_index(["bin", "outcome"])
    assert got.loc[(1, "hit"), "mean_x"] == pytest.approx(5.0)
    assert got.loc[(0, "hit"), ["hits", "trials"]].tolist() == [2, 3]
    assert got.loc[(1, "hit"), ["hits", "trials"]].tolist() == [1, 3]
    assert got.loc[(0, "hit | acc"), ["hits", "trials"]].tolist() == [1, 2]
    assert got.loc[(1, "hit | acc"), "rate"] == pytest.approx(0.5)
    assert got.loc[(0, "hit"), "by_mean"] == pytest.approx(2.0)


# --- bounds --------------------------------------------------------------------------


def test_max_entropy_given_top1_is_attained_and_never_exceeded():
    n = 10
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.dirichlet(np.full(n, rng.uniform(0.05, 3)))
        h = float(-(p * np.log(np.clip(p, 1e-300, None))).sum())
        assert h <= entropy.max_entropy_given_top1(p.max(), n) + 1e-9
    top = 0.7
    flat = np.r_[top, np.full(n - 1, (1 - top) / (n - 1))]
    assert entropy.max_entropy_given_top1(top, n) == pytest.approx(
        float(-(flat * np.log(flat)).sum()))
    assert entropy.max_entropy_given_top1(1 / n, n) == pytest.approx(math.log(n))
    assert entropy.max_entropy_given_top1(1.0, n) == pytest.approx(0.0)
    with pytest.raises(ValueError, match=r"\[1/n, 1\]"):
        entropy.max_entropy_given_top1(0.01, n)


def test_fano_bound_holds_for_the_bayes_guess_and_has_the_right_ends():
    K = 8
    assert float(entropy.fano_max_hit(0.0, K)) == pytest.approx(1.0, abs=1e-9)
    # at H = log K the Fano function is flat in Pe, so H's rounding shows up squared
    assert float(entropy.fano_max_hit(math.log(K), K)) == pytest.approx(1 / K, abs=1e-6)
    rng = np.random.default_rng(1)
    for _ in range(200):
        p = rng.dirichlet(np.full(K, rng.uniform(0.05, 3)))
        h = float(-(p * np.log(np.clip(p, 1e-300, None))).sum())
        assert p.max() <= entropy.fano_max_hit(h, K) + 1e-9  # the best guess's hit rate
    hs = np.linspace(0, math.log(K), 20)
    assert np.all(np.diff(entropy.fano_max_hit(hs, K)) < 0)
    with pytest.raises(ValueError, match="log K"):
        entropy.fano_max_hit(3.0, K)


# --- statistics ----------------------------------------------------------------------


def test_mean_difference_bootstrap_estimate_and_interval():
    rng = np.random.default_rng(0)
    groups_x, groups_y = np.repeat(np.arange(20), 5), np.repeat(np.arange(20), 3)
    x = rng.normal(2.0, 1, 100)
    y = rng.normal(1.0, 1, 60)
    est, lo, hi = stats.mean_difference_bootstrap(x, groups_x, y, groups_y, 500, 0)
    assert est == pytest.approx(x.mean() - y.mean())
    assert lo < est < hi and lo > 0
    same = stats.mean_difference_bootstrap(x, groups_x, x, groups_x, 200, 0)
    assert same == pytest.approx((0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="group label"):
        stats.mean_difference_bootstrap(x, groups_x[:5], y, groups_y)


def test_spearman_bootstrap_agrees_with_scipy_and_handles_constants():
    rng = np.random.default_rng(0)
    x = rng.normal(size=90)
    y = x + rng.normal(size=90)
    groups = np.repeat(np.arange(30), 3)
    rho, p, lo, hi = stats.spearman_bootstrap(x, y, groups, 300, 0)
    ref = sps.spearmanr(x, y)
    assert rho == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)
    assert lo < rho < hi and lo > 0
    out = stats.spearman_bootstrap(np.zeros(10), y[:10], groups[:10], 50, 0)
    assert all(math.isnan(v) for v in out)


def test_pooled_mean_bootstrap_is_the_token_mean_with_a_sequence_interval():
    values = np.array([1.0, 3.0, 2.0, 2.0, 10.0])
    groups = np.array([0, 0, 1, 1, 2])
    est, lo, hi = stats.pooled_mean_bootstrap(values, groups, 500, 0)
    assert est == pytest.approx(values.mean())
    assert 2.0 <= lo <= est <= hi <= 10.0
    with pytest.raises(ValueError, match="one group each"):
        stats.pooled_mean_bootstrap(values, groups[:3])
