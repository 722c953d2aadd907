"""C3: the win condition (SPEC.md 3.1), and SSLD end to end against the accelerators.

``measure`` does the whole measurement of the C3 page: the token-space
accelerators and the strongest one's tokens per forward ``tau_acc``, the bar
``alpha* = 1 - 1/tau_acc``, the drafts' acceptance ``alpha`` pooled over
codebooks (word anchors, and piece anchors beside them), Model A's and Model
B's bars at the measured costs, SSLD end to end with each draft and with an
oracle handed every anchor's true token, and wall-clock timings. Each step is
a small function of its own; the page draws, records and judges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from ..decoding.decode import generate
from ..measures import eos_tail, quality, reuse, stats
from ..measures import judge as judges
from ..measures.order import row_generators
from ..ssld import accelerators, codebooks, drafting, inputs, win_condition
from ..ssld.decoder import verify_logits
from ..ssld.information import anchor_table
from ..worlds import World
from . import parameters
from .common import Measurement, Models
from .parameters import param, shared

COST = "c (draft cost, target forwards)"  # the acceptance table's draft-cost column
ORACLE = "oracle: every anchor's true token (alpha = 1)"  # the oracle row of ``e2e``
# the drafts the page reports one by one (glue suffix -> draft name)
DRAFT_KEYS = {"small": "small model, cluster marginal",
              "head": "small model + trained SID head"}
BARS = ("alpha* = 1 - 1/tau_acc (the paper's reading)",
        "Model A at the measured gamma and c",
        "Model B at the measured |A|, delta and c")


@dataclass
class WinCondition(Measurement):
    """C3's measurement; ``n_clusters`` is the first codebook's K (the page's caption).

    ``tables``: ``accelerators``, ``acceptance``, ``robust``, ``e2e``,
    ``wall_clock``, ``bars``; ``arrays``: ``taus``, ``bar_inf``, ``bar_meas``
    (Model A's bars over tau_acc), ``acc_nfe`` and ``ssld_nfe`` (per sample, the
    best draft), ``wall_acc`` and ``wall_ssld`` (seconds per repeat).
    """

    n_clusters: int = 0


# --- tau_acc: the strongest token-space accelerator ----------------------------------


def strongest_bar(acc_table: pd.DataFrame) -> dict:
    """The strongest accelerator of ``accelerator_table``, tau_acc with CI, alpha*."""
    strongest = accelerators.strongest_accelerator(acc_table)
    tau_acc = acc_table.loc[strongest, "tokens_per_nfe"]
    return {"c3_tau_acc": tau_acc, "c3_tau_acc_lo": acc_table.loc[strongest, "low"],
            "c3_tau_acc_hi": acc_table.loc[strongest, "high"],
            "c3_alpha_star": win_condition.alpha_star(tau_acc),
            "c3_strongest": strongest}


# --- alpha: the drafts' acceptance, pooled over codebooks ----------------------------


def acceptance(books: dict, target, tokens: torch.Tensor, anchors: torch.Tensor,
               anchors_piece: torch.Tensor, seq_len: int, a_star: float,
               n_bootstrap: int, seed: int) -> tuple[pd.DataFrame, dict]:
    """The drafts' pooled alpha_SID (SPEC.md 3.1) with its cost ``c``, and the values.

    One row per draft of ``drafting.DRAFT_NAMES``: ``codebooks.pooled_acceptance``
    on word anchors, the draft's cost in target forwards (FLOPs of one forward of
    ``seq_len`` positions, from the first codebook's drafts, the ones SSLD runs
    with) and alpha on piece anchors beside it. The best draft's
    alpha gives the shortfall alpha*/alpha (a lower bound, alpha*/alpha_hi, when
    alpha = 0); ``gamma`` is the word anchors per sequence.
    """
    first = books[next(iter(books))]
    table = codebooks.pooled_acceptance(books, tokens, anchors, n_bootstrap, seed).loc[
        list(drafting.DRAFT_NAMES)]
    table[COST] = [drafting.relative_cost(first.outputs[n], target, seq_len)
                   for n in table.index]
    best = codebooks.best_pooled_draft(table)
    alpha, alpha_lo, alpha_hi = table.loc[best, ["alpha", "low", "high"]]
    short = win_condition.shortfall(a_star, alpha, alpha_hi)
    values = {
        "c3_n_codebooks": len(books), "c3_alpha": alpha, "c3_alpha_lo": alpha_lo,
        "c3_alpha_hi": alpha_hi, "c3_c": table.loc[best, COST],
        "c3_alpha_spread": table.loc[best, codebooks.SPREAD],
        "c3_alpha_questions_share": table.loc[best, codebooks.QUESTIONS_SHARE],
        "c3_gamma": anchors.sum(1).double().mean().item(),  # anchors verified per pass
        "c3_shortfall": short.value, "c3_shortfall_is_bound": int(short.lower_bound),
        "c3_shortfall_lo": a_star / alpha_hi,  # at the upper end of alpha's interval
    }
    pooled_piece = codebooks.pooled_acceptance(books, tokens, anchors_piece,
                                               n_bootstrap, seed)
    alpha_p, alpha_p_lo, alpha_p_hi = pooled_piece.loc[best, ["alpha", "low", "high"]]
    values |= {"c3_alpha_piece": alpha_p, "c3_alpha_piece_lo": alpha_p_lo,
               "c3_alpha_piece_hi": alpha_p_hi,
               "c3_continuation_share_of_anchors": float(
                   (anchors_piece & ~anchors).sum() / anchors_piece.sum()),
               "c3_best": best,
               "c3_shortfall_words": "at least " if short.lower_bound else ""}
    table["alpha, piece-level anchors"] = pooled_piece.loc[table.index, "alpha"]
    return table, values


def robust_table(books: dict, tokens: torch.Tensor, anchors: torch.Tensor,
                 a_star: float) -> tuple[pd.DataFrame, dict]:
    """Each codebook's own best-draft alpha_SID and shortfall, with the decode fixed."""
    robust = codebooks.per_codebook(books, tokens, anchors)
    sfs = [win_condition.shortfall(a_star, a, hi)
           for a, hi in zip(robust["alpha_SID"], robust["high"], strict=True)]
    robust["shortfall alpha*/alpha"] = [sf.value for sf in sfs]
    robust["shortfall is a lower bound"] = [sf.lower_bound for sf in sfs]
    col = robust["shortfall alpha*/alpha"]
    return robust, {"c3_robust_n_seeds": len(robust),
                    "c3_robust_shortfall_min": col.min(),
                    "c3_robust_shortfall_max": col.max(),
                    "c3_robust_share_above_1": float((col > 1).mean())}


