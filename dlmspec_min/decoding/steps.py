"""The pieces of one decoding step, shared by ``decode.generate`` and ``speculate``.

A step makes one forward (``block_logits``, with or without the approximate KV
cache), proposes a token per masked position (``propose_tokens``), scores the
proposals (``token_confidence``) and commits some of them (``transfer_index``);
``select_commits`` chains the last three for one block, drawing its random
numbers from the caller's generator(s) in a fixed order. ``_Trace`` keeps each
row's NFE, token-forwards and commit steps. ``decode`` (the module) describes
the loop and the choices these pieces make.
"""

from __future__ import annotations

import torch

from .config import (
    DEFAULT_FACTOR,
    DEFAULT_THRESHOLD,
    RULES,
    SOFTMAX_DTYPES,
    DecodeConfig,
    DecodeResult,
    GeneratorArg,
)

NOISE_DTYPE = torch.float64  # Gumbel and uniform draws, as in LLaDA's add_gumbel_noise
RULE_DTYPE = torch.float64  # threshold / factor comparisons
NEG_INF = float("-inf")


# --- the schedule -------------------------------------------------------------------


def num_transfer_tokens(masked: torch.Tensor | int, steps: int) -> torch.Tensor:
    """LLaDA's schedule: ``m // T`` per step, the first ``m % T`` steps one more.

    masked: (B,) masked counts m (or an int); returns (B, steps) long. With
    m < T (tokens pre-committed through ``init``) the first m steps commit one
    each and the row's block is done: ``generate`` makes no zero-commit forward.
    """
    m = torch.as_tensor(masked, dtype=torch.long).reshape(-1)  # (B,)
    base, extra = m // steps, m % steps
    step = torch.arange(steps, device=m.device)
    return base[:, None] + (step[None, :] < extra[:, None]).long()  # (B, T)


# --- one step: propose, score, choose -------------------------------------------------


def gumbel(uniform: torch.Tensor) -> torch.Tensor:
    """Standard Gumbel noise -log(-log u) from uniforms in [0, 1)."""
    tiny = torch.finfo(uniform.dtype).tiny
    return -torch.log(-torch.log(uniform.clamp(min=tiny)))


def propose_tokens(
    logits: torch.Tensor, temperature: float, mask_id: int,
    uniform: torch.Tensor | None = None,
) -> torch.Tensor:
    """x0 = argmax(logits / tau + Gumbel) in float64 (tau = 0: argmax), never [MASK].

    logits (b, W, V); uniform (b, W, V) float64, required when tau > 0.
    Ties go to the lowest token id (``torch.argmax``).
    """
    has_mask = 0 <= mask_id < logits.shape[-1]
    if temperature == 0:  # exact without a float64 copy; copy only if [MASK] won
        x0 = logits.argmax(dim=-1)  # (b, W)
        if not (has_mask and bool((x0 == mask_id).any())):
            return x0
        scores = logits.clone()
    elif uniform is None:
        raise ValueError("temperature > 0 needs uniform noise of the logits' shape")
    else:
        scores = logits.to(NOISE_DTYPE) / temperature + gumbel(uniform)  # (b, W, V)
    if has_mask:
        scores[..., mask_id] = NEG_INF
    return scores.argmax(dim=-1)  # (b, W)


def token_confidence(
    logits: torch.Tensor, x0: torch.Tensor, softmax_dtype: str = "float64"
) -> torch.Tensor:
    """Softmax probability of x0 under the UN-tempered logits: (b, W, V) -> (b, W).

    Temperature is deliberately not applied (LLaDA and Fast-dLLM both score the
    sampled token with ``softmax(logits)``). ``softmax_dtype="float64"`` as in
    Fast-dLLM, ``"logits"`` keeps the logits' dtype as in newer LLaDA code.
    """
    if softmax_dtype == "float64":
        logits = logits.to(torch.float64)
    elif softmax_dtype != "logits":
        raise ValueError(
            f"unknown softmax_dtype {softmax_dtype!r}; use one of {SOFTMAX_DTYPES}"
        )
    p = torch.softmax(logits, dim=-1)  # (b, W, V)
    return p.gather(-1, x0.unsqueeze(-1)).squeeze(-1)  # (b, W)


