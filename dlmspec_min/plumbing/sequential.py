"""A claim page measured in looks: the sequential rule of ``book/claims.yml``
(``power: sequential:``).

A page run with ``sequential: true`` (the math world's profiles of C2, C3, C5,
C6 and C7) measures its claim at the rule's first size, applies the claim's
rule, and while the verdict reads *inconclusive* measures again at the next
planned size, up to the last (the cap). Each look's intervals are at the level
the rule spends on it (``stats.interval_level``: 1 - its share of the error),
so that the chance of any look deciding falsely stays within the rule's total.
A larger look reuses what the looks before it computed (``measures.reuse``:
the SID heads' fits, the first questions' decodes); its first ``n`` questions
are the earlier look's. The page records the look it stopped at: its size, its
level, the two intervals the claim's deciding comparison rests on (the
registry's ``power:`` sides), and every look's line (``Looks.table``).

A page run with ``sequential: false`` (every default, and the seed page's
reruns), or with ``n_samples`` other than the rule's first size (a user's own
size in the math world), measures once, at its own sizes and at 95 %, and its
note says why.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..measures import reuse, stats
from . import claims

INCONCLUSIVE = "inconclusive"
DECIDED = "decided"
CAPPED = "cap reached"
ONE_LOOK = "one look (no sequential rule)"


def plan(claim_id: str, registry: dict) -> dict:
    """The rule's plan for a claim: ``sizes`` (one per look, the last the cap),
    ``spend`` (the error each look spends; intervals at 1 - spend), and the
    parameters a look sets to its size (the claim's ``power:`` ``size``)."""
    block = (registry.get("power") or {}).get("sequential")
    if not block:
        raise ValueError("book/claims.yml has no power: sequential: block")
    sizes = (block.get("sizes") or {}).get(claim_id)
    if sizes is None:
        raise ValueError(f"power: sequential: names no sizes for {claim_id}")
    # a claim the budget cannot grow has one look, which spends the whole error
    spend = [block["total"]] if len(sizes) == 1 else list(block["spend"])
    if len(spend) != len(sizes):
        raise ValueError(f"{claim_id}: {len(sizes)} sizes but {len(spend)} shares "
                         "of the error (power: sequential: spend)")
    if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise ValueError(f"{claim_id}: the sizes must grow, got {sizes}")
    if sum(spend) > block["total"] + 1e-12:
        raise ValueError(f"the looks spend {sum(spend)}, more than {block['total']}")
    return {"sizes": [int(n) for n in sizes], "spend": [float(a) for a in spend],
            "size": list(registry["power"]["claims"][claim_id]["size"]),
            "total": float(block["total"])}


@dataclass
class Looks:
    """Where a page's sequential run stopped, and every look it made."""

    claim_id: str
    n: int  # questions at the stopping look
    level: float  # its intervals' level
    stopped: str  # DECIDED, CAPPED or ONE_LOOK
    cap: int  # the largest planned size (n itself without a rule)
    config: Any  # the stopping look's config
    planned: int = 1  # the looks the rule plans
    rows: list[dict] = field(default_factory=list)
    reason: str = "no sequential rule in this run"  # why one look (ONE_LOOK)

    def values(self) -> dict[str, Any]:
        """The page's glue values: ``<c>_seq_n``, ``_seq_level``, ``_seq_looks``,
        ``_seq_cap``, ``_seq_stopped`` and ``_seq_note`` (the sentence)."""
        p = f"{self.claim_id.lower()}_seq_"
        return {p + "n": self.n, p + "level": self.level, p + "looks": len(self.rows),
                p + "cap": self.cap, p + "stopped": self.stopped,
                p + "note": self.note()}

    def note(self) -> str:
        """One sentence: the size the verdict rests on and why the run stopped."""
        if self.stopped == ONE_LOOK:
            return (f"measured once, on {self.n} questions, with 95 % intervals "
                    f"({self.reason})")
        why = ("its verdict was decided" if self.stopped == DECIDED
               else "the cap was reached with the verdict still inconclusive")
        return (f"the sequential rule stopped at look {len(self.rows)} of "
                f"{self.planned}, on {self.n} questions (cap {self.cap}), with "
                f"{self.level:.0%} intervals: {why}")

    def table(self) -> pd.DataFrame:
        """One line per look: size, level, the deciding comparison's two
        intervals, whether they separate, the verdict, seconds."""
        out = pd.DataFrame(self.rows)
        return out.set_index("look") if len(out) else out


def _sides(claim_id, values, sizes, registry):
    p = claims.power_reading(claim_id, values, sizes, registry)
    if p is None:
        nan = (math.nan,) * 3
        return nan, nan, False
    return p["a"], p["b"], bool(p["separated"])


def run(claim_id: str, measure_at: Callable[[Any], Any], config,
        rule_values: Callable[[Any], dict] = lambda r: r.values,
        registry: dict | None = None) -> tuple[Any, Looks]:
    """(the measurement at the stopping look, ``Looks``): ``measure_at(cfg)``
    measures the page at ``cfg``; ``rule_values(result)`` gives the values the
    claim's rule reads. Without ``config.sequential`` one look at ``config``."""
    registry = registry or claims.load_registry()
    first = (plan(claim_id, registry)["sizes"][0]
             if getattr(config, "sequential", False) else None)
    if first is None or config.n_samples != first:
        # no rule, or a size of the user's own: one look at it, at 95 %
        reason = ("no sequential rule in this run" if first is None else
                  f"n_samples = {config.n_samples} is not the sequential rule's "
                  f"first size, {first}: the rule applies to its own sizes only")
        t0 = time.perf_counter()
        result = measure_at(config)
        seconds = time.perf_counter() - t0
        sizes = [config.n_samples]
        if claim_id in (registry.get("power") or {}).get("claims", {}):
            sizes = [getattr(config, s) for s in
                     registry["power"]["claims"][claim_id]["size"]]
        values = rule_values(result)
        a, b, sep = _sides(claim_id, values, sizes, registry)
        row = dict(look=1, questions=config.n_samples, level=stats.current_level(),
                   compared=stats.with_interval(*a), against=stats.with_interval(*b),
                   separated=sep, verdict=claims.verdict(claim_id, values, registry),
                   seconds=seconds)
        return result, Looks(claim_id, config.n_samples, stats.current_level(),
                             ONE_LOOK, config.n_samples, config, 1, [row], reason)
    p = plan(claim_id, registry)
    rows, result, cfg, level = [], None, config, stats.current_level()
    with reuse.session() as memo:
        for k, (n, spent) in enumerate(zip(p["sizes"], p["spend"], strict=True)):
            cfg = config.replace(**{name: n for name in p["size"]})
            level = 1 - spent
            t0 = time.perf_counter()
            with stats.interval_level(level):
                result = measure_at(cfg)
            seconds = time.perf_counter() - t0
            values = rule_values(result)
            verdict = claims.verdict(claim_id, values, registry)
            a, b, sep = _sides(claim_id, values, [n] * len(p["size"]), registry)
            rows.append(dict(look=k + 1, questions=n, level=level,
                             compared=stats.with_interval(*a),
                             against=stats.with_interval(*b), separated=sep,
                             verdict=verdict, seconds=seconds,
                             rows_decoded=memo.rows_decoded))
            if verdict != INCONCLUSIVE:
                break
    stopped = DECIDED if rows[-1]["verdict"] != INCONCLUSIVE else CAPPED
    return result, Looks(claim_id, rows[-1]["questions"], level, stopped,
                         p["sizes"][-1], cfg, len(p["sizes"]), rows)


__all__ = ["CAPPED", "DECIDED", "Looks", "ONE_LOOK", "plan", "run"]