# --- Model A: the win region ----------------------------------------------------------


def model_a(tau_acc: float, alpha: float, gamma: float, c: float) -> tuple[dict, dict]:
    """Model A (SPEC.md 3.1) at the measured gamma and c: its bar on alpha (absent
    when unreachable even at alpha = 1), its tokens per cost at alpha and at 1, and
    the win region's curves over tau_acc (the asymptotic bar and the measured one)."""
    needed_a = win_condition.model_a_alpha_needed(tau_acc, gamma, c)
    values = {"c3_model_a_reachable": int(not math.isnan(needed_a))}
    if not math.isnan(needed_a):
        values["c3_model_a_alpha_needed"] = needed_a
    values["c3_model_a_tokens_per_cost"] = win_condition.model_a_tokens_per_cost(
        alpha, gamma, c)
    values["c3_model_a_ceiling"] = win_condition.model_a_tokens_per_cost(1.0, gamma, c)
    taus = np.linspace(1.01, max(6.0, tau_acc * 1.3), 200)
    arrays = {"taus": taus, "bar_inf": 1 - 1 / taus,
              "bar_meas": np.array([win_condition.model_a_alpha_needed(t, gamma, c)
                                    for t in taus])}
    return values, arrays


# --- Model B and SSLD end to end ------------------------------------------------------


