"""The sequential rule (book/claims.yml power: sequential; plumbing/sequential.py)
and what its looks share (measures/reuse.py): a look grown from an earlier one
gives exactly what a fresh measurement at its size gives, decoding each question
once; the run stops at the first decided verdict or at the cap, at the levels
the rule spends; intervals follow the look's level."""

import math

import numpy as np
import pytest
import torch

from dlmspec_min.decoding.decode import generate
from dlmspec_min.experiments import c2_anchor_acceptance as c2
from dlmspec_min.experiments import c5_bounded_quality as c5
from dlmspec_min.measures import reuse, stats
from dlmspec_min.measures.order import row_generators
from dlmspec_min.plumbing import claims, sequential
from dlmspec_min.ssld import accelerators
from dlmspec_min.worlds import MATH

G = 16


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if k.endswith("_seconds") or k.startswith(("c5_speedup_wall", "c2_runtime")):
            continue
        x, y = a[k], b[k]
        if isinstance(x, float) and math.isnan(x):
            assert isinstance(y, float) and math.isnan(y), k
        else:
            assert x == y, k


def test_a_grown_decode_equals_a_fresh_one_and_decodes_each_row_once(tiny_math_pair):
    den, tok = tiny_math_pair.target, tiny_math_pair.tokenizer
    accs = accelerators.accelerators(G, 4, 0.9, 1.0, supports_cache=den.supports_cache)
    spec = [c for c in accs.values() if c.speculate == "trajectory"]
    assert spec  # trajectory speculation's trace is joined row by row too
    traj = generate(den, MATH.prompts(tok, 5), spec[0], row_generators(0, 5))
    with reuse.session() as s:
        reuse.generate(den, MATH.prompts(tok, 2), spec[0], row_generators(0, 2))
        grown = reuse.generate(den, MATH.prompts(tok, 5), spec[0], row_generators(0, 5))
    assert s.rows_decoded == 5 and torch.equal(grown.tokens, traj.tokens)
    assert grown.spec.steps_per_verify == traj.spec.steps_per_verify
    assert torch.equal(grown.spec.trajectory_step, traj.spec.trajectory_step)
    cfg = next(iter(accs.values()))
    fresh = generate(den, MATH.prompts(tok, 5), cfg, row_generators(0, 5))
    with reuse.session() as s:
        reuse.generate(den, MATH.prompts(tok, 3), cfg, row_generators(0, 3))
        grown = reuse.generate(den, MATH.prompts(tok, 5), cfg, row_generators(0, 5))
        again = reuse.generate(den, MATH.prompts(tok, 5), cfg, row_generators(0, 5))
    assert s.rows_decoded == 5 and s.rows_reused == 3 + 5
    for out in (grown, again):
        assert torch.equal(out.tokens, fresh.tokens)
        assert torch.equal(out.nfe, fresh.nfe)
        assert torch.equal(out.commit_step, fresh.commit_step)
    # other rows (another seed's streams) are not taken for these
    with reuse.session() as s:
        reuse.generate(den, MATH.prompts(tok, 3), cfg, row_generators(1, 3))
        reuse.generate(den, MATH.prompts(tok, 5), cfg, row_generators(0, 5))
    assert s.rows_decoded == 8 and s.rows_reused == 0


def test_outside_a_session_and_in_a_timing_nothing_is_reused(tiny_math_pair):
    den, tok = tiny_math_pair.target, tiny_math_pair.tokenizer
    cfg = next(iter(accelerators.accelerators(G, 4, 0.9, 1.0).values()))
    assert reuse.active() is None
    with reuse.session() as s:
        reuse.generate(den, MATH.prompts(tok, 2), cfg, row_generators(0, 2))
        accelerators.wall_clock(
            lambda: reuse.generate(den, MATH.prompts(tok, 2), cfg,
                                   row_generators(0, 2)), 1, warmup=0)
    assert s.rows_reused == 0 and s.rows_decoded == 2


