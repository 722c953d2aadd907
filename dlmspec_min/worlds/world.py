"""The ``World`` interface: what every world provides, and the shared anchor rule."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..measures.tagger import CONTENT

ANCHOR_UNITS = ("word", "piece")


@dataclass(frozen=True)
class World:
    """What a claim is measured in; subclasses say how tokens get their roles.

    ``ladder``: model names, smallest first. ``draft``, ``target`` and ``strong``:
    the claims' default draft, target and strong model (C7). ``decode``: the
    world's default decode (``gen_length``, ``block_length``, ``threshold``).
    """

    name: str
    title: str
    ladder: tuple[str, ...]
    draft: str
    target: str
    strong: str
    decode: dict = field(default_factory=dict)

    def tokenizer(self):
        """The world's tokenizer (every model of its ladder shares it)."""
        raise NotImplementedError

    def token_classes(self, tokenizer, ids) -> list[str]:
        """Per token id: ``content``, ``function``, ``punct`` or ``special``
        (``measures.tagger``'s classes); a word's pieces share its class."""
        raise NotImplementedError

    def prompts(self, tokenizer, n: int, seed: int = 0) -> torch.Tensor:
        """(n, P) prompts of the world's default task."""
        raise NotImplementedError

    def content_mask(self, tokenizer, ids: torch.Tensor) -> torch.Tensor:
        """(B, L) token ids -> (B, L) bool, True where the token's word is content."""
        if ids.dim() != 2:
            raise ValueError(f"ids must be (batch, length), got {tuple(ids.shape)}")
        rows = [[c == CONTENT for c in self.token_classes(tokenizer, r.tolist())]
                for r in ids.cpu()]
        return torch.tensor(rows, dtype=torch.bool,
                            device=ids.device).reshape(ids.shape)

    def anchor_mask(self, tokenizer, ids: torch.Tensor, unit: str = "word"):
        """(B, L) -> (B, L) bool: content anchors, one per content word at its
        first piece (``unit="word"``) or every content piece (``"piece"``)."""
        from ..training.tokenizer import continues_word

        if unit not in ANCHOR_UNITS:
            raise ValueError(f"unknown anchor unit {unit!r}; use one of {ANCHOR_UNITS}")
        content = self.content_mask(tokenizer, ids)
        if unit == "piece":
            return content
        cont = torch.tensor([continues_word(tokenizer, r.tolist()) for r in ids.cpu()],
                            dtype=torch.bool, device=ids.device).reshape(ids.shape)
        return content & ~cont
