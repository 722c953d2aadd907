"""The decoding regime: how much of a window is text, and how fast each part decodes.

A model that learned that text ends (``[EOS]`` padding to the window, as LLaDA's
fine-tuning does; Nie et al. 2025, Appendix B.3) fills the rest of its window with
``[EOS]``, and much of Fast-dLLM's parallelism can come from that near-certain tail.
Each decode is split at its first ``[EOS]``: the *text* is what precedes it, the
*tail* the rest. A forward belongs to the tail when every token it commits is in
the tail, else to the text (so the two parts' forwards add up to the NFE and
their tokens to the window). ``cut_at_eos`` is the cut the claim pages make
before tagging, judging and counting anchors, as LLaDA's and Fast-dLLM's
``generate`` scripts cut their answers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from . import stats


def first_eos(generated: torch.Tensor, eos_id: int | None) -> torch.Tensor:
    """(B,) index of each row's first ``eos_id`` in ``generated`` (B, G); G if none."""
    B, G = generated.shape
    if eos_id is None:
        return torch.full((B,), G, dtype=torch.long, device=generated.device)
    hit = generated == eos_id
    return torch.where(hit.any(1), hit.long().argmax(1), torch.full_like(hit[:, 0], G,
                                                                         dtype=torch.long))


def text_mask(generated: torch.Tensor, eos_id: int | None) -> torch.Tensor:
    """(B, G) True before each row's first ``eos_id`` (the text), False from it on."""
    pos = torch.arange(generated.shape[1], device=generated.device)
    return pos[None, :] < first_eos(generated, eos_id)[:, None]


def cut_at_eos(rows, eos_id: int | None) -> list[list[int]]:
    """Each row (a sequence of ids) up to, not including, its first ``eos_id``."""
    out = []
    for row in rows:
        row = [int(t) for t in row]
        out.append(row[: row.index(eos_id)] if eos_id in row else row)
    return out


def text_and_tail(result, eos_id: int | None) -> pd.DataFrame:
    """Per sample: tokens and forwards of the text and of the ``[EOS]`` tail.

    ``result`` is a ``DecodeResult`` (``generated``, ``nfe``, ``commit_step``).
    Columns: ``text_tokens`` and ``tail_tokens`` (the cut at the first ``[EOS]``),
    ``text_forwards`` and ``tail_forwards`` (a forward is the tail's when all it
    commits is tail), ``text_forward_tokens`` and ``tail_forward_tokens`` (what
    each part's forwards commit; a forward that commits the last text token may
    commit tail tokens too) and ``text_fraction`` (text tokens / generated tokens).
    """
    gen, steps, nfe = result.generated, result.commit_step.cpu(), result.nfe.cpu()
    text = text_mask(gen, eos_id).cpu()
    G, rows = gen.shape[1], []
    for b in range(gen.shape[0]):
        tail_steps = set(steps[b][~text[b]].tolist()) - set(steps[b][text[b]].tolist())
        tail_steps.discard(0)  # tokens given, not decoded
        by_tail = sum(int((steps[b] == s).sum()) for s in tail_steps)
        n_text = int(text[b].sum())
        rows.append(dict(text_tokens=n_text, tail_tokens=G - n_text,
                         text_forwards=int(nfe[b]) - len(tail_steps),
                         tail_forwards=len(tail_steps),
                         text_forward_tokens=G - by_tail, tail_forward_tokens=by_tail,
                         text_fraction=n_text / G))
    return pd.DataFrame(rows)


def regime_table(runs: dict, eos_id: int | None, n_boot: int = 2000,
                 seed: int = 0) -> pd.DataFrame:
    """One row per named decode: tokens per forward overall, of the text's forwards
    and of the tail's (each with its 95 % bootstrap interval over samples; NaN for
    a part that took no forward), the text fraction with its interval, and each
    part's tokens and forwards per sample."""
    if not runs:
        raise ValueError("no decodes given: pass {name: DecodeResult}")
    out = []
    for name, r in runs.items():
        p = text_and_tail(r, eos_id)
        row = dict(decode=name)
        for part, num, den in [("", None, None),
                               ("text_", "text_forward_tokens", "text_forwards"),
                               ("tail_", "tail_forward_tokens", "tail_forwards")]:
            n = (p["text_forward_tokens"] + p["tail_forward_tokens"] if num is None
                 else p[num]).to_numpy(float)
            d = (p["text_forwards"] + p["tail_forwards"] if den is None
                 else p[den]).to_numpy(float)
            est = stats.ratio_bootstrap(n, d, n_boot, seed) if d.sum() > 0 else (
                np.nan,) * 3
            key = f"{part}tokens_per_forward"
            row[key], row[f"{key}_low"], row[f"{key}_high"] = est
        row["text_fraction"], row["text_fraction_low"], row["text_fraction_high"] = (
            stats.mean_bootstrap(p["text_fraction"].to_numpy(), n_boot, seed))
        for col in ("text_tokens", "tail_tokens", "text_forwards", "tail_forwards"):
            row[f"{col}_per_sample"] = float(p[col].mean())
        out.append(row)
    return pd.DataFrame(out).set_index("decode")


def split_note(text_fraction: float, text_tpf: float, tail_tpf: float) -> str:
    """One sentence for beside a page's bar: how much of the strongest
    accelerator's window is text and how fast each part decodes."""
    if not np.isfinite(tail_tpf):
        return (f"Its decodes are all text (text fraction {text_fraction:.3f}, no "
                f"[EOS] tail), so its {text_tpf:.2f} tokens per forward are the "
                "text's own.")
    return (f"Its text fills {text_fraction:.3f} of the window on average; its "
            f"forwards commit {text_tpf:.2f} tokens each in the text and "
            f"{tail_tpf:.2f} in the [EOS] tail.")


def bar_split(result, eos_id: int | None, n_boot: int = 2000, seed: int = 0) -> dict:
    """The regime of one decode (the strongest accelerator's, beside a page's
    ``alpha*``), keys prefixed ``regime_``: ``text_fraction`` with its 95 %
    interval (``_lo``, ``_hi``), ``text_tpf`` and ``tail_tpf`` (tokens per forward
    of each part; NaN for a part with no forward) and ``note`` (``split_note``)."""
    row = regime_table({"strongest": result}, eos_id, n_boot, seed).iloc[0]
    out = {"text_fraction": float(row["text_fraction"]),
           "text_fraction_lo": float(row["text_fraction_low"]),
           "text_fraction_hi": float(row["text_fraction_high"]),
           "text_tpf": float(row["text_tokens_per_forward"]),
           "tail_tpf": float(row["tail_tokens_per_forward"])}
    out["note"] = split_note(out["text_fraction"], out["text_tpf"], out["tail_tpf"])
    return {f"regime_{k}": x for k, x in out.items()}
