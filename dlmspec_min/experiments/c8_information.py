"""C8, the information view (notebook 08): what the draft lacks is what fixes the token.

SPEC.md section 5 (C8) asks for the conditional entropy of content vs function
tokens under the target, and for how alpha_SID tracks the entropy of the
anchor's semantic ID. ``measure`` runs the page's four parts, each its own
function here:

- ``class_entropies``: the target's entropy when it commits each token of a
  confidence-order decode (``[BOS]`` prompt), content vs function;
- ``anchor_rates`` / ``information_means`` / ``correlations`` / ``bounds``: per
  oracle anchor of a prompted threshold decode, what SSLD's exact and relaxed
  checks do there and what the draft's view leaves open about its ID;
- ``easy_tokens``: the entropy of what a token-space accelerator commits, at
  each threshold, beside SSLD's anchors at the verify pass.

Each returns the glue values it measures (names as the page records them, in
its order) and the tables and arrays the page shows (its figures draw from
``arrays``); ``condition_notes`` and ``comparison_table`` word the verdict's
conditions and the closing table. Nothing here decides the verdict.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ..decoding.config import DecodeConfig
from ..decoding.decode import generate
from ..measures import entropy, order, stats, tagger
from ..ssld import accelerators, codebooks, decoder, drafting, inputs, semantic
from ..ssld import information as info
from ..worlds import World
from . import parameters
from .common import Measurement, Models
from .parameters import param, shared

CLASSES = [tagger.CONTENT, tagger.FUNCTION, tagger.PUNCT]
PALETTE = {tagger.CONTENT: "C3", tagger.FUNCTION: "C0", tagger.PUNCT: "C2"}
INFO_COLUMNS = ["sid_entropy_verify", "sid_entropy_draft", "sid_entropy_commit",
                "sid_info_verify", "sid_info_commit", "glue_info", "token_info_verify",
                "token_info_commit"]
RATES = {  # glue suffix: (description, hit column, trial column or None: every anchor)
    "alpha_sid": ("exact hit: drafted ID = ID of the final token (alpha_SID)",
                  "exact_hit", None),
    "first_pass_hit": ("the target's verify pass: its most probable ID = ID of the "
                       "final token", "first_pass_hit", None),
    "exact_accepted": ("exact decoder accepts (drafted ID = verify pass's most "
                       "probable ID)", "exact_accepted", None),
    "exact_faithful": ("... and the token it commits is the final token",
                       "exact_faithful", "exact_accepted"),
    "relaxed_acceptance": ("relaxed decoder accepts (ID of draft token = ID of verify "
                           "argmax)", "relaxed_accepted", None),
    "relaxed_faithful": ("... and the committed draft token is the final token",
                         "relaxed_faithful", "relaxed_accepted"),
    "relaxed_same_id": ("... and it has the final token's ID", "relaxed_same_id",
                        "relaxed_accepted"),
}
MEASURES = {  # per-anchor measure -> description; hits are correlated with its negative
    "sid_entropy_verify": "ID entropy H(q_Y) at the verify pass (the rule)",
    "sid_info_verify": "missing information -log q_Y(s)",
    "glue_info": "information supplied by the context, log q_t(s) - log q_Y(s)",
}
OUTCOMES = {
    "exact hit (alpha_SID)": ("exact_hit", None),
    "target's verify pass hits": ("first_pass_hit", None),
    "relaxed: accepted": ("relaxed_accepted", None),
    "relaxed: faithful among accepted": ("relaxed_faithful", "relaxed_accepted"),
    "relaxed: same ID among accepted": ("relaxed_same_id", "relaxed_accepted"),
}
BINNED = ["sid_entropy_verify", "sid_info_verify"]
ANCHORS_AT_VERIFY = "SSLD anchors at the verify pass"


@dataclass
class InformationMeasurement(Measurement):
    """C8's measurement; ``facts`` holds what the page prints about the run
    (vocabulary, K, prompt length and an example, decode seconds, forwards)."""

    facts: dict[str, Any] = field(default_factory=dict)


def pooled(sel: pd.DataFrame, n_bootstrap: int, seed: int) -> dict:
    """Mean entropy and top-1 probability of a group of tokens, each with its 95 %
    sequence-bootstrap interval (``stats.pooled_mean_bootstrap``)."""
    h, h_lo, h_hi = stats.pooled_mean_bootstrap(sel.entropy, sel.seq, n_bootstrap,
                                                seed)
    p1, p1_lo, p1_hi = stats.pooled_mean_bootstrap(sel.top1, sel.seq, n_bootstrap,
                                                   seed)
    return {"tokens": len(sel), "entropy (nats)": h, "low": h_lo, "high": h_hi,
            "top-1 probability": p1, "top-1 low": p1_lo, "top-1 high": p1_hi}


def class_entropies(target, sid, tok, world, order_prompt, config: Config):
    """Content vs function at commit time (SPEC.md section 5, C8): the target decodes
    ``order_prompt`` (prose: the ``[BOS]`` samples; math: held-out questions) in
    confidence order, one token per step (the C1 decoder of the world: one block,
    or blocks of ``config.block_length`` with the decode time counted inside each,
    ``order.block_times``), through ``information.CommitRecorder``; each token
    gets the entropy and top-1 probability of the forward that committed it, and
    ``world``'s roles its class. Returns (values, by-class table, the tagged word
    tokens, facts)."""
    gen_length, temperature = config.gen_length, config.temperature
    n_bootstrap, seed, device = config.n_bootstrap, config.seed, config.device
    block_length = world.order_blocks(config.block_length)
    lexicon = world.roles()
    rec = info.CommitRecorder(target, sid)
    t0 = time.perf_counter()
    n = order_prompt.shape[0]
    run = generate(rec, order_prompt,
                   order.one_token_per_step(gen_length, block_length,
                                            temperature=temperature),
                   order.row_generators(seed, n, device))
    at = rec.at_commit(run)
    seconds = time.perf_counter() - t0
    tt = order.token_table(run, tok, lexicon, block_length=block_length)
    for k in ("entropy", "top1", "sid_entropy"):
        tt[k] = at[k].reshape(-1).numpy()
    tt["decile"] = order.order_bins(tt)
    words = tt[tt.cls.isin(CLASSES)]
    rows = []
    for c in CLASSES:
        sel = words[words.cls == c]
        if not len(sel):  # e.g. no punctuation in a few samples of a random model
            rows.append({"class": c, "tokens": 0})
            continue
        rows.append({"class": c, **pooled(sel, n_bootstrap, seed),
                     "ID entropy (nats)": sel.sid_entropy.mean(),
                     "decode time r": sel.r.mean()})
    by_class = pd.DataFrame(rows).set_index("class")
    con, fun = words[words.cls == tagger.CONTENT], words[words.cls == tagger.FUNCTION]
    if not len(con) or not len(fun):
        raise ValueError(f"the confidence-order decode holds {len(con)} content and "
                         f"{len(fun)} function tokens; both are needed: raise n_side "
                         "or gen_length")
    diff, diff_lo, diff_hi = stats.mean_difference_bootstrap(
        con.entropy, con.seq, fun.entropy, fun.seq, n_bootstrap, seed)
    auc_h, p_h = stats.mann_whitney(con.entropy, fun.entropy)
    row = by_class.loc
    values = {
        "c8_entropy_content": row[tagger.CONTENT, "entropy (nats)"],
        "c8_entropy_function": row[tagger.FUNCTION, "entropy (nats)"],
        "c8_entropy_glue": row[tagger.PUNCT, "entropy (nats)"],
        "c8_entropy_content_lo": row[tagger.CONTENT, "low"],
        "c8_entropy_content_hi": row[tagger.CONTENT, "high"],
        "c8_entropy_function_lo": row[tagger.FUNCTION, "low"],
        "c8_entropy_function_hi": row[tagger.FUNCTION, "high"],
        "c8_entropy_diff": diff, "c8_entropy_diff_lo": diff_lo,
        "c8_entropy_diff_hi": diff_hi,
        "c8_entropy_auc": auc_h, "c8_entropy_auc_p": p_h,
        "c8_top1_content": row[tagger.CONTENT, "top-1 probability"],
        "c8_top1_function": row[tagger.FUNCTION, "top-1 probability"],
    }
    facts = {"conf_seconds": seconds, "conf_forwards": rec.n_calls,
             "conf_states": len(rec.states)}
    return values, by_class, words, facts


def class_note(diff: float) -> str:
    """The page's sentence on the sign of the content-minus-function difference."""
    if diff > 0:
        return ("Content is committed with more uncertainty left than function words, "
                "although it is committed later, with more context (C1).")
    return ("Content is not committed with more uncertainty left than function words "
            "on this model.")


