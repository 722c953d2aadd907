"""C2 (notebooks/02_anchor_acceptance.md): how often a cheap draft guesses a
content anchor's semantic ID, against the bar alpha* = 1 - 1/tau_acc.

``measure`` runs the page's whole measurement on loaded models: the semantic IDs
(SPEC.md section 3: k-means over the target's input embeddings), the target's
unconditional decodes and their content anchors (word-initial pieces, with the
piece-level anchors beside them), ``n_codebooks`` codebooks (IDs + both drafts),
alpha_SID pooled over them with its 95 % interval, the chance levels, the sweep
over K, the accelerator's tau_acc and its bar (SPEC.md section 3.1), each
codebook alone and where the piece-level hits lie. Its ``values`` are the glue
names the page records, in the page's order, except the verdicts (the page
computes them from these values with the rules of ``book/claims.yml``). The
``draw_*`` functions draw the page's figures from a result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from ..measures import eos_tail, reuse, stats, tagger
from ..measures.order import row_generators
from ..ssld import (
    accelerators,
    chance_levels,
    codebooks,
    decoder,
    drafting,
    inputs,
    semantic,
    win_condition,
)
from ..worlds import World
from . import parameters
from .common import Measurement, Models
from .parameters import shared

HEAD = drafting.HeadDraft.name  # "small model + trained SID head"
MARGINAL = drafting.SmallMarginalDraft.name  # "small model, cluster marginal"
DRAFT_KEYS = {MARGINAL: "small", HEAD: "head"}  # draft name -> glue-name part
CHANCE_UNIFORM_K = "chance: 1/K"
CHANCE_FREQUENCY_K = "chance: sum P(s)^2"
SWEEP_KEYS = {**DRAFT_KEYS, codebooks.FIRST_PASS: "target",
              CHANCE_UNIFORM_K: "uniform", CHANCE_FREQUENCY_K: "freq"}
TOK_MODE = "exact token (TOK mode)"
VERIFIED = "accepted by the verify pass"
PIECE_HIT_SHARE = "share of piece-level hits on word-continuing pieces"
CI = ["alpha", "low", "high"]


# --- semantic IDs ---------------------------------------------------------------------


def semantic_ids(target, tokenizer, K: int, levels: int, seed: int, n_codebooks: int):
    """The codebook seeds, the first codebook's IDs, their size-matched random
    control and the k-means seconds: (seeds, sid, control, seconds)."""
    t0 = time.perf_counter()
    book_seeds = codebooks.codebook_seeds(seed, n_codebooks)
    sid = semantic.semantic_ids_for(target, K, seed=book_seeds[0], tokenizer=tokenizer,
                                    levels=levels)
    seconds = time.perf_counter() - t0
    control = sid.permuted(torch.Generator().manual_seed(seed))
    return book_seeds, sid, control, seconds


def cluster_examples(tokenizer, sid, control, seed: int, n: int = 6,
                     n_tokens: int = 8) -> pd.DataFrame:
    """The first ``n_tokens`` tokens of ``n`` clusters drawn at random (seeded), in
    the semantic IDs and in the size-matched random control."""
    def show(cluster_ids, codes):
        return [" ".join(tokenizer.convert_ids_to_tokens(
            (codes.flat == c).nonzero().flatten()[:n_tokens].tolist()))
            for c in cluster_ids]

    rng = np.random.default_rng(seed)
    picked = sorted(rng.choice(sid.n_clusters, size=n, replace=False).tolist())
    return pd.DataFrame({"semantic cluster": show(picked, sid),
                         "random cluster (same size)": show(picked, control)},
                        index=pd.Index(picked, name="ID"))


# --- the target's decode and its anchors ----------------------------------------------


@dataclass
class AnchorDecode:
    """The target's decodes by every accelerator and the anchors of the first's."""

    runs: dict  # accelerator name -> DecodeResult
    ref_name: str  # the accelerator the anchors come from (the threshold rule)
    tokens: torch.Tensor  # (B, G) its generated tokens
    classes: np.ndarray  # (B, G) word classes (``tagger``)
    anchors: torch.Tensor  # (B, G) word anchors: a content word's first piece
    anchors_piece: torch.Tensor  # (B, G) piece-level anchors: every content piece
    continuation: torch.Tensor  # (B, G) pieces that continue a word
    seconds: float  # all accelerators' decodes


def decode_anchors(target, tokenizer, lexicon, prompt: torch.Tensor, accs: dict,
                   seed: int) -> AnchorDecode:
    """Decode ``prompt`` with every accelerator of ``accs`` (one seeded stream per
    row, the same for each) and take the oracle anchors of the first's decode
    (``inputs.anchor_mask``, word and piece level)."""
    n, P = prompt.shape
    t0 = time.perf_counter()
    runs = {name: reuse.generate(target, prompt, cfg,
                                 row_generators(seed, n, prompt.device))
            for name, cfg in accs.items()}
    seconds = time.perf_counter() - t0
    ref_name = next(iter(accs))
    ref = runs[ref_name]
    classes = np.array([tagger.classes_of_tokens(tokenizer, row.tolist(), lexicon)[P:]
                        for row in ref.tokens])
    anchors = inputs.anchor_mask(tokenizer, ref.tokens, lexicon)[:, P:]
    piece = inputs.anchor_mask(tokenizer, ref.tokens, lexicon, unit="piece")[:, P:]
    if not torch.equal(piece, torch.as_tensor(classes == tagger.CONTENT)):
        raise AssertionError("piece-level anchors differ from the content positions")
    cont = inputs.continuation_mask(tokenizer, ref.tokens)[:, P:]
    return AnchorDecode(runs, ref_name, ref.generated, classes, anchors, piece, cont,
                        seconds)


def anchor_values(dec: AnchorDecode, n_samples: int) -> dict:
    """How many anchors there are (word and piece level), and the share of the
    piece-level anchors that continue a word."""
    n_anchors, piece = int(dec.anchors.sum()), dec.anchors_piece
    return {"c2_n_anchors": n_anchors, "c2_n_anchors_piece": int(piece.sum()),
            "c2_continuation_share_of_anchors":
                float((piece & dec.continuation).sum() / piece.sum()),
            "c2_anchors_per_seq": n_anchors / n_samples}


def class_shares(classes: np.ndarray) -> pd.DataFrame:
    """Share of the generated positions in each word class (one row)."""
    shares = pd.Series(classes.ravel()).value_counts(normalize=True)
    return shares.rename("share of positions").to_frame().T


# --- acceptance -----------------------------------------------------------------------


def first_codebook_table(first: codebooks.Codebook, tokens: torch.Tensor,
                         anchors: torch.Tensor) -> pd.DataFrame:
    """The first codebook's acceptance table with two rates per draft beside it:
    its ID equals the target's first-pass argmax cluster (what SSLD's verify pass
    accepts), and its argmax token equals the anchor token (TOK mode)."""
    table = first.table.copy()
    first_pass = first.preds[codebooks.FIRST_PASS]
    for name, out in first.outputs.items():
        h, n = codebooks.per_sequence(out.sids == first_pass, anchors)
        table.loc[name, VERIFIED] = h.sum() / n.sum()
        h, n = codebooks.per_sequence(out.tokens == tokens, anchors)
        table.loc[name, TOK_MODE] = h.sum() / n.sum()
    return table


def acceptance_values(pooled: pd.DataFrame, pooled_piece: pd.DataFrame,
                      table: pd.DataFrame, chance: dict, costs: dict) -> dict:
    """The page's acceptance figures: each draft's pooled alpha_SID with its
    interval, verify rate and cost; the best draft's on word and piece anchors;
    the target's first pass; the chance levels; the best draft's name."""
    best = codebooks.best_pooled_draft(pooled)
    v = {}
    for name, key in DRAFT_KEYS.items():
        for suffix, col in zip(["", "_lo", "_hi"], CI, strict=True):
            v[f"c2_alpha_{key}{suffix}"] = pooled.loc[name, col]
        v[f"c2_verify_rate_{key}"] = table.loc[name, VERIFIED]
        v[f"c2_cost_{key}"] = costs[name]
    v["c2_n_codebooks"] = int(pooled["codebooks"].iloc[0])
    for suffix, col in zip(["sid", "lo", "hi"], CI, strict=True):
        v[f"c2_alpha_{suffix}"] = pooled.loc[best, col]
    v["c2_alpha_spread"] = pooled.loc[best, codebooks.SPREAD]
    v["c2_alpha_questions_share"] = pooled.loc[best, codebooks.QUESTIONS_SHARE]
    v["c2_alpha_first_codebook"] = table.loc[best, "alpha"]
    for suffix, col in zip(["sid_piece", "piece_lo", "piece_hi"], CI, strict=True):
        v[f"c2_alpha_{suffix}"] = pooled_piece.loc[best, col]
    v["c2_target_first_pass_piece"] = pooled_piece.loc[codebooks.FIRST_PASS, "alpha"]
    v["c2_best_is_head"] = int(best == HEAD)
    for suffix, col in zip(["", "_lo", "_hi"], CI, strict=True):
        v[f"c2_target_first_pass{suffix}"] = pooled.loc[codebooks.FIRST_PASS, col]
    v["c2_chance_uniform"] = chance[chance_levels.CHANCE_UNIFORM]
    v["c2_chance"] = chance[chance_levels.CHANCE_FREQUENCY]
    v["c2_chance_majority"] = chance[chance_levels.CHANCE_MAJORITY]
    v["c2_best_name"] = best
    return v


# --- the sweep over K -----------------------------------------------------------------


def k_sweep(target, draft, tokenizer, scored: codebooks.Scored, sid, first, verify,
            config: Config):
    """alpha_SID of both drafts and of the target's first pass, and two chance
    levels, at each K of ``config.K_sweep``: IDs and head refitted with the first
    codebook's seed on the same decode (``scored``), outputs and first pass (at
    ``config.K``: the first codebook, whose IDs are ``sid``). Returns (long
    table, seconds)."""
    prompt, tokens, anchors = scored.prompt, scored.tokens, scored.anchors
    gen_length, K_sweep, K = config.gen_length, config.K_sweep, config.K
    levels, n_bootstrap, seed = config.levels, config.n_bootstrap, config.seed
    rows, t0, P = [], time.perf_counter(), prompt.shape[1]
    for k in K_sweep:
        if k == K:  # measured with the codebooks
            sid_k, t = sid, first.table
        else:
            sid_k = semantic.semantic_ids_for(target, k, seed=first.seed,
                                              tokenizer=tokenizer, levels=levels)
            drafts_k = drafting.drafts_for(draft, sid_k, first.windows, first.content,
                                           P, gen_length)
            preds = {name: d(prompt, gen_length).sids for name, d in drafts_k.items()}
            preds[codebooks.FIRST_PASS] = decoder.target_cluster_argmax(verify, sid_k)
            t = codebooks.acceptance_table(preds, tokens, anchors, sid_k, n_bootstrap,
                                           seed)
        ids_k = sid_k(tokens)[anchors].numpy()
        for name, r in t.iterrows():
            rows.append(dict(K=k, what=name, alpha=r["alpha"], low=r["low"],
                             high=r["high"]))
        rows.append(dict(K=k, what=CHANCE_UNIFORM_K,
                         alpha=semantic.uniform_chance(sid_k)))
        rows.append(dict(K=k, what=CHANCE_FREQUENCY_K,
                         alpha=semantic.frequency_chance(ids_k, sid_k.n_clusters)))
    return pd.DataFrame(rows), time.perf_counter() - t0


def sweep_values(sweep: pd.DataFrame) -> dict:
    """``c2_sweep_<what>_K<k>``: each sweep row's alpha, in the sweep's order."""
    return {f"c2_sweep_{SWEEP_KEYS[r.what]}_K{r.K}": r.alpha
            for r in sweep.itertuples()}


# --- the bar --------------------------------------------------------------------------

NO_BAR = ("On this model the strongest accelerator commits no more than one token "
          "per forward (tau_acc is indistinguishable from 1), so alpha* is (close to) "
          "0 and the rule cannot call the claim replicated, whatever the draft does: "
          "the paper's bar presupposes an accelerator that accelerates. The C3 "
          "chapter gives the bars at the measured draft costs.")
REAL_BAR = ("The accelerator commits more than one token per forward, so alpha* is "
            "a real bar.")


def accelerator_bar(runs: dict, gen_length: int, n_bootstrap: int, seed: int) -> dict:
    """tau_acc of the strongest accelerator (most tokens per forward), its 95 %
    interval (ratio bootstrap over sequences) and alpha* = 1 - 1/tau_acc
    (SPEC.md section 3.1), with the page's sentence on whether that bar is real."""
    tau = {name: r.mean_tokens_per_nfe for name, r in runs.items()}
    strongest = max(tau, key=tau.get)
    nfe = runs[strongest].nfe.numpy()
    _, lo, hi = stats.ratio_bootstrap(np.full(len(nfe), gen_length), nfe, n_bootstrap,
                                      seed)
    return {"c2_tau_acc": tau[strongest],
            "c2_alpha_star": win_condition.alpha_star(tau[strongest]),
            "c2_tau_acc_lo": lo, "c2_tau_acc_hi": hi, "c2_strongest": strongest,
            "c2_tau_note": NO_BAR if lo <= 1.0 + 1e-9 else REAL_BAR}