def ssld_row(res, acc, acc_nfe: torch.Tensor, tokens: torch.Tensor,
             anchors: torch.Tensor, sid, alpha_sid: float, n_bootstrap: int,
             seed: int) -> dict:
    """One SSLD run against the accelerator alone: its NFE ratio (bootstrap CI over
    sequences), token-forwards ratio, accepted share, the fidelity of accepted
    anchors (their committed ID is the ID the target wrote; nan when none was
    accepted) and the faithful acceptances (accepted with that ID), per anchor."""
    est, lo, hi = stats.ratio_bootstrap(res.nfe.numpy(), acc_nfe.numpy(), n_bootstrap,
                                        seed)
    acc_mask = res.accepted
    same_id = sid(res.generated) == sid(tokens)  # (B, G)
    fidelity = (same_id[acc_mask].double().mean().item() if acc_mask.any()
                else float("nan"))
    faithful = (acc_mask & same_id).sum().item()
    return {"alpha_SID (this codebook)": alpha_sid,
            "NFE ratio": est, "ratio low": lo, "ratio high": hi,
            "token-forwards ratio": res.token_forwards.sum().item()
            / acc.token_forwards.double().sum().item(),
            "anchors accepted (share)": res.n_accepted.sum().item()
            / anchors.sum().item(),
            "fidelity of accepted anchors": fidelity,
            "faithful acceptances (share)": faithful / anchors.sum().item()}


def oracle_row(oracle, acc, acc_nfe: torch.Tensor, c: float, seq_len: int,
               n_bootstrap: int, seed: int) -> dict:
    """The oracle SSLD (every anchor's true token committed, alpha = 1): one verify
    pass, its infill's forwards and the draft's cost ``c``, against the accelerator."""
    oracle_nfe = 1 + oracle.nfe.double() + c
    est, lo, hi = stats.ratio_bootstrap(oracle_nfe.numpy(), acc_nfe.numpy(),
                                        n_bootstrap, seed)
    return {"alpha_SID (this codebook)": 1.0,
            "NFE ratio": est, "ratio low": lo, "ratio high": hi,
            "token-forwards ratio": (seq_len + oracle.token_forwards.double()
                                     + c * seq_len).sum().item()
            / acc.token_forwards.double().sum().item(),
            "anchors accepted (share)": 1.0, "fidelity of accepted anchors": 1.0,
            "faithful acceptances (share)": 1.0}


def e2e_values(e2e: pd.DataFrame, best: str, acc_nfe: torch.Tensor,
               oracle_nfe: torch.Tensor, anchors: torch.Tensor, gamma: float,
               c: float) -> dict:
    """The end-to-end table's claim values, Model B's slowdown at alpha = 0 and its
    bar on alpha (SPEC.md 3.1) with the oracle's saving per anchor ``delta``."""
    h = e2e.loc[best]
    values = {"c3_e2e_ratio": h["NFE ratio"], "c3_e2e_ratio_lo": h["ratio low"],
              "c3_e2e_ratio_hi": h["ratio high"],
              "c3_tf_ratio": h["token-forwards ratio"],
              "c3_accepted_share": h["anchors accepted (share)"]}
    for key, name in DRAFT_KEYS.items():
        values[f"c3_e2e_ratio_{key}"] = e2e.loc[name, "NFE ratio"]
        values[f"c3_accepted_share_{key}"] = e2e.loc[name, "anchors accepted (share)"]
        values[f"c3_faithful_{key}"] = e2e.loc[name, "faithful acceptances (share)"]
        values[f"c3_fidelity_{key}"] = e2e.loc[name, "fidelity of accepted anchors"]
    n_acc = acc_nfe.mean().item()
    delta = (acc_nfe - oracle_nfe).sum().item() / anchors.sum().item()
    values |= {"c3_n_acc": n_acc, "c3_delta": delta,
               "c3_oracle_ratio": e2e.iloc[-1]["NFE ratio"],
               "c3_model_b_slowdown": win_condition.model_b_slowdown(n_acc, 1, c)}
    needed_b = win_condition.model_b_alpha_needed(gamma, delta, 1, c)
    values["c3_model_b_reachable"] = int(needed_b <= 1)
    if math.isfinite(needed_b):
        values["c3_model_b_alpha_needed"] = needed_b
    return values


