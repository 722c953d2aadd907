"""The book's world runs: each claim notebook again in every world it has a
profile for, executed beside the page and read back under the world's suffix."""

import json
import shutil

import jupytext
import nbformat
import pytest

from dlmspec_min import catalogue
from dlmspec_min.paths import REPO_ROOT, models_dir
from dlmspec_min.plumbing import claims, run, worldruns

NB = REPO_ROOT / "notebooks" / "02_anchor_acceptance.md"


def _models_at(tmp_path, monkeypatch, trained=(), training=()):
    """A data folder whose models/ holds ``trained`` (a config) and ``training``
    (a checkpoint only)."""
    data = tmp_path / "data"
    for name in trained:
        (data / "models" / name).mkdir(parents=True)
        (data / "models" / name / "config.json").write_text("{}")
    for name in training:
        (data / "models" / name).mkdir(parents=True)
        (data / "models" / name / "checkpoint.pt").write_bytes(b"")
    monkeypatch.setenv("DLMSPEC_DATA", str(data))
    return data


def test_a_notebook_with_a_world_parameter_runs_in_every_book_world(tmp_path):
    assert worldruns.worlds_of(NB) == ["math"]  # catalogue.BOOK less prose
    assert worldruns.worlds_of(REPO_ROOT / "notebooks" / "00_models.md") == []
    # a page with no parameters cell at all takes no world either
    plain = tmp_path / "plain.md"
    plain.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\n"
                     "kernelspec:\n  name: python3\n---\n\n# A page\n\n"
                     "```{code-cell} ipython3\n1 + 1\n```\n")
    assert worldruns.worlds_of(plain) == []
    # the paper-scale profiles are not a world of the book's
    assert (run.PROFILES / "paper" / "02_anchor_acceptance.yaml").exists()


def test_a_world_run_is_the_page_with_its_profile_injected(tmp_path, monkeypatch):
    _models_at(tmp_path, monkeypatch, trained=("math_free/base", "math_free/small"))
    page = jupytext.read(NB)
    r = worldruns.world_run(NB, page, "math")
    assert r.key == f"{NB}#math" and r.missing == ""
    declared = run.declared_parameters(NB)
    profile = run.world_defaults(declared, "math", NB)
    # the catalogue's defaults of the world, then its sizes for the page
    assert profile == {**{k: v for k, v in catalogue.get("math").defaults.items()
                          if k in declared},
                       **run.parameters_in(run.world_profile(NB, "math"))}
    defaults = run.with_defaults(declared, {})
    # every value that differs from the page's default, nothing else
    assert r.parameters == {k: v for k, v in profile.items() if v != defaults[k]}
    assert r.parameters["world"] == "math" and r.parameters["K"] == 32
    cells = r.notebook.cells
    i = next(i for i, c in enumerate(cells)
             if "parameters" in c.metadata.get("tags", []))
    injected = cells[i + 1]
    assert injected.metadata["tags"] == ["injected-parameters"]
    assert "world = \"math\"" in injected.source and "K = 32" in injected.source
    assert len(cells) == len(page.cells) + 1  # the page itself is untouched
    assert all("injected-parameters" not in c.metadata.get("tags", [])
               for c in page.cells)
    with pytest.raises(ValueError, match="its own world"):
        worldruns.world_run(NB, page, "prose")