def gap_note(alpha: float, alpha_hi: float, majority: float, verified: float,
             a_star: float) -> str:
    """The page's sentence on what reaches the bar: where alpha_SID sits against
    the majority-ID rate, and how often SSLD's verify pass accepts the best draft."""
    if alpha_hi < a_star:
        return "Even the upper end of the best draft's interval stays below alpha*."
    where = "at" if abs(alpha - majority) < alpha_hi - alpha else "away from"
    return (f"Note what reaches the bar: the best draft's alpha_SID sits {where} the "
            f"majority-ID rate ({majority:.4f}), and SSLD's verify pass accepts its ID "
            f"for a share {verified:.3f} of anchors, so a high alpha_SID need not make "
            "SSLD faster (the C3 chapter runs it end to end).")


def bar_values(v: dict, verified: float, paper_alpha: float, paper_tau: float) -> dict:
    """The sentences and ratios beside the verdict (from ``v``, the values so far):
    alpha_SID's interval against alpha*'s, the paper's own bar (context, never
    the verdict), the gap note and alpha_SID over the paper's figure."""
    alpha, lo, hi = v["c2_alpha_sid"], v["c2_alpha_lo"], v["c2_alpha_hi"]
    a_paper, short, paper_note = win_condition.paper_bar(paper_tau, hi)
    return {"c2_bar_note": win_condition.bar_note(lo, hi, v["c2_tau_acc_lo"],
                                                  v["c2_tau_acc_hi"]),
            "c2_paper_bar_alpha_star": a_paper, "c2_paper_bar_shortfall_lo": short,
            "c2_paper_bar_note": paper_note,
            "c2_gap_note": gap_note(alpha, hi, v["c2_chance_majority"], verified,
                                    v["c2_alpha_star"]),
            "c2_ratio_to_paper": alpha / paper_alpha,
            "c2_hi_ratio_to_paper": hi / paper_alpha}


