"""C4 (notebook 04): cluster-level verification and the size-matched random control.

SPEC.md §3, relaxed variant: the draft (the small model, TOK mode) proposes one
token per content anchor from the ``[BOS]`` prompt and masks; one target
forward verifies all anchors; anchor ``i`` is accepted iff ``sigma(draft token)
== sigma(target argmax)``. ``alpha_tok`` is the exact-token rate on the same
pairs, ``alpha_clu`` the cluster rate. The random control: ``sigma o pi`` for
uniform permutations ``pi`` of the non-special vocabulary (the semantic
clusters' sizes exactly), a one-sided permutation p-value for "random accepts
more", its closed-form mean, and a bootstrap over sequences of the difference
random - semantic. The same across K, and which confusions each partition merges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from ..decoding.decode import generate
from ..measures import stats
from ..measures.order import row_generators
from ..ssld import accelerators, codebooks, decoder, drafting, inputs, semantic
from ..worlds import PROSE, World
from . import parameters
from .common import Measurement, Models
from .parameters import shared

VERIFY = "verify-pass argmax (relaxed decoder)"  # the primary target token
ORACLE = "final decoded token (oracle)"
ANCHOR_DECODER = "Fast-dLLM threshold"  # the decoder whose content words are anchors
SWEEP_SEED_OFFSET = 100  # the K sweep's permutation streams: seed + 100 + j
TOP_CONFUSIONS = 10

# glue name (without ``c4_``) -> column of the acceptance table, in recording order
ACCEPTANCE_KEYS = {
    "alpha_tok": "alpha_tok", "alpha_tok_lo": "tok low", "alpha_tok_hi": "tok high",
    "alpha_clu": "alpha_clu (semantic)", "alpha_clu_lo": "clu low",
    "alpha_clu_hi": "clu high", "ratio": "ratio", "ratio_lo": "ratio low",
    "ratio_hi": "ratio high", "random_mean": "alpha_clu random (mean)",
    "random_expected": "random, closed form",
    "p_random_more": "p (random accepts more)",
    "random_minus_semantic": "random - semantic",
    "random_minus_semantic_lo": "difference low",
    "random_minus_semantic_hi": "difference high",
}
ORACLE_KEYS = {"oracle_alpha_tok": "alpha_tok",
               "oracle_alpha_clu": "alpha_clu (semantic)",
               "oracle_random_mean": "alpha_clu random (mean)",
               "oracle_p_random_more": "p (random accepts more)"}


@dataclass
class Pairs:
    """The fixed (draft, target) token pairs at the anchors, (B, G) each."""

    drafted: torch.Tensor  # the draft's TOK-mode token per generated position
    targets: dict[str, torch.Tensor]  # target-token name -> (B, G)
    anchors: torch.Tensor  # content words at their first piece (the headline)
    anchors_piece: torch.Tensor  # every content piece (secondary)
    sid: Any  # the semantic IDs at K


@dataclass
class ClusterVerification(Measurement):
    """C4's measurement; ``rule_values`` and ``oracle_rule_values`` are what C4's
    verdict rule reads, from the verify-pass and the oracle rows."""

    rule_values: dict[str, float] = field(default_factory=dict)
    oracle_rule_values: dict[str, float] = field(default_factory=dict)


def token_pairs(models: Models, config: parameters.Drafted,
                world: World = PROSE) -> Pairs:
    """Decode, find the anchors, and draw the draft's and the target's tokens
    (``config``: the sizes, seed, device, K and the world's decode).

    Anchors are the content positions of the target's own Fast-dLLM threshold
    decode of ``world``'s prompts (prose: ``[BOS]``; one seeded stream per
    sample) with ``world``'s roles; the target
    tokens are the verify pass's argmax (special tokens excluded) and the final
    decoded token (the oracle of notebook 02).
    """
    target, tok = models.target, models.tokenizer
    n_samples, gen_length, seed, device = (config.n_samples, config.gen_length,
                                           config.seed, config.device)
    lexicon = world.roles()
    prompt = world.prompts(tok, n_samples, seed=seed, device=device)
    P = prompt.shape[1]
    sid = semantic.semantic_ids_for(target, config.K, seed=seed, tokenizer=tok)
    cfg = accelerators.accelerators(gen_length, config.block_length, config.threshold,
                                    config.temperature)[ANCHOR_DECODER]
    ref = generate(target, prompt, cfg, row_generators(seed, n_samples, device))
    anchors = inputs.anchor_mask(tok, ref.tokens, lexicon)[:, P:]  # (B, G)
    anchors_piece = inputs.anchor_mask(tok, ref.tokens, lexicon, unit="piece")[:, P:]
    verify = decoder.verify_logits(target, prompt, gen_length)  # (B, G, V)
    target_argmax = verify.masked_fill(sid.special.to(verify.device),
                                       float("-inf")).argmax(-1)
    drafted = drafting.SmallMarginalDraft(models.draft, sid)(prompt, gen_length).tokens
    return Pairs(drafted, {VERIFY: target_argmax, ORACLE: ref.generated}, anchors,
                 anchors_piece, sid)


def acceptance_row(drafted, target_tokens, anchors, sid, config: Config,
                   permutation_seed: int):
    """alpha_tok, alpha_clu, their ratio (bootstrap intervals over sequences), the
    permutation test against size-matched random clusterings, its closed-form
    mean, and the difference random - semantic; the row and the test's result
    (``config``: the permutations, the bootstrap and its seed)."""
    n_bootstrap, seed = config.n_bootstrap, config.seed
    tok_hits, n = codebooks.per_sequence(drafted == target_tokens, anchors)
    clu_hits, _ = codebooks.per_sequence(sid(drafted) == sid(target_tokens), anchors)
    a_tok, a_tok_lo, a_tok_hi = stats.rate_ci(tok_hits, n, n_bootstrap, seed)
    a_clu, a_clu_lo, a_clu_hi = stats.rate_ci(clu_hits, n, n_bootstrap, seed)
    if tok_hits.sum() > 0:
        ratio, r_lo, r_hi = stats.ratio_bootstrap(clu_hits, tok_hits, n_bootstrap, seed)
    else:  # no exact hit: the ratio is undefined
        ratio = r_lo = r_hi = float("nan")
    d, t = drafted[anchors], target_tokens[anchors]
    perm = semantic.permutation_test_fast(d, t, sid, config.n_permutations,
                                          torch.Generator().manual_seed(permutation_seed))
    diff, diff_lo, diff_hi = semantic.random_minus_semantic(
        drafted, target_tokens, anchors, sid, n_bootstrap, seed)
    row = {"alpha_tok": a_tok, "tok low": a_tok_lo, "tok high": a_tok_hi,
           "alpha_clu (semantic)": a_clu, "clu low": a_clu_lo, "clu high": a_clu_hi,
           "ratio": ratio, "ratio low": r_lo, "ratio high": r_hi,
           "alpha_clu random (mean)": perm.null_mean,
           "random, closed form": semantic.expected_random_alpha(d, t, sid),
           "random 97.5 %": float(np.quantile(perm.null, 0.975)),
           "p (random accepts more)": perm.p_random_more,
           "random - semantic": diff, "difference low": diff_lo,
           "difference high": diff_hi}
    return row, perm


def unit_row(drafted, target_tokens, where, sid) -> dict[str, float]:
    """alpha_tok, alpha_clu and a random clustering's expected alpha_clu (closed
    form, no permutation test) at the positions ``where``."""
    th, n_w = codebooks.per_sequence(drafted == target_tokens, where)
    ch, _ = codebooks.per_sequence(sid(drafted) == sid(target_tokens), where)
    return {"anchors": int(n_w.sum()), "alpha_tok": th.sum() / n_w.sum(),
            "alpha_clu (semantic)": ch.sum() / n_w.sum(),
            "random, closed form": semantic.expected_random_alpha(
                drafted[where], target_tokens[where], sid)}


def k_sweep(models: Models, pairs: Pairs, *, K: int, K_sweep, alpha_tok: float,
            n_permutations: int, seed: int) -> pd.DataFrame:
    """The permutation test on the verify-pass pairs at every K (k-means once per K
    with ``seed``; the clustering at ``K`` reused)."""
    tt = pairs.targets[VERIFY]
    rows = []
    for j, k in enumerate(sorted({K, *K_sweep})):
        codes = pairs.sid if k == K else semantic.semantic_ids_for(
            models.target, k, seed=seed, tokenizer=models.tokenizer)
        perm = semantic.permutation_test_fast(
            pairs.drafted[pairs.anchors], tt[pairs.anchors], codes, n_permutations,
            torch.Generator().manual_seed(seed + SWEEP_SEED_OFFSET + j))
        rows.append({"K": codes.n_clusters, "alpha_tok": alpha_tok,
                     "alpha_clu semantic": perm.alpha,
                     "alpha_clu random (mean)": perm.null_mean,
                     "random 2.5 %": float(np.quantile(perm.null, 0.025)),
                     "random 97.5 %": float(np.quantile(perm.null, 0.975)),
                     "p (random accepts more)": perm.p_random_more,
                     "random > semantic": perm.null_mean > perm.alpha})
    return pd.DataFrame(rows).set_index("K")


def rule_values(row) -> dict[str, float]:
    """The keys C4's rule reads, from one row of the acceptance table (an
    undefined ratio reads as 0: no gain)."""
    return {"c4_ratio": float(row["ratio"]) if np.isfinite(row["ratio"]) else 0.0,
            "c4_alpha_clu": float(row["alpha_clu (semantic)"]),
            "c4_random_mean": float(row["alpha_clu random (mean)"]),
            "c4_p_random_more": float(row["p (random accepts more)"]),
            "c4_random_minus_semantic_lo": float(row["difference low"]),
            "c4_random_minus_semantic_hi": float(row["difference high"])}


@dataclass(frozen=True)
class Config(parameters.Drafted):
    NOTEBOOK: ClassVar[str] = "04_cluster_verification"

    n_samples: int = shared("n_samples", 32, "unconditional (the prompt is [BOS])")
    K_sweep: list = shared("K_sweep")
    n_permutations: int = shared("n_permutations")


def measure(models: Models, world: World, config: Config) -> ClusterVerification:
    """Everything C4's page measures in ``world``, in the page's order (``values``:
    the ``c4_*`` glue names except the verdicts and the run time, which the page
    records)."""
    pairs = token_pairs(models, config, world)
    drafted, anchors, sid = pairs.drafted, pairs.anchors, pairs.sid
    rows, perms = {}, {}
    for i, (name, tt) in enumerate(pairs.targets.items()):
        rows[name], perms[name] = acceptance_row(drafted, tt, anchors, sid, config,
                                                 permutation_seed=config.seed + i)
    acc = pd.DataFrame.from_dict(rows, orient="index").rename_axis("target token")
    m, o = acc.loc[VERIFY], acc.loc[ORACLE]
    v = {f"c4_{key}": m[col] for key, col in ACCEPTANCE_KEYS.items()}
    v.update({f"c4_{key}": o[col] for key, col in ORACLE_KEYS.items()})
    v["c4_n_anchors"] = int(anchors.sum())
    v["c4_n_permutations"] = config.n_permutations
    v["c4_chance_uniform"] = semantic.uniform_chance(sid)
    v["c4_same_cluster_chance"] = semantic.same_cluster_chance(sid)

    tt, piece = pairs.targets[VERIFY], pairs.anchors_piece
    units = pd.DataFrame(
        {
            "word anchors (headline)": unit_row(drafted, tt, anchors, sid),
            "piece-level anchors (secondary)": unit_row(drafted, tt, piece, sid),
        }
    ).T
    pr = units.loc["piece-level anchors (secondary)"]
    v["c4_alpha_tok_piece"] = pr["alpha_tok"]
    v["c4_alpha_clu_piece"] = pr["alpha_clu (semantic)"]
    v["c4_random_expected_piece"] = pr["random, closed form"]
    v["c4_continuation_share_of_anchors"] = float(
        (piece & ~anchors).sum() / piece.sum()
    )

    sweep = k_sweep(
        models,
        pairs,
        K=config.K,
        K_sweep=config.K_sweep,
        alpha_tok=float(m["alpha_tok"]),
        n_permutations=config.n_permutations,
        seed=config.seed,
    )
    v["c4_sweep_random_more_share"] = float(sweep["random > semantic"].mean())
    v["c4_sweep_min_p"] = float(sweep["p (random accepts more)"].min())

    tok = models.tokenizer
    conf, merged = semantic.pair_merge_table(
        drafted[anchors], tt[anchors], sid, tok, top=TOP_CONFUSIONS
    )
    _, merged_o = semantic.pair_merge_table(
        drafted[anchors], pairs.targets[ORACLE][anchors], sid, tok, top=TOP_CONFUSIONS
    )
    v["c4_confusions_merged_semantic"] = merged
    v["c4_confusions_merged_semantic_oracle"] = merged_o
    sizes = sid.sizes().numpy()
    v["c4_median_cluster_size"] = float(np.median(sizes))
    v["c4_anchor_cluster_size"] = float(np.median(sizes[sid(tt[anchors]).numpy()]))
    oracle_rule = rule_values(o)
    v["c4_oracle_ratio"] = oracle_rule["c4_ratio"]
    return ClusterVerification(
        values=v,
        tables={"acceptance": acc, "units": units, "sweep": sweep, "confusions": conf},
        arrays={"perms": perms, "cluster_sizes": sizes, "pairs": pairs},
        rule_values=rule_values(m),
        oracle_rule_values=oracle_rule,
    )
