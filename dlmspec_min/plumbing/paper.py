"""``make paper``: every notebook with its paper-scale profile, then a second book.

    python -m dlmspec_min.plumbing.paper [--overrides shrink.yaml] [--out _build/paper]

1. Every notebook's parameters are checked first (its profile
   ``notebooks/profiles/paper/NN_name.yaml``, then the overrides file, which
   applies to every notebook; names a notebook lacks are skipped), then what
   this machine cannot run (``preflight``: a device or dtype the GPUs it will
   get lack, a model's own code without ``trust_remote_code``, a model missing
   from the local Hugging Face cache), so a bad profile is one line and exit
   code 2 before the first run starts.
2. Each run that computes on a GPU gets GPUs of its own (``gpu_plan``:
   ``CUDA_VISIBLE_DEVICES``, one per run, a group for ``device_map: auto``); the
   preflight table (models, dtype, the profiles' ``estimate:`` of GPU memory
   and time, the GPUs each run gets and whether they hold that memory) is
   printed; ``--check`` stops there.
3. Each notebook executes through the runner (``python -m dlmspec_min.plumbing.run NB
   -f PROFILE -F OVERRIDES -o OUT/notebooks/NN_name.ipynb``), in its own process.
   With ``DLMSPEC_ALLOW_HUB=1`` the runs may download (the hub's offline switches
   that the Makefile sets are lifted for them); otherwise every model, judge and
   dataset must be on this machine. SIGINT or SIGTERM ends every run and
   kernel within seconds (``interrupts``).
4. A Jupyter Book (``book/paper/_config.yml``, ``_toc.yml``: execution off)
   renders the executed notebooks, with the formalization chapter and a landing
   page listing each run's parameters, into ``OUT/_build/html``.

The main book (``make book``) is not touched.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..decoding.denoisers import ALLOW_HUB_ENV
from ..paths import REPO_ROOT, cache_dir
from . import gpu_plan, interrupts, params, preflight, run
from . import gpus as gpu_info

NOTEBOOKS = REPO_ROOT / "notebooks"
PROFILES = NOTEBOOKS / "profiles" / "paper"
BOOK = REPO_ROOT / "book" / "paper"
OFFLINE_SWITCHES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


# numbered notebooks that the paper-scale run leaves out, and why
NOT_AT_PAPER_SCALE = {
    "10_seeds": "reruns C2, C3 and C6 at several seeds on the embedded models (its "
                "own reduced sizes); at paper scale that is three more 8B runs each",
    "11_regime": "its settings are generated worlds, each with a draft and target "
                 "trained on it; no paper model was trained on them",
}


def notebooks() -> list[Path]:
    """The notebooks ``make paper`` runs: every numbered one but NOT_AT_PAPER_SCALE."""
    return [nb for nb in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.md"))
            if nb.stem not in NOT_AT_PAPER_SCALE]


def profile_of(notebook: Path) -> Path:
    return PROFILES / f"{notebook.stem}.yaml"


@functools.cache
def declared(notebook: Path) -> dict[str, dict]:
    return params.notebook_parameters(notebook)


def check_all(overrides: Path | None) -> dict[str, dict]:
    """Every notebook's checked parameters; ``run.ParameterError`` naming it."""
    out = {}
    for nb in notebooks():
        profile = profile_of(nb)
        if not profile.exists():
            raise run.ParameterError(f"{nb.name} has no paper-scale profile {profile}")
        try:
            out[nb.stem] = run.gather(declared(nb), [profile],
                                      [overrides] if overrides else [])
        except run.ParameterError as e:
            raise run.ParameterError(f"{nb.name}: {e}") from None
    return out


def estimates() -> dict[str, dict | None]:
    """Each profile's ``estimate:`` (GPU memory and minutes), None where absent."""
    return {nb.stem: run.estimate_in(profile_of(nb)) for nb in notebooks()}


def with_defaults(values: dict[str, dict]) -> dict[str, dict]:
    """Each notebook's defaults overridden by its checked values: what it runs."""
    return {nb.stem: run.with_defaults(declared(nb), values[nb.stem])
            for nb in notebooks()}


def place(values: dict[str, dict], jobs: int, gpus: list) -> dict[str, int]:
    """GPUs per run (``gpu_plan.plan``), each run checked against the least
    capable GPUs it may get (``preflight``); ``run.ParameterError`` naming it."""
    try:
        needs = gpu_plan.plan(with_defaults(values), jobs, gpus)
    except ValueError as e:
        raise run.ParameterError(str(e)) from None
    for nb in notebooks():
        try:
            run.check_machine(declared(nb), values[nb.stem],
                              gpu_plan.least_capable(gpus, needs[nb.stem]))
        except run.ParameterError as e:
            raise run.ParameterError(f"{nb.name}: {e}") from None
    return needs


