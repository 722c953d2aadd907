"""Where the project's files live.

The package is installed in editable mode from the repository, so the data
folder sits next to it. ``DLMSPEC_DATA`` overrides it (e.g. for a read-only
checkout whose fetched corpus lives elsewhere).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """The data folder: committed models plus ignored, fetched files."""
    return Path(os.environ.get("DLMSPEC_DATA", REPO_ROOT / "data"))


def models_dir() -> Path:
    return data_dir() / "models"


def cache_dir() -> Path:
    """Ignored folder for fetched or converted files (corpus, judge)."""
    return data_dir() / "cache"
