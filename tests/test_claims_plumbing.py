"""The claims helpers: plain scalars, reading glue back, the rule evaluator."""

import json
import math
import re

import numpy as np
import pytest
import torch

from dlmspec_min.plumbing import claims


def test_plain_casts_numpy_and_torch_scalars():
    assert type(claims.plain(np.float32(0.5))) is float
    assert type(claims.plain(np.int64(3))) is int
    assert type(claims.plain(torch.tensor(2.5))) is float
    assert claims.plain("replicated") == "replicated"
    with pytest.raises(TypeError):
        claims.plain(np.array([1.0, 2.0]))


def test_evaluate_rules():
    v = {"a": 0.7, "b": 0.001, "lo": 0.45, "hi": 0.55}
    assert claims.evaluate("a > 0.5 and b < 0.01 and lo <= 0.5 <= hi", v)
    assert not claims.evaluate("a > 0.5 and lo > 0.5", v)
    assert claims.evaluate("a < 0.1 or not b > 0.1", v)
    assert claims.evaluate("b * 1000 >= 1 - 0.5 + 0.5", v)
    with pytest.raises(KeyError, match="missing"):
        claims.evaluate("missing > 1", v)
    with pytest.raises(ValueError, match="unsupported"):
        claims.evaluate("__import__('os')", v)


def test_verdict_picks_first_rule_that_holds():
    reg = {
        "claims": {"X": {"rule": {"replicated": "a > 1", "direction only": "a > 0"}}}
    }
    assert claims.verdict("X", {"a": 2}, reg) == "replicated"
    assert claims.verdict("X", {"a": 0.5}, reg) == "direction only"
    assert claims.verdict("X", {"a": -1}, reg) == "not replicated"


def test_check_values_reports_missing_nonfinite_and_out_of_range():
    keys = {"a": {"range": [0, 1]}, "b": {"range": [0, 1]}, "c": {}, "d": {}}
    problems = claims.check_values(keys, {"a": 2.0, "c": float("nan"), "d": 1})
    assert any(p.startswith("a:") and "outside" in p for p in problems)
    assert any(p.startswith("b:") and "not recorded" in p for p in problems)
    assert any(p.startswith("c:") for p in problems)
    assert not any(p.startswith("d:") for p in problems)


def _glue_output(name, value):
    return {
        "output_type": "display_data",
        "metadata": {
            "scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}
        },
        "data": {"application/papermill.record/text/plain": repr(value)},
    }


def test_read_glued_from_ipynb_and_glue_json(tmp_path):
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "outputs": [_glue_output("x", 0.25), _glue_output("v", "replicated")],
            }
        ]
    }
    (tmp_path / "a.ipynb").write_text(json.dumps(nb))
    assert claims.read_glued(tmp_path / "a.ipynb") == {"x": 0.25, "v": "replicated"}
    glue = {"y": {"data": {"text/plain": "3"}}, "z": {"data": {"text/plain": "'ok'"}}}
    (tmp_path / "b.glue.json").write_text(json.dumps(glue))
    (tmp_path / "b.ipynb").write_text(json.dumps({"cells": []}))
    assert claims.read_glued(tmp_path / "b.ipynb") == {"y": 3, "z": "ok"}


def test_non_finite_floats_read_back_as_floats(tmp_path):
    """A NaN glued for a model not trained yet must read back as a float (a rule
    then reads it as not met), and a string that merely spells one stays one."""
    nb = {"cells": [{"cell_type": "code", "outputs": [
        _glue_output("a", float("nan")), _glue_output("b", float("inf")),
        _glue_output("c", float("-inf")), _glue_output("d", "nan")]}]}
    (tmp_path / "n.ipynb").write_text(json.dumps(nb))
    v = claims.read_glued(tmp_path / "n.ipynb")
    assert math.isnan(v["a"]) and v["b"] == math.inf and v["c"] == -math.inf
    assert v["d"] == "nan"
    assert claims.evaluate("0.3 <= a <= 0.95", v) is False


def test_dashboard_rows_mark_unbuilt_claims(tmp_path):
    rows = claims.dashboard_rows(executed_dir=tmp_path)
    assert [r["id"] for r in rows] == [f"C{i}" for i in range(1, 9)]
    assert all(r["verdict"] == claims.NOT_REBUILT for r in rows)


