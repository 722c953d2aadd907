"""Texts to the (B, P) prompt batch ``generate`` takes.

The decoder reads prompts as a LongTensor with no attention mask, so a batch
of texts of different lengths is left-padded: every row's generation then
starts at the same position P. A tokenizer's own ``__call__`` pads on the
right and the embedded tokenizer adds no start token, so neither fits as is.
``encode_prompts`` writes each row as ``[PAD]* [BOS] text``:

- the embedded math models (``dlmspec/math_free/...``) were trained on exactly
  this layout with P = 32 (``Denoiser.prompt_length``, read from the model's
  ``training.json``): pass ``length=denoiser.prompt_length``;
- the embedded prose models (``dlmspec/small|base|large``) were trained on
  windows that start with ``[BOS]`` and never saw ``[PAD]``: a row shorter
  than the batch's longest reads its ``[PAD]``s as context, so it may decode
  differently from the same prompt alone. Batch prompts of one length (or
  decode one at a time) where that matters.
"""

from __future__ import annotations

import torch


def _start_id(tokenizer) -> int | None:
    for attr in ("bos_token_id", "cls_token_id"):
        value = getattr(tokenizer, attr, None)
        if isinstance(value, int):
            return value
    return None


def encode_prompts(tokenizer, texts, *, length: int | None = None,
                   device="cpu") -> torch.Tensor:
    """Encode texts as a left-padded prompt batch: ``[PAD]* [BOS] text`` per row.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        The denoiser's tokenizer (``load_denoiser`` returns it); its start token
        is ``bos_token_id``, else ``cls_token_id``, else none, and it must have
        a ``pad_token_id`` when rows need padding.
    texts : str or sequence of str
        One prompt text or several (each a row); a text may be empty (the row
        is then the start token alone).
    length : int or None, keyword-only, default None
        P, the prompt length every row is padded to; None: the longest row's.
        The embedded math models need their trained layout:
        ``length=denoiser.prompt_length`` (32).
    device : str or torch.device, keyword-only, default "cpu"
        Where the batch is made.

    Returns
    -------
    torch.Tensor
        (B, P) long token ids, ``generate``'s ``prompt``.

    Raises
    ------
    ValueError
        No texts, a text that is not a string, a row longer than ``length``,
        or rows to pad with a tokenizer that has no pad token.

    Examples
    --------
    >>> denoiser, tokenizer = load_denoiser("dlmspec/math_free/small")  # doctest: +SKIP
    >>> prompt = encode_prompts(tokenizer, ["Ann has 3 apples ..."],
    ...                         length=denoiser.prompt_length)  # doctest: +SKIP
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts:
        raise ValueError("texts is empty; give at least one prompt text")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise ValueError(f"texts must be strings; texts[{bad[0]}] is a "
                         f"{type(texts[bad[0]]).__name__}")
    start = _start_id(tokenizer)
    rows = [([] if start is None else [start])
            + tokenizer.encode(t, add_special_tokens=False) for t in texts]
    longest = max(len(r) for r in rows)
    if length is None:
        length = longest
    elif not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ValueError(f"length must be a positive int or None, got {length!r}")
    if longest > length:
        i = max(range(len(rows)), key=lambda k: len(rows[k]))
        raise ValueError(
            f"texts[{i}] takes {longest} tokens with the start token, more than "
            f"length={length}; shorten it or raise length"
        )
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None and any(len(r) < length for r in rows):
        raise ValueError("the tokenizer has no pad_token_id to left-pad rows with; "
                         "give texts of one length")
    batch = [[pad] * (length - len(r)) + r for r in rows]
    return torch.tensor(batch, dtype=torch.long, device=device)