def rate(A: pd.DataFrame, hit: str, trial: str | None, n_bootstrap: int, seed: int):
    """A 0/1 column's rate over anchors (or over the anchors where ``trial`` is 1),
    with the sequence bootstrap united with Clopper-Pearson (``stats.rate_ci``)."""
    t = A[trial] if trial else pd.Series(1, index=A.index)
    h = (A[hit] * t).groupby(A.seq).sum().to_numpy()
    n = t.groupby(A.seq).sum().to_numpy()
    return stats.rate_ci(h, n, n_bootstrap, seed) if n.sum() else (np.nan,) * 3


def anchor_rates(A, ref, sid, drafted, verify, anchors, anchors_piece, *,
                 n_bootstrap: int, seed: int):
    """What SSLD's exact and relaxed checks do at the word anchors (``RATES``), and,
    beside them, exact and relaxed acceptance on piece-level anchors (every content
    piece, the definition before 2026-12-01). Returns (values, summary table)."""
    values, summary = {}, {}
    for key, (what, hit, trial) in RATES.items():
        est, lo, hi = rate(A, hit, trial, n_bootstrap, seed)
        summary[what] = {"rate": est, "low": lo, "high": hi}
        values.update({f"c8_{key}": est, f"c8_{key}_lo": lo, f"c8_{key}_hi": hi})
    summary = pd.DataFrame(summary).T
    special = sid.special.to(verify.device)
    verify_tok = verify.masked_fill(special, float("-inf")).argmax(-1)
    piece_hits = {
        "alpha_sid": drafted.sids.to(ref.generated.device) == sid(ref.generated),
        "relaxed_acceptance": sid(drafted.tokens) == sid(verify_tok),
    }
    for key, hit in piece_hits.items():
        h, n = codebooks.per_sequence(hit, anchors_piece)
        est, lo, hi = stats.rate_ci(h, n, n_bootstrap, seed)
        values.update({f"c8_{key}_piece": est, f"c8_{key}_piece_lo": lo,
                       f"c8_{key}_piece_hi": hi})
        summary.loc[f"{RATES[key][0]}, piece-level anchors (secondary)"] = [est, lo, hi]
    values["c8_continuation_share_of_anchors"] = float(
        (anchors_piece & ~anchors).sum() / anchors_piece.sum())
    return values, summary


