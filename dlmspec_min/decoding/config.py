"""What a decode is asked to do (``DecodeConfig``) and what it gives (``DecodeResult``).

The options and their checks; ``decode.generate`` runs them (the module's
docstring describes the loop and the choices it makes on purpose). SPEC.md
sections 2.1 and 2.2.
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
SPEC_VERIFIES = ("tree", "path")
SPEC_DRAFTS = ("tree", "chain", "mix", "rank")
SPEC_ACCEPTS = ("exact", "subset")

DEFAULT_GEN_LENGTH = 64
DEFAULT_THRESHOLD = 0.9  # Fast-dLLM's default
DEFAULT_FACTOR = 1.0  # Fast-dLLM's default f
DEFAULT_SPEC_BUDGET = 15  # tree nodes per verify call besides the root (DERIVED)
DEFAULT_SPEC_LOW = 0.1  # confidences below this are never drafted (DERIVED)

GeneratorArg = torch.Generator | Sequence[torch.Generator] | None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class DecodeConfig:
    """What ``generate`` is asked to do: lengths, the commit rule, cache, speculation.

    Frozen and checked on construction: a bad value or a bad combination raises
    ``ValueError`` naming the option and what to use instead. Lengths are in
    tokens; a forward is one denoiser call (one NFE).

    Parameters
    ----------
    gen_length : int, default 64
        Tokens to generate after the prompt (G).
    block_length : int or None, default None
        Tokens per block; blocks are decoded left to right (LLaDA's
        semi-autoregressive schedule). Must divide ``gen_length``; ``None``: one
        block of ``gen_length``.
    steps : int or None, default None
        Forwards (NFE) of the whole decode for ``rule="schedule"``, split
        evenly over the blocks (a multiple of the number of blocks, at most
        ``gen_length``); ``None``: ``gen_length`` (one token per forward).
        Ignored by the other rules, which run a block until it has no masks.
    rule : {"schedule", "threshold", "factor"}, default "schedule"
        How many proposals a forward commits: LLaDA's fixed schedule (the top
        k by confidence, k from ``steps``), Fast-dLLM's threshold rule (every
        proposal with confidence >= ``threshold``, and at least the best one)
        or Fast-dLLM's factor rule (the largest n with (n + 1)(1 - c_(n)) <=
        ``factor``).
    remasking : {"low_confidence", "random"}, default "low_confidence"
        The score that ranks proposals: the softmax probability of the proposed
        token, or a uniform draw (LLaDA's random remasking; ``rule="schedule"``
        only, needs a generator).
    temperature : float, default 0.0
        Gumbel-max sampling temperature of the proposals; 0 is greedy (argmax).
        Above 0 ``generate`` needs a ``torch.Generator``.
    threshold : float, default 0.9
        Confidence threshold of ``rule="threshold"``, in (0, 1].
    factor : float, default 1.0
        The f of ``rule="factor"``, > 0.
    cache : {"none", "prefix", "dual"}, default "none"
        Fast-dLLM's approximate KV cache, refreshed at each block's first
        forward: ``"prefix"`` recomputes the block and everything after it,
        ``"dual"`` only the block. Needs a denoiser with ``supports_cache``.
    softmax_dtype : {"float64", "logits"}, default "float64"
        Precision of the confidences: float64, or the logits' own dtype (as
        the reference codes compute them).
    speculate : {"none", "trajectory"}, default "none"
        ``"trajectory"``: trajectory speculation over the threshold rule
        (``rule="threshold"``) or over one token per step (``rule="schedule"``
        with ``steps=gen_length``, FreeDave's static base). Each forward
        verifies drafted future states in one batched call and advances
        through every state it confirms, so the tokens are the plain decode's
        (with ``spec_accept="exact"`` and ``lookahead`` "none" or "exact") and
        ``DecodeResult.nfe`` counts the verify calls. FreeDave (Wu and Zhang,
        arXiv 2510.00294) is ``spec_draft="chain"``: on one token per step
        exact; on the threshold rule with ``spec_accept="subset"`` not
        (``speculate.freedave_config``).
    spec_budget : int, default 15
        Drafted tree nodes per verify call besides the root (>= 0).
    spec_low : float, default 0.1
        Positions whose confidence is below this are never drafted as
        committed, in [0, 1].
    lookahead : {"none", "exact", "stale"}, default "exact"
        Whether the tree may run past the end of the current block: no, only
        through a refresh forward (exact: the same tokens), or against the
        stale cache (cheaper, but the tokens may drift; needs a cache).
    spec_verify : {"tree", "path"}, default "tree"
        ``"tree"`` computes every row of a verify call (the method);
        ``"path"`` only the rows the walk reads: the same tokens and counts in
        less CPU time, for measuring forwards, not wall clock.
    spec_draft : {"tree", "chain", "mix", "rank"}, default "rank"
        The shape of the drafted states: ``"tree"`` (best-first over the
        likely commit sets, the trajectory method), ``"chain"`` (one path,
        each state one more token, positions in confidence order: FreeDave's
        draft), ``"mix"`` (a chain of ``spec_budget // 2`` nodes, then the
        tree with the rest) or ``"rank"`` (best-first over single commits in
        confidence order, their second tokens and the order's prefixes:
        ``speculate.rank_children``). Every shape is exact under
        ``spec_accept="exact"``.
        The default is the shape chosen by the rules written in
        ``book/claims.yml`` (trajectory, 2026-12-07) before the shapes ran
        (first mix over the tree, then rank over mix).
    spec_accept : {"exact", "subset"}, default "exact"
        ``"exact"``: move to a drafted state only if it is the base's next
        state (the output is the base's). ``"subset"``: also move to a drafted
        state whose new tokens are a subset of what the base commits there
        (FreeDave's rule for a threshold base; fewer forwards, but the output
        may differ from the base's: it is a separate decoder).

    Raises
    ------
    ValueError
        On a value outside its range or a combination that cannot run.

    Notes
    -----
    Which settings are fast. A forward's cost on a CPU grows with the
    positions it computes (rows times width), so the fastest decode there is
    the one that computes the fewest positions: a KV cache (``"prefix"`` or
    ``"dual"``, which recompute the block and what follows, or the block
    only) always helps, and the threshold or factor rule helps where the
    model is confident enough to commit several tokens per forward (where it
    is not, every rule makes one forward per token). Trajectory
    speculation saves forwards by verifying a tree of up to ``spec_budget`` + 1
    drafted states in one call; on a CPU that call costs about as much as its
    rows computed one by one, so it is several times slower in wall time
    (``benchmarks/decode_speed.py``; the library page shows its last table).
    On a GPU a small batch of rows costs about what one row costs until the
    device is saturated, which is where saving forwards saves time: there the
    threshold rule with the dual cache and ``speculate="trajectory"`` is the
    configuration that trades compute for fewer sequential steps (the seed
    paper's setting; not timed on a GPU by this project yet).

    Examples
    --------
    LLaDA's schedule in blocks of 32, two tokens per forward:

    >>> DecodeConfig(gen_length=64, block_length=32, steps=32).steps_per_block
    16

    Fast-dLLM's threshold rule with its dual cache, and trajectory
    speculation over it:

    >>> fast = DecodeConfig(gen_length=64, block_length=32, rule="threshold",
    ...                     cache="dual")
    >>> spec = DecodeConfig(gen_length=64, block_length=32, rule="threshold",
    ...                     cache="dual", speculate="trajectory")
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
    spec_verify: str = "tree"
    spec_draft: str = "rank"
    spec_accept: str = "exact"

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
        for name, allowed in (("speculate", SPECULATES), ("lookahead", LOOKAHEADS),
                              ("spec_verify", SPEC_VERIFIES),
                              ("spec_draft", SPEC_DRAFTS),
                              ("spec_accept", SPEC_ACCEPTS)):
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
        if not (self.rule == "threshold" or self.one_token_per_step):
            raise ValueError(
                "speculate='trajectory' speculates on Fast-dLLM's threshold rule or "
                "on one token per step; use rule='threshold', or rule='schedule' "
                f"with steps=gen_length (got rule={self.rule!r}, steps={self.steps})"
            )
        if self.remasking != "low_confidence":
            raise ValueError(
                "speculate='trajectory' drafts from confidences: use "
                f"remasking='low_confidence' (got {self.remasking!r})"
            )
        if self.lookahead == "stale" and self.cache == "none":
            raise ValueError(
                "lookahead='stale' verifies against a stale cache, so it needs "
                "cache='dual' or 'prefix'; without a cache use lookahead='exact'"
            )

    @property
    def num_blocks(self) -> int:
        """The number of blocks per decode, ``gen_length // block_length``."""
        return self.gen_length // self.block_length

    @property
    def steps_per_block(self) -> int:
        """The forwards per block of ``rule="schedule"``, ``steps // num_blocks``."""
        return self.steps // self.num_blocks

    @property
    def one_token_per_step(self) -> bool:
        """True iff every forward commits exactly one token (``rule="schedule"``
        with ``steps == gen_length``): the base of FreeDave's one-token mode."""
        return self.rule == "schedule" and self.steps_per_block == self.block_length

    @property
    def needs_generator(self) -> bool:
        """True iff the decode draws random numbers (temperature > 0 or random
        remasking), so ``generate`` needs a ``torch.Generator``."""
        return self.temperature > 0 or self.remasking == "random"


@dataclass
class DecodeResult:
    """What ``generate`` returns: the tokens, the decode's trace and its costs.

    B is the batch, P the prompt length, G ``gen_length``. A forward is one
    denoiser call (NFE); a row's NFE counts the forwards in which that row
    still had masks in its current block, so a batched decode reports what
    each row would cost alone.

    Parameters
    ----------
    tokens : torch.Tensor
        (B, P + G) long: the prompt followed by the generated tokens.
    prompt_length : int
        P, in tokens.
    nfe : torch.Tensor
        (B,) long, per row: the forwards (NFE) the row took part in, the
        denoiser calls in which its current block still had masks (a batched
        forward counts once for each row in it). With
        ``speculate="trajectory"``: the row's verify calls. One verify call
        runs one denoiser call per kind of row in its draft tree (a window
        against the block's cache, a refresh forward, a full forward: one to
        three calls), so it counts as one NFE however many calls it makes.
    n_forwards : int
        Denoiser calls actually made for the whole batch: a batched forward
        counts once. Without speculation the rows share their forwards, so
        it is the sum over blocks of the slowest row's forwards in that block
        (at least the largest ``nfe``); with speculation, where rows decode
        one after another, it counts every call of every verify of every row,
        so it exceeds ``nfe.sum()`` whenever a tree mixes kinds of rows.
    token_forwards : torch.Tensor
        (B,) long: positions computed for the row, summed over its forwards (a
        full forward counts P + G, a cached window its width; a verify call
        every row of its tree). The compute a KV cache saves shows here.
    commit_step : torch.Tensor
        (B, G) long: the row's step (1-based forward) that committed each
        generated token; 0 for tokens given through ``init``.
    committed_per_step : torch.Tensor
        (B, max nfe) long: tokens committed by each of the row's forwards (0
        past the row's last).
    spec : SpecTrace or None, default None
        The speculation trace with ``speculate="trajectory"``, else None.
    """

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
        """(B, G): the generated tokens, without the prompt."""
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