def test_a_c2_look_grown_from_a_smaller_one_is_the_fresh_measurement(tiny_math_pair):
    config = c2.Config(n_samples=5, gen_length=G, block_length=4, threshold=0.9,
                       temperature=1.0, K=8, levels=1, K_sweep=[4, 8], n_train=16,
                       n_bootstrap=50, seed=0, n_codebooks=2)
    kw = dict(paper_alpha=0.0035, paper_tau=3.25)
    fresh = c2.measure(tiny_math_pair, MATH, config, **kw)
    with reuse.session() as s:
        c2.measure(tiny_math_pair, MATH, config.replace(n_samples=3), **kw)
        fits = len(s.fits)
        grown = c2.measure(tiny_math_pair, MATH, config, **kw)
    assert len(s.fits) == fits > 0  # the heads were fitted once, at the first look
    _same(grown.values, fresh.values)


def test_a_c5_look_reuses_its_ssld_decodes_and_gives_the_fresh_values(tiny_math_pair):
    config = c5.Config(n_samples=4, gen_length=G, block_length=4, threshold=0.9,
                       temperature=1.0, K=8, thresholds=[0.5], n_bootstrap=50, seed=0)
    fresh = c5.measure(tiny_math_pair, MATH, config)
    with reuse.session() as s:
        c5.measure(tiny_math_pair, MATH, config.replace(n_samples=2))
        before = s.rows_decoded
        grown = c5.measure(tiny_math_pair, MATH, config)
    decoders = len(grown.arrays["runs"])  # baseline, accelerators and SSLD's three
    assert s.rows_decoded - before == 2 * decoders  # only the two new questions
    _same(grown.values, fresh.values)
    assert grown.rule_values == fresh.rule_values


def test_intervals_follow_the_look_s_level():
    rng = np.random.default_rng(0)
    x = rng.normal(size=40)
    _, lo95, hi95 = stats.mean_bootstrap(x, 500, 0)
    with stats.interval_level(0.99):
        assert stats.current_level() == 0.99
        _, lo99, hi99 = stats.mean_bootstrap(x, 500, 0)
        # a level named by the caller wins
        assert stats.mean_bootstrap(x, 500, 0, level=0.95) == (
            stats.mean_bootstrap(x, 500, 0, level=0.95))
    assert stats.current_level() == 0.95
    assert lo99 < lo95 and hi99 > hi95
    with pytest.raises(ValueError, match="level must lie"):
        with stats.interval_level(1.0):
            pass


def _registry(sizes, spend=(0.01, 0.04), total=0.05):
    reg = claims.load_registry()
    reg["power"]["sequential"] = {"total": total, "spend": list(spend),
                                  "sizes": {"C5": list(sizes)}}
    return reg


class _Cfg:
    sequential = True

    def __init__(self, n):
        self.n_samples = n

    def replace(self, **kw):
        return _Cfg(kw["n_samples"])


def _c5_values(drop_lo, drop_hi):
    return {"c5_speedup": 2.0, "c5_quality_drop": (drop_lo + drop_hi) / 2,
            "c5_quality_drop_lo": drop_lo, "c5_quality_drop_hi": drop_hi,
            "c5_quality_bound": 0.05, "c5_rep2_relaxed": 0.0, "c5_rep2_base_hi": 0.1,
            "c5_quality_relaxed": 0.5, "c5_quality_base": 0.6}


def test_the_run_stops_at_the_first_decided_look_at_the_levels_it_spends():
    seen = []

    def measure_at(cfg):  # decided from 20 questions on
        seen.append((cfg.n_samples, stats.current_level()))
        return _c5_values(0.1, 0.3) if cfg.n_samples >= 20 else _c5_values(0.0, 0.3)

    reg = _registry([10, 20, 40], spend=(0.01, 0.01, 0.03))
    result, looks = sequential.run("C5", measure_at, _Cfg(10), lambda r: r, reg)
    assert seen == [(10, 0.99), (20, 0.99)]
    assert (looks.n, looks.stopped, looks.cap, looks.level) == (20, sequential.DECIDED,
                                                                40, 0.99)
    assert list(looks.table()["verdict"]) == ["inconclusive", "replicated"]
    v = looks.values()
    assert v["c5_seq_n"] == 20 and v["c5_seq_looks"] == 2 and "look 2 of 3" in \
        v["c5_seq_note"]


def test_the_run_stops_at_the_cap_and_says_so():
    reg = _registry([10, 20])
    _, looks = sequential.run("C5", lambda cfg: _c5_values(0.0, 0.3), _Cfg(10),
                              lambda r: r, reg)
    assert (looks.n, looks.stopped, looks.level) == (20, sequential.CAPPED, 0.96)
    assert "cap was reached" in looks.note()


