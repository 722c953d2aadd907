"""Static checks of the book's configuration and notebook sources."""

import ast
import re
import subprocess
import tomllib
from pathlib import Path

import jupytext
import pytest
import yaml

from dlmspec_min.plumbing import bookbuild, claims

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pyproject_deps():
    """The core requirements and every extra's: what make installs (a package
    two extras need, accelerate, once)."""
    project = _pyproject()
    extras = project["optional-dependencies"].values()
    return sorted({*project["dependencies"], *(d for deps in extras for d in deps)})


def test_environment_yml_matches_pyproject():
    """environment.yml installs what make installs: the core, every extra of
    pyproject.toml, and the package itself with those extras."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    assert any(str(d).startswith("nodejs") for d in deps)
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    listed = sorted(p for p in pip if not p.startswith("-e "))
    assert listed == sorted(_pyproject_deps())
    extras = sorted(_pyproject()["optional-dependencies"])
    assert set(extras) == {"book", "paper", "dev"}
    editable = [p for p in pip if p.startswith("-e ")]
    assert len(editable) == 1, editable
    named = re.fullmatch(r"-e \.\[([a-z,]+)\]", editable[0])
    assert named and sorted(named.group(1).split(",")) == extras, editable[0]
    makefile = (ROOT / "Makefile").read_text()
    make_extras = re.search(r"^EXTRAS := (\S+)$", makefile, re.M)
    assert make_extras and sorted(make_extras.group(1).split(",")) == extras
    assert "-e '.[$(EXTRAS)]'" in makefile


def test_core_requirements_are_the_decoders():
    """pip install . gets the decoder's requirements only; the book's toolchain,
    the paper-scale packages and the test tools are extras."""
    core = {re.split(r"[=<>!~\[ ;]", d, maxsplit=1)[0].lower()
            for d in _pyproject()["dependencies"]}
    assert core == {"torch", "transformers", "tokenizers", "huggingface_hub",
                    "safetensors", "numpy"}


def test_key_packages_pinned_exactly():
    pins = {d.split("==")[0]: d.split("==")[1] for d in _pyproject_deps() if "==" in d}
    assert pins["jupyter-book"] == "1.0.4.post1"
    assert pins["torch"] == "2.13.0"
    for name in [
        "transformers",
        "jupytext",
        "papermill",
        "seaborn",
        "statsmodels",
        "datasets",
    ]:
        assert name in pins, f"{name} is not pinned"


def test_config_executes_with_cache_and_raises():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["execute"]["execute_notebooks"] == "cache"
    assert cfg["execute"]["raise_on_error"] is True
    assert cfg["execute"]["allow_errors"] is False
    assert cfg["execute"]["timeout"] >= 300
    assert cfg["only_build_toc_files"] is True
    for pattern in [".venv", "_build", "data", "tests", "dlmspec_min"]:
        assert pattern in cfg["exclude_patterns"]


def test_makefile_builds_with_warnings_as_errors():
    make = (ROOT / "Makefile").read_text()
    recipe = make[make.index("\nbook: data"):make.index("\n# The paper-scale run")]
    # one command on its recipe line, so that make's SIGTERM reaches the build
    assert re.search(r"\n\t\$\(PY\) -m dlmspec_min\.plumbing\.bookbuild \. -W "
                     r"--keep-going\n", recipe)
    assert "torch==2.13.0" in make
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert "set -eo pipefail" in (ROOT / ".ci" / "run").read_text()


def test_an_unfinished_build_is_not_taken_for_a_finished_one(tmp_path, monkeypatch):
    """`make book` stamps _build/.complete only after the build succeeded; without
    the stamp (an interrupted or failed build) the next one re-writes every page."""
    calls, codes = [], [1, 0, 0]

    def fake_run(cmd):
        calls.append(cmd[cmd.index("build"):])
        return subprocess.CompletedProcess(cmd, codes[len(calls) - 1])

    monkeypatch.setattr(bookbuild.subprocess, "run", fake_run)
    stamp = tmp_path / "_build" / ".complete"
    assert bookbuild.build(tmp_path, ["-W"]) == 1 and not stamp.exists()
    assert bookbuild.build(tmp_path, ["-W"]) == 0 and stamp.exists()
    assert bookbuild.build(tmp_path, ["-W"]) == 0 and stamp.exists()
    assert calls == [["build", str(tmp_path), "-W", "--all"]] * 2 + [
        ["build", str(tmp_path), "-W"]]
    assert "freshness: book/_ext" in (ROOT / "_config.yml").read_text()


def test_readme_shows_the_two_commands_first():
    text = (ROOT / "README.md").read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    commands = [
        line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()
    ]
    assert commands == ["make book", "make test"]


def _toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc["parts"]:
        files += [c["file"] for c in part["chapters"]]
    return files


def test_every_notebook_is_in_the_toc_and_every_toc_entry_exists():
    files = _toc_files()
    for nb in NOTEBOOKS:
        assert f"notebooks/{nb.stem}" in files, f"{nb.name} is not in _toc.yml"
    for f in files:
        assert (ROOT / f"{f}.md").exists(), f"_toc.yml names {f}, which does not exist"


def test_no_ipynb_tracked():
    tracked = subprocess.run(
        ["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert tracked.strip() == ""


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_one_literal_parameters_cell(path):
    nb = jupytext.read(path)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1
    tree = ast.parse(cells[0].source)
    assert tree.body, "empty parameters cell"
    for stmt in tree.body:
        assert isinstance(stmt, ast.AnnAssign), (
            f"not `name: type = value`: {ast.unparse(stmt)}"
        )
        ast.literal_eval(stmt.value)  # literal values only
    for line in cells[0].source.splitlines():
        if line.strip():
            assert "#" in line, f"parameter without help text: {line}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_validates_its_parameters_and_glues_no_typed_paper_figure(path):
    text = path.read_text()
    # a page with a Config builds it through validated (tests/test_cells.py); the
    # library's tutorial page checks its few parameters with validate_all
    assert "validated(Config, globals())" in text or "validate_all(" in text, (
        "the notebook must validate its parameters")
    assert "record_provenance()" in text, "the notebook must record its provenance"
    for fig in ["0.0035", "2.1x", "1.02x"]:
        for line in text.splitlines():
            if "record(" in line:
                assert fig not in line, (
                    f"a paper figure is recorded as a measurement: {line}"
                )


VISIBLE_CODE_LINES = 150  # a page reads like a paper section, not a script
HIDDEN_FROM_PAGE = {"remove-cell", "remove-input"}  # hide-input cells still show


def visible_code_lines(path: Path) -> int:
    """Non-blank code lines a reader of the rendered page can see (or unfold)."""
    nb = jupytext.read(path)
    return sum(
        sum(1 for line in c.source.splitlines() if line.strip())
        for c in nb.cells
        if c.cell_type == "code"
        and not HIDDEN_FROM_PAGE & set(c.metadata.get("tags", []))
    )


def test_visible_code_lines_are_counted_as_the_page_shows_them(tmp_path):
    nb = tmp_path / "nb.md"
    header = NOTEBOOKS[0].read_text().split("\n---\n", 1)[0] + "\n---\n\n"
    nb.write_text(
        header +
        "```{code-cell} ipython3\n:tags: [remove-cell]\nx = 1\ny = 2\n```\n\n"
        "```{code-cell} ipython3\n:tags: [hide-input]\nimport os\n\nz = 3\n```\n\n"
        "```{code-cell} ipython3\nprint(z)\n```\n"
    )
    assert visible_code_lines(nb) == 3  # the removed cell and the blank line do not


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_page_shows_at_most_its_budget_of_code(path):
    n = visible_code_lines(path)
    assert n <= VISIBLE_CODE_LINES, (
        f"{path.name} shows {n} code lines (budget {VISIBLE_CODE_LINES}): move the "
        "measurement into dlmspec_min/experiments/"
    )


def test_registry_is_complete_and_rules_use_registered_keys():
    reg = claims.load_registry()
    assert list(reg["claims"]) == [f"C{i}" for i in range(1, 9)]
    for cid, c in reg["claims"].items():
        for field in ["statement", "notebook", "paper", "headline", "keys", "rule"]:
            assert field in c, f"{cid} lacks {field}"
        assert set(c["headline"]) <= set(c["keys"])
        assert set(c.get("finding", [])) <= set(c["keys"]), f"{cid} finding"
        assert set(c["rule"]) <= set(reg["verdicts"])
        assert c.get("otherwise", claims.NOT_REPLICATED) in reg["verdicts"]
        assert claims.NOT_REBUILT not in c["rule"], f"{cid}: a rule names it"
        claims.check_rules(cid, reg)
        rules = [*c["rule"].values(), *c.get("secondary", {}).get("rule", {}).values()]
        names = {
            n.id
            for expr in rules
            for n in ast.walk(ast.parse(expr))
            if isinstance(n, ast.Name)
        }
        assert names <= set(c["keys"]), (
            f"{cid} rule uses unregistered {names - set(c['keys'])}"
        )
