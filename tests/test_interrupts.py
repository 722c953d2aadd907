"""Interrupts leave nothing behind (plumbing/interrupts.py).

SIGTERM to ``make book`` (as a CI timeout or ``kill`` sends it) or SIGINT to
its whole process group (Ctrl-C) ends every process the build started within
5 s, caches nothing half-written, and the next build executes exactly the
pages that had not finished. The same for the runner and ``make paper``. Each
test tags the processes it starts with an environment variable that every
descendant inherits (kernels included) and looks for the tag in /proc, so a
process that escaped its parent is found too.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from contextlib import closing
from pathlib import Path

import pytest
from jupyter_cache.cache.db import DB_NAME
from test_provenance import CONFIG, PROBE, _copy_package

from dlmspec_min.plumbing import interrupts

ROOT = Path(__file__).resolve().parents[1]
TAG_ENV = "DLMSPEC_INTERRUPT_TEST"
SLEEP_ENV = "DLMSPEC_TEST_PAGE_SLEEP"
LIMIT_SECONDS = 5  # the bound, from the signal to the last process gone
STARTUP_SECONDS = 240  # generous: a loaded 2-core machine starts kernels slowly

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(),
                                reason="finds the processes through /proc")


def tagged(tag: str) -> list[int]:
    """The living processes whose environment carries ``tag``."""
    needle = f"{TAG_ENV}={tag}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and interrupts.alive(int(entry)):
            try:
                environ = Path("/proc", entry, "environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                out.append(int(entry))
    return out


def kernels(pids: list[int]) -> list[int]:
    def cmdline(pid):
        try:
            return Path("/proc", str(pid), "cmdline").read_bytes()
        except OSError:
            return b""
    return [p for p in pids if b"ipykernel" in cmdline(p)]


def wait_until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def seconds_until_none_left(tag: str) -> float:
    """Seconds until no tagged process remains (fails past twice the limit)."""
    t0 = time.monotonic()
    while tagged(tag) and time.monotonic() - t0 < 2 * LIMIT_SECONDS:
        time.sleep(0.05)
    left = tagged(tag)
    assert not left, f"still running after {2 * LIMIT_SECONDS} s: {left}"
    return time.monotonic() - t0


def kill_left(tag: str):
    """After a failure: SIGKILL whatever the test started that still runs."""
    for pid in tagged(tag):
        os.kill(pid, signal.SIGKILL)


def interrupt(proc: subprocess.Popen, how: str):
    if how == "group":  # Ctrl-C: SIGINT to the foreground process group
        os.killpg(proc.pid, signal.SIGINT)
    else:  # a CI timeout or a scheduler: SIGTERM to the process it started
        proc.send_signal(signal.SIGTERM)


def page(title: str, sleeps: bool) -> str:
    """A probe page; ``sleeps``: its cell sleeps for $DLMSPEC_TEST_PAGE_SLEEP s."""
    text = PROBE.replace("# Probe", f"# {title}").replace(  # its own cache key
        "import time\n", f"import time  # {title}\n")
    if sleeps:
        sleep = f"import os\ntime.sleep(float(os.environ['{SLEEP_ENV}']))\n"
        text = text.replace("record_provenance()\n", "record_provenance()\n" + sleep)
    return text


def tiny_book(clone: Path) -> Path:
    """A book of one quick page and two slow ones, with this project's Makefile."""
    _copy_package(clone)
    shutil.copy(ROOT / "Makefile", clone / "Makefile")
    (clone / "_config.yml").write_text(CONFIG)
    (clone / "_toc.yml").write_text(
        "format: jb-book\nroot: quick\nchapters:\n- file: slow_a\n- file: slow_b\n")
    (clone / "quick.md").write_text(page("Quick", sleeps=False))
    for name in ("slow_a", "slow_b"):
        (clone / f"{name}.md").write_text(page(name, sleeps=True))
    return clone


def book_env(clone: Path, tag: str, sleep: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(clone), "DLMSPEC_EXECUTION_JOBS": "3",
           TAG_ENV: tag, SLEEP_ENV: str(sleep), "OMP_NUM_THREADS": "1"}
    env.pop("DLMSPEC_DATA", None)
    return env