def test_one_look_without_the_rule_and_bad_plans_refused():
    class Once(_Cfg):
        sequential = False

    _, looks = sequential.run("C5", lambda cfg: _c5_values(0.0, 0.3), Once(7),
                              lambda r: r, _registry([10, 20]))
    assert (looks.n, looks.stopped, looks.level) == (7, sequential.ONE_LOOK, 0.95)
    # a user's own size with the rule on: one look at that size, and the note says why
    seen = []
    _, looks = sequential.run(
        "C5", lambda cfg: seen.append(cfg.n_samples) or _c5_values(0.0, 0.3), _Cfg(7),
        lambda r: r, _registry([10, 20]))
    assert seen == [7]
    assert (looks.n, looks.stopped, looks.level) == (7, sequential.ONE_LOOK, 0.95)
    assert "n_samples = 7 is not the sequential rule's first size, 10" in looks.note()
    with pytest.raises(ValueError, match="must grow"):
        sequential.plan("C5", _registry([20, 10]))
    with pytest.raises(ValueError, match="more than 0.05"):
        sequential.plan("C5", _registry([10, 20], spend=(0.03, 0.04)))
    with pytest.raises(ValueError, match="2 sizes but 3 shares"):
        sequential.plan("C5", _registry([10, 20], spend=(0.01, 0.01, 0.01)))


def test_the_registry_s_caps_follow_from_its_stated_inputs():
    """book/claims.yml power: sequential: the needed sizes are the power
    calculation at look 2's level from the sides seen at look 1, and the caps
    are power.allocate's under the stated budget, pool and seconds."""
    from dlmspec_min.measures import power

    reg = claims.load_registry()
    block = reg["power"]["sequential"]
    first = {c: sizes[0] for c, sizes in block["sizes"].items()}
    for c, (a, b) in block["seen"].items():
        n = first[c]
        need = power.size_to_separate(tuple(a), tuple(b), n,
                                      power=reg["power"]["level"],
                                      level=1 - block["spend"][-1])
        assert need == block["needed"][c], c
    caps = power.allocate(first, block["needed"], block["seconds"],
                          block["budget_s"], block["pool"])
    assert {c: s[-1] for c, s in block["sizes"].items()} == caps
    assert sum(block["spend"]) == pytest.approx(block["total"]) == 0.05
    for c, sizes in block["sizes"].items():
        plan = sequential.plan(c, reg)
        assert plan["sizes"] == sizes and sum(plan["spend"]) == pytest.approx(0.05)
        # the first look is the size the page's math profile runs, with the rule on
        profile = (claims.REPO_ROOT / "notebooks" / "profiles" / "math"
                   / (claims.Path(reg["claims"][c]["notebook"]).stem + ".yaml"))
        text = profile.read_text()
        assert f"n_samples: {sizes[0]}" in text and "sequential: true" in text


def test_allocate_pays_the_cheapest_claims_first_and_stops_growth_past_the_budget():
    from dlmspec_min.measures import power

    first = {"A": 10, "B": 10, "C": 10}
    needed = {"A": 100, "B": 40, "C": 1000}
    secs = {"A": 1.0, "B": 1.0, "C": 0.01}
    # C first (10 s asked; 6.8 s paid at the pool's 680), then B (40 s); A (100 s)
    # gets what the remaining 33.2 s pay for
    assert power.allocate(first, needed, secs, 80, 680) == {"A": 33, "B": 40, "C": 680}
    # nothing left past the first: no growth
    assert power.allocate(first, needed, secs, 45, 680)["A"] == 10


def test_the_size_a_verdict_rests_on_is_shown_beside_it():
    reg = claims.load_registry()
    row = {"id": "C5", "verdict": "inconclusive",
           "values": {**_c5_values(0.0, 0.3), "c5_seq_n": 26, "c5_seq_looks": 1}}
    cell = claims.world_cells(row, reg)["prose"]
    assert (cell["size"], cell["looks"]) == (26, 1)
    assert claims.size_words(cell) == "on 26 questions"
    assert claims.size_words({"size": 125, "looks": 2}) == (
        "on 125 questions (sequential rule, look 2)")
    assert claims.size_words({"size": None, "looks": None}) == ""
