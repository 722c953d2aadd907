"""MathJax is served from the build: its fetch and the book's configuration."""

import io
import tarfile
from pathlib import Path

import pytest
import yaml

from dlmspec_min import paths
from dlmspec_min.plumbing import mathjax

ROOT = Path(__file__).resolve().parents[1]


def _tarball(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_a_tarball_with_the_wrong_checksum_is_refused_and_leaves_nothing(tmp_path):
    files = {f"package/es5/{mathjax.MATHJAX_FILE}": b"x", "package/LICENSE": b""}
    tgz = _tarball(tmp_path / "mathjax-3.2.2.tgz", files)
    dest = tmp_path / "static" / "mathjax"
    with pytest.raises(mathjax.MathJaxError, match="sha256"):
        mathjax.fetch_mathjax(dest, tarball=tgz)
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # no half-written temporary folder


def test_an_existing_copy_is_kept(tmp_path):
    dest = tmp_path / "mathjax"
    dest.mkdir()
    (dest / mathjax.MATHJAX_FILE).write_text("already here")
    assert mathjax.fetch_mathjax(dest) == dest
    assert (dest / mathjax.MATHJAX_FILE).read_text() == "already here"


def test_the_book_loads_the_fetched_mathjax_and_nothing_from_a_cdn():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    assert cfg["mathjax_path"] == f"mathjax/{mathjax.MATHJAX_FILE}"
    assert "//" not in cfg["mathjax_path"]
    static = [ROOT / p for p in cfg["html_static_path"]]
    assert mathjax.static_root().resolve() in [p.resolve() for p in static] or (
        paths.data_dir() != ROOT / "data"  # DLMSPEC_DATA points elsewhere
    )
    assert mathjax.mathjax_dir().parent == mathjax.static_root()
    assert cfg["nb_ipywidgets_js"] == {}
    assert mathjax.MATHJAX_PACKAGE == "mathjax@3.2.2"
    assert len(mathjax.MATHJAX_SHA256) == 64
