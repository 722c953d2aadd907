"""Codebooks, and alpha_SID pooled over them.

A codebook (``codebooks``) is one seeded set of k-means semantic IDs with the
drafts built for it (the head trained for those IDs). alpha_SID in a verdict
is the mean over several codebooks on one decode (``pooled_acceptance``), its
CI resampling codebooks and sequences; ``acceptance_table`` is one codebook's
alpha_SID per draft, ``FIRST_PASS`` names the target's own first-pass guess.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..measures import stats
from .decoder import target_cluster_argmax, verify_logits
from .drafting import (
    DRAFT_NAMES,
    Draft,
    HeadDraft,
    SmallMarginalDraft,
    drafts_for,
    training_windows,
)
from .semantic import SemanticIDs, majority_chance, semantic_ids_for

FIRST_PASS = "target itself, first all-masked pass"  # the target's own ID guess


# --- acceptance -----------------------------------------------------------------------


def per_sequence(hit: torch.Tensor, where: torch.Tensor):
    """Hits and trials per row, counted where ``where`` holds: (B, G) -> (B,), (B,)."""
    if hit.shape != where.shape:
        raise ValueError(
            f"hit {tuple(hit.shape)} and where {tuple(where.shape)} differ"
        )
    where = where.bool()
    return (hit.bool() & where).sum(1).cpu().numpy(), where.sum(1).cpu().numpy()


def sid_hits(
    sids: torch.Tensor, target_tokens: torch.Tensor, anchors: torch.Tensor,
    sid: SemanticIDs,
) -> tuple[np.ndarray, np.ndarray]:
    """alpha_SID's numerator and denominator per row: 1{drafted SID == sigma(token)}."""
    return per_sequence(sids.to(target_tokens.device) == sid(target_tokens), anchors)


def acceptance_table(
    sids_by_name: dict[str, torch.Tensor], tokens: torch.Tensor, anchors: torch.Tensor,
    sid: SemanticIDs, n_boot: int = 2000, seed: int = 0,
) -> pd.DataFrame:
    """alpha_SID per named prediction (B, G) of sigma(tokens) at anchors, with CIs.

    One row per name: hits, anchors, alpha and the 95 % interval of
    ``stats.rate_ci`` (sequence bootstrap united with Clopper-Pearson).
    """
    rows = []
    for name, sids in sids_by_name.items():
        hits, n = sid_hits(sids, tokens, anchors, sid)
        est, lo, hi = stats.rate_ci(hits, n, n_boot, seed)
        rows.append(dict(prediction=name, hits=int(hits.sum()), anchors=int(n.sum()),
                         alpha=est, low=lo, high=hi))
    return pd.DataFrame(rows).set_index("prediction")


def best_draft_row(table: pd.DataFrame, sid: SemanticIDs, tokens: torch.Tensor,
                   anchors: torch.Tensor) -> dict:
    """One seed's summary from an ``acceptance_table`` that holds both drafts: the
    best draft, its alpha and interval, each draft's alpha, the majority-ID rate."""
    drafts = table.loc[list(DRAFT_NAMES)]
    best = drafts["alpha"].idxmax()
    return {
        "best draft": best, "alpha_SID": drafts.loc[best, "alpha"],
        "low": drafts.loc[best, "low"], "high": drafts.loc[best, "high"],
        "alpha_SID, head": drafts.loc[HeadDraft.name, "alpha"],
        "alpha_SID, marginal": drafts.loc[SmallMarginalDraft.name, "alpha"],
        "majority-ID rate": majority_chance(sid(tokens)[anchors].cpu().numpy(),
                                            sid.n_clusters),
    }


SPREAD = "sd between codebooks"  # width_parts: what more questions leave as it is
QUESTIONS_SHARE = "half-width over questions alone"