# --- quality beside forwards (2026-12-06) ---------------------------------------------

QUALITY_KINDS = ("answer accuracy", "judge top-1 agreement")


def quality_scorer(world: World, tokenizer, n: int, seed: int, judge: str,
                   device="cpu"):
    """(kind, score): how C3 weighs a decode's quality in ``world``. Where texts
    have answers (math): ``score(generated) -> (correct 0/1, ones)``, the answer
    accuracy; elsewhere (prose) the independent judge's token-weighted top-1
    agreement, ``score(generated) -> (agreement, tokens)`` per text (C5's
    quality, the same judge)."""
    answers = world.answers(n, seed=seed)
    if answers is not None:
        def correct(gen):
            right = np.asarray(world.answer_correct(tokenizer, gen, answers), float)
            return right, np.ones_like(right)
        return QUALITY_KINDS[0], correct
    jm = judges.load_judge(judge, device=device)

    def agreement(gen):
        table = jm.score(quality.texts_of(tokenizer, gen))
        return (table["top1_agreement"].to_numpy(float),
                table["n_tokens"].to_numpy(float))
    return QUALITY_KINDS[1], agreement


def quality_level(scored) -> float:
    """The weighted mean of a ``score`` result, (quality, weight) per text."""
    q, w = (np.nan_to_num(x) for x in scored)
    return float((q * w).sum() / w.sum()) if w.sum() > 0 else float("nan")


def quality_values(kind: str, acc_scored, ssld_scored, n_bootstrap: int,
                   seed: int) -> dict:
    """The accelerator's and the best draft's SSLD's quality on the same prompts
    (each ``score``'s result on its decodes), and SSLD's drop below the
    accelerator with its paired bootstrap interval."""
    drop, lo, hi = quality.agreement_drop(*acc_scored, *ssld_scored, n_bootstrap,
                                          seed)
    return {"c3_quality_kind": kind, "c3_quality_acc": quality_level(acc_scored),
            "c3_quality_ssld": quality_level(ssld_scored), "c3_quality_drop": drop,
            "c3_quality_drop_lo": lo, "c3_quality_drop_hi": hi}


# --- three bars on alpha, and the notes ----------------------------------------------


def bars_table(bars: dict[str, float], alpha: float, alpha_hi: float) -> pd.DataFrame:
    """Each bar on alpha (nan or above 1: unreachable) and its shortfall bar/alpha."""
    rows = []
    for name, bar in bars.items():
        finite = math.isfinite(bar) and bar <= 1
        sf = win_condition.shortfall(bar, alpha, alpha_hi) if finite else None
        rows.append({"bar": name, "alpha needed": bar if finite else float("nan"),
                     "reachable (<= 1)": finite,
                     "shortfall": sf.value if sf else float("nan"),
                     "shortfall is a lower bound": sf.lower_bound if sf else None})
    return pd.DataFrame(rows).set_index("bar")


def tau_note(degenerate: bool) -> str:
    """Whether alpha* is a real bar: not when the accelerator does not accelerate."""
    if degenerate:
        return ("On this model the accelerator does not accelerate: its tokens per "
                "forward are indistinguishable from 1, so the paper's bar alpha* = "
                "1 - 1/tau_acc is (close to) 0 and the shortfall alpha*/alpha cannot "
                "exceed 1; only the bars at the measured costs say whether SSLD could "
                "win.")
    return ("The accelerator commits more than one token per forward, so alpha* is a "
            "real bar.")


