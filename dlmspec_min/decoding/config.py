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
    """Options of ``generate``; ``None`` lengths resolve to ``gen_length``.

    ``steps`` only matters for ``rule="schedule"`` (LLaDA: total forwards, split
    evenly over blocks); the threshold and factor rules run each block until it
    has no masks. ``spec_budget``, ``spec_low``, ``lookahead`` and
    ``spec_verify`` only matter with ``speculate="trajectory"`` (see
    ``dlmspec_min.decoding.speculate``; ``spec_verify="path"`` computes only the
    tree rows the walk reads: the same tokens and counts, not the method's time).
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
                              ("spec_verify", SPEC_VERIFIES)):
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
