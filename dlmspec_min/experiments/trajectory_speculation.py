"""Trajectory speculation beside vanilla decoding and Fast-dLLM (notebook 09).

The measurement of ``notebooks/09_trajectory_speculation.md`` (SPEC.md section
4; the decoder is ``decoding/speculate.py``): the batch-invariance check that
makes exactness a theorem, five greedy decoders on the same prompts (NFE,
tokens per NFE with bootstrap intervals, token-forwards, timings, judge
quality, drift from the base policy), the paired speedups, the acceptance
lengths, the threshold sweep and the decoding loop's overhead. ``measure``
returns every value the page glues, under its glue name, in the page's order.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from ..decoding.config import DecodeConfig
from ..decoding.decode import generate
from ..decoding.speculate import (
    batch_invariance_gap,
    decode_trajectory,
    drift,
    freedave_config,
    oracle_drafters,
    repeat_rows,
)
from ..measures import bench, stats
from ..measures import judge as judges
from ..worlds import World
from . import parameters
from .common import Measurement, Models

VANILLA, THRESHOLD = "vanilla (1 token/step)", "Fast-dLLM threshold"
DUAL, TRAJ = "Fast-dLLM + dual cache", "trajectory speculation (exact)"
STALE = "trajectory + stale lookahead"
VANILLA_DUAL = "vanilla + dual cache"
FD_ONE = "FreeDave, one token/step (exact)"
FD_THR = "FreeDave, threshold (subset rule)"
KEYS = {VANILLA: "vanilla", VANILLA_DUAL: "vanilla_dual", THRESHOLD: "threshold",
        DUAL: "dual", TRAJ: "traj", FD_ONE: "fd_one", FD_THR: "fd_thr",
        STALE: "stale"}  # decoder -> the suffix of its glue names
EXACT_ACCELERATORS = [THRESHOLD, DUAL, TRAJ]  # the ones C3 may take
INVARIANCE_ROWS = 4  # prompts in the batch-invariance check


def batch_gap(target, prompt: torch.Tensor, gen_length: int,
              block_length: int) -> float:
    """Largest |batched - one by one| logit difference (``batch_invariance_gap``)
    on the first four prompts, three of them with tokens inside the first block
    so that the rows differ where a verify call computes them."""
    if prompt.shape[0] < INVARIANCE_ROWS:
        raise ValueError(f"the batch-invariance check needs n_samples >= "
                         f"{INVARIANCE_ROWS} prompts, got {prompt.shape[0]}")
    P, k = prompt.shape[1], INVARIANCE_ROWS
    states = torch.cat([prompt[:k], torch.full((k, gen_length), target.mask_id,
                                               device=prompt.device)], 1)
    states[1:, P:P + block_length // 2] = prompt[1:k, -1:]  # rows differ in the block
    return batch_invariance_gap(target, states, P, P + block_length)


def decoders(supports_cache: bool, *, gen_length: int, block_length: int,
             threshold: float, spec_budget: int, spec_low: float) -> dict:
    """Decoder name -> (config, the base policy whose output it must reproduce).

    Without a KV cache (the hub's LLaDA / Dream code, SPEC.md section 2.4) the
    "dual cache" rows decode without one, speculation verifies full forwards,
    and the stale lookahead (a lookahead against a stale cache) is left out.
    FreeDave (``speculate.freedave_config``) runs as a peer: its one-token mode
    over vanilla decoding with the dual cache (its exact base), its threshold
    mode over the dual-cache threshold rule (not exact: its base is where it
    drifts from).
    """
    common = dict(gen_length=gen_length, block_length=block_length)
    fast = DecodeConfig(**common, rule="threshold", threshold=threshold)
    dual = dataclasses.replace(fast, cache="dual" if supports_cache else "none")
    traj = dataclasses.replace(dual, speculate="trajectory", spec_budget=spec_budget,
                               spec_low=spec_low, lookahead="exact")
    peer = dict(spec_budget=spec_budget, lookahead="exact")
    vanilla = DecodeConfig(**common, steps=gen_length)
    out = {VANILLA: (vanilla, None),
           VANILLA_DUAL: (dataclasses.replace(vanilla, cache=dual.cache), VANILLA),
           THRESHOLD: (fast, None), DUAL: (dual, THRESHOLD), TRAJ: (traj, DUAL),
           FD_ONE: (freedave_config("one-token", dataclasses.replace(dual, **peer)),
                    VANILLA_DUAL),
           FD_THR: (freedave_config("threshold", dataclasses.replace(dual, **peer)),
                    DUAL)}
    if supports_cache:
        out[STALE] = (dataclasses.replace(traj, lookahead="stale"), DUAL)
    return out


def decode_all(target, prompt, configs: dict):
    """One untimed warm-up decode (dual cache, first prompt), then every decoder
    timed (``bench.timed_generate``): (results, timings), by decoder name."""
    generate(target, prompt[:1], configs[DUAL][0])  # warm-up, untimed
    runs, timing = {}, {}
    for name, (cfg, _) in configs.items():
        runs[name], timing[name] = bench.timed_generate(target, prompt, cfg)
    return runs, timing


def decoder_table(runs, timing, scores, configs, gen_length: int, *, n_bootstrap: int,
                  seed: int, correct_of=None) -> pd.DataFrame:
    """One row per decoder: NFE, tokens per NFE (bootstrap over prompts), the
    gain in forwards over the dual-cache threshold base (paired bootstrap) and
    the share of outputs token-equal to that base's, verified rows per call,
    token-forwards, seconds, drift from its own base policy, judge agreement
    (token-weighted, bootstrap over prompts) and perplexity, and the answer
    accuracy (``correct_of``: generated (B, G) -> (B,) 0/1, a world with
    answers; else nan)."""
    rows, ref = [], runs[DUAL]
    for name, (_, base) in configs.items():
        r, sc = runs[name], scores[name]
        G = np.full(len(r.generated), gen_length)
        tpn = stats.ratio_bootstrap(G, r.nfe.numpy(), n_bootstrap, seed)
        agree = stats.ratio_bootstrap((sc.top1_agreement * sc.n_tokens).to_numpy(),
                                      sc.n_tokens.to_numpy(), n_bootstrap, seed)
        row = dict(decoder=name, nfe=r.nfe.double().mean().item(),
                   tokens_per_nfe=tpn[0], tpn_low=tpn[1], tpn_high=tpn[2],
                   token_forwards=r.token_forwards.double().mean().item(),
                   wall_s=timing[name]["wall_s"], cpu_s=timing[name]["cpu_s"],
                   base_policy=base or "itself", exact_match=np.nan, hamming=np.nan,
                   **dict(zip(("gain", "gain_lo", "gain_hi"),
                              gain(ref.nfe, r.nfe, n_bootstrap, seed), strict=True)),
                   equal_to_dual=drift(r.generated, ref.generated)["exact"].mean(),
                   rows_per_call=_rows_per_call(r),
                   judge_agreement=agree[0],
                   judge_ppl=judges.summarize(sc)["perplexity"],
                   accuracy=(np.nan if correct_of is None else
                             float(np.mean(correct_of(r.generated)))))
        if base is not None:
            d = drift(r.generated, runs[base].generated)
            row.update(exact_match=d["exact"].mean(), hamming=d["hamming"].mean())
        rows.append(row)
    return pd.DataFrame(rows).set_index("decoder")


ACC_SHOWN = {DUAL: "the threshold base", TRAJ: "our exact method",
             FD_ONE: "FreeDave one-token", FD_THR: "FreeDave threshold"}


def accuracy_words(table: pd.DataFrame) -> str:
    """The answer accuracy of the base, ours and the peers, in words ("not
    measured" where the prompts have no answers)."""
    acc = table["accuracy"].reindex(list(ACC_SHOWN))
    if acc.isna().all():
        return "not measured (these prompts have no answers)"
    return ", ".join(f"{words} {acc[name]:.0%}" if np.isfinite(acc[name])
                     else f"{words} not measured" for name, words in ACC_SHOWN.items())


def _rows_per_call(result) -> float:
    """States verified per forward (1 without speculation)."""
    if result.spec is None:
        return 1.0
    rows = [r for row in result.spec.rows_per_verify for r in row]
    return float(np.mean(rows)) if rows else np.nan


def decoder_values(table: pd.DataFrame, runs, block_length: int) -> dict:
    """Per decoder its glued figures (nan for a decoder that did not run), the
    drift of the exact and stale modes and of the dual cache, and the strongest
    exact accelerator."""
    out = {}
    for name, key in KEYS.items():
        t = table.loc[name] if name in table.index else pd.Series(np.nan, table.columns)
        out.update({f"t_tokens_per_nfe_{key}": t.tokens_per_nfe,
                    f"t_tokens_per_nfe_{key}_lo": t.tpn_low,
                    f"t_tokens_per_nfe_{key}_hi": t.tpn_high,
                    f"t_token_forwards_{key}": t.token_forwards,
                    f"t_wall_{key}": t.wall_s,
                    f"t_gain_{key}": t.gain, f"t_gain_{key}_lo": t.gain_lo,
                    f"t_gain_{key}_hi": t.gain_hi, f"t_equal_{key}": t.equal_to_dual,
                    f"t_rows_{key}": t.rows_per_call,
                    f"t_own_exact_{key}": t.exact_match,
                    f"t_agree_{key}": t.judge_agreement, f"t_ppl_{key}": t.judge_ppl,
                    f"t_acc_{key}": t.accuracy})
    exact = drift(runs[TRAJ].generated, runs[DUAL].generated)
    stale = (drift(runs[STALE].generated, runs[DUAL].generated) if STALE in runs
             else {"exact": np.array([np.nan]), "hamming": np.array([np.nan])})
    out.update(t_exact_match=exact["exact"].mean(), t_hamming=exact["hamming"].mean(),
               t_exact_match_stale=stale["exact"].mean(),
               t_hamming_stale=stale["hamming"].mean(),
               t_exact_match_dual=drift(runs[DUAL].generated,
                                        runs[THRESHOLD].generated)["exact"].mean(),
               t_block_length=block_length)
    out["t_acc_words"] = accuracy_words(table)
    best = table.loc[EXACT_ACCELERATORS, "tokens_per_nfe"].idxmax()
    out.update(t_best_tokens_per_nfe=table.loc[best, "tokens_per_nfe"],
               t_best_accelerator=best)
    return out


def speedups(runs, *, n_bootstrap: int, seed: int) -> dict:
    """Tokens per NFE of exact speculation over Fast-dLLM threshold, the dual-cache
    base policy and vanilla decoding: paired ratio bootstraps over prompts."""
    out = {}
    for key, base in [("threshold", THRESHOLD), ("dual", DUAL), ("vanilla", VANILLA)]:
        est, lo, hi = stats.ratio_bootstrap(runs[base].nfe.numpy(),
                                            runs[TRAJ].nfe.numpy(), n_bootstrap, seed)
        out.update({f"t_speedup_vs_{key}": est, f"t_speedup_vs_{key}_lo": lo,
                    f"t_speedup_vs_{key}_hi": hi})
    return out


def acceptance(runs) -> tuple[list[int], np.ndarray]:
    """Base-policy steps advanced by each verify call of exact speculation, and the
    sizes of the dual-cache base policy's steps (tokens committed, > 0)."""
    steps = [s for row in runs[TRAJ].spec.steps_per_verify for s in row]
    f_steps = runs[DUAL].committed_per_step
    return steps, f_steps[f_steps > 0].numpy()


def threshold_sweep(target, prompt, judge, tokenizer, runs, configs, config: Config):
    """For each of ``config.thresholds``, the dual-cache base policy and its exact
    speculation on the first ``config.n_sweep`` prompts (the main runs reused at
    ``config.threshold``): one row per (threshold, decoder) with tokens per NFE
    and the base policy's judge scores, and the exact-match rate of speculation
    at each threshold."""
    thresholds, threshold = config.thresholds, config.threshold
    n_sweep, gen_length = config.n_sweep, config.gen_length
    dual, traj = configs[DUAL][0], configs[TRAJ][0]
    rows, exact = [], []
    sub = prompt[:n_sweep]
    for thr in thresholds:
        if thr == threshold:  # rows decode independently: reuse the main runs
            b, s = runs[DUAL], runs[TRAJ]
            b_gen, s_gen, b_nfe, s_nfe = b.generated[:n_sweep], s.generated[:n_sweep], \
                b.nfe[:n_sweep], s.nfe[:n_sweep]
        else:
            b = generate(target, sub, dataclasses.replace(dual, threshold=thr))
            s = generate(target, sub, dataclasses.replace(traj, threshold=thr))
            b_gen, s_gen, b_nfe, s_nfe = b.generated, s.generated, b.nfe, s.nfe
        exact.append(drift(s_gen, b_gen)["exact"].mean())
        texts = [tokenizer.decode(r.tolist()) for r in b_gen]
        sc = judges.summarize(judge.score(texts))
        n_tok = n_sweep * gen_length
        for name, n in [(DUAL, b_nfe), ("trajectory speculation", s_nfe)]:
            rows.append(dict(threshold=thr, decoder=name,
                             tokens_per_nfe=n_tok / float(n.sum()),
                             judge_agreement=sc["agreement"],
                             judge_ppl=sc["perplexity"]))
    return pd.DataFrame(rows), exact


def sweep_wide(sweep: pd.DataFrame) -> pd.DataFrame:
    """One row per threshold: both decoders' tokens per NFE, their ratio, and the
    (shared) judge agreement and perplexity."""
    wide = sweep.pivot(index="threshold", columns="decoder", values="tokens_per_nfe")
    wide["speedup"] = wide["trajectory speculation"] / wide[DUAL]
    wide["judge agreement"] = sweep.groupby("threshold")["judge_agreement"].first()
    wide["judge perplexity"] = sweep.groupby("threshold")["judge_ppl"].first()
    return wide


def decode_oracle(target, prompt: torch.Tensor, spec: DecodeConfig, reference):
    """``spec``'s speculative decode with the oracle draft (``oracle_drafters``)
    of the base's ``reference`` decode on the same prompts: same budget, same
    verify rules, the base's own next states as the tree."""
    mask = torch.full((prompt.shape[0], spec.gen_length), int(target.mask_id),
                      dtype=prompt.dtype, device=prompt.device)
    x = torch.cat([prompt, mask], dim=1)  # (B, P + G)
    cfg = dataclasses.replace(spec, spec_draft="tree", spec_accept="exact")
    return decode_trajectory(target, x, prompt.shape[1], cfg,
                             drafters=oracle_drafters(reference))


def gain(base_nfe: torch.Tensor, nfe: torch.Tensor, n_bootstrap: int,
         seed: int) -> tuple[float, float, float]:
    """Forwards of the base over forwards of a decoder, paired over prompts:
    (estimate, 95 % low, 95 % high)."""
    return stats.ratio_bootstrap(base_nfe.numpy(), nfe.numpy(), n_bootstrap, seed)


def forward_study(target, prompt: torch.Tensor, spec: DecodeConfig, *,
                  n_bootstrap: int = 2000, seed: int = 0, base=None,
                  run=None) -> dict:
    """Where the forwards go, before any draft is changed (issue 57, item 3).

    ``spec``: an exact speculative config (``speculate="trajectory"``); its
    base F is the same config without speculation. Returns, each with a 95 %
    bootstrap interval over prompts where it is a ratio: the share of F's steps
    that commit one token (``one_token_share``), the share of verify calls with
    a drafted tree whose tree held F's next state (``draft_hit``), the tree's
    gain in forwards over F (``gain``) and an oracle draft's of the same size
    (``oracle_gain``), and the mean base-policy steps per call of each;
    ``nfe``, ``base_nfe_rows``: per prompt, the exact run's and the base's
    forwards (lists, for paired comparisons). ``base``, ``run``: the base's
    and ``spec``'s decodes of ``prompt`` where the caller has them (the page's
    own runs: not decoded again); else decoded here.
    """
    if spec.speculate != "trajectory" or spec.spec_accept != "exact":
        raise ValueError("forward_study needs an exact speculative config: "
                         "speculate='trajectory', spec_accept='exact'")
    if base is None:
        base = generate(target, prompt, dataclasses.replace(spec, speculate="none"))
    if run is None:
        run = generate(target, prompt, spec)
    oracle = decode_oracle(target, prompt, spec, base)
    if not (torch.equal(run.tokens, base.tokens)
            and torch.equal(oracle.tokens, base.tokens)):
        raise RuntimeError("an exact decode left its base policy: batch invariance "
                           "fails on this target (see batch_invariance_gap)")
    sizes = base.committed_per_step
    ones = ((sizes == 1).sum(1), (sizes > 0).sum(1))  # per prompt: 1-token, all
    hits, trees = [], []
    for steps, rows in zip(run.spec.steps_per_verify, run.spec.rows_per_verify,
                           strict=True):
        drafted = [s for s, r in zip(steps, rows, strict=True) if r > 1]
        hits.append(sum(s > 1 for s in drafted))
        trees.append(len(drafted))
    out = {"n_prompts": len(prompt), "base_nfe": base.nfe.double().mean().item()}
    for key, (num, den) in {"one_token_share": ones,
                            "draft_hit": (hits, trees)}.items():
        est = stats.ratio_bootstrap(np.asarray(num), np.asarray(den), n_bootstrap,
                                    seed)
        out.update({key: est[0], f"{key}_lo": est[1], f"{key}_hi": est[2]})
    for key, res in (("gain", run), ("oracle_gain", oracle)):
        est = gain(base.nfe, res.nfe, n_bootstrap, seed)
        out.update({key: est[0], f"{key}_lo": est[1], f"{key}_hi": est[2]})
    out.update(steps_per_call=run.spec.mean_steps_per_verify,
               oracle_steps_per_call=oracle.spec.mean_steps_per_verify,
               nfe=run.nfe.tolist(), base_nfe_rows=base.nfe.tolist())
    return out


CPU_BUDGET = 1  # the CPU setting: one drafted state, 2 rows per verify call


def cpu_setting(spec: DecodeConfig) -> DecodeConfig:
    """The exact method's smallest draft (``CPU_BUDGET`` drafted states per
    call, the default shape), every row computed as the method computes it."""
    return dataclasses.replace(spec, spec_budget=CPU_BUDGET, spec_verify="tree")


def wall_ratio(target, prompt: torch.Tensor, base: DecodeConfig, spec: DecodeConfig,
               *, repeats: int = 3, n_bootstrap: int = 2000, seed: int = 0) -> dict:
    """Wall time per generated token of ``spec`` over ``base`` at batch 1.

    Both decode every prompt alone, in one process, interleaved: after one
    untimed warm-up of each, ``repeats`` rounds, each timing base then spec on
    every prompt (the order swapped every other round). Per prompt, the median
    over rounds of each; ``spec`` must give ``base``'s tokens (exact), so the
    ratio of times is the ratio per generated token. Returns the ratio of
    summed seconds (``ratio``) with a 95 % bootstrap interval over prompts
    (``ratio_lo``, ``ratio_hi``), the forwards of each (``nfe_base``,
    ``nfe_spec``, per prompt) and the seconds per token of each.
    """
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    generate(target, prompt[:1], base)
    generate(target, prompt[:1], spec)  # warm-up, untimed
    n = prompt.shape[0]
    secs = {"base": np.zeros((repeats, n)), "spec": np.zeros((repeats, n))}
    outs = {}
    for r in range(repeats):
        order = [("base", base), ("spec", spec)]
        for b in range(n):
            for key, cfg in (order if (r + b) % 2 == 0 else order[::-1]):
                t0 = time.perf_counter()
                outs[key, b] = generate(target, prompt[b:b + 1], cfg)
                if prompt.is_cuda:  # the kernels, not their launch
                    torch.cuda.synchronize(prompt.device)
                secs[key][r, b] = time.perf_counter() - t0
    for b in range(n):
        if not torch.equal(outs["base", b].tokens, outs["spec", b].tokens):
            raise RuntimeError("the CPU setting left its base policy on prompt "
                               f"{b}: it is not exact here")
    base_s, spec_s = np.median(secs["base"], 0), np.median(secs["spec"], 0)  # (n,)
    est, lo, hi = stats.ratio_bootstrap(spec_s, base_s, n_bootstrap, seed)
    tokens = n * base.gen_length
    return {"ratio": est, "ratio_lo": lo, "ratio_hi": hi,
            "base_s_per_token": float(base_s.sum()) / tokens,
            "spec_s_per_token": float(spec_s.sum()) / tokens,
            "nfe_base": float(np.mean([int(outs["base", b].nfe[0]) for b in range(n)])),
            "nfe_spec": float(np.mean([int(outs["spec", b].nfe[0]) for b in range(n)])),
            "repeats": repeats}


def targets(checks: dict) -> dict:
    """The figures the page sets our exact gain beside, read from ``claims.yml``'s
    trajectory checks: the related paper's gain (4.3 / 2.6 tokens per step) and
    the math world's goal (the number its target's rule compares with)."""
    paper = checks["paper"]
    rule = checks["worlds"]["math"]["targets"]["tokens_per_nfe_2x_threshold"]
    found = re.fullmatch(r"\s*t_speedup_vs_threshold\s*>=\s*([0-9.]+)\s*", rule)
    if found is None:
        raise ValueError(f"the math world's gain target reads {rule!r}, not "
                         "'t_speedup_vs_threshold >= NUMBER'")
    return {"paper_gain": paper["traj_tokens_per_step_after"]
            / paper["traj_tokens_per_step_before"],
            "goal_gain": float(found.group(1))}


def gains_said(values: dict, goals: dict) -> dict:
    """The page's gains in words, each with its interval, for the table of
    worlds: ours against the paper's gain and our goal (``targets``), and each
    peer's with its token-equal share."""
    def said(key):
        return stats.with_interval(values[f"t_gain_{key}"], values[f"t_gain_{key}_lo"],
                                   values[f"t_gain_{key}_hi"]) + "x"

    gain = values["t_gain_traj"]
    return {
        "t_gain_traj_said": (
            f"{said('traj')} ({against(gain, goals['paper_gain'])} the paper's "
            f"{goals['paper_gain']:.2f}x, {against(gain, goals['goal_gain'])} our "
            f"goal {goals['goal_gain']:.1f}x)"),
        **{f"t_gain_{peer}_said": (f"{said(peer)}, token-equal to the base on "
                                    f"{values[f't_equal_{peer}']:.0%}")
           for peer in ("fd_one", "fd_thr")}}


def answer_scorer(world: World, tokenizer, n: int, seed: int):
    """generated (n, G) -> (n,) 0/1 answer correctness where ``world``'s prompts
    have answers (a math world's held-out questions, the first ``n`` drawn with
    ``seed``, as the page draws its prompts); None elsewhere (the judge's figures
    are the quality there)."""
    answers = world.answers(n, seed=seed)
    if answers is None:
        return None
    return lambda generated: world.answer_correct(tokenizer, generated, answers)


def against(value: float, target: float) -> str:
    """'at or above' or 'below' (a point estimate against a target)."""
    return "at or above" if value >= target else "below"


ROW_COUNTS = (1, 2, 4, 16)  # verify-call sizes whose CPU cost the page shows


def row_costs(target, prompt: torch.Tensor, block_length: int,
              repeats: int = 5) -> dict[int, float]:
    """CPU time of one cached window (the block) for n rows over one row's.

    Why a small draft cannot pay at batch 1 on a CPU unless it hits often: a
    verify call of n rows costs ``row_costs[n]`` base forwards, so a draft of
    n - 1 states pays only where its gain in forwards exceeds that. Process
    CPU time, median of ``repeats`` after a warm-up, on the first prompt with
    a masked block; without a KV cache, full forwards.
    """
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    P = prompt.shape[1]
    x = torch.cat([prompt[:1], torch.full((1, block_length), int(target.mask_id),
                                          dtype=prompt.dtype)], dim=1)  # (1, L)
    cached = getattr(target, "supports_cache", False)
    cache = target.prefill(x)[1] if cached else None

    def call(n: int):
        if cached:
            target.logits_window(x[:, P:].expand(n, -1), P,
                                 repeat_rows(cache, n))
        else:
            target.logits(x.expand(n, -1))

    cost = {n: bench.timed(lambda n=n: call(n), repeats)[1] for n in ROW_COUNTS}
    return {n: cost[n] / cost[1] if cost[1] > 0 else math.nan for n in ROW_COUNTS}


def paper_table(m: Measurement, paper: dict) -> pd.DataFrame:
    """The papers' tokens per step (``paper``: the figures of ``book/claims.yml``'s
    trajectory checks) beside this build's tokens per NFE."""
    tpn = m.tables["decoders"]["tokens_per_nfe"]
    return pd.DataFrame({
        "paper (tokens/step)": [paper["fast_dllm_tokens_per_step"],
                                paper["traj_tokens_per_step_before"],
                                paper["traj_tokens_per_step_after"],
                                paper["traj_tokens_per_step_after"]
                                / paper["traj_tokens_per_step_before"]],
        "this build (tokens/NFE)": [tpn[THRESHOLD], tpn[DUAL], tpn[TRAJ],
                                    tpn[TRAJ] / tpn[DUAL]],
    }, index=["Fast-dLLM threshold (Fast-dLLM paper, no cache)",
              "trajectory paper's Fast-dLLM baseline", "trajectory speculation",
              "ratio speculation / its baseline"])


@dataclass(frozen=True)
class Config(parameters.Claim):
    NOTEBOOK: ClassVar[str] = "09_trajectory_speculation"

    n_samples: int = parameters.shared("n_samples", 8,
                                   "prompts, decoded greedily by every decoder")
    prompt_source: str = "brown"
    prompt_length: int = 8
    spec_budget: int = parameters.param(
        15, "draft-tree nodes verified per call besides the root")
    spec_low: float = parameters.param(
        0.1, "the draft never branches on confidences below this")
    thresholds: list = parameters.shared("thresholds", [0.3, 0.5, 0.7, 0.9, 1.0],
                                     "the sweep of the speed/quality frontier")
    n_sweep: int = parameters.param(4,
        "prompts per threshold of the sweep (the first of the n_samples)")
    n_repeats: int = parameters.shared("n_repeats",
                                   note="of the loop-overhead measurement")
    judge: str = parameters.shared("judge")
    threads: int = parameters.param(1,
        "torch CPU threads (1: timings that other jobs on the machine disturb "
        "least)")


def measure(
    models: Models, config: Config, *, prompt: torch.Tensor, judge, correct_of=None
) -> Measurement:
    """The whole measurement of notebook 09 on ``prompt`` (n, P) with ``judge``
    (a loaded ``measures.judge.Judge``; the page loads ``config.judge``, which
    this function does not read), at the page's ``config``; ``correct_of``: a
    world with answers, generated (B, G) -> (B,) 0/1 (``decoder_table``).

    ``values``: every glued value but the checks and the page's run time, in the
    page's order. ``tables``: decoders (one row per decoder), speedups (over
    threshold, dual, vanilla, with intervals), sweep (one row per threshold).
    ``arrays``: results and timing (by decoder), steps_per_verify,
    base_step_sizes, sweep (the long sweep table), sweep_exact.
    """
    target, tok = models.target, models.tokenizer
    values = {
        "t_batch_gap": batch_gap(target, prompt, config.gen_length, config.block_length)
    }
    configs = decoders(target.supports_cache, gen_length=config.gen_length,
                       block_length=config.block_length, threshold=config.threshold,
                       spec_budget=config.spec_budget, spec_low=config.spec_low)
    runs, timing = decode_all(target, prompt, configs)
    scores = {
        name: judge.score([tok.decode(r.tolist()) for r in res.generated])
        for name, res in runs.items()
    }
    table = decoder_table(runs, timing, scores, configs, config.gen_length,
                          n_bootstrap=config.n_bootstrap, seed=config.seed,
                          correct_of=correct_of)
    values.update(decoder_values(table, runs, config.block_length))
    values.update(speedups(runs, n_bootstrap=config.n_bootstrap, seed=config.seed))
    study = forward_study(target, prompt,
                          dataclasses.replace(configs[TRAJ][0], spec_verify="path"),
                          n_bootstrap=config.n_bootstrap, seed=config.seed,
                          base=runs[DUAL], run=runs[TRAJ])
    values.update({f"t_study_{k}": v for k, v in study.items()
                   if not isinstance(v, list)})
    values.update({f"t_row_cost_{n}": c for n, c in row_costs(
        target, prompt, config.block_length).items()})
    cpu = wall_ratio(target, prompt, configs[DUAL][0], cpu_setting(configs[TRAJ][0]),
                     repeats=config.n_repeats, n_bootstrap=config.n_bootstrap,
                     seed=config.seed)
    values.update({f"t_cpu_{k}": v for k, v in cpu.items()},
                  t_cpu_budget=CPU_BUDGET, t_cpu_gain=cpu["nfe_base"] / cpu["nfe_spec"])
    steps, sizes = acceptance(runs)
    values.update(
        t_threshold=config.threshold,
        t_mean_steps_per_verify=float(np.mean(steps)),
        t_share_single_step=float(np.mean(np.array(steps) == 1)),
        t_base_tokens_per_step=float(sizes.mean()),
        t_n_sweep=config.n_sweep,
    )
    sweep, sweep_exact = threshold_sweep(target, prompt, judge, tok, runs, configs,
                                         config)
    wide = sweep_wide(sweep)
    values.update(
        t_exact_match_sweep=float(min(sweep_exact)),
        t_sweep_min_speedup=wide["speedup"].min(),
        t_sweep_max_speedup=wide["speedup"].max(),
        t_sweep_base_tpn_min=wide[DUAL].min(),
        t_sweep_base_tpn_max=wide[DUAL].max(),
        t_sweep_traj_tpn_max=wide["trajectory speculation"].max(),
        t_sweep_lowest_threshold=min(config.thresholds),
    )
    values.update(
        t_token_forwards_ratio=table.loc[TRAJ, "token_forwards"]
        / table.loc[DUAL, "token_forwards"],
        t_wall_ratio=table.loc[TRAJ, "wall_s"] / table.loc[DUAL, "wall_s"],
        t_threads=torch.get_num_threads(),
    )
    over = bench.loop_overhead(
        target, prompt[:1], configs[TRAJ][0], repeats=config.n_repeats, warmup=False
    )
    values.update(
        t_n_repeats=config.n_repeats,
        t_overhead_ratio=timing[TRAJ]["cpu_ratio"],
        t_overhead_ratio_wall=timing[TRAJ]["ratio"],
        t_overhead_ratio_replayed=over["cpu_ratio"],
        t_overhead_ratio_dual=timing[DUAL]["cpu_ratio"],
    )
    speedup = pd.DataFrame(
        {
            k: [values[f"t_speedup_vs_{k}{s}"] for s in ("", "_lo", "_hi")]
            for k in ("threshold", "dual", "vanilla")
        },
        index=["speedup in tokens/NFE", "95 % low", "95 % high"],
    ).T.rename_axis("over")
    arrays = dict(
        results=runs,
        timing=timing,
        steps_per_verify=steps,
        base_step_sizes=sizes,
        sweep=sweep,
        sweep_exact=sweep_exact,
    )
    return Measurement(
        values, {"decoders": table, "speedups": speedup, "sweep": wide}, arrays
    )


def draw_acceptance(m: Measurement):
    """Shares of verify calls by the base-policy steps they advance (left) and of
    the base policy's steps by the tokens they commit (right)."""
    import matplotlib.pyplot as plt

    steps, sizes = m.arrays["steps_per_verify"], m.arrays["base_step_sizes"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    counts = collections.Counter(steps)
    axes[0].bar(list(counts), [counts[k] / len(steps) for k in counts])
    axes[0].set(xlabel="base-policy steps per verify call",
                ylabel="share of verify calls", title="Acceptance length (exact mode)")
    sizes_count = collections.Counter(sizes.tolist())
    axes[1].bar(list(sizes_count), [sizes_count[k] / len(sizes) for k in sizes_count],
                color="C1")
    axes[1].set(xlabel="tokens committed by one step of F", ylabel="share of steps",
                title="The base policy's step sizes")
    plt.tight_layout()
    plt.close(fig)
    return fig


def draw_frontier(m: Measurement):
    """Judge agreement against tokens per NFE over the threshold sweep, with
    vanilla decoding (all prompts) as a point."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for name, d in m.arrays["sweep"].groupby("decoder"):
        ax.plot(d.tokens_per_nfe, d.judge_agreement, marker="o", label=name)
        for r in d.itertuples():
            ax.annotate(f"{r.threshold:g}", (r.tokens_per_nfe, r.judge_agreement),
                        fontsize=7, xytext=(3, 3), textcoords="offset points")
    v = m.tables["decoders"].loc[VANILLA]
    ax.scatter([v.tokens_per_nfe], [v.judge_agreement], color="k", marker="s",
               label="vanilla (all prompts)")
    ax.set(xlabel="tokens per NFE (speed)", ylabel="judge top-1 agreement (quality)",
           title="Speed/quality frontier over the threshold (labels)")
    ax.legend(fontsize=8)
    plt.tight_layout()
    plt.close(fig)
    return fig
