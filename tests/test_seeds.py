"""The seed page's helpers (dlmspec_min/plumbing/seeds.py), on synthetic glue values."""

import copy
import subprocess
import sys

import pytest

from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing import claims, params, provenance, run, seeds

REGISTRY = claims.load_registry()


def c2_values(alpha_lo, alpha_hi, tau_lo, tau_hi, **extra):
    """Glue of a C2 run: alpha's interval and tau_acc's (alpha* = 1 - 1/tau)."""
    return {"c2_alpha_sid": (alpha_lo + alpha_hi) / 2, "c2_alpha_lo": alpha_lo,
            "c2_alpha_hi": alpha_hi, "c2_tau_acc": (tau_lo + tau_hi) / 2,
            "c2_tau_acc_lo": tau_lo, "c2_tau_acc_hi": tau_hi, **extra}


@pytest.mark.parametrize("alpha_lo, alpha_hi, expected", [
    (0.0, 0.001, "replicated"),        # below a tenth of alpha*_lo = 0.5
    (0.01, 0.2, "direction only"),     # below alpha*_lo, not below its tenth
    (0.4, 0.55, "inconclusive"),       # overlaps [0.5, 0.6]
    (0.7, 0.8, "not replicated"),      # wholly above alpha*_hi = 0.6
])
def test_judge_follows_the_registry_rule(alpha_lo, alpha_hi, expected):
    values = c2_values(alpha_lo, alpha_hi, tau_lo=2.0, tau_hi=2.5, c2_verdict=expected)
    row = seeds.judge("C2", values, REGISTRY)
    assert row["verdict"] == expected == row["glued verdict"]
    assert row["alpha_lo"] == alpha_lo and row["alpha_hi"] == alpha_hi
    assert row["alpha_star_lo"] == pytest.approx(0.5)
    assert row["alpha_star_hi"] == pytest.approx(0.6)
    assert row["alpha_star"] == pytest.approx(1 - 1 / 2.25)


def test_piece_verdict_by_the_registry_secondary_rule_or_not_measured():
    values = c2_values(0.01, 0.2, 2.0, 2.5)
    # the run did not record the piece-level keys: said so, never skipped
    assert seeds.piece_verdict("C2", values, REGISTRY) == seeds.NOT_MEASURED
    pieces = {"c2_alpha_piece_lo": 0.52, "c2_alpha_piece_hi": 0.7}
    assert seeds.piece_verdict("C2", {**values, **pieces}, REGISTRY) == "inconclusive"
    pieces = {"c2_alpha_piece_lo": 0.7, "c2_alpha_piece_hi": 0.8}
    assert seeds.piece_verdict("C2", {**values, **pieces}, REGISTRY) == "not replicated"


def test_piece_verdict_glued_where_the_registry_has_no_secondary_rule():
    registry = copy.deepcopy(REGISTRY)
    registry["claims"]["C2"].pop("secondary", None)
    values = c2_values(0.01, 0.2, 2.0, 2.5)
    assert seeds.piece_verdict("C2", values, registry) == seeds.NOT_MEASURED
    values["c2_verdict_piece"] = "inconclusive"
    assert seeds.piece_verdict("C2", values, registry) == "inconclusive"


def test_piece_verdict_from_a_secondary_block_of_the_registry():
    registry = copy.deepcopy(REGISTRY)
    registry["claims"]["C2"]["secondary"] = {
        "label": "piece-level anchors",
        "rule": {"direction only": "c2_piece_alpha_hi < 1 - 1 / c2_tau_acc_lo"},
        "otherwise": "inconclusive"}
    values = c2_values(0.01, 0.2, 2.0, 2.5)
    # the run did not measure the block's keys: said so, never skipped
    assert seeds.piece_verdict("C2", values, registry) == seeds.NOT_MEASURED
    assert seeds.piece_verdict("C2", {**values, "c2_piece_alpha_hi": 0.3},
                               registry) == "direction only"
    assert seeds.piece_verdict("C2", {**values, "c2_piece_alpha_hi": 0.55},
                               registry) == "inconclusive"
    assert "c2_piece_alpha_hi" in seeds.rule_inputs("C2", registry)


