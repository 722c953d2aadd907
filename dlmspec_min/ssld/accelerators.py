"""The token-space accelerators SSLD is measured against, and wall-clock timing.

``accelerators`` is the set of ``decode.generate`` configurations (Fast-dLLM's
threshold rule, with its dual cache, and trajectory speculation on top);
``accelerator_table`` gives each one's tokens per NFE with a CI and
``strongest_accelerator`` picks the one SSLD must beat. ``wall_clock`` and
``draft_then_ssld`` time the whole SSLD pipeline, draft included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from ..decoding.config import DecodeConfig, DecodeResult
from ..measures import stats
from .decoder import SSLDResult, ssld_generate
from .semantic import SemanticIDs

# --- accelerators and timing ----------------------------------------------------------


def accelerators(
    gen_length: int, block_length: int, threshold: float, temperature: float,
    supports_cache: bool = True,
) -> dict[str, DecodeConfig]:
    """The token-space accelerators of ``decode.generate`` that SSLD can infill with.

    Fast-dLLM's threshold rule, the same with its dual cache, and trajectory
    speculation on top of the latter (SPEC.md 4; exact lookahead, default tree
    budget): issue 7 asks C3 to judge SSLD against the strongest of the three.
    The first entry is the plain threshold decode (notebooks take their oracle
    anchors from it). Trajectory speculation decodes rows one by one at
    temperature > 0 and computes many more positions per forward (token-forwards).
    A target without Fast-dLLM's KV cache (``supports_cache`` False, e.g. LLaDA's
    own code) gets the threshold rule and trajectory speculation without a cache.
    """
    base = dict(gen_length=gen_length, block_length=block_length, rule="threshold",
                threshold=threshold, temperature=temperature)
    if not supports_cache:
        return {
            "Fast-dLLM threshold": DecodeConfig(**base),
            "trajectory speculation (exact), no cache": DecodeConfig(
                **base, speculate="trajectory", lookahead="exact"),
        }
    return {
        "Fast-dLLM threshold": DecodeConfig(**base),
        "Fast-dLLM threshold + dual cache": DecodeConfig(**base, cache="dual"),
        "trajectory speculation (exact)": DecodeConfig(
            **base, cache="dual", speculate="trajectory", lookahead="exact"),
    }


def accelerator_table(
    runs: dict[str, DecodeResult], n_boot: int = 2000, seed: int = 0,
) -> pd.DataFrame:
    """Tokens per NFE of each named decode, with a 95 % bootstrap CI over sequences.

    One row per name: ``tokens_per_nfe`` (all generated tokens / all row
    forwards), ``low``, ``high`` (``stats.ratio_bootstrap``), ``nfe_per_sample``
    and ``token_forwards_per_sample``.
    """
    if not runs:
        raise ValueError("no accelerator runs given: pass {name: DecodeResult}")
    rows = []
    for name, r in runs.items():
        nfe = r.nfe.detach().cpu().double().numpy()  # (B,)
        n_gen = np.full(len(nfe), r.generated.shape[1], dtype=float)
        est, lo, hi = stats.ratio_bootstrap(n_gen, nfe, n_boot, seed)
        rows.append(dict(accelerator=name, tokens_per_nfe=est, low=lo, high=hi,
                         nfe_per_sample=float(nfe.mean()),
                         token_forwards_per_sample=r.token_forwards.double().mean().item()))
    return pd.DataFrame(rows).set_index("accelerator")


def strongest_accelerator(table: pd.DataFrame) -> str:
    """The most tokens per NFE; among equals, the fewest token-forwards (then order)."""
    missing = {"tokens_per_nfe", "token_forwards_per_sample"} - set(table.columns)
    if missing or table.empty:
        raise ValueError(
            f"need a non-empty accelerator_table; missing columns {sorted(missing)}")
    ranked = table.sort_values(["tokens_per_nfe", "token_forwards_per_sample"],
                               ascending=[False, True], kind="stable")
    return str(ranked.index[0])


def wall_clock(fn: Callable[[], object], repeats: int, warmup: int = 1) -> np.ndarray:
    """Seconds per call of ``fn``: ``repeats`` timed calls after ``warmup`` untimed."""
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return np.array(times)


def draft_then_ssld(
    target, draft_fn, prompt: torch.Tensor, anchors: torch.Tensor, sid: SemanticIDs,
    infill: DecodeConfig, generators: Sequence[torch.Generator] | None, c: float,
    mode: str = "exact",
) -> SSLDResult:
    """The whole SSLD pipeline, draft included (what wall-clock timings measure)."""
    draft = draft_fn(prompt, infill.gen_length)
    return ssld_generate(target, prompt, draft, anchors, sid, infill, generators, c=c,
                         mode=mode)