def gap_note(shortfall: float, h: pd.Series) -> str:
    """What the end-to-end run says beside the bar (``h``: the best draft's e2e row)."""
    if shortfall < 1 and h["ratio low"] >= 1:
        return (
            "The best draft's alpha_SID clears alpha*, yet SSLD is not faster end to "
            "end: alpha_SID counts drafted IDs that match the token the target finally "
            "writes, while the decoder accepts an anchor only if its ID matches the "
            "target's first all-masked pass, which happened for a share "
            f"{h['anchors accepted (share)']:.3f} of anchors. Clearing alpha* is "
            "necessary for a win, not sufficient.")
    if h["ratio high"] < 1:
        return (
            "SSLD needs fewer forwards than the accelerator here, but only a share "
            f"{h['faithful acceptances (share)']:.3f} of anchors is accepted with the "
            "ID the target writes: the saving comes from committing content that is "
            "not the target's (see the faithful acceptances above and the C5 "
            "chapter).")
    return f"End to end, SSLD needs {h['NFE ratio']:.3f} times the accelerator's NFE."


# --- the whole measurement ------------------------------------------------------------


@dataclass(frozen=True)
class Config(parameters.Coded, parameters.Sequential):
    NOTEBOOK: ClassVar[str] = "03_win_condition"

    n_samples: int = shared("n_samples", 24, "one prompt each; [BOS] alone by default")
    prompt_source: str = shared("prompt_source")
    prompt_length: int = shared("prompt_length")
    n_repeats: int = shared("n_repeats")
    n_timed: int = param(8, "the first n_timed samples are timed (wall-clock only)")
    judge: str = shared("judge", note="of the end-to-end decodes where texts have "
                        "no answers (prose)")


def _check(anchor_unit: str, n_timed: int, n: int) -> None:
    if anchor_unit not in inputs.ANCHOR_UNITS:
        raise ValueError(
            f"anchor_unit must be one of {inputs.ANCHOR_UNITS}, got {anchor_unit!r}"
        )
    if n_timed > n:
        raise ValueError(f"n_timed = {n_timed} must not exceed n_samples = {n}")


def score_rows(rows: list, ssld_runs: dict, oracle, world: World, tok, prompt,
               config: Config):
    """Each end-to-end decode's quality, as the headline's is scored
    (``quality_scorer``: answers where the world has them, else the judge),
    added to ``rows`` in place; returns (kind, score, each draft's scores)."""
    kind, score = quality_scorer(world, tok, prompt.shape[0], config.seed,
                                 config.judge, prompt.device)
    scored = {name: score(run.generated) for name, run in ssld_runs.items()}
    for row in rows:  # each draft's decodes scored as the headline's are
        name = row["SSLD draft"]
        row[f"quality ({kind})"] = quality_level(
            scored[name] if name in scored else score(oracle.generated)
        )
    return kind, score, scored


def tau_step(target, tok, prompt, gens, config: Config) -> tuple[dict, dict,
                                                                  pd.DataFrame]:
    """The page's first step: each accelerator of the page's decode on the same
    prompts and streams (``gens()``), and their table of tokens per forward.
    Returns (the accelerators' configs, which SSLD infills with, their runs, the
    table)."""
    configs = accelerators.accelerators(
        config.gen_length, config.block_length, config.threshold, config.temperature,
        supports_cache=target.supports_cache)
    runs = {name: reuse.generate(target, prompt, cfg, gens())
            for name, cfg in configs.items()}
    table = accelerators.accelerator_table(runs, config.n_bootstrap, config.seed,
                                           tok.eos_token_id)
    return configs, runs, table


