"""C1's measurement as a library function (dlmspec_min.experiments.c1_easy_first),
called on the tiny random-weight models and on synthetic inputs."""

import math

import numpy as np
import pytest
import torch
from pages import rule_names, same_value, shown_glue_names

from dlmspec_min.experiments import c1_easy_first as c1
from dlmspec_min.measures import tagger
from dlmspec_min.measures.tagger import CONTENT, FUNCTION
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing.claims import load_registry
from dlmspec_min.worlds import PROSE

NOTEBOOK = REPO_ROOT / "notebooks" / "01_easy_first.md"
PAGE_ONLY = {"c1_verdict", "c1_model", "c1_runtime_seconds"}  # recorded by the page
SIZES = dict(n_samples=4, gen_length=12, block_length=4, temperature=1.0, threshold=0.9,
             thresholds=[0.1], n_bootstrap=30, seed=0)


@pytest.fixture(scope="module")
def result(tiny_pair):
    return c1.measure(tiny_pair, PROSE, c1.Config(**SIZES))


def test_every_value_the_page_and_the_rule_read_is_measured(result):
    wanted = shown_glue_names(NOTEBOOK) - PAGE_ONLY
    claim = load_registry()["claims"]["C1"]
    wanted |= set(claim["keys"]) | rule_names(claim) | set(claim["headline"])
    assert len(wanted) > 40
    assert not wanted - set(result.values), sorted(wanted - set(result.values))
    assert not PAGE_ONLY & set(result.values)


def test_values_are_recordable_scalars_in_their_ranges(result):
    v = result.values
    for key, value in v.items():
        assert isinstance(value, (int, float, str, np.integer, np.floating)), key
    for key, spec in load_registry()["claims"]["C1"]["keys"].items():
        lo, hi = spec["range"]
        if key == "c1_mean_r_glue" and v["c1_n_glue"] == 0:  # no glue decoded: no mean
            assert math.isnan(v[key])
            continue
        assert lo <= v[key] <= hi, (key, v[key])
    for prefix in ["c1_auc", "c1_random_auc", "c1_thr_auc", "c1_thrlow_auc", "c1_reg"]:
        value = v[prefix if prefix != "c1_reg" else "c1_reg_coef"]
        assert v[f"{prefix}_lo"] <= value <= v[f"{prefix}_hi"], prefix
    assert v["c1_direction"] == ("later" if v["c1_auc"] > 0.5 else "earlier")
    inside = v["c1_random_auc_lo"] <= 0.5 <= v["c1_random_auc_hi"]
    assert v["c1_random_covers"] == ("covers" if inside else "excludes")
    assert (v["c1_n_samples"], v["c1_gen_length"], v["c1_block_length"]) == (4, 12, 4)


def test_counts_and_auc_recomputed_from_the_token_table(result):
    t = result.arrays["tokens"][c1.PRIMARY]
    assert len(t) == SIZES["n_samples"] * SIZES["gen_length"]
    con, fun = t[t.cls == CONTENT].r.to_numpy(), t[t.cls == FUNCTION].r.to_numpy()
    assert (result["c1_n_content"], result["c1_n_function"]) == (len(con), len(fun))
    assert result["c1_mean_r_content"] == pytest.approx(con.mean())
    pairs = (con[:, None] > fun[None, :]) + 0.5 * (con[:, None] == fun[None, :])
    assert result["c1_auc"] == pytest.approx(pairs.mean())
    row = result.tables["summary"].loc[c1.PRIMARY]
    assert row[["n_content", "n_function", "n_glue", "n_special"]].sum() == len(t)


def test_the_raw_regression_gap_is_the_difference_of_the_means(result):
    v = result.values
    assert v["c1_reg_raw_coef"] == pytest.approx(
        v["c1_mean_r_content"] - v["c1_mean_r_function"])
    assert v["c1_reg_kept"] == pytest.approx(v["c1_reg_coef"] / v["c1_reg_raw_coef"])
    freq = v["c1_reg_freq_coef"]
    assert v["c1_freq_direction"] == ("earlier" if freq < 0 else "later")


def test_one_token_per_step_decoders_commit_one_token_per_forward(result):
    for name in [c1.PRIMARY, c1.RANDOM, c1.blocked_name(SIZES["block_length"])]:
        r = result.arrays["results"][name]
        assert (r.nfe == SIZES["gen_length"]).all()
        assert (result.arrays["tokens"][name].step_size == 1).all()
    assert result.tables["decoders"].loc[c1.PRIMARY, "tokens per step"] == 1


