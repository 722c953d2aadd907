"""Where a notebook's prompts come from (the ``prompt_source`` parameter).

* ``"bos"``: the start token alone (unconditional generation);
* ``"brown"``: the start token, then the first tokens of held-out Brown
  sentences in a seeded order (``order.held_out_prompts``);
* ``"questions"``: the math world's held-out questions (``worlds.MATH.prompts``),
  each ``[PAD]``-padded to the 32 tokens its models were trained with
  (``decoding.encode_prompts``'s layout);
* ``"NAME:CONFIG:SPLIT:COLUMN"``: the same construction on the texts of one
  column of a Hugging Face ``datasets`` dataset, e.g. ``gsm8k:main:test:question``
  (the prompts Fast-dLLM's 3.25 tokens/step was measured on); an empty CONFIG
  (``NAME::SPLIT:COLUMN``) means the dataset's default. Loading one needs
  ``DLMSPEC_ALLOW_HUB=1``, as every download in this project does.

Prompts are fixed-length (the decoder batches them without padding): a text
shorter than the prompt is skipped, a longer one is cut.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from ..decoding.denoisers import ALLOW_HUB_ENV

BOS, BROWN, QUESTIONS = "bos", "brown", "questions"


@dataclass(frozen=True)
class DatasetSource:
    name: str
    config: str | None
    split: str
    column: str

    def __str__(self) -> str:
        return f"{self.name}:{self.config or ''}:{self.split}:{self.column}"


def parse_source(text: str) -> str | DatasetSource:
    """``"bos"``, ``"brown"`` or a ``DatasetSource``; ``ValueError`` otherwise."""
    if text in (BOS, BROWN, QUESTIONS):
        return text
    parts = text.split(":") if isinstance(text, str) else []
    if len(parts) != 4 or not all(parts[i].strip() for i in (0, 2, 3)):
        raise ValueError(
            f"prompt source {text!r} must be 'bos', 'brown', 'questions' or a "
            "dataset as NAME:CONFIG:SPLIT:COLUMN (e.g. gsm8k:main:test:question; "
            "CONFIG may be empty)"
        )
    name, config, split, column = (p.strip() for p in parts)
    return DatasetSource(name, config or None, split, column)


def hub_refusal(source: DatasetSource) -> str:
    return (f"prompt source {source} is a hub dataset: set {ALLOW_HUB_ENV}=1 to let "
            "datasets.load_dataset fetch it (or use 'brown')")


def check_source(value) -> str | None:
    """The parameter rule: None if usable here, else what is wrong (one line)."""
    try:
        source = parse_source(value)
    except ValueError as e:
        return f"is not a prompt source: {e}"
    if isinstance(source, DatasetSource) and os.environ.get(ALLOW_HUB_ENV) != "1":
        return f"cannot be loaded: {hub_refusal(source)}"
    return None


def dataset_texts(source: DatasetSource) -> list[str]:
    """The column's texts, through ``datasets.load_dataset`` (hub access opted in)."""
    if os.environ.get(ALLOW_HUB_ENV) != "1":
        raise PermissionError(hub_refusal(source))
    import datasets

    try:
        ds = datasets.load_dataset(source.name, source.config, split=source.split)
    except Exception as e:  # datasets raises many kinds (network, config, split)
        raise ValueError(f"cannot load prompt source {source}: "
                         f"{type(e).__name__}: {' '.join(str(e).split())[:200]}") from e
    if source.column not in ds.column_names:
        raise ValueError(f"prompt source {source}: no column {source.column!r} "
                         f"(it has {', '.join(ds.column_names)})")
    return [str(t) for t in ds[source.column]]


def make_prompts(tokenizer, source: str, n: int, length: int,
                 seed: int = 0) -> torch.Tensor:
    """(n, P) prompts from ``source`` (see the module docstring); P = 1 for bos,
    the math world's prompt length for questions (``length`` must be it)."""
    from ..measures.order import held_out_prompts, prefix_prompts, unconditional_prompt

    parsed = parse_source(source)
    if parsed == QUESTIONS:
        from ..worlds import MATH

        prompts = MATH.prompts(tokenizer, n, seed=seed)
        if prompts.shape[1] != length:
            raise ValueError(f"the math world's questions are {prompts.shape[1]} "
                             f"tokens long, not prompt_length={length}")
        return prompts
    if parsed == BOS:
        return unconditional_prompt(tokenizer, n)
    if parsed == BROWN:
        return held_out_prompts(tokenizer, n, length, seed=seed)
    return prefix_prompts(tokenizer, dataset_texts(parsed), n, length, seed,
                          f"texts of {parsed}")
