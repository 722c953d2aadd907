"""Execute a book's notebooks several at a time, one CPU thread each, before
Sphinx reads them.

myst-nb (``execute_notebooks: cache``) executes each notebook while Sphinx
reads its page, one after another, each on every core. Two things are better
done ahead of it. Speed: the book's small models gain little from a second
core (notebook 01 on 2 cores: 58 s on two threads, 89 s on one), so several
notebooks at a time on one thread each finish the book sooner. Digits: torch's
CPU reductions split differently under another thread count, and some recorded
values (those behind the SID head's L-BFGS fit) move in their third digit, so a
book executed on every core of one machine would not give another machine's
digits; executed on one thread each, it gives the same digits on any CPU.

This module fills the jupyter-cache that myst-nb reads: it reads each notebook
that the build is about to read exactly as myst-nb will (its own reader and
configuration, hence the same cache hash), executes those without a cache
record in a pool of processes with ``OMP_NUM_THREADS=1``, and adds them to the
cache. Sphinx then reads every page from the cache. A notebook that fails here
is left uncached, so myst-nb executes it again while reading and reports the
error as it always does (and ``raise_on_error`` fails the build).

An interrupt (SIGINT, SIGTERM) ends the workers and their kernels within
seconds and caches nothing half-written (``interrupts``): each notebook
executes off its worker's main thread, and a notebook is cached whole, only
once it ran through, so the next build executes exactly those that had not.

The freshness extension (``book/_ext/freshness.py``) calls ``execute_missing``
after it has dropped stale records. The number of notebooks at a time is the
Sphinx option ``dlmspec_execution_jobs`` (0: one per core), or the environment
variable ``DLMSPEC_EXECUTION_JOBS``, which wins.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import interrupts
from .worldruns import SEPARATOR  # a world run's key: '<path>#<world>'

JOBS_ENV = "DLMSPEC_EXECUTION_JOBS"
# How long a worker waits for its kernel to start. nbclient's default, 60 s, is
# too short on a loaded machine: the CI run of 2026-12-04 (pytest's workers
# building books beside each other on 2 cores) lost a notebook to "Kernel didn't
# respond in 60 seconds". A kernel that never starts still fails, later.
KERNEL_STARTUP_SECONDS = 600


def jobs_from(configured, n_notebooks: int, env: dict | None = None) -> int:
    """Notebooks at a time: the environment's value, else the configured one (0:
    one per core), never more than there are notebooks; ``ValueError`` if bad."""
    env = os.environ if env is None else env
    raw = env.get(JOBS_ENV, configured)
    try:
        jobs = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{JOBS_ENV} / dlmspec_execution_jobs must be an integer "
                         f">= 0 (0: one per core), not {raw!r}") from None
    if jobs < 0:
        raise ValueError(f"{JOBS_ENV} / dlmspec_execution_jobs must be >= 0 "
                         f"(0: one per core), not {jobs}")
    if jobs == 0:
        jobs = os.cpu_count() or 1
    return max(1, min(jobs, n_notebooks))


@dataclass
class Outcome:
    path: str
    seconds: float
    error: str | None  # the traceback's text, None when it ran through


def _execute_one(path: str, nb_json: str, timeout: int | None) -> tuple[str, float,
                                                                          str | None]:
    """Worker: execute one notebook in its folder; (executed JSON, seconds, error)."""
    from jupyter_cache.executors.utils import single_nb_execution

    from .run import kernel_environment

    kernel_environment()
    os.environ["OMP_NUM_THREADS"] = "1"  # the kernel inherits it
    os.environ["MKL_NUM_THREADS"] = "1"
    nb = nbformat.reads(nb_json, as_version=4)
    t0 = time.perf_counter()
    # off the main thread, where nbclient would replace the worker's handlers
    result = interrupts.in_thread(single_nb_execution, nb, cwd=str(Path(path).parent),
                                  timeout=timeout, allow_errors=False,
                                  meta_override=True,
                                  startup_timeout=KERNEL_STARTUP_SECONDS)
    seconds = time.perf_counter() - t0
    error = None if result.err is None else (result.exc_string or repr(result.err))
    return nbformat.writes(result.nb), seconds, error


def last_line(error: str) -> str:
    """The last non-empty line of a traceback (the exception and its message),
    without terminal colours: what a build log shows of a failed notebook."""
    lines = [ln for ln in re.sub(r"\x1b\[[0-9;]*m", "", error).splitlines()
             if ln.strip()]
    return lines[-1].strip() if lines else "(no message)"


def label(path: str) -> str:
    """A notebook's name in the log: its stem, and a world run's world after '#'
    (``worldruns``: '02_anchor_acceptance#math')."""
    source, sep, world = path.partition(SEPARATOR)
    return Path(source).stem + sep + world


def order(paths: Iterable[str], previous: dict[str, float]) -> list[str]:
    """Longest first by the last run's seconds (or a page's ``expected_seconds``),
    so that no long notebook starts last; notebooks with neither go first, in
    reverse page order (in this book the later pages run longest)."""
    paths = list(paths)
    unknown = [p for p in reversed(paths) if p not in previous]
    known = sorted((p for p in paths if p in previous), key=lambda p: -previous[p])
    return unknown + known


def expected_seconds(notebooks: dict[str, nbformat.NotebookNode]) -> dict[str, float]:
    """Each notebook's own estimate of its seconds on one thread, from its front
    matter (``dlmspec: expected_seconds: N``): what orders a build that has timed
    nothing yet, such as a fresh clone's."""
    out = {}
    for path, nb in notebooks.items():
        seconds = (nb.metadata.get("dlmspec") or {}).get("expected_seconds")
        if seconds is not None:
            if not isinstance(seconds, (int, float)) or seconds < 0:
                raise ValueError(f"{path}: dlmspec: expected_seconds must be a "
                                 f"number of seconds >= 0, not {seconds!r}")
            out[path] = float(seconds)
    return out


