"""Interrupts leave nothing behind: on SIGINT or SIGTERM a command ends every
process it started (workers, notebook kernels, their children), then exits.

Two things defeat the defaults. jupyter_client starts each kernel in a session
of its own, so a signal to the command's process group never reaches it, and a
worker killed first leaves its kernel to init. And nbclient, while it executes
a notebook in a process's main thread, replaces that process's SIGINT and
SIGTERM handlers with one that shuts the kernel down and carries on, so a book
worker took the next notebook after SIGTERM. Hence, in this project:

* ``install()`` (a command's main thread): on SIGINT or SIGTERM, send SIGTERM
  to every descendant (found through /proc, else ``ps``), SIGKILL those left
  after ``GRACE_SECONDS``, and exit with 128 + the signal's number. On Linux
  the command becomes a child subreaper too, so that a descendant orphaned on
  the way (its parent ended first) comes back to it and is still found.
* ``in_thread(fn)``: notebooks execute off the main thread, where nbclient
  installs no handler, so ``install()``'s stays in force.
* ``deferred()``: a signal that arrives inside is handled when it ends, so a
  cache entry is written whole or not at all; ``scratch(path)``: a temporary
  folder that an interrupt removes as well.

``make book`` (``bookbuild``), ``make paper`` (``paper``), the runner
(``run``) and the book's execution workers (``bookexec``) use it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL
POLL_SECONDS = 0.05
ROUNDS = 3  # sweeps, for processes started while the previous one ran
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
PROC = Path("/proc")

_state = {"deferring": 0, "pending": None, "ending": False, "scratch": []}


def _stat_fields(pid: str) -> list[str] | None:
    """State, parent pid, ... of a process from /proc/PID/stat (None if gone)."""
    try:
        text = (PROC / pid / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # the name may hold spaces


def _parents() -> dict[int, int]:
    """Parent pid of every living (not zombie) process."""
    if not (PROC / "self" / "stat").exists():
        out = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid=", "-o", "stat="],
                             capture_output=True, text=True).stdout
        rows = (line.split() for line in out.splitlines())
        return {int(r[0]): int(r[1]) for r in rows if len(r) >= 3 and r[2][0] != "Z"}
    parents = {}
    for entry in os.listdir(PROC):
        fields = _stat_fields(entry) if entry.isdigit() else None
        if fields and fields[0] not in ("Z", "X"):
            parents[int(entry)] = int(fields[1])
    return parents


def descendants(pid: int | None = None) -> list[int]:
    """Every living process below ``pid`` (default: this one), parents first."""
    children = defaultdict(list)
    for child, parent in _parents().items():
        children[parent].append(child)
    out, todo = [], [os.getpid() if pid is None else pid]
    while todo:
        kids = children.get(todo.pop(0), [])
        out += kids
        todo += kids
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    if (PROC / "self" / "stat").exists():
        fields = _stat_fields(str(pid))
        return fields is not None and fields[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _send(pids, sig) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def end_descendants(grace: float = GRACE_SECONDS) -> int:
    """SIGTERM every descendant, SIGKILL those left after ``grace`` seconds;
    again for any started meanwhile. Returns how many processes were signalled."""
    ended = set()
    for _ in range(ROUNDS):
        pids = [p for p in descendants() if p not in ended]
        if not pids:
            break
        _send(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(map(alive, pids)):
            time.sleep(POLL_SECONDS)
        _send([p for p in pids if alive(p)], signal.SIGKILL)
        ended.update(pids)
    return len(ended)


def _end(signum: int) -> None:
    if _state["ending"]:
        return
    _state["ending"] = True
    n = end_descendants()
    for path in _state["scratch"]:
        shutil.rmtree(path, ignore_errors=True)
    name = signal.Signals(signum).name
    os.write(2, f"\n== {name}: ended {n} process(es) this command started\n".encode())
    os._exit(128 + signum)


def _handle(signum, frame) -> None:
    if _state["deferring"]:
        _state["pending"] = signum
        return
    _end(signum)


def _become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def install(subreaper: bool = True) -> bool:
    """End every descendant and exit on SIGINT or SIGTERM (see the module's
    docstring); with ``subreaper``, orphaned descendants come back to this
    process. False, and nothing installed, outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return False
    _state.update(deferring=0, pending=None, ending=False, scratch=[])  # after fork
    if subreaper:
        _become_subreaper()
    for sig in SIGNALS:
        signal.signal(sig, _handle)
    return True


def command(main):
    """``main(argv)`` as a command: ``install()`` first, so SIGINT and SIGTERM
    end what it started (``make book``, ``make paper`` and the runner)."""
    def cli(argv=None) -> int:
        install()
        return main(argv)

    cli.__doc__ = ("The command: ``main``, with SIGINT and SIGTERM ending what it "
                   "started.")
    return cli


@contextlib.contextmanager
def installed():
    """``install()`` for the block's duration (no subreaper: this process may be
    someone else's, a test runner's), the previous handlers after it."""
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    done = install(subreaper=False)
    try:
        yield
    finally:
        if done:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


@contextlib.contextmanager
def deferred():
    """SIGINT and SIGTERM wait for the end of the block (a write kept whole)."""
    _state["deferring"] += 1
    try:
        yield
    finally:
        _state["deferring"] -= 1
        if not _state["deferring"] and _state["pending"] is not None:
            _end(_state["pending"])


@contextlib.contextmanager
def scratch(path):
    """A scratch folder that an interrupt inside the block removes too."""
    _state["scratch"].append(path)
    try:
        yield path
    finally:
        _state["scratch"].remove(path)


def in_thread(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a worker thread, the main thread waiting (and
    free to handle signals); its result, or its exception raised here."""
    box = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the caller as it is
            box["error"] = e

    thread = threading.Thread(target=target, name=getattr(fn, "__name__", "work"),
                              daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.5)
    if "error" in box:
        raise box["error"]
    return box.get("value")
