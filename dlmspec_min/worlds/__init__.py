"""Worlds: what a claim is measured in (SPEC.md section 6, DERIVED).

A world is a text source, its tokenizer, the role of every token (content,
function, punctuation or other glue, special), its prompts, its ladder of
models and its default decode. Verdicts compare a draft's acceptance with the
bar ``alpha* = 1 - 1/tau_acc``, and ``tau_acc`` depends on the world's entropy,
so the book measures its claims in two (``catalogue.BOOK``), and any world of
the catalogue can be selected (``-p world NAME``):

- ``prose`` (``worlds.prose``): the Brown corpus; the regime of ~1.1 tokens per
  forward;
- ``math`` (``worlds.gsm``): generated grade-school word problems in GSM8K's
  shape, the CPU-scale analogue of the paper's GSM8K regime (since 2026-12-06
  the free world, ``problems.FREE``, on the ``dlmspec/math_free/...`` ladder;
  the narrow world before it is ``math_narrow``).

    from dlmspec_min.worlds import get_world
    world = get_world("math")
    tok = world.tokenizer()
    classes = world.token_classes(tok, ids)      # per token: content, function, ...
"""

from __future__ import annotations

from .. import catalogue
from .gsm import MATH, MATH_NARROW, math_world
from .prose import PROSE, prose_world
from .world import World, retagged

# every world of the catalogue, built once by its kind's constructor (PROSE, MATH
# and MATH_NARROW are the entries "prose", "math" and "math_narrow")
_BUILT = {"prose": PROSE, "math": MATH, "math_narrow": MATH_NARROW}
_KINDS = {"prose": prose_world, "math": math_world}
WORLDS = {e.name: _BUILT.get(e.name) or _KINDS[e.kind](e) for e in catalogue.ENTRIES}
WORLD_NAMES = catalogue.NAMES


def get_world(name: str) -> World:
    """The world called ``name`` (one of ``catalogue.NAMES``)."""
    catalogue.get(name)  # the catalogue's error for an unknown name
    return WORLDS[name]


__all__ = ["MATH", "PROSE", "WORLDS", "WORLD_NAMES", "World", "get_world", "retagged"]
