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
    page = claims_dashboard._table([row], reg, "book/claims")
    assert "<th>on piece-level anchors</th>" in page
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


def test_the_power_plan_is_its_stated_calculation_and_the_math_profiles_run_it():
    """book/claims.yml's power: each planned size is power.size_to_separate of
    the sides seen so far, and the math profile runs at least that many
    questions (every size the entry names)."""
    from dlmspec_min.measures import power
    from dlmspec_min.plumbing import worldruns

    reg = claims.load_registry()
    plan = reg["power"]
    assert set(plan["claims"]) == {"C2", "C3", "C5", "C6", "C7"}
    for cid, spec in plan["claims"].items():
        a, b = (tuple(s) for s in spec["seen"]["sides"])
        assert power.size_to_separate(a, b, *spec["seen"]["n"],
                                      power=plan["level"]) == spec["planned"], cid
        assert not power.separated(a, b), cid  # what the plan is for
        notebook = claims.REPO_ROOT / reg["claims"][cid]["notebook"]
        ran = worldruns.run_sizes(notebook, "math", spec["size"])
        assert all(n >= spec["planned"] for n in ran), (cid, ran)
        # the sides name values the page records (alpha* as its rules read it)
        names = {n for side in spec["sides"] for e in side
                 for n in re.findall(r"[a-z]\w+", str(e))}
        assert names <= set(reg["claims"][cid]["keys"]) | {"c5_quality_bound"}, cid
    # the shares of a mean over codebooks name values the pages glue
    from dlmspec_min.ssld import conditional

    source = "".join(p.read_text() for p in
                     (claims.REPO_ROOT / "dlmspec_min" / "experiments").glob("c*.py"))
    shared = {cid for cid, spec in plan["claims"].items() if spec.get("shares")}
    assert shared == {"C2", "C3", "C6", "C7"}
    for cid in shared:
        for name in plan["claims"][cid]["shares"]:
            assert f'"{name}"' in source or name.removeprefix("c6_") in \
                conditional.FIGURE_KEYS, (cid, name)


def test_the_power_reading_of_a_world_and_its_note_on_the_claim_page():
    import sys

    sys.path.insert(0, str(claims.REPO_ROOT / "book" / "_ext"))
    import claims_dashboard

    reg = claims.load_registry()
    apart = {"c3_alpha": 0.9, "c3_alpha_lo": 0.88, "c3_alpha_hi": 0.92,
             "c3_alpha_star": 0.75, "c3_tau_acc_lo": 3.5, "c3_tau_acc_hi": 4.5}
    p = claims.power_reading("C3", apart, [20], reg)
    assert p["separated"] and p["b"] == pytest.approx((0.75, 1 - 1 / 3.5, 1 - 1 / 4.5))
    close = {**apart, "c3_alpha_lo": 0.70}
    q = claims.power_reading("C3", close, [20], reg)
    assert not q["separated"] and q["needed"] > 20
    assert claims.power_reading("C3", {"c3_alpha": 0.9}, [20], reg) is None
    assert claims.power_reading("C1", apart, [20], reg) is None
    row = {"id": "C3", "verdict": "inconclusive",
           "values": {**{f"{k}_math": v for k, v in close.items()}, **apart}}
    notes = claims_dashboard._power_notes(row, reg, "C3", ["prose", "math"])
    assert len(notes) == 2
    assert "this comparison is decided" in notes[0] and 'data-world="prose"' in notes[0]
    assert "compares alpha_SID 0.900 [0.880, 0.920] with alpha* " in notes[0]
    math_note = notes[1]
    assert f"about {claims.power_reading('C3', close, [38], reg)['needed']} samples" \
        in math_note and "(this run: n_samples 38)" in math_note
    # a mean over codebooks: the note sizes questions and codebooks apart
    books = {**close, "c3_alpha_questions_share": 0.02, "c3_n_codebooks": 5}
    # mostly codebooks: no number of samples at the run's 5, some codebooks would
    wide = claims.power_reading("C3", {**books, "c3_alpha_spread": 0.3}, [20], reg)
    assert wide["needed"] is None and wide["codebooks"] == 5
    assert wide["codebooks_needed"] > 5 and wide["both"] is None
    words = claims_dashboard._sizes_words(wide, "n_samples 20", 0.8)
    assert "at this run's 5 codebooks no number of samples" in words
    assert f"about {wide['codebooks_needed']} codebooks would" in words
    # neither alone: both together
    both = claims.power_reading("C3", {**books, "c3_alpha_questions_share": 0.2,
                                       "c3_alpha_spread": 0.3}, [20], reg)
    assert both["needed"] is None and both["codebooks_needed"] is None
    assert both["both"][0] > 20 and both["both"][1] > 5
    assert (f"together, about {both['both'][0]} samples with {both['both'][1]} "
            "codebooks would") in claims_dashboard._sizes_words(both, "n 20", 0.8)
    # mostly questions: a size at the run's codebooks, larger than with none
    small = claims.power_reading("C3", {**books, "c3_alpha_spread": 0.01}, [20], reg)
    assert small["needed"] > 20 and small["codebooks"] == 5
    assert "would be expected to separate them at its 5 codebooks" in \
        claims_dashboard._sizes_words(small, "n_samples 20", 0.8)
    as_float = claims.power_reading("C3", {**books, "c3_alpha_spread": 0.01,
                                           "c3_n_codebooks": 5.0}, [20], reg)
    assert as_float["needed"] == small["needed"]  # a whole float counts
    one = claims.power_reading("C3", {**books, "c3_alpha_spread": float("nan"),
                                      "c3_n_codebooks": 1}, [20], reg)
    assert one["codebooks"] is None and one["needed"] == q["needed"]  # as before
    # the landing page names the verdicts that questions alone cannot decide
    row = {"id": "C3", "notebook": reg["claims"]["C3"]["notebook"], "values": {
        f"{k}_math": v for k, v in {**books, "c3_alpha_spread": 0.3}.items()}}
    cells = {"C3": {w: {"verdict": "replicated"} for w in claims.WORLD_SUFFIXES}}
    assert claims_dashboard._undecided_sentence([row], reg, cells) == ""
    cells["C3"]["math"]["verdict"] = claims.INCONCLUSIVE
    said = claims_dashboard._undecided_sentence([row], reg, cells)
    assert 'data-world="math"' in said and "C3 stays inconclusive" in said
    assert "spread between alpha_SID's codebooks" in said and " for C3, at " in said
    two = {**row, "id": "C6", "notebook": reg["claims"]["C6"]["notebook"], "values": {
        k.replace("c3_", "c6_").replace("c6_alpha_math", "c6_alpha_sid_math"): v
        for k, v in row["values"].items()}}
    cells["C6"] = cells["C3"]
    said = claims_dashboard._undecided_sentence([row, two], reg, cells)
    assert "C3 and C6 stay inconclusive" in said and " for C3 and about" in said
    row["values"]["c3_alpha_spread_math"] = 0.01  # questions alone would do
    assert claims_dashboard._undecided_sentence([row], reg, cells) == ""
    nan = {**apart, "c3_alpha_hi": float("nan")}
    row = {"id": "C3", "verdict": "inconclusive", "values": nan}
    (note,) = claims_dashboard._power_notes(row, reg, "C3", ["prose"])
    assert "not finite" in note