def previous_seconds(cache) -> dict[str, float]:
    """Each cached notebook's last execution time (seconds), by source path."""
    out = {}
    for rec in cache.list_cache_records():
        seconds = (rec.data or {}).get("execution_seconds")
        if seconds is not None:
            out[rec.uri] = float(seconds)
    return out


def missing(cache, notebooks: dict[str, nbformat.NotebookNode]) -> list[str]:
    """The paths whose notebook (as myst-nb reads it) has no cache record."""
    out = []
    for path, nb in notebooks.items():
        try:
            cache.match_cache_notebook(nb)
        except KeyError:
            out.append(path)
    return out


def execute_missing(cache_path: Path, notebooks: dict[str, nbformat.NotebookNode],
                    jobs: int, timeout: int | None = None,
                    previous: dict[str, float] | None = None,
                    log: Callable[[str], None] = print) -> list[Outcome]:
    """Execute, ``jobs`` at a time, each notebook without a cache record, and cache
    those that run through. ``notebooks`` maps source paths to the notebooks as
    myst-nb reads them; ``previous``: the last run's seconds by path, which win
    over a notebook's ``expected_seconds``. Returns what ran, in the order it
    finished."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(cache_path))
    todo = order(missing(cache, notebooks),
                 {**expected_seconds(notebooks), **(previous or {})})
    if not todo:
        return []
    log(f"[execute] {len(todo)} notebook(s), {jobs} at a time (one thread each): "
        + ", ".join(map(label, todo)))
    outcomes, t0 = [], time.perf_counter()
    with interrupts.installed(), ProcessPoolExecutor(
            max_workers=jobs, initializer=interrupts.install) as pool:
        futures = {pool.submit(_execute_one, p, nbformat.writes(notebooks[p]),
                               timeout): p for p in todo}
        for fut in as_completed(futures):
            path = futures[fut]
            try:
                executed, seconds, error = fut.result()
            except Exception as e:  # the worker itself broke (not the notebook)
                executed, seconds, error = None, 0.0, repr(e)
            if error is None:
                with interrupts.deferred():  # a cache entry is whole or absent
                    cache.cache_notebook_bundle(
                        CacheBundleIn(nbformat.reads(executed, as_version=4), path,
                                      data={"execution_seconds": seconds}),
                        check_validity=False, overwrite=True)
            outcomes.append(Outcome(path, seconds, error))
            # myst-nb reads (and so executes again) a page, never a world run
            again = "" if SEPARATOR in path else " (executed again while read)"
            status = ("ok" if error is None
                      else f"FAILED{again}: " + last_line(error))
            elapsed = time.perf_counter() - t0
            log(f"[execute] {label(path)}: {seconds:.0f} s, {status} "
                f"({len(outcomes)}/{len(todo)}, {elapsed:.0f} s in all)")
    return outcomes
