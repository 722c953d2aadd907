"""Rerun one notebook of the book with new parameters.

    python -m dlmspec_min.plumbing.run notebooks/02_anchor_acceptance.md \
        -p n_samples 512
    python -m dlmspec_min.plumbing.run notebooks/07_strong_model.md \
        -f notebooks/profiles/paper/07_strong_model.yaml -f shrink.yaml
    python -m dlmspec_min.plumbing.run notebooks/01_easy_first.md \
        -F overrides-for-all.yaml
    python -m dlmspec_min.plumbing.run notebooks/01_easy_first.md --help  # parameters

The MyST text notebook is read with jupytext and executed with papermill into
``_build/papermill/<name>.ipynb`` (parameters injected after the ``parameters``
cell). Names, types and values are checked before anything runs: an unknown
name, a bad value, a malformed parameters file or an unreadable notebook is one
line on stderr and exit code 2, and so is what this machine cannot run (a
device or dtype it lacks, a model's own code without ``trust_remote_code``, a
model missing from the local Hugging Face cache: ``preflight``), before any
kernel starts. A profile's ``estimate:`` mapping (GPU memory and minutes, for
``make paper``'s preflight table) is data, not a parameter, and is skipped
here. ``-p world NAME`` (any world of ``dlmspec_min.catalogue`` but the
notebook's default) first applies that world's defaults, its models, prompts,
decode and K from the catalogue, and then its sizes for the notebook
(``notebooks/profiles/<profile>/<notebook>.yaml``, where there is one), beneath
every file and ``-p``. ``--print-parameters`` prints the checked parameters
as YAML instead of running (what ``papermill -f`` takes). Several ``-f`` files apply in
order (later ones win), then ``-F`` files, then ``-p``. A ``-F`` file is one set of
overrides for every notebook (``make paper``'s ``PAPER_OVERRIDES``): names this
notebook does not take are skipped, not refused. The notebook executes into a
``.partial`` file that is renamed only when every cell ran, so an interrupted or
failed run never leaves a file that passes for a finished one; SIGINT or
SIGTERM ends the kernel and whatever it started within seconds (``interrupts``).
The recorded claim values and verdicts are printed at the end.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import tempfile
from pathlib import Path

import yaml

from .. import catalogue
from ..paths import REPO_ROOT
from . import claims, interrupts, params, preflight
from .seeds import check_plan

OUT_DIR = REPO_ROOT / "_build" / "papermill"
PROFILES = REPO_ROOT / "notebooks" / "profiles"  # <world or paper>/<notebook>.yaml
EXIT_BAD_PARAMETER = 2
SEED_PLAN = ("claims", "seeds", "sizes")  # the seed page's parameters
ESTIMATE_KEY = "estimate"  # a profile's resource estimate: data, not a parameter
ESTIMATE_FIELDS = ("gpu_memory_gb", "minutes")
# tqdm.auto, which huggingface_hub imports, warns in a kernel without ipywidgets
# ("IProgress not found"); no page draws a progress bar, so kernels ignore it
QUIET_WARNINGS = "ignore:IProgress not found"


def kernel_environment(environ=os.environ) -> None:
    """Set what every notebook kernel the book starts inherits: no Hugging Face
    progress bars, and no tqdm warning about ipywidgets (``QUIET_WARNINGS``
    added to ``PYTHONWARNINGS``, a reader's own filters kept before it)."""
    environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    given = environ.get("PYTHONWARNINGS", "")
    if QUIET_WARNINGS not in given.split(","):
        environ["PYTHONWARNINGS"] = ",".join(filter(None, [given, QUIET_WARNINGS]))



class ParameterError(ValueError):
    pass


# what a declared type accepts when the value is not a command-line string
_ACCEPTS = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "list": (list,),
    "dict": (dict,),
}


def _check_type(name: str, value: object, type_name: str | None) -> None:
    accepts = _ACCEPTS.get(type_name or "")
    if accepts is None:
        return
    wrong_bool = isinstance(value, bool) and bool not in accepts
    if wrong_bool or not isinstance(value, accepts):
        raise ParameterError(
            f"parameter {name}: {value!r} is a {type(value).__name__}, but the "
            f"notebook declares {type_name}"
        )


