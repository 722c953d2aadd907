"""C7's measurement as a library function (dlmspec_min.experiments.c7_strong_model),
called on the tiny-model fixture and on synthetic inputs."""

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from pages import rule_names, same_value, shown_glue_names

from dlmspec_min.experiments import c7_strong_model as c7m
from dlmspec_min.measures import tagger
from dlmspec_min.plumbing.claims import load_registry, plain
from dlmspec_min.worlds import PROSE

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "07_strong_model.md"
# the page records these itself: verdicts from the rule, its own runtime, its figures
PAGE_OWN = {"c7_verdict", "c7_verdict_piece", "c7_runtime_seconds",
            # where the sequential run stopped (plumbing/sequential.py, Looks)
            *(f"c7_seq_{k}" for k in ("n", "level", "looks", "cap", "stopped", "note"))}
TINY = dict(n_windows=4, n_positions=3, batch_size=8, n_samples=3, n_tau=2,
            gen_length=8, block_length=4, threshold=0.9, temperature=1.0, K=8,
            levels=1, n_train=16, n_bootstrap=50, seed=0, n_codebooks=2)
PAPER = dict(paper_ratio=2, tau_paper=3.25)
TIMINGS = re.compile(r"seconds")


def tiny_roles(tiny_models) -> c7m.StrongModels:
    """base and large: the tiny target; small (and the draft): the tinier draft."""
    names = {"small": "tiny/draft", "base": "tiny/target", "large": "tiny/target"}
    loaded = {"tiny/draft": tiny_models["draft"], "tiny/target": tiny_models["target"]}
    return c7m.StrongModels(names, loaded, "tiny/draft")


@pytest.fixture(scope="module")
def result(tiny_models):
    return c7m.measure(tiny_roles(tiny_models), PROSE, c7m.Config(**TINY), **PAPER)


# --- the whole measurement on the tiny models -----------------------------------------


def test_every_value_the_page_and_the_rule_read_is_measured(result):
    claim = load_registry()["claims"]["C7"]
    wanted = (shown_glue_names(NOTEBOOK) | rule_names(claim, prefix="c7_")) - PAGE_OWN
    assert len(wanted) > 40
    missing = wanted - set(result.values)
    assert not missing, f"not measured: {sorted(missing)}"
    registered = set(load_registry()["claims"]["C7"]["keys"])
    assert registered - set(result.values) == set()
    assert not PAGE_OWN & set(result.values)  # verdicts stay with the page


def test_values_come_in_the_page_order_and_are_plain_scalars(result):
    keys = list(result.values)
    assert keys[:3] == ["c7_params_small", "c7_params_base", "c7_params_large"]
    assert keys.index("c7_det_ratio") > keys.index("c7_ptrue_fn_large_hi")
    assert keys.index("c7_tau_acc_large") > keys.index("c7_acc_hits_large")
    assert keys[-2:] == ["c7_ratio_words", "c7_alpha_words"]
    for value in result.values.values():
        plain(value)  # raises for anything that could not be recorded


def test_values_lie_in_their_registered_ranges(result):
    keys = load_registry()["claims"]["C7"]["keys"]
    for key, spec in keys.items():
        v = float(result.values[key])
        if math.isnan(v):  # only a ratio whose denominator had no hit
            assert key.startswith(("c7_acc_ratio", "c7_ptrue_ratio")), key
            continue
        lo, hi = spec["range"]
        assert lo <= v <= hi, (key, v)


def test_intervals_are_ordered_around_their_value(result):
    v = result.values
    triples = [(k[:-3], k, k[:-3] + "_hi") for k in v
               if k.endswith("_lo") and k[:-3] + "_hi" in v]
    triples += [("c7_alpha_sid_large", "c7_alpha_lo_large", "c7_alpha_hi_large"),
                ("c7_alpha_sid_piece_large", "c7_alpha_piece_lo_large",
                 "c7_alpha_piece_hi_large")]
    assert v["c7_target_first_pass_large"] <= v["c7_target_first_pass_large_hi"]
    checked = 0
    for value_key, lo_key, hi_key in triples:
        if any(math.isnan(v[k]) for k in (value_key, lo_key, hi_key)):
            continue
        assert v[lo_key] <= v[value_key] <= v[hi_key], value_key
        checked += 1
    assert checked >= 20


def test_same_seed_gives_the_same_values(tiny_models, result):
    again = c7m.measure(tiny_roles(tiny_models), PROSE, c7m.Config(**TINY), **PAPER)
    same = {k: v for k, v in result.values.items() if not TIMINGS.search(k)}
    other = {k: v for k, v in again.values.items() if not TIMINGS.search(k)}
    assert list(same) == list(other)
    for k in same:
        a, b = same[k], other[k]
        assert same_value(a, b), k


