"""The fingerprint of what the numbers depend on, and the book's freshness check."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from dlmspec_min.plumbing import claims, provenance

ROOT = Path(__file__).resolve().parents[1]
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def _copy_package(dest: Path) -> Path:
    shutil.copytree(ROOT / "dlmspec_min", dest / "dlmspec_min", ignore=IGNORE)
    shutil.copytree(ROOT / "book" / "_ext", dest / "book" / "_ext", ignore=IGNORE)
    shutil.copy(ROOT / "book" / "claims.yml", dest / "book" / "claims.yml")
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_every_component_moves_the_fingerprint(tmp_path):
    root = _copy_package(tmp_path / "copy")
    models = tmp_path / "models"
    (models / "m").mkdir(parents=True)
    (models / "m" / "config.json").write_text("{}")
    base = provenance.components(root, models)
    assert set(base) == set(provenance.COMPONENTS)
    fp = provenance.fingerprint(root, models)
    assert len(fp) == provenance.SHORT and fp == provenance.fingerprint(root, models)

    def append_line(path: Path):
        with path.open("a") as f:
            f.write("#\n")
        now = provenance.components(root, models)
        moved = {k for k in now if now[k] != base[k]}
        return moved, provenance.fingerprint(root, models)

    parts, fp2 = append_line(root / "dlmspec_min" / "ssld" / "decoder.py")
    assert parts == {"code"} and fp2 != fp
    base = provenance.components(root, models)
    parts, fp3 = append_line(models / "m" / "config.json")
    assert parts == {"models"} and fp3 != fp2
    base = provenance.components(root, models)
    parts, _ = append_line(root / "book" / "claims.yml")
    assert parts == {"registry"}
    base = provenance.components(root, models)  # a training run in progress: not read
    parts, _ = append_line(models / "m" / "checkpoint.pt")
    assert parts == set()


def test_pinned_packages_are_read_from_pyproject():
    names = provenance.pinned_packages()
    for name in ["torch", "transformers", "jupyter-book", "papermill", "datasets"]:
        assert name in names
    assert "safetensors" not in names  # not pinned, not part of the fingerprint


def test_commit_names_head_or_says_unknown(tmp_path):
    head = provenance.commit()
    assert len(head.removesuffix("+dirty")) == 12
    assert provenance.commit(tmp_path).startswith("unknown")


def _glue_file(path: Path, values: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        k: {"output_type": "display_data",
            "metadata": {"scrapbook": {"name": k}},
            "data": {"text/plain": repr(v)}}
        for k, v in values.items()
    }))


def test_dashboard_shows_stale_for_another_fingerprint(tmp_path):
    reg = {
        "verdicts": ["replicated", "direction only", "not replicated"],
        "claims": {"C1": {
            "statement": "s", "notebook": "notebooks/01_easy_first.md", "paper": "p",
            "headline": ["x"], "keys": {"x": {"label": "x"}},
            "rule": {"replicated": "x > 1"},
        }},
    }
    glue = tmp_path / "notebooks" / "01_easy_first.glue.json"
    _glue_file(glue, {"x": 2, provenance.FINGERPRINT_KEY: "aaaa",
                      provenance.COMMIT_KEY: "c0ffee"})
    (row,) = claims.dashboard_rows(tmp_path, reg, fingerprint="aaaa")
    assert row["verdict"] == "replicated" and row["commit"] == "c0ffee"
    (row,) = claims.dashboard_rows(tmp_path, reg, fingerprint="bbbb")
    assert row["verdict"] == claims.STALE
    (row,) = claims.dashboard_rows(tmp_path, reg)  # no fingerprint: no check
    assert row["verdict"] == "replicated"


PROBE = textwrap.dedent("""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---

    # Probe

    ```{code-cell} ipython3
    import time

    from dlmspec_min.plumbing.claims import record
    from dlmspec_min.plumbing.provenance import record_provenance

    record_provenance()
    record("probe_run", time.time_ns())  # a new value on every execution
    ```
    """)
CONFIG = textwrap.dedent("""\
    title: probe
    only_build_toc_files: true
    exclude_patterns: [_build, dlmspec_min, book]
    execute:
      execute_notebooks: cache
      raise_on_error: true
    sphinx:
      local_extensions:
        freshness: book/_ext
    """)


def test_a_library_change_re_executes_the_book(tmp_path):
    """Build a copy twice (nothing re-executes), edit its library, build again."""
    clone = _copy_package(tmp_path / "clone")
    (clone / "_config.yml").write_text(CONFIG)
    (clone / "_toc.yml").write_text("format: jb-book\nroot: probe\n")
    (clone / "probe.md").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": str(clone)}
    env.pop("DLMSPEC_DATA", None)
    jb = Path(sys.executable).parent / "jupyter-book"
    glue = clone / "_build" / "jupyter_execute" / "probe.glue.json"

    def build():
        proc = subprocess.run([str(jb), "build", str(clone)], env=env, text=True,
                              capture_output=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return claims.read_glued(glue), proc.stdout

    first, _ = build()
    assert first[provenance.FINGERPRINT_KEY] == provenance.fingerprint(
        clone, clone / "data" / "models")
    again, _ = build()
    assert again["probe_run"] == first["probe_run"], "an unchanged build re-executed"

    with (clone / "dlmspec_min" / "ssld" / "decoder.py").open("a") as f:
        f.write("# one more line\n")
    after, log = build()
    assert after["probe_run"] != first["probe_run"], "the library change was ignored"
    assert after[provenance.FINGERPRINT_KEY] != first[provenance.FINGERPRINT_KEY]
    assert after[provenance.FINGERPRINT_KEY] == provenance.fingerprint(
        clone, clone / "data" / "models")
    assert "[freshness] 1 notebook(s) ran under another fingerprint" in log
