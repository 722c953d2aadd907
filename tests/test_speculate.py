"""Trajectory speculation (SPEC.md 4): exact modes reproduce the base policy.

The base policy F is ``generate`` with the greedy threshold rule; the
speculator (``DecodeConfig(speculate="trajectory")``) must return F's tokens,
and commit every token at F's step, whatever the tree and the block size.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
from conftest import MASK_ID, VOCAB, CachedToyDenoiser, ToyDenoiser, make_prompt

from dlmspec_min.decoding.config import DecodeConfig
from dlmspec_min.decoding.decode import generate
from dlmspec_min.decoding.speculate import batch_invariance_gap, best_commit_sets, drift


def _base(**kw) -> DecodeConfig:
    kw = {"gen_length": 16, "block_length": 8, "rule": "threshold", **kw}
    return DecodeConfig(**kw)


def _spec(base: DecodeConfig, **kw) -> DecodeConfig:
    return dataclasses.replace(base, speculate="trajectory", **kw)


def assert_same_trajectory(spec, ref):
    """Same tokens, each committed at the same base-policy step, same step count."""
    assert torch.equal(spec.tokens, ref.tokens)
    assert torch.equal(spec.spec.trajectory_step, ref.commit_step)
    assert [sum(s) for s in spec.spec.steps_per_verify] == ref.nfe.tolist()
    assert (spec.nfe <= ref.nfe).all()


# --- synthetic denoisers with ties and near-threshold confidences -------------------

LEVELS = (0.3, 0.3, 0.6, 0.9 - 1e-12, 0.9, 0.9 + 1e-12, 0.97)  # top-1 probabilities


class LevelsMixin:
    """Top-1 probability taken from LEVELS by the toy's features: ties everywhere.

    Every position's logits are a + 0 elsewhere, with a chosen so that the
    top token's softmax probability is exactly a level (float64), so many
    positions tie and some sit a rounding error off the threshold 0.9.
    """

    def _head(self, z_query, z_all):
        raw = super()._head(z_query, z_all).double()  # (B, W, V)
        raw[..., MASK_ID] = -math.inf
        top = raw.argmax(dim=-1)  # (B, W)
        level = torch.tensor(LEVELS, dtype=torch.float64)[top % len(LEVELS)]
        a = torch.log(level * (VOCAB - 1) / (1 - level))  # p_top = e^a/(e^a + V - 1)
        out = torch.zeros_like(raw)
        return out.scatter(-1, top[..., None], a[..., None])


class LevelsToy(LevelsMixin, ToyDenoiser):
    pass


class LevelsCachedToy(LevelsMixin, CachedToyDenoiser):
    pass


# --- exactness ----------------------------------------------------------------------


@pytest.mark.parametrize("cache", ["none", "prefix", "dual"])
@pytest.mark.parametrize("lookahead", ["none", "exact"])
@pytest.mark.parametrize("block_length", [4, 8, 16])
def test_exact_modes_equal_the_base_policy(cache, lookahead, block_length):
    prompt = make_prompt(6, 5, seed=block_length)
    for seed, threshold in [(0, 0.9), (1, 0.7), (2, 0.5)]:
        den = CachedToyDenoiser(seed=seed, sharpness=8.0)
        base = _base(block_length=block_length, threshold=threshold, cache=cache)
        ref = generate(den, prompt, base)
        out = generate(den, prompt, _spec(base, lookahead=lookahead))
        assert_same_trajectory(out, ref)


def test_property_ties_and_near_threshold_confidences():
    """Random denoisers, prompts, blocks, caches and budgets: always F's output."""
    g = torch.Generator().manual_seed(0)
    cases, fewer = 0, 0
    for trial in range(24):
        pick = lambda n: int(torch.randint(n, (1,), generator=g))  # noqa: E731
        cache = ("none", "prefix", "dual")[pick(3)]
        den = (LevelsCachedToy if cache != "none" else LevelsToy)(seed=trial)
        bl = (2, 4, 8, 16)[pick(4)]
        base = _base(block_length=bl, threshold=0.9, cache=cache)
        prompt = make_prompt(2, 1 + pick(6), seed=trial)
        ref = generate(den, prompt, base)
        lookahead = ("none", "exact")[pick(2)]
        cfg = _spec(base, lookahead=lookahead, spec_budget=pick(20),
                    spec_low=(0.0, 0.1, 0.5)[pick(3)])
        out = generate(den, prompt, cfg)
        assert_same_trajectory(out, ref)
        cases += 1
        fewer += int(out.nfe.sum() < ref.nfe.sum())
    assert cases == 24 and fewer > 0  # speculation did accept drafts somewhere