def _registry_with_secondary(tmp_path, otherwise="inconclusive"):
    (tmp_path / "nb.md").write_text("")
    return {"verdicts": claims.VERDICTS, "claims": {"X": {
        "statement": "s", "paper": "p", "notebook": str(tmp_path / "nb.md"),
        "headline": ["a"], "keys": {"a": {"label": "alpha"}},
        "rule": {"replicated": "a < 1"},
        "secondary": {"label": "piece-level anchors", "glued": "x_verdict_piece",
                      "rule": {"replicated": "b < 1"}, "otherwise": otherwise}}}}


def test_secondary_verdict_is_evaluated_beside_the_headline(tmp_path):
    reg = _registry_with_secondary(tmp_path)
    assert claims.verdict("X", {"a": 0, "b": 5}, reg) == "replicated"
    assert claims.secondary_verdict("X", {"a": 0, "b": 5}, reg) == "inconclusive"
    assert claims.secondary_verdict("X", {"a": 5, "b": 0}, reg) == "replicated"
    reg["claims"]["X"]["secondary"]["otherwise"] = "maybe"
    with pytest.raises(ValueError, match="secondary verdicts \\['maybe'\\]"):
        claims.verdict("X", {"a": 0}, reg)
    reg["claims"]["X"]["secondary"] = {"rule": {"replicated": "b < 1"}}
    with pytest.raises(ValueError, match="needs a label and a rule"):
        claims.secondary_verdict("X", {"b": 0}, reg)


def test_dashboard_rows_and_html_show_both_verdicts(tmp_path):
    import sys

    sys.path.insert(0, str(claims.REPO_ROOT / "book" / "_ext"))
    import claims_dashboard

    reg = _registry_with_secondary(tmp_path)
    executed = tmp_path / "exec"
    # an absolute notebook path: its executed copy lies beside it
    glue = claims.executed_path(reg["claims"]["X"]["notebook"], executed)
    glue = glue.with_suffix(".glue.json")
    glue.write_text(json.dumps({
        "a": {"data": {"text/plain": "0.5"}}, "b": {"data": {"text/plain": "3"}},
        "x_verdict_piece": {"data": {"text/plain": "'inconclusive'"}}}))
    (row,) = claims.dashboard_rows(executed, reg)
    assert row["verdict"] == "replicated"
    assert row["secondary"] == {"label": "piece-level anchors",
                                "verdict": "inconclusive", "glued": "inconclusive"}
    page = claims_dashboard._table([row], "book/claims")
    assert "<th>secondary verdict</th>" in page
    assert ('class="secondary-verdict" data-secondary-claim="X">'
            "piece-level anchors: ") in page
    assert page.index(">replicated<") < page.index(">inconclusive<")
    (stale,) = claims.dashboard_rows(executed, reg, fingerprint="other")
    assert stale["verdict"] == stale["secondary"]["verdict"] == claims.STALE
    glue.unlink()
    (unbuilt,) = claims.dashboard_rows(executed, reg)
    assert unbuilt["secondary"]["verdict"] == claims.NOT_REBUILT
    assert "&mdash;" in claims_dashboard._secondary_cell({"id": "Y", "secondary": None})


