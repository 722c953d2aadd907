"""Determinedness of a token given the rest of its finished sequence (C7).

The paper ("Speculating the Bottleneck", abstract) reports that the failure of
SSLD "persists on a strong 8B model, where content is twice as determined". It
does not say how determinedness is measured; this module is our formalization
(SPEC.md section 5, C7) [DERIVED]:

For a finished sequence x (L tokens) and one position j, mask x_j alone and
read the model's distribution p_j at j given every other token, i.e. the full
final context except that position. Per measured position:

- ``top1_prob``  max_v p_j(v), the determinedness of the position; D is its
  mean over content positions (and, as a contrast, over function positions);
- ``correct``    1{argmax_v p_j(v) == x_j}, top-1 accuracy;
- ``entropy``    -sum_v p_j(v) log p_j(v), in nats;
- ``p_true``     p_j(x_j), the probability of the token actually there.

p_j is the distribution the decoder proposes from: softmax of the logits in
float64 with the mask token excluded (its logit set to -inf; the decoder never
writes a mask, and a trained model gives it almost no mass anyway).

**Exact scheme.** Every measured (row, position) pair becomes one copy of its
row with exactly that position masked (``masked_copies``); copies are stacked
on the batch axis and run ``batch`` at a time (``leave_one_out``). No copy
holds a second mask, so each value is exactly the leave-one-out conditional,
not an approximation by masking several positions at once. The cost is one
row-forward per measured position; ``select_positions`` draws a seeded subset
of positions per row when that is too many.

**The same text for every model.** ``reencode`` rewrites windows of one
tokenizer as the same words in another tokenizer (a model with another
vocabulary), so determinedness is compared on the same held-out text, row by
row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .entropy import entropy_of_log_probs, log_probs

DEFAULT_BATCH = 64  # row copies per forward
MEASURES = ("top1_prob", "correct", "entropy", "p_true")


# --- which positions, and the copies that mask them -----------------------------------


def select_positions(
    classes, keep, n_per_row: int | None = None, seed: int = 0
) -> torch.Tensor:
    """Positions to measure: (B, L) array of class names -> (B, L) bool.

    A position is eligible if its class is in ``keep``. With ``n_per_row`` (an
    int >= 1) each row keeps a uniformly random subset of at most that many
    eligible positions (numpy ``default_rng(seed)``, rows in order), so the
    mean over the subset is an unbiased estimate of the mean over the row.
    ``None`` keeps every eligible position.
    """
    classes = np.asarray(classes)
    if classes.ndim != 2:
        raise ValueError(f"classes must be (rows, length), got shape {classes.shape}")
    if n_per_row is not None and not (isinstance(n_per_row, int) and n_per_row >= 1):
        raise ValueError(f"n_per_row must be None or an int >= 1, got {n_per_row!r}")
    eligible = np.isin(classes, list(keep))  # (B, L)
    if n_per_row is None:
        return torch.from_numpy(eligible)
    rng = np.random.default_rng(seed)
    out = np.zeros_like(eligible)
    for i, row in enumerate(eligible):
        idx = np.flatnonzero(row)
        if len(idx) > n_per_row:
            idx = np.sort(rng.choice(idx, size=n_per_row, replace=False))
        out[i, idx] = True
    return torch.from_numpy(out)


def masked_copies(
    windows: torch.Tensor, positions: torch.Tensor, mask_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One copy of a row per measured position, with exactly that position masked.

    windows (B, L) token ids without masks, positions (B, L) bool. Returns
    copies (N, L), rows (N,) and cols (N,) where N = positions.sum(), in
    row-major order of the positions: copies[n] is windows[rows[n]] with
    copies[n, cols[n]] = mask_id.
    """
    if windows.dim() != 2 or positions.shape != windows.shape:
        raise ValueError(
            f"windows must be (rows, length) and positions the same shape; got "
            f"{tuple(windows.shape)} and {tuple(positions.shape)}"
        )
    if positions.dtype != torch.bool:
        raise ValueError("positions must be a bool tensor (True = measure here)")
    if bool((windows == mask_id).any()):
        raise ValueError(
            "the windows already hold mask tokens; determinedness needs finished "
            "text, where only the measured position is masked"
        )
    rows, cols = positions.nonzero(as_tuple=True)  # (N,), (N,)
    copies = windows[rows].clone()  # (N, L)
    copies[torch.arange(len(rows), device=copies.device), cols] = int(mask_id)
    return copies, rows, cols


# --- the measurement ------------------------------------------------------------------


@dataclass
class LeaveOneOut:
    """Per-position measures (B, L) float64; NaN where nothing was measured."""

    top1_prob: torch.Tensor
    correct: torch.Tensor
    entropy: torch.Tensor
    p_true: torch.Tensor
    measured: torch.Tensor  # (B, L) bool

    def per_row(
        self, measure: str, where: torch.Tensor
    ) -> tuple[np.ndarray, np.ndarray]:
        """Sum of ``measure`` and the count of measured positions per row where
        ``where`` (B, L) holds: (B,), (B,) numpy, ready for a sequence bootstrap."""
        if measure not in MEASURES:
            raise ValueError(f"unknown measure {measure!r}; use one of {MEASURES}")
        if where.shape != self.measured.shape:
            raise ValueError(
                f"where {tuple(where.shape)} must match the windows "
                f"{tuple(self.measured.shape)}"
            )
        sel = self.measured & where.to(self.measured.device).bool()
        values = getattr(self, measure)  # (B, L)
        sums = torch.where(sel, values, torch.zeros_like(values)).sum(1)
        return sums.cpu().numpy(), sel.sum(1).cpu().numpy()