def test_levels_denoiser_has_ties_and_near_threshold_confidences():
    from dlmspec_min.decoding.steps import propose_tokens, token_confidence

    logits = LevelsToy(seed=3).logits(make_prompt(1, 30))
    conf = token_confidence(logits, propose_tokens(logits, 0.0, MASK_ID))[0]
    values = conf.tolist()
    assert len(set(values)) < len(values)  # ties
    assert any(0 < 0.9 - v < 1e-9 for v in values) or any(
        0 < v - 0.9 < 1e-9 for v in values)


def test_budget_zero_is_the_base_loop():
    den = CachedToyDenoiser(seed=4)
    prompt = make_prompt(3, 4)
    for cache in ["none", "prefix", "dual"]:
        base = _base(gen_length=24, block_length=8, cache=cache)
        ref = generate(den, prompt, base)
        out = generate(den, prompt, _spec(base, spec_budget=0))
        assert torch.equal(out.tokens, ref.tokens)
        assert torch.equal(out.nfe, ref.nfe)
        assert torch.equal(out.token_forwards, ref.token_forwards)
        assert torch.equal(out.commit_step, ref.commit_step)
        assert out.n_forwards == int(ref.nfe.sum())


def test_speculation_saves_verify_calls_and_counts_its_work():
    den = CachedToyDenoiser(seed=5, sharpness=8.0)
    prompt = make_prompt(6, 4, seed=1)
    base = _base(gen_length=32, block_length=16, threshold=0.9, cache="dual")
    ref = generate(den, prompt, base)
    out = generate(den, prompt, _spec(base, spec_budget=15))
    assert_same_trajectory(out, ref)
    assert out.nfe.sum() < ref.nfe.sum()
    assert out.spec.mean_steps_per_verify > 1
    assert out.committed_per_step.sum(dim=1).tolist() == [32] * 6
    for i in range(6):
        assert len(out.spec.steps_per_verify[i]) == int(out.nfe[i])
        assert max(out.spec.rows_per_verify[i]) <= 16  # root + budget
    # more rows per call: more positions computed than the base policy
    assert (out.token_forwards >= ref.token_forwards).all()


def test_inter_block_exact_lookahead_crosses_blocks():
    """Without a cache the tree runs on into the next block and stays exact."""
    den = CachedToyDenoiser(seed=6, sharpness=8.0)
    prompt = make_prompt(6, 4, seed=2)
    base = _base(gen_length=24, block_length=4, threshold=0.7)
    ref = generate(den, prompt, base)
    none = generate(den, prompt, _spec(base, lookahead="none"))
    exact = generate(den, prompt, _spec(base, lookahead="exact"))
    assert_same_trajectory(none, ref)
    assert_same_trajectory(exact, ref)
    assert exact.nfe.sum() < none.nfe.sum()  # crossing blocks saves calls
    commits = exact.commit_step.view(6, -1, 4)  # (B, blocks, bl)
    last, first = commits[:, :-1].amax(-1), commits[:, 1:].amin(-1)
    assert (first <= last).any()  # some call committed into two blocks


def test_stale_lookahead_runs_and_its_drift_is_measured():
    prompt = make_prompt(8, 4, seed=3)
    drifted = 0
    for seed in range(3):
        den = CachedToyDenoiser(seed=seed, sharpness=4.0)
        base = _base(gen_length=24, block_length=4, threshold=0.7, cache="dual")
        ref = generate(den, prompt, base)
        out = generate(den, prompt, _spec(base, lookahead="stale"))
        assert not (out.generated == MASK_ID).any()
        assert torch.equal(out.tokens[:, :4], prompt)
        d = drift(out.generated, ref.generated)
        assert ((d["exact"] == 1) == (d["hamming"] == 0)).all()
        drifted += int((d["exact"] == 0).sum())
    assert drifted > 0  # the stale cache does change outputs


