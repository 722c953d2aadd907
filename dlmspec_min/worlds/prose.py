"""The ``prose`` world: Brown's running text (SPEC.md section 6).

Text source: the Brown corpus (``training.corpus``, 448 training and 52
held-out documents); tokenizer: the 8k WordPiece of ``data/models/tokenizer``;
roles: each word's most frequent gold class on Brown's training split
(``measures.tagger.Lexicon``); prompts: ``[BOS]`` (unconditional generation,
the claims' default); ladder: ``dlmspec/small``, ``base``, ``large``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .world import World


@dataclass(frozen=True)
class ProseWorld(World):
    def tokenizer(self):
        from ..training.tokenizer import load_tokenizer

        return load_tokenizer()

    def token_classes(self, tokenizer, ids) -> list[str]:
        from ..measures.tagger import classes_of_tokens, default_lexicon

        return classes_of_tokens(tokenizer, ids, default_lexicon())

    def prompts(self, tokenizer, n: int, seed: int = 0) -> torch.Tensor:
        """Unconditional generation: (n, 1) ``[BOS]`` (``seed`` is not used)."""
        from ..measures.order import unconditional_prompt

        return unconditional_prompt(tokenizer, n)


PROSE = ProseWorld(
    name="prose",
    title="Brown prose",
    ladder=("dlmspec/small", "dlmspec/base", "dlmspec/large"),
    draft="dlmspec/small",
    target="dlmspec/base",
    strong="dlmspec/large",
    decode=dict(gen_length=48, block_length=16, threshold=0.9),
)
