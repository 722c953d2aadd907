"""The package's folders name its architecture, and its imports have no cycle.

Every import of every module is read from its source (``ast``), the ones inside
functions included, so a lazy import cannot hide a cycle. Three rules:

(a) ``decoding/`` imports nothing from the rest of ``dlmspec_min`` (a reader who
    wants only the decoder copies that one folder);
(b) each folder imports only from the folders ``MAY_IMPORT`` names for it, and
    that folder graph has no cycle;
(c) no module imports, directly or through others, itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dlmspec_min import paths
from dlmspec_min.decoding import files

PACKAGE = Path(__file__).resolve().parents[1] / "dlmspec_min"
NAME = "dlmspec_min"

# Which folder may import which (a module at the package root is its own unit,
# named by its module: ``paths``, where the project's files live, ``catalogue``,
# the worlds' facts, and the
# package's ``__init__``).
MAY_IMPORT: dict[str, set[str]] = {
    "decoding": set(),
    "paths": set(),
    "catalogue": set(),  # the worlds' facts: imports nothing, read by everything above
    "texts": {"paths"},
    "training": {"decoding", "texts", "paths", "catalogue"},
    "measures": {"decoding", "texts", "training", "paths", "catalogue"},
    "worlds": {"decoding", "texts", "training", "measures", "paths", "catalogue"},
    "ssld": {"decoding", "texts", "training", "measures", "worlds", "paths",
             "catalogue"},
    "experiments": {"decoding", "texts", "training", "measures", "worlds", "ssld",
                    "paths", "catalogue"},
    "plumbing": {"decoding", "texts", "training", "measures", "worlds", "ssld",
                 "experiments", "paths", "catalogue"},
    "__init__": {"decoding"},
}
FOLDERS = ("decoding", "ssld", "measures", "texts", "training", "worlds",
           "experiments", "plumbing")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, package: Path = PACKAGE) -> set[str]:
    """The package modules ``path`` imports (anywhere in it), as dotted names.

    ``from X import y`` counts as importing ``X.y`` when that is a module of the
    package, else ``X``; relative imports are resolved against the file's place.
    """
    me = module_name(path, package)
    here = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    known = {module_name(p, package) for p in package.rglob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                found.add(sub if sub in known else mod)
    return {m for m in found if m == NAME or m.startswith(NAME + ".")}


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports (itself and the root left out)."""
    out = {}
    for p in sorted(package.rglob("*.py")):
        me = module_name(p, package)
        out[me] = {m for m in imports_of(p, package) if m not in (me, NAME)}
    return out


def unit_of(module: str) -> str:
    """The folder of a module, or a root module's own name."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def violations(edges: dict[str, set[str]]) -> list[str]:
    """Every import that crosses from one unit to another the table does not allow."""
    bad = []
    for mod, deps in sorted(edges.items()):
        for dep in sorted(deps):
            a, b = unit_of(mod), unit_of(dep)
            if a != b and b not in MAY_IMPORT.get(a, set()):
                bad.append(f"{mod} imports {dep} ({a} may not import {b})")
    return bad


def test_every_module_sits_in_a_named_folder_or_is_a_known_root_module():
    units = {unit_of(m) for m in graph()}
    assert units <= set(MAY_IMPORT), sorted(units - set(MAY_IMPORT))
    assert set(FOLDERS) <= units
    for folder in FOLDERS:
        assert (PACKAGE / folder / "__init__.py").exists()


def test_the_decoding_core_imports_nothing_from_the_rest():
    edges = graph()
    outside = sorted(f"{m} imports {d}" for m, deps in edges.items()
                     if unit_of(m) == "decoding" for d in deps
                     if unit_of(d) != "decoding")
    assert outside == []


def test_folders_import_only_what_the_table_allows_and_the_table_has_no_cycle():
    assert find_cycle(MAY_IMPORT) is None
    assert violations(graph()) == []


def test_no_module_imports_itself_through_others():
    assert find_cycle(graph()) is None


def test_the_core_finds_the_same_models_folder_as_the_package(monkeypatch, tmp_path):
    assert files.models_dir() == paths.models_dir()
    assert files.tokenizer_dir() == paths.models_dir() / "tokenizer"
    monkeypatch.setenv("DLMSPEC_DATA", str(tmp_path))
    assert files.models_dir() == paths.models_dir() == tmp_path / "models"


# --- the checks catch what they are meant to catch (planted violations) -----------


def _plant(tmp_path: Path, files_: dict[str, str]) -> Path:
    root = tmp_path / NAME
    for rel, text in {"__init__.py": "", **files_}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


@pytest.mark.parametrize("planted, rule", [
    # a lazy import from the core to measures
    ({"decoding/__init__.py": "", "decoding/decode.py":
      "def f():\n    from ..measures import stats\n",
      "measures/__init__.py": "", "measures/stats.py": ""}, "decoding"),
    # measures importing ssld (ssld sits above measures)
    ({"measures/__init__.py": "", "measures/order.py":
      "from dlmspec_min.ssld import decoder\n",
      "ssld/__init__.py": "", "ssld/decoder.py": ""}, "folders"),
])
def test_a_planted_folder_violation_is_caught(tmp_path, planted, rule):
    edges = graph(_plant(tmp_path, planted))
    assert violations(edges), edges


def test_a_planted_lazy_module_cycle_is_caught(tmp_path):
    root = _plant(tmp_path, {
        "ssld/__init__.py": "",
        "ssld/a.py": "from .b import x\n",
        "ssld/b.py": "x = 1\n\ndef f():\n    from . import a\n    return a\n",
    })
    cycle = find_cycle(graph(root))
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"dlmspec_min.ssld.a", "dlmspec_min.ssld.b"}


# --- the size of a measurement's steps (issue 54) -------------------------------------
MAX_PARAMETERS, MAX_LINES = 10, 100
MEASURING = ("experiments", "ssld", "measures")


def oversized(source: str) -> list[tuple[str, int, int]]:
    """(name, parameters, lines) of each function in ``source`` that takes more
    than ``MAX_PARAMETERS`` parameters (``self`` and ``cls`` not counted) or
    runs longer than ``MAX_LINES`` lines (decorators not counted)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        n = len(names) + (a.vararg is not None) + (a.kwarg is not None)
        n -= bool(names) and names[0] in ("self", "cls")
        lines = node.end_lineno - node.lineno + 1
        if n > MAX_PARAMETERS or lines > MAX_LINES:
            found.append((node.name, n, lines))
    return found


def test_no_measuring_function_takes_over_ten_parameters_or_a_hundred_lines():
    """A claim's measure reads as its protocol's steps, each a named function;
    helpers take the config objects they need, not a dozen of their fields."""
    found = {str(f.relative_to(PACKAGE)): bad for folder in MEASURING
             for f in sorted((PACKAGE / folder).glob("*.py"))
             if (bad := oversized(f.read_text()))}
    assert not found, found


def test_an_oversized_function_is_caught():
    many = "def f(" + ", ".join(f"a{i}" for i in range(11)) + "):\n    pass\n"
    long = "def g(self):\n" + "    x = 1\n" * 100
    ten = "def h(self, " + ", ".join(f"a{i}" for i in range(10)) + "):\n    pass\n"
    assert [b[0] for b in oversized(many + long + ten)] == ["f", "g"]
