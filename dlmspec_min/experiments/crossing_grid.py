"""The crossing, separated: anchor unit x ID resolution (notebook 11; issue 55;
DERIVED).

The regime page's first crossing was a line through two points per world that
differ in two things at once: the IDs (K = 32 k-means clusters against every
token its own ID) and the anchors (a content word's first piece against every
content piece). The grid crosses the two factors (``book/claims.yml``,
``checks: regime: grid``, written before any point was measured): per world
and anchor unit, five k-means K chosen from the bits an ID carries alone
(``choose_K``) and the fine IDs.

What does not depend on K is computed once per world (the decodes: the
settings' C3 run's; the draft's features on the prompts and on its training
problems) or once per world and unit (the anchors; a token head, ``fit_token_head``).
Every point's draft is a token distribution summed within its clusters
(``semantic.cluster_marginal``): the small model's own, and the token head's;
the better of the two by pooled alpha_SID is the point's draft, as C3 picks.

Per point: bits per ID, alpha_SID (pooled over codebooks), alpha*, the margin
alpha* - alpha_SID and the bits the draft lacks; the margin's interval and the
crossing's come from one bootstrap over questions (``margin_draws``), the
same resampled questions for tau_acc and every point of a world.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..measures import stats
from ..ssld import drafting, inputs, semantic
from ..ssld.codebooks import codebook_seeds
from .common import Measurement

UNITS = inputs.ANCHOR_UNITS  # ("word", "piece")
FINE = "fine"


@dataclass
class WorldDecode:
    """What every point of a world shares: its models and the C3 run's decodes."""

    name: str  # the setting (narrow, order, free)
    world: object  # its MathWorld
    models: object  # its Models (target, draft, tokenizer)
    prompt: torch.Tensor  # (B, P) the held-out questions
    tokens: torch.Tensor  # (B, G) the first infill accelerator's decode (C3's ref)
    nfe: np.ndarray  # (B,) forwards of the strongest accelerator per question
    tau: tuple[float, float, float]  # tau_acc with its interval (C3's)


def fine_K(models) -> int:
    """K of the fine IDs: the target's vocabulary less its special tokens (and
    the mask), so that k-means gives every token its own cluster."""
    V = models.target.model.get_input_embeddings().weight.shape[0]
    special = {int(models.target.mask_id)} | {
        int(i) for i in models.tokenizer.all_special_ids if int(i) < V}
    return V - len(special)


def interval_words(lo: float, hi: float) -> str:
    """A crossing's 95 % interval in words; an infinite end is one the two
    settings leave open."""
    if np.isfinite(lo) and np.isfinite(hi):
        return f"95 % interval {lo:.2f} to {hi:.2f}"
    if np.isfinite(hi):
        return (f"95 % interval: at most {hi:.2f}; the draft may already be below "
                "its bar with the coarse IDs")
    if np.isfinite(lo):
        return (f"95 % interval: at least {lo:.2f}; the draft may stay above its "
                "bar with the fine IDs")
    return "the two settings leave its 95 % interval open at both ends"


def world_decode(name: str, world, models, prompt: torch.Tensor, c3) -> WorldDecode:
    """A world's shared decode from its setting's C3 ``Measurement``: the anchors'
    tokens are the first accelerator's decode (C3's oracle anchors), tau_acc the
    strongest accelerator's forwards."""
    gen = c3.arrays["generated_by_accelerator"]
    strongest = c3.values["c3_strongest"]
    v = c3.values
    return WorldDecode(name, world, models, prompt, next(iter(gen.values())).cpu(),
                       c3.arrays["nfe_by_accelerator"][strongest].double().numpy(),
                       (v["c3_tau_acc"], v["c3_tau_acc_lo"], v["c3_tau_acc_hi"]))


def anchors_of(d: WorldDecode, unit: str) -> torch.Tensor:
    """(B, G) the unit's anchors in the decode (``inputs.anchor_mask``)."""
    ids = torch.cat([d.prompt.cpu(), d.tokens], dim=1)
    P = d.prompt.shape[1]
    return inputs.anchor_mask(d.models.tokenizer, ids, d.world.roles(), unit)[:, P:]


# --- the drafts: token distributions, fitted once ------------------------------------


def small_token_probs(d: WorldDecode) -> torch.Tensor:
    """(B, G, V) the small model's token distribution on the visible input."""
    den, P, G = d.models.draft, d.prompt.shape[1], d.tokens.shape[1]
    x = inputs.visible_input(d.prompt, G, den.mask_id)
    return torch.softmax(den.logits(x)[:, P:].double(), dim=-1).cpu()


