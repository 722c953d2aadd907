"""What a notebook's numbers depend on: a fingerprint, and the commit they ran at.

The book's execution cache (jupyter-cache) keys each notebook on its own code
cells only, so a change to the library, the committed weights, the fetched
data or a pinned package would leave every number of the book as it was. The
fingerprint closes that gap: a sha256 over

- ``code``: every ``dlmspec_min/**/*.py`` (path and bytes);
- ``models``: every file under the models folder (weights, tokenizer, logs);
- ``fetched``: the pinned hashes of the fetched files (the Brown tarball and
  its unpacked tree, the judge's GGUF);
- ``registry``: ``book/claims.yml`` (keys, ranges, verdict rules);
- ``packages``: the installed version of every package pinned in
  ``pyproject.toml``.

Each notebook calls ``record_provenance()`` once; it glues the fingerprint and
the commit. The book's ``freshness`` extension re-executes any notebook whose
cached run carries another fingerprint than the build's, the dashboard shows
*stale* for such a verdict, and the tests fail on it. The commit is recorded
for the reader, not compared: a commit that changes none of the above re-runs
nothing.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import re
import subprocess
import tomllib
from pathlib import Path

from .paths import REPO_ROOT, models_dir

FINGERPRINT_KEY = "provenance_fingerprint"
COMMIT_KEY = "provenance_commit"
SHORT = 16  # hex digits shown and compared
COMPONENTS = ("code", "models", "fetched", "registry", "packages")


def _hash_files(files, root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def pinned_packages(root: Path = REPO_ROOT) -> list[str]:
    """Names of the packages ``pyproject.toml`` pins with ``==``."""
    deps = tomllib.loads((Path(root) / "pyproject.toml").read_text())["project"][
        "dependencies"
    ]
    return sorted(re.split(r"[=<>!~\[ ;]", d, maxsplit=1)[0] for d in deps if "==" in d)


def _installed(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "missing"


def _fetched_pins() -> str:
    from . import corpus, judge

    return "|".join([corpus.BROWN_PACKAGE, corpus.BROWN_SHA256,
                     corpus.BROWN_TREE_SHA256, judge.SMOLLM2_PIN,
                     judge.SMOLLM2_GGUF_SHA256])


def components(root: Path = REPO_ROOT, models: Path | None = None) -> dict[str, str]:
    """The digest of each part the numbers depend on (see the module docstring)."""
    root = Path(root)
    models = Path(models) if models is not None else models_dir()
    package = root / "dlmspec_min"
    model_files = [f for f in models.rglob("*") if f.is_file()]
    registry = root / "book" / "claims.yml"
    versions = "|".join(f"{n}=={_installed(n)}" for n in pinned_packages(root))
    return {
        "code": _hash_files(package.rglob("*.py"), package),
        "models": _hash_files(model_files, models) if model_files else "none",
        "fetched": hashlib.sha256(_fetched_pins().encode()).hexdigest(),
        "registry": hashlib.sha256(
            registry.read_bytes() if registry.exists() else b""
        ).hexdigest(),
        "packages": hashlib.sha256(versions.encode()).hexdigest(),
    }


def fingerprint(root: Path = REPO_ROOT, models: Path | None = None) -> str:
    """One short digest over every component."""
    parts = components(root, models)
    joined = "|".join(f"{k}:{parts[k]}" for k in COMPONENTS)
    return hashlib.sha256(joined.encode()).hexdigest()[:SHORT]


def commit(root: Path = REPO_ROOT) -> str:
    """``git`` HEAD (12 digits), ``+dirty`` with uncommitted tracked changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + ("+dirty" if dirty else "")


def record_provenance() -> dict[str, str]:
    """Glue this run's fingerprint and commit (call once per notebook)."""
    from .claims import record

    return {FINGERPRINT_KEY: record(FINGERPRINT_KEY, fingerprint()),
            COMMIT_KEY: record(COMMIT_KEY, commit())}


def cached_fingerprint(nb) -> str | None:
    """The fingerprint glued in an executed notebook (nbformat node or dict)."""
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {}).get("scrapbook", {})
            if meta.get("name") == FINGERPRINT_KEY:
                from .claims import _value_of

                return _value_of(out)
    return None


def invalidate_stale(cache_path: Path, current: str) -> list[str]:
    """Drop every jupyter-cache record whose notebook ran under another fingerprint.

    Returns the source paths (``uri``) of the dropped records, so the caller can
    mark their documents outdated. A record with no fingerprint counts as stale.
    """
    from jupyter_cache import get_cache

    if not Path(cache_path).exists():
        return []
    cache = get_cache(str(cache_path))
    dropped = []
    for rec in cache.list_cache_records():
        nb = cache.get_cache_bundle(rec.pk).nb
        if cached_fingerprint(nb) != current:
            cache.remove_cache(rec.pk)
            dropped.append(rec.uri)
    return dropped