# --- the codebooks one by one, and where the piece-level hits lie ---------------------


def codebook_spread(robust: pd.DataFrame) -> dict:
    """How far the single codebooks (``codebooks.per_codebook``) spread: their
    number, the lowest and highest best-draft alpha_SID, and the largest gap
    between the head's alpha_SID and the majority-ID rate."""
    gap = (robust["alpha_SID, head"] - robust["majority-ID rate"]).abs()
    return {"c2_robust_n_seeds": len(robust),
            "c2_robust_alpha_min": robust["alpha_SID"].min(),
            "c2_robust_alpha_max": robust["alpha_SID"].max(),
            "c2_robust_head_minus_majority_max": gap.max()}


def piece_hits(books: dict, best: str, tokens, anchors, anchors_piece,
               cont) -> pd.DataFrame:
    """Per codebook: the best draft's exact-ID hits on piece-level anchors, those
    on word anchors, and the share of the piece-level hits on continuing pieces."""
    rows = []
    for s, b in books.items():
        hit = (b.preds[best] == b.sid(tokens)) & anchors_piece
        n_hits = int(hit.sum())
        rows.append({"seed": s, "hits on piece-level anchors": n_hits,
                     "hits on word anchors": int((hit & anchors).sum()),
                     PIECE_HIT_SHARE: float((hit & cont).sum() / max(n_hits, 1))})
    return pd.DataFrame(rows).set_index("seed")


