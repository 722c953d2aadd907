"""What a notebook's numbers depend on: a fingerprint, and the commit they ran at.

The book's execution cache (jupyter-cache) keys each notebook on its own code
cells only, so a change to the library, the committed weights, the fetched
data or a pinned package would leave every number of the book as it was. The
fingerprint closes that gap: a sha256 over

- ``code``: every ``dlmspec_min/**/*.py`` (path and bytes);
- ``models``: every file under the models folder (weights, tokenizer, logs),
  but a training run's checkpoint (``NOT_FINGERPRINTED``: a run in progress,
  which no page reads);
- ``fetched``: the pinned hashes of the fetched files (the Brown tarball and
  its unpacked tree, the judge's GGUF);
- ``registry``: ``book/claims.yml`` (keys, ranges, verdict rules);
- ``packages``: the installed version of every package pinned in
  ``pyproject.toml`` (its core and its extras).

Each notebook calls ``record_provenance()`` once; it glues the fingerprint and
the commit. The book's ``freshness`` extension re-executes any notebook whose
cached run carries another fingerprint than the build's, the dashboard shows
*stale* for such a verdict, and the tests fail on it. The commit is recorded
for the reader, not compared: a commit that changes none of the above re-runs
nothing.

A page whose numbers come from running other notebooks (the seed page runs
the claim chapters) also depends on their sources, which neither the cache key
nor the fingerprint sees: it calls ``record_sources(files)``, and a run whose
glued digest is not the checkout's is stale in the same way.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import re
import subprocess
import tomllib
from pathlib import Path

from ..paths import REPO_ROOT, models_dir
from .claims import COMMIT_KEY, FINGERPRINT_KEY, _value_of, record

SHORT = 16  # hex digits shown and compared
COMPONENTS = ("code", "models", "fetched", "registry", "packages")
SOURCES_KEY = "provenance_sources"  # digest of the notebooks a page runs
SOURCE_FILES_KEY = "provenance_source_files"  # their paths, comma-separated


def _hash_files(files, root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def requirements(root: Path = REPO_ROOT) -> list[str]:
    """Every requirement ``pyproject.toml`` names: the core's and every extra's."""
    project = tomllib.loads((Path(root) / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    return [*project["dependencies"], *(d for deps in extras.values() for d in deps)]


def pinned_packages(root: Path = REPO_ROOT) -> list[str]:
    """Names of the packages ``pyproject.toml`` pins with ``==`` (extras included)."""
    deps = requirements(root)
    return sorted(re.split(r"[=<>!~\[ ;]", d, maxsplit=1)[0] for d in deps if "==" in d)


def _installed(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "missing"


def _fetched_pins() -> str:
    from ..measures import judge
    from ..texts import corpus

    return "|".join([corpus.BROWN_PACKAGE, corpus.BROWN_SHA256,
                     corpus.BROWN_TREE_SHA256, judge.SMOLLM2_PIN,
                     judge.SMOLLM2_GGUF_SHA256])


# an unfinished training run's state (training/train_math.py): no page reads it
NOT_FINGERPRINTED = frozenset({"checkpoint.pt", "checkpoint.partial"})


def components(root: Path = REPO_ROOT, models: Path | None = None) -> dict[str, str]:
    """The digest of each part the numbers depend on (see the module docstring)."""
    root = Path(root)
    models = Path(models) if models is not None else models_dir()
    package = root / "dlmspec_min"
    model_files = [f for f in models.rglob("*")
                   if f.is_file() and f.name not in NOT_FINGERPRINTED]
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
    return {FINGERPRINT_KEY: record(FINGERPRINT_KEY, fingerprint()),
            COMMIT_KEY: record(COMMIT_KEY, commit())}


def sources_digest(files: list[str], root: Path = REPO_ROOT) -> str:
    """A short digest over the given repository files (path and bytes)."""
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.encode() + b"\0")
        h.update(hashlib.sha256((Path(root) / f).read_bytes()).digest())
    return h.hexdigest()[:SHORT]


def record_sources(files: list[str]) -> str:
    """Glue the digest of the notebooks (repository paths) this page runs."""
    record(SOURCE_FILES_KEY, ",".join(sorted(files)))
    return record(SOURCES_KEY, sources_digest(files))


def sources_current(glued: dict, root: Path = REPO_ROOT) -> bool:
    """False if ``glued`` names source files whose digest is no longer the one
    recorded (a page that records none is current by this test)."""
    files = glued.get(SOURCE_FILES_KEY)
    if not files:
        return True
    try:
        return glued.get(SOURCES_KEY) == sources_digest(files.split(","), root)
    except OSError:  # a source that no longer exists
        return False


def _glued_in(nb, keys) -> dict:
    found = {}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name in keys:
                found[name] = _value_of(out)
    return found


def cached_fingerprint(nb) -> str | None:
    """The fingerprint glued in an executed notebook (nbformat node or dict)."""
    return _glued_in(nb, {FINGERPRINT_KEY}).get(FINGERPRINT_KEY)


def invalidate_stale(cache_path: Path, current: str) -> list[str]:
    """Drop every jupyter-cache record whose notebook ran under another fingerprint.

    Returns the source paths (``uri``) of the dropped records, so the caller can
    mark their documents outdated. A record with no fingerprint counts as stale,
    and so does one whose recorded sources (``record_sources``) changed.
    """
    from jupyter_cache import get_cache

    if not Path(cache_path).exists():
        return []
    cache = get_cache(str(cache_path))
    dropped = []
    for rec in cache.list_cache_records():
        nb = cache.get_cache_bundle(rec.pk).nb
        glued = _glued_in(nb, {FINGERPRINT_KEY, SOURCES_KEY, SOURCE_FILES_KEY})
        if glued.get(FINGERPRINT_KEY) != current or not sources_current(glued):
            cache.remove_cache(rec.pk)
            dropped.append(rec.uri)
    return dropped
