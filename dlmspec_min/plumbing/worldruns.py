"""The book measures every claim in each world (issue 26): a claim page executes
in the prose world, and the build runs the same notebook a second time in every
other world it has a profile for (``notebooks/profiles/<world>/<name>.yaml``).

A world run is the page's notebook with that world's parameters injected after
its ``parameters`` cell (papermill's ``parameterize_notebook``, what
``python -m dlmspec_min.plumbing.run NN.md -p world math`` gives). The build
executes it with the pages, in the same jupyter-cache (its key: the page's path,
``#``, the world) and writes it beside the page's own executed notebook, as
``jupyter_execute/notebooks/NN.<world>.ipynb``; ``claims.dashboard_rows`` reads
its glue under the claim's keys with the world's suffix (``c2_alpha_sid_math``).

A world whose models this build lacks (a ladder still training) is not run; the
build says which, and the claim page says why the world is not measured.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .. import catalogue
from ..paths import models_dir
from . import claims, params

SEPARATOR = "#"  # a world run's cache key: "<notebook path>#<world>"


@dataclass
class WorldRun:
    path: str  # the page's notebook
    world: str
    parameters: dict  # injected: those that differ from the page's defaults
    notebook: nbformat.NotebookNode | None  # None when models are missing
    missing: str  # the models this build lacks, in words ('' when none)

    @property
    def key(self) -> str:
        return f"{self.path}{SEPARATOR}{self.world}"


def models_missing(names) -> str:
    """Which of the project's own models among ``names`` (``dlmspec/...``) this
    build lacks, in words: 'dlmspec/math/large (not trained)', 'dlmspec/math/base
    (still training)' for a folder with a checkpoint only; '' when none."""
    out = []
    for name in dict.fromkeys(names):
        if not (isinstance(name, str) and name.startswith("dlmspec/")):
            continue
        folder = models_dir() / name.removeprefix("dlmspec/")
        if not (folder / "config.json").exists():
            state = ("still training" if (folder / "checkpoint.pt").exists()
                     else "not trained")
            out.append(f"{name} ({state})")
    return ", ".join(out)


def worlds_of(path: str | Path) -> list[str]:
    """The book's worlds other than the default (``catalogue.BOOK``) that a
    notebook is run in: all of them, where it takes a ``world`` parameter (a
    page without a ``parameters`` cell takes none)."""
    import jupytext

    from . import run

    cells = jupytext.read(Path(path)).cells
    if not any("parameters" in c.metadata.get("tags", []) for c in cells):
        return []
    if "world" not in run.declared_parameters(Path(path)):
        return []
    return [w for w in catalogue.BOOK if w != catalogue.DEFAULT]


FULL = "{world}-full"  # the folder of a world's full sizes, beside its profile


def full_profile(path: str | Path, world: str) -> Path | None:
    """The file of ``world``'s full sizes for a notebook
    (``notebooks/profiles/<world>-full/<name>.yaml``), where the book runs that
    world at reduced sizes; None where it runs the world's full sizes."""
    from . import run

    f = run.PROFILES / FULL.format(world=world) / f"{Path(path).stem}.yaml"
    return f if f.exists() else None


def reduced_sizes(path: str | Path, world: str) -> dict[str, tuple]:
    """name -> (the book's value, the full value) for each size ``world``'s
    profile reduces for the book (``full_profile``); {} where none."""
    from . import run

    full = full_profile(path, world)
    if full is None:
        return {}
    profile = run.world_profile(Path(path), world)
    book = run.parameters_in(profile) if profile.is_file() else {}
    out = {}
    for name, value in run.parameters_in(full).items():
        if name not in book:
            raise ValueError(f"{full}: {name!r} is not in the {world} profile "
                             f"{profile}")
        if book[name] != value:
            out[name] = (book[name], value)
    return out


def sizes_note(path: str | Path, world: str) -> str:
    """One line for a page: the sizes the book runs ``world`` at, where they are
    reduced, and how to run the full ones ('' where nothing is reduced)."""
    from . import run

    sizes = reduced_sizes(path, world)
    if not sizes:
        return ""
    listed = ", ".join(f"{k} {b} (full: {f})" for k, (b, f) in sizes.items())
    rel = full_profile(path, world).relative_to(run.PROFILES.parents[1])
    return (f"The book runs the {world} world at reduced sizes, to fit its "
            f"build's time budget: {listed}. The full sizes: "
            f"python -m dlmspec_min.plumbing.run notebooks/{Path(path).stem}.md "
            f"-p world {world} -f {rel}")