def fit_token_head(features: torch.Tensor, targets: torch.Tensor, keep: torch.Tensor,
                   vocab: int) -> tuple[drafting.SIDHead, torch.Tensor]:
    """C3's SID head with every token its own ID, fitted on the tokens that occur
    at the training anchors (``keep``): features (N, G, D), targets (N, G).
    Returns the head and the (C,) token each of its outputs stands for. A token
    never at a training anchor gets probability 0: the limit the head over every
    token approaches, since its bias is not regularised (``drafting.head_loss``)."""
    labels = targets[keep]
    tokens, mapped = torch.unique(labels, return_inverse=True)
    if vocab <= int(tokens.max()):
        raise ValueError(f"a training token {int(tokens.max())} lies outside the "
                         f"vocabulary of {vocab}")
    return drafting.train_sid_head(features[keep], mapped, len(tokens)), tokens


def head_token_probs(head: drafting.SIDHead, tokens: torch.Tensor,
                     features: torch.Tensor, vocab: int) -> torch.Tensor:
    """(B, G, V) the token head's distribution on features (B, G, D)."""
    p = head.log_probs(features).exp()  # (B, G, C)
    out = torch.zeros(*p.shape[:-1], vocab, dtype=p.dtype)
    out[..., tokens] = p
    return out


def token_drafts(d: WorldDecode, n_train: int, seed: int,
                 times: dict[str, float]) -> dict[str, dict[str, torch.Tensor]]:
    """unit -> draft name -> (B, G, V) token distribution: the small model's (one
    for both units) and the token head fitted on the unit's anchors of
    ``n_train`` training problems (codebook seed ``seed``'s rows, the rows a fine
    setting's head trains on; their features computed once for both units)."""
    import time

    den, tok = d.models.draft, d.models.tokenizer
    P, G = d.prompt.shape[1], d.tokens.shape[1]
    V = den.model.get_input_embeddings().weight.shape[0]
    t = time.process_time()
    small = small_token_probs(d)
    rows = d.world.training_rows(tok, n_train, seed, prompt=d.prompt)
    feats = drafting.visible_features(den, rows[:, :P], G).cpu()  # (N, G, D)
    on_prompt = drafting.visible_features(den, d.prompt, G).cpu()  # (B, G, D)
    special = semantic.special_mask(V, {int(den.mask_id)} | {
        int(i) for i in tok.all_special_ids if int(i) < V})
    times["features"] = times.get("features", 0.0) + time.process_time() - t
    out = {}
    for unit in UNITS:
        t = time.process_time()
        keep = inputs.anchor_mask(tok, rows, d.world.roles(), unit)[:, P:P + G]
        targets = rows[:, P:P + G]
        keep = keep & ~special[targets]
        head, tokens = fit_token_head(feats, targets, keep, V)
        out[unit] = {drafting.SmallMarginalDraft.name: small,
                     "small model + token head": head_token_probs(head, tokens,
                                                                  on_prompt, V)}
        times["token head fits"] = (times.get("token head fits", 0.0)
                                    + time.process_time() - t)
    return out


# --- the resolution axis: K from bits alone ------------------------------------------


