"""The book's part for library users: "Using the decoder" and the API reference.

Static checks of the two pages' sources (the toc, the one parameters cell, the
API page naming exactly the exported names, each through autodoc), and checks
of what the build made (`make book` first): the values the executed page
glued, recomputed here with the library, and the API page's HTML holding an
entry for every name of ``__all__``.
"""

from __future__ import annotations

import ast
import html as html_lib
import re
from pathlib import Path

import jupytext
import pytest
import torch
import yaml
from pages import names_recorded_on_page, shown_glue_names

import dlmspec_min.decoding as decoding
from dlmspec_min.plumbing import claims, provenance

ROOT = Path(__file__).resolve().parents[1]
USING = ROOT / "book" / "library" / "using.md"
API = ROOT / "book" / "library" / "api.md"
HTML = ROOT / "_build" / "html"
EXECUTED = ROOT / "_build" / "jupyter_execute"
CAPTION = "Using the decoder (library)"
AUTODOC = re.compile(
    r"^\.\. auto(?:function|class|exception):: dlmspec_min\.decoding\.(\w+)\s*$", re.M
)


def _parameters(path: Path) -> dict:
    nb = jupytext.read(path)
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    return {s.target.id: ast.literal_eval(s.value)
            for s in ast.parse(cell.source).body}


def test_the_library_part_is_in_the_toc():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if p.get("caption") == CAPTION)
    assert [c["file"] for c in part["chapters"]] == ["book/library/using",
                                                     "book/library/api"]


def test_autodoc_and_napoleon_are_enabled():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert {"sphinx.ext.autodoc", "sphinx.ext.napoleon"} <= set(
        cfg["sphinx"]["extra_extensions"])
    assert cfg["sphinx"]["config"]["napoleon_numpy_docstring"] is True


def test_the_api_page_documents_exactly_the_exported_names_by_autodoc():
    text = API.read_text()
    named = AUTODOC.findall(text)
    assert sorted(named) == sorted(decoding.__all__), (
        "book/library/api.md must name every exported name once, and no other"
    )
    assert len(named) == len(set(named))
    assert ".. automodule:: dlmspec_min.decoding" in text
    # a hand-written copy would show parameter lists; the page has none of its own
    assert "Parameters" not in text and ":param" not in text


def test_the_using_page_is_a_notebook_like_the_others():
    text = USING.read_text()
    params = _parameters(USING)
    assert set(params) == {"model", "gen_length", "block_length", "threshold",
                           "spec_budget", "seed", "device"}
    nb = jupytext.read(USING)
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    for line in cell.source.splitlines():
        assert "#" in line, f"parameter without help text: {line}"
    assert "validate_all(" in text and "record_provenance()" in text
    assert {"lib_same_tokens", "lib_speedup"} <= names_recorded_on_page(USING, "lib_")
    # the paper models are shown, never executed: their block is not a code cell
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "LLaDA-8B" not in code and "LLaDA-8B" in text
    assert "trust_remote_code=True" in text and "DLMSPEC_ALLOW_HUB=1" in text


# --- what the build made (make book) ------------------------------------------------


def _glued() -> dict:
    glue = EXECUTED / "book" / "library" / "using.glue.json"
    if not glue.exists():
        pytest.fail(f"{glue} is missing: the book build has not executed "
                    "book/library/using.md; run `make book` first")
    return claims.read_glued(glue)


def test_the_using_page_ran_under_this_checkout():
    assert _glued()[provenance.FINGERPRINT_KEY] == provenance.fingerprint(), (
        "book/library/using.md ran under another fingerprint; run `make book`"
    )


def test_the_using_page_shows_trajectory_speculation_exact_and_cheaper():
    v = _glued()
    shown = shown_glue_names(USING, "lib_")
    assert shown and shown <= set(v), f"shown but not glued: {shown - set(v)}"
    assert v["lib_same_tokens"] is True
    for base, spec in (("dual", "trajectory"), ("threshold", "trajectory_nocache")):
        assert v[f"lib_nfe_{spec}"] < v[f"lib_nfe_{base}"], (base, spec)
    speedup = v["lib_nfe_dual"] / v["lib_nfe_trajectory"]
    assert v["lib_speedup"] == pytest.approx(speedup, abs=1e-3)
    # the caches compute fewer positions than the uncached decode
    assert (v["lib_token_forwards_dual"] < v["lib_token_forwards_prefix"]
            < v["lib_token_forwards_threshold"])
    assert v["lib_bert_masks_left"] == 0
    assert v["lib_known_models"] == len(decoding.known_model_names())