def information_means(A, bos_h, n_clusters: int, *, n_bootstrap: int, seed: int):
    """Mean ID entropies and self-informations over the anchors (``INFO_COLUMNS``,
    sequence-bootstrap intervals), and how much the ``[BOS]`` verify pass's ID
    entropy ``bos_h`` (G,) varies with position (nan in a world with no decode
    without context, ``bos_h`` None). Returns (values, means)."""
    means, values = {}, {}
    for col in INFO_COLUMNS:
        means[col] = stats.pooled_mean_bootstrap(A[col], A.seq, n_bootstrap, seed)
        values.update({f"c8_{col}": means[col][0], f"c8_{col}_lo": means[col][1],
                       f"c8_{col}_hi": means[col][2]})
    values["c8_log_k"] = math.log(n_clusters)
    values["c8_sid_entropy_verify_sd"] = float(A.sid_entropy_verify.std())
    if bos_h is None:
        values["c8_bos_entropy_range"] = float("nan")
        values["c8_bos_entropy_range_after_first"] = float("nan")
        values["c8_bos_note"] = (
            "This world has no `[BOS]` case: every decode answers a question, so the "
            "draft and the verify pass see a different prompt in every sample.")
    else:
        values["c8_bos_entropy_range"] = float(bos_h.max() - bos_h.min())
        values["c8_bos_entropy_range_after_first"] = (
            float(bos_h[1:].max() - bos_h[1:].min()) if len(bos_h) > 1 else 0.0)
        values["c8_bos_note"] = (
            "With the `[BOS]` prompt the verify pass's ID entropy varies across "
            f"positions by {values['c8_bos_entropy_range']:.3f} nats "
            f"({values['c8_bos_entropy_range_after_first']:.3f} after the first "
            "position): nothing there could vary from anchor to anchor.")
    sv, se = means["sid_info_verify"][0], means["sid_entropy_verify"][0]
    values["c8_info_note"] = (
        "the IDs actually written are less expected than that entropy suggests: the "
        "verify pass spreads its belief over the frequent (mostly function) IDs, and "
        "the anchors are content" if sv > se else
        "the IDs actually written are no less expected than that entropy suggests")
    values["c8_commit_entropy_note"] = (
        "not smaller than at the verify pass: knowing that a content word goes there "
        "spreads the belief over many content IDs"
        if means["sid_entropy_commit"][0] >= se else "smaller than at the verify pass")
    return values, means


