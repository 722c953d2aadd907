"""Draft shapes and FreeDave (arXiv 2510.00294) as options of the one decode loop.

Exact settings (every draft shape under ``spec_accept="exact"``, FreeDave's
one-token mode) must return their base policy's tokens, each at the base's
step; FreeDave's threshold mode (subset acceptance) is a separate decoder whose
drift from its base is measured, never assumed away.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from conftest import MASK_ID, CachedToyDenoiser, make_prompt
from test_speculate import LevelsCachedToy, LevelsToy, assert_same_trajectory

from dlmspec_min.decoding.config import DecodeConfig
from dlmspec_min.decoding.decode import generate
from dlmspec_min.decoding.speculate import (
    _Row,
    chain_child,
    drift,
    freedave_config,
    rank_children,
)


def _base(**kw) -> DecodeConfig:
    kw = {"gen_length": 16, "block_length": 8, "rule": "threshold", **kw}
    return DecodeConfig(**kw)


def _one_token(base: DecodeConfig) -> DecodeConfig:
    return dataclasses.replace(base, rule="schedule", steps=base.gen_length)


# --- draft shapes: exact whatever is drafted ------------------------------------------


@pytest.mark.parametrize("draft", ["chain", "mix", "rank"])
@pytest.mark.parametrize("cache, lookahead", [("none", "none"), ("none", "exact"),
                                              ("dual", "exact"), ("prefix", "exact")])
def test_chain_and_mix_drafts_are_exact(draft, cache, lookahead):
    prompt = make_prompt(4, 5, seed=3)
    for seed, threshold in [(0, 0.9), (1, 0.6)]:
        den = CachedToyDenoiser(seed=seed, sharpness=8.0)
        base = _base(block_length=8, threshold=threshold, cache=cache)
        ref = generate(den, prompt, base)
        out = generate(den, prompt, dataclasses.replace(
            base, speculate="trajectory", spec_draft=draft, lookahead=lookahead))
        assert_same_trajectory(out, ref)


def test_property_shapes_on_ties_and_near_threshold_confidences():
    g = torch.Generator().manual_seed(1)
    fewer = 0
    for trial in range(24):
        pick = lambda n: int(torch.randint(n, (1,), generator=g))  # noqa: E731
        cache = ("none", "dual")[pick(2)]
        den = (LevelsCachedToy if cache != "none" else LevelsToy)(seed=trial)
        base = _base(block_length=(2, 4, 8)[pick(3)], cache=cache)
        if trial % 3 == 0:
            base = _one_token(base)
        prompt = make_prompt(2, 1 + pick(5), seed=trial)
        ref = generate(den, prompt, base)
        cfg = dataclasses.replace(base, speculate="trajectory",
                                  spec_draft=("tree", "chain", "mix", "rank")[
                                      trial % 4],
                                  spec_budget=pick(12))
        out = generate(den, prompt, cfg)
        assert_same_trajectory(out, ref)
        fewer += int(out.nfe.sum() < ref.nfe.sum())
    assert fewer > 0


def test_chain_rows_per_call_and_budget():
    den = CachedToyDenoiser(seed=5, sharpness=8.0)
    prompt = make_prompt(3, 4, seed=1)
    base = _base(gen_length=32, block_length=16, cache="dual")
    out = generate(den, prompt, dataclasses.replace(
        base, speculate="trajectory", spec_draft="chain", spec_budget=3))
    assert max(max(r) for r in out.spec.rows_per_verify) <= 4  # root + chain
    assert max(max(s) for s in out.spec.steps_per_verify) <= 4


def test_chain_child_takes_the_most_confident_known_position():
    top = [[3, 4], [-1, -1], [5, 6], [7, 8]]
    conf = [[0.4, 0.1], [0.0, 0.0], [0.8, 0.1], [0.8, 0.1]]
    (lp, commits), = chain_child([0, 1, 2, 3], top, conf)
    assert commits == ((2, 5),)  # ties: leftmost
    assert lp == pytest.approx(torch.tensor(0.8).log().item())
    assert chain_child([1], top, conf) == []


def test_rank_children_order_tokens_and_prefixes():
    top = [[3, 4], [-1, -1], [5, 6], [7, 8], [9, -1]]
    conf = [[0.4, 0.3], [0.0, 0.0], [0.8, 0.1], [0.8, 0.2], [0.6, 0.0]]
    kids = rank_children([0, 1, 2, 3, 4], top, conf, 0.1, 100)
    commits = [c for _, c in kids]
    lps = [lp for lp, _ in kids]
    assert lps == sorted(lps, reverse=True)
    assert commits[0] == ((2, 5),)  # the most confident, leftmost of ties, top-1
    singles = [c[0] for c in commits if len(c) == 1]
    # every known position with both its tokens (position 4 has one), none unseen
    assert sorted(singles) == sorted([(0, 3), (0, 4), (2, 5), (2, 6), (3, 7), (3, 8),
                                      (4, 9)])
    prefixes = [c for c in commits if len(c) > 1]  # confidence order: 2, 3, 4, 0
    assert prefixes == [((2, 5), (3, 7)), ((2, 5), (3, 7), (4, 9)),
                        ((0, 3), (2, 5), (3, 7), (4, 9))]
    # the second token of a position splits its rank's weight by probability
    w = dict((c, lp) for lp, c in kids)
    assert w[((3, 7),)] - w[((3, 8),)] == pytest.approx(math.log(0.8 / 0.2))
    assert len(rank_children([0, 1, 2, 3, 4], top, conf, 0.1, 3)) == 3
    assert rank_children([1], top, conf, 0.1, 5) == []


def test_rank_draft_is_exact_and_saves_forwards_on_a_toy():
    """Exact beside the chain on one toy, and fewer calls than the base."""
    prompt = make_prompt(6, 4, seed=2)
    den = CachedToyDenoiser(seed=4, sharpness=6.0)
    base = _base(gen_length=24, block_length=8, threshold=0.95, cache="dual")
    ref = generate(den, prompt, base)
    out = {d: generate(den, prompt, dataclasses.replace(
        base, speculate="trajectory", spec_draft=d, spec_budget=6))
        for d in ("rank", "chain")}
    for o in out.values():
        assert_same_trajectory(o, ref)
    assert out["rank"].nfe.sum() < ref.nfe.sum()


# --- FreeDave ----------------------------------------------------------------------


@pytest.mark.parametrize("cache", ["none", "dual"])
@pytest.mark.parametrize("block_length", [4, 16])
def test_freedave_one_token_mode_equals_one_token_per_step(cache, block_length):
    prompt = make_prompt(4, 4, seed=block_length)
    den = CachedToyDenoiser(seed=2, sharpness=8.0)
    base = _base(block_length=block_length, cache=cache)
    cfg = freedave_config("one-token", base)
    ref = generate(den, prompt, _one_token(base))
    assert (ref.committed_per_step[ref.committed_per_step > 0] == 1).all()
    out = generate(den, prompt, cfg)
    assert_same_trajectory(out, ref)
    assert out.nfe.sum() < ref.nfe.sum()


def test_freedave_batched_equals_one_by_one():
    den = CachedToyDenoiser(seed=3, sharpness=6.0)
    prompt = make_prompt(4, 4, seed=7)
    base = _base(gen_length=24, block_length=8, threshold=0.7, cache="dual")
    for mode in ("one-token", "threshold"):
        cfg = freedave_config(mode, base)
        whole = generate(den, prompt, cfg)
        for b in range(4):
            alone = generate(den, prompt[b:b + 1], cfg)
            assert torch.equal(alone.tokens[0], whole.tokens[b])
            assert int(alone.nfe[0]) == int(whole.nfe[b])


class ParityToy:
    """The two leftmost masks are sure (0.95), the rest not (0.5); the token at
    a masked position j is j + (masks left) mod 2, so committing one token
    instead of F's two changes every later token."""

    mask_id = MASK_ID
    vocab_size = MASK_ID + 1

    def logits(self, x: torch.Tensor) -> torch.Tensor:  # (B, L) -> (B, L, V)
        B, L = x.shape
        masked = x == MASK_ID  # (B, L)
        pos = torch.arange(L).expand(B, L)
        tok = (pos + masked.sum(1, keepdim=True) % 2) % 10  # (B, L)
        sure = masked & (masked.cumsum(1) <= 2)
        p = torch.where(sure, 0.95, 0.5).double()  # top-1 probability
        a = torch.log(p * (self.vocab_size - 1) / (1 - p))
        out = torch.zeros(B, L, self.vocab_size, dtype=torch.float64)
        return out.scatter(-1, tok[..., None], a[..., None])