def piece_values(hits: pd.DataFrame) -> dict:
    """The mean share of piece-level hits on continuing pieces, and its words."""
    share = hits[PIECE_HIT_SHARE].mean()
    words = ("almost all of it" if share >= 0.9 else
             "most of it" if share > 0.5 else "a minority of it")
    return {"c2_continuation_share_of_hits": float(share), "c2_pieces_words": words}


def word_and_piece(pooled, pooled_piece, best: str, n_anchors: int,
                   n_anchors_piece: int) -> pd.DataFrame:
    """The best draft's pooled alpha_SID and interval on both kinds of anchors."""
    both = pd.DataFrame({
        "word anchors (headline)": pooled.loc[best, CI],
        "piece-level anchors (secondary)": pooled_piece.loc[best, CI]}).T
    both["anchors"] = [n_anchors, n_anchors_piece]
    return both


# --- the whole measurement ------------------------------------------------------------


def _plain(value):
    scalar = hasattr(value, "item") and getattr(value, "ndim", 0) == 0
    return value.item() if scalar else value


@dataclass(frozen=True)
class Config(parameters.Coded, parameters.Sequential):
    NOTEBOOK: ClassVar[str] = "02_anchor_acceptance"

    n_samples: int = shared("n_samples", 64, "unconditional (the prompt is [BOS])")
    K_sweep: list = shared("K_sweep", [16, 64, 256, 1024])