def id_bits(sid: semantic.SemanticIDs, tokens: torch.Tensor,
            anchors: torch.Tensor) -> float:
    """The entropy (bits) of the IDs the target wrote at the anchors."""
    _, counts = np.unique(sid(tokens)[anchors].numpy(), return_counts=True)
    if not counts.sum():
        return math.nan
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def id_bits_interval(sids, tokens: torch.Tensor, anchors: torch.Tensor,
                     n_bootstrap: int, seed: int) -> tuple[float, float]:
    """The 95 % interval of the bits per ID (``id_bits``, mean over the
    codebooks ``sids``): percentiles of ``n_bootstrap`` draws of the questions
    (rows of ``tokens``, with replacement, the same draws for every codebook),
    the entropy of the IDs at the drawn questions' anchors in each."""
    B = tokens.shape[0]
    rng = np.random.default_rng(seed)
    weights = np.stack([np.bincount(rng.integers(0, B, B), minlength=B)
                        for _ in range(n_bootstrap)]).astype(float)  # (R, B)
    per_book = []
    for sid in sids:
        ids = sid(tokens)  # (B, G)
        counts = np.zeros((B, sid.n_clusters + 1))
        for b in range(B):
            np.add.at(counts[b], ids[b][anchors[b]].numpy(), 1)
        drawn = weights @ counts  # (R, IDs)
        total = drawn.sum(1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = drawn / total
            h = -np.where(p > 0, p * np.log2(np.where(p > 0, p, 1)), 0).sum(1)
        per_book.append(np.where(total[:, 0] > 0, h, np.nan))
    draws = np.mean(per_book, axis=0)
    if not np.isfinite(draws).all():
        return math.nan, math.nan
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def choose_K(bits: dict[int, float], ceiling: float, tol: float, n_k: int) -> list[int]:
    """The grid's K from ``bits`` (ladder K -> bits per ID, ascending K, the
    first the coarsest, K = 32) and the fine IDs' ``ceiling``: the first K, the
    smallest K within ``tol`` bits of the ceiling (where the bits stop rising;
    the largest K if none), and between them the ladder K nearest to evenly
    spaced bits; where the span holds fewer than ``n_k`` ladder K, the next
    ladder K above fill it (book/claims.yml, checks: regime: grid)."""
    ladder = sorted(bits)
    if len(ladder) < n_k or n_k < 2:
        raise ValueError(f"the ladder needs at least n_k = {n_k} >= 2 values, "
                         f"got {ladder}")
    top = next((k for k in ladder if bits[k] >= ceiling - tol), ladder[-1])
    span = [k for k in ladder if k <= top]
    if len(span) <= n_k:
        return ladder[:n_k] if len(span) < n_k else span
    lo, hi = bits[span[0]], bits[top]
    chosen, inner = [span[0], top], span[1:-1]
    for q in np.linspace(lo, hi, n_k)[1:-1]:
        free = [k for k in inner if k not in chosen]
        chosen.append(min(free, key=lambda k: (abs(bits[k] - q), k)))
    return sorted(chosen)


def ladder_ids(d: WorldDecode, K: int, seeds) -> list[semantic.SemanticIDs]:
    """One k-means clustering of the target's input embeddings per seed."""
    return [semantic.semantic_ids_for(d.models.target, K, seed=s,
                                      tokenizer=d.models.tokenizer) for s in seeds]


# --- a point: alpha_SID, its draft, the bits it lacks ---------------------------------


def draft_hits(probs: torch.Tensor, sids, tokens: torch.Tensor,
               anchors: torch.Tensor) -> tuple[np.ndarray, float]:
    """A token distribution (B, G, V) summed within each codebook's clusters:
    hits (S, B) of its most probable ID at the anchors, and the mean over
    codebooks of the bits it lacks about the target's ID, -log2 q(s) over
    anchors (q normalised over IDs, as ``SmallMarginalDraft``; a probability
    that underflowed is capped at 1e-300, as ``information._nats``)."""
    hits, lack = [], []
    for sid in sids:
        q = semantic.cluster_marginal(probs, sid)  # (B, G, K)
        q = q / q.sum(-1, keepdim=True).clamp(min=1e-300)
        truth = sid(tokens)  # (B, G); anchors are content, never special
        hits.append(((q.argmax(-1) == truth) & anchors).sum(1).numpy())
        qs = q.gather(-1, truth.clamp(max=sid.n_clusters - 1)[..., None])[..., 0]
        lack.append(float(-np.log2(qs[anchors].clamp(min=1e-300).numpy()).mean()))
    return np.stack(hits), float(np.mean(lack))


def point(drafts: dict[str, torch.Tensor], sids, tokens: torch.Tensor,
          anchors: torch.Tensor, n_bootstrap: int, seed: int) -> dict:
    """One grid point: the best draft by pooled alpha_SID, its hits (S, B), its
    alpha with ``stats.seed_pooled_rate``'s interval, the bits per ID (mean over
    codebooks) with its interval (``id_bits_interval``) and the bits the draft
    lacks."""
    trials = anchors.sum(1).numpy()
    scored = {n: draft_hits(p, sids, tokens, anchors) for n, p in drafts.items()}
    best = max(scored, key=lambda n: (scored[n][0].sum(1) / trials.sum()).mean())
    hits, lack = scored[best]
    alpha, lo, hi = stats.seed_pooled_rate(hits, trials, n_bootstrap, seed)
    bits_lo, bits_hi = id_bits_interval(sids, tokens, anchors, n_bootstrap, seed)
    return dict(draft=best, hits=hits, alpha=alpha, alpha_lo=lo, alpha_hi=hi,
                bits=float(np.mean([id_bits(s, tokens, anchors) for s in sids])),
                bits_lo=bits_lo, bits_hi=bits_hi, info_draft=lack,
                n_codebooks=len(sids))


# --- the margin, its draws, the crossing ---------------------------------------------


def margin_draws(points: list[dict], trials: np.ndarray, nfe: np.ndarray, G: int,
                 n_bootstrap: int, seed: int) -> np.ndarray:
    """(n_bootstrap, n_points) margins alpha* - alpha_SID, each draw one resample
    of the questions for tau_acc (G tokens over the strongest accelerator's
    forwards) and for every point's alpha (codebooks held fixed)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(nfe), size=(n_bootstrap, len(nfe)))  # (R, B)
    star = 1 - nfe[idx].sum(1) / (G * len(nfe))  # 1 - 1/tau per draw
    n = trials[idx].sum(1)  # (R,)
    alphas = [(p["hits"][:, idx].sum(-1) / n).mean(0) for p in points]  # (R,) each
    return star[:, None] - np.stack(alphas, axis=1)


def first_crossing(bits: np.ndarray, margins: np.ndarray) -> np.ndarray:
    """Where the margin first turns from < 0 to >= 0 along ``bits`` (ascending),
    linear between the two points: margins (..., n) -> (...); +inf where it
    stays < 0 at every point, -inf where it is >= 0 at the first and never
    turns after."""
    m = np.asarray(margins, float)
    turn = (m[..., :-1] < 0) & (m[..., 1:] >= 0)  # (..., n-1)
    i = np.argmax(turn, axis=-1)
    m1 = np.take_along_axis(m, i[..., None], -1)[..., 0]
    m2 = np.take_along_axis(m, i[..., None] + 1, -1)[..., 0]
    b1, b2 = bits[i], bits[i + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = b1 + (0 - m1) * (b2 - b1) / (m2 - m1)
    return np.where(turn.any(-1), x, np.where(m[..., 0] < 0, np.inf, -np.inf))


def sign_changes(margins: np.ndarray) -> int:
    """How often the margin changes side of 0 along the points."""
    below = np.asarray(margins) < 0
    return int((below[1:] != below[:-1]).sum())


def end_line_test(bits: np.ndarray, margins: np.ndarray, draws: np.ndarray,
                  ends: tuple[int, int]) -> dict:
    """The line through two end points (``ends``: their indices) tested against
    the points between: residuals r of the other points, their covariance S over
    the bootstrap ``draws`` (R, n), T = r' S^+ r against chi^2 with as many
    degrees of freedom as points; also where the line reaches 0."""
    a, b = ends
    others = [i for i in range(len(bits)) if i not in ends]
    if not bits[b] != bits[a] or not np.isfinite(draws).all():  # no line to test
        return dict(line_T=math.nan, line_df=len(others), line_p=math.nan,
                    line_cross=math.nan, line_worst=math.nan)

    def resid(m):  # (..., n) -> (..., n_others)
        slope = (m[..., b] - m[..., a]) / (bits[b] - bits[a])
        line = m[..., a, None] + slope[..., None] * (bits[others] - bits[a])
        return m[..., others] - line

    from scipy.stats import chi2

    r = resid(np.asarray(margins, float))
    S = np.atleast_2d(np.cov(resid(draws), rowvar=False))
    T = float(r @ np.linalg.pinv(S) @ r)
    m_a, m_b = margins[a], margins[b]
    at = (bits[a] - m_a * (bits[b] - bits[a]) / (m_b - m_a)
          if (m_a < 0) != (m_b < 0) else math.nan)
    return dict(line_T=T, line_df=len(others), line_p=float(chi2.sf(T, len(others))),
                line_cross=float(at),
                line_worst=float(np.max(np.abs(r))) if len(r) else math.nan)


# --- a world and unit, then the grid -------------------------------------------------


def unit_points(d: WorldDecode, unit: str, drafts: dict, spec: dict, n_codebooks: int,
                n_bootstrap: int, seed: int) -> tuple[list[str], list[dict]]:
    """A world and unit's points: the ladder's bits on the first codebook, the K
    ``choose_K`` picks from them, each K over ``n_codebooks`` codebooks, and the
    fine IDs (one codebook: the identity). Returns (labels, points), ascending K."""
    anchors, tokens = anchors_of(d, unit), d.tokens
    seeds = codebook_seeds(seed, n_codebooks)
    kf = fine_K(d.models)
    fine = ladder_ids(d, kf, codebook_seeds(seed, 1))
    ladder = {K: ladder_ids(d, K, seeds[:1]) for K in spec["ladder"] if K < kf}
    bits = {K: id_bits(s[0], tokens, anchors) for K, s in ladder.items()}
    Ks = choose_K(bits, id_bits(fine[0], tokens, anchors),
                  spec["ceiling_tolerance_bits"], spec["n_k"])
    labels, points = [], []
    for K in Ks:
        sids = ladder[K] + ladder_ids(d, K, seeds[1:])
        points.append({"K": K} | point(drafts, sids, tokens, anchors, n_bootstrap,
                                       seed))
        labels.append(f"k{K}")
    points.append({"K": kf} | point(drafts, fine, tokens, anchors, n_bootstrap, seed))
    labels.append(FINE)
    return labels, points


def unit_values(d: WorldDecode, labels: list[str], points: list[dict],
                trials: np.ndarray, n_bootstrap: int, seed: int,
                tol: float) -> dict:
    """Per point its figures and the margin's interval; the crossing with its
    interval; the end-point line's test of fit. Keys without a prefix. ``tol``:
    the grid's ``ceiling_tolerance_bits`` (a k-means K within it of the fine
    IDs' bits tells as much as they do)."""
    G = d.tokens.shape[1]
    tau, tau_lo, tau_hi = d.tau
    star, star_lo, star_hi = 1 - 1 / tau, 1 - 1 / tau_lo, 1 - 1 / tau_hi
    draws = margin_draws(points, trials, d.nfe, G, n_bootstrap, seed)  # (R, n)
    margins = np.array([star - p["alpha"] for p in points])
    bits = np.array([p["bits"] for p in points])
    out: dict = {}
    for lab, p, col in zip(labels, points, draws.T, strict=True):
        m_lo, m_hi = np.percentile(col, [2.5, 97.5])
        out |= {f"{lab}_{k}": p[k] for k in ("K", "bits", "bits_lo", "bits_hi",
                                             "alpha", "alpha_lo", "alpha_hi",
                                             "info_draft", "draft")}
        out |= {f"{lab}_alpha_star": star, f"{lab}_alpha_star_lo": star_lo,
                f"{lab}_alpha_star_hi": star_hi, f"{lab}_margin": star - p["alpha"],
                f"{lab}_margin_lo": float(m_lo), f"{lab}_margin_hi": float(m_hi),
                f"{lab}_neglog_alpha": (-math.log2(p["alpha"]) if p["alpha"] > 0
                                        else math.inf)}
    order = np.argsort(bits, kind="stable")
    est = float(first_crossing(bits[order], margins[order]))
    xs = first_crossing(bits[order], draws[:, order])
    lo, hi = np.percentile(xs, [2.5, 97.5], method="nearest")
    out |= {"cross": est if np.isfinite(est) else math.nan,
            "cross_lo": float(lo), "cross_hi": float(hi),
            "cross_share": float(np.isfinite(xs).mean()),
            "cross_changes": sign_changes(margins[order]),
            "bits_min": float(bits.min()), "bits_max": float(bits.max()),
            "k_values": ", ".join(str(p["K"]) for p in points[:-1]),
            # the coarsest K whose IDs tell as much as the fine IDs (within tol)
            "k_as_fine": next((p["K"] for p in points[:-1]
                               if p["bits"] >= points[-1]["bits"] - tol), math.nan)}
    out["cross_said"] = crossing_words(out, est)
    return out | end_line_test(bits, margins, draws, (0, len(points) - 1))


def crossing_words(v: dict, est: float) -> str:
    """The crossing of a world and unit in words, its interval with it."""
    words = (interval_words(v["cross_lo"], v["cross_hi"])
             if np.isfinite(v["cross_lo"]) or np.isfinite(v["cross_hi"])
             else "95 % interval open at both ends: the draws cross anywhere or not "
                  "at all")
    if np.isfinite(est):
        said = f"crossed at {est:.2f} bits ({words}"
    else:
        said = (f"not crossed up to {v['bits_max']:.2f} bits" if est > 0 else
                f"below its bar already at {v['bits_min']:.2f} bits")
        if v["cross_lo"] == v["cross_hi"] == est:  # the draws agree past 2.5 %
            words = (f"no crossing in {1 - v['cross_share']:.0%} of the bootstrap "
                     "draws either")
        said += f" ({words}"
    if v["cross_changes"] > 1:
        said += f"; the measured margin changes sign {v['cross_changes']} times"
    return said + ")"


def measure_grid(decodes: dict[str, WorldDecode], spec: dict, n_codebooks: int,
                 n_train: int, n_bootstrap: int, seed: int) -> Measurement:
    """The grid (``checks: regime: grid``) on each world's shared decode. Values
    ``grid_<world>_<unit>_<key>`` (``unit_values``; per point ``<k32|fine>_...``)
    and ``grid_seconds_<part>``; table ``grid`` (a row per point)."""
    import time

    # every part's seconds recorded, 0 where no world ran (the page reads them)
    times: dict[str, float] = {"features": 0.0, "token head fits": 0.0, "points": 0.0}
    v: dict = {}
    rows = []
    for name in spec["worlds"]:
        if name not in decodes:  # its setting was not measured
            continue
        d = decodes[name]
        drafts = token_drafts(d, n_train, codebook_seeds(seed, 1)[0], times)
        for unit in spec["units"]:
            t = time.process_time()
            labels, points = unit_points(d, unit, drafts[unit], spec, n_codebooks,
                                         n_bootstrap, seed)
            trials = anchors_of(d, unit).sum(1).numpy()
            u = unit_values(d, labels, points, trials, n_bootstrap, seed,
                            spec["ceiling_tolerance_bits"])
            v |= {f"grid_{name}_{unit}_{k}": x for k, x in u.items()}
            rows += [dict(world=name, unit=unit, ids=lab,
                          **{k: u[f"{lab}_{k}"] for k in POINT_KEYS}) for lab in labels]
            times["points"] = times.get("points", 0.0) + time.process_time() - t
    v |= {f"grid_seconds_{k.replace(' ', '_')}": x for k, x in times.items()}
    v["grid_seconds_total"] = sum(times.values())
    measured = [n for n in spec["worlds"] if n in decodes]
    v["grid_reading"] = grid_reading(v, measured, spec["units"],
                                     spec["fit_test_level"],
                                     spec["ceiling_tolerance_bits"])
    return Measurement(v, {"grid": pd.DataFrame(rows)}, {})


def _status(v: dict, pre: str) -> str:
    """A world and unit's crossing, in one word: crossed, never or already."""
    if np.isfinite(v[f"{pre}_cross"]):
        return "crossed"
    return "never" if v[f"{pre}_cross_said"].startswith("not crossed") else "already"


def grid_reading(v: dict, worlds: list[str], units, level: float,
                 tol: float) -> str:
    """What the grid says, counted from its values (keys without ``r_``): in how
    many worlds the anchor unit changes where (or whether) the margin turns
    (one unit crossing where the other does not, or two crossings whose
    intervals do not overlap), and in how many world-unit pairs the end-point
    line is rejected by its test at ``level`` (the grid's ``fit_test_level``);
    ``tol`` is its ``ceiling_tolerance_bits``."""
    if not worlds:
        return "No world of the grid is measured in this build."
    differ = []
    for w in worlds:
        a, b = (f"grid_{w}_{u}" for u in units)
        s_a, s_b = _status(v, a), _status(v, b)
        apart = (s_a == s_b == "crossed"
                 and (v[f"{a}_cross_hi"] < v[f"{b}_cross_lo"]
                      or v[f"{b}_cross_hi"] < v[f"{a}_cross_lo"]))
        if s_a != s_b or apart:
            differ.append(w)
    pairs = [(w, u) for w in worlds for u in units]
    as_fine = [v[f"grid_{w}_{u}_k_as_fine"] for w, u in pairs]
    reached = [k for k in as_fine if np.isfinite(k)]
    ceiling = (f" The k-means IDs tell as much as the fine IDs (within {tol:g} bits) "
               f"from K = {min(reached):.0f} to {max(reached):.0f} in {len(reached)} "
               f"of {len(pairs)} world-unit pairs: beyond that the IDs tell no more"
               if reached else " No k-means K tells as much as the fine IDs")
    bent = [f"{w} ({u})" for w, u in pairs if v[f"grid_{w}_{u}_line_p"] < level]
    tested = sum(np.isfinite(v[f"grid_{w}_{u}_line_p"]) for w, u in pairs)
    return (f"The anchor unit changes where or whether the margin turns in "
            f"{len(differ)} of {len(worlds)} measured worlds"
            f"{' (' + ', '.join(differ) + ')' if differ else ''}; a line through the "
            f"end points is rejected by its test (p < {level:g}) in {len(bent)} of "
            f"{tested} world-unit pairs{' (' + ', '.join(bent) + ')' if bent else ''}."
            + ceiling + ".")


POINT_KEYS = ("K", "bits", "bits_lo", "bits_hi", "alpha", "alpha_lo", "alpha_hi",
              "alpha_star", "alpha_star_lo", "alpha_star_hi", "margin", "margin_lo",
              "margin_hi", "info_draft", "neglog_alpha", "draft")


# --- the page's figure and table -----------------------------------------------------


UNIT_STYLE = {"word": ("C0", "o", "word anchors (a content word's first piece)"),
              "piece": ("C3", "s", "piece anchors (every content piece)")}


def draw_grid(grid: pd.DataFrame, v: dict, paper_margin: float):
    """Margin alpha* - alpha_SID against bits per ID: a panel per world, a line
    per unit through its points (k-means K hollow, fine filled), 95 % intervals
    of both from the question bootstrap, each finite crossing marked; the paper's
    margin (its alpha* from Fast-dLLM's tokens per step, minus its alpha_SID) a
    dotted line, or an arrow where it lies above the panels, since the paper
    gives no bits per ID. None when empty."""
    import matplotlib.pyplot as plt

    if grid is None or not len(grid):
        return None
    worlds = list(dict.fromkeys(grid["world"]))
    fig, axes = plt.subplots(1, len(worlds), figsize=(3.4 * len(worlds), 3.9),
                             sharey=True, squeeze=False, layout="constrained")
    for ax, world in zip(axes[0], worlds, strict=True):
        for unit, (colour, marker, label) in UNIT_STYLE.items():
            g = grid[(grid.world == world) & (grid.unit == unit)].sort_values("bits")
            if not len(g):
                continue
            x, y = g["bits"].astype(float), g["margin"].astype(float)
            err = np.clip(np.vstack([y - g["margin_lo"].astype(float),
                                     g["margin_hi"].astype(float) - y]), 0, None)
            xerr = np.clip(np.vstack([x - g["bits_lo"].astype(float),
                                      g["bits_hi"].astype(float) - x]), 0, None)
            ax.plot(x, y, color=colour, lw=1, label=label)
            ax.errorbar(x, y, yerr=err, xerr=np.nan_to_num(xerr), fmt=marker,
                        color=colour, capsize=2, mfc="white", ms=5)
            fine = g[g["ids"] == FINE]
            ax.plot(fine["bits"], fine["margin"], marker, color=colour, ms=6)
            at = v.get(f"r_grid_{world}_{unit}_cross", math.nan)
            if np.isfinite(at):
                ax.axvline(at, color=colour, lw=0.8, ls=":")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_title(f"{world} world", fontsize=9)
        ax.set_xlabel("bits per anchor ID (entropy of the target's IDs)", fontsize=8)
    axes[0, 0].set_ylabel("margin alpha* - alpha_SID (> 0: below the bar)", fontsize=8)
    low, high = axes[0, 0].get_ylim()
    for ax in axes[0]:  # the paper's margin: a line where it fits, else an arrow
        if paper_margin <= high:
            ax.axhline(paper_margin, color="k", lw=0.8, ls=":")
    if paper_margin > high:
        axes[0, 0].annotate(
            f"paper's margin {paper_margin:.3f}, far above (no bits per ID given)",
            xy=(0.5, 1.0), xycoords="axes fraction", xytext=(0.5, 0.88),
            textcoords="axes fraction", fontsize=7, va="top", ha="center",
            arrowprops=dict(arrowstyle="->", lw=0.8))
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="outside lower center", ncols=2)
    plt.close(fig)
    return fig