def correlations(A, *, n_bins: int, n_bootstrap: int, seed: int):
    """Spearman's rho between an anchor's exact hit and the negative of each per-anchor
    measure (``MEASURES``; p with anchors as independent, interval over sequences),
    and the outcomes' rates in ``n_bins`` equal-count bins of ``BINNED``. An undefined
    correlation (no hit, or a constant measure) is recorded as 0 with p = 1: the rule
    then sees no evidence. Returns (values, correlations, bins)."""
    corr = {col: stats.spearman_bootstrap(A.exact_hit, -A[col], A.seq, n_bootstrap,
                                          seed) for col in MEASURES}
    rho, rho_p, rho_lo, rho_hi = corr["sid_entropy_verify"]
    defined = bool(np.isfinite(rho))
    values = {"c8_corr_defined": int(defined),
              "c8_corr": rho if defined else 0.0,
              "c8_corr_p": rho_p if defined else 1.0,
              "c8_corr_lo": rho_lo if defined and np.isfinite(rho_lo) else -1.0,
              "c8_corr_hi": rho_hi if defined and np.isfinite(rho_hi) else 1.0}
    for col, key in [("sid_info_verify", "c8_corr_info"),
                     ("glue_info", "c8_corr_glue")]:
        r, p_, _, _ = corr[col]
        ok = bool(np.isfinite(r))
        values.update({key: r if ok else 0.0, f"{key}_p": p_ if ok else 1.0})
    bins = {col: info.binned_rates(A, col, OUTCOMES, n_bins, n_bootstrap, seed,
                                   means=["sid_top1_verify"]) for col in BINNED}
    exact_bins = bins["sid_entropy_verify"]
    exact_bins = exact_bins[exact_bins.outcome == "exact hit (alpha_SID)"]
    exact_bins = exact_bins.sort_values("bin")
    for _, r in exact_bins.iterrows():
        values[f"c8_alpha_bin{int(r['bin']) + 1}"] = r["rate"]
    values["c8_alpha_bin_first"] = exact_bins["rate"].iloc[0]
    values["c8_alpha_bin_last"] = exact_bins["rate"].iloc[-1]
    values["c8_bound_bin_first"] = exact_bins["mean_sid_top1_verify"].iloc[0]
    values["c8_bound_bin_last"] = exact_bins["mean_sid_top1_verify"].iloc[-1]
    return values, corr, bins


def binned_table(b: pd.DataFrame, col: str) -> pd.DataFrame:
    """One bin table as the page shows it: outcomes by rows, bins (with their range of
    ``col``) by columns."""
    t = b.pivot(index="outcome", columns="bin", values="rate").loc[list(OUTCOMES)]
    t.columns = [f"bin {k + 1}: {lo:.2f} to {hi:.2f} nats" for k, lo, hi in
                 b.groupby("bin")[["by_low", "by_high"]].first().itertuples()]
    return t.rename_axis(MEASURES[col])


def bounds(A, n_clusters: int, summary: pd.DataFrame):
    """What a draft could hit if the verify pass were the true law (the derivation's
    Bayes bound E[max_s q_Y(s)], Fano's bound at H(q_Y)), the best constant guess
    (in sample), and the same Bayes bound for tokens. Returns (values, table)."""
    bayes = float(A.sid_top1_verify.mean())
    fano = float(entropy.fano_max_hit(np.clip(A.sid_entropy_verify.to_numpy(), 0,
                                              math.log(n_clusters)), n_clusters).mean())
    majority = semantic.majority_chance(A.sid.to_numpy(), n_clusters)
    token_bayes = float(A.token_top1_verify.mean())
    values = {"c8_bayes_bound": bayes, "c8_fano_bound": fano,
              "c8_majority_rate": majority, "c8_token_bayes_bound": token_bayes}
    table = pd.Series({
        "alpha_SID, the draft": summary.iloc[0]["rate"],
        "the target's own verify pass": summary.iloc[1]["rate"],
        "E[max_s q_Y(s)]: best draft if q_Y were the truth": bayes,
        "Fano bound at H(q_Y)": fano,
        "most frequent anchor ID (best constant guess, in sample)": majority,
        "E[max_x p_Y(x)]: the same bound for tokens (relaxed commits)": token_bayes,
    }, name="probability").to_frame()
    return values, table


