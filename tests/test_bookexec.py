"""Notebooks executed several at a time ahead of Sphinx (plumbing/bookexec.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache
from myst_nb.core.read import read_myst_markdown_notebook
from test_provenance import CONFIG, PROBE, _copy_package

from dlmspec_min.plumbing import bookexec, claims

HEADER = PROBE.split("# Probe")[0]


def _notebook(body: str) -> str:
    cell = "```{code-cell} ipython3\n" + textwrap.dedent(body) + "```\n"
    return HEADER + "# A page\n\n" + cell


def test_jobs_come_from_the_environment_first_and_never_exceed_the_notebooks():
    assert bookexec.jobs_from(2, 5, env={}) == 2
    assert bookexec.jobs_from(2, 5, env={bookexec.JOBS_ENV: "1"}) == 1
    assert bookexec.jobs_from(8, 3, env={}) == 3
    assert bookexec.jobs_from(0, 99, env={}) == min(99, os.cpu_count() or 1)
    assert bookexec.jobs_from(0, 0, env={}) == 1
    for bad in ("two", -1, "1.5"):
        with pytest.raises(ValueError, match="integer|>= 0"):
            bookexec.jobs_from(bad, 3, env={})


def test_longest_first_and_the_never_timed_before_them():
    paths = ["00", "01", "02", "03"]
    assert bookexec.order(paths, {"00": 5.0, "02": 50.0}) == ["03", "01", "02", "00"]
    assert bookexec.order(paths, {}) == ["03", "02", "01", "00"]


def test_a_page_s_expected_seconds_order_a_build_that_timed_nothing():
    def page(seconds):
        front = "kernelspec:\n  name: python3\n  display_name: Python 3\n" + (
            "" if seconds is None else f"dlmspec:\n  expected_seconds: {seconds}\n")
        return read_myst_markdown_notebook(
            f"---\n{front}---\n\n# A page\n\n```{{code-cell}} ipython3\n1\n```\n")
    notebooks = {"00": page(5), "01": page(None), "02": page(50), "03": page(7.5)}
    hints = bookexec.expected_seconds(notebooks)
    assert hints == {"00": 5.0, "02": 50.0, "03": 7.5}
    assert bookexec.order(notebooks, hints) == ["01", "02", "03", "00"]
    # the last run's seconds win over the page's estimate
    assert bookexec.order(notebooks, {**hints, "00": 60.0}) == ["01", "00", "02", "03"]
    for bad in ("-1", "soon"):
        with pytest.raises(ValueError, match="expected_seconds"):
            bookexec.expected_seconds({"x": page(bad)})


def test_every_executed_page_of_the_book_states_its_expected_seconds():
    root = Path(__file__).resolve().parents[1]
    pages = [*sorted((root / "notebooks").glob("*.md")), root / "book" / "status.md"]
    notebooks = {str(p): read_myst_markdown_notebook(p.read_text()) for p in pages}
    assert len(notebooks) >= 12
    assert set(bookexec.expected_seconds(notebooks)) == set(notebooks)


def test_missing_notebooks_run_in_parallel_one_thread_each_and_are_cached(tmp_path):
    ok = {}
    for name in ("a", "b"):
        path = tmp_path / f"{name}.md"
        path.write_text(_notebook(f"""\
            import os
            print("{name}", os.environ.get("OMP_NUM_THREADS"))
            """))
        ok[str(path)] = read_myst_markdown_notebook(path.read_text(), path=str(path))
    bad = tmp_path / "bad.md"
    bad.write_text(_notebook('raise ValueError("this page breaks")\n'))
    notebooks = {**ok, str(bad): read_myst_markdown_notebook(bad.read_text())}
    cache_path = tmp_path / "cache"

    lines = []
    outcomes = bookexec.execute_missing(cache_path, notebooks, jobs=2, timeout=120,
                                        log=lines.append)
    assert sorted(o.path for o in outcomes) == sorted(notebooks)
    by_path = {o.path: o for o in outcomes}
    assert "this page breaks" in by_path[str(bad)].error
    # the build log says why, in one line (a CI log may show nothing else)
    (failed,) = [m for m in lines if m.startswith("[execute] bad:")]
    assert "FAILED" in failed and "ValueError: this page breaks" in failed
    cache = get_cache(str(cache_path))
    for path, nb in ok.items():
        assert by_path[path].error is None and by_path[path].seconds > 0
        _, merged = cache.merge_match_into_notebook(nb)  # the hash myst-nb matches
        (code,) = [c for c in merged.cells if c.cell_type == "code"]
        text = code.outputs[0]["text"]
        assert text == f"{Path(path).stem} 1\n"  # one thread in every kernel
    with pytest.raises(KeyError):  # a failure is left for myst-nb to report
        cache.match_cache_notebook(notebooks[str(bad)])
    assert bookexec.missing(cache, notebooks) == [str(bad)]
    assert set(bookexec.previous_seconds(cache)) == set(ok)
    rerun = bookexec.execute_missing(cache_path, ok, jobs=2, log=lambda m: None)
    assert rerun == []  # nothing executes twice


def test_a_book_of_two_pages_executes_both_ahead_and_reads_them_from_the_cache(
    tmp_path
):
    """The real pipeline: jupyter-book, myst-nb's own reader and cache hash."""
    clone = _copy_package(tmp_path / "clone")
    (clone / "_config.yml").write_text(
        CONFIG + "    executed_notebooks: book/_ext\n"
        "  config:\n    dlmspec_execution_jobs: 2\n")
    (clone / "_toc.yml").write_text(
        "format: jb-book\nroot: probe\nchapters:\n- file: second\n")
    (clone / "probe.md").write_text(PROBE)
    (clone / "second.md").write_text(PROBE.replace("# Probe", "# Second")
                                     .replace("probe_run", "second_run"))
    env = {**os.environ, "PYTHONPATH": str(clone)}
    env.pop(bookexec.JOBS_ENV, None)
    env.pop("DLMSPEC_DATA", None)
    jb = Path(sys.executable).parent / "jupyter-book"

    def build():
        proc = subprocess.run([str(jb), "build", str(clone)], env=env, text=True,
                              capture_output=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return proc.stdout

    log = build()
    assert "[execute] 2 notebook(s), 2 at a time" in log
    assert log.count("Using cached notebook") == 2, log[-3000:]
    assert "Executing notebook" not in log  # myst-nb executed nothing itself
    executed = clone / "_build" / "jupyter_execute"
    first = claims.read_glued(executed / "second.glue.json")["second_run"]
    # the download is the executed notebook: myst-nb saved the source, the
    # executed_notebooks extension merged the cached outputs back in
    assert not any(c.get("outputs") for c in
                   nbformat.read(executed / "second.ipynb", as_version=4).cells)
    download = nbformat.read(clone / "_build" / "html" / "_executed" / "second.ipynb",
                             as_version=4)
    assert [o for c in download.cells if c.cell_type == "code" for o in c.outputs]
    log = build()
    assert "[execute]" not in log  # an unchanged build executes nothing
    assert claims.read_glued(executed / "second.glue.json")["second_run"] == first


def test_a_failure_s_log_line_is_the_traceback_s_last_line_without_colours():
    tb = ("\x1b[0;31m---------\x1b[0m\nCell In[3], line 1\n\n"
          "\x1b[0;31mCellTimeoutError\x1b[0m: A cell timed out after 900 seconds\n\n")
    assert bookexec.last_line(tb) == ("CellTimeoutError: A cell timed out after 900 "
                                      "seconds")
    assert bookexec.last_line("") == "(no message)"


def test_the_book_s_cell_timeout_leaves_room_for_its_longest_cell_on_a_slow_machine():
    """The seed page's runs cell took 773 s on a 2-core machine with a core
    shared (2026-12-02), and a 900 s limit failed a slower CI machine's build:
    the limit catches a hang, not a slow machine."""
    import yaml

    config = yaml.safe_load((Path(__file__).parents[1] / "_config.yml").read_text())
    seeds = bookexec.expected_seconds({"10": read_myst_markdown_notebook(
        (Path(__file__).parents[1] / "notebooks" / "10_seeds.md").read_text())})["10"]
    assert config["execute"]["timeout"] >= 3 * seeds


def test_the_log_names_a_world_run_with_its_world():
    assert bookexec.label("/r/notebooks/02_anchor_acceptance.md") == (
        "02_anchor_acceptance")
    assert (bookexec.label("/r/notebooks/02_anchor_acceptance.md#math")
            == "02_anchor_acceptance#math")


def test_a_worker_waits_minutes_for_a_slow_kernel_not_nbclient_s_minute(monkeypatch):
    """CI (2026-12-04) lost a notebook to "Kernel didn't respond in 60 seconds"
    while pytest's workers loaded both cores; the worker now waits longer."""
    import jupyter_cache.executors.utils as jc_utils

    seen = {}
    monkeypatch.setattr(os, "environ", {**os.environ})  # the worker sets threads
    monkeypatch.setattr(jc_utils, "executenb",
                        lambda nb, **kwargs: seen.update(kwargs))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    _, _, error = bookexec._execute_one("probe.ipynb", nbformat.writes(nb), None)
    assert error is None
    assert seen["startup_timeout"] == bookexec.KERNEL_STARTUP_SECONDS >= 300
