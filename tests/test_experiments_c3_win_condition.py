"""C3's measurement (``experiments.c3_win_condition``), called without the page.

``measure`` runs on the tiny random models (``tiny_models``) at tiny sizes; the
SID head's training windows come from a few sentences written here instead of
the Brown corpus (encoding Brown takes longer than every test below together;
``test_ssld`` covers the Brown windows). The smaller functions are tested on
synthetic inputs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from pages import names_recorded_on_page, rule_names, same_value, shown_glue_names

from dlmspec_min.experiments import c3_win_condition as c3
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing import claims
from dlmspec_min.ssld import drafting, win_condition
from dlmspec_min.training import train
from dlmspec_min.worlds import prose

NOTEBOOK = REPO_ROOT / "notebooks" / "03_win_condition.md"
# what the page records itself: the verdicts, its run time and the figures
PAGE_SIDE = {"c3_verdict", "c3_verdict_piece", "c3_runtime_seconds",
             "c3_fig_win_region", "c3_fig_e2e", "c3_quality_bound", "c3_e2e_quality",
             # where the sequential run stopped (plumbing/sequential.py, Looks)
             *(f"c3_seq_{k}" for k in ("n", "level", "looks", "cap", "stopped",
                                       "note"))}
WALL = {"c3_wall_acc", "c3_wall_ssld", "c3_wall_ratio"}  # timings: never identical
SIZES = dict(gen_length=12, block_length=4, threshold=1e-4, temperature=1.0, K=8,
             levels=1, n_train=16, n_repeats=2, n_timed=2, n_bootstrap=50, seed=0,
             n_codebooks=2)
B = 3
WORDS = ("the old farmer walked slowly across the green field toward his house "
         "while children played near a river and their mother cooked dinner for "
         "everyone who came home from work late that evening").split()


def small_corpus(tokenizer, seq_len):
    """Training windows from 40 sentences of the words above (in place of Brown)."""
    rng = np.random.default_rng(0)
    sentences = [list(rng.choice(WORDS, size=12)) + ["."] for _ in range(40)]
    docs = train.encode_documents({"words": sentences, "doc_id": ["d"] * 40}, tokenizer)
    return train.windows(docs, seq_len or train.SEQ_LEN)


@pytest.fixture(scope="module")
def models(tiny_pair):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(prose, "_training_windows", small_corpus)
        yield tiny_pair


def run(models, tau_paper=None, **kw):
    prompt = torch.full((B, 1), models.tokenizer.bos_token_id)
    return c3.measure(models, prose.PROSE, c3.Config(**(SIZES | kw)), prompt=prompt,
                      tau_paper=tau_paper)


@pytest.fixture(scope="module")
def result(models):
    return run(models, tau_paper=3.25)


def page_names() -> set[str]:
    """Every value name the page's prose shows, records or glues, and the names
    its verdict rules and registry entry read."""
    names = shown_glue_names(NOTEBOOK, prefix="c3_")
    names |= names_recorded_on_page(NOTEBOOK, prefix="c3_")
    entry = claims.load_registry()["claims"]["C3"]
    return names | set(entry["keys"]) | rule_names(entry, prefix="c3_")


def test_measure_returns_every_value_the_page_records(result):
    names = page_names()
    assert len(names) > 40  # the parse found the page's names
    missing = names - PAGE_SIDE - set(result.values)
    assert not missing, f"the page shows values measure does not return: {missing}"
    recorded = {k: claims.plain(v) for k, v in result.values.items()}  # all scalars
    assert not claims.check_values(claims.load_registry()["claims"]["C3"]["keys"],
                                   recorded)
    # both verdict rules find every name they read among the returned values
    assert claims.verdict("C3", recorded) in claims.VERDICTS
    assert claims.secondary_verdict("C3", recorded) in claims.VERDICTS


def test_intervals_are_ordered_and_values_in_range(result):
    v = result.values
    for name in ("c3_tau_acc", "c3_alpha", "c3_alpha_piece", "c3_e2e_ratio"):
        assert v[f"{name}_lo"] <= v[name] <= v[f"{name}_hi"], name
    for name in ("c3_alpha", "c3_alpha_piece", "c3_continuation_share_of_anchors",
                 "c3_accepted_share", "c3_robust_share_above_1", "c3_alpha_star"):
        assert 0 <= v[name] <= 1, name
    assert v["c3_tau_acc"] >= 1 and v["c3_n_codebooks"] == SIZES["n_codebooks"]
    assert v["c3_shortfall_is_bound"] in (0, 1) and v["c3_model_a_reachable"] in (0, 1)
    assert v["c3_robust_shortfall_min"] <= v["c3_robust_shortfall_max"]


def test_values_agree_with_the_tables_and_arrays(result):
    """Each value recomputed by hand from what the page shows."""
    v, t, a = result.values, result.tables, result.arrays
    acc = t["accelerators"]
    assert v["c3_tau_acc"] == acc["tokens_per_nfe"].max()
    assert v["c3_strongest"] in acc.index
    assert v["c3_alpha_star"] == pytest.approx(1 - 1 / v["c3_tau_acc"])
    # the regime beside the bar is the strongest accelerator's row of the table
    row = acc.loc[v["c3_strongest"]]
    assert v["c3_regime_text_fraction"] == pytest.approx(row["text_fraction"])
    assert v["c3_regime_text_tpf"] == pytest.approx(row["text_tokens_per_nfe"])
    assert same_value(v["c3_regime_tail_tpf"], float(row["tail_tokens_per_nfe"]))
    assert v["c3_regime_text_fraction_lo"] <= v["c3_regime_text_fraction"] <= \
        v["c3_regime_text_fraction_hi"]
    assert f"{v['c3_regime_text_tpf']:.2f} tokens" in v["c3_regime_note"]
    best = t["acceptance"].loc[v["c3_best"]]
    assert v["c3_alpha"] == best["alpha"] == t["acceptance"]["alpha"].max()
    assert v["c3_c"] == best[c3.COST] > 0
    by = v["c3_alpha_hi"] if v["c3_shortfall_is_bound"] else v["c3_alpha"]
    assert v["c3_shortfall"] == pytest.approx(v["c3_alpha_star"] / by)
    assert v["c3_shortfall_lo"] == pytest.approx(v["c3_alpha_star"] / v["c3_alpha_hi"])
    robust = t["robust"]["shortfall alpha*/alpha"]
    assert len(robust) == v["c3_robust_n_seeds"] == SIZES["n_codebooks"]
    assert v["c3_robust_shortfall_min"] == robust.min()
    assert v["c3_robust_shortfall_max"] == robust.max()
    # Model A at alpha = 1 keeps gamma + 1 tokens per 1 + gamma c
    g, c = v["c3_gamma"], v["c3_c"]
    assert v["c3_model_a_ceiling"] == pytest.approx((g + 1) / (1 + g * c))
    assert a["taus"].shape == a["bar_inf"].shape == a["bar_meas"].shape == (200,)
    # end to end: the accelerator's NFE per sample gives N_acc and Model B's slowdown
    assert a["acc_nfe"].shape == a["ssld_nfe"].shape == (B,)
    assert v["c3_n_acc"] == pytest.approx(a["acc_nfe"].mean().item())
    assert v["c3_model_b_slowdown"] == pytest.approx(1 + (1 + c) / v["c3_n_acc"])
    e2e = t["e2e"]
    assert list(e2e.index) == [*drafting.DRAFT_NAMES, c3.ORACLE]
    assert v["c3_e2e_ratio"] == e2e.loc[v["c3_best"], "NFE ratio"]
    assert v["c3_e2e_ratio"] == pytest.approx(a["ssld_nfe"].sum().item()
                                              / a["acc_nfe"].sum().item())
    assert v["c3_oracle_ratio"] == e2e.loc[c3.ORACLE, "NFE ratio"]
    for key, name in c3.DRAFT_KEYS.items():
        row = e2e.loc[name]
        assert v[f"c3_faithful_{key}"] <= v[f"c3_accepted_share_{key}"] <= 1
        assert row["alpha_SID (this codebook)"] <= 1
    # wall-clock: n_repeats timed calls, medians
    assert len(t["wall_clock"]) == SIZES["n_repeats"]
    assert v["c3_wall_ratio"] == pytest.approx(np.median(a["wall_ssld"])
                                               / np.median(a["wall_acc"]))
    assert t["bars"].iloc[0]["alpha needed"] == v["c3_alpha_star"]
    assert result.n_clusters == SIZES["K"]
    assert v["c3_paper_bar_alpha_star"] == pytest.approx(1 - 1 / 3.25)


def test_same_seed_same_values_and_no_paper_bar_without_its_figure(models, result):
    again = run(models)  # same seed, no tau_paper
    paper = {"c3_paper_bar_alpha_star", "c3_paper_bar_shortfall_lo",
             "c3_paper_bar_note"}
    assert paper <= set(result.values) and not paper & set(again.values)
    same = {k: v for k, v in result.values.items() if k not in WALL | paper}
    assert list(again.values) == [k for k in result.values if k not in paper]
    for k, v in same.items():
        assert same_value(again.values[k], v), k


def test_measure_refuses_more_timed_samples_than_samples(models):
    with pytest.raises(ValueError, match="n_timed = 4 must not exceed n_samples = 3"):
        run(models, n_timed=4)


# --- the smaller functions on synthetic inputs ---------------------------------------


def test_strongest_bar_takes_the_most_tokens_per_forward():
    table = pd.DataFrame({"tokens_per_nfe": [1.5, 2.0, 2.0], "low": [1.2, 1.8, 1.7],
                          "high": [1.7, 2.2, 2.3],
                          "token_forwards_per_sample": [10.0, 30.0, 20.0]},
                         index=pd.Index(["a", "b", "c"], name="accelerator"))
    v = c3.strongest_bar(table)
    assert v == {"c3_tau_acc": 2.0, "c3_tau_acc_lo": 1.7, "c3_tau_acc_hi": 2.3,
                 "c3_alpha_star": 0.5, "c3_strongest": "c"}  # c: fewer positions


def test_model_a_bar_present_only_when_reachable():
    v, arrays = c3.model_a(2.0, 0.3, gamma=8.0, c=0.1)
    assert v["c3_model_a_reachable"] == 1
    needed = v["c3_model_a_alpha_needed"]
    assert win_condition.model_a_tokens_per_cost(needed, 8.0, 0.1) == pytest.approx(2.0,
                                                                                  abs=1e-6)
    assert v["c3_model_a_ceiling"] == pytest.approx(9 / 1.8)
    assert np.allclose(arrays["bar_inf"], 1 - 1 / arrays["taus"])
    assert arrays["taus"][0] == 1.01 and arrays["taus"][-1] == 6.0
    # c = 1: the ceiling 9/9 = 1 never beats tau_acc = 2, at any alpha
    v, arrays = c3.model_a(2.0, 0.3, gamma=8.0, c=1.0)
    assert v["c3_model_a_reachable"] == 0 and "c3_model_a_alpha_needed" not in v
    assert np.isnan(arrays["bar_meas"]).all()


def test_bars_table_marks_unreachable_bars_and_lower_bounds():
    bars = c3.bars_table({"a": 0.2, "b": float("nan"), "c": 1.5}, alpha=0.0,
                         alpha_hi=0.1)
    assert list(bars["reachable (<= 1)"]) == [True, False, False]
    assert bars.loc["a", "shortfall"] == pytest.approx(2.0)  # 0.2 / alpha_hi
    assert bars.loc["a", "shortfall is a lower bound"]
    assert bars.loc[["b", "c"], "alpha needed"].isna().all()
    one = c3.bars_table({"a": 0.2}, 0.05, 0.1).loc["a"]
    assert one["shortfall"] == pytest.approx(4)
    assert not one["shortfall is a lower bound"]


def test_e2e_values_delta_and_model_b_by_hand():
    cols = ["NFE ratio", "ratio low", "ratio high", "token-forwards ratio",
            "anchors accepted (share)", "faithful acceptances (share)",
            "fidelity of accepted anchors"]
    e2e = pd.DataFrame([[1.1, 1.0, 1.2, 1.3, 0.1, 0.05, 0.5],
                        [1.05, 1.0, 1.1, 1.2, 0.2, 0.1, 0.5],
                        [0.8, 0.7, 0.9, 0.9, 1.0, 1.0, 1.0]], columns=cols,
                       index=[*c3.DRAFT_KEYS.values(), c3.ORACLE])
    acc_nfe = torch.tensor([10.0, 12.0])
    oracle_nfe = torch.tensor([7.0, 9.0])
    anchors = torch.tensor([[True, True, False], [True, True, True]])  # 5 anchors
    best = c3.DRAFT_KEYS["head"]
    v = c3.e2e_values(e2e, best, acc_nfe, oracle_nfe, anchors, gamma=2.5, c=0.2)
    assert v["c3_e2e_ratio"] == 1.05 and v["c3_e2e_ratio_small"] == 1.1
    assert v["c3_delta"] == pytest.approx((3 + 3) / 5)
    assert v["c3_n_acc"] == 11.0 and v["c3_oracle_ratio"] == 0.8
    assert v["c3_model_b_slowdown"] == pytest.approx(1 + 1.2 / 11)
    assert v["c3_model_b_alpha_needed"] == pytest.approx(1.2 / (2.5 * 1.2))
    assert v["c3_model_b_reachable"] == 1
    # no saving per anchor: Model B's bar is unreachable and not recorded
    v = c3.e2e_values(e2e, best, acc_nfe, acc_nfe, anchors, gamma=2.5, c=0.2)
    assert v["c3_model_b_reachable"] == 0 and "c3_model_b_alpha_needed" not in v


def test_notes_follow_the_measurement():
    assert "does not accelerate" in c3.tau_note(True)
    assert "real bar" in c3.tau_note(False)
    row = pd.Series({"NFE ratio": 1.2, "ratio low": 1.1, "ratio high": 1.3,
                     "anchors accepted (share)": 0.25,
                     "faithful acceptances (share)": 0.1})
    assert "necessary for a win, not sufficient" in c3.gap_note(0.5, row)
    assert "0.250" in c3.gap_note(0.5, row)
    assert c3.gap_note(2.0, row) == ("End to end, SSLD needs 1.200 times the "
                                     "accelerator's NFE.")
    faster = pd.Series({**row, "ratio low": 0.8, "ratio high": 0.9})
    assert "not the target's" in c3.gap_note(2.0, faster)
    assert "0.100" in c3.gap_note(2.0, faster)


def test_quality_stands_beside_the_forwards(result):
    """Prose has no answers: the judge's agreement with both end-to-end decodes,
    and SSLD's drop below the accelerator with its paired interval."""
    v = result.values
    assert v["c3_quality_kind"] == "judge top-1 agreement"
    assert 0 <= v["c3_quality_acc"] <= 1 and 0 <= v["c3_quality_ssld"] <= 1
    assert v["c3_quality_drop"] == pytest.approx(v["c3_quality_acc"]
                                                 - v["c3_quality_ssld"])
    assert v["c3_quality_drop_lo"] <= v["c3_quality_drop"] <= v["c3_quality_drop_hi"]


