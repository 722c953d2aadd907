"""C5's measurement (dlmspec_min.experiments.c5_bounded_quality) on tiny models."""

import numpy as np
import pytest
import torch
from pages import names_recorded_on_page, shown_glue_names

from dlmspec_min.experiments import c5_bounded_quality as c5m
from dlmspec_min.measures import quality
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing.claims import load_registry, verdict
from dlmspec_min.ssld import semantic
from dlmspec_min.worlds import PROSE

NOTEBOOK = REPO_ROOT / "notebooks" / "05_bounded_quality.md"
TINY = dict(n_samples=3, gen_length=8, block_length=4, threshold=0.9, thresholds=[0.5],
            temperature=1.0, K=8, quality_bound=0.05, n_bootstrap=30, seed=0)
TIMINGS = {"c5_speedup_wall"}  # wall-clock: differs between two runs


@pytest.fixture(scope="module")
def result(tiny_pair):
    return c5m.measure(tiny_pair, PROSE, c5m.Config(**TINY))


def test_every_value_the_page_and_its_rule_read_is_measured(result):
    names = shown_glue_names(NOTEBOOK) - names_recorded_on_page(NOTEBOOK)
    assert names, "no glue name parsed from the notebook"
    assert names <= set(result.values), names - set(result.values)
    assert set(load_registry()["claims"]["C5"]["keys"]) <= set(result.values)
    assert set(result.rule_values) <= set(result.values)
    for key, x in result.rule_values.items():
        assert x == float(result.values[key])
    verdict("C5", result.rule_values)


def test_values_lie_in_their_registered_ranges_and_intervals_are_ordered(result):
    v = result.values
    for key, spec in load_registry()["claims"]["C5"]["keys"].items():
        lo, hi = spec["range"]
        assert lo <= v[key] <= hi, (key, v[key])
    assert v["c5_speedup_lo"] <= v["c5_speedup"] <= v["c5_speedup_hi"]
    assert v["c5_agree_drop_lo"] <= v["c5_agree_drop"] <= v["c5_agree_drop_hi"]
    for key in ["c5_relaxed_acceptance", "c5_exact_acceptance",
                "c5_continuation_share_of_anchors"]:
        assert 0 <= v[key] <= 1, key
    assert v["c5_c"] > 0


def test_speed_and_quality_recomputed_from_the_runs(result, tiny_pair):
    runs, res, v = result.arrays["runs"], result.tables["decoders"], result.values
    assert list(res.index) == list(runs)
    assert list(runs)[:3] == [c5m.BASELINE, c5m.accelerator_name(0.9),
                              c5m.accelerator_name(0.5)]
    b_tf, r_tf = runs[c5m.BASELINE][2], runs[c5m.RELAXED][2]
    assert v["c5_speedup_tf"] == pytest.approx(b_tf.sum().item() / r_tf.sum().item())
    acc_nfe = runs[c5m.accelerator_name(0.9)][1].mean().item()
    assert v["c5_speedup_vs_acc"] == pytest.approx(acc_nfe / runs[c5m.RELAXED][1]
                                                   .mean().item())
    base = res.loc[c5m.BASELINE]  # the baseline against itself
    assert base["speedup (NFE)"] == pytest.approx(1.0)
    assert base["agreement drop"] == 0.0 and bool(base["inside bound"])
    drop = res["agreement drop"]
    # inside: the agreement within the bound AND repeated bigrams at most the upper
    # end of the baseline's interval, recomputed here from the decodes
    specials = semantic.semantic_ids_for(tiny_pair.target, TINY["K"], seed=TINY["seed"],
                                         tokenizer=tiny_pair.tokenizer)
    specials = specials.special.nonzero().flatten().tolist()
    _, _, rep_max = quality.repetition_ci(runs[c5m.BASELINE][0], 2, specials,
                                          TINY["n_bootstrap"], TINY["seed"])
    assert v["c5_rep2_base_hi"] == pytest.approx(rep_max)
    bigrams = [np.nanmean(quality.repetition(gen, 2, specials))
               for gen, *_ in runs.values()]
    assert list(res["repeated bigrams"]) == pytest.approx(bigrams)
    assert list(res["quality inside"]) == list(drop <= TINY["quality_bound"])
    assert list(res["repetition inside"]) == [b <= rep_max for b in bigrams]
    assert list(res["inside bound"]) == [a and r for a, r in zip(
        res["quality inside"], res["repetition inside"], strict=True)]
    assert v["c5_rep2_base"] <= rep_max
    inside = res[res["inside bound"]]
    assert v["c5_best_speedup_in_bound"] == inside["speedup (NFE)"].max()
    best = v["c5_best_speedup_in_bound"]
    assert res.loc[v["c5_best_in_bound"], "speedup (NFE)"] == best
    bound = TINY["quality_bound"]
    assert v["c5_relaxed_within_bound"] == int(
        v["c5_agree_drop"] <= bound and v["c5_rep2_relaxed"] <= rep_max)
    assert v["c5_every_within_bound"] == int(res.loc[c5m.EVERY, "inside bound"])
    for gen, *_ in runs.values():
        assert gen.shape == (TINY["n_samples"], TINY["gen_length"])
    examples = result.tables["examples"]  # a sample of every decoder's text
    assert list(examples.columns) == list(runs)
    assert examples.shape == (min(TINY["n_samples"], c5m.N_SHOWN), len(runs))


