"""MathJax for the book, served from the build instead of a CDN.

The HTML pages typeset their equations with MathJax 3. ``fetch_mathjax``
takes the npm package at a pinned version and checksum and keeps only the one
combined file the book loads (TeX input with every extension, amsmath
included, and SVG output, which needs no font files) plus its licence, in the
ignored ``data/cache/static/mathjax/``. ``_config.yml`` lists
``data/cache/static`` in ``html_static_path`` and points Sphinx's
``mathjax_path`` at ``mathjax/<file>``, so the page never reaches outside the
build.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from ..paths import cache_dir
from ..texts import npm

MATHJAX_PACKAGE = "mathjax@3.2.2"
MATHJAX_SHA256 = "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09"
MATHJAX_FILE = "tex-svg-full.js"  # es5/ in the package; self-contained, no fonts
KEPT = {f"package/es5/{MATHJAX_FILE}": MATHJAX_FILE, "package/LICENSE": "LICENSE"}
FETCH_HINT = "run `make data` (or `python -m dlmspec_min.plumbing.fetch`) to fetch it"


class MathJaxError(RuntimeError):
    """MathJax is missing or does not match its pinned checksum."""


def static_root() -> Path:
    """The folder ``html_static_path`` names; its contents land in ``_static/``."""
    return cache_dir() / "static"


def mathjax_dir() -> Path:
    return static_root() / "mathjax"


def fetch_mathjax(dest: Path | None = None, tarball: Path | None = None) -> Path:
    """Download (or take ``tarball``), verify and unpack MathJax; return its folder.

    Only the files in ``KEPT`` are written, first into a temporary folder next
    to ``dest`` that is then renamed, so a failed fetch leaves nothing behind.
    """
    return npm.install(MATHJAX_PACKAGE, MATHJAX_SHA256, dest or mathjax_dir(),
                       MATHJAX_FILE, _unpack_kept, MathJaxError,
                       f"{FETCH_HINT} ({MATHJAX_PACKAGE})", tarball)


def _unpack_kept(tarball: Path, out: Path) -> Path:
    """``out``, holding only the files in ``KEPT`` from ``tarball``."""
    out.mkdir()
    with tarfile.open(tarball) as tf:
        missing = sorted(set(KEPT) - set(tf.getnames()))
        if missing:
            raise MathJaxError(f"{tarball} lacks {missing}; {FETCH_HINT}")
        for member, name in KEPT.items():
            src = tf.extractfile(tf.getmember(member))
            (out / name).write_bytes(src.read())
    return out