def test_init_tokens_are_kept_and_exact():
    den = CachedToyDenoiser(seed=7)
    prompt = make_prompt(3, 4)
    g = torch.Generator().manual_seed(0)
    init = torch.where(torch.rand(3, 16, generator=g) < 0.4,
                       torch.randint(0, MASK_ID, (3, 16), generator=g),
                       torch.full((3, 16), MASK_ID))
    init[0, :8] = 1  # a whole block given
    for cache in ["none", "dual"]:
        base = _base(block_length=8, threshold=0.8, cache=cache)
        ref = generate(den, prompt, base, init=init)
        out = generate(den, prompt, _spec(base), init=init)
        assert_same_trajectory(out, ref)


# --- the pieces ---------------------------------------------------------------------


def test_best_commit_sets_matches_brute_force():
    g = torch.Generator().manual_seed(1)
    for m in [0, 1, 3, 6]:
        conf = torch.rand(m, generator=g, dtype=torch.float64).tolist()
        every = []
        for bits in itertools.product([0, 1], repeat=m):
            pairs = zip(conf, bits, strict=True)
            lp = sum(math.log(c if b else 1 - c) for c, b in pairs)
            every.append((lp, frozenset(i for i, b in enumerate(bits) if b)))
        every.sort(key=lambda t: -t[0])
        got = best_commit_sets(conf, k=2**m)
        assert len(got) == 2**m and len({s for _, s in got}) == 2**m
        assert [round(lp, 9) for lp, _ in got] == [round(lp, 9) for lp, _ in every]
        for lp, s in got:
            assert lp == pytest.approx(dict((b, a) for a, b in every)[s])
        assert [s for _, s in best_commit_sets(conf, 3)] == [s for _, s in got[:3]]


def test_batch_invariance_of_the_embedded_architecture():
    from dlmspec_min.decoding.denoisers import Denoiser
    from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion

    torch.manual_seed(0)
    model = DLMForMaskedDiffusion(DLMConfig(vocab_size=64, hidden_size=32,
                                            num_hidden_layers=2, num_attention_heads=2,
                                            intermediate_size=48,
                                            max_position_embeddings=32))
    den = Denoiser(model, model.config.mask_token_id)
    states = torch.randint(5, 64, (9, 24))
    states[:, 12:] = den.mask_id
    assert batch_invariance_gap(den, states, 8, 16) == 0.0
    assert batch_invariance_gap(CachedToyDenoiser(), make_prompt(5, 12), 4, 8) == 0.0


def test_tiny_embedded_model_is_exact():
    from dlmspec_min.decoding.denoisers import Denoiser
    from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion

    torch.manual_seed(1)
    model = DLMForMaskedDiffusion(DLMConfig(vocab_size=48, hidden_size=32,
                                            num_hidden_layers=2, num_attention_heads=2,
                                            intermediate_size=48,
                                            max_position_embeddings=32,
                                            initializer_range=0.5))
    den = Denoiser(model, model.config.mask_token_id)
    prompt = torch.randint(5, 48, (3, 4))
    for cache, bl in [("none", 4), ("dual", 8), ("prefix", 4)]:
        base = _base(gen_length=16, block_length=bl, threshold=0.5, cache=cache)
        ref = generate(den, prompt, base)
        assert_same_trajectory(generate(den, prompt, _spec(base)), ref)


def test_drift_metrics():
    a = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 4]])
    b = torch.tensor([[1, 2, 3, 4], [1, 0, 3, 0]])
    d = drift(a, b)
    assert d["exact"].tolist() == [1.0, 0.0] and d["hamming"].tolist() == [0.0, 0.5]
    with pytest.raises(ValueError, match="shapes differ"):
        drift(a, b[:, :3])


@pytest.mark.parametrize("kw, match", [
    ({"speculate": "tree"}, "unknown speculate"),
    ({"lookahead": "far"}, "unknown lookahead"),
    ({"spec_budget": -1}, "spec_budget must be"),
    ({"spec_budget": 2.0}, "spec_budget must be"),
    ({"spec_low": 1.5}, r"spec_low must lie in \[0, 1\]"),
    ({"speculate": "trajectory", "rule": "schedule", "steps": 4},
     "use rule='threshold'"),
    ({"speculate": "trajectory", "rule": "factor"}, "use rule='threshold'"),
    ({"speculate": "trajectory", "remasking": "random"}, "low_confidence"),
    ({"spec_draft": "bush"}, "unknown spec_draft"),
    ({"spec_accept": "loose"}, "unknown spec_accept"),
    ({"speculate": "trajectory", "rule": "threshold", "lookahead": "stale"},
     "needs cache='dual' or 'prefix'"),
])
def test_invalid_speculation_options(kw, match):
    with pytest.raises(ValueError, match=match):
        DecodeConfig(gen_length=8, **kw)