def test_threshold_values_recomputed_from_the_arrays(result):
    v, thr = result.values, result.arrays["thresholds"]
    assert list(thr) == [0.9, 0.1]
    for prefix, value in [("c1_thr", 0.9), ("c1_thrlow", 0.1)]:
        t, r = result.arrays["tokens"][thr[value]], result.arrays["results"][thr[value]]
        assert v[f"{prefix}_threshold"] == value
        parallel = (t.step_size > 1).mean()
        assert v[f"{prefix}_parallel_fraction"] == pytest.approx(parallel)
        assert v[f"{prefix}_tokens_per_step"] == pytest.approx(
            SIZES["gen_length"] / r.nfe.double().mean().item())
    note = v["c1_thr_note"]
    assert note.startswith("never") == (v["c1_thr_parallel_fraction"] == 0)
    assert list(result.tables["threshold"].index) == [0.9, 0.1]


def test_deciles_and_tables_match_the_values(result):
    by = result.tables["content_by_decile"]
    assert list(by.columns) == [f"D{i}" for i in range(1, 11)]
    assert by.loc[c1.PRIMARY, "D1"] == round(result["c1_content_first_decile"], 3)
    d = result.arrays["deciles"]
    sums = d.groupby(["decoder", "bin"]).share.sum()
    assert np.allclose(sums, 1)  # every decile's class shares add up to one
    reg = result.tables["regression"]
    assert "const" not in reg.index.get_level_values("term")
    assert reg.loc[(c1.PRIMARY, "+ position + frequency", "content"), "coef"] == round(
        result["c1_reg_coef"], 4)


def test_the_same_seed_gives_the_same_values(tiny_pair, result):
    again = c1.measure(tiny_pair, PROSE, c1.Config(**SIZES))
    assert list(again.values) == list(result.values)
    assert all(same_value(again.values[k], v) for k, v in result.values.items())


def test_each_decoder_and_each_seed_draws_its_own_random_stream(tiny_pair, result):
    primary = c1.decoders(12, 4, 1.0, 0.9, [0.1])[c1.PRIMARY]
    cfg = {"a": primary, "b": primary}  # one decoder twice: streams 0 and 1
    args = (tiny_pair.target, tiny_pair.tokenizer, result.arrays["prompt"], cfg)
    kw = dict(lexicon=tagger.default_lexicon(), counts=None)
    r0, _, _ = c1.decode_all(*args, seed=0, **kw)
    r1, _, _ = c1.decode_all(*args, seed=1, **kw)
    main = result.arrays["results"][c1.PRIMARY]
    assert torch.equal(r0["a"].generated, main.generated)
    assert not torch.equal(r0["a"].generated, r0["b"].generated)
    assert not torch.equal(r0["a"].generated, r1["a"].generated)


def test_threshold_names_put_the_main_one_first_and_run_each_once():
    assert c1.threshold_names(0.9, [0.1, 0.5, 0.9]) == {
        0.9: "threshold 0.9", 0.5: "threshold 0.5", 0.1: "threshold 0.1"}
    cfgs = c1.decoders(8, 4, 1.0, 0.9, [0.5, 0.9])
    assert list(cfgs) == ["confidence", "random", "confidence, blocks of 4",
                          "threshold 0.9", "threshold 0.5"]
    assert cfgs["random"].remasking == "random"
    assert cfgs["threshold 0.5"].threshold == 0.5
    assert cfgs["confidence, blocks of 4"].block_length == 4


def test_threshold_values_with_one_threshold_give_both_prefixes_the_same():
    nan = float("nan")
    summary = {"tokens_per_step": 1.5, "parallel_fraction": 0.4, "content_single": 0.6,
               "content_parallel": 0.2, "glue_single": nan, "glue_parallel": 0.1}
    out = c1.threshold_values({0.9: summary}, 0.9)
    assert out["c1_thr_tokens_per_step"] == out["c1_thrlow_tokens_per_step"] == 1.5
    assert out["c1_thr_note"] == "commits some tokens in parallel"
    assert out["c1_thrlow_content_order"] == "more"
    assert out["c1_thrlow_glue_order"].startswith("not comparable")
    assert c1.more_or_less(0.1, 0.2) == "less"


def test_the_figures_have_a_panel_per_decoder_and_threshold(result):
    assert len(c1.draw_ecdf(result).axes) == 3
    assert len(c1.draw_deciles(result).axes) == 2
    assert len(c1.draw_threshold(result).axes) == 2 * len(result.arrays["thresholds"])
