"""C2's measurement (``experiments.c2_anchor_acceptance``) on the tiny models and on
synthetic inputs, without executing the notebook."""

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from pages import names_recorded_on_page, rule_names, same_value, shown_glue_names

from dlmspec_min.experiments import c2_anchor_acceptance as c2x
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing.claims import check_values, load_registry
from dlmspec_min.ssld import codebooks, win_condition
from dlmspec_min.worlds import PROSE

NOTEBOOK = REPO_ROOT / "notebooks" / "02_anchor_acceptance.md"
KW = dict(n_samples=3, gen_length=8, block_length=4, threshold=0.9, temperature=1.0,
          K=8, levels=1, K_sweep=[4, 8], n_train=16, n_bootstrap=50, seed=0,
          n_codebooks=2)
PAPER = dict(paper_alpha=0.0035, paper_tau=3.25)
TIMINGS = re.compile(r"seconds")


@pytest.fixture(scope="module")
def result(tiny_pair):
    return c2x.measure(tiny_pair, PROSE, c2x.Config(**KW), **PAPER)


def _untimed(values):
    return {k: v for k, v in values.items() if not TIMINGS.search(k)}


def test_the_result_holds_every_value_the_page_records(result):
    """Every name the page's prose or C2's rules and keys read is recorded: by
    ``measure`` or by the page itself (the verdicts and what rests on them); none by
    both."""
    prose = shown_glue_names(NOTEBOOK, prefix="c2_")
    by_page = names_recorded_on_page(NOTEBOOK, prefix="c2_")
    by_page = {k for k in by_page if not k.startswith("c2_fig_")}  # figures aside
    looks = {f"c2_seq_{k}" for k in ("n", "level", "looks", "cap", "stopped", "note")}
    assert by_page == {"c2_verdict", "c2_verdict_piece", "c2_runtime_seconds",
                       "c2_robust_agree", "c2_robust_verdicts"} | looks  # + the run's
    assert not by_page & set(result.values)
    claim = load_registry()["claims"]["C2"]
    needed = prose | rule_names(claim, prefix="c2_") | set(claim["keys"])
    assert needed - by_page <= set(result.values)
    assert set(result.values) >= set(claim["headline"]) | set(claim["finding"])
    assert list(result.values)[:3] == ["c2_K", "c2_n_clusters", "c2_kmeans_seconds"]
    assert list(result.values)[-2:] == ["c2_continuation_share_of_hits",
                                        "c2_pieces_words"]


def test_values_are_plain_and_in_their_ranges(result):
    claim = load_registry()["claims"]["C2"]
    assert check_values(claim["keys"], result.values) == []
    for k, v in result.values.items():
        assert type(v) in (int, float, str, bool), k
    assert result["c2_K"] == KW["K"] and result["c2_n_clusters"] <= KW["K"]
    assert result["c2_n_codebooks"] == KW["n_codebooks"]
    assert result["c2_robust_n_seeds"] == KW["n_codebooks"]
    assert len([k for k in result.values if re.fullmatch(r"c2_sweep_\w+_K\d+", k)]) == (
        5 * len(KW["K_sweep"]))
    assert result["c2_best_name"] in (c2x.HEAD, c2x.MARGINAL)
    assert result["c2_best_is_head"] == int(result["c2_best_name"] == c2x.HEAD)


def test_intervals_hold_their_estimates(result):
    v = result.values
    for est, lo, hi in [("c2_alpha_sid", "c2_alpha_lo", "c2_alpha_hi"),
                        ("c2_alpha_small", "c2_alpha_small_lo", "c2_alpha_small_hi"),
                        ("c2_alpha_head", "c2_alpha_head_lo", "c2_alpha_head_hi"),
                        ("c2_alpha_sid_piece", "c2_alpha_piece_lo",
                         "c2_alpha_piece_hi"),
                        ("c2_target_first_pass", "c2_target_first_pass_lo",
                         "c2_target_first_pass_hi"),
                        ("c2_tau_acc", "c2_tau_acc_lo", "c2_tau_acc_hi")]:
        assert v[lo] <= v[est] <= v[hi], est
    assert v["c2_robust_alpha_min"] <= v["c2_robust_alpha_max"]
    for _, row in result.tables["robust"].iterrows():
        assert row["low"] <= row["alpha_SID"] <= row["high"]


