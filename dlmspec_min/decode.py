"""One decoding loop for masked diffusion LMs, with LLaDA and Fast-dLLM options.

The loop is LLaDA's semi-autoregressive sampler (Nie et al., 2025, "Large
Language Diffusion Models": inference with low-confidence remasking over
blocks; public ``generate.py``) with the approximate KV cache and the
confidence-aware parallel decoding of Fast-dLLM (Wu et al., 2025, "Fast-dLLM:
Training-free Acceleration of Diffusion LLM by Enabling KV Cache and Parallel
Decoding": threshold rule, and the factor rule of its public code).
SPEC.md sections 2.1 and 2.2.

State: ``x = prompt ++ [MASK] * gen_length``, cut into blocks decoded left to
right. Every step makes one forward and, inside the current block only,

1. proposes ``x0 = argmax(logits / tau + Gumbel)`` per masked position (float64
   noise; tau = 0 is plain argmax; the mask token is never proposed),
2. scores each proposal: its softmax probability under the UN-tempered logits
   (``"low_confidence"``; a quirk kept from both reference codes) or a uniform
   draw (``"random"``),
3. commits some proposals (``transfer_index``): the top-k of a fixed schedule
   (``"schedule"``), every one at or above a threshold plus the best one
   (``"threshold"``), or the largest n with (n + 1)(1 - c_(n)) <= f
   (``"factor"``).

Choices this module makes on purpose (the book's Formalization chapter states them):

- Ties in confidence go to the leftmost position (a stable sort), where the
  references rely on ``torch.topk``'s unspecified order.
- Rule arithmetic (threshold / factor comparisons) runs in float64, so a bf16
  confidence is never compared to a bf16-rounded threshold.
- The mask token is excluded from the argmax (its logit stays in the softmax
  normaliser), so a committed position can never hold ``[MASK]`` again.
- Mask tokens inside the prompt are context: they are never decoded.
- Tokens given through ``init`` (pre-committed, e.g. SSLD's accepted anchors)
  are kept; the schedule rule's m is the row's masks left in the block, and a
  block with nothing masked costs that row no forward.
- A row whose current block has no masks left sits out the forward (it is not
  recomputed), so batched decoding costs and returns exactly what each row
  would alone; blocks are still synchronised across the batch.
- Randomness comes only from the caller's ``torch.Generator`` (or one per row),
  in a fixed order per step: Gumbel noise ``(rows, block, V)`` if tau > 0, then
  the ``(rows, block)`` uniform scores if ``remasking="random"``, both float64.

The step logic lives in small functions (``block_logits``, ``propose_tokens``,
``token_confidence``, ``transfer_index``) so that a trajectory-speculation
option can reuse them around a different "what to verify" step:
``speculate="trajectory"`` (SPEC.md 4) hands the decode to
``speculate.decode_trajectory``, which drafts future states, verifies them in
one batched call and follows this loop's own commit rule (``select_commits``)
through them, so its output is this loop's output (``lookahead`` "none" or
"exact"; "stale" drifts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

RULES = ("schedule", "threshold", "factor")
REMASKINGS = ("low_confidence", "random")
CACHES = ("none", "prefix", "dual")
SOFTMAX_DTYPES = ("float64", "logits")
SPECULATES = ("none", "trajectory")
LOOKAHEADS = ("none", "exact", "stale")

DEFAULT_GEN_LENGTH = 64
DEFAULT_THRESHOLD = 0.9  # Fast-dLLM's default
DEFAULT_FACTOR = 1.0  # Fast-dLLM's default f
DEFAULT_SPEC_BUDGET = 15  # tree nodes per verify call besides the root (DERIVED)
DEFAULT_SPEC_LOW = 0.1  # confidences below this are never drafted (DERIVED)
NOISE_DTYPE = torch.float64  # Gumbel and uniform draws, as in LLaDA's add_gumbel_noise
RULE_DTYPE = torch.float64  # threshold / factor comparisons
NEG_INF = float("-inf")

GeneratorArg = torch.Generator | Sequence[torch.Generator] | None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class DecodeConfig:
    """Options of ``generate``; ``None`` lengths resolve to ``gen_length``.

    ``steps`` only matters for ``rule="schedule"`` (LLaDA: total forwards, split
    evenly over blocks); the threshold and factor rules run each block until it
    has no masks. ``spec_budget``, ``spec_low`` and ``lookahead`` only matter
    with ``speculate="trajectory"`` (see ``dlmspec_min.speculate``).
    """

    gen_length: int = DEFAULT_GEN_LENGTH
    block_length: int | None = None
    steps: int | None = None
    rule: str = "schedule"
    remasking: str = "low_confidence"
    temperature: float = 0.0
    threshold: float = DEFAULT_THRESHOLD
    factor: float = DEFAULT_FACTOR
    cache: str = "none"
    softmax_dtype: str = "float64"
    speculate: str = "none"
    spec_budget: int = DEFAULT_SPEC_BUDGET
    spec_low: float = DEFAULT_SPEC_LOW
    lookahead: str = "exact"

    def __post_init__(self):
        if self.block_length is None:
            object.__setattr__(self, "block_length", self.gen_length)
        if self.steps is None:
            object.__setattr__(self, "steps", self.gen_length)
        for name in ("gen_length", "block_length", "steps"):
            v = getattr(self, name)
            if not _is_int(v) or v <= 0:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        G, bl = self.gen_length, self.block_length
        if G % bl:
            raise ValueError(
                f"gen_length ({G}) must be a multiple of block_length ({bl}); "
                f"pick a block_length that divides it, e.g. {math.gcd(G, bl)}"
            )
        for name, allowed in (("rule", RULES), ("remasking", REMASKINGS),
                              ("cache", CACHES), ("softmax_dtype", SOFTMAX_DTYPES)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"unknown {name} {getattr(self, name)!r}; use one of {allowed}"
                )
        if self.rule == "schedule":
            nb = self.num_blocks
            if self.steps % nb:
                raise ValueError(
                    f"steps ({self.steps}) must be a multiple of the number of blocks "
                    f"({nb} = gen_length / block_length) for rule='schedule'"
                )
            if self.steps_per_block > bl:
                raise ValueError(
                    f"{self.steps_per_block} steps per block exceed block_length ({bl})"
                    ": some forwards would commit nothing; use steps <= gen_length"
                )
        if self.remasking == "random" and self.rule != "schedule":
            raise ValueError(
                f"remasking='random' only works with rule='schedule': a {self.rule} "
                "rule on uniform draws is not a confidence rule"
            )
        t = self.temperature
        t_ok = isinstance(t, (int, float)) and not isinstance(t, bool)
        if not (t_ok and math.isfinite(t) and t >= 0):
            raise ValueError(f"temperature must be a finite number >= 0, got {t!r}")
        if not (isinstance(self.threshold, (int, float)) and 0 < self.threshold <= 1):
            raise ValueError(f"threshold must lie in (0, 1], got {self.threshold!r}")
        if not (isinstance(self.factor, (int, float)) and math.isfinite(self.factor)
                and self.factor > 0):
            raise ValueError(f"factor must be a finite number > 0, got {self.factor!r}")
        self._check_speculation()

    def _check_speculation(self):
        for name, allowed in (("speculate", SPECULATES), ("lookahead", LOOKAHEADS)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"unknown {name} {getattr(self, name)!r}; use one of {allowed}"
                )
        if not _is_int(self.spec_budget) or self.spec_budget < 0:
            raise ValueError(
                f"spec_budget must be an int >= 0 (nodes), got {self.spec_budget!r}"
            )
        if not (isinstance(self.spec_low, (int, float)) and 0 <= self.spec_low <= 1):
            raise ValueError(f"spec_low must lie in [0, 1], got {self.spec_low!r}")
        if self.speculate == "none":
            return
        if self.rule != "threshold":
            raise ValueError(
                "speculate='trajectory' speculates on Fast-dLLM's threshold rule; "
                f"use rule='threshold' (got {self.rule!r})"
            )
        if self.lookahead == "stale" and self.cache == "none":
            raise ValueError(
                "lookahead='stale' verifies against a stale cache, so it needs "
                "cache='dual' or 'prefix'; without a cache use lookahead='exact'"
            )

    @property
    def num_blocks(self) -> int:
        return self.gen_length // self.block_length

    @property
    def steps_per_block(self) -> int:
        return self.steps // self.num_blocks

    @property
    def needs_generator(self) -> bool:
        return self.temperature > 0 or self.remasking == "random"


@dataclass
class DecodeResult:
    """What ``generate`` returns: tokens plus the decode trace and its costs."""

    tokens: torch.Tensor  # (B, P + G)
    prompt_length: int
    nfe: torch.Tensor  # (B,) forwards in which the row still had masks in its block
    n_forwards: int  # denoiser calls actually made (batched)
    token_forwards: torch.Tensor  # (B,) positions computed for the row, summed
    commit_step: torch.Tensor  # (B, G) the row's step (1-based) committing each
    # token; 0 for tokens given through ``init``
    committed_per_step: torch.Tensor  # (B, max nfe) tokens committed at each step
    spec: object | None = None  # speculate.SpecTrace with speculate="trajectory"

    @property
    def generated(self) -> torch.Tensor:
        return self.tokens[:, self.prompt_length:]  # (B, G)

    @property
    def tokens_per_nfe(self) -> torch.Tensor:
        """Per row: generated tokens / forwards (Fast-dLLM's "tokens per step")."""
        return self.generated.shape[1] / self.nfe.double()  # (B,)

    @property
    def mean_tokens_per_nfe(self) -> float:
        """Over the batch: all generated tokens / all row-forwards."""
        forwards = float(self.nfe.sum())
        return self.generated.numel() / forwards if forwards else math.inf


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


def _check_inputs(denoiser, prompt: torch.Tensor, config: DecodeConfig):
    if not isinstance(config, DecodeConfig):
        raise TypeError(f"config must be a DecodeConfig, got {type(config).__name__}")
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 2 \
            or prompt.dtype != torch.long:
        raise ValueError(
            "prompt must be a LongTensor of shape (batch, prompt_length); "
            "use prompt[None] for a single sequence"
        )
    if config.cache != "none" and not getattr(denoiser, "supports_cache", False):
        raise ValueError(
            f"cache={config.cache!r} needs a denoiser with an approximate KV cache "
            "(prefill / logits_window, unshifted logits); use cache='none' for this one"
        )


def _check_init(init: torch.Tensor, batch: int, gen_length: int):
    if not isinstance(init, torch.Tensor) or init.dtype != torch.long \
            or tuple(init.shape) != (batch, gen_length):
        raise ValueError(
            f"init must be a LongTensor of shape (batch, gen_length) = ({batch}, "
            f"{gen_length}) holding pre-committed tokens and the mask id elsewhere"
        )
    if bool((init < 0).any()):
        raise ValueError("init holds negative token ids; put the mask id in open slots")


def generate(
    denoiser, prompt: torch.Tensor, config: DecodeConfig | None = None,
    generator: GeneratorArg = None, *, init: torch.Tensor | None = None,
) -> DecodeResult:
    """Decode ``config.gen_length`` tokens after ``prompt`` (B, P) with one loop.

    ``denoiser`` needs ``mask_id`` and ``logits(x) -> (B, L, V)``; with a cache
    also ``supports_cache``, ``prefill`` and ``logits_window``. ``generator`` is
    one ``torch.Generator`` (rows share a stream, so sampled rows depend on the
    batch) or one per row (every row then decodes exactly as it would alone).

    ``init`` (B, G), optional: tokens already committed before decoding starts
    (the mask id where nothing is), e.g. SSLD's accepted anchors. They are kept
    as they are and never count as committed by a step (``commit_step`` 0); a
    block with nothing masked costs no forward.
    """
    config = DecodeConfig() if config is None else config
    _check_inputs(denoiser, prompt, config)
    B, P = prompt.shape
    G, bl, mask_id = config.gen_length, config.block_length, int(denoiser.mask_id)
    _check_generator(generator, B, config)
    device = prompt.device
    if init is None:
        gen = torch.full((B, G), mask_id, dtype=prompt.dtype, device=device)
    else:
        _check_init(init, B, G)
        gen = init.to(device=device, dtype=prompt.dtype)
    x = torch.cat([prompt, gen], dim=1)  # (B, L), a fresh tensor
    if config.speculate == "trajectory":
        from .speculate import decode_trajectory

        return decode_trajectory(denoiser, x, P, config, generator)
    trace = _Trace(B, P, G, device)
    all_rows = torch.arange(B, device=device)
    for b in range(config.num_blocks):
        start, end = P + b * bl, P + (b + 1) * bl
        schedule = None  # (B, T) per-row counts, fixed at the block's first step
        cache, step, cached = None, 0, all_rows
        while True:
            masked = x[:, start:end] == mask_id  # (B, bl)
            active = masked.any(dim=1)  # (B,)
            if not bool(active.any()):
                break
            if step == 0:  # the block's cache covers the rows active at its start
                cached = all_rows if bool(active.all()) else active.nonzero().squeeze(1)
                if config.rule == "schedule":  # m = masks in the block, per row
                    schedule = num_transfer_tokens(masked.sum(dim=1),
                                                   config.steps_per_block)
            # rows never rejoin a block, so ``cached`` holds every later active row
            x_c = x if len(cached) == B else x.index_select(0, cached)  # (c, L)
            local_active = active[cached]  # (c,)
            everyone = bool(local_active.all())
            local = None if everyone else local_active.nonzero().squeeze(1)
            rows = cached if everyone else cached[local]
            logits, width, cache = block_logits(
                denoiser, x_c, local, start, end, config, cache, first_step=step == 0,
            )  # (b, bl, V)
            k = None if schedule is None else schedule[rows, step]  # (b,)
            x0, commit = select_commits(
                logits, masked[rows], config, mask_id, k, generator, rows
            )  # (b, bl) twice
            block = x[rows, start:end]
            x[rows, start:end] = torch.where(commit, x0.to(x.dtype), block)
            trace.record(rows, width, start, commit)
            step += 1
    return trace.result(x)