def test_a_world_whose_models_are_missing_is_not_run_and_says_why(tmp_path,
                                                                 monkeypatch):
    _models_at(tmp_path, monkeypatch, trained=("math_free/small",),
               training=("math_free/base",))
    r = worldruns.world_run(NB, jupytext.read(NB), "math")
    assert r.notebook is None
    assert r.missing == "dlmspec/math_free/base (still training)"
    strong = REPO_ROOT / "notebooks" / "07_strong_model.md"
    r7 = worldruns.world_run(strong, jupytext.read(strong), "math")
    assert r7.missing == ("dlmspec/math_free/base (still training), "
                          "dlmspec/math_free/large (not trained)")
    # a page that runs claim notebooks (the seed page) needs the models of the
    # claims it reruns in that world (C7: the large target too)
    seeds = REPO_ROOT / "notebooks" / "10_seeds.md"
    r10 = worldruns.world_run(seeds, jupytext.read(seeds), "math")
    assert r10.notebook is None
    assert r10.missing == ("dlmspec/math_free/base (still training), "
                           "dlmspec/math_free/large (not trained)")
    _models_at(tmp_path / "later", monkeypatch,
               trained=("math_free/small", "math_free/base"))
    r10 = worldruns.world_run(seeds, jupytext.read(seeds), "math")
    assert r10.notebook is None
    assert r10.missing == "dlmspec/math_free/large (not trained)"
    assert set(worldruns.claim_models(["C2"], "math")) == {"dlmspec/math_free/base",
                                                            "dlmspec/math_free/small"}
    assert "dlmspec/math_free/large" in worldruns.claim_models(["C7"], "math")
    assert worldruns.models_missing(
        ["dlmspec/math_free/small", "/some/folder", None]) == ""


def _glue(name, value):
    return nbformat.v4.new_output(
        "display_data", data={"application/papermill.record/text/plain": repr(value)},
        metadata={"scrapbook": {"name": name,
                                "mime_prefix": "application/papermill.record/"}})


def test_world_runs_are_written_from_the_cache_and_read_under_their_suffix(
        tmp_path, monkeypatch):
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    _models_at(tmp_path, monkeypatch, trained=("math_free/base", "math_free/small"))
    r = worldruns.world_run(NB, jupytext.read(NB), "math")
    executed = tmp_path / "exec" / "notebooks"
    page = executed / "02_anchor_acceptance.ipynb"
    lines = []
    # no cache record: nothing written, a stale file from an earlier build removed
    executed.mkdir(parents=True)
    claims.world_run_path(page, "math").write_text("{}")
    cache = tmp_path / "cache"
    assert worldruns.write_executed(cache, [r], lambda p: page, lines.append) == []
    assert not claims.world_run_path(page, "math").exists()
    assert lines == ["[worlds] 02_anchor_acceptance in the math world: not measured "
                     "in this build, it did not run through"]
    # executed and cached: written beside the page
    ran = nbformat.from_dict(json.loads(nbformat.writes(r.notebook)))
    last_code = [c for c in ran.cells if c.cell_type == "code"][-1]
    last_code.outputs = [_glue("c2_alpha_sid", 0.01),
                             _glue(claims.FINGERPRINT_KEY, "fp1")]
    get_cache(str(cache)).cache_notebook_bundle(
        CacheBundleIn(ran, r.key), check_validity=False)
    assert worldruns.write_executed(cache, [r], lambda p: page) == [r]
    out = claims.world_run_path(page, "math")
    assert out == executed / "02_anchor_acceptance.math.ipynb"
    assert claims.read_glued(out) == {"c2_alpha_sid": 0.01,
                                      claims.FINGERPRINT_KEY: "fp1"}
    # the dashboard reads it under the math suffix; another fingerprint is stale
    (page.with_suffix(".glue.json")).write_text(json.dumps({
        "c2_alpha_sid": {"data": {"text/plain": "0.5"}},
        claims.FINGERPRINT_KEY: {"data": {"text/plain": "'fp1'"}}}))
    reg = {"verdicts": claims.VERDICTS, "claims": {"C2": {
        "statement": "s", "paper": "p", "notebook": "notebooks/02_anchor_acceptance.md",
        "headline": ["c2_alpha_sid"],
        "keys": {"c2_alpha_sid": {"label": "alpha", "range": [0, 1]}},
        "rule": {"replicated": "c2_alpha_sid < 0.1"}, "otherwise": "not replicated"}}}
    (row,) = claims.dashboard_rows(tmp_path / "exec", reg, fingerprint="fp1")
    assert row["values"]["c2_alpha_sid"] == 0.5
    assert row["values"]["c2_alpha_sid_math"] == 0.01
    assert row["stale_worlds"] == []
    cells = claims.world_cells(row, reg)
    assert (cells["prose"]["verdict"], cells["math"]["verdict"]) == (
        "not replicated", "replicated")
    out.write_text(out.read_text().replace('fp1', 'fp0'))
    (row,) = claims.dashboard_rows(tmp_path / "exec", reg, fingerprint="fp1")
    assert row["stale_worlds"] == ["math"]
    assert claims.world_cells(row, reg)["math"]["verdict"] == claims.STALE