def codebook_seeds(seed: int, n: int) -> list[int]:
    """The ``n`` codebook seeds a build with ``seed`` pools: seed*n, ..., seed*n + n-1.

    Builds with different seeds draw disjoint sets, so a second build's pooled
    acceptance rests on codebooks (k-means IDs and draft heads) the first never
    used.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the number of codebooks must be an integer >= 1, got {n!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return [seed * n + i for i in range(n)]


@dataclass
class Codebook:
    """One codebook seed's semantic IDs, the drafts fitted to them, their guesses."""

    seed: int
    sid: SemanticIDs
    windows: torch.Tensor  # (N, T) the head's Brown training windows
    content: torch.Tensor  # (N, T) their anchor masks (the head's training rows)
    drafters: dict  # name -> fitted draft (SmallMarginalDraft, HeadDraft)
    outputs: dict[str, Draft]  # name -> the draft's output for the prompt
    preds: dict[str, torch.Tensor]  # name -> (B, G) IDs: the drafts and FIRST_PASS
    table: pd.DataFrame  # acceptance_table of preds


@dataclass(frozen=True)
class Scored:
    """The one fixed decode every codebook is scored on: ``prompt`` (B, P), the
    target's ``tokens`` (B, G) and the ``anchors`` (B, G) among them, counted in
    ``unit`` (``inputs.anchor_mask``'s: ``"word"`` or ``"piece"``; the head is
    trained on anchors of the same unit)."""

    prompt: torch.Tensor
    tokens: torch.Tensor
    anchors: torch.Tensor
    unit: str = "word"


@dataclass(frozen=True)
class Settings:
    """How the codebooks are built and scored: ``K`` k-means clusters of ``levels``
    residual levels, the head trained on ``n_train`` rows, ``n_bootstrap``
    replicates drawn with ``seed``. A claim page's ``Config`` has these fields
    and serves as one (``codebooks(..., config, ...)``)."""

    K: int
    levels: int = 1
    n_train: int = 2048
    n_bootstrap: int = 2000
    seed: int = 0


def codebooks(
    target, draft_denoiser, tokenizer, world, scored: Scored, settings: Settings,
    seeds: Sequence[int], *, head_kw: dict | None = None,
    verify: torch.Tensor | None = None, seq_len: int | None = None,
) -> dict[int, Codebook]:
    """Rebuild the IDs and both drafts for each seed, on one fixed decode.

    For each seed: k-means IDs over the target's input embeddings
    (``semantic_ids_for``, ``settings.K`` and ``levels``), ``settings.n_train``
    training rows of ``world`` for the head (``training_windows``, laid out as
    ``scored.prompt``, anchors in ``scored.unit``), both drafts
    (``drafts_for``), the target's own first-pass guess (``verify`` (B, G, V):
    ``verify_logits`` of the prompt, computed here if None) and their
    ``acceptance_table`` on ``scored.tokens``/``anchors`` (B, G), the target's
    decode (``settings.n_bootstrap`` replicates, seed ``settings.seed``).
    ``seq_len`` sets the training windows' length (default: the models').
    """
    prompt, tokens, anchors = scored.prompt, scored.tokens, scored.anchors
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    P, G = prompt.shape[1], tokens.shape[1]
    if verify is None:
        verify = verify_logits(target, prompt, G)
    books = {}
    for s in seeds:
        sid = semantic_ids_for(target, settings.K, seed=s, tokenizer=tokenizer,
                               levels=settings.levels)
        windows, content = training_windows(world, tokenizer, settings.n_train, s,
                                            prompt=prompt, seq_len=seq_len,
                                            unit=scored.unit)
        drafters = drafts_for(draft_denoiser, sid, windows, content, P, G,
                              **(head_kw or {}))
        outputs = {name: d(prompt, G) for name, d in drafters.items()}
        preds = {name: o.sids for name, o in outputs.items()}
        preds[FIRST_PASS] = target_cluster_argmax(verify, sid)
        table = acceptance_table(preds, tokens, anchors, sid, settings.n_bootstrap,
                                 settings.seed)
        books[s] = Codebook(s, sid, windows, content, drafters, outputs, preds, table)
    return books