def read_parameters_file(path: Path) -> dict[str, object]:
    """A YAML mapping of parameter names to values; ``ParameterError`` otherwise."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ParameterError(f"cannot read parameters file {path}: {e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise ParameterError(
            f"parameters file {path} is not valid YAML{at}: {problem}"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ParameterError(
            f"parameters file {path} must be a mapping of parameter names to values "
            f"(`name: value` lines), not a {type(data).__name__}"
        )
    return data


def check_estimate(value: object, path: Path) -> dict[str, float]:
    """A profile's ``estimate:`` mapping: ``gpu_memory_gb`` and ``minutes``,
    numbers > 0 (``make paper``'s preflight table); ``ParameterError`` otherwise."""
    ok = (isinstance(value, dict) and sorted(value) == sorted(ESTIMATE_FIELDS)
          and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                  for v in value.values()))
    if not ok:
        raise ParameterError(
            f"parameters file {path}: {ESTIMATE_KEY} must map "
            f"{' and '.join(ESTIMATE_FIELDS)} to numbers > 0, not {value!r}")
    return value


def parameters_in(path: Path) -> dict[str, object]:
    """The parameters a file sets: its mapping less a (checked) ``estimate``."""
    data = read_parameters_file(path)
    if ESTIMATE_KEY in data:
        check_estimate(data.pop(ESTIMATE_KEY), path)
    return data


def estimate_in(path: Path) -> dict[str, float] | None:
    """A profile's checked ``estimate:`` mapping, None if it has none."""
    data = read_parameters_file(path)
    return check_estimate(data[ESTIMATE_KEY], path) if ESTIMATE_KEY in data else None


def resolve(
    notebook_params: dict[str, dict], given: dict[str, object]
) -> dict[str, object]:
    """Coerce and validate ``given`` against the notebook's declared parameters."""
    out = {}
    for name, value in given.items():
        if name not in notebook_params:
            allowed = ", ".join(sorted(notebook_params))
            raise ParameterError(
                f"unknown parameter {name!r}; this notebook takes: {allowed}"
            )
        type_name = notebook_params[name].get("inferred_type_name")
        try:
            value = params.coerce(value, type_name)
        except (ValueError, SyntaxError) as e:
            raise ParameterError(
                f"parameter {name}: cannot read {value!r} as {type_name} ({e})"
            ) from None
        _check_type(name, value, type_name)
        try:
            params.check(name, value)
        except ValueError as e:
            raise ParameterError(str(e)) from None
        out[name] = value
    return out


def with_defaults(notebook_params: dict[str, dict], values: dict[str, object]) -> dict:
    """The notebook's defaults overridden by ``values``: what the run will use."""
    out = {}
    for name, p in notebook_params.items():
        try:
            out[name] = ast.literal_eval(str(p.get("default")))
        except (ValueError, SyntaxError):
            out[name] = p.get("default")
    return {**out, **values}


def check_relations(notebook_params: dict[str, dict], values: dict[str, object]):
    """The constraints between parameters, on the defaults overridden by ``values``."""
    merged = with_defaults(notebook_params, values)
    try:
        params.check_relations(merged)
    except ValueError as e:
        raise ParameterError(str(e)) from None
    if all(n in merged for n in SEED_PLAN):  # the seed page: each run, by this runner
        try:
            prepare_runs(*(merged[n] for n in SEED_PLAN), claims.load_registry(),
                         world=_other_world(merged))
        except ValueError as e:
            raise ParameterError(f"parameters {', '.join(SEED_PLAN)}: {e}") from None


def _other_world(merged: dict[str, object]) -> str | None:
    """The seed page's world where it is not the default (its runs take it)."""
    world = merged.get("world")
    return None if world in (None, catalogue.DEFAULT) else str(world)


def check_machine(notebook_params: dict[str, dict], values: dict[str, object],
                  gpus=None, env=None):
    """What this machine cannot run (``preflight.check``: device, dtype, remote
    code, the local model cache), on the defaults overridden by ``values``;
    ``gpus``: the GPUs the run will see (default: the visible ones)."""
    merged = with_defaults(notebook_params, values)
    try:
        preflight.check(merged, gpus, env)
    except ValueError as e:
        raise ParameterError(str(e)) from None
    if all(n in merged for n in SEED_PLAN):  # the seed page: each of its runs too
        for c, s, _, run_values in prepare_runs(
                *(merged[n] for n in SEED_PLAN), claims.load_registry(),
                world=_other_world(merged)):
            try:
                preflight.check(run_values, gpus, env)
            except ValueError as e:
                raise ParameterError(f"the seed page's run of {c} at seed {s}: {e}"
                                     ) from None


