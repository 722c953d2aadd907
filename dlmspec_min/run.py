"""Rerun one notebook of the book with new parameters.

    python -m dlmspec_min.run notebooks/02_anchor_acceptance.md -p n_samples 512
    python -m dlmspec_min.run notebooks/07_strong_model.md \
        -f notebooks/profiles/paper-scale.yaml
    python -m dlmspec_min.run notebooks/01_easy_first.md --help    # its parameters

The MyST text notebook is read with jupytext and executed with papermill into
``_build/papermill/<name>.ipynb`` (parameters injected after the ``parameters``
cell). Names and values are checked before anything runs: an unknown name or a
bad value is one line on stderr and exit code 2. The recorded claim values and
verdicts are printed at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from . import claims, params
from .paths import REPO_ROOT

OUT_DIR = REPO_ROOT / "_build" / "papermill"
EXIT_BAD_PARAMETER = 2


class ParameterError(ValueError):
    pass


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
        try:
            params.check(name, value)
        except ValueError as e:
            raise ParameterError(str(e)) from None
        out[name] = value
    return out


def describe(path: Path, notebook_params: dict[str, dict]) -> str:
    lines = [f"parameters of {path} (override with -p NAME VALUE or -f FILE.yaml):"]
    for name, p in notebook_params.items():
        lines.append(
            f"  {name:<18} {p.get('inferred_type_name') or '':<10} "
            f"default {p.get('default')}  {p.get('help') or ''}".rstrip()
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m dlmspec_min.run",
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
        help="YAML file of parameters (applied before -p)",
    )
    ap.add_argument("-o", "--output", type=Path, help="executed notebook path")
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
    if not a.notebook.exists():
        print(f"error: no notebook {a.notebook}", file=sys.stderr)
        return EXIT_BAD_PARAMETER
    try:
        declared = params.notebook_parameters(a.notebook)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_PARAMETER
    if a.help:
        ap.print_help()
        print("\n" + describe(a.notebook, declared))
        return 0
    given: dict[str, object] = {}
    for f in a.parameters_file:
        if not f.exists():
            print(f"error: no parameters file {f}", file=sys.stderr)
            return EXIT_BAD_PARAMETER
        given.update(yaml.safe_load(f.read_text()) or {})
    given.update(dict(a.parameter))
    try:
        values = resolve(declared, given)
    except ParameterError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_PARAMETER

    import jupytext
    import papermill

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # clean notebook output

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    source = OUT_DIR / f"{a.notebook.stem}.source.ipynb"
    jupytext.write(jupytext.read(a.notebook), source)
    output = a.output or OUT_DIR / f"{a.notebook.stem}.ipynb"
    print(
        f"executing {a.notebook} -> {output} with {values or 'the defaults'}",
        file=sys.stderr,
    )
    papermill.execute_notebook(
        str(source),
        str(output),
        parameters=values,
        kernel_name="python3",
        cwd=str(a.notebook.resolve().parent),
        log_output=True,
        progress_bar=False,
    )
    glued = claims.read_glued(output)
    for k, v in glued.items():
        print(f"{k} = {claims.format_value(v)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