def order_group(context_free: bool) -> str:
    """The easy-token table's name for the confidence-order words."""
    return ("confidence order, one per step ([BOS] prompt)" if context_free
            else "confidence order, one per step (questions)")


def easy_tokens(target, sid, tok, world, side_prompt, reference, words, A,
                config: Config):
    """What a token-space accelerator commits (the derivation's *easy tokens*): the
    Fast-dLLM threshold decode of the anchors (``reference``: the result and its
    recorded commits) and one decode of the side prompts at each lower threshold
    (``config.thresholds``), through the recorder; tokens committed alone and in
    steps of two or more, beside the confidence-order words and SSLD's anchors at
    the verify pass and when the accelerator commits them. Returns (values, table
    by group, every token with its group, facts)."""
    ref, ref_at = reference
    gen_length, block_length = config.gen_length, config.block_length
    threshold, thresholds = config.threshold, config.thresholds
    temperature, device = config.temperature, config.device
    n_bootstrap, seed = config.n_bootstrap, config.seed
    lexicon, context_free = world.roles(), world.context_free
    V = target.model.get_input_embeddings().weight.shape[0]
    THR = sorted(set(thresholds) | {threshold}, reverse=True)
    runs = {threshold: (ref, ref_at)}
    n_side = side_prompt.shape[0]
    for t in THR:
        if t in runs:
            continue
        r_t = info.CommitRecorder(target, sid)
        cfg = DecodeConfig(gen_length=gen_length, block_length=block_length,
                           rule="threshold", threshold=t, temperature=temperature)
        res = generate(r_t, side_prompt, cfg,
                       order.row_generators(seed, n_side, device))
        runs[t] = (res, r_t.at_commit(res))
    values, groups = {}, []
    for t, (res, st) in runs.items():
        tab = order.token_table(res, tok, lexicon)
        tab["entropy"] = st["entropy"].reshape(-1).numpy()
        tab["top1"] = st["top1"].reshape(-1).numpy()
        tab["kind"] = np.where(tab.step_size >= 2, "parallel step", "alone")
        for kind, sel in tab.groupby("kind"):
            groups.append(sel.assign(group=f"accelerator {t}: {kind}"))
        share = float((tab.step_size >= 2).mean())
        tps = float(gen_length * res.nfe.shape[0] / res.nfe.sum().item())
        if t == threshold:
            values.update({"c8_thr_parallel_share": share,
                           "c8_thr_tokens_per_step": tps})
        if t == min(THR):
            values.update({"c8_thrlow_parallel_share": share,
                           "c8_thrlow_tokens_per_step": tps})
    same_name = f"the same anchors, committed by accelerator {threshold}"
    groups.append(words.assign(group=order_group(context_free)))
    groups.append(pd.DataFrame({"seq": A.seq, "entropy": A.token_entropy_verify,
                                "top1": A.token_top1_verify,
                                "group": ANCHORS_AT_VERIFY}))
    groups.append(pd.DataFrame({"seq": A.seq, "entropy": A.entropy_commit,
                                "top1": A.top1_commit, "group": same_name}))
    easy = pd.concat(groups, ignore_index=True)
    rows = [{"group": g, **pooled(sel, n_bootstrap, seed)}
            for g, sel in easy.groupby("group", sort=False)]
    easy_table = pd.DataFrame(rows).set_index("group")
    t_low = min(THR)
    par_name = f"accelerator {t_low}: parallel step"
    anc, same = easy_table.loc[ANCHORS_AT_VERIFY], easy_table.loc[same_name]
    has_par = par_name in easy_table.index
    par = easy_table.loc[par_name] if has_par else None
    bound_low = float(entropy.max_entropy_given_top1(max(t_low, 1 / V), V))
    values.update({
        "c8_anchor_verify_entropy": anc["entropy (nats)"],
        "c8_anchor_verify_top1": anc["top-1 probability"],
        "c8_anchor_commit_entropy": same["entropy (nats)"],
        "c8_anchor_commit_top1": same["top-1 probability"],
        "c8_low_threshold": t_low,
        "c8_parallel_entropy": par["entropy (nats)"] if has_par else float("nan"),
        "c8_parallel_top1": par["top-1 probability"] if has_par else float("nan"),
        "c8_parallel_n": int(par["tokens"]) if has_par else 0,
        "c8_entropy_bound_low": bound_low,
        "c8_entropy_bound_default": float(entropy.max_entropy_given_top1(threshold, V)),
    })
    facts = {"t_low": t_low, "par_name": par_name if has_par else None,
             "no_par": runs[threshold][0].committed_per_step.max().item() <= 1}
    return values, easy_table, easy, facts