def draw_grid_c8(grid: pd.DataFrame, v: dict):
    """C8 over the grid: -log2 alpha_SID against the bits the draft lacks, a
    colour per unit, with y = x and the fitted line (``r_grid_c8_*``)."""
    import matplotlib.pyplot as plt

    if grid is None or not len(grid):
        return None
    g = grid[np.isfinite(grid["neglog_alpha"].astype(float))]
    fig, ax = plt.subplots(figsize=(5.0, 3.8), constrained_layout=True)
    for unit, (colour, marker, label) in UNIT_STYLE.items():
        u = g[g.unit == unit]
        ax.plot(u["info_draft"], u["neglog_alpha"], marker, color=colour, mfc="white",
                label=label)
    top = float(max(g["info_draft"].max(), g["neglog_alpha"].max())) * 1.1
    ax.plot([0, top], [0, top], color="grey", lw=0.8, ls=":", label="y = x")
    if np.isfinite(v.get("r_grid_c8_slope", math.nan)):
        xs = np.array([0, top])
        ax.plot(xs, v["r_grid_c8_intercept"] + v["r_grid_c8_slope"] * xs, color="C1",
                lw=1, label=f"fit: slope {v['r_grid_c8_slope']:.2f}, "
                            f"R^2 {v['r_grid_c8_r2']:.2f}")
    ax.set_xlabel("bits the draft lacks about an anchor's ID", fontsize=9)
    ax.set_ylabel("-log2 alpha_SID", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    plt.close(fig)
    return fig


def shown_grid(grid: pd.DataFrame) -> pd.DataFrame:
    """The grid as the page shows it: a row per point, each figure with its
    95 % interval in one cell (``stats.with_interval``)."""
    rows = []
    for r in grid.itertuples():
        rows.append({"world": r.world, "unit": r.unit,
                     "IDs": f"k-means K = {r.K}" if r.ids != FINE else f"fine ({r.K})",
                     "bits per ID": stats.with_interval(r.bits, r.bits_lo,
                                                        r.bits_hi),
                     "alpha_SID": stats.with_interval(r.alpha, r.alpha_lo, r.alpha_hi),
                     "alpha*": stats.with_interval(r.alpha_star, r.alpha_star_lo,
                                                   r.alpha_star_hi),
                     "margin alpha* - alpha_SID": stats.with_interval(
                         r.margin, r.margin_lo, r.margin_hi),
                     "bits the draft lacks": f"{r.info_draft:.2f}",
                     "draft": r.draft})
    return pd.DataFrame(rows).set_index(["world", "unit", "IDs"])


# --- the page's sentences, for every world the grid names ---------------------------


NOT_RUN = ("not measured in this build (its setting did not run), so the grid has "
           "no points here")


def _p_words(p: float) -> str:
    return f"p = {p:.2g}" if np.isfinite(p) else "no test (the bits do not move)"


def prose_values(v: dict, spec: dict) -> dict:
    """The regime page's grid sentences from its values ``v`` (``r_``-prefixed,
    as ``regime.measure`` records them) and the grid's dials ``spec``
    (``checks: regime: grid``), each defined whether or not a world's grid ran:
    ``r_grid_<world>_said`` per world, ``r_grid_k_said`` (the K of the first
    measured world), ``r_grid_k32_said`` (C3's per-K head beside the token head
    at K = 32 with word anchors, in that world), and the dials the prose names
    (``r_grid_fit_test_level``, ``r_grid_ceiling_tol``)."""
    out = {"r_grid_fit_test_level": spec["fit_test_level"],
           "r_grid_ceiling_tol": spec["ceiling_tolerance_bits"]}
    measured = [w for w in spec["worlds"]
                if all(f"r_grid_{w}_{u}_cross_said" in v for u in spec["units"])]
    for w in spec["worlds"]:
        if w not in measured:
            out[f"r_grid_{w}_said"] = NOT_RUN
            continue
        crossing = "; ".join(f"with {u} anchors the margin is "
                             f"{v[f'r_grid_{w}_{u}_cross_said']}"
                             for u in spec["units"])
        lines = ", ".join(f"{u} {_p_words(v[f'r_grid_{w}_{u}_line_p'])}"
                          for u in spec["units"])
        out[f"r_grid_{w}_said"] = f"{crossing}. End-point line: {lines}"
    if not measured:
        out["r_grid_k_said"] = "no world's grid is measured in this build"
        out["r_grid_k32_said"] = "no world's grid is measured in this build"
        return out
    w = measured[0]
    out["r_grid_k_said"] = " and ".join(
        f"{v[f'r_grid_{w}_{u}_k_values']} ({w}, {u} anchors)" for u in spec["units"])
    per_k, grid_k32 = v.get(f"r_{w}_alpha"), v.get(f"r_grid_{w}_word_k32_alpha")
    out["r_grid_k32_said"] = (
        f"{w} {per_k:.3f} (per-K head, settings table) against {grid_k32:.3f} "
        "(token head summed, grid)"
        if isinstance(per_k, float) and np.isfinite(per_k)
        and isinstance(grid_k32, float) else
        f"in {w}, the settings table has no per-K head's alpha_SID to compare")
    return out
