"""``make book``'s build: jupyter-book, a stamp for a build that finished, and
interrupts that leave nothing running.

    python -m dlmspec_min.plumbing.bookbuild [ROOT] [jupyter-book build options]

A build that did not finish (interrupted or failed) leaves no
``_build/.complete`` stamp, so the next one re-writes every page (``--all``);
the execution cache still serves every notebook that executed in full, so
exactly the notebooks that had not finished execute again.

jupyter-book runs as this command's child. On SIGINT or SIGTERM (Ctrl-C, a CI
timeout, a job scheduler, or ``kill`` of make, which passes SIGTERM on to this
command) it ends jupyter-book, the execution workers and their kernels within
seconds (``interrupts``) and exits with 128 + the signal's number.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from . import interrupts

STAMP = Path("_build") / ".complete"
JUPYTER_BOOK = "from jupyter_book.cli.main import main; main()"  # its command


def build(root: Path, options: list[str]) -> int:
    """Build the book at ``root`` (``--all`` after a build that did not finish);
    stamp it complete on success. Returns jupyter-book's exit code."""
    stamp = root / STAMP
    full = [] if stamp.exists() else ["--all"]
    stamp.unlink(missing_ok=True)
    code = subprocess.run([sys.executable, "-c", JUPYTER_BOOK, "build", str(root),
                           *options, *full]).returncode
    if code == 0:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    return code


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dlmspec_min.plumbing.bookbuild",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", default=Path("."), type=Path,
                    help="the book's root folder (default: here)")
    a, options = ap.parse_known_args(argv)
    return build(a.root, options)


cli = interrupts.command(main)  # the command: SIGINT and SIGTERM end its work


if __name__ == "__main__":
    sys.exit(cli())
