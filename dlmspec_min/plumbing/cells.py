"""Each notebook's ``parameters`` cell, written from its page's ``Config``.

    python -m dlmspec_min.plumbing.cells          # rewrite every cell that differs
    python -m dlmspec_min.plumbing.cells --check  # exit 1 naming each that differs

A page's parameters are declared once, in its ``Config``
(``dlmspec_min.experiments.parameters``); papermill reads literal assignments, so
the cell is that declaration written out. Change a parameter in the Config and
run this; ``tests/test_cells.py`` fails while a cell and its Config differ.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
from pathlib import Path

from ..paths import REPO_ROOT

# where a page's Config may live: every experiment module, and the seed page's
PACKAGES = ("dlmspec_min.experiments",)
EXTRA = ("dlmspec_min.plumbing.seeds",)
CELL = re.compile(r"(```\{code-cell\}[^\n]*\n:tags: \[parameters\]\n\n)(.*?)(\n```)",
                  re.S)


def modules() -> list[str]:
    """Every module that may declare a page's ``Config`` (a new claim's experiment
    module is found without being listed)."""
    names = [f"{pkg}.{m.name}" for pkg in PACKAGES
             for m in pkgutil.iter_modules(importlib.import_module(pkg).__path__)]
    return sorted(names) + list(EXTRA)


def configs() -> dict[str, type]:
    """Notebook stem -> its page's Config class (a module's ``Config`` whose
    ``NOTEBOOK`` names the page)."""
    found: dict[str, type] = {}
    for name in modules():
        cls = getattr(importlib.import_module(name), "Config", None)
        if cls is None or not getattr(cls, "NOTEBOOK", ""):
            continue
        if cls.NOTEBOOK in found:
            raise ValueError(f"two Configs for {cls.NOTEBOOK}: {found[cls.NOTEBOOK]} "
                             f"and {cls}")
        found[cls.NOTEBOOK] = cls
    return found


def config_of(notebook: Path | str) -> type:
    """The Config of a notebook (a path or a stem); ValueError if it has none."""
    stem = Path(notebook).stem
    try:
        return configs()[stem]
    except KeyError:
        raise ValueError(f"{stem} has no Config (a Config with NOTEBOOK = {stem!r} "
                         "in an experiment module)") from None


def cell_in(text: str) -> str:
    """The body of a MyST notebook's one ``parameters`` cell."""
    found = CELL.findall(text)
    if len(found) != 1:
        raise ValueError(f"{len(found)} parameters cells (need exactly one, written "
                         "```{code-cell} ipython3 / :tags: [parameters] / blank line)")
    return found[0][1]


def written(text: str, cls: type) -> str:
    """``text`` with its parameters cell replaced by ``cls.cell()``."""
    cell_in(text)  # exactly one
    return CELL.sub(lambda m: m.group(1) + cls.cell() + m.group(3), text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 if a cell differs from its Config")
    args = ap.parse_args(argv)
    differ = []
    for stem, cls in configs().items():
        path = REPO_ROOT / "notebooks" / f"{stem}.md"
        text = path.read_text()
        new = written(text, cls)
        if new != text:
            differ.append(path.relative_to(REPO_ROOT))
            if not args.check:
                path.write_text(new)
    verb = "differ from their Config" if args.check else "rewritten"
    print(f"{len(differ)} parameters cell(s) {verb}"
          + "".join(f"\n  {p}" for p in differ))
    return 1 if (args.check and differ) else 0


if __name__ == "__main__":
    sys.exit(main())