def test_same_seed_same_values_whatever_the_global_generator(tiny_pair, result):
    torch.manual_seed(12345)  # measure's draws are all seeded by its own seed
    again = c2x.measure(tiny_pair, PROSE, c2x.Config(**KW), **PAPER)
    a, b = _untimed(again.values), _untimed(result.values)
    assert list(a) == list(b) and all(same_value(a[k], b[k]) for k in b)
    other = c2x.measure(tiny_pair, PROSE, c2x.Config(**(KW | {"seed": 1})),  # other
                        **PAPER)  # decodes and codebooks
    assert other.arrays["book_seeds"] == [2, 3]
    assert _untimed(other.values) != _untimed(result.values)


def test_counts_and_rates_recomputed_from_the_arrays(result):
    """The anchors, alpha_SID and its pieces, recounted by hand from the decode
    and the codebooks' guesses."""
    a, v = result.arrays, result.values
    tokens, anchors, piece = a["tokens"], a["anchors"], a["anchors_piece"]
    cont = a["continuation"]
    assert tokens.shape == (KW["n_samples"], KW["gen_length"])
    assert not (anchors & ~piece).any()  # a word anchor is a content piece
    assert not (anchors & cont).any()  # ... and never one that continues a word
    assert v["c2_n_anchors"] == int(anchors.sum())
    assert v["c2_n_anchors_piece"] == int(piece.sum())
    assert v["c2_anchors_per_seq"] == pytest.approx(anchors.sum() / KW["n_samples"])
    assert v["c2_continuation_share_of_anchors"] == pytest.approx(
        float((piece & cont).sum() / piece.sum()))
    books, best = a["books"], v["c2_best_name"]
    assert list(books) == a["book_seeds"] == codebooks.codebook_seeds(0, 2)
    per_book = [float((b.preds[best] == b.sid(tokens))[anchors].float().mean())
                for b in books.values()]
    assert v["c2_alpha_sid"] == pytest.approx(np.mean(per_book))
    assert v["c2_alpha_first_codebook"] == pytest.approx(per_book[0])
    hits = result.tables["piece_hits"]
    assert (hits["hits on word anchors"] <= hits["hits on piece-level anchors"]).all()
    assert hits["hits on word anchors"].mean() / v["c2_n_anchors"] == pytest.approx(
        v["c2_alpha_sid"])
    first = result.tables["first_codebook"]
    assert (first["anchors"] == v["c2_n_anchors"]).all()
    assert v["c2_alpha_first_codebook"] == pytest.approx(
        first.loc[best, "hits"] / first.loc[best, "anchors"])
    assert v["c2_alpha_sid"] == max(v["c2_alpha_small"], v["c2_alpha_head"])
    assert sorted(a["sizes"].tolist()) == sorted(a["control_sizes"].tolist())
    both = result.tables["word_and_piece"]
    assert both["anchors"].tolist() == [v["c2_n_anchors"], v["c2_n_anchors_piece"]]


def test_the_bar_and_the_paper_ratios(result):
    v = result.values
    assert v["c2_alpha_star"] == pytest.approx(1 - 1 / v["c2_tau_acc"])
    paper = PAPER["paper_alpha"]
    assert v["c2_ratio_to_paper"] == pytest.approx(v["c2_alpha_sid"] / paper)
    assert v["c2_hi_ratio_to_paper"] == pytest.approx(v["c2_alpha_hi"] / paper)
    assert v["c2_paper_bar_alpha_star"] == pytest.approx(1 - 1 / PAPER["paper_tau"])
    assert v["c2_paper_bar_shortfall_lo"] == pytest.approx(
        v["c2_paper_bar_alpha_star"] / v["c2_alpha_hi"])
    assert v["c2_bar_note"] == win_condition.bar_note(
        v["c2_alpha_lo"], v["c2_alpha_hi"], v["c2_tau_acc_lo"], v["c2_tau_acc_hi"])


def test_the_sweep_reuses_the_first_codebook_at_K(result):
    sweep, first = result.tables["sweep"], result.tables["first_codebook"]
    at_K = sweep[sweep.K == KW["K"]].set_index("what")
    for name in first.index:
        assert at_K.loc[name, "alpha"] == first.loc[name, "alpha"]
        assert result[f"c2_sweep_{c2x.SWEEP_KEYS[name]}_K{KW['K']}"] == (
            first.loc[name, "alpha"])
    for k in KW["K_sweep"]:
        uniform = result[f"c2_sweep_uniform_K{k}"]
        assert 1 / k <= uniform <= 1  # 1 / n_clusters, at most K clusters
        assert result[f"c2_sweep_freq_K{k}"] >= uniform - 1e-12  # sum P^2 >= 1/n