def record_ids(r: Measurement, tok, prompt, models: Models, config: Config):
    """The k-means IDs and their control (``semantic_ids``), recorded in ``r``;
    returns the codebooks' seeds and the first codebook's IDs."""
    book_seeds, sid, control, seconds = semantic_ids(
        models.target, tok, config.K, config.levels, config.seed, config.n_codebooks
    )
    r.values.update(
        c2_K=config.K, c2_n_clusters=sid.n_clusters, c2_kmeans_seconds=seconds
    )
    r.tables["clusters"] = cluster_examples(tok, sid, control, config.seed)
    r.arrays.update(
        sizes=sid.sizes().numpy(),
        control_sizes=control.sizes().numpy(),
        book_seeds=book_seeds,
        prompt=prompt,
    )
    return book_seeds, sid


def record_decode(r: Measurement, tok, world: World, prompt, accs, models: Models,
                  config: Config):
    """The target's decode and its anchors (``decode_anchors``), recorded in
    ``r``; returns it."""
    dec = decode_anchors(models.target, tok, world.roles(), prompt, accs, config.seed)
    r.values.update(anchor_values(dec, config.n_samples))
    r.tables["shares"] = class_shares(dec.classes)
    r.arrays.update(
        ref_name=dec.ref_name,
        decode_seconds=dec.seconds,
        texts=[tok.decode(row.tolist()) for row in dec.tokens[:3]],
        tokens=dec.tokens,
        anchors=dec.anchors,
        anchors_piece=dec.anchors_piece,
        continuation=dec.continuation,
    )
    return dec