def threshold_count(sorted_conf: torch.Tensor, threshold: float) -> torch.Tensor:
    """How many of the (descending) confidences are >= threshold: (b, W) -> (b,)."""
    return (sorted_conf.to(RULE_DTYPE) >= threshold).sum(dim=-1)


def factor_count(sorted_conf: torch.Tensor, factor: float) -> torch.Tensor:
    """Largest n with (n + 1)(1 - c_(n)) <= f; c_(n) the n-th highest. (b, W) -> (b,)

    The condition is monotone in n (c_(n) never grows), so this is also the
    first n at which it fails, minus one.
    """
    c = sorted_conf.to(RULE_DTYPE)  # (b, W), -inf for positions not masked
    n = torch.arange(1, c.shape[-1] + 1, device=c.device, dtype=RULE_DTYPE)  # (W,)
    ok = (n + 1) * (1 - c) <= factor  # (b, W); -inf gives +inf: never ok
    return (ok.long() * n.long()).amax(dim=-1)  # (b,), 0 if none


def transfer_index(
    confidence: torch.Tensor, masked: torch.Tensor, rule: str, *,
    k: torch.Tensor | int | None = None, threshold: float = DEFAULT_THRESHOLD,
    factor: float = DEFAULT_FACTOR,
) -> torch.Tensor:
    """Which positions to commit (Fast-dLLM's get_transfer_index, for every rule).

    confidence (b, W), masked (b, W) bool. Unmasked positions score -inf. The
    rule gives a count n per row, which takes the n most confident masked
    positions (ties: leftmost first). ``schedule``: n = k. ``threshold`` and
    ``factor``: at least one whenever the row has a masked position. A row with
    nothing masked commits nothing. Returns (b, W) bool.
    """
    conf = confidence.masked_fill(~masked, NEG_INF)  # (b, W)
    order = torch.sort(conf, dim=-1, descending=True, stable=True).indices  # (b, W)
    sorted_conf = conf.gather(-1, order)
    n_masked = masked.sum(dim=-1)  # (b,)
    if rule == "schedule":
        if k is None:
            raise ValueError("rule='schedule' needs k, the number of tokens to commit")
        n = torch.as_tensor(k, device=conf.device).expand_as(n_masked)
    elif rule == "threshold":
        n = threshold_count(sorted_conf, threshold).clamp(min=1)
    elif rule == "factor":
        n = factor_count(sorted_conf, factor).clamp(min=1)
    else:
        raise ValueError(f"unknown rule {rule!r}; use one of {RULES}")
    n = torch.minimum(n, n_masked)  # (b,)
    rank = torch.arange(conf.shape[-1], device=conf.device)  # (W,)
    take_sorted = rank[None, :] < n[:, None]  # (b, W) in sorted order
    return torch.zeros_like(masked).scatter(-1, order, take_sorted)


# --- randomness -----------------------------------------------------------------------


def _check_generator(generator: GeneratorArg, batch: int, config: DecodeConfig):
    if generator is None:
        if config.needs_generator:
            raise ValueError(
                "temperature > 0 or remasking='random' draws random numbers: pass "
                "generator=torch.Generator().manual_seed(SEED) (or one per row)"
            )
        return
    if isinstance(generator, torch.Generator):
        return
    if len(generator) != batch:
        raise ValueError(
            f"got {len(generator)} generators for a batch of {batch}: "
            "pass one torch.Generator, or exactly one per row"
        )


def _uniform(
    shape: tuple[int, ...], generator: GeneratorArg, rows: torch.Tensor,
    device: torch.device,
) -> torch.Tensor:
    """Float64 uniforms (len(rows), *shape[1:]) from one generator or one per row."""
    if isinstance(generator, torch.Generator):
        return torch.rand(shape, generator=generator, dtype=NOISE_DTYPE, device=device)
    return torch.stack([
        torch.rand(shape[1:], generator=generator[r], dtype=NOISE_DTYPE, device=device)
        for r in rows.tolist()
    ])


# --- forwards -------------------------------------------------------------------------