def test_rule_inputs_are_the_names_the_rules_read():
    assert seeds.rule_inputs("C2", REGISTRY) == [  # headline and piece-level rules
        "c2_alpha_hi", "c2_alpha_lo", "c2_alpha_piece_hi", "c2_alpha_piece_lo",
        "c2_tau_acc_hi", "c2_tau_acc_lo"]
    assert "c3_e2e_ratio_lo" in seeds.rule_inputs("C3", REGISTRY)
    assert {"c6_auc", "c6_auc_p"} <= set(seeds.rule_inputs("C6", REGISTRY))
    values = c2_values(0.01, 0.2, 2.0, 2.5)
    only = {k: values[k] for k in seeds.rule_inputs("C2", REGISTRY) if k in values}
    assert claims.verdict("C2", only, REGISTRY) == "direction only"


def test_agreement_and_listing():
    assert seeds.agreement(["inconclusive"] * 3) == 1
    assert seeds.agreement(["inconclusive", "direction only", "inconclusive"]) == 2 / 3
    assert seeds.agreement(["direction only", "inconclusive", "inconclusive"]) == 1 / 3
    with pytest.raises(ValueError):
        seeds.agreement([])
    assert (seeds.listing([0, 1], ["inconclusive", "direction only"])
            == "inconclusive (seed 0), direction only (seed 1)")


def test_every_claim_the_page_runs_has_its_figure_keys_registered():
    block = seeds.seed_block(REGISTRY)
    for cid, keys in block["figures"].items():
        assert set(keys) == set(seeds.FIGURE_KEYS), cid
        registered = REGISTRY["claims"][cid]["keys"]
        assert all(k in registered for k in keys.values()), cid


@pytest.mark.parametrize("claim_ids, seed_list, sizes, message", [
    (["C2"], [], {"C2": {}}, "seeds must be a non-empty list"),
    ([], [0], {}, "claims must be a non-empty list"),
    (["C9"], [0], {"C9": {}}, "['C9'] have no seed figures"),
    (["C1"], [0], {"C1": {}}, "['C1'] have no seed figures"),
    (["C2", "C3"], [0], {"C2": {}}, "no reduced sizes for ['C3']"),
    (["C2"], [0], {"C2": {"seed": 3}}, "set 'seed'"),
])
def test_a_bad_plan_is_one_line(claim_ids, seed_list, sizes, message):
    with pytest.raises(ValueError) as e:
        seeds.check_plan(claim_ids, seed_list, sizes, REGISTRY)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_sizes_are_checked_by_the_claim_notebook_runner():
    with pytest.raises(ValueError) as e:
        run.prepare_runs(["C2"], [0], {"C2": {"n_sample": 4}}, REGISTRY)
    message = str(e.value)
    assert "sizes of C2" in message and "unknown parameter 'n_sample'" in message
    with pytest.raises(ValueError, match="n_samples=0"):
        run.prepare_runs(["C2"], [0], {"C2": {"n_samples": 0}}, REGISTRY)
    plan = run.prepare_runs(["C2"], [0, 4], {"C2": {"n_samples": 4}}, REGISTRY)
    # every rerun is one look: the sequential rule is the full-size page's
    assert [(c, s, values) for c, s, _, values in plan] == [
        ("C2", 0, {"n_samples": 4, "seed": 0, "sequential": False}),
        ("C2", 4, {"n_samples": 4, "seed": 4, "sequential": False})]