def record_codebooks(r: Measurement, world: World, scored: codebooks.Scored, verify,
                     book_seeds, models: Models, config: Config):
    """The codebooks on the decode (``codebooks.codebooks``) and the first one's
    draft costs, recorded in ``r``; returns (books, costs)."""
    t0 = time.perf_counter()
    books = codebooks.codebooks(models.target, models.draft, models.tokenizer, world,
                                scored, config, book_seeds, verify=verify)
    r.values["c2_codebooks_seconds"] = time.perf_counter() - t0
    first = books[book_seeds[0]]  # the codebook shown in detail
    L = scored.prompt.shape[1] + config.gen_length
    costs = {name: drafting.relative_cost(out, models.target, L)
             for name, out in first.outputs.items()}
    r.arrays.update(
        books=books,
        costs=costs,
        n_windows=first.windows.shape[0],
        head_losses=first.drafters[HEAD].head.losses,
    )
    return books, costs


def measure(
    models: Models,
    world: World,
    config: Config,
    *,
    paper_alpha: float,
    paper_tau: float,
) -> Measurement:
    """C2's measurement at the page's parameters (see the module docstring), in
    ``world`` (its prompts, roles and the SID head's training text).

    ``paper_alpha`` is the paper's alpha_SID and ``paper_tau`` its accelerator's
    tokens per forward (both from ``book/claims.yml``, read by the page). Tables:
    ``clusters``, ``shares``, ``pooled``, ``pooled_piece``, ``first_codebook``,
    ``chance``, ``sweep``, ``robust``, ``piece_hits``, ``word_and_piece``. Arrays:
    cluster ``sizes`` (and the control's), ``book_seeds``, ``prompt``,
    ``ref_name``, ``decode_seconds``, sample ``texts``, the decode's ``tokens``
    (B, G) with its ``anchors``, ``anchors_piece`` and ``continuation`` masks, the
    ``books``, the drafts' ``costs``, ``n_windows`` and the first head's
    ``head_losses``.
    """
    for name, x in [("paper_alpha", paper_alpha), ("paper_tau", paper_tau)]:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0:
            raise ValueError(f"{name} must be a positive number, got {x!r}")
    target, draft, tok = models.target, models.draft, models.tokenizer
    prompt = world.prompts(
        tok, config.n_samples, seed=config.seed, device=config.device
    )
    accs = accelerators.accelerators(
        config.gen_length,
        config.block_length,
        config.threshold,
        config.temperature,
        supports_cache=target.supports_cache,
    )
    r = Measurement()
    book_seeds, sid = record_ids(r, tok, prompt, models, config)

    dec = record_decode(r, tok, world, prompt, accs, models, config)
    tokens, anchors = dec.tokens, dec.anchors

    verify = decoder.verify_logits(target, prompt, config.gen_length)  # (B, G, V)
    books, costs = record_codebooks(r, world, codebooks.Scored(prompt, tokens, anchors),
                                    verify, book_seeds, models, config)
    first = books[book_seeds[0]]  # the codebook shown in detail

    pooled = codebooks.pooled_acceptance(
        books, tokens, anchors, config.n_bootstrap, config.seed
    )
    pooled_piece = codebooks.pooled_acceptance(
        books, tokens, dec.anchors_piece, config.n_bootstrap, config.seed
    )
    table = first_codebook_table(first, tokens, anchors)
    chance = chance_levels.mean_chance_levels(books, tokens, anchors)
    r.values.update(acceptance_values(pooled, pooled_piece, table, chance, costs))
    best = r.values["c2_best_name"]
    chance_name = f"chance (mean over {len(books)} codebooks)"
    r.tables.update(
        pooled=pooled,
        pooled_piece=pooled_piece,
        first_codebook=table,
        chance=pd.Series(chance, name=chance_name).to_frame(),
    )

    sweep, seconds = k_sweep(target, draft, tok,
                             codebooks.Scored(prompt, tokens, anchors), sid, first,
                             verify, config)
    r.values["c2_sweep_seconds"] = seconds
    r.values.update(sweep_values(sweep))
    r.tables["sweep"] = sweep

    r.values.update(
        accelerator_bar(dec.runs, config.gen_length, config.n_bootstrap, config.seed)
    )
    split = eos_tail.bar_split(
        dec.runs[r.values["c2_strongest"]],
        tok.eos_token_id,
        config.n_bootstrap,
        config.seed,
    )  # the regime beside the bar
    r.values.update({f"c2_{k}": x for k, x in split.items()})
    verified = table.loc[best, VERIFIED]
    r.values.update(bar_values(r.values, verified, paper_alpha, paper_tau))

    robust = codebooks.per_codebook(books, tokens, anchors)
    r.values.update(codebook_spread(robust))
    hits = piece_hits(books, best, tokens, anchors, dec.anchors_piece, dec.continuation)
    r.values.update(piece_values(hits))
    r.tables.update(
        robust=robust,
        piece_hits=hits,
        word_and_piece=word_and_piece(
            pooled, pooled_piece, best, r["c2_n_anchors"], r["c2_n_anchors_piece"]
        ),
    )
    r.values = {k: _plain(v) for k, v in r.values.items()}
    return r