def make_book(clone: Path, env: dict, log: Path, **kw) -> subprocess.Popen:
    with open(log, "w") as f:
        return subprocess.Popen(["make", "-o", "data", "book", f"PY={sys.executable}"],
                                cwd=clone, env=env, stdout=f,
                                stderr=subprocess.STDOUT, **kw)


def cached_pages(clone: Path) -> list[str]:
    """The pages the build's jupyter-cache holds, read without writing: opening it
    with ``get_cache`` would create the database (and its tables) while the build
    creates them too, and the build then fails on a table that exists."""
    db = clone / "_build" / ".jupyter_cache" / DB_NAME
    if not db.exists():
        return []
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            uris = [row[0] for row in con.execute("SELECT uri FROM nbcache")]
    except sqlite3.OperationalError:  # the build is creating it: no table yet
        return []
    return sorted(Path(u).stem for u in uris)


def running(proc: subprocess.Popen, log: Path, condition):
    """``condition``, failing at once (with the log's end) if ``proc`` ended first."""
    def check():
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode} before the wait "
                                 f"ended: {log.read_text()[-2000:]}")
        return condition()
    return check


def interrupted_build(tmp_path: Path, how: str) -> tuple[Path, str]:
    """Start ``make book`` on the tiny book, interrupt it (``how``) once the quick
    page is cached and the slow pages' kernels run, and check that every process
    it started is gone within the limit and nothing but the quick page is cached.
    Returns the book's folder and the processes' tag."""
    clone = tiny_book(tmp_path / "clone")
    tag = uuid.uuid4().hex
    log = tmp_path / "first.log"
    make = make_book(clone, book_env(clone, tag, sleep=600), log,
                     start_new_session=True)
    try:
        wait_until(running(make, log, lambda: cached_pages(clone) == ["quick"]),
                   STARTUP_SECONDS, "the quick page to be cached")
        wait_until(running(make, log, lambda: len(kernels(tagged(tag))) == 2),
                   STARTUP_SECONDS, "the two slow pages' kernels")
        before = tagged(tag)
        interrupt(make, how)
        elapsed = seconds_until_none_left(tag)
    finally:
        kill_left(tag)
    assert make.wait(10) != 0
    assert elapsed <= LIMIT_SECONDS, f"{len(before)} processes took {elapsed:.1f} s"
    print(f"{how}: {len(before)} processes gone {elapsed:.2f} s after the signal")
    log = (tmp_path / "first.log").read_text()
    assert "ended" in log, log[-2000:]  # the build's own account of the interrupt
    assert not (clone / "_build" / ".complete").exists()
    assert cached_pages(clone) == ["quick"]  # nothing half-written beside it
    return clone, tag


def test_sigterm_to_make_book_leaves_nothing_and_the_next_build_resumes(tmp_path):
    clone, tag = interrupted_build(tmp_path, "make")
    rebuild = subprocess.run(["make", "-o", "data", "book", f"PY={sys.executable}"],
                             cwd=clone, env=book_env(clone, tag, sleep=0), text=True,
                             capture_output=True, timeout=600)
    assert rebuild.returncode == 0, rebuild.stdout[-3000:] + rebuild.stderr[-3000:]
    (executed,) = re.findall(r"\[execute\] \d+ notebook\(s\), .*: (.*)",
                             rebuild.stdout)
    assert sorted(executed.split(", ")) == ["slow_a", "slow_b"], executed
    assert (clone / "_build" / ".complete").exists()
    assert cached_pages(clone) == ["quick", "slow_a", "slow_b"]


def test_ctrl_c_to_make_book_s_process_group_leaves_nothing(tmp_path):
    interrupted_build(tmp_path, "group")


SLEEPER = textwrap.dedent("""\
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

    # Sleeps

    ```{code-cell} ipython3
    :tags: [parameters]

    seconds: float = 1.0  # how long the page sleeps
    marker: str = ""  # a file written once the kernel runs
    ```

    ```{code-cell} ipython3
    import pathlib
    import time

    pathlib.Path(marker).write_text("running")
    time.sleep(seconds)
    ```
    """)


def sleepers(folder: Path, names) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.md").write_text(SLEEPER)
    return [folder / f"{name}.md" for name in names]