def landing_page(values: dict[str, dict], overrides: Path | None,
                 seconds: dict[str, float]) -> str:
    lines = [
        "# The paper-scale run",
        "",
        "Every notebook of the book, executed with its paper-scale profile "
        "(`notebooks/profiles/paper/`)"
        + (f" and the overrides `{overrides}`" if overrides else "")
        + " by `make paper`; these pages are the executed notebooks, not re-run.",
        "",
        "| notebook | parameters (where they differ from the book's) | run time (s) |",
        "|---|---|---|",
    ]
    for stem, v in values.items():
        shown = ", ".join(f"`{k}={v[k]!r}`" for k in v)
        lines.append(f"| {{doc}}`notebooks/{stem}` | {shown} | {seconds[stem]:.0f} |")
    return "\n".join(lines) + "\n"


def _run_env(gpus: list | None = None) -> dict[str, str]:
    """A run's environment; ``gpus``: the only GPUs it may see (None: as this
    process sees them)."""
    env = dict(os.environ)
    if env.get(ALLOW_HUB_ENV) == "1":
        for name in OFFLINE_SWITCHES:
            env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    if gpus:
        env[gpu_info.VISIBLE_ENV] = ",".join(g.id for g in gpus)
    return env


def _run_one(nb: Path, out: Path, overrides: Path | None, log: Path | None,
             gpus: list | None = None):
    """Execute one notebook through the runner (on ``gpus`` alone, if any);
    (return code, seconds)."""
    target = out / "notebooks" / f"{nb.stem}.ipynb"
    cmd = [sys.executable, "-m", "dlmspec_min.plumbing.run", str(nb), "-f",
           str(profile_of(nb)), "-o", str(target)]
    if overrides:
        cmd += ["-F", str(overrides)]
    env = _run_env(gpus)
    on = f"{gpu_info.VISIBLE_ENV}={env[gpu_info.VISIBLE_ENV]} " if gpus else ""
    print(f"== {on}{' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    if log is None:  # one at a time: the run's output streams through
        proc = subprocess.run(cmd, env=env, cwd=REPO_ROOT)
    else:
        with open(log, "w") as f:
            proc = subprocess.run(cmd, env=env, cwd=REPO_ROOT, stdout=f,
                                  stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t0
    print(f"== {nb.name}: {seconds:.1f} s"
          + (f" (exit code {proc.returncode})" if proc.returncode else ""),
          file=sys.stderr, flush=True)
    return proc.returncode, seconds


def execute(out: Path, overrides: Path | None, values: dict[str, dict],
            jobs: int = 1, needs: dict[str, int] | None = None,
            gpus: list | None = None) -> dict[str, float]:
    """Every notebook through the runner, ``jobs`` at a time (each in its own
    process; with more than one, each run's output goes to OUT/logs/NN_name.log
    and a failing run's tail is printed), each on ``needs[stem]`` of ``gpus``
    of its own (``place``; none: as this process sees them). The first failure
    stops the flow once the runs under way have ended."""
    import threading
    from concurrent.futures import ThreadPoolExecutor, as_completed

    logs = out / "logs"
    if jobs > 1:
        logs.mkdir(parents=True, exist_ok=True)
    seconds, failed = {}, []
    stop = threading.Event()  # set by a failing run before its worker takes another
    gpu_pool = gpu_plan.GpuPool(gpus or [])  # each run's GPUs, given back after it

    def run(nb: Path):
        if stop.is_set():  # nothing new starts after a failure
            return None
        taken = gpu_pool.take((needs or {}).get(nb.stem, 0))
        try:
            code, secs = _run_one(nb, out, overrides,
                                  logs / f"{nb.stem}.log" if jobs > 1 else None, taken)
        finally:
            gpu_pool.give_back(taken)
        if code:
            stop.set()
        return code, secs

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run, nb): nb for nb in notebooks()}
        for fut in as_completed(futures):
            if fut.result() is None:
                continue
            code, seconds[futures[fut].stem] = fut.result()
            if code and not failed:
                failed.append((futures[fut], code))
    if failed:
        nb, code = failed[0]
        if jobs > 1:
            tail = (logs / f"{nb.stem}.log").read_text()[-3000:]
            print(f"== {nb.name} failed; the end of {logs / nb.stem}.log:\n{tail}",
                  file=sys.stderr)
        raise SystemExit(code)
    return {nb.stem: seconds[nb.stem] for nb in notebooks()}  # in page order