def test_world_values_and_the_claim_by_world_matrix(tmp_path):
    import sys

    sys.path.insert(0, str(claims.REPO_ROOT / "book" / "_ext"))
    import claims_dashboard

    values = {"a": 0.5, "b": 3, "a_math": 2.0, "b_math": 1}
    assert claims.world_values(values, "prose") == {"a": 0.5, "b": 3}
    assert claims.world_values(values, "math") == {"a": 2.0, "b": 1}
    with pytest.raises(ValueError, match="unknown world 'poetry'"):
        claims.world_values(values, "poetry")
    reg = _registry_with_secondary(tmp_path)
    reg["claims"]["X"]["keys"]["a"] = {"label": "the a", "range": [0, 10]}
    reg["claims"]["X"].setdefault("headline", ["a"])
    row = {"id": "X", "notebook": reg["claims"]["X"]["notebook"],
           "verdict": "replicated", "values": values}
    key = reg["claims"]["X"].get("finding", reg["claims"]["X"]["headline"])[0]
    cells = claims.world_cells(row, reg)
    # the math world: the same rule on its own values
    assert cells["math"]["verdict"] == claims.verdict("X", {"a": 2.0, "b": 1}, reg)
    assert cells["prose"]["verdict"] == "replicated"
    assert cells["math"]["value"] == claims.world_values(values, "math")[key]
    prose_only = {**row, "values": {"a": 0.5, "b": 3}}
    assert claims.world_cells(prose_only, reg)["math"]["verdict"] == claims.NOT_MEASURED
    stale = {**row, "verdict": claims.STALE}
    assert claims.world_cells(stale, reg)["math"]["verdict"] == claims.STALE
    page = claims_dashboard._matrix([prose_only], reg, "book/claims")
    assert page.count('class="world-verdict"') == len(claims.WORLD_SUFFIXES)
    assert 'data-world="math">' in page and ">not measured<" in page
    assert "regime not measured" in page  # no C3 row here
    # a world with nothing measured says why under the matrix
    note = re.search(r'<p class="world-missing" data-world="math"><small>(.*?)</small>',
                     page).group(1).replace("&#x27;", "'")
    missing = claims_dashboard._models_missing("math")
    assert note == "math: not measured by this build" + (
        f"; the world's models missing: {missing}" if missing else "")
    assert 'class="world-missing" data-world="prose"' not in page


def test_a_claim_page_shows_the_claim_in_every_world_and_why_one_is_missing(
        tmp_path, monkeypatch):
    import sys

    sys.path.insert(0, str(claims.REPO_ROOT / "book" / "_ext"))
    import claims_dashboard

    reg = _registry_with_secondary(tmp_path)
    reg["claims"]["X"]["keys"]["a"] = {"label": "the a", "range": [0, 10]}
    reg["claims"]["X"].setdefault("headline", ["a"])
    both = {"id": "X", "notebook": reg["claims"]["X"]["notebook"],
            "verdict": "replicated",
            "values": {"a": 0.5, "b": 3, "x_tau_acc": 4.0, "a_math": 2.0, "b_math": 1}}
    page = claims_dashboard._claim_worlds([both], reg, "X")
    rows = re.findall(r'<tr data-world="(\w+)">(.*?)</tr>', page)
    assert [w for w, _ in rows] == list(claims.WORLD_SUFFIXES)
    cells = claims.world_cells(both, reg)
    for w, text in rows:
        assert f">{cells[w]['verdict']}<" in text
    prose = dict(rows)["prose"]
    assert "tau_acc 4 tokens per forward, alpha* 0.75" in prose  # the claim's own
    assert "regime not measured" in dict(rows)["math"]  # no tau of its own, no C3
    prose_only = {**both, "values": {"a": 0.5, "b": 3}}
    page = claims_dashboard._claim_worlds([prose_only], reg, "X")
    math_row = dict(re.findall(r'<tr data-world="(\w+)">(.*?)</tr>', page))["math"]
    assert ">not measured<" in math_row
    missing = claims_dashboard._models_missing("math")
    if not missing:  # every rung committed
        assert "this build did not measure it here" in math_row
        assert "models missing" not in math_row
    # a rung not trained: the row names it (whatever this checkout holds)
    monkeypatch.setattr(claims_dashboard, "_models_missing", lambda w: "math/large")
    page = claims_dashboard._claim_worlds([prose_only], reg, "X")
    math_row = dict(re.findall(r'<tr data-world="(\w+)">(.*?)</tr>', page))["math"]
    assert "the world's models missing: math/large" in math_row.replace("&#x27;", "'")
    monkeypatch.undo()
    # the prose ladder is committed; the math world names what it lacks, if anything
    assert claims_dashboard._models_missing("prose") == ""
    from dlmspec_min.paths import models_dir

    lacking = [n for n in ("math/small", "math/base", "math/large")
               if not (models_dir() / n / "config.json").exists()]
    assert all(f"dlmspec/{n}" in missing for n in lacking)
