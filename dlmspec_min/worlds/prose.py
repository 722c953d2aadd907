"""The ``prose`` world: Brown's running text (SPEC.md section 6).

Text source: the Brown corpus (``texts.corpus``, 448 training and 52
held-out documents); tokenizer: the 8k WordPiece of ``data/models/tokenizer``;
roles: each word's most frequent gold class on Brown's training split
(``measures.tagger.Lexicon``); prompts: ``[BOS]`` (unconditional generation,
the claims' default); ladder: ``dlmspec/small``, ``base``, ``large``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from .. import catalogue
from .world import World


@functools.lru_cache(maxsize=4)
def _training_windows(tokenizer, seq_len: int | None) -> torch.Tensor:
    """Every Brown training window of a tokenizer (cached: encoding takes seconds)."""
    from ..texts.corpus import brown_dataset
    from ..training import train

    docs = train.encode_documents(brown_dataset("train"), tokenizer)
    return train.windows(docs, seq_len or train.SEQ_LEN)


@dataclass(frozen=True)
class ProseWorld(World):
    def tokenizer(self):
        from ..texts.tokenizer import load_tokenizer

        return load_tokenizer()

    def default_roles(self):
        """The Brown lexicon (``tagger.default_lexicon``)."""
        from ..measures.tagger import default_lexicon

        return default_lexicon()

    def prompts(self, tokenizer, n: int, seed: int = 0, device="cpu") -> torch.Tensor:
        """Unconditional generation: (n, 1) ``[BOS]`` (``seed`` is not used)."""
        from ..measures.order import unconditional_prompt

        return unconditional_prompt(tokenizer, n, device=device)

    def prompt_pair(self, tokenizer, n, prompt_length, seed=0, device="cpu"):
        """``[BOS]`` alone, and ``[BOS]`` then the first tokens of held-out Brown
        sentences (``order.held_out_prompts``, ``seed`` their order); a
        ``prompt_length`` no longer than the start token gives ``[BOS]`` twice."""
        from ..measures.order import held_out_prompts

        without = self.prompts(tokenizer, n, device=device)
        if prompt_length <= without.shape[1]:
            return without, without.clone()
        return without, held_out_prompts(tokenizer, n, prompt_length,
                                         seed=seed).to(device)

    @property
    def row_length(self) -> int:
        from ..training.train import SEQ_LEN

        return SEQ_LEN

    def training_rows(self, tokenizer, n, seed, prompt=None, seq_len=None):
        """n Brown training windows, drawn without replacement (at most all of
        them), in corpus order. The windows start at sentence boundaries with the
        project tokenizer's ``[BOS]`` (``train.windows``); a ``prompt``'s first
        token replaces it (another tokenizer's BOS)."""
        rows = _training_windows(tokenizer, seq_len)
        pick = np.random.default_rng(seed).choice(len(rows), size=min(n, len(rows)),
                                                  replace=False)
        windows = rows[np.sort(pick)].clone()
        if prompt is not None and prompt.shape[1]:
            windows[:, 0] = int(prompt[0, 0])
        return windows

    def held_out_rows(self, n, seed=0):
        """The project tokenizer and ``n`` held-out Brown windows drawn with
        ``seed`` (sorted), in its tokens."""
        from ..training import train

        tok = self.tokenizer()
        held = train.held_out_windows(tok)
        if n > len(held):
            raise ValueError(
                f"n_windows = {n}: only {len(held)} held-out windows exist")
        pick = np.sort(np.random.default_rng(seed).choice(len(held), n, replace=False))
        return tok, held[pick]

    def token_counts(self, tokenizer, vocab_size=None):
        """Token counts over Brown's training split (``order.brown_token_counts``)."""
        from ..measures.order import brown_token_counts

        return brown_token_counts(tokenizer, vocab_size=vocab_size)


def prose_world(entry: catalogue.Entry) -> ProseWorld:
    """The prose world of a catalogue entry: its ladder, roles and decode."""
    if entry.kind != "prose":
        raise ValueError(f"{entry.name!r} is a {entry.kind} world, not a prose world")
    return ProseWorld(entry)


PROSE = prose_world(catalogue.get("prose"))