# --- figures --------------------------------------------------------------------------


def _floor(result: Measurement) -> float:
    """Where zero hits are drawn on a log scale: at half a hit."""
    return 0.5 / max(result["c2_n_anchors"], 1)


def draw_sizes(result: Measurement):
    """Histogram of the first codebook's cluster sizes."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.hist(result.arrays["sizes"], bins=40, color="C0")
    ax.set(xlabel="tokens per cluster", ylabel="clusters",
           title=f"Semantic cluster sizes (K = {result['c2_n_clusters']})")
    plt.tight_layout()
    return fig


def draw_alpha(result: Measurement):
    """Pooled alpha_SID per prediction with its 95 % CI, on word and on piece-level
    anchors, against the chance levels."""
    import matplotlib.pyplot as plt

    pooled, chance = result.tables["pooled"], result.tables["chance"].iloc[:, 0]
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    names = list(pooled.index)
    y = np.arange(len(names))
    ax.errorbar(pooled["alpha"], y, xerr=[pooled["alpha"] - pooled["low"],
                                          pooled["high"] - pooled["alpha"]],
                fmt="o", color="k", capsize=3, label="word anchors (headline)")
    pp = result.tables["pooled_piece"].loc[names]
    ax.errorbar(pp["alpha"], y + 0.25,
                xerr=[pp["alpha"] - pp["low"], pp["high"] - pp["alpha"]],
                fmt="o", mfc="white", color="0.5", capsize=3,
                label="piece-level anchors (secondary)")
    for (label, v), ls in zip(chance.items(), ["--", ":", "-."], strict=True):
        ax.axvline(v, ls=ls, color="C3", label=label)
    ax.set_yticks(y, names)
    ax.set(xlabel="alpha_SID: P(drafted ID = ID of the anchor token)",
           title=f"Anchor acceptance at K = {result['c2_n_clusters']}, mean of "
                 f"{result['c2_n_codebooks']} codebooks (95 % CIs)")
    ax.legend(fontsize=8, loc="lower right")
    plt.tight_layout()
    return fig


def draw_sweep(result: Measurement):
    """alpha_SID against K (log-log), with its CIs, and the chance levels."""
    import matplotlib.pyplot as plt

    sweep, floor = result.tables["sweep"], _floor(result)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    styles = {MARGINAL: ("C0", "o", "-"), HEAD: ("C1", "s", "-"),
              codebooks.FIRST_PASS: ("C2", "^", "-"),
              CHANCE_UNIFORM_K: ("C3", "", "--"), CHANCE_FREQUENCY_K: ("C3", "", ":")}
    for name, (c, m, ls) in styles.items():
        d = sweep[sweep.what == name].sort_values("K")
        ax.plot(d.K, d.alpha.clip(lower=floor), color=c, marker=m, ls=ls, label=name)
        if d["low"].notna().all():
            ax.fill_between(d.K, d["low"].clip(lower=floor),
                            d["high"].clip(lower=floor), color=c, alpha=0.15)
    ax.set(xscale="log", yscale="log", xlabel="K (clusters)", ylabel="alpha_SID",
           title="Anchor ID acceptance vs K (95 % CIs; zero drawn at half a hit)")
    ax.legend(fontsize=7, loc="lower left")
    plt.tight_layout()
    return fig


def draw_paper(result: Measurement, paper_alpha: float):
    """The paper's alpha_SID beside ours, the chance level and alpha* (log scale)."""
    import matplotlib.pyplot as plt

    v, floor = result.values, _floor(result)
    alpha, lo, hi = v["c2_alpha_sid"], v["c2_alpha_lo"], v["c2_alpha_hi"]
    fig, ax = plt.subplots(figsize=(5.5, 2.6))
    bars = pd.Series({"paper: alpha_SID": paper_alpha, "ours: alpha_SID": alpha,
                      "ours: chance sum P^2": v["c2_chance"],
                      "ours: alpha*": v["c2_alpha_star"]})
    ax.barh(bars.index, bars.clip(lower=floor), color=["0.6", "C1", "C3", "C2"])
    ax.errorbar([max(alpha, floor)], [1], xerr=[[max(alpha, floor) - max(lo, floor)],
                [hi - max(alpha, floor)]], fmt="none", color="k", capsize=3)
    ax.set(xscale="log", xlabel="probability (log scale)",
           title="The paper's figure beside ours")
    plt.tight_layout()
    return fig