@pytest.mark.parametrize("cache", ["none", "dual"])
def test_sampling_is_exact_with_one_generator_per_row(cache):
    """F's noise is one draw per base-policy step; the walk draws it in F's order."""
    den = CachedToyDenoiser(seed=9, sharpness=8.0)
    prompt = make_prompt(4, 3, seed=5)
    base = _base(gen_length=24, block_length=8, threshold=0.7, cache=cache,
                 temperature=0.7)

    def gens():
        return [torch.Generator().manual_seed(100 + i) for i in range(4)]

    ref = generate(den, prompt, base, gens())
    out = generate(den, prompt, _spec(base), gens())
    assert_same_trajectory(out, ref)
    greedy = generate(den, prompt, dataclasses.replace(base, temperature=0.0))
    assert not torch.equal(greedy.tokens, ref.tokens)  # the noise mattered
    with pytest.raises(ValueError, match="one torch.Generator per row"):
        generate(den, prompt, _spec(base), torch.Generator().manual_seed(0))


def test_rows_are_decoded_independently():
    den = CachedToyDenoiser(seed=8)
    prompt = make_prompt(4, 3, seed=4)
    cfg = _spec(_base(cache="dual"), lookahead="stale")
    together = generate(den, prompt, cfg)
    for i in range(4):
        one = generate(den, prompt[i:i + 1], cfg)
        assert torch.equal(one.tokens[0], together.tokens[i])
        assert one.nfe[0] == together.nfe[i]
        assert one.token_forwards[0] == together.token_forwards[i]


# --- computing only the rows the walk reads (spec_verify="path") --------------------