def alpha_step(models: Models, world: World, prompt, ref, book_seeds, a_star: float,
               config: Config, anchor_unit: str, information: bool) -> dict:
    """The page's second step: the oracle content anchors of the decode ``ref``
    (in ``anchor_unit``), the codebooks on it with the target's one-shot view,
    and each draft's alpha_SID (``acceptance``); with ``information``, per
    codebook what the best draft's and the target's views leave open about each
    anchor's ID. Returns tokens, anchors, books, table, values and info."""
    target, tok, lexicon = models.target, models.tokenizer, world.roles()
    P, L = prompt.shape[1], prompt.shape[1] + config.gen_length
    tokens = ref.generated
    anchors = inputs.anchor_mask(tok, ref.tokens, lexicon)[:, P:]  # (B, G): words
    anchors_piece = inputs.anchor_mask(tok, ref.tokens, lexicon, unit="piece")[:, P:]
    if anchor_unit == "piece":
        anchors = anchors_piece
    verify = verify_logits(target, prompt, config.gen_length)  # the one-shot view
    books = codebooks.codebooks(target, models.draft, tok, world,
                                codebooks.Scored(prompt, tokens, anchors, anchor_unit),
                                config, book_seeds, verify=verify)
    table, values = acceptance(books, target, tokens, anchors, anchors_piece, L,
                               a_star, config.n_bootstrap, config.seed)
    info = None
    if information:  # per codebook: the bits each view leaves open, per anchor
        best, kept = values["c3_best"], ["seq", "sid_info_draft", "sid_info_verify"]
        info = [anchor_table(tokens, anchors, verify, b.outputs[best], b.sid,
                             target.mask_id)[kept] for b in books.values()]
    return dict(tokens=tokens, anchors=anchors, books=books, table=table,
                values=values, info=info)


def end_to_end(target, scored: codebooks.Scored, first, table: pd.DataFrame, cfg,
               acc, gens, c: float, config: Config) -> tuple[list, dict, object]:
    """Model B and SSLD end to end (the page's fourth step): each draft of the
    first codebook drafts, the target verifies and ``cfg`` infills, beside the
    oracle (the anchors given) and the accelerator run ``acc``; every decode on
    ``gens()``'s streams. Returns (rows of the e2e table without quality, each
    draft's run, the oracle's run)."""
    prompt, tokens, anchors = scored.prompt, scored.tokens, scored.anchors
    acc_nfe, L = acc.nfe.double(), prompt.shape[1] + config.gen_length
    boot = (config.n_bootstrap, config.seed)
    oracle_init = torch.where(anchors, tokens, torch.full_like(tokens, target.mask_id))
    oracle = reuse.generate(target, prompt, cfg, gens(), init=oracle_init)
    rows, ssld_runs = [], {}
    for name, drafter in first.drafters.items():
        res = accelerators.draft_then_ssld(target, drafter, prompt, anchors,
                                           first.sid, cfg, gens(),
                                           table.loc[name, COST])
        ssld_runs[name] = res
        rows.append({"SSLD draft": name}
                    | ssld_row(res, acc, acc_nfe, tokens, anchors, first.sid,
                               first.table.loc[name, "alpha"], *boot))
    rows.append({"SSLD draft": ORACLE}
                | oracle_row(oracle, acc, acc_nfe, c, L, *boot))
    return rows, ssld_runs, oracle


def wall_clock(target, drafter, sid, prompt, anchors, cfg, gens, c: float,
               config: Config) -> tuple[list, list]:
    """Wall-clock seconds of the accelerator alone and of SSLD with ``drafter``
    on the first ``n_timed`` samples, ``n_repeats`` times each (the runs before
    were the untimed warm-up), as the method runs (``accelerators.timed``)."""
    p_t, a_t = prompt[: config.n_timed], anchors[: config.n_timed]

    def gens_t():
        return gens()[: config.n_timed]

    timed = accelerators.timed(cfg)  # as the method runs (a speculation's whole tree)
    t_acc = accelerators.wall_clock(
        lambda: generate(target, p_t, timed, gens_t()), config.n_repeats, warmup=0
    )
    t_ssld = accelerators.wall_clock(
        lambda: accelerators.draft_then_ssld(
            target, drafter, p_t, a_t, sid, timed, gens_t(), c
        ),
        config.n_repeats,
        warmup=0,
    )
    return t_acc, t_ssld