def run_sizes(path: str | Path, world: str, names) -> list:
    """The values of ``names`` (parameters of the notebook at ``path``) in the
    book's run of ``world``: the world's profile over the notebook's defaults."""
    import ast

    from . import run

    declared = run.declared_parameters(Path(path))
    values = run.gather(declared, pairs=[("world", world)], notebook=Path(path))
    return [values[n] if n in values else ast.literal_eval(declared[n]["default"])
            for n in names]


def claim_models(claim_ids, world: str) -> list:
    """The models the notebooks of ``claim_ids`` name when run in ``world`` (each
    with its world profile), and the world's own target and draft."""
    from ..worlds import get_world
    from . import run

    w = get_world(world)
    named = [w.target, w.draft]
    registry = claims.load_registry()
    for cid in claim_ids:
        source = run.REPO_ROOT / registry["claims"][cid]["notebook"]
        declared = run.declared_parameters(source)
        values = run.gather(declared, pairs=[("world", world)], notebook=source)
        named += [values.get(name) for name in params.MODELS if name in declared]
    return named


def world_run(path: str | Path, notebook: nbformat.NotebookNode,
              world: str) -> WorldRun:
    """The run of ``notebook`` (read from ``path``) in ``world``: its parameters
    (the world's profile, checked as ``run -p world <world>`` checks them) and the
    parameterized notebook, or none when the models are missing."""
    from papermill.parameterize import parameterize_notebook

    from . import run

    declared = run.declared_parameters(Path(path))
    defaults = run.with_defaults(declared, {})
    if world == defaults.get("world"):
        raise ValueError(f"{path}: {world!r} is its own world, not another one")
    values = run.gather(declared, pairs=[("world", world)], notebook=Path(path))
    injected = {k: v for k, v in values.items() if v != defaults.get(k)}
    named = [values.get(name) for name in params.MODELS if name in declared]
    if not named:  # a page that runs claim notebooks (the seed page): theirs
        named = claim_models(values.get("claims", []), world)
    missing = models_missing(named)
    nb = None
    if not missing:
        nb = copy.deepcopy(notebook)
        nb.metadata.setdefault("papermill", {})  # as papermill's reader leaves it
        for cell in nb.cells:
            cell.metadata.setdefault("tags", [])
        nb = parameterize_notebook(nb, injected,
                                   comment=f"Parameters: the {world} world's profile")
    return WorldRun(str(path), world, injected, nb, missing)


def world_runs(notebooks: dict[str, nbformat.NotebookNode]) -> list[WorldRun]:
    """Every world run of these notebooks (path -> notebook as myst-nb reads it)."""
    return [world_run(path, nb, world) for path, nb in notebooks.items()
            for world in worlds_of(path)]


def write_executed(cache_path: Path, runs: list[WorldRun], executed_of:
                   Callable[[str], Path | None],
                   log: Callable[[str], None] = print) -> list[WorldRun]:
    """Write each run's executed notebook from the cache beside its page's
    (``executed_of(path)``: the page's executed .ipynb, None to skip); remove a
    previous one where a run has no cache record (models missing, or it failed),
    so that no page reads another build's numbers. Returns the runs written."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_path))
    written = []
    for r in runs:
        page = executed_of(r.path)
        if page is None:
            continue
        out = claims.world_run_path(page, r.world)
        record = None
        if r.notebook is not None:
            try:
                record = cache.match_cache_notebook(r.notebook)
            except KeyError:
                record = None
        if record is None:
            out.unlink(missing_ok=True)
            reason = (f"its models are missing: {r.missing}" if r.missing
                      else "it did not run through")
            log(f"[worlds] {Path(r.path).stem} in the {r.world} world: not "
                f"measured in this build, {reason}")
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(cache.get_cache_bundle(record.pk).nb, out)
        written.append(r)
    return written
