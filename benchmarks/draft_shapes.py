"""Which draft shape makes exact trajectory speculation save the most forwards?

Reproduces the comparison behind ``DecodeConfig.spec_draft``'s default (the
rule in ``book/claims.yml``, ``checks: trajectory:``, 2026-12-07): on the free
math world's base target, the dual-cache threshold base (threshold 0.9, one
block of 32), held-out questions drawn with ``--seed``, exact acceptance only,
it decodes with each shape (tree, chain, mix, rank) at each budget and reports the
gain in forwards over the base with a paired bootstrap interval over
questions, beside an oracle draft of the same budget and the share of verify
calls whose draft held the base's next state
(``dlmspec_min.experiments.trajectory_speculation.forward_study``). Every run is checked
token-equal to its base.

    python benchmarks/draft_shapes.py [--n 32] [--seed 1] [--budgets 3 7 15 31]

``--select`` applies the second rule (2026-12-07): on ``--n 64 --seed 2`` the
candidate (shape, budget <= 15) with the highest gain replaces mix at 15 only
if the paired bootstrap of mix-15's forwards over its forwards has its 95 %
lower bound above 1.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pandas as pd
import torch

from dlmspec_min.experiments import trajectory_speculation
from dlmspec_min.experiments.common import load_models
from dlmspec_min.measures.stats import ratio_bootstrap, with_interval
from dlmspec_min.worlds import get_world

SHAPES = ("tree", "chain", "mix", "rank")
CANDIDATE_BUDGETS = (3, 7, 15)  # the 2026-12-07 second rule's; 31 is reported only
DEFAULT = ("mix", 15)  # the default the rule may replace


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", default="math")
    p.add_argument("--n", type=int, default=32, help="held-out questions")
    p.add_argument("--seed", type=int, default=1, help="which questions")
    p.add_argument("--budgets", type=int, nargs="+", default=[3, 7, 15, 31])
    p.add_argument("--n-bootstrap", type=int, default=2000)
    p.add_argument("--select", action="store_true",
                   help="apply the second rule of book/claims.yml (2026-12-07)")
    args = p.parse_args()
    torch.set_num_threads(1)
    world = get_world(args.world)
    models = load_models(world.target)
    prompt = world.prompts(models.tokenizer, args.n, seed=args.seed)
    decode = world.decode
    configs = trajectory_speculation.decoders(
        models.target.supports_cache, gen_length=decode["gen_length"],
        block_length=decode["block_length"], threshold=decode["threshold"],
        spec_budget=15, spec_low=0.1)  # the trajectory page's defaults
    base = configs[trajectory_speculation.TRAJ][0]
    rows, nfe = [], {}
    for budget in args.budgets:
        for shape in SHAPES:
            spec = dataclasses.replace(base, spec_draft=shape, spec_budget=budget,
                                       spec_verify="path")
            s = trajectory_speculation.forward_study(models.target, prompt, spec,
                                         n_bootstrap=args.n_bootstrap, seed=0)
            nfe[shape, budget] = s["nfe"]
            rows.append({"budget": budget, "shape": shape, "gain_point": s["gain"],
                         "rows": 1 + budget,
                         "gain": with_interval(s["gain"], s["gain_lo"], s["gain_hi"]),
                         "draft holds the next state": with_interval(
                             s["draft_hit"], s["draft_hit_lo"], s["draft_hit_hi"]),
                         "oracle gain": with_interval(s["oracle_gain"],
                                                      s["oracle_gain_lo"],
                                                      s["oracle_gain_hi"])})
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    print(table.drop(columns="gain_point").set_index(["budget", "shape"]).to_string())
    if args.select:
        print(select(table, nfe, args.n_bootstrap))


def select(table: pd.DataFrame, nfe: dict, n_bootstrap: int) -> str:
    """The second rule's verdict: the best candidate, and whether it replaces
    the default (paired bootstrap of the default's forwards over its)."""
    cand = table[table.budget.isin(CANDIDATE_BUDGETS)].copy()
    cand["order"] = cand["shape"].map(SHAPES.index)
    best = cand.sort_values(["gain_point", "rows", "order"],
                            ascending=[False, True, True]).iloc[0]
    key = (best["shape"], int(best["budget"]))
    if key == DEFAULT:
        return f"best candidate: the default {key}; it stays"
    est, lo, hi = ratio_bootstrap(np.asarray(nfe[DEFAULT]), np.asarray(nfe[key]),
                                  n_bootstrap, 0)
    verdict = "replaces" if lo > 1 else "does not replace"
    return (f"best candidate {key}: gain {best['gain_point']:.3f}; forwards of "
            f"{DEFAULT} over its: {est:.3f} [{lo:.3f}, {hi:.3f}]: it {verdict} "
            f"the default {DEFAULT}")


if __name__ == "__main__":
    main()
