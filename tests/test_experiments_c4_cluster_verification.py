"""C4's measurement (dlmspec_min.experiments.c4_cluster_verification) on tiny models."""

import math

import numpy as np
import pytest
import torch
from pages import names_recorded_on_page, same_value, shown_glue_names

from dlmspec_min.experiments import c4_cluster_verification as c4m
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing.claims import load_registry, verdict
from dlmspec_min.ssld import semantic
from dlmspec_min.worlds import PROSE

NOTEBOOK = REPO_ROOT / "notebooks" / "04_cluster_verification.md"
TINY = dict(n_samples=3, gen_length=8, block_length=4, threshold=0.9, temperature=1.0,
            K=8, K_sweep=[4], n_permutations=30, n_bootstrap=30, seed=0)


@pytest.fixture(scope="module")
def result(tiny_pair):
    torch.manual_seed(0)
    return c4m.measure(tiny_pair, PROSE, c4m.Config(**TINY))


def test_every_value_the_page_and_its_rule_read_is_measured(result):
    names = shown_glue_names(NOTEBOOK) - names_recorded_on_page(NOTEBOOK)
    assert names, "no glue name parsed from the notebook"
    assert names <= set(result.values), names - set(result.values)
    claim = load_registry()["claims"]["C4"]
    assert set(claim["keys"]) <= set(result.values)
    assert set(result.rule_values) <= set(result.values)
    for key, x in result.rule_values.items():
        if key != "c4_ratio" or math.isfinite(result.values[key]):
            assert x == pytest.approx(float(result.values[key]))
    verdict("C4", result.rule_values)  # the rule can be evaluated on them


def test_values_lie_in_their_registered_ranges_and_intervals_are_ordered(result):
    v = result.values
    for key, spec in load_registry()["claims"]["C4"]["keys"].items():
        lo, hi = spec["range"]
        if not (key.startswith("c4_ratio") and math.isnan(v[key])):
            assert lo <= v[key] <= hi, (key, v[key])
    for stem in ["alpha_tok", "alpha_clu", "random_minus_semantic"]:
        assert v[f"c4_{stem}_lo"] <= v[f"c4_{stem}"] <= v[f"c4_{stem}_hi"], stem
    assert v["c4_alpha_clu"] >= v["c4_alpha_tok"]  # a token match is a cluster match
    assert v["c4_n_permutations"] == TINY["n_permutations"]


def test_rates_recomputed_by_hand_from_the_pairs(result):
    pairs, v = result.arrays["pairs"], result.values
    d, t = pairs.drafted[pairs.anchors], pairs.targets[c4m.VERIFY][pairs.anchors]
    assert v["c4_n_anchors"] == int(pairs.anchors.sum()) == d.numel() > 0
    assert v["c4_alpha_tok"] == pytest.approx((d == t).double().mean().item())
    sid = pairs.sid
    assert v["c4_alpha_clu"] == pytest.approx((sid(d) == sid(t)).double().mean().item())
    # closed-form random mean: exact matches always, other regular pairs by chance
    regular = ~sid.special[d] & ~sid.special[t]
    chance = semantic.same_cluster_chance(sid)
    expected = torch.where(d == t, 1.0, chance * regular.double()).mean().item()
    assert v["c4_random_expected"] == pytest.approx(expected)
    sizes = result.arrays["cluster_sizes"]
    assert sizes.sum() == int((~sid.special).sum())
    assert v["c4_median_cluster_size"] == float(np.median(sizes))


def test_tables_agree_with_the_values(result):
    acc, v = result.tables["acceptance"], result.values
    assert list(acc.index) == [c4m.VERIFY, c4m.ORACLE]
    assert v["c4_oracle_alpha_clu"] == acc.loc[c4m.ORACLE, "alpha_clu (semantic)"]
    sweep = result.tables["sweep"]
    assert len(sweep) == len({TINY["K"], *TINY["K_sweep"]})
    assert v["c4_sweep_min_p"] == sweep["p (random accepts more)"].min()
    more = sweep["alpha_clu random (mean)"] > sweep["alpha_clu semantic"]
    share = float(more.mean())
    assert v["c4_sweep_random_more_share"] == share
    # the sweep row at K reuses the headline clustering and its pairs
    assert sweep.loc[result.arrays["pairs"].sid.n_clusters,
                     "alpha_clu semantic"] == pytest.approx(v["c4_alpha_clu"])
    units = result.tables["units"]
    assert units.loc["word anchors (headline)", "anchors"] == v["c4_n_anchors"]
    assert units.loc["piece-level anchors (secondary)", "anchors"] >= v["c4_n_anchors"]
    for name, perm in result.arrays["perms"].items():
        assert len(perm.null) == TINY["n_permutations"]
        assert perm.null_mean == acc.loc[name, "alpha_clu random (mean)"]


def test_the_same_seed_gives_the_same_values(tiny_pair, result):
    again = c4m.measure(tiny_pair, PROSE, c4m.Config(**TINY))
    assert list(again.values) == list(result.values)
    for key, x in result.values.items():
        y = again.values[key]
        assert same_value(x, y), key


def test_unit_row_on_synthetic_pairs(result):
    sid = result.arrays["pairs"].sid
    regular = (~sid.special).nonzero().flatten()
    a, b = regular[:6].reshape(2, 3), regular[6:12].reshape(2, 3)
    where = torch.tensor([[True, True, False], [True, False, False]])
    same = c4m.unit_row(a, a, where, sid)
    assert same == {"anchors": 3, "alpha_tok": 1.0, "alpha_clu (semantic)": 1.0,
                    "random, closed form": 1.0}
    differ = c4m.unit_row(a, b, where, sid)
    assert differ["alpha_tok"] == 0.0
    assert differ["random, closed form"] == pytest.approx(
        semantic.same_cluster_chance(sid))


def test_an_undefined_ratio_reads_as_no_gain():
    row = {"ratio": float("nan"), "alpha_clu (semantic)": 0.1,
           "alpha_clu random (mean)": 0.2, "p (random accepts more)": 0.5,
           "difference low": -0.1, "difference high": 0.1}
    values = c4m.rule_values(row)
    assert values["c4_ratio"] == 0.0
    assert verdict("C4", values) == "not replicated"