def test_accelerator_bar_picks_the_strongest_and_says_when_there_is_no_bar():
    runs = {"one per forward": SimpleNamespace(mean_tokens_per_nfe=1.0,
                                               nfe=torch.full((4,), 8)),
            "two per forward": SimpleNamespace(mean_tokens_per_nfe=2.0,
                                               nfe=torch.full((4,), 4))}
    bar = c2x.accelerator_bar(runs, 8, 50, 0)
    assert bar["c2_strongest"] == "two per forward"
    assert bar["c2_tau_acc"] == 2.0 and bar["c2_alpha_star"] == 0.5
    assert bar["c2_tau_acc_lo"] == pytest.approx(2.0) == bar["c2_tau_acc_hi"]
    assert bar["c2_tau_note"] == c2x.REAL_BAR
    flat = c2x.accelerator_bar({"one": runs["one per forward"]}, 8, 50, 0)
    assert flat["c2_alpha_star"] == 0.0 and flat["c2_tau_note"] == c2x.NO_BAR


def test_gap_note_and_piece_words():
    assert c2x.gap_note(0.01, 0.02, 0.5, 0.3, 0.1).startswith("Even the upper end")
    at = c2x.gap_note(0.2, 0.3, 0.2, 0.5, 0.1)  # |alpha - majority| < hi - alpha
    assert "sits at the majority-ID rate (0.2000)" in at
    assert "sits away from" in c2x.gap_note(0.2, 0.25, 0.9, 0.5, 0.1)
    assert "a share 0.500 of anchors" in c2x.gap_note(0.2, 0.25, 0.9, 0.5, 0.1)
    for shares, words in [([0.9, 1.0], "almost all of it"), ([0.6, 0.5], "most of it"),
                          ([0.5, 0.5], "a minority of it")]:
        out = c2x.piece_values(pd.DataFrame({c2x.PIECE_HIT_SHARE: shares}))
        assert out == {"c2_continuation_share_of_hits": pytest.approx(np.mean(shares)),
                       "c2_pieces_words": words}


def test_codebook_spread_and_sweep_names_on_synthetic_tables():
    robust = pd.DataFrame({"alpha_SID": [0.1, 0.3], "alpha_SID, head": [0.1, 0.05],
                           "majority-ID rate": [0.2, 0.4]}, index=[0, 1])
    assert c2x.codebook_spread(robust) == {
        "c2_robust_n_seeds": 2, "c2_robust_alpha_min": 0.1, "c2_robust_alpha_max": 0.3,
        "c2_robust_head_minus_majority_max": pytest.approx(0.35)}
    sweep = pd.DataFrame([dict(K=16, what=c2x.HEAD, alpha=0.2),
                          dict(K=16, what=c2x.CHANCE_UNIFORM_K, alpha=1 / 16)])
    assert c2x.sweep_values(sweep) == {"c2_sweep_head_K16": 0.2,
                                       "c2_sweep_uniform_K16": 1 / 16}


def test_bad_paper_figures_are_refused(tiny_pair):
    for bad in (0, -1.0, None, True):
        with pytest.raises(ValueError, match="paper_alpha must be a positive number"):
            c2x.measure(tiny_pair, PROSE, c2x.Config(**KW),
                        **(PAPER | {"paper_alpha": bad}))


def test_the_figures_draw_from_the_result(result):
    import matplotlib.pyplot as plt

    figs = {"sizes": c2x.draw_sizes(result), "alpha": c2x.draw_alpha(result),
            "sweep": c2x.draw_sweep(result),
            "paper": c2x.draw_paper(result, PAPER["paper_alpha"]),
            "robust": c2x.draw_robust(result)}
    try:
        assert all(len(f.axes) == 1 for f in figs.values())
        assert len(figs["sweep"].axes[0].get_lines()) == 5  # 3 predictions, 2 chances
        ticks = [t.get_text() for t in figs["robust"].axes[0].get_xticklabels()]
        assert ticks == [f"seed {s}" for s in result.arrays["book_seeds"]] + ["mean"]
        assert len(figs["paper"].axes[0].patches) == 4
    finally:
        for f in figs.values():
            plt.close(f)