def test_the_landing_page_s_crossing_reads_the_regime_glue(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(claims.REPO_ROOT / "book" / "_ext"))
    import claims_dashboard

    reg = claims.load_registry()
    assert "did not run" in claims_dashboard._crossing(tmp_path, reg)
    page = claims.executed_path(reg["checks"]["regime"]["notebook"], tmp_path)
    page.parent.mkdir(parents=True)
    values = {f"r_grid_free_{u}_{k}": x for u in ("word", "piece") for k, x in (
        ("fine_alpha", 0.68), ("fine_alpha_lo", 0.62), ("fine_alpha_hi", 0.74),
        ("fine_alpha_star", 0.81), ("line_p", 0.4),
        ("cross_said", "crossed at 3.16 bits (95 % interval 2.67 to 3.72)"))}
    page.with_suffix(".glue.json").write_text(json.dumps(  # as myst-nb writes it
        {k: {"data": {"text/plain": repr(x)}} for k, x in values.items()}))
    html = claims_dashboard._crossing(tmp_path, reg)
    assert html.startswith("<p>") and "0.680 [0.620, 0.740] against alpha*" in html
    assert "crossed at 3.16 bits" in html


def test_two_values_finds_a_name_holding_two_values_and_only_then():
    registry = {"claims": {"C9": {"keys": {
        "c9_tau": {"label": "tau_acc on C9's questions"},
        "c9_tau_again": {"label": "tau_acc on C9's questions"},
        "c9_other": {"label": "another figure"}}}}, "checks": {}}
    agree = {"p1": {"c9_tau": 4.0, "c9_tau_again": 4.0, "c9_other": 1.0},
             "p2": {"c9_tau": 4.0, "c9_other": 2.0 + 1e-9}}
    problems = claims.two_values(agree, registry)
    assert any("key c9_other" in p for p in problems)  # one key, two pages, two values
    assert not any("c9_tau" in p for p in problems)
    agree["p2"]["c9_other"] = 1.0
    assert claims.two_values(agree, registry) == []
    agree["p1"]["c9_tau_again"] = 4.5  # one name, two keys, two values
    (problem,) = claims.two_values(agree, registry)
    assert "tau_acc on C9's questions" in problem and "4.5" in problem
    # another world's values are compared within that world only
    agree["p1"]["c9_tau_again"] = 4.0
    agree["p2"]["c9_tau_math"] = 9.0
    assert claims.two_values(agree, registry) == []


def test_evidence_reads_its_sides_and_the_power_entry():
    registry = claims.load_registry()
    values = {"c2_alpha_sid": 0.1, "c2_alpha_lo": 0.05, "c2_alpha_hi": 0.15,
              "c2_alpha_star": 0.8, "c2_tau_acc_lo": 4.0, "c2_tau_acc_hi": 6.0}
    (e,) = claims.evidence("C2", values, registry)
    assert e["a"] == (0.1, 0.05, 0.15)
    assert e["b"] == pytest.approx((0.8, 0.75, 1 - 1 / 6))
    assert e["separated"] and e["paper"] == registry["claims"]["C2"]["paper_value"]
    (e,) = claims.evidence("C2", {}, registry)  # nothing recorded: NaN, not a crash
    assert all(math.isnan(x) for x in e["a"]) and not e["separated"]
    for cid in registry["claims"]:
        assert registry["evidence"][cid], f"{cid} has no evidence to draw"


def test_the_decision_record_reads_every_dated_comment_without_tracker_numbers():
    record = claims.decisions()
    text = claims.REGISTRY.read_text()
    assert len(record) == len(re.findall(r"#\s*\d{4}-\d{2}-\d{2}\b", text))
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", d["date"]) for d in record)
    assert not [d for d in record if re.search(r"\b(issue|session) \d", d["text"])]
    assert {d["where"] for d in record} >= {"C1", "C2", "C8", "regime"}