def test_answer_accuracy_is_the_quality_where_texts_have_answers():
    class World:
        def answers(self, n, seed=0):
            return [1, 2, 3]

        def answer_correct(self, tokenizer, generated, answers):
            return (generated[:, 0] == torch.tensor(answers)).numpy()

    kind, score = c3.quality_scorer(World(), None, 3, 0, "unused")
    assert kind == "answer accuracy"
    acc = torch.tensor([[1, 0], [2, 0], [3, 0]])  # all right
    ssld = torch.tensor([[1, 0], [0, 0], [0, 0]])  # one right
    v = c3.quality_values(kind, score(acc), score(ssld), n_bootstrap=200, seed=0)
    assert v["c3_quality_acc"] == 1 and v["c3_quality_ssld"] == pytest.approx(1 / 3)
    assert v["c3_quality_drop"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("ratio, drop, expected", [
    ((0.6, 0.5, 0.8), (0.01, -0.02, 0.04), "faster at equal quality"),
    ((0.6, 0.5, 0.8), (0.30, 0.10, 0.50), "faster, by losing quality"),
    ((1.03, 1.01, 1.06), (0.0, -0.1, 0.1), "not faster"),
    ((0.6, 0.5, 0.8), (0.05, -0.02, 0.12), "cannot tell at this size"),
    ((0.95, 0.8, 1.1), (0.0, -0.01, 0.01), "cannot tell at this size"),
])
def test_the_equal_quality_reading_follows_its_stated_rule(ratio, drop, expected):
    registry = claims.load_registry()
    values = dict(zip(("c3_e2e_ratio", "c3_e2e_ratio_lo", "c3_e2e_ratio_hi"), ratio,
                      strict=True))
    values |= dict(zip(("c3_quality_drop", "c3_quality_drop_lo", "c3_quality_drop_hi"),
                       drop, strict=True))
    values["c3_quality_bound"] = registry["claims"]["C3"]["e2e_quality"]["bound"]
    assert claims.reading("C3", "e2e_quality", values, registry) == expected
    with pytest.raises(ValueError, match="no reading block"):
        claims.reading("C3", "nothing", values, registry)