def test_the_glued_forwards_are_what_the_library_gives():
    """The page's figures, decoded again here from its own parameters: greedy
    decodes on one thread give the same counts."""
    v, p = _glued(), _parameters(USING)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the book executes its pages
    try:
        _decode_again(v, p)
    finally:
        torch.set_num_threads(threads)


def _decode_again(v: dict, p: dict):
    denoiser, tokenizer = decoding.load_denoiser(v["lib_model"])
    texts = ["The jury said", "In the morning", "The committee will"]
    assert f"texts = {texts!r}".replace("'", '"') in USING.read_text()
    prompt = decoding.encode_prompts(tokenizer, texts)
    assert (prompt != tokenizer.pad_token_id).all()  # one length: no [PAD]
    fast = dict(gen_length=p["gen_length"], block_length=p["block_length"],
                rule="threshold", threshold=p["threshold"], cache="dual")
    dual = decoding.generate(denoiser, prompt, decoding.DecodeConfig(**fast))
    spec = decoding.generate(denoiser, prompt, decoding.DecodeConfig(
        speculate="trajectory", spec_budget=p["spec_budget"], **fast))
    assert int(dual.nfe.sum()) == v["lib_nfe_dual"]
    assert int(spec.nfe.sum()) == v["lib_nfe_trajectory"]
    assert int(dual.token_forwards.sum()) == v["lib_token_forwards_dual"]
    assert torch.equal(spec.tokens, dual.tokens)


def _plain_text(page: str) -> str:
    text = html_lib.unescape(re.sub(r"<[^>]+>", " ", page))
    return re.sub(r"\s+", " ", text.replace("\u2019", "'"))


def test_the_built_api_page_has_an_entry_for_every_exported_name():
    page = HTML / "book" / "library" / "api.html"
    if not page.exists():
        pytest.fail(f"{page} is missing: run `make book` first")
    html = page.read_text()
    ids = set(re.findall(r'<dt class="sig sig-object py" id="([\w.]+)"', html))
    missing = [n for n in decoding.__all__ if f"dlmspec_min.decoding.{n}" not in ids]
    assert not missing, f"the API page documents no entry for {missing}"
    text = _plain_text(html)
    for name in decoding.__all__:  # each docstring's own first words reached it
        summary = (getattr(decoding, name).__doc__ or "").strip().split("\n")[0]
        words = summary.replace("``", "").split()[:3]
        assert words and re.search(r"\s*".join(map(re.escape, words)), text), (
            name, words)
    assert html.count('<dl class="field-list') >= 8  # napoleon rendered Parameters
    using = (HTML / "book" / "library" / "using.html").read_text()
    assert "Using the decoder" in using and 'href="api.html"' in using


def test_the_speed_table_reads_the_benchmark_s_last_run():
    """The library page's speed section: every setting of the benchmark at
    both batches on both models, the near-fastest including the fastest, and
    speculation's slowdown recomputed from the rows."""
    from dlmspec_min.measures import bench

    path = ROOT / "benchmarks" / "results" / "decode_speed.json"
    meta, rows = bench.speed_report(path)
    assert meta["machine"] and meta["date"] and meta["repeats"] >= 1
    assert len(rows) == 2 * 2 * (3 * 3 + 3 + 1)  # models x batches x settings
    assert set(rows["rule"]) == {"schedule", "threshold", "factor", "trajectory",
                                 "trajectory 1-draft"}  # + the CPU setting
    for (model, batch), s in bench.speed_summary(rows).items():
        g = rows[(rows.model == model) & (rows.batch == batch)].set_index("setting")
        assert s["fastest"] in s["near_fastest"]
        assert s["fastest_tokens_per_s"] == g["tokens_per_s"].max()
        assert s["spec_slowdown"]["dual"] == pytest.approx(
            g.loc["trajectory / dual", "wall_s"] / g.loc["threshold / dual", "wall_s"])
        assert s["cpu_setting_slowdown"] == pytest.approx(
            g.loc["trajectory 1-draft / dual", "wall_s"]
            / g.loc["threshold / dual", "wall_s"])
