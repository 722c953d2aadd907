"""The seed page (``notebooks/10_seeds.md``): claims rerun at several seeds.

Each run is a claim's own notebook executed by the runner at reduced sizes and
one seed; its glued values are judged here by the claim's rule in
``book/claims.yml``, exactly as the dashboard judges the full-size build. The
registry's ``checks: seeds`` block names, per claim, the keys of the bar
comparison (``figures``: alpha with its interval, tau_acc's interval, from which
alpha* = 1 - 1/tau_acc inherits its own).
"""

from __future__ import annotations

import ast
import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from .. import catalogue
from ..experiments import parameters
from ..experiments.parameters import param, shared
from ..paths import REPO_ROOT
from . import claims

NOT_MEASURED = "not measured"  # the run glued no piece-level verdict or its keys
FIGURE_KEYS = ("alpha", "alpha_lo", "alpha_hi", "tau_acc", "tau_acc_lo", "tau_acc_hi")
OUT_DIR = REPO_ROOT / "_build" / "papermill" / "seeds"


def seed_block(registry: dict) -> dict:
    return registry["checks"]["seeds"]


def check_plan(claim_ids: list, seeds: list, sizes: dict, registry: dict) -> None:
    """One-line ``ValueError`` for a plan the page cannot run."""
    if not isinstance(seeds, list) or not seeds:
        raise ValueError("seeds must be a non-empty list of integers >= 0")
    if not isinstance(claim_ids, list) or not claim_ids:
        raise ValueError("claims must be a non-empty list of claim ids")
    figures = seed_block(registry)["figures"]
    unknown = [c for c in claim_ids if c not in figures]
    if unknown:
        raise ValueError(f"claims {unknown} have no seed figures in book/claims.yml "
                         f"(checks: seeds: figures); known: {', '.join(figures)}")
    missing = [c for c in claim_ids if c not in sizes]
    if missing:
        raise ValueError(f"sizes gives no reduced sizes for {missing}")
    with_seed = [c for c in claim_ids if "seed" in sizes[c]]
    if with_seed:
        raise ValueError(f"sizes of {with_seed} set 'seed'; the page sets it per run")


@contextlib.contextmanager
def stderr_to(path: Path):
    """Send file descriptor 2 to ``path`` meanwhile: the kernels a run starts
    inherit it, so their start-up warnings go to the run's log, not the page."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "w") as log:
            os.dup2(log.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def rule_inputs(claim_id: str, registry: dict) -> list[str]:
    """Every recorded key the claim's rule reads (its headline rule and, where the
    registry has one, its ``secondary`` block's)."""
    claim = registry["claims"][claim_id]
    exprs = list(claim["rule"].values())
    exprs += list(claim.get("secondary", {}).get("rule", {}).values())
    names = {n.id for e in exprs for n in ast.walk(ast.parse(e, mode="eval"))
             if isinstance(n, ast.Name)}
    return sorted(names)


def piece_verdict(claim_id: str, values: dict[str, Any], registry: dict) -> str:
    """The claim's piece-level verdict for one run, or ``NOT_MEASURED``.

    The registry's ``secondary:`` block (piece-level anchors) is judged like the
    headline rule, on this run's values (``claims.secondary_verdict``); a claim
    without one gives the verdict its run glued as ``<claim>_verdict_piece``.
    A run that lacks the keys gives NOT_MEASURED, never a silent gap.
    """
    try:
        found = claims.secondary_verdict(claim_id, values, registry)
    except KeyError:  # the run did not record a key the secondary rule reads
        return NOT_MEASURED
    if found is not None:
        return found
    return values.get(f"{claim_id.lower()}_verdict_piece", NOT_MEASURED)


def judge(claim_id: str, values: dict[str, Any], registry: dict) -> dict[str, Any]:
    """One run's bar comparison and verdicts (headline by the registry's rule)."""
    keys = seed_block(registry)["figures"][claim_id]
    f = {name: values[keys[name]] for name in FIGURE_KEYS}
    return {
        **{name: f[name] for name in ("alpha", "alpha_lo", "alpha_hi")},
        "alpha_star": 1 - 1 / f["tau_acc"],
        "alpha_star_lo": 1 - 1 / f["tau_acc_lo"],
        "alpha_star_hi": 1 - 1 / f["tau_acc_hi"],
        "verdict": claims.verdict(claim_id, values, registry),
        "glued verdict": values.get(f"{claim_id.lower()}_verdict"),
        "piece-level verdict": piece_verdict(claim_id, values, registry),
    }


def agreement(verdicts: list[str]) -> float:
    """Share of the runs whose verdict is the first run's (the first seed's)."""
    if not verdicts:
        raise ValueError("no verdicts to compare")
    return sum(v == verdicts[0] for v in verdicts) / len(verdicts)


def listing(seeds: list, verdicts: list[str]) -> str:
    """'inconclusive (seed 0), direction only (seed 1), ...'"""
    return ", ".join(f"{v} (seed {s})" for s, v in zip(seeds, verdicts, strict=True))


def run_output(notebook: Path, seed: int, world: str = catalogue.DEFAULT) -> Path:
    """Where one run is executed: ``OUT_DIR/<notebook>.seed<s>.ipynb``, with the
    world in the name outside prose (the book runs the page in both worlds at
    once)."""
    where = "" if world == catalogue.DEFAULT else f".{world}"
    return OUT_DIR / f"{Path(notebook).stem}{where}.seed{seed}.ipynb"


def run_key(claim_id: str, seed: int, name: str) -> str:
    """The page's glue key for one run's value (e.g. ``seeds_C2_seed0_verdict``)."""
    return f"seeds_{claim_id}_seed{seed}_{name}"


@dataclass(frozen=True)
class Config(parameters.Config):
    NOTEBOOK: ClassVar[str] = "10_seeds"

    world: str = shared("world", note="the claims are rerun in it")
    seeds: list = param([0, 1, 2],
        "seeds each claim's notebook is run at (its `seed` parameter)")
    claims: list = param(["C2", "C3", "C6", "C7"],
        "claims rerun (each needs figures under checks: seeds in book/claims.yml)")
    sizes: dict = param(
        {"C2": {"n_samples": 4, "n_codebooks": 2, "n_train": 256, "n_bootstrap": 300,
                "K_sweep": [256]},
         "C3": {"n_samples": 3, "n_codebooks": 2, "n_train": 256, "n_bootstrap": 300,
                "n_timed": 1, "n_repeats": 1},
         "C6": {"n_samples": 3, "n_codebooks": 2, "n_train": 256, "n_bootstrap": 300},
         "C7": {"n_samples": 4, "n_tau": 4, "n_codebooks": 2, "n_train": 256,
                "n_bootstrap": 300}},
        "each claim's reduced sizes (its notebook's parameters)")
