"""The prompt_source parameter: its parser, the hub refusal, and the prompts."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from dlmspec_min.plumbing import params, prompt_sources
from dlmspec_min.plumbing.prompt_sources import (
    DatasetSource,
    make_prompts,
    parse_source,
)


def test_parser_reads_the_three_kinds():
    assert parse_source("bos") == "bos"
    assert parse_source("brown") == "brown"
    assert parse_source("gsm8k:main:test:question") == DatasetSource(
        "gsm8k", "main", "test", "question")
    src = parse_source("openai/gsm8k::train: question ")
    assert src == DatasetSource("openai/gsm8k", None, "train", "question")
    assert str(src) == "openai/gsm8k::train:question"


@pytest.mark.parametrize("bad", ["", "gsm8k", "gsm8k:main:test", "a:b:c:d:e",
                                 ":main:test:question", "gsm8k:main::question",
                                 "gsm8k:main:test:", "Brown"])
def test_parser_refuses_malformed_sources(bad):
    with pytest.raises(ValueError, match="must be 'bos', 'brown', 'questions' or a"):
        parse_source(bad)


def test_a_dataset_source_is_refused_without_hub_access(monkeypatch):
    monkeypatch.delenv("DLMSPEC_ALLOW_HUB", raising=False)
    with pytest.raises(ValueError, match=r"prompt_source=.*set DLMSPEC_ALLOW_HUB=1"):
        params.check("prompt_source", "gsm8k:main:test:question")
    with pytest.raises(PermissionError, match="set DLMSPEC_ALLOW_HUB=1"):
        prompt_sources.dataset_texts(parse_source("gsm8k:main:test:question"))
    params.check("prompt_source", "brown")  # the local sources need no opt-in
    with pytest.raises(ValueError, match="is not a prompt source"):
        params.check("prompt_source", "gsm8k:test")
    monkeypatch.setenv("DLMSPEC_ALLOW_HUB", "1")
    params.check("prompt_source", "gsm8k:main:test:question")


class WordTokenizer:
    bos_token_id = 1

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [10 + len(w) for w in text.split()]}


class FakeDataset:
    column_names = ["question", "answer"]

    def __init__(self, rows):
        self.rows = rows

    def __getitem__(self, column):
        return [r[column] for r in self.rows]


def test_dataset_prompts_through_load_dataset(monkeypatch):
    calls = []
    rows = [{"question": q, "answer": "42"} for q in
            ["how many apples are left", "too short", "what is two plus three"]]

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return FakeDataset(rows)

    monkeypatch.setitem(sys.modules, "datasets",
                        types.SimpleNamespace(load_dataset=load_dataset))
    monkeypatch.setenv("DLMSPEC_ALLOW_HUB", "1")
    p = make_prompts(WordTokenizer(), "gsm8k:main:test:question", 2, 4, seed=0)
    assert calls == [("gsm8k", "main", "test")]
    assert p.shape == (2, 4) and (p[:, 0] == 1).all()
    firsts = {tuple(r) for r in p[:, 1:].tolist()}
    assert firsts == {(13, 14, 16), (14, 12, 13)}  # the two long questions, cut
    with pytest.raises(ValueError, match="only 2 texts of gsm8k:main:test:question"):
        make_prompts(WordTokenizer(), "gsm8k:main:test:question", 3, 4)
    with pytest.raises(ValueError, match="no column 'problem'"):
        make_prompts(WordTokenizer(), "gsm8k:main:test:problem", 1, 4)


def test_bos_and_brown_sources():
    assert torch.equal(make_prompts(WordTokenizer(), "bos", 3, 8),
                       torch.ones(3, 1, dtype=torch.long))
    p = make_prompts(WordTokenizer(), "brown", 3, 5, seed=0)
    assert p.shape == (3, 5) and (p[:, 0] == 1).all()