def index_rows(obj, rows: torch.Tensor):
    """Select batch rows of a tensor, or of every tensor in a nested list/tuple/dict."""
    if isinstance(obj, torch.Tensor):
        return obj.index_select(0, rows.to(obj.device))
    if isinstance(obj, (list, tuple)):
        return type(obj)(index_rows(o, rows) for o in obj)
    if isinstance(obj, dict):
        return {k: index_rows(v, rows) for k, v in obj.items()}
    raise TypeError(
        f"cannot select batch rows of a {type(obj).__name__} cache; the decoder "
        "needs a cache made of tensors (batch first) in lists, tuples or dicts"
    )


def block_logits(
    denoiser, x: torch.Tensor, rows: torch.Tensor | None, start: int, end: int,
    config: DecodeConfig, cache, first_step: bool,
):
    """One forward for the given rows; returns (logits (b, end-start, V), width, cache).

    ``rows=None`` means every row. Without a cache: a full forward. With one: a
    full ``prefill`` at the block's first step (it refreshes the cache), then a
    window [start, L) (prefix) or [start, end) (dual) against the stale cache.
    """
    L = x.shape[1]
    xs = x if rows is None else x.index_select(0, rows)  # (b, L)
    if config.cache == "none":
        return denoiser.logits(xs)[:, start:end], L, cache
    if first_step:
        if rows is not None:
            raise RuntimeError("the cache refresh must run on every row")
        logits, cache = denoiser.prefill(xs)  # (B, L, V)
        return logits[:, start:end], L, cache
    stop = L if config.cache == "prefix" else end
    rows_cache = cache if rows is None else index_rows(cache, rows)
    logits = denoiser.logits_window(xs[:, start:stop], start, rows_cache)  # (b, W, V)
    return logits[:, : end - start], stop - start, cache


def select_commits(
    logits: torch.Tensor, masked: torch.Tensor, config: DecodeConfig, mask_id: int,
    k: int | None, generator: GeneratorArg, rows: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Propose, score and choose for one block: returns x0 (b, W) and commit (b, W)."""
    uniform = None
    if config.temperature > 0:
        uniform = _uniform(tuple(logits.shape), generator, rows, logits.device)
    x0 = propose_tokens(logits, config.temperature, mask_id, uniform)  # (b, W)
    if config.remasking == "low_confidence":
        conf = token_confidence(logits, x0, config.softmax_dtype)
    else:
        conf = _uniform(tuple(x0.shape), generator, rows, logits.device)
    commit = transfer_index(
        conf, masked, config.rule, k=k, threshold=config.threshold,
        factor=config.factor,
    )
    return x0, commit


# --- the loop -------------------------------------------------------------------------


class _Trace:
    """Per-row bookkeeping: NFE, token-forwards and when each position was committed."""

    def __init__(self, batch: int, prompt_length: int, gen_length: int, device):
        self.P = prompt_length
        long = {"dtype": torch.long, "device": device}
        self.nfe = torch.zeros(batch, **long)  # (B,)
        self.token_forwards = torch.zeros(batch, **long)  # (B,)
        self.commit_step = torch.zeros(batch, gen_length, **long)  # (B, G)
        # every row step commits >= 1 token, so a row makes at most G steps
        self.per_step = torch.zeros(batch, gen_length, **long)  # (B, G)
        self.n_forwards = 0

    def record(self, rows: torch.Tensor, width: int, start: int, commit: torch.Tensor):
        """Rows (b,) joined a forward of ``width`` positions, committing (b, W)."""
        self.n_forwards += 1
        self.nfe[rows] += 1
        self.token_forwards[rows] += width
        step = self.nfe[rows]  # (b,), 1-based
        self.per_step[rows, step - 1] = commit.sum(dim=-1)
        col = start - self.P
        W = commit.shape[1]
        old = self.commit_step[rows, col:col + W]
        self.commit_step[rows, col:col + W] = torch.where(commit, step[:, None], old)

    def result(self, x: torch.Tensor) -> DecodeResult:
        max_steps = int(self.nfe.max()) if self.nfe.numel() else 0
        return DecodeResult(
            tokens=x, prompt_length=self.P, nfe=self.nfe, n_forwards=self.n_forwards,
            token_forwards=self.token_forwards, commit_step=self.commit_step,
            committed_per_step=self.per_step[:, :max_steps],
        )