def easy_notes(values: dict, no_par: bool) -> dict:
    """The page's sentences on the anchors' entropy at commit, the information the
    context supplied, and an accelerator that never commits two tokens at once."""
    return {
        "c8_anchor_entropy_note": (
            "not lower, because by then the target knows a content word goes there and "
            "spreads its belief over many"
            if values["c8_anchor_commit_entropy"] >= values["c8_anchor_verify_entropy"]
            else "lower"),
        "c8_token_info_note": (
            "lower than at the verify pass: the context decoded before it supplied "
            "the difference"
            if values["c8_token_info_commit"] < values["c8_token_info_verify"]
            else "no lower than at the verify pass"),
        "c8_easy_note": (
            "At the default threshold this model never commits two tokens in one "
            "step: it has few easy tokens, so the accelerator gains nothing there."
            if no_par else ""),
    }


def closing_notes(values: dict, no_par: bool) -> dict:
    """The verdict section's sentences that depend on the measurement alone: the
    draft's hit rate against the Bayes bound, the context's information, and an
    accelerator that never commits two tokens in one step."""
    below = values["c8_alpha_sid_hi"] < values["c8_bayes_bound"]
    supplied = values["c8_glue_info_lo"] > 0
    aggregate = " ".join(filter(None, [
        "In aggregate, the draft's hit rate stays below what the verify pass's own "
        "confidence would allow (the upper end of its interval is under the bound)."
        if below else "",
        "The context decoded before an anchor supplies information about its ID "
        "(interval above zero) that no draft seeing only the prompt can have."
        if supplied else ""]))
    return {"c8_aggregate_note": aggregate, "c8_verdict_note": (
        "In particular, at the default threshold the accelerator on this model never "
        "commits two tokens in one step: \"the methods that work\" barely work here "
        "either, and the contrast between its commits and SSLD's anchors is one of "
        "degree." if no_par else "")}


@dataclass(frozen=True)
class Config(parameters.Drafted):
    NOTEBOOK: ClassVar[str] = "08_information"

    world: str = shared("world", note="in math, the questions are every prompt")
    n_samples: int = shared("n_samples", 32, "prompted, one held-out prompt each: "
                            "their content positions are the anchors")
    prompt_length: int = shared("prompt_length")
    n_side: int = param(16,
        "samples of the confidence-order decode ([BOS] prompt) and of each "
        "lower-threshold decode")
    thresholds: list = shared("thresholds")
    n_bins: int = param(3, "equal-count bins of a per-anchor measure")
    n_bootstrap: int = 1000


def prompt_sets(world: World, tok, config: Config):
    """The page's prompts: (the anchors' ``n_samples`` prompts, ``n_side`` side
    prompts, the confidence-order decode's prompts, the ``[BOS]`` prompts or
    None). With a decode without context (prose): held-out prompts of
    ``prompt_length`` (the start token alone when ``prompt_length`` is no longer
    than it) for the anchors and the side decodes, the start token alone for the
    order decode; else (math: every decode answers a question) the world's
    prompts throughout, and no ``[BOS]`` case."""
    where = dict(seed=config.seed, device=config.device)
    if world.context_free:
        _, prompt = world.prompt_pair(tok, config.n_samples, config.prompt_length,
                                      **where)
        bos_prompt, side_prompt = world.prompt_pair(tok, config.n_side,
                                                    config.prompt_length, **where)
        return prompt, side_prompt, bos_prompt, bos_prompt
    prompt = world.prompts(tok, config.n_samples, **where)
    side_prompt = world.prompts(tok, config.n_side, **where)
    return prompt, side_prompt, side_prompt, None