def _main_book_only(text: str, values: dict[str, dict], folder: str = "book") -> str:
    """Links to pages this book lacks (the claims dashboard, the seed page)
    become plain text naming the main book's page; ``folder`` is where a
    relative link in ``text`` points (the formalization's ``book``, a page's
    ``notebooks``)."""
    here = {"book/formalization", *(f"notebooks/{stem}" for stem in values)}

    def link(m):
        title, target = m.group(1), m.group(2) or m.group(3)
        doc = target[1:] if target.startswith("/") else f"{folder}/{target}"
        if doc in here:
            return m.group(0)
        return f"{title.strip()} (`{doc}`, in the main book)" if title else \
            f"`{doc}` (in the main book)"

    return re.sub(r"\{doc\}`(?:([^`<>]+)<([^`<>]+)>|([^`<>]+))`", link, text)


def _unlink_missing(path: Path, values: dict[str, dict]) -> None:
    """``_main_book_only`` over an executed notebook's markdown cells."""
    import nbformat

    if not path.is_file():
        return
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            new = _main_book_only(cell.source, values, "notebooks")
            changed |= new != cell.source
            cell.source = new
    if changed:
        nbformat.write(nb, path)


def build_book(out: Path, overrides: Path | None, values, seconds) -> Path:
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(BOOK / name, out / name)
    shutil.copytree(BOOK / "_ext", out / "_ext", dirs_exist_ok=True)
    (out / "book").mkdir(exist_ok=True)
    text = (REPO_ROOT / "book" / "formalization.md").read_text()
    (out / "book" / "formalization.md").write_text(_main_book_only(text, values))
    for stem in values:  # the pages' own links to the dashboard and seed page
        _unlink_missing(out / "notebooks" / f"{stem}.ipynb", values)
    static = cache_dir() / "static"
    if static.is_dir():  # MathJax, fetched by `make data`
        shutil.copytree(static, out / "_static", dirs_exist_ok=True)
    else:
        (out / "_static").mkdir(exist_ok=True)
    (out / "index.md").write_text(landing_page(values, overrides, seconds))
    (out / "runs.json").write_text(json.dumps(
        {"overrides": str(overrides) if overrides else None, "parameters": values,
         "seconds": seconds}, indent=1, default=str))
    cli = "from jupyter_book.cli.main import main; main()"  # the jupyter-book command
    subprocess.run([sys.executable, "-c", cli, "build", str(out), "-W", "--keep-going"],
                   check=True,
                   cwd=REPO_ROOT)
    return out / "_build" / "html" / "index.html"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dlmspec_min.plumbing.paper",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--overrides", type=Path,
                    help="one more parameter file for every notebook (shrunk sizes)")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "_build" / "paper",
                    help="build folder (default _build/paper)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="notebooks executed at a time (default 1), each GPU run on "
                         "GPUs of its own")
    ap.add_argument("--check", action="store_true",
                    help="check every run against this machine, print the "
                         "preflight table, run nothing")
    a = ap.parse_args(argv)
    overrides = a.overrides.resolve() if a.overrides else None
    if a.jobs < 1:
        print(f"error: --jobs must be at least 1, not {a.jobs}", file=sys.stderr)
        return run.EXIT_BAD_PARAMETER
    try:
        values = check_all(overrides)
        full = with_defaults(values)
        gpus = (gpu_info.visible_gpus() if any(map(preflight.wants_gpu,
                                                   full.values())) else [])
        needs = place(values, a.jobs, gpus)
        shown = gpu_plan.table(full, estimates(), needs, gpus, a.jobs)
    except (run.ParameterError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return run.EXIT_BAD_PARAMETER
    print(f"== preflight (the profiles' estimates, never measured"
          f"{'; for their own sizes, before the overrides' if overrides else ''}):\n"
          f"{shown}", file=sys.stderr, flush=True)
    if a.check:
        return 0
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    seconds = execute(out, overrides, values, a.jobs, needs, gpus)
    index = build_book(out, overrides, values, seconds)
    print(f"== the paper-scale book is at file://{index}", file=sys.stderr)
    return 0


cli = interrupts.command(main)  # the command: SIGINT and SIGTERM end its work


if __name__ == "__main__":
    sys.exit(cli())