def test_counts_agree_with_the_arrays(result):
    v, loo = result.values, result.arrays["loo"]
    assert v["c7_n_windows"] == TINY["n_windows"] == len(result.arrays["held"])
    assert v["c7_positions_measured"] == int(loo["large"].measured.sum())
    assert v["c7_positions_measured"] <= TINY["n_windows"] * TINY["n_positions"]
    summary = result.tables["summary"]
    d_large = summary[(summary.model == "large") & (summary.measure == c7m.D_LABEL)]
    assert d_large.positions.sum() == v["c7_positions_measured"]
    # base and large are the same tiny model with the same tokenizer: same positions
    assert v["c7_same_positions"] == 1
    assert v["c7_n_codebooks"] == TINY["n_codebooks"]
    assert v["c7_n_anchors_large"] >= 1
    classes = result.arrays["classes"]["large"]
    content = torch.as_tensor(classes == tagger.CONTENT) & loo["large"].measured
    assert v["c7_acc_hits_large"] == int(loo["large"].correct[content].sum())


def test_determinedness_recomputed_from_the_positions(result):
    v, pos = result.values, result.arrays["positions"]
    for role in c7m.ROLES:
        for cls, fn in [(tagger.CONTENT, ""), (tagger.FUNCTION, "fn_")]:
            at = (pos.model == role) & (pos["word class"] == cls)
            p = pos[at]["top-1 probability"]
            if len(p):
                assert v[f"c7_det_{fn}{role}"] == pytest.approx(p.mean(), rel=1e-9)
    # base and large are the same model on the same positions: the paired ratio is 1
    assert v["c7_det_ratio"] == pytest.approx(1.0)
    assert v["c7_det_ratio_lo"] == pytest.approx(1.0)
    assert v["c7_det_ratio_to_paper"] == pytest.approx(v["c7_det_ratio"] / 2)
    assert v["c7_size_ratio"] == pytest.approx(1.0)
    assert v["c7_ratio_words"].startswith("not above 1")


def test_the_bar_and_the_shortfall_follow_from_tau_and_alpha(result):
    v = result.values
    assert v["c7_alpha_star_large"] == pytest.approx(1 - 1 / v["c7_tau_acc_large"])
    acc = result.tables["accelerators"]
    assert v["c7_tau_acc_large"] == acc["tokens_per_nfe"].max()
    assert v["c7_strongest"] in acc.index
    row = acc.loc[v["c7_strongest"]]  # the regime beside the bar
    assert v["c7_regime_text_fraction"] == pytest.approx(row["text_fraction"])
    assert v["c7_regime_text_tpf"] == pytest.approx(row["text_tokens_per_nfe"])
    assert same_value(v["c7_regime_tail_tpf"], float(row["tail_tokens_per_nfe"]))
    if v["c7_alpha_sid_large"] > 0:
        assert v["c7_shortfall_is_bound"] == 0
        assert v["c7_shortfall_large"] == pytest.approx(
            v["c7_alpha_star_large"] / v["c7_alpha_sid_large"])
    table = result.tables["acceptance"]
    assert table.loc[v["c7_best"], "alpha"] == v["c7_alpha_sid_large"]
    assert table.loc[v["c7_best"], "alpha, piece-level anchors"] == \
        v["c7_alpha_sid_piece_large"]
    assert table.loc[c7m.FIRST_PASS_LABEL, "alpha"] == v["c7_target_first_pass_large"]
    assert v["c7_paper_bar_alpha_star"] == pytest.approx(1 - 1 / 3.25)


def test_the_tables_and_figures_the_page_shows(result):
    import matplotlib.pyplot as plt

    assert list(result.tables["models"].index) == list(c7m.ROLES)
    assert len(result.tables["ratios"]) == 2 * 2 * 3  # pairs x classes x measures
    figs = [c7m.draw_measures(result.tables["summary"]),
            c7m.draw_ecdf(result.arrays["positions"]),
            c7m.draw_ratios(result.tables["ratios"], 2),
            c7m.draw_acceptance(result.tables["acceptance"],
                                result["c7_alpha_star_large"],
                                result["c7_tau_acc_large"],
                                result["c7_chance_majority_large"],
                                result["c7_n_anchors_large"])]
    assert [len(f.axes) for f in figs] == [3, 2, 1, 1]
    for f in figs:
        plt.close(f)


# --- the smaller pieces, on synthetic inputs ------------------------------------------


def test_more_accelerator_samples_than_samples_is_refused():
    with pytest.raises(ValueError, match="n_tau = 5 must not exceed n_samples = 4"):
        c7m.check_sizes(5, 4)
    c7m.check_sizes(4, 4)


