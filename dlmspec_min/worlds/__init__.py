"""Worlds: what a claim is measured in (SPEC.md section 6, DERIVED).

A world is a text source, its tokenizer, the role of every token (content,
function, punctuation or other glue, special), its prompts, its ladder of
models and its default decode. Verdicts compare a draft's acceptance with the
bar ``alpha* = 1 - 1/tau_acc``, and ``tau_acc`` depends on the world's entropy,
so the book measures its claims in two:

- ``prose`` (``worlds.prose``): the Brown corpus; the regime of ~1.1 tokens per
  forward;
- ``math`` (``worlds.gsm``): generated grade-school word problems in GSM8K's
  shape, the CPU-scale analogue of the paper's GSM8K regime (since 2026-12-06
  the free world, ``problems.FREE``, on the ``dlmspec/math_free/...`` ladder;
  the narrow world before it is ``worlds.gsm.MATH_NARROW``).

    from dlmspec_min.worlds import get_world
    world = get_world("math")
    tok = world.tokenizer()
    classes = world.token_classes(tok, ids)      # per token: content, function, ...
"""

from __future__ import annotations

from .gsm import MATH
from .prose import PROSE
from .world import World, retagged

WORLDS = {w.name: w for w in (PROSE, MATH)}
WORLD_NAMES = tuple(WORLDS)


def get_world(name: str) -> World:
    """The world called ``name`` (one of ``WORLD_NAMES``)."""
    if name not in WORLDS:
        raise ValueError(f"unknown world {name!r}; use one of {', '.join(WORLD_NAMES)}")
    return WORLDS[name]


__all__ = ["MATH", "PROSE", "WORLDS", "WORLD_NAMES", "World", "get_world", "retagged"]