def test_an_interrupted_runner_ends_its_kernel_and_writes_no_output(tmp_path):
    (nb,) = sleepers(tmp_path, ["99_sleeps"])
    tag, marker, out = uuid.uuid4().hex, tmp_path / "running", tmp_path / "out.ipynb"
    env = {**os.environ, TAG_ENV: tag, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "runner.log"  # a file: an undrained pipe can block the child
    with open(log, "w") as f:
        runner = subprocess.Popen(
            [sys.executable, "-m", "dlmspec_min.plumbing.run", str(nb), "-p",
             "seconds", "600", "-p", "marker", str(marker), "-o", str(out)],
            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=f)
    try:
        wait_until(running(runner, log, marker.exists), STARTUP_SECONDS,
                   "the kernel to run")
        interrupt(runner, "group")
        elapsed = seconds_until_none_left(tag)
    finally:
        kill_left(tag)
    assert runner.wait(10) == 128 + signal.SIGINT
    assert elapsed <= LIMIT_SECONDS
    assert "SIGINT: ended 1 process(es)" in log.read_text()
    assert not out.exists()  # at most out.partial.ipynb, which passes for nothing


def test_an_interrupted_paper_flow_ends_every_run_and_kernel(tmp_path):
    """``make paper --jobs 2`` on two sleeping notebooks (its notebook list and
    profiles replaced), SIGTERM once both kernels run."""
    notebooks = sleepers(tmp_path / "notebooks", ["97_one", "98_two"])
    for nb in notebooks:
        (tmp_path / f"{nb.stem}.yaml").write_text(
            f"seconds: 600\nmarker: {tmp_path / nb.stem}.running\n")
    driver = textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        from dlmspec_min.plumbing import paper
        paper.notebooks = lambda: [Path(p) for p in {[str(n) for n in notebooks]!r}]
        paper.profile_of = lambda nb: Path({str(tmp_path)!r}) / (nb.stem + ".yaml")
        sys.exit(paper.cli(["--jobs", "2", "--out", {str(tmp_path / "out")!r}]))
        """)
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG_ENV: tag, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "flow.log"  # a file: an undrained pipe can block the flow
    with open(log, "w") as f:
        flow = subprocess.Popen([sys.executable, "-c", driver], env=env, cwd=ROOT,
                                start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=f)
    try:
        wait_until(running(flow, log, lambda: all(
            (tmp_path / f"{nb.stem}.running").exists() for nb in notebooks)),
            STARTUP_SECONDS, "both kernels to run")
        interrupt(flow, "make")
        elapsed = seconds_until_none_left(tag)
    finally:
        kill_left(tag)
    assert flow.wait(10) == 128 + signal.SIGTERM, log.read_text()[-2000:]
    assert elapsed <= LIMIT_SECONDS
    written = (tmp_path / "out" / "notebooks").glob("*.ipynb")
    assert all(p.name.endswith(".partial.ipynb") for p in written)
    assert not (tmp_path / "out" / "_build").exists()  # the book was never built


def test_descendants_are_found_below_a_process_that_ended():
    """A shell's grandchild is found, and still below us after the shell ends
    (this test process made a subreaper, as install() makes a command)."""
    driver = textwrap.dedent("""\
        import subprocess, sys, time
        from dlmspec_min.plumbing import interrupts
        interrupts.install()
        shell = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"],
                                 stdout=subprocess.PIPE, text=True)
        grandchild = int(shell.stdout.readline())
        assert set(interrupts.descendants()) == {shell.pid, grandchild}
        shell.kill(); shell.wait()  # the sleep is orphaned: it comes back to us
        assert interrupts.descendants() == [grandchild], interrupts.descendants()
        assert interrupts.end_descendants(grace=1.0) == 1
        assert not interrupts.alive(grandchild) and interrupts.descendants() == []
        """)
    proc = subprocess.run([sys.executable, "-c", driver], capture_output=True,
                          text=True, timeout=60, env={**os.environ,
                                                      "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_signal_inside_deferred_waits_for_the_write_to_end(tmp_path):
    out = tmp_path / "entry.txt"
    driver = textwrap.dedent(f"""\
        import os, signal
        from pathlib import Path
        from dlmspec_min.plumbing import interrupts
        interrupts.install()
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            Path({str(out)!r}).write_text("whole")
        raise SystemExit("the signal was lost")
        """)
    proc = subprocess.run([sys.executable, "-c", driver], capture_output=True,
                          text=True, timeout=60, env={**os.environ,
                                                      "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert out.read_text() == "whole"