def test_a_world_whose_models_are_missing_logs_the_models(tmp_path, monkeypatch):
    _models_at(tmp_path, monkeypatch, training=("math_free/base",))
    r = worldruns.world_run(NB, jupytext.read(NB), "math")
    lines = []
    worldruns.write_executed(tmp_path / "cache", [r],
                             lambda p: tmp_path / "x.ipynb", lines.append)
    assert lines == ["[worlds] 02_anchor_acceptance in the math world: not measured "
                     "in this build, its models are missing: dlmspec/math_free/base "
                     "(still training), dlmspec/math_free/small (not trained)"]


def test_the_committed_math_models_are_what_the_book_reports_missing():
    """Not a stand-in: the build's own models folder decides what runs."""
    missing = worldruns.models_missing(
        [f"dlmspec/math_free/{size}" for size in ("small", "base", "large")])
    for size in ("small", "base", "large"):
        trained = (models_dir() / "math_free" / size / "config.json").exists()
        assert (f"dlmspec/math_free/{size} (" in missing) != trained


def test_a_checks_table_of_worlds_evaluates_each_worlds_own_rules(tmp_path,
                                                                  monkeypatch):
    import re
    import sys

    sys.path.insert(0, str(REPO_ROOT / "book" / "_ext"))
    import claims_dashboard

    _models_at(tmp_path, monkeypatch, trained=("math_free/small",))
    reg = {"checks": {"traj": {
        "notebook": "notebooks/09_trajectory_speculation.md",
        "rules": {"exact": "t_exact_match == 1"},
        "targets": {"fast": "t_speedup_vs_threshold >= 1.3"},
        "world_figures": {"t_speedup_vs_threshold": "ratio", "t_exact_match": "exact"},
        "worlds": {"math": {"rules": {"exact": "t_exact_match == 1"},
                            "targets": {"fast_2x": "t_speedup_vs_threshold >= 2"}}}}}}
    executed = tmp_path / "exec"
    page = claims.executed_path(reg["checks"]["traj"]["notebook"], executed)
    page.parent.mkdir(parents=True)
    page.with_suffix(".glue.json").write_text(json.dumps({
        "t_exact_match": {"data": {"text/plain": "1.0"}},
        "t_speedup_vs_threshold": {"data": {"text/plain": "1.5"}},
        claims.FINGERPRINT_KEY: {"data": {"text/plain": "'fp'"}}}))

    def rows():
        html = claims_dashboard._check_worlds(reg, "traj", executed, "fp")
        return dict(re.findall(r'<tr data-world="(\w+)">(.*?)</tr>', html, re.S))

    r = rows()
    assert "exact: met" in r["prose"] and "fast: met" in r["prose"]
    assert "ratio: <b>1.5</b>" in r["prose"]
    # no world run: not measured, with the models this build lacks
    assert ">not measured<" in r["math"]
    assert "dlmspec/math_free/base (not trained)" in r["math"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[
        _glue("t_exact_match", 0.5), _glue("t_speedup_vs_threshold", 2.5),
        _glue(claims.FINGERPRINT_KEY, "old")])])
    nbformat.write(nb, claims.world_run_path(page, "math"))
    r = rows()
    # the math world's own rules and targets, on its own values
    assert "exact: not met" in r["math"] and "fast 2x: met" in r["math"]  # in words
    assert "fast:" not in r["math"] and "ratio: <b>2.5</b>" in r["math"]
    reg["checks"]["traj"]["rule_words"] = {"fast_2x": "twice as fast"}
    r = rows()  # a rule's own words where the registry gives them
    assert "twice as fast: met" in r["math"] and "fast 2x" not in r["math"]
    assert "exact: not met" in r["math"]
    reg["checks"]["traj"]["world_figures"]["t_other"] = "never recorded"
    assert "never recorded: <i>not measured</i>" in rows()["math"]
    assert ">stale<" in r["math"] and ">stale<" not in r["prose"]