def pooled_acceptance(
    books: dict[int, Codebook], tokens: torch.Tensor, anchors: torch.Tensor,
    n_boot: int = 2000, seed: int = 0,
) -> pd.DataFrame:
    """alpha_SID of every prediction, averaged over the codebooks, with its CI.

    One row per prediction name: ``alpha`` (the mean over codebooks of each
    codebook's rate), ``low``/``high`` (``stats.seed_pooled_rate``: resampling
    codebooks and sequences, united with Clopper-Pearson), the lowest and
    highest single-codebook rate, ``codebooks``, and the two parts of the
    interval's width that ``measures.power`` sizes apart, ``SPREAD`` and
    ``QUESTIONS_SHARE`` (``width_parts``). ``best_pooled_draft``
    picks the draft with the highest pooled alpha (one draft for all codebooks).
    """
    if not books:
        raise ValueError("no codebooks given")
    names = list(next(iter(books.values())).preds)
    _, trials = per_sequence(anchors, anchors)
    rows = []
    for name in names:
        hits = np.stack([sid_hits(b.preds[name], tokens, anchors, b.sid)[0]
                         for b in books.values()])  # (S, B)
        est, lo, hi = stats.seed_pooled_rate(hits, trials, n_boot, seed)
        per = hits.sum(1) / trials.sum()
        rows.append(dict(prediction=name, alpha=est, low=lo, high=hi,
                         lowest=float(per.min()), highest=float(per.max()),
                         codebooks=len(books),
                         **dict(zip((SPREAD, QUESTIONS_SHARE),
                                    width_parts(hits, trials, n_boot, seed),
                                    strict=True))))
    return pd.DataFrame(rows).set_index("prediction")


def width_parts(hits: np.ndarray, trials: np.ndarray, n_boot: int = 2000,
                seed: int = 0) -> tuple[float, float]:
    """The two parts of a mean-over-codebooks rate's width that
    ``measures.power`` sizes apart: (the spread between codebooks, the
    questions' share).

    ``hits`` (S, B), ``trials`` (B,) as in ``stats.seed_pooled_rate``. One
    bootstrap over sequences (``n_boot`` draws, the codebooks fixed) gives the
    questions' share, the 95 % half-width of the mean's percentile interval,
    and each codebook's deviation from the mean under it. The spread is the
    standard deviation of the codebooks' rates with the part those deviations
    owe to the questions taken out (S/(S-1) times their mean bootstrap
    variance, subtracted from the variance, floored at 0): what is left is the
    codebooks' own, which more questions do not shrink. NaN for one codebook.
    """
    H, n = np.asarray(hits, float), np.asarray(trials, float)
    S, B = H.shape
    idx = np.random.default_rng(seed).integers(0, B, size=(n_boot, B))
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = H[:, idx].sum(-1) / n[idx].sum(-1)  # (S, n_boot)
    mean = boot.mean(0)
    ok = np.isfinite(mean)
    lo, hi = np.quantile(mean[ok], [0.025, 0.975])
    if S < 2:
        return math.nan, float(hi - lo) / 2
    per = H.sum(1) / n.sum()
    noise = S / (S - 1) * float((boot[:, ok] - mean[ok]).var(axis=1, ddof=1).mean())
    return math.sqrt(max(float(per.var(ddof=1)) - noise, 0.0)), float(hi - lo) / 2


def best_pooled_draft(pooled: pd.DataFrame) -> str:
    """The draft (not the target's first pass) with the highest pooled alpha."""
    return str(pooled.loc[list(DRAFT_NAMES), "alpha"].idxmax())


def per_codebook(books: dict[int, Codebook], tokens: torch.Tensor,
                 anchors: torch.Tensor) -> pd.DataFrame:
    """One ``best_draft_row`` per codebook seed, indexed by seed."""
    return pd.DataFrame([{"seed": s, **best_draft_row(b.table, b.sid, tokens, anchors)}
                         for s, b in books.items()]).set_index("seed")