def record_bars(v: dict, a_values: dict, tau_paper: float | None) -> pd.DataFrame:
    """The three bars on alpha (the page's, Model A's and Model B's), their
    shortfalls and the notes on the bar, recorded in ``v`` (the values so far);
    with ``tau_paper``, the paper's own bar beside ours, as context. Returns the
    bars' table."""
    alpha, alpha_hi, gamma, c = (v[k] for k in ("c3_alpha", "c3_alpha_hi",
                                                "c3_gamma", "c3_c"))
    needed = [
        v["c3_alpha_star"],
        a_values.get("c3_model_a_alpha_needed", float("nan")),
        win_condition.model_b_alpha_needed(gamma, v["c3_delta"], 1, c),
    ]
    bars = bars_table(dict(zip(BARS, needed, strict=True)), alpha, alpha_hi)
    if bars.iloc[1]["reachable (<= 1)"]:
        v["c3_shortfall_model_a"] = bars.iloc[1]["shortfall"]
    if bars.iloc[2]["reachable (<= 1)"]:
        v["c3_shortfall_model_b"] = bars.iloc[2]["shortfall"]
    degenerate = v["c3_tau_acc_lo"] <= 1.0 + 1e-9
    v["c3_accelerator_degenerate"] = int(degenerate)
    v["c3_tau_note"] = tau_note(degenerate)
    v["c3_bar_note"] = win_condition.bar_note(
        v["c3_alpha_lo"], alpha_hi, v["c3_tau_acc_lo"], v["c3_tau_acc_hi"]
    )
    if tau_paper is not None:  # the paper's own bar beside ours, as context
        a_paper, short_paper, paper_note = win_condition.paper_bar(tau_paper, alpha_hi)
        v |= {
            "c3_paper_bar_alpha_star": a_paper,
            "c3_paper_bar_shortfall_lo": short_paper,
            "c3_paper_bar_note": paper_note,
        }
    return bars