def assert_same_result(a, b):
    """Every field and count of two trajectory decodes is equal."""
    for name in ("tokens", "nfe", "token_forwards", "commit_step",
                 "committed_per_step"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.n_forwards == b.n_forwards
    assert torch.equal(a.spec.trajectory_step, b.spec.trajectory_step)
    assert a.spec.steps_per_verify == b.spec.steps_per_verify
    assert a.spec.rows_per_verify == b.spec.rows_per_verify


class RowCounter:
    """Wraps a denoiser and records the batch size of every call."""

    def __init__(self, den):
        self.den, self.batches = den, []
        self.mask_id, self.supports_cache = den.mask_id, den.supports_cache

    def logits(self, x):
        self.batches.append(x.shape[0])
        return self.den.logits(x)

    def prefill(self, x):
        self.batches.append(x.shape[0])
        return self.den.prefill(x)

    def logits_window(self, xw, start, cache):
        self.batches.append(xw.shape[0])
        return self.den.logits_window(xw, start, cache)


@pytest.mark.parametrize("cache, lookahead", [
    ("none", "none"), ("none", "exact"), ("prefix", "exact"), ("dual", "none"),
    ("dual", "exact"), ("dual", "stale"), ("prefix", "stale"),
])
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_path_verify_gives_the_tree_s_tokens_and_counts(cache, lookahead,
                                                          temperature):
    """The same decode, cost and trace; one row per forward, fewer rows in all."""
    prompt = make_prompt(4, 3, seed=6)
    base = _base(gen_length=24, block_length=8, threshold=0.7, cache=cache,
                 temperature=temperature)

    def gens():
        return [torch.Generator().manual_seed(40 + i) for i in range(4)]

    out = {}
    for verify in ("tree", "path"):
        den = RowCounter(CachedToyDenoiser(seed=3, sharpness=8.0))
        cfg = _spec(base, lookahead=lookahead, spec_verify=verify)
        out[verify] = (generate(den, prompt, cfg, gens()), den.batches)
    (tree, tree_rows), (path, path_rows) = out["tree"], out["path"]
    assert_same_result(path, tree)
    assert max(tree_rows) > 1 and set(path_rows) == {1}
    assert sum(path_rows) < sum(tree_rows)
    assert tree.spec.mean_steps_per_verify > 1  # the trees were walked


def test_path_verify_is_refused_when_misspelt_and_the_accelerators_use_it():
    from dlmspec_min.ssld import accelerators

    with pytest.raises(ValueError, match="unknown spec_verify"):
        DecodeConfig(gen_length=8, spec_verify="lazy")
    for supports_cache in (True, False):
        configs = accelerators.accelerators(16, 8, 0.9, 0.0, supports_cache)
        spec = [c for c in configs.values() if c.speculate == "trajectory"]
        assert len(spec) == 1 and spec[0].spec_verify == "path"
        assert accelerators.timed(spec[0]) == dataclasses.replace(
            spec[0], spec_verify="tree")


# --- the embedded target --------------------------------------------------------------


@pytest.fixture(scope="module")
def base_target():
    from dlmspec_min.decoding.denoisers import ModelNotAvailableError, load_denoiser
    from dlmspec_min.training.train import held_out_windows

    try:
        den, tok = load_denoiser("dlmspec/base")
    except ModelNotAvailableError as e:
        pytest.skip(f"the embedded target is not trained here: {e}")
    return den, held_out_windows(tok)


@pytest.mark.parametrize("cache, lookahead, block_length", [
    ("none", "exact", 4), ("none", "none", 16), ("dual", "exact", 4),
    ("dual", "exact", 8), ("dual", "none", 16), ("prefix", "exact", 8),
])
def test_exact_on_the_embedded_target(base_target, cache, lookahead, block_length):
    """Greedy, 8 held-out Brown prefixes: token for token the base policy's output."""
    den, held = base_target
    prompt = held[:8, :6]  # [BOS] + 5 tokens
    base = _base(gen_length=16, block_length=block_length, threshold=0.9, cache=cache)
    ref = generate(den, prompt, base)
    out = generate(den, prompt, _spec(base, lookahead=lookahead, spec_budget=7))
    assert_same_trajectory(out, ref)
    assert out.nfe.sum() < ref.nfe.sum()


@pytest.mark.parametrize("world, temperature", [("prose", 1.0), ("math", 0.0)])
def test_path_verify_equals_the_tree_on_the_book_s_targets(world, temperature):
    """The accelerators' trajectory configs as the book's pages decode with them
    (prose: sampled, one generator per row; math: greedy, the world's decode, and its
    stale-lookahead variant): the walk-only decode is the tree's, field for
    field, on the embedded targets (batch invariance on this CPU)."""
    from dlmspec_min.decoding.denoisers import ModelNotAvailableError, load_denoiser
    from dlmspec_min.measures.order import row_generators
    from dlmspec_min.ssld import accelerators
    from dlmspec_min.worlds import get_world

    w = get_world(world)
    name = "dlmspec/base" if world == "prose" else get_world(world).target
    try:
        den, tok = load_denoiser(name)
    except ModelNotAvailableError as e:
        pytest.skip(f"{name} is not trained here: {e}")
    if world == "prose":
        prompt, G, bl = torch.full((3, 1), tok.bos_token_id), 48, 16
    else:
        G, bl = w.decode["gen_length"], w.decode["block_length"]
        prompt = w.prompts(tok, 3)
    configs = accelerators.accelerators(G, bl, 0.9, temperature, den.supports_cache)
    path = next(c for c in configs.values() if c.speculate == "trajectory")
    stale = dataclasses.replace(path, lookahead="stale")  # (sampled: the toys test it)
    for cfg in (path, stale) if world == "math" else (path,):
        a = generate(den, prompt, cfg, row_generators(0, 3))
        b = generate(den, prompt, accelerators.timed(cfg), row_generators(0, 3))
        assert_same_result(a, b)
        # trees were verified (a confident row may commit its block in one pass)
        assert max(max(r, default=0) for r in b.spec.rows_per_verify) > 1


# --- measuring helpers ----------------------------------------------------------------


def test_timed_generate_and_loop_overhead_time_the_same_decode():
    from dlmspec_min.measures import bench

    den = CachedToyDenoiser(seed=2)
    prompt = make_prompt(2, 4)
    cfg = _spec(_base(cache="dual"))
    res, t = bench.timed_generate(den, prompt, cfg)
    ref = generate(den, prompt, cfg)
    assert torch.equal(res.tokens, ref.tokens)
    assert t["forward_calls"] == res.n_forwards > 0
    assert 0 <= t["forward_cpu_s"] <= t["cpu_s"] and t["forward_wall_s"] <= t["wall_s"]
    over = bench.loop_overhead(den, prompt, cfg, repeats=1, warmup=False)
    assert over["forward_calls"] == res.n_forwards
    with pytest.raises(ValueError, match="repeats must be"):
        bench.timed(lambda: None, 0)

