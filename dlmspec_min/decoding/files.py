"""Where the decoding core finds the embedded models.

Three places, the first that applies:

1. ``$DLMSPEC_DATA/models`` when ``DLMSPEC_DATA`` is set;
2. ``data/models`` of the repository this folder sits in (a clone, or an
   editable install of it): the same rule as ``dlmspec_min.paths``, restated
   here so that this folder imports nothing from the rest of the package
   (``tests/test_layout.py`` checks that both give the same folders);
3. the models shipped inside the installed package, ``decoding/embedded/``
   (``pip install .`` or the wheel): those of ``SHIPPED_MODELS``, each with its
   own tokenizer, copied in by ``setup.py`` at build time. The other embedded
   models live only in the repository.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGED = Path(__file__).resolve().parent / "embedded"  # filled by setup.py

# What an installed package carries (about 4 MB in all, each with its tokenizer):
# the README example's prose model and the math world's smallest model.
SHIPPED_MODELS = ("small", "math_free/small")
# The files of a model folder that loading reads (not the training log).
SHIPPED_FILES = ("config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
                 "training.json")


def _in_a_clone() -> bool:
    return (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "data").is_dir()


def models_dir() -> Path:
    """The embedded models' folder: ``$DLMSPEC_DATA/models``, else the clone's
    ``data/models``, else the installed package's ``embedded``."""
    if "DLMSPEC_DATA" in os.environ:
        return Path(os.environ["DLMSPEC_DATA"]) / "models"
    return REPO_ROOT / "data" / "models" if _in_a_clone() else PACKAGED


def from_package() -> bool:
    """True iff the models come from the installed package (only
    ``SHIPPED_MODELS`` are there)."""
    return models_dir() == PACKAGED


def tokenizer_dir() -> Path:
    """The embedded models' shared WordPiece tokenizer."""
    return models_dir() / "tokenizer"


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def has_weights(folder: Path) -> bool:
    """Whether a model folder holds its weights: one weight file, or an index
    whose every shard is there."""
    folder = Path(folder)
    if any((folder / f).is_file() for f in WEIGHT_FILES):
        return True
    for index in WEIGHT_INDEXES:
        try:
            shards = set(json.loads((folder / index).read_text())["weight_map"]
                         .values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        return bool(shards) and all((folder / s).is_file() for s in shards)
    return False