def position_measures(
    logits: torch.Tensor, true_tokens: torch.Tensor, mask_id: int | None
) -> dict[str, torch.Tensor]:
    """The four measures from the logits at the masked positions.

    logits (N, V), true_tokens (N,) -> dict of (N,) float64 tensors. The mask
    token (if it is in the vocabulary) is excluded before the softmax.
    """
    if logits.dim() != 2 or true_tokens.shape != logits.shape[:1]:
        raise ValueError(
            f"logits must be (N, V) and true_tokens (N,); got {tuple(logits.shape)} "
            f"and {tuple(true_tokens.shape)}"
        )
    excluded = mask_id if mask_id is not None and 0 <= mask_id < logits.shape[-1] \
        else None
    logp = log_probs(logits, excluded)  # (N, V) float64
    p = logp.exp()
    top1, arg = p.max(dim=-1)  # (N,), (N,)
    return {
        "top1_prob": top1,
        "correct": (arg == true_tokens).double(),
        "entropy": entropy_of_log_probs(logp),
        "p_true": p.gather(-1, true_tokens[:, None]).squeeze(-1),
    }


def _logits_at(denoiser, copies: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Logits (n, V) at each copy's masked column: (n, L) -> (n, V).

    The embedded model computes its output head only there (``output_mask``);
    any other denoiser gives all positions and the column is picked out.
    """
    from ..decoding.modeling import DLMForMaskedDiffusion

    model = getattr(denoiser, "model", None)
    if isinstance(model, DLMForMaskedDiffusion) and not denoiser.shifted:
        sel = torch.zeros_like(copies, dtype=torch.bool)
        sel[torch.arange(len(cols), device=copies.device), cols] = True
        with torch.no_grad():
            return model(input_ids=copies, output_mask=sel).logits  # (n, V)
    logits = denoiser.logits(copies)  # (n, L, V)
    return logits[torch.arange(len(cols), device=logits.device), cols.to(logits.device)]


def leave_one_out(
    denoiser, windows: torch.Tensor, positions: torch.Tensor,
    batch: int = DEFAULT_BATCH,
) -> LeaveOneOut:
    """The determinedness measures at ``positions`` of finished ``windows``.

    windows (B, L) token ids (no masks), positions (B, L) bool. One forward row
    per measured position, exactly one mask in it (see the module docstring);
    ``batch`` rows per forward. Returns (B, L) float64 measures, NaN elsewhere.
    """
    if not (isinstance(batch, int) and batch >= 1):
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    copies, rows, cols = masked_copies(windows, positions.to(windows.device),
                                       denoiser.mask_id)
    out = {m: torch.full(windows.shape, float("nan"), dtype=torch.float64,
                         device=windows.device) for m in MEASURES}
    for i in range(0, len(rows), batch):
        r, c = rows[i:i + batch], cols[i:i + batch]
        logits = _logits_at(denoiser, copies[i:i + batch], c)  # (n, V)
        got = position_measures(logits, windows[r, c].to(logits.device),
                                denoiser.mask_id)
        for m, v in got.items():
            out[m][r, c] = v.to(windows.device)
    return LeaveOneOut(**out, measured=positions.to(windows.device).clone())


# --- the same text in another tokenizer -----------------------------------------------


def same_vocabulary(tokenizer_a, tokenizer_b) -> bool:
    """True iff the two tokenizers map every token string to the same id."""
    if tokenizer_a is tokenizer_b:
        return True
    return tokenizer_a.get_vocab() == tokenizer_b.get_vocab()


def reencode(windows: torch.Tensor, src_tokenizer, dst_tokenizer) -> torch.Tensor:
    """The text of ``windows`` (B, L) written in ``dst_tokenizer``'s tokens: (B, L').

    With the same vocabulary the windows come back unchanged (a copy). Otherwise
    each row's words (``tokenizer.words_of``: special tokens dropped, ``##``
    pieces joined) are joined with spaces and encoded without special tokens,
    after the destination's [BOS] (else [CLS], else nothing; as
    ``order.unconditional_prompt``); every row is then cut to the shortest, so
    the result is rectangular and each row holds the start of the same text.
    """
    from ..texts.tokenizer import words_of
    from .order import unconditional_prompt

    if windows.dim() != 2:
        raise ValueError(f"windows must be (rows, length), got {tuple(windows.shape)}")
    if same_vocabulary(src_tokenizer, dst_tokenizer):
        return windows.clone()
    texts = [" ".join(words_of(src_tokenizer, row.tolist())) for row in windows.cpu()]
    enc = dst_tokenizer(texts, add_special_tokens=False)["input_ids"]
    start = unconditional_prompt(dst_tokenizer, 1)[0].tolist()  # [] or [bos]
    rows = [start + list(ids) for ids in enc]
    length = min(len(r) for r in rows)
    if length <= len(start):
        raise ValueError("a window encodes to no tokens in the destination tokenizer")
    return torch.tensor([r[:length] for r in rows], dtype=torch.long,
                        device=windows.device)