def anchor_decode(models: Models, sid, world: World, prompt, config: Config) -> dict:
    """The anchors: the content words of a prompted Fast-dLLM threshold decode
    (through ``information.CommitRecorder``), SSLD's draft and verify pass on the
    same prompts, and one row per anchor (``information.anchor_table``). Returns
    ref, ref_at (its recorded commits), anchors and anchors_piece (B, G), verify
    (B, G, V), drafted, table and seconds; fewer than 3 anchors is an error."""
    target, tok, lexicon = models.target, models.tokenizer, world.roles()
    P = prompt.shape[1]
    rec_thr = info.CommitRecorder(target, sid)
    thr_cfg = accelerators.accelerators(
        config.gen_length, config.block_length, config.threshold, config.temperature
    )["Fast-dLLM threshold"]
    t0 = time.perf_counter()
    ref = generate(rec_thr, prompt, thr_cfg,
                   order.row_generators(config.seed, config.n_samples, config.device))
    ref_at = rec_thr.at_commit(ref)
    anchors = inputs.anchor_mask(tok, ref.tokens, lexicon)[:, P:]  # (B, G) word anchors
    anchors_piece = inputs.anchor_mask(tok, ref.tokens, lexicon, unit="piece")[:, P:]
    verify = decoder.verify_logits(target, prompt, config.gen_length)  # (B, G, V)
    drafted = drafting.SmallMarginalDraft(models.draft, sid)(prompt, config.gen_length)
    anchor_logits, _, _ = info.commit_logits(target, ref, anchors)
    table = info.anchor_table(ref.generated, anchors, verify, drafted, sid,
                              target.mask_id, commit=ref_at,
                              anchor_commit_logits=anchor_logits)
    seconds = time.perf_counter() - t0
    if len(table) < 3:
        raise ValueError(
            f"only {len(table)} content anchors: raise n_samples or gen_length"
        )
    return dict(ref=ref, ref_at=ref_at, anchors=anchors, anchors_piece=anchors_piece,
                verify=verify, drafted=drafted, table=table, seconds=seconds)


def measure(models: Models, world: World, config: Config) -> InformationMeasurement:
    """The whole C8 measurement with the page's parameters (notebook 08).

    ``values``: every value the page records before its verdict, by glue name, in
    the page's order; ``tables``: by_class, summary, info_means, correlations,
    bins_<measure>, bounds, easy; ``arrays``: words, anchors (one row per anchor),
    bos_entropy (G,), bins, easy (every token with its group); ``facts``: what the
    page prints about the run. The caller seeds torch and loads the models.
    ``world``: the prompts and the word classes (prose: Brown's lexicon, C1's).
    A world with no decode without context (math: every decode answers a
    question) measures the content-vs-function part on ``n_side`` of its
    prompts, in its blocks where its C1 decodes in blocks, and has no ``[BOS]``
    case (``c8_bos_*`` nan, ``arrays["bos_entropy"]`` None).
    """
    target, tok = models.target, models.tokenizer
    sid = semantic.semantic_ids_for(target, config.K, seed=config.seed, tokenizer=tok)
    V = target.model.get_input_embeddings().weight.shape[0]
    prompt, side_prompt, order_prompt, bos_prompt = prompt_sets(world, tok, config)
    P = prompt.shape[1]
    facts = {
        "V": V,
        "K": sid.n_clusters,
        "P": P,
        "example": tok.decode(prompt[0].tolist()),
    }
    sizes = dict(n_bootstrap=config.n_bootstrap, seed=config.seed)

    values, by_class, words, conf = class_entropies(target, sid, tok, world,
                                                    order_prompt, config)
    values["c8_log_v"] = math.log(V)
    values["c8_class_note"] = class_note(values["c8_entropy_diff"])
    values["c8_n_samples"] = config.n_samples
    values["c8_n_side"] = config.n_side

    run = anchor_decode(models, sid, world, prompt, config)
    ref, ref_at, anchors, verify, drafted, A = (
        run[k] for k in ("ref", "ref_at", "anchors", "verify", "drafted", "table"))
    facts["anchor_seconds"] = run["seconds"]
    values["c8_n_anchors"] = len(A)
    values["c8_prompt_length"] = P
    v, summary = anchor_rates(
        A, ref, sid, drafted, verify, anchors, run["anchors_piece"], **sizes
    )
    values.update(v)

    # the [BOS] case: one verify pass serves every sample, so H(q_Y) is a function of
    # position
    bos_h = None
    if bos_prompt is not None:
        bos_verify = decoder.verify_logits(target, bos_prompt[:1], config.gen_length)[0]
        bos_h = info.cluster_entropy(bos_verify, sid).numpy()  # (G,)
    v, means = information_means(A, bos_h, sid.n_clusters, **sizes)
    values.update(v)
    v, corr, bins = correlations(A, n_bins=config.n_bins, **sizes)
    values.update(v)
    v, bounds_table = bounds(A, sid.n_clusters, summary)
    values.update(v)
    v, easy_table, easy, ez = easy_tokens(target, sid, tok, world, side_prompt,
                                          (ref, ref_at), words, A, config)
    values.update(v)
    values.update(easy_notes(values, ez["no_par"]))
    values.update(closing_notes(values, ez["no_par"]))

    tables = {
        "by_class": by_class,
        "summary": summary,
        "info_means": pd.DataFrame(
            {
                k: {"mean (nats)": m[0], "low": m[1], "high": m[2]}
                for k, m in means.items()
            }
        ).T,
        "correlations": pd.DataFrame(
            corr, index=["Spearman rho (hit, -measure)", "p", "low", "high"]
        ).T.rename(index=MEASURES),
        **{f"bins_{col}": binned_table(b, col) for col, b in bins.items()},
        "bounds": bounds_table,
        "easy": easy_table,
    }
    arrays = {
        "words": words,
        "anchors": A,
        "bos_entropy": bos_h,
        "bins": bins,
        "easy": easy,
    }
    return InformationMeasurement(values, tables, arrays, facts={**facts, **conf, **ez})