def draw_robust(result: Measurement):
    """Each codebook's best-draft alpha_SID with its CI and its majority-ID rate,
    the mean over codebooks, alpha* and alpha*/10."""
    import matplotlib.pyplot as plt

    robust, v = result.tables["robust"], result.values
    alpha, lo, hi = v["c2_alpha_sid"], v["c2_alpha_lo"], v["c2_alpha_hi"]
    a_star = v["c2_alpha_star"]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    x = np.arange(len(robust))
    ax.errorbar(x, robust["alpha_SID"], yerr=[robust["alpha_SID"] - robust["low"],
                robust["high"] - robust["alpha_SID"]], fmt="o", color="k", capsize=3,
                label="best draft of the codebook, 95 % CI")
    ax.scatter(x + 0.15, robust["majority-ID rate"], marker="_", s=200, color="C1",
               label="majority-ID rate")
    ax.errorbar([len(robust)], [alpha], yerr=[[alpha - lo], [hi - alpha]], fmt="s",
                color="C0", capsize=3, label="mean over codebooks (the verdict's)")
    ax.axhline(a_star, color="C2", label="alpha*")
    ax.axhline(a_star / 10, color="C2", ls="--", label="alpha*/10")
    ax.set_xticks(np.arange(len(robust) + 1),
                  [f"seed {s}" for s in robust.index] + ["mean"])
    ax.set(ylabel="alpha_SID", title="alpha_SID per codebook (decode fixed)")
    ax.legend(fontsize=7, loc="upper right")
    plt.tight_layout()
    return fig