def world_profile(notebook: Path, world: str) -> Path:
    """The file that holds ``world``'s sizes for ``notebook`` (what differs from
    the world's defaults and the notebook's own): ``notebooks/profiles/<the
    entry's profile>/<notebook's name>.yaml``; it may not exist."""
    entry = catalogue.get(world)
    return PROFILES / (entry.profile or entry.name) / f"{Path(notebook).stem}.yaml"


def world_defaults(declared: dict[str, dict], world: str,
                   notebook: Path | None = None) -> dict[str, object]:
    """What ``-p world NAME`` brings: the world's defaults from the catalogue
    (``Entry.defaults``: its models, prompts, decode and K) for the names the
    notebook declares, then its profile's sizes for ``notebook`` where it has
    one; ``ParameterError`` for a world the catalogue lacks."""
    try:
        entry = catalogue.get(world)
    except ValueError:
        try:  # the parameter rule's message
            params.check("world", world)
        except ValueError as e:
            raise ParameterError(str(e)) from None
        raise
    out = {k: v for k, v in entry.defaults.items() if k in declared}
    if notebook is not None and world_profile(notebook, world).is_file():
        out.update(parameters_in(world_profile(notebook, world)))
    return out


def gather(declared: dict[str, dict], files=(), shared_files=(), pairs=(),
           notebook: Path | None = None):
    """The checked values of ``-f`` files (in order), ``-F`` files (names the
    notebook lacks skipped), then ``-p`` pairs; ``ParameterError`` on any problem.

    A ``world`` other than the notebook's default brings that world's defaults
    (``world_defaults``: the catalogue's entry, then the world's sizes for
    ``notebook``) beneath all of them, so ``-p world math`` alone measures the
    math world."""
    given: dict[str, object] = {}
    for f in [*files, *shared_files]:
        if not Path(f).exists():
            raise ParameterError(f"no parameters file {f}")
    for f in files:
        given.update(parameters_in(f))
    for f in shared_files:
        shared = parameters_in(f)
        given.update({k: v for k, v in shared.items() if k in declared})
    given.update(dict(pairs))
    world = given.get("world")
    if ("world" in declared and world is not None
            and world != with_defaults(declared, {})["world"]):
        given = {**world_defaults(declared, world, notebook), **given}
    values = resolve(declared, given)
    check_relations(declared, values)
    return values


def describe(path: Path, notebook_params: dict[str, dict]) -> str:
    lines = [f"parameters of {path} (override with -p NAME VALUE or -f FILE.yaml):"]
    for name, p in notebook_params.items():
        lines.append(
            f"  {name:<18} {p.get('inferred_type_name') or '':<10} "
            f"default {p.get('default')}  {p.get('help') or ''}".rstrip()
        )
    if "world" in notebook_params:  # the catalogue's worlds, named here, not in cells
        lines.append("worlds (-p world NAME; dlmspec_min/catalogue.py):")
        lines += [f"  {e.name:<18} {e.title}" for e in catalogue.ENTRIES]
    return "\n".join(lines)


class RunError(RuntimeError):
    pass


def declared_parameters(notebook: Path) -> dict[str, dict]:
    """The notebook's parameters cell; ``ParameterError`` if it cannot be read."""
    try:
        return params.notebook_parameters(notebook)
    except Exception as e:  # jupytext/nbformat raise many kinds on a bad file
        reason = " ".join(str(e).split())[:300] or type(e).__name__
        if str(notebook) not in reason:
            reason = f"cannot read notebook {notebook}: {reason}"
        raise ParameterError(reason) from None


def prepare(notebook: Path, given: dict[str, object]) -> dict[str, object]:
    """``given`` checked against ``notebook``'s parameters cell (names, types,
    values, relations); ``ParameterError`` (one line) otherwise."""
    declared = declared_parameters(notebook)
    values = resolve(declared, given)
    check_relations(declared, values)
    return values


def prepare_runs(claim_ids: list, seeds: list, sizes: dict, registry: dict,
                 world: str | None = None) -> list:
    """Every run of the plan as (claim, seed, notebook path, checked parameters),
    checked by the runner before any executes; one-line ``ValueError`` otherwise.
    ``world`` other than a notebook's default brings that world's profile beneath
    the sizes, as ``-p world`` does (``gather``)."""
    check_plan(claim_ids, seeds, sizes, registry)
    plan = []
    for c in claim_ids:
        notebook = REPO_ROOT / registry["claims"][c]["notebook"]
        for s in seeds:
            given = {**sizes[c], "seed": s, **({"world": world} if world else {})}
            if "sequential" in declared_parameters(notebook):
                # one look at the reduced sizes: the sequential rule of a world's
                # profile is the full-size page's, never the seed page's reruns
                given.setdefault("sequential", False)
            try:
                values = gather(declared_parameters(notebook), pairs=given.items(),
                                notebook=notebook)
            except ParameterError as e:
                raise ValueError(f"sizes of {c} ({notebook.name}): {e}") from None
            plan.append((c, s, notebook, values))
    return plan


