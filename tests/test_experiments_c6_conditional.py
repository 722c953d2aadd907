"""C6's measurement as a library function (``dlmspec_min.experiments.c6_conditional``):
``measure`` on the tiny random-weight models, its smaller pieces on synthetic inputs."""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib
import pandas as pd
import pytest
import torch
from pages import names_recorded_on_page, same_value, shown_glue_names

from dlmspec_min.experiments import c6_conditional as c6x
from dlmspec_min.experiments.c6_conditional import PRO, UNC
from dlmspec_min.measures.tagger import CONTENT, FUNCTION, Lexicon
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing.claims import check_values, evaluate, load_registry
from dlmspec_min.ssld import conditional, drafting
from dlmspec_min.worlds import PROSE, retagged

matplotlib.use("Agg")
NOTEBOOK = REPO_ROOT / "notebooks" / "06_conditional.md"
SIZES = dict(n_samples=3, prompt_length=4, gen_length=8, block_length=4, threshold=0.5,
             temperature=1.0, K=8, levels=1, n_train=16, n_bootstrap=50, seed=3,
             prompt_seed=0, n_codebooks=2)
HEAD = dict(steps=5)  # a short head fit
# (value, low, high) of every interval the page records, for both prompt sets
INTERVALS = [("auc", "auc_lo", "auc_hi"), ("alpha_sid", "alpha_lo", "alpha_hi"),
             ("target_first_pass", "target_first_pass_lo", "target_first_pass_hi"),
             ("tau_acc", "tau_acc_lo", "tau_acc_hi"),
             ("alpha_sid_piece", "alpha_piece_lo", "alpha_piece_hi"),
             ("e2e_ratio", "e2e_ratio_lo", "e2e_ratio_hi")]


@pytest.fixture(scope="module")
def lexicon(tiny_pair):
    # every word piece is content or function (alternating by id): random text has both
    return Lexicon(exact={}, lower={
        p.lower(): (CONTENT if i % 2 else FUNCTION)
        for p, i in tiny_pair.tokenizer.get_vocab().items() if not p.startswith("##")})


@pytest.fixture(scope="module")
def result(tiny_pair, lexicon):
    return c6x.measure(tiny_pair, retagged(PROSE, lexicon), c6x.Config(**SIZES),
                       head_kw=HEAD)


def test_values_hold_every_name_the_page_reads_and_the_rule_needs(result):
    # the names the page's prose shows (its figures too), and those its cells record
    prose = shown_glue_names(NOTEBOOK, figures=True)
    recorded = names_recorded_on_page(NOTEBOOK)
    assert "c6_alpha_sid" in prose and "c6_verdict" in recorded  # the parse works
    values = result.values
    # the page records the verdicts itself, and nothing twice
    assert not set(values) & recorded
    assert prose <= set(values) | recorded, sorted(prose - set(values) - recorded)
    # the claim's figures come first, in conditional's order, prompted then [BOS]
    keys = conditional.FIGURE_KEYS + conditional.E2E_KEYS
    assert list(values)[:2 * len(keys)] == ([f"c6_{k}" for k in keys]
                                            + [f"c6_uncond_{k}" for k in keys])
    claim = load_registry()["claims"]["C6"]
    for expr in [*claim["rule"].values(), *claim["secondary"]["rule"].values()]:
        evaluate(expr, values)  # raises KeyError on a name that is not measured
    measured = {k: v for k, v in claim["keys"].items() if not k.startswith("c6_paper_")}
    assert check_values(measured, values) == []  # present, finite, within range


def test_intervals_are_ordered_and_rates_are_probabilities(result):
    v = result.values
    for prefix in ("c6_", "c6_uncond_"):
        for value, lo, hi in INTERVALS:
            assert v[prefix + lo] <= v[prefix + value] + 1e-12, prefix + value
            assert v[prefix + value] <= v[prefix + hi] + 1e-12, prefix + value
        assert v[prefix + "alpha_star"] == pytest.approx(1 - 1 / v[prefix + "tau_acc"])
        tf = [v[prefix + "regime_text_fraction" + s] for s in ("_lo", "", "_hi")]
        assert 0 <= tf[0] <= tf[1] <= tf[2] <= 1
        for k in ("chance", "chance_majority", "e2e_accepted_share",
                  "continuation_share_of_anchors"):
            assert 0 <= v[prefix + k] <= 1, prefix + k
    assert v["c6_prompt_length"] == SIZES["prompt_length"]
    assert v["c6_uncond_prompt_length"] == 1


def test_same_seed_same_values_whatever_the_global_torch_seed(
        tiny_pair, lexicon, result):
    torch.manual_seed(12345)  # the page seeds torch before loading; measure needs none
    again = c6x.measure(tiny_pair, retagged(PROSE, lexicon), c6x.Config(**SIZES),
                        head_kw=HEAD)
    assert list(again.values) == list(result.values)
    assert all(same_value(again.values[k], v) for k, v in result.values.items())
    assert again.tables["side_by_side"].equals(result.tables["side_by_side"])