def test_in_the_math_world_each_run_takes_its_claims_math_profile():
    """The seed page's world run: every claim notebook with its math profile
    beneath the page's sizes and seed, each written under a name of its own."""
    page = REPO_ROOT / "notebooks" / "10_seeds.md"
    profile = run.parameters_in(run.world_profile(page, "math"))
    plan = run.prepare_runs(profile["claims"], [0, 1], profile["sizes"], REGISTRY,
                            world="math")
    assert len(plan) == 2 * len(profile["claims"])
    for c, s, notebook, values in plan:
        math = run.parameters_in(run.world_profile(notebook, "math"))
        assert values["world"] == "math" and values["seed"] == s
        assert values["model"] == "dlmspec/math_free/base"
        for k, v in math.items():  # the profile, the page's sizes on top
            if k == "sequential":  # the profile's rule is the full-size page's
                assert v is True and values[k] is False, c
                continue
            assert values[k] == profile["sizes"][c].get(k, v), (c, k)
    assert (seeds.run_output(notebook, 1, "math").name
            == f"{notebook.stem}.math.seed1.ipynb")
    assert seeds.run_output(notebook, 1).name == f"{notebook.stem}.seed1.ipynb"
    # prose: no world given, nothing of the profile
    (_, _, _, values), = run.prepare_runs(["C2"], [0], {"C2": {"n_samples": 4}},
                                          REGISTRY)
    assert "world" not in values and "model" not in values


def test_the_runner_checks_the_seed_pages_sizes_in_one_line():
    """``run.prepare`` of the seed page runs every claim's sizes through that
    claim's runner (``run.check_relations``); ``params.validate_all`` checks the
    plan against the registry only (it cannot import the runner)."""
    page = REPO_ROOT / "notebooks" / "10_seeds.md"
    bad = {"claims": ["C2"], "seeds": [0], "sizes": {"C2": {"n_sample": 4}}}
    with pytest.raises(run.ParameterError) as e:
        run.prepare(page, bad)
    message = str(e.value)
    assert message.startswith("parameters claims, seeds, sizes: sizes of C2")
    assert "unknown parameter 'n_sample'" in message and "\n" not in message
    assert params.validate_all({"claims": ["C2"], "seeds": [0], "sizes": {"C2": {}}})
    with pytest.raises(ValueError, match="no reduced sizes"):
        params.validate_all({"claims": ["C2"], "seeds": [0], "sizes": {}})


@pytest.mark.parametrize("name, value", [
    ("seeds", []), ("seeds", [0, 0]), ("seeds", [-1]), ("seeds", [True]),
    ("claims", []), ("claims", ["C2", "C2"]), ("sizes", {"C2": 4}),
])
def test_page_parameters_have_rules(name, value):
    with pytest.raises(ValueError, match=f"parameter {name}="):
        params.check(name, value)


def test_a_changed_source_makes_a_page_stale(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "a.md").write_text("one")
    (tmp_path / "notebooks" / "b.md").write_text("two")
    files = ["notebooks/b.md", "notebooks/a.md"]
    glued = {provenance.SOURCE_FILES_KEY: ",".join(sorted(files)),
             provenance.SOURCES_KEY: provenance.sources_digest(files, tmp_path)}
    assert provenance.sources_current(glued, tmp_path)
    assert provenance.sources_current({}, tmp_path)  # a page that runs no notebook
    (tmp_path / "notebooks" / "a.md").write_text("one, edited")
    assert not provenance.sources_current(glued, tmp_path)
    (tmp_path / "notebooks" / "a.md").unlink()
    assert not provenance.sources_current(glued, tmp_path)


def test_stderr_of_child_processes_goes_to_the_log(tmp_path):
    log = tmp_path / "run.log"

    def child(text):
        code = f"import sys; sys.stderr.write({text!r})"
        subprocess.run([sys.executable, "-c", code], check=True)

    with seeds.stderr_to(log):
        child("kernel noise")
    assert log.read_text() == "kernel noise"
    child("after")
    assert log.read_text() == "kernel noise"  # restored afterwards
