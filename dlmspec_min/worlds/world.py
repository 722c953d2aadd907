"""The ``World`` interface: what every world provides to a claim's measurement."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from .. import catalogue


@dataclass(frozen=True)
class World:
    """What a claim is measured in; subclasses say where text and roles come from.

    ``entry``: the world's catalogue entry (``dlmspec_min.catalogue``), the one
    definition of its facts; the world reads them from it. ``ladder``: model names,
    smallest first. ``draft``, ``target`` and ``strong``: the claims' default draft,
    target and strong model (C7). ``decode``: the world's default decode
    (``gen_length``, ``block_length``, ``threshold``). ``context_free``: whether the
    world has decodes without context (prose: from ``[BOS]`` alone); the math
    world's models answer questions, so every decode there has one, and C6 measures
    its prompted side only. ``order_in_blocks``: whether C1's order decodes
    (confidence, random, threshold) run in the ``block_length`` blocks of the page,
    their decode time counted inside each block (``order.block_times``), instead of
    in one block over the whole generation: in the math world a single 96-token
    block commits the learned ``[EOS]`` tail first and leaves a few words of text
    (decided 2026-12-03, ``book/claims.yml``).

    A world's *roles* (``roles()``) are a callable from a list of words to their
    classes (``measures.tagger``'s ``content``, ``function``, ``punct``); every
    function that tags tokens (``tagger.classes_of_tokens``,
    ``ssld.inputs.anchor_mask``, ``order.token_table``) takes it. ``tagger``
    replaces the world's own (``retagged``).
    """

    entry: catalogue.Entry
    tagger: Callable[[list[str]], list[str]] | None = None

    # the entry's facts, read from it (never restated here)
    name = property(lambda self: self.entry.name)
    title = property(lambda self: self.entry.title)
    ladder = property(lambda self: self.entry.ladder)
    decode = property(lambda self: self.entry.decode)
    context_free = property(lambda self: self.entry.context_free)
    order_in_blocks = property(lambda self: self.entry.order_in_blocks)
    # the claims' roles: model names of the entry's rungs
    draft = property(lambda self: self.entry.role("draft"))
    target = property(lambda self: self.entry.role("target"))
    strong = property(lambda self: self.entry.role("strong"))

    def order_blocks(self, block_length: int) -> int | None:
        """The block length of C1's order decodes in this world: ``block_length``
        where the order is measured inside blocks (``order_in_blocks``), None
        (one block over the whole generation) elsewhere."""
        return block_length if self.order_in_blocks else None

    def tokenizer(self):
        """The world's tokenizer (every model of its ladder shares it)."""
        raise NotImplementedError

    def roles(self):
        """words -> classes: how this world tells content from function words."""
        return self.default_roles() if self.tagger is None else self.tagger

    def default_roles(self):
        """The world's own roles (``roles`` unless ``tagger`` replaces them)."""
        raise NotImplementedError

    def token_classes(self, tokenizer, ids) -> list[str]:
        """Per token id: ``content``, ``function``, ``punct`` or ``special``; a
        word's pieces share its class."""
        from ..measures.tagger import classes_of_tokens

        return classes_of_tokens(tokenizer, ids, self.roles())

    def prompts(self, tokenizer, n: int, seed: int = 0, device="cpu") -> torch.Tensor:
        """(n, P) prompts of the world's default task."""
        raise NotImplementedError

    def prompt_pair(self, tokenizer, n: int, prompt_length: int, seed: int = 0,
                    device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """C6's two prompt sets, (n, P) each: without context and with it."""
        raise NotImplementedError

    @property
    def row_length(self) -> int:
        """Tokens per row of ``training_rows`` (a decode's prompt and generation
        must fit in one)."""
        raise NotImplementedError

    def training_rows(self, tokenizer, n: int, seed: int,
                      prompt: torch.Tensor | None = None,
                      seq_len: int | None = None) -> torch.Tensor:
        """(n, L) token rows of the world's TRAINING text, seeded, laid out as its
        decodes are (the first ``prompt.shape[1]`` tokens a prompt): what the SID
        head of the SSLD drafts learns from (``ssld.drafting.training_windows``)."""
        raise NotImplementedError

    def held_out_rows(self, n: int, seed: int = 0):
        """(tokenizer, (n, L) held-out rows in its tokens), drawn with ``seed``:
        the text C7 measures determinedness on."""
        raise NotImplementedError

    def answers(self, n: int, seed: int = 0) -> list[int] | None:
        """The correct answers of ``prompts(tokenizer, n, seed)``, in order; None
        in a world whose texts have no answer (its quality is the judge's)."""
        return None

    def answer_correct(self, tokenizer, generated, answers) -> np.ndarray:
        """(B,) 1.0 where a decode's answer equals ``answers`` (a world with
        answers only)."""
        raise NotImplementedError(f"the {self.name} world has no answers")

    def token_counts(self, tokenizer, vocab_size: int | None = None) -> np.ndarray:
        """How often each token id occurs in the world's training text (the
        frequency control of C1's regressions)."""
        raise NotImplementedError


def retagged(world: World, tagger: Any) -> World:
    """``world`` with ``tagger`` (words -> classes, e.g. a ``tagger.Lexicon``) as
    its roles: everything else, prompts and training text included, unchanged."""
    if not callable(tagger):
        raise ValueError(f"tagger must be callable (words -> classes), got {tagger!r}")
    return replace(world, tagger=tagger)