def test_more_windows_than_held_out_is_refused():
    with pytest.raises(ValueError, match="held-out windows exist"):
        PROSE.held_out_rows(10**6, 0)


def test_held_out_windows_are_a_sorted_seeded_draw():
    from dlmspec_min.texts.tokenizer import load_tokenizer
    from dlmspec_min.training import train

    every = train.held_out_windows(load_tokenizer())
    _, a = PROSE.held_out_rows(5, 3)
    pick = np.sort(np.random.default_rng(3).choice(len(every), 5, replace=False))
    assert torch.equal(torch.as_tensor(a), torch.as_tensor(every[pick]))
    assert len({tuple(row.tolist()) for row in a}) == 5


def test_summary_values_name_every_class_and_interval():
    summary = pd.DataFrame([
        dict(model="base", word_class=tagger.CONTENT, measure=c7m.D_LABEL, value=0.5,
             low=0.4, high=0.6, positions=3),
        dict(model="large", word_class=tagger.FUNCTION, measure="entropy (nats)",
             value=2.0, low=1.5, high=2.5, positions=3)])
    assert c7m.summary_values(summary) == {
        "c7_det_base": 0.5, "c7_det_base_lo": 0.4, "c7_det_base_hi": 0.6,
        "c7_entropy_fn_large": 2.0, "c7_entropy_fn_large_lo": 1.5,
        "c7_entropy_fn_large_hi": 2.5}


def test_a_ratio_over_zero_hits_is_nan_and_others_are_paired():
    rng = np.random.default_rng(0)
    per_window = {}
    for role in c7m.ROLES:
        for cls in c7m.KEEP:
            for m in c7m.MEASURE_NAMES:
                n = np.full(6, 4.0)
                s = np.zeros(6) if (role == "base" and m == "correct") else \
                    rng.uniform(1, 3, 6)
                per_window[role, cls, m] = (s, n)
    ratios = c7m.determinedness_ratios(per_window, 100, 0)
    acc = c7m.ratio_of(ratios, "large / base", measure="top-1 accuracy")
    assert math.isnan(acc["value"]) and math.isnan(acc["low"])
    d = c7m.ratio_of(ratios, "large / base")
    s_l, s_b = per_window["large", tagger.CONTENT, "top1_prob"][0], \
        per_window["base", tagger.CONTENT, "top1_prob"][0]
    assert d["value"] == pytest.approx(s_l.sum() / s_b.sum())
    assert d["low"] <= d["value"] <= d["high"]
    values = c7m.ratio_values(ratios)
    assert values["c7_det_ratio"] == d["value"]
    assert math.isnan(values["c7_acc_ratio"])


def test_function_words_above_needs_every_model():
    rows = [dict(model=r, word_class=c, measure=c7m.D_LABEL, value=v)
            for r, c, v in [("base", tagger.CONTENT, 0.1),
                            ("base", tagger.FUNCTION, 0.3),
                            ("large", tagger.CONTENT, 0.2),
                            ("large", tagger.FUNCTION, 0.15)]]
    assert not c7m.function_words_above(pd.DataFrame(rows))
    rows[3]["value"] = 0.25
    assert c7m.function_words_above(pd.DataFrame(rows))
    assert c7m.fn_words(True).startswith("function words are more determined")
    assert "not more determined" in c7m.fn_words(False)


def test_the_words_follow_the_numbers():
    assert c7m.ratio_words(1.5, 0.99, 2).startswith("not above 1")
    assert "by less than the paper's factor" in c7m.ratio_words(1.5, 1.1, 2)
    assert "at least the paper's factor" in c7m.ratio_words(2.5, 1.1, 2)
    assert c7m.alpha_words(0.01, 0.2).startswith("far below")
    assert c7m.alpha_words(0.05, 0.2).startswith("below alpha*, but")
    assert c7m.alpha_words(0.3, 0.2) == "not below alpha*"
    assert "lies inside" in c7m.majority_words(0.01, 0.1, 0.05)
    assert "excludes" in c7m.majority_words(0.01, 0.04, 0.05)


def test_each_model_is_loaded_once():
    m = c7m.load_roles("dlmspec/small", "dlmspec/small", "dlmspec/small",
                       "dlmspec/small")
    assert list(m.loaded) == ["dlmspec/small"]
    assert m.target("large") is m.target("small") is m.loaded[m.draft][0]
    assert m.tokenizer("base") is not None


def test_a_model_without_a_tokenizer_is_refused(model_without_tokenizer):
    with pytest.raises(ValueError, match="no tokenizer saved next to it"):
        c7m.load_roles("dlmspec/small", model_without_tokenizer, "dlmspec/small",
                       "dlmspec/small")
