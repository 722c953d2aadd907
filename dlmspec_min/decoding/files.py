"""Where the decoding core finds the embedded models (``data/models``).

The same rule as ``dlmspec_min.paths``, restated here so that this folder
imports nothing from the rest of the package: ``DLMSPEC_DATA`` names the data
folder, by default ``data/`` of the repository this folder sits in
(``tests/test_layout.py`` checks that both give the same folders).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def models_dir() -> Path:
    """The committed embedded models: ``$DLMSPEC_DATA/models`` or ``data/models``."""
    return Path(os.environ.get("DLMSPEC_DATA", REPO_ROOT / "data")) / "models"


def tokenizer_dir() -> Path:
    """The embedded models' shared WordPiece tokenizer."""
    return models_dir() / "tokenizer"