# --- the verdict's wording and the closing table ------------------------------------


def condition_notes(values: dict, min_effect: float) -> dict:
    """How each condition of C8's rule fares (``min_effect``: the rule's minimum
    content-minus-function difference, nats): glue name -> sentence."""
    d, lo, hi = (values[f"c8_entropy_diff{s}"] for s in ("", "_lo", "_hi"))
    higher = "content tokens are committed at a higher entropy than function tokens"
    if lo <= 0 <= hi:
        cond1 = "cannot be told: the content-minus-function interval covers zero"
    elif lo > 0 and d >= min_effect:
        cond1 = (f"holds: {higher}, with an interval above zero and at least the "
                 "minimum effect")
    elif lo > 0:
        cond1 = f"fails: {higher}, but by less than the minimum effect"
    else:
        cond1 = ("fails: content tokens are committed at a lower entropy than function "
                 "tokens")
    ok2 = values["c8_corr"] > 0 and values["c8_corr_p"] < 0.01
    where = "more frequent where the verify pass is surer of the anchor's ID"
    cond2 = (f"holds: exact hits are {where}" if ok2 else
             f"fails: exact hits are not {where}, so this build does not show the "
             "per-anchor form of the mechanism that the paper's explanation implies")
    return {"c8_cond1_note": cond1, "c8_cond2_note": cond2}


def comparison_table(result: InformationMeasurement, verdict: str, c2_paper_value,
                     title: str) -> pd.DataFrame:
    """The paper's statements beside this build's numbers, and the verdict."""
    v, summary, easy = result.values, result.tables["summary"], result.tables["easy"]
    anc, par_name = easy.loc[ANCHORS_AT_VERIFY], result.facts["par_name"]
    relaxed, faithful = summary["rate"].iloc[4], summary["rate"].iloc[5]
    return pd.DataFrame({
        "the paper": ["content is what the draft cannot know (qualitative)",
                      f"exact acceptance never fires ({c2_paper_value} in C2)",
                      "relaxed acceptance destroys quality (C5)",
                      "working methods commit easy, high-confidence tokens", "—"],
        "this build": [
            f"entropy at commit: content {v['c8_entropy_content']:.2f} vs function "
            f"{v['c8_entropy_function']:.2f} nats, difference "
            f"{v['c8_entropy_diff']:.2f} "
            f"[{v['c8_entropy_diff_lo']:.2f}, {v['c8_entropy_diff_hi']:.2f}]",
            f"alpha_SID {summary.iloc[0]['rate']:.4f}; rho(hit, -ID entropy at the "
            f"verify pass) = {v['c8_corr']:.3f}, p = {v['c8_corr_p']:.2g}",
            f"relaxed: accepts {relaxed:.3f}, faithful among accepted {faithful:.3f}",
            f"anchors at the verify pass: {anc['entropy (nats)']:.2f} nats, top-1 "
            f"{anc['top-1 probability']:.3f}; accelerator's parallel commits: "
            + (f"{easy.loc[par_name, 'entropy (nats)']:.2f} nats, top-1 "
               f"{easy.loc[par_name, 'top-1 probability']:.3f}" if par_name
               else "none"),
            verdict],
    }, index=["content vs function", "exact acceptance", "relaxed acceptance",
              "easy tokens", "verdict"]).rename_axis(title)