def _full_profiles():
    return sorted((run.PROFILES / worldruns.FULL.format(world="math")).glob("*.yaml"))


def test_the_math_worlds_full_sizes_are_sizes_of_its_profile(tmp_path, monkeypatch):
    """Where the book runs the math world at reduced sizes, the full sizes are a
    file that changes sizes only (no model, decode or world) and runs with the
    profile beneath it; every page the book measures at reduced sizes says so.
    Since 2026-12-06 the book runs the power calculation's sizes and keeps no
    full profile; the mechanism is then checked on a copy with one added."""
    fulls = _full_profiles()
    if not fulls:
        profiles = tmp_path / "notebooks" / "profiles"  # the same relative paths
        shutil.copytree(run.PROFILES, profiles)
        (profiles / "math-full").mkdir(exist_ok=True)
        book = run.parameters_in(profiles / "math" / "03_win_condition.yaml")
        (profiles / "math-full" / "03_win_condition.yaml").write_text(
            f"n_samples: {2 * book['n_samples']}\n")
        monkeypatch.setattr(run, "PROFILES", profiles)
        fulls = _full_profiles()
        assert len(fulls) == 1
    for f in fulls:
        nb = REPO_ROOT / "notebooks" / f"{f.stem}.md"
        assert worldruns.worlds_of(nb) == ["math"], f
        sizes = worldruns.reduced_sizes(nb, "math")
        assert sizes and set(sizes) == set(run.parameters_in(f)), f
        assert not set(sizes) & {"world", "model", "draft", "large_model",
                                 "gen_length", "block_length", "threshold",
                                 "temperature", "K", "prompt_length"}, f
        for name, (book, full) in sizes.items():  # reduced, not changed
            assert isinstance(book, int) and book < full, (f, name)
        values = run.gather(run.declared_parameters(nb), files=[f],
                            pairs=[("world", "math")], notebook=nb)
        assert {k: values[k] for k in sizes} == {k: v for k, (_, v) in sizes.items()}
        note = worldruns.sizes_note(nb, "math")
        assert f"-p world math -f notebooks/profiles/math-full/{f.name}" in note
        assert all(f"{k} {b} (full: {v})" in note for k, (b, v) in sizes.items())


def test_a_page_without_a_full_profile_has_no_sizes_note():
    nb = REPO_ROOT / "notebooks" / "07_strong_model.md"
    assert worldruns.full_profile(nb, "math") is None
    assert worldruns.reduced_sizes(nb, "math") == {} and not worldruns.sizes_note(
        nb, "math")


def test_a_full_profile_may_only_name_the_profiles_sizes(tmp_path, monkeypatch):
    profiles = tmp_path / "profiles"
    (profiles / "math").mkdir(parents=True)
    (profiles / "math-full").mkdir()
    (profiles / "math" / "02_anchor_acceptance.yaml").write_text("n_samples: 8\n")
    (profiles / "math-full" / "02_anchor_acceptance.yaml").write_text("seed: 3\n")
    monkeypatch.setattr(run, "PROFILES", profiles)
    with pytest.raises(ValueError, match="'seed' is not in the math profile"):
        worldruns.reduced_sizes(NB, "math")