def test_freedave_threshold_mode_is_not_exact():
    prompt = torch.tensor([[1, 2]])
    base = _base(gen_length=8, block_length=8, threshold=0.9)
    ref = generate(ParityToy(), prompt, base)
    assert ref.committed_per_step[0].tolist() == [2, 2, 2, 2]
    out = generate(ParityToy(), prompt, freedave_config("threshold", base))
    assert not (out.generated == MASK_ID).any()
    assert drift(out.generated, ref.generated)["exact"].tolist() == [0.0]
    exact = generate(ParityToy(), prompt, dataclasses.replace(
        base, speculate="trajectory", spec_draft="chain"))
    assert_same_trajectory(exact, ref)  # the same chain, accepted exactly


def test_freedave_threshold_mode_on_toys():
    """Subset acceptance: complete outputs, never more calls than the base's,
    and budget 0 is the base."""
    prompt = make_prompt(8, 4, seed=3)
    saved = 0
    for seed in range(4):
        den = CachedToyDenoiser(seed=seed, sharpness=4.0)
        base = _base(gen_length=24, block_length=8, threshold=0.7, cache="dual")
        ref = generate(den, prompt, base)
        out = generate(den, prompt, freedave_config("threshold", base))
        assert not (out.generated == MASK_ID).any()
        assert torch.equal(out.tokens[:, :4], prompt)
        assert (out.nfe <= ref.nfe).all()
        saved += int(out.nfe.sum() < ref.nfe.sum())
        zero = generate(den, prompt, freedave_config(
            "threshold", dataclasses.replace(base, spec_budget=0)))
        assert torch.equal(zero.tokens, ref.tokens)
        assert torch.equal(zero.nfe, ref.nfe)
    assert saved > 0