def test_counts_and_names_agree_with_the_tables(result):
    v, t, figs = result.values, result.tables, result.figures
    overlap = t["side_by_side"]["95 % intervals overlap"]
    assert v["c6_n_compared"] == int(overlap.isin(["yes", "no"]).sum())
    assert v["c6_n_differ"] == int((overlap == "no").sum())
    assert v["c6_n_differ"] <= v["c6_n_compared"] <= len(overlap)
    assert v["c6_n_anchors"] == int(figs[PRO].anchors.sum())
    assert v["c6_n_codebooks"] == SIZES["n_codebooks"] == len(figs[PRO].codebooks)
    for prefix, name in (("c6_", PRO), ("c6_uncond_", UNC)):
        acc, best = t["acceptance"].loc[name], v[prefix + "best"]
        assert v[prefix + "alpha_sid"] == pytest.approx(acc.loc[best, "alpha"])
        assert acc.loc[best, "alpha"] == acc.loc[list(drafting.DRAFT_NAMES),
                                                 "alpha"].max()
        assert v[prefix + "best_is_head"] == int(best == drafting.HeadDraft.name)
        tau = t["accelerators"].loc[name, "tokens_per_nfe"]
        assert v[prefix + "tau_acc"] == pytest.approx(tau.max(), abs=1e-3)
        assert v[prefix + "strongest"] in tau.index
        bound = v[prefix + "shortfall_is_bound"]
        assert v[prefix + "bound_words"] == ("at least " if bound else "")
    prompts = result.arrays["prompts"]
    assert prompts[UNC].shape == (SIZES["n_samples"], 1)
    assert prompts[PRO].shape == (SIZES["n_samples"], SIZES["prompt_length"])
    assert len(t["prompts"]) == 3 and len(t["continuations"]) == 3
    assert set(t["seconds"].columns) == {UNC, PRO}
    assert result.unconditional_as_claim()["c6_alpha_sid"] == v["c6_uncond_alpha_sid"]


def _long(a, b):
    """A two-metric side_by_side table: (value, low, high) per condition."""
    rows = []
    for cond, (auc, tau) in ((UNC, a), (PRO, b)):
        rows += [dict(metric="C1: AUC P(r_content > r_function)", condition=cond,
                      value=auc[0], low=auc[1], high=auc[2], bound=False),
                 dict(metric="C3: tau_acc (tokens per NFE)", condition=cond,
                      value=tau[0], low=tau[1], high=tau[2], bound=False)]
    return pd.DataFrame(rows)


def test_comparison_words_follow_the_disjoint_interval_criterion():
    long = _long([(0.6, 0.55, 0.65), (1.2, 1.1, 1.3)],
                 [(0.8, 0.75, 0.85), (1.25, 1.15, 1.35)])
    diff = conditional.differences(long, UNC, PRO)
    assert c6x.comparison_words(diff, "C1: AUC P(r_content > r_function)") == (
        "higher than without a prompt (disjoint 95 % intervals)")
    assert c6x.comparison_words(diff, "C3: tau_acc (tokens per NFE)").startswith(
        "not distinguishable")
    low = conditional.differences(_long([(0.8, 0.75, 0.85), (1, 1, 1)],
                                        [(0.6, 0.55, 0.65), (1, 1, 1)]), UNC, PRO)
    assert c6x.comparison_words(low, "C1: AUC P(r_content > r_function)").startswith(
        "lower")
    shown = c6x.shown_table(long, diff)
    assert list(shown.columns) == [UNC, PRO, "95 % intervals overlap"]
    assert list(shown["95 % intervals overlap"]) == ["no", "yes"]
    assert shown.iloc[0, 1] == "0.8 [0.75, 0.85]"


def test_interval_text_marks_bounds_and_missing_intervals():
    r = SimpleNamespace(value=2.5, low=math.nan, high=math.nan, bound=True)
    assert c6x.interval_text(r) == "at least 2.5"
    r = SimpleNamespace(value=0.123456, low=0.1, high=0.2, bound=False)
    assert c6x.interval_text(r) == "0.1235 [0.1, 0.2]"


def _fig(alpha_hi, alpha_star, **kw):
    base = dict(alpha=0.01, alpha_hi=alpha_hi, alpha_star=alpha_star, tau_hi=1.2,
                chance_majority=0.01, e2e={"low": 1.1, "accepted_share": 0.0})
    return SimpleNamespace(**(base | kw))


def test_bar_position_against_the_two_bars():
    assert c6x.bar_position(_fig(0.009, 0.1)) == "below alpha*/10"
    assert c6x.bar_position(_fig(0.05, 0.1)) == "below alpha* but not below alpha*/10"
    assert c6x.bar_position(_fig(0.1, 0.1)) == "at or above alpha*"


def test_reading_says_which_case_holds():
    below = {UNC: _fig(0.05, 0.1), PRO: _fig(0.05, 0.1)}
    assert c6x.reading(below).startswith("In both prompt sets the draft stays below")
    reached = {UNC: _fig(0.2, 0.1), PRO: _fig(0.05, 0.1)}
    text = c6x.reading(reached)
    assert "always guessing the most frequent" in text
    assert text.endswith("and accepts almost none of them.")
    faster = {k: _fig(0.2, 0.1, tau_hi=2.0, e2e={"low": 0.9, "accepted_share": 0.5})
              for k in (UNC, PRO)}
    text = c6x.reading(faster)
    assert "barely more than one token" not in text
    assert text.endswith("see the ratios in the table above.")


def test_drawings_and_the_verdict_table(result):
    import matplotlib.pyplot as plt

    fig = c6x.draw_side_by_side(result)
    assert len(fig.axes) == len(c6x.PANELS)
    assert [a.get_yscale() for a in fig.axes] == [p[1] for p in c6x.PANELS]
    plt.close(fig)
    fig = c6x.draw_ecdf(result)
    assert len(fig.axes) == 2
    plt.close(fig)
    t = c6x.verdict_table(result, "qualitative", "inconclusive", "replicated", "C6")
    assert t.shape == (4, 2) and t.index.name == "C6"
    assert t.loc["verdict", "this build"] == "inconclusive"
    assert t.loc["verdict, piece-level anchors (secondary)", "this build"].startswith(
        "replicated (alpha_SID ")
    assert f"{result['c6_alpha_sid']:.4f}" in t.iloc[0, 1]