def measure(models: Models, world: World, config: Config, *, prompt: torch.Tensor,
            tau_paper: float | None = None, anchor_unit: str = "word",
            information: bool = False) -> WinCondition:
    """C3's measurement on ``prompt`` (B, P), one sample per row (SPEC.md 3.1, 5).

    Every decoder decodes the same prompts with the same per-row random streams
    (``row_generators(seed, B)``). ``tau_paper``, the paper's accelerator figure
    (the page reads it from the registry), adds the paper's own bar as context.
    ``values`` are in the order the page records them. ``world`` gives the roles
    (anchors) and the SID head's training text. ``config.judge`` scores the quality
    of the end-to-end decodes where the world's texts have no answers (prose).
    ``anchor_unit``: the anchors alpha, the head and SSLD work on
    (``inputs.anchor_mask``): ``"word"``, the book's (a content word's first
    piece), or ``"piece"``, every content piece (the regime page's fine IDs).
    ``information``: also record, per codebook, what the best draft's and the
    target's one-shot views leave open about each anchor's ID (``arrays
    ["anchor_information"]``: ``information.anchor_table``'s ``sid_info_draft``
    and ``sid_info_verify``, nats), for C8 along the regime axis.
    """
    B = prompt.shape[0]
    _check(anchor_unit, config.n_timed, B)
    target, tok = models.target, models.tokenizer
    book_seeds = codebooks.codebook_seeds(config.seed, config.n_codebooks)

    def gens():
        """The same seeded stream per sample for every decoder."""
        return row_generators(config.seed, B, prompt.device)

    out = WinCondition()
    v = out.values
    # tau_acc: each accelerator on the same prompts; SSLD infills with these configs
    infill_configs, acc_runs, acc_table = tau_step(target, tok, prompt, gens, config)
    v |= strongest_bar(acc_table)
    tau_acc, a_star, strongest = v["c3_tau_acc"], v["c3_alpha_star"], v["c3_strongest"]
    split = eos_tail.bar_split(acc_runs[strongest], tok.eos_token_id,
                             config.n_bootstrap, config.seed)  # the regime by the bar
    v |= {f"c3_{k}": x for k, x in split.items()}
    # alpha: oracle content anchors of the threshold accelerator's decode
    found = alpha_step(models, world, prompt, acc_runs[next(iter(infill_configs))],
                       book_seeds, a_star, config, anchor_unit, information)
    tokens, anchors, books = found["tokens"], found["anchors"], found["books"]
    table, info = found["table"], found["info"]
    first = books[book_seeds[0]]  # the codebook SSLD runs with end to end
    sid, drafters = first.sid, first.drafters
    v |= found["values"]
    best, alpha = v["c3_best"], v["c3_alpha"]
    gamma, c = v["c3_gamma"], v["c3_c"]
    robust, robust_values = robust_table(books, tokens, anchors, a_star)
    v |= robust_values
    a_values, out.arrays = model_a(tau_acc, alpha, gamma, c)
    v |= a_values
    # Model B and SSLD end to end, on the strongest accelerator that can infill
    head = strongest if strongest in infill_configs else next(iter(infill_configs))
    cfg, acc = infill_configs[head], acc_runs[head]
    acc_nfe = acc.nfe.double()
    rows, ssld_runs, oracle = end_to_end(
        target, codebooks.Scored(prompt, tokens, anchors), first, table, cfg, acc,
        gens, c, config)
    kind, score, scored = score_rows(rows, ssld_runs, oracle, world, tok, prompt,
                                     config)
    e2e = pd.DataFrame(rows).set_index("SSLD draft")
    v |= e2e_values(e2e, best, acc_nfe, oracle.nfe.double(), anchors, gamma, c)
    v["c3_head_acc"] = head
    v |= quality_values(kind, score(acc.generated), scored[best], config.n_bootstrap,
                        config.seed)
    # wall-clock on the first n_timed samples (the runs above were the untimed warm-up)
    t_acc, t_ssld = wall_clock(target, drafters[best], sid, prompt, anchors, cfg,
                               gens, c, config)
    v |= {"c3_wall_acc": float(np.median(t_acc)),
          "c3_wall_ssld": float(np.median(t_ssld)),
          "c3_wall_ratio": float(np.median(t_ssld) / np.median(t_acc))}
    bars = record_bars(v, a_values, tau_paper)  # three bars on alpha, and notes
    v["c3_gap_note"] = gap_note(v["c3_shortfall"], e2e.loc[best])
    out.tables = {
        "accelerators": acc_table,
        "acceptance": table,
        "robust": robust,
        "e2e": e2e,
        "wall_clock": pd.DataFrame(
            {"accelerator alone (s)": t_acc,
             "SSLD, draft + verify + infill (s)": t_ssld},
            index=pd.RangeIndex(1, config.n_repeats + 1, name="repeat")),
        "bars": bars,
    }
    out.arrays |= {
        "nfe_by_accelerator": {n: r.nfe.cpu() for n, r in acc_runs.items()},
        "generated_by_accelerator": {n: r.generated.cpu() for n, r in acc_runs.items()},
        "acc_nfe": acc_nfe,
        "ssld_nfe": ssld_runs[best].nfe,
        "wall_acc": t_acc,
        "wall_ssld": t_ssld,
    }
    out.n_clusters = sid.n_clusters
    # the IDs the target wrote at the anchors, per codebook (what an ID tells)
    out.arrays["anchor_ids"] = [b.sid(tokens)[anchors].cpu() for b in books.values()]
    if information:
        out.arrays["anchor_information"] = info
    return out
