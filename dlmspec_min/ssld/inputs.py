"""What SSLD sees before infill: the visible input and the content anchors.

SPEC.md section 3 [DERIVED]:

- **Anchors** (``anchor_mask``): the content WORDS of the target's own decode
  of the same prompt and seed (oracle anchors, the best case for SSLD), each
  represented by its first piece; a word's continuation pieces (``##s``, an
  unmarked BPE piece) are no anchors of their own and are left to the infill
  (issue 14, 2026-12-01). ``unit="piece"`` gives the former definition, every
  content position, kept as the named secondary measurement.
- **What the draft sees** (``visible_input``): only what SSLD allows before
  infill, i.e. the prompt and the positions; every generated position is
  masked.
"""

from __future__ import annotations

import torch

# --- what SSLD sees -------------------------------------------------------------------


def visible_input(prompt: torch.Tensor, gen_length: int, mask_id: int) -> torch.Tensor:
    """The prompt followed by ``gen_length`` masks: (B, P) -> (B, P + G)."""
    if prompt.dim() != 2:
        raise ValueError("prompt must be (batch, prompt_length); use prompt[None]")
    masks = torch.full((prompt.shape[0], gen_length), int(mask_id),
                       dtype=prompt.dtype, device=prompt.device)
    return torch.cat([prompt, masks], dim=1)


def content_mask(tokenizer, ids: torch.Tensor, lexicon) -> torch.Tensor:
    """(B, L) token ids -> (B, L) bool, True where the token's word is content.

    Per row, through ``tagger.classes_of_tokens`` (``##`` pieces inherit their
    word's class; special tokens are never content).
    """
    from ..measures.tagger import CONTENT, classes_of_tokens

    rows = [[c == CONTENT for c in classes_of_tokens(tokenizer, r.tolist(), lexicon)]
            for r in ids.cpu()]
    return torch.tensor(rows, dtype=torch.bool, device=ids.device).reshape(ids.shape)


ANCHOR_UNITS = ("word", "piece")  # the headline unit first


def continuation_mask(tokenizer, ids: torch.Tensor) -> torch.Tensor:
    """(B, L) token ids -> (B, L) bool, True where a token continues the word of the
    token before it (``tokenizer.continues_word``: a ``##`` piece, an unmarked
    BPE piece); word starts and special tokens are False."""
    from ..texts.tokenizer import continues_word

    if ids.dim() != 2:
        raise ValueError(f"ids must be (batch, length), got shape {tuple(ids.shape)}")
    rows = [continues_word(tokenizer, r.tolist()) for r in ids.cpu()]
    return torch.tensor(rows, dtype=torch.bool, device=ids.device).reshape(ids.shape)


def anchor_mask(tokenizer, ids: torch.Tensor, lexicon, unit: str = "word"):
    """(B, L) token ids -> (B, L) bool: the content anchors at ``unit`` level.

    ``unit="word"`` (the book's anchors): one anchor per content word, at its
    first piece; the word's continuation pieces are not anchors. ``"piece"``:
    every content position, continuation pieces included (``content_mask``).
    """
    if unit not in ANCHOR_UNITS:
        raise ValueError(f"unknown anchor unit {unit!r}; use one of {ANCHOR_UNITS}")
    if ids.dim() != 2:
        raise ValueError(f"ids must be (batch, length), got shape {tuple(ids.shape)}")
    content = content_mask(tokenizer, ids, lexicon)
    if unit == "piece":
        return content
    return content & ~continuation_mask(tokenizer, ids)


def continuation_share(tokenizer, ids: torch.Tensor, lexicon) -> float:
    """Share of the piece-level anchors of ``ids`` (B, L) that continue a word:
    the positions that ``unit="word"`` drops. Raises if there is no anchor."""
    piece = anchor_mask(tokenizer, ids, lexicon, unit="piece")
    if not piece.any():
        raise ValueError("the sequences hold no content token: no anchors to count")
    cont = piece & continuation_mask(tokenizer, ids)
    return float(cont.sum()) / float(piece.sum())