def test_subset_node_picks_the_largest_subset_of_the_next_state():
    den = CachedToyDenoiser(seed=0)
    row = _Row(den, _base(), 2)
    M = MASK_ID
    x = torch.tensor([1, 2, M, M, M, M])
    nxt = torch.tensor([1, 2, 5, 6, M, M])  # F commits positions 2 and 3
    states = torch.stack([
        x,
        torch.tensor([1, 2, 5, M, M, M]),  # a subset
        torch.tensor([1, 2, 5, M, 7, M]),  # adds a token F does not commit
        torch.tensor([1, 2, 4, 6, M, M]),  # a wrong token
    ])
    assert row.subset_node(states, x, nxt) == 1
    assert row.subset_node(states[[0, 2, 3]], x, nxt) is None


def test_freedave_config_checks():
    with pytest.raises(ValueError, match="unknown FreeDave mode"):
        freedave_config("tree", _base())
    with pytest.raises(ValueError, match="rule='threshold'"):
        freedave_config("threshold", _base(rule="factor"))
    with pytest.raises(TypeError, match="DecodeConfig"):
        freedave_config("one-token", {"gen_length": 8})
    cfg = freedave_config("one-token", _base(cache="dual"))
    assert cfg.one_token_per_step and cfg.spec_draft == "chain"
    assert cfg.cache == "dual" and cfg.spec_accept == "exact"