def execute(notebook: Path, values: dict[str, object], output: Path | None = None,
            log_output: bool = True, announce: bool = True) -> Path:
    """Execute ``notebook`` with ``values`` (already checked, see ``prepare``) into
    ``output`` (default ``_build/papermill/<name>.ipynb``) and return that path.

    The run writes ``<output stem>.partial.ipynb`` and renames it only once every
    cell ran; a failing cell raises ``RunError`` naming the cell and the partial
    file. ``log_output`` streams the notebook's own output to this process's;
    ``announce`` prints what runs where (stderr) first.
    """
    import jupytext
    import papermill

    kernel_environment()  # clean notebook output

    notebook = Path(notebook)
    output = Path(output) if output else OUT_DIR / f"{notebook.stem}.ipynb"
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f"{output.stem}.partial{output.suffix}")
    if announce:
        print(f"executing {notebook} -> {output} with {values or 'the defaults'}",
              file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp, interrupts.scratch(tmp):
        source = Path(tmp) / f"{notebook.stem}.ipynb"
        jupytext.write(jupytext.read(notebook), source)
        try:
            papermill.execute_notebook(
                str(source),
                str(partial),
                parameters=values,
                kernel_name="python3",
                cwd=str(notebook.resolve().parent),
                log_output=log_output,
                progress_bar=False,
            )
        except papermill.PapermillExecutionError as e:
            raise RunError(f"{notebook} failed in cell {e.exec_count}: {e.ename}: "
                           f"{e.evalue} (the partial run is {partial})") from None
    os.replace(partial, output)
    return output


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m dlmspec_min.plumbing.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    ap.add_argument("notebook", nargs="?", type=Path)
    ap.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="set one parameter",
    )
    ap.add_argument(
        "-f",
        "--parameters-file",
        type=Path,
        action="append",
        default=[],
        help="YAML file of parameters (several: later ones win; applied before -p)",
    )
    ap.add_argument(
        "-F",
        "--shared-parameters-file",
        type=Path,
        action="append",
        default=[],
        help="YAML file of parameters for many notebooks: names this notebook does "
        "not take are skipped (applied after -f, before -p)",
    )
    ap.add_argument("-o", "--output", type=Path, help="executed notebook path")
    ap.add_argument(
        "--print-parameters",
        action="store_true",
        help="print the checked parameters that differ from the notebook's "
        "defaults as YAML and stop (papermill: -f that file; e.g. a world's "
        "defaults and sizes with -p world NAME)",
    )
    ap.add_argument(
        "-h",
        "--help",
        action="store_true",
        help="show help (and the notebook's parameters)",
    )
    a = ap.parse_args(argv)
    if a.notebook is None:
        ap.print_help()
        return 0 if a.help else EXIT_BAD_PARAMETER
    if not a.notebook.is_file():
        print(f"error: no notebook {a.notebook}", file=sys.stderr)
        return EXIT_BAD_PARAMETER
    try:
        declared = declared_parameters(a.notebook)
    except ParameterError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_PARAMETER
    if a.help:
        ap.print_help()
        print("\n" + describe(a.notebook, declared))
        return 0
    try:
        values = gather(declared, a.parameters_file, a.shared_parameters_file,
                        a.parameter, notebook=a.notebook)
        check_machine(declared, values)
    except ParameterError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_PARAMETER
    if a.print_parameters:
        defaults = with_defaults(declared, {})
        print(yaml.safe_dump({k: v for k, v in values.items() if v != defaults.get(k)},
                             sort_keys=False), end="")
        return 0
    try:  # off the main thread, where nbclient would replace those handlers
        output = interrupts.in_thread(execute, a.notebook, values, a.output)
    except RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    glued = claims.read_glued(output)
    for k, v in glued.items():
        print(f"{k} = {claims.format_value(v)}")
    return 0


cli = interrupts.command(main)  # the command: SIGINT and SIGTERM end its work


if __name__ == "__main__":
    sys.exit(cli())