def test_the_same_seed_gives_the_same_values(tiny_pair, result):
    again = c5m.measure(tiny_pair, PROSE, c5m.Config(**TINY))
    assert list(again.values) == list(result.values)
    for key, x in result.values.items():
        if key not in TIMINGS:
            assert again.values[key] == x, key
    for name, (gen, *_) in result.arrays["runs"].items():
        assert torch.equal(again.arrays["runs"][name][0], gen), name


def test_decoder_configs():
    d = c5m.Decoders(gen_length=8, block_length=4, temperature=0.5)
    assert d.baseline.steps == 8 and d.baseline.rule == "schedule"
    acc = d.accelerator(0.7)
    assert acc.rule == "threshold" and acc.threshold == 0.7
    assert acc.temperature == d.baseline.temperature == 0.5


def test_rule_values_read_relaxed_against_baseline(result):
    res = result.tables["decoders"]
    values = c5m.rule_values(res, 0.25)
    assert values["c5_quality_bound"] == 0.25
    relaxed = res.loc[c5m.RELAXED]
    assert values["c5_quality_relaxed"] == float(relaxed["judge agreement"])
    assert all(isinstance(x, float) for x in values.values())
    assert np.isfinite(list(values.values())).all()


def test_in_prose_the_quality_is_the_judge_s_agreement(result):
    """The rule reads c5_quality_* (2026-12-02): in prose exactly the agreement's
    values, so no prose verdict can change with the rename."""
    v = result.values
    assert result.tables["decoders"].attrs["quality"] == c5m.AGREEMENT
    assert v["c5_quality_measure"] == "judge agreement"
    for q, a in [("base", "base"), ("relaxed", "relaxed"), ("drop", "drop"),
                 ("drop_lo", "drop_lo"), ("drop_hi", "drop_hi")]:
        assert v[f"c5_quality_{q}"] == v[f"c5_agree_{a}"], q
    assert not any(k.startswith("c5_answer_acc") for k in v)


def test_with_answers_the_quality_is_the_answer_accuracy(result, tiny_pair):
    """Where texts have answers (the math world) the bound is on the answer
    accuracy, recomputed here from injected correctness; the judge beside it."""
    runs = result.arrays["runs"]
    specials = semantic.semantic_ids_for(tiny_pair.target, TINY["K"], seed=TINY["seed"],
                                         tokenizer=tiny_pair.tokenizer)
    specials = specials.special.nonzero().flatten().tolist()

    def correct_of(gen):  # a stand-in for the world's answers: even first token
        return (gen[:, 0] % 2 == 0).double().numpy()

    from dlmspec_min.measures import judge as judges

    jm = judges.load_judge(judges.SMOLLM2)
    res = c5m.judge_table(jm, tiny_pair.tokenizer, runs, specials,
                          quality_bound=TINY["quality_bound"],
                          n_bootstrap=TINY["n_bootstrap"], seed=TINY["seed"],
                          correct_of=correct_of)
    assert res.attrs["quality"] == c5m.ACCURACY
    base = correct_of(runs[c5m.BASELINE][0])
    for name, (gen, *_) in runs.items():
        acc = correct_of(gen).mean()
        assert res.loc[name, "answer accuracy"] == pytest.approx(acc)
        assert res.loc[name, "accuracy drop"] == pytest.approx(base.mean() - acc)
        assert res.loc[name, "quality inside"] == (
            base.mean() - acc <= TINY["quality_bound"])
    assert res.loc[c5m.RELAXED, "judge agreement"] == result.tables["decoders"].loc[
        c5m.RELAXED, "judge agreement"]  # the judge's figures stand beside it
    q = c5m.quality_values(res)
    assert q["c5_quality_base"] == pytest.approx(base.mean())
    assert q["c5_quality_drop_lo"] <= q["c5_quality_drop"] <= q["c5_quality_drop_hi"]
