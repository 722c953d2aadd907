"""The regime as a measured axis (notebook 11; issue 42, item 4; DERIVED).

The paper measures its claims at one regime, Fast-dLLM on GSM8K (about 3.3
tokens per forward). How far its verdicts depend on that regime is a question
the paper cannot ask; this page asks it. Each *setting* is a math world of
``dlmspec_min.catalogue`` (a grammar with a given freedom in its solutions,
``problems.Dials``: operand order, the content freedom; openers, a glue
freedom; chained steps), with its own draft and target trained on that world
with the ladder's recipe, and the semantic IDs its verdicts use. The settings
are written in ``book/claims.yml`` (``checks: regime: settings``) before this
page measured any of them.

Per setting, on the world's own held-out questions and decode (the catalogue's:
greedy, threshold 0.9, blocks of 32):

- **the freedom**: the mean surprisal, in bits, of a solution's free choices
  given its question (``Problem.glue_bits`` and ``content_bits``), over the
  held-out problems the page decodes;
- **C3** (``c3_win_condition.measure``): the threshold rule's slots per forward,
  ``tau_acc`` (the strongest accelerator), ``alpha* = 1 - 1/tau_acc``,
  ``alpha_SID`` of the best draft with its 95 % interval, the shortfall
  ``alpha*/alpha`` and C3's verdict by its rule;
- **C4** (``c4_cluster_verification.measure``): the cluster gain
  ``alpha_clu / alpha_tok`` with its interval and C4's verdict by its rule;
- **trajectory speculation**: its forwards against the threshold rule's on the
  same prompts (``t_speedup_vs_threshold`` of notebook 09, here from C3's
  accelerator decodes), a paired ratio bootstrap over prompts, beside the
  trajectory paper's 2.6 -> 4.3 tokens per step (1.65x);
- **C8 along the axis** (``information_bits``): the bits the best draft's
  one-shot view lacks about each anchor's ID beside -log2 alpha_SID (the line
  across them, ``c8_fit``, is fitted over the grid's points);
- **bits to rounds** (``rounds_fit``): the threshold rule's forwards per
  question against each world's bits of free choice.

A setting whose draft or target is not trained is a row that says so, its
figures NaN; nothing is dropped. The page's figures are drawn in
``regime_figures.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .. import catalogue
from ..decoding import files
from ..decoding.denoisers import ModelNotAvailableError
from ..measures import power, stats
from ..training import train_math
from ..worlds import get_world
from ..worlds.gsm import MathWorld
from . import c3_win_condition as c3m
from . import c4_cluster_verification as c4m
from . import crossing_grid, parameters
from .common import Measurement, load_models
from .crossing_grid import fine_K, interval_words  # noqa: F401 (the page reads them here)
from .parameters import param, shared

THRESHOLD, TRAJ = "Fast-dLLM threshold", "trajectory speculation (exact)"
# the base policy whose tokens trajectory speculation keeps
DUAL = "Fast-dLLM threshold + dual cache"
# per setting: glue name suffix -> the column of the page's table
COLUMNS = {
    "glue_bits": "glue bits", "content_bits": "content bits",
    "threshold_tpf": "threshold slots/forward",
    "threshold_tpf_lo": "low", "threshold_tpf_hi": "high",
    "tau_acc": "tau_acc", "tau_acc_lo": "tau_acc low", "tau_acc_hi": "tau_acc high",
    "strongest": "strongest accelerator",
    "alpha_star": "alpha*", "alpha": "alpha_SID", "alpha_lo": "alpha_SID low",
    "alpha_hi": "alpha_SID high", "shortfall": "alpha*/alpha",
    "margin": "alpha* - alpha_SID high",
    "c4_ratio": "cluster gain", "c4_ratio_lo": "cluster gain low",
    "c4_ratio_hi": "cluster gain high",
    "traj_gain": "trajectory gain", "traj_gain_lo": "trajectory gain low",
    "traj_gain_hi": "trajectory gain high",
    "traj_exact": "trajectory = base policy (share)",
    "c3_verdict": "C3 verdict", "c4_verdict": "C4 verdict",
    "id_bits": "bits per anchor ID", "majority_chance": "majority-ID chance",
    "n_ids": "IDs (K)", "decide_n": "questions to decide C3",
    "copy_acc": "target: copy", "answer_acc": "target: answers",
    "arith_acc": "target: arithmetic", "ended_share": "target: ended",
    "competent": "target competent",
    "info_draft": "bits the draft lacks", "info_draft_lo": "bits the draft lacks low",
    "info_draft_hi": "bits the draft lacks high",
    "info_target": "bits the target's one-shot view lacks",
    "neglog_alpha": "-log2 alpha_SID",
    "threshold_nfe": "threshold forwards per question",
}
# The semantic IDs a setting's verdicts use (book/claims.yml, checks: regime):
# ``kmeans``, C2's (K k-means clusters, the page's K; one anchor per content
# word at its first piece); ``fine`` (2026-12-06), every non-special token its
# own ID and every content piece an anchor, so a number is accepted only by its
# whole value, digit by digit.
INSTRUMENTS = {"kmeans": "word", "fine": "piece"}  # ids -> anchor unit
COMPETENCE = ("copy_acc", "answer_acc", "arith_acc", "ended_share")
SHARED = "_shared_decode"  # measure_setting's key for the decode the grid shares
INCONCLUSIVE = "inconclusive"  # the verdict's name (plumbing.claims, tested equal)
def setting_world(name: str, setting: dict) -> MathWorld:
    """A setting -> its math world (``setting["world"]``, a math world of
    ``dlmspec_min.catalogue``): its grammar, row layout, decode, draft and
    target. Any of them is also a world every claim page runs in
    (``-p world NAME``)."""
    unknown = set(setting) - {"world", "ids"}
    if "world" not in setting or unknown:
        raise ValueError(f"setting {name!r} must name its world (and may name its "
                         f"ids), got {sorted(setting)}")
    if setting["world"] not in train_math.LADDERS:
        raise ValueError(f"setting {name!r}: world {setting['world']!r} is not a "
                         f"math world of the catalogue ({list(train_math.LADDERS)})")
    return get_world(setting["world"])


def instrument(name: str, setting: dict) -> str:
    """The semantic IDs of a setting's verdicts (``INSTRUMENTS``; default kmeans)."""
    ids = setting.get("ids", "kmeans")
    if ids not in INSTRUMENTS:
        raise ValueError(f"setting {name!r}: ids must be one of {sorted(INSTRUMENTS)}, "
                         f"got {ids!r}")
    return ids


def id_information(anchor_ids: list) -> tuple[float, float]:
    """(bits, majority chance) of the IDs the target wrote at the anchors: the
    entropy of their frequencies and the share of the most frequent one, each
    the mean over codebooks."""
    bits, major = [], []
    for ids in anchor_ids:
        _, counts = np.unique(np.asarray(ids), return_counts=True)
        if not counts.sum():  # no anchor: an ID tells nothing measurable
            return math.nan, math.nan
        p = counts / counts.sum()
        bits.append(float(-(p * np.log2(p)).sum()))
        major.append(float(p.max()))
    return float(np.mean(bits)), float(np.mean(major))


def information_bits(tables: list, n_bootstrap: int, seed: int) -> dict[str, float]:
    """C8 along the axis: the bits a one-shot view leaves open about an anchor's
    ID, from ``c3_win_condition.measure(information=True)``'s per-codebook
    tables (``information.anchor_table``: ``sid_info_draft``, -ln q_draft(s),
    the best draft's; ``sid_info_verify``, -ln q(s) under the target's own
    all-masked pass; s the ID the target wrote). Each is the mean over anchors
    in bits, averaged over codebooks; the draft's has a 95 % interval from a
    bootstrap over sequences (the same resampled sequences in every codebook)."""
    if not tables or not all(len(t) for t in tables):
        return {"info_draft": math.nan, "info_draft_lo": math.nan,
                "info_draft_hi": math.nan, "info_target": math.nan}
    seqs = np.unique(np.concatenate([t["seq"].to_numpy() for t in tables]))
    at = {s: i for i, s in enumerate(seqs)}

    def per_seq(t, col):  # (B,) sums of bits and (B,) anchor counts per sequence
        i = np.array([at[s] for s in t["seq"]])
        # a probability that underflowed to 0: its bits capped, as information._nats
        bits = np.minimum(t[col].to_numpy(), -math.log(1e-300)) / math.log(2)
        return (np.bincount(i, bits, len(seqs)),
                np.bincount(i, minlength=len(seqs)).astype(float))

    draft = [per_seq(t, "sid_info_draft") for t in tables]
    target = [per_seq(t, "sid_info_verify") for t in tables]

    def mean_of(parts, idx=slice(None)):
        return float(np.mean([s[idx].sum() / n[idx].sum() for s, n in parts]))

    rng = np.random.default_rng(seed)
    boots = [mean_of(draft, rng.integers(0, len(seqs), len(seqs)))
             for _ in range(n_bootstrap)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"info_draft": mean_of(draft), "info_draft_lo": float(lo),
            "info_draft_hi": float(hi), "info_target": mean_of(target)}


def c8_fit(v: dict[str, Any], names) -> dict[str, Any]:
    """C8 as a prediction along the axis (issue 46, item 4; DERIVED): the paper
    explains the failure by the information the draft lacks, so -log2 alpha_SID
    should track the bits the draft lacks. Over the measured ``names``: an
    ordinary least-squares line of -log2 alpha_SID on those bits (statsmodels,
    slope with its 95 % interval), its R^2, and the setting farthest from it.
    A perfect match is the line y = x. For a calibrated draft that guesses its
    most probable ID, alpha >= E[q(s)] and Jensen's inequality put -log2 alpha
    at or below the mean bits; a point above the line is a draft more confident
    than it is right. The slope's interval is OLS's: it ignores the error of
    each point's bits and that a world's two settings share models and
    questions. A setting whose alpha_SID is 0 has no finite -log2 alpha: it is
    left out of the fit and named in the note."""
    import statsmodels.api as sm

    rows = [(n, v[f"r_{n}_info_draft"], v[f"r_{n}_neglog_alpha"]) for n in names
            if np.isfinite(v.get(f"r_{n}_info_draft", math.nan))
            and np.isfinite(v.get(f"r_{n}_neglog_alpha", math.nan))
            and v[f"r_{n}_info_draft"] > 0]
    zero = [n for n in names if v.get(f"r_{n}_neglog_alpha") == math.inf]
    left_out = (f"; left out, alpha_SID 0 (no finite -log2 alpha): {', '.join(zero)}"
                if zero else "")
    out = {"c8_n": len(rows)}
    if len(rows) < 3:
        return out | {k: math.nan for k in ("c8_slope", "c8_slope_lo", "c8_slope_hi",
                                            "c8_intercept", "c8_r2",
                                            "c8_worst_residual", "c8_ratio_min",
                                            "c8_ratio_max")} | {
            "c8_worst": "none",
            "c8_note": "fewer than three settings with finite bits and -log2 "
                       "alpha_SID: no fit" + left_out}
    x = np.array([r[1] for r in rows])
    y = np.array([r[2] for r in rows])
    fit = sm.OLS(y, sm.add_constant(x)).fit()
    lo, hi = fit.conf_int(0.05)[1]
    resid = y - fit.predict(sm.add_constant(x))
    worst = int(np.argmax(np.abs(resid)))
    ratio = y / x
    out |= {"c8_slope": float(fit.params[1]), "c8_slope_lo": float(lo),
            "c8_slope_hi": float(hi), "c8_intercept": float(fit.params[0]),
            "c8_r2": float(fit.rsquared), "c8_worst": rows[worst][0],
            "c8_worst_residual": float(resid[worst]),
            "c8_ratio_min": float(ratio.min()), "c8_ratio_max": float(ratio.max())}
    out["c8_note"] = (
        f"over {len(rows)} settings, -log2 alpha_SID = {fit.params[0]:.2f} + "
        f"{fit.params[1]:.2f} [{lo:.2f}, {hi:.2f}] x (bits the draft lacks), "
        f"R^2 {fit.rsquared:.2f}; -log2 alpha_SID is {ratio.min():.2f} to "
        f"{ratio.max():.2f} times the bits; the largest residual is "
        f"{rows[worst][0]}'s, {resid[worst]:+.2f} bits off the fitted line; the "
        f"slope's interval is "
        f"OLS's, which ignores the points' own errors and the models a world's "
        f"settings share{left_out}")
    return out


def rounds_fit(v: dict[str, Any], names) -> dict[str, Any]:
    """Beside "From Bits to Rounds" (arXiv 2511.21103: a diffusion LM's decoding
    rounds grow linearly with the answer's negative log-likelihood; DERIVED):
    the threshold rule's forwards per question against the bits of free choice
    in a solution (glue + content bits, exact from the grammar, not a model's
    likelihood), an OLS line over the measured ``names`` (one setting per
    world: the decodes of a world's settings are the same)."""
    import statsmodels.api as sm

    rows = [(n, v[f"r_{n}_glue_bits"] + v[f"r_{n}_content_bits"],
             v[f"r_{n}_threshold_nfe"]) for n in names
            if np.isfinite(v.get(f"r_{n}_threshold_nfe", math.nan))]
    if len(rows) < 3:
        return {"rounds_n": len(rows), "rounds_slope": math.nan,
                "rounds_intercept": math.nan, "rounds_r2": math.nan}
    x = np.array([r[1] for r in rows])
    fit = sm.OLS(np.array([r[2] for r in rows]), sm.add_constant(x)).fit()
    return {"rounds_n": len(rows), "rounds_slope": float(fit.params[1]),
            "rounds_intercept": float(fit.params[0]), "rounds_r2": float(fit.rsquared)}


def competence(target: str, bars: dict[str, float]) -> dict[str, Any]:
    """The target's last evaluation in its ``training.json`` (copy, answers,
    arithmetic, ended on held-out questions) and whether it clears ``bars``
    (figure -> least value); NaN and "not trained" where it has none."""
    path = files.models_dir() / target.removeprefix("dlmspec/") / "training.json"
    if not path.exists():
        return {**{k: math.nan for k in COMPETENCE}, "competent": "not trained"}
    final = json.loads(path.read_text())["final"]
    out = {k: float(final.get(k, math.nan)) for k in COMPETENCE}
    short = [f"{k} {out[k]:.2f} < {b}" for k, b in bars.items() if not out[k] >= b]
    out["competent"] = "yes" if not short else "no: " + ", ".join(short)
    return out


def freedom_bits(world: MathWorld, n: int, seed: int = 0) -> tuple[float, float]:
    """Mean glue and content bits of the ``seed``-th ``n`` held-out problems."""
    batch = world._held_out_problems(n, seed)
    return (float(np.mean([p.glue_bits for p in batch])),
            float(np.mean([p.content_bits for p in batch])))


def traj_gain(c3: Measurement, n_bootstrap: int, seed: int) -> tuple[float, ...]:
    """Forwards of the threshold rule over trajectory speculation's, on C3's
    accelerator decodes of the same prompts (paired ratio bootstrap)."""
    nfe = c3.arrays["nfe_by_accelerator"]
    if THRESHOLD not in nfe or TRAJ not in nfe:
        return (math.nan,) * 3
    return stats.ratio_bootstrap(nfe[THRESHOLD].double().numpy(),
                                 nfe[TRAJ].double().numpy(), n_bootstrap, seed)


def traj_exact(c3: Measurement) -> float:
    """The share of prompts whose trajectory-speculation decode is, token for
    token, its base policy's (the dual-cache threshold decode)."""
    gen = c3.arrays["generated_by_accelerator"]
    if DUAL not in gen or TRAJ not in gen:
        return math.nan
    return float((gen[DUAL] == gen[TRAJ]).all(dim=1).double().mean())


def measure_setting(models, world: MathWorld, config: Config, *, n_codebooks: int,
                    verdict: Callable[[str, dict], str],
                    ids: str = "kmeans") -> dict[str, Any]:
    """One setting's figures (``COLUMNS``' keys but competence), measured by C3's
    and C4's own code at the world's decode and ``config``'s sizes, pooling
    ``n_codebooks`` codebooks, with the semantic IDs ``ids`` (``INSTRUMENTS``).
    C4 compares cluster with token verification, which fine IDs (every token
    its own cluster) make one and the same: it is not measured there."""
    n_samples, K, n_train = config.n_samples, config.K, config.n_train
    n_permutations, n_bootstrap = config.n_permutations, config.n_bootstrap
    seed, device = config.seed, config.device
    if ids not in INSTRUMENTS:
        raise ValueError(f"ids must be one of {sorted(INSTRUMENTS)}, got {ids!r}")
    d = world.decode
    decode = dict(gen_length=d["gen_length"], block_length=d["block_length"],
                  threshold=d["threshold"], temperature=0.0)
    prompt = world.prompts(models.tokenizer, n_samples, seed=seed, device=device)
    k_ids = fine_K(models) if ids == "fine" else K
    run = dict(world=world.name, model=world.target, draft=world.draft,
               n_samples=n_samples, **decode, n_bootstrap=n_bootstrap, seed=seed)
    c3 = c3m.measure(models, world, c3m.Config(
        **run, K=k_ids, levels=1, n_train=n_train, n_repeats=1, n_timed=1,
        n_codebooks=n_codebooks, prompt_source=catalogue.get(world.name).prompt_source,
        prompt_length=world.prompt_length),
        prompt=prompt, anchor_unit=INSTRUMENTS[ids], information=True)
    v3 = c3.values
    if ids == "fine":
        v4 = {"c4_ratio": math.nan, "c4_ratio_lo": math.nan, "c4_ratio_hi": math.nan}
        c4_verdict = "not measured: fine IDs are tokens"
    else:
        c4 = c4m.measure(models, world, c4m.Config(
            **run, K=K, K_sweep=[], n_permutations=n_permutations, device=device))
        v4 = {**c4.values, **c4.rule_values}
        c4_verdict = verdict("C4", v4)
    id_bits, majority = id_information(c3.arrays["anchor_ids"])
    # the questions at which C3's two intervals are expected to separate
    # (book/claims.yml: checks: regime, sizes; power.size_to_separate at 0.8)
    star = (v3["c3_alpha_star"], 1 - 1 / v3["c3_tau_acc_lo"],
            1 - 1 / v3["c3_tau_acc_hi"])
    alpha = (v3["c3_alpha"], v3["c3_alpha_lo"], v3["c3_alpha_hi"])
    c3_verdict = verdict("C3", v3)
    shares = power.shares(v3["c3_alpha_questions_share"], v3["c3_alpha_spread"],
                          v3["c3_n_codebooks"])  # claims.yml: power: shares
    decide = math.nan  # decided already, or no size decides (estimates coincide)
    if c3_verdict == INCONCLUSIVE:
        n = power.size_to_separate(alpha, star, n_samples, shares_a=shares)
        apart = power.size_to_separate(alpha, star, n_samples) is not None
        # inf: the estimates differ, but no number of questions at these codebooks
        decide = float(n) if n is not None else math.inf if apart else math.nan
    acc = c3.tables["accelerators"]
    glue_bits, content_bits = freedom_bits(world, n_samples, seed)
    gain = traj_gain(c3, n_bootstrap, seed)
    return {
        "glue_bits": glue_bits, "content_bits": content_bits,
        "threshold_tpf": float(acc.loc[THRESHOLD, "tokens_per_nfe"]),
        "threshold_tpf_lo": float(acc.loc[THRESHOLD, "low"]),
        "threshold_tpf_hi": float(acc.loc[THRESHOLD, "high"]),
        "threshold_nfe": float(c3.arrays["nfe_by_accelerator"][THRESHOLD]
                               .double().mean()),
        "tau_acc": v3["c3_tau_acc"], "tau_acc_lo": v3["c3_tau_acc_lo"],
        "tau_acc_hi": v3["c3_tau_acc_hi"], "strongest": v3["c3_strongest"],
        "alpha_star": v3["c3_alpha_star"], "alpha": v3["c3_alpha"],
        "alpha_lo": v3["c3_alpha_lo"], "alpha_hi": v3["c3_alpha_hi"],
        "shortfall": v3["c3_shortfall"],
        "margin": v3["c3_alpha_star"] - v3["c3_alpha_hi"],
        "c4_ratio": v4["c4_ratio"], "c4_ratio_lo": v4["c4_ratio_lo"],
        "c4_ratio_hi": v4["c4_ratio_hi"],
        "traj_gain": gain[0], "traj_gain_lo": gain[1], "traj_gain_hi": gain[2],
        "traj_exact": traj_exact(c3),
        "c3_verdict": c3_verdict,
        "c4_verdict": c4_verdict,
        "id_bits": id_bits, "majority_chance": majority, "n_ids": k_ids,
        "decide_n": decide,
        **information_bits(c3.arrays["anchor_information"], n_bootstrap, seed),
        "neglog_alpha": (math.nan if not np.isfinite(v3["c3_alpha"])
                         else -math.log2(v3["c3_alpha"]) if v3["c3_alpha"] > 0
                         else math.inf),
        # for the crossing grid, which shares the world's decodes (popped by measure)
        SHARED: crossing_grid.world_decode("", world, models, prompt, c3),
    }


def _missing(world: MathWorld, device, dtype) -> tuple[Any, str | None]:
    """(models, None), or (None, why) where a setting's model is not trained."""
    try:
        return load_models(world.target, world.draft, device=device,
                           dtype=dtype), None
    except ModelNotAvailableError as e:  # the model's name, not this machine's path
        name = re.search(r"embedded model '([^']+)' is not in ", str(e))
        return None, (f"{name.group(1)} is not trained" if name
                      else str(e).split(";")[0])


@dataclass(frozen=True)
class Config(parameters.Measured):
    NOTEBOOK: ClassVar[str] = "11_regime"

    n_samples: int = shared("n_samples", 24,
                            "held-out questions each setting decodes (C3 and C4)")
    K: int = shared("K", catalogue.get("math").K, "the math world's")
    n_codebooks: int = shared("n_codebooks")
    n_codebooks_fine: int = param(1,
        "codebooks of a fine-ID setting (the same IDs in each; only the head's "
        "training windows differ)")
    n_train: int = shared("n_train", note="per setting's world")
    n_permutations: int = shared("n_permutations", 2000, "C4's test")


def measure(settings: dict[str, dict], verdict: Callable[[str, dict], str],
            config: Config, *, competent: dict[str, float] | None = None,
            grid: dict | None = None, progress=print) -> Measurement:
    """Every setting of ``settings`` (the registry's ``checks: regime:
    settings``), in order, at the page's ``config`` (its sizes, seed, device and
    dtype; each setting's world gives its models and decode).
    ``verdict(claim_id, values)``: a claim's verdict by
    its rule (``plumbing.claims.verdict``; the page passes it). A setting with
    fine IDs pools ``n_codebooks_fine`` codebooks, the others ``n_codebooks``:
    fine IDs are the same in every codebook (their k-means is the identity),
    so its codebooks differ only in the head's training windows. ``competent``:
    the least copy and answer accuracy of a competent target (the registry's
    ``checks: regime: competent``).

    Values: ``r_<setting>_<key>`` for every key of ``COLUMNS``, and
    ``r_settings_measured`` / ``r_settings_total``. Tables: ``settings`` (one
    row per setting, NaN where not measured, with its status)."""
    for name in ("n_samples", "K", "n_codebooks", "n_codebooks_fine", "n_train",
                 "n_permutations", "n_bootstrap"):
        n = getattr(config, name)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {n!r}")
    if not settings:
        raise ValueError("no settings to measure")
    v: dict[str, Any] = {}
    rows, decodes = [], {}
    for i, (name, setting) in enumerate(settings.items(), 1):
        world = setting_world(name, setting)
        ids = instrument(name, setting)
        models, why = _missing(world, config.device, config.dtype)
        if models is None:
            progress(f"[{i}/{len(settings)}] {name}: not measured ({why})")
            figures = {k: math.nan for k in COLUMNS}
            glue_bits, content_bits = freedom_bits(world, config.n_samples,
                                                   config.seed)
            figures.update(glue_bits=glue_bits, content_bits=content_bits,
                           strongest="not measured", c3_verdict="not measured",
                           c4_verdict="not measured")
            status = f"not measured: {why}"
        else:
            books = config.n_codebooks_fine if ids == "fine" else config.n_codebooks
            progress(f"[{i}/{len(settings)}] {name}: C3{' and C4' * (ids != 'fine')} "
                     f"on {world.target} with {world.draft}, {ids} IDs "
                     f"({config.n_samples} questions, {books} "
                     f"codebook{'s' * (books > 1)})")
            figures = measure_setting(models, world, config, n_codebooks=books,
                                      verdict=verdict, ids=ids)
            status = "measured"
            world_decode = figures.pop(SHARED, None)
            if ids == "kmeans" and world_decode is not None:  # the grid shares it
                decodes[name] = dataclasses.replace(world_decode, name=name)
        figures.update(competence(world.target, competent or {}))
        v.update({f"r_{name}_{k}": x for k, x in figures.items()})
        rows.append(dict(setting=name, world=world.name,
                         grammar=catalogue.get(world.name).grammar.lower(), ids=ids,
                         target=world.target, draft=world.draft,
                         status=status, **{COLUMNS[k]: x for k, x in figures.items()}))
    v["r_settings_measured"] = sum(r["status"] == "measured" for r in rows)
    exact = [v[f"r_{n}_traj_exact"] for n in settings]
    # NaN (no setting measured) reads as not met in the page's rule
    v["r_traj_exact_min"] = (float(np.nanmin(exact)) if np.isfinite(exact).any()
                             else math.nan)
    v["r_settings_total"] = len(rows)
    missing = [r["setting"] for r in rows if r["status"] != "measured"]
    v["r_missing_note"] = (
        "every setting's models are trained and measured" if not missing else
        f"{' and '.join(missing)} not measured, its figures NaN: the table's status "
        "row says why")
    by_ids = {ids: [n for n in settings if instrument(n, settings[n]) == ids]
              for ids in INSTRUMENTS}
    v["r_summary"] = summary(v, by_ids["kmeans"])  # the two IDs apart
    v["r_summary_fine"] = summary(v, by_ids["fine"])
    per_world: dict[str, str] = {}  # each world's first setting (its decodes)
    for name, setting in settings.items():
        per_world.setdefault(setting["world"], name)
    v["r_rounds_settings"] = ", ".join(per_world.values())
    v.update({f"r_{k}": x for k, x in rounds_fit(v, list(per_world.values())).items()})
    table = pd.DataFrame(rows).set_index("setting")
    long = pd.DataFrame([dict(setting=name, ids=instrument(name, settings[name]),
                              **{k: v[f"r_{name}_{k}"] for k in COLUMNS})
                         for name in settings])
    tables = {"settings": table}
    if grid:  # the crossing, separated (checks: regime: grid)
        progress(f"the grid: {', '.join(grid['worlds'])} x {', '.join(grid['units'])}")
        g = crossing_grid.measure_grid(decodes, grid, config.n_codebooks,
                                       config.n_train, config.n_bootstrap, config.seed)
        v |= {f"r_{k}": x for k, x in g.values.items()}
        names = [f"grid_{r.world}_{r.unit}_{r.ids}"
                 for r in g.tables["grid"].itertuples()]
        fit = c8_fit(v, names)  # C8 over the grid's points
        fit["c8_note"] = re.sub(r"grid_([a-z]+)_(word|piece)_(k\d+|fine)",
                                r"\1/\2/\3",
                                fit["c8_note"].replace("settings", "grid points"))
        v |= {f"r_grid_{k}": x for k, x in fit.items()}
        tables |= g.tables
    return Measurement(v, tables, {"long": long})


# the page's table: a figure with its interval in one cell, to the digits it supports
SHOWN = {  # column -> (its low, its high) in ``measure``'s table
    "threshold slots/forward": ("low", "high"),
    "tau_acc": ("tau_acc low", "tau_acc high"),
    "alpha_SID": ("alpha_SID low", "alpha_SID high"),
    "cluster gain": ("cluster gain low", "cluster gain high"),
    "trajectory gain": ("trajectory gain low", "trajectory gain high"),
    "bits the draft lacks": ("bits the draft lacks low", "bits the draft lacks high"),
}


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """``measure``'s settings table as the page shows it, a column per setting:
    each figure with its 95 % interval in one cell (``stats.with_interval``),
    alpha* with the interval it inherits from tau_acc (1 - 1/tau_acc at each
    end), bits to two decimals, shares and margins to three."""
    out = table.copy()
    star = out["alpha*"].astype(float)
    lo, hi = (1 - 1 / out[c].astype(float) for c in ("tau_acc low", "tau_acc high"))
    out["alpha*"] = [stats.with_interval(*x) for x in zip(star, lo, hi, strict=True)]
    for col, (low, high) in SHOWN.items():
        out[col] = [stats.with_interval(*map(float, x))
                    for x in zip(out[col], out[low], out[high], strict=True)]
    out = out.drop(columns=[c for pair in SHOWN.values() for c in pair])
    for col, digits in (("glue bits", 2), ("content bits", 2), ("alpha*/alpha", 3),
                        ("alpha* - alpha_SID high", 3),
                        ("trajectory = base policy (share)", 3),
                        ("bits per anchor ID", 2), ("majority-ID chance", 3),
                        ("bits the target's one-shot view lacks", 2),
                        ("-log2 alpha_SID", 2),
                        ("threshold forwards per question", 1),
                        ("IDs (K)", 0),
                        ("target: copy", 2), ("target: answers", 2),
                        ("target: arithmetic", 2), ("target: ended", 2)):
        out[col] = [f"{float(x):.{digits}f}" for x in out[col]]
    out["questions to decide C3"] = [
        f"{float(x):.0f}" if np.isfinite(float(x)) else
        "none at these codebooks" if float(x) == math.inf else "—"
        for x in out["questions to decide C3"]]
    return out.T.map(lambda x: "—" if isinstance(x, str) and x == "nan" else x)


def shown_tables(table: pd.DataFrame) -> dict[str, Any]:
    """``shown_table`` split by instrument, one captioned table each (a column
    per setting), so that the page's tables fit its width."""
    shown, ids = shown_table(table), table["ids"]
    return {i: shown[ids.index[ids == i]].style.set_caption(f"settings with {i} IDs")
            for i in INSTRUMENTS if (ids == i).any()}


def summary(v: dict[str, Any], names) -> str:
    """A sentence on the measured settings, from the most determined (highest
    threshold rate) to the freest: how the bar and the draft move, and in how
    many the draft's interval reaches the bar (C3's margin <= 0)."""
    done = sorted((n for n in names if np.isfinite(v[f"r_{n}_tau_acc"])),
                  key=lambda n: -v[f"r_{n}_threshold_tpf"])
    if not done:
        return "no setting is measured in this build"
    reach = sum(v[f"r_{n}_margin"] <= 0 for n in done)
    first, last = done[0], done[-1]
    if first == last:
        moves = (f"one setting is measured, {first} "
                 f"({v[f'r_{first}_threshold_tpf']:.2f} slots per forward, "
                 f"alpha* {v[f'r_{first}_alpha_star']:.3f}, "
                 f"alpha_SID {v[f'r_{first}_alpha']:.3f})")
    else:
        moves = (f"from {first} ({v[f'r_{first}_threshold_tpf']:.2f} slots per "
                 f"forward) to {last} ({v[f'r_{last}_threshold_tpf']:.2f}), alpha* "
                 f"moves from {v[f'r_{first}_alpha_star']:.3f} to "
                 f"{v[f'r_{last}_alpha_star']:.3f} and alpha_SID from "
                 f"{v[f'r_{first}_alpha']:.3f} to {v[f'r_{last}_alpha']:.3f}")
    return (f"{moves}; the draft's 95 % interval reaches the bar (C3's margin <= 0) "
            f"in {reach} of {len(done)} measured setting{'s' * (len(done) > 1)}")


def stop_note(v: dict[str, Any], settings) -> str:
    """The stopping rule read on the measured settings: the competent settings
    whose alpha_SID interval lies wholly below their alpha* interval (alpha_SID
    high < 1 - 1/tau_acc low), and the settings whose target is not competent."""
    below, not_competent = [], []
    for n in settings:
        if not np.isfinite(v[f"r_{n}_tau_acc"]):
            continue
        if v[f"r_{n}_competent"] != "yes":
            not_competent.append(n)
        elif v[f"r_{n}_alpha_hi"] < 1 - 1 / v[f"r_{n}_tau_acc_lo"]:
            below.append(n)
    said = (f"met by {' and '.join(below)}, where alpha_SID's interval lies below "
            "alpha*'s" if below else
            "not met: no measured setting's alpha_SID interval lies below its alpha*")
    if not_competent:
        said += f"; not competent: {' and '.join(not_competent)}"
    return said


def crossing_sentence(v: dict[str, Any] | None, world: str = "free") -> str:
    """The landing page's sentence on the crossing, from the regime page's glued
    values ``v`` (None: the page did not run in this build): per anchor unit,
    where the grid's measured margin alpha* - alpha_SID turns positive along
    the bits per ID (``crossing_grid``), the draft's acceptance with the fine
    IDs against its bar, and whether a line through the end points fits."""
    if not v:
        return "The regime page did not run in this build, so no crossing is given."
    g = f"r_grid_{world}"
    if f"{g}_word_cross_said" not in v or f"{g}_piece_cross_said" not in v:
        return (f"The regime page could not measure the {world} math world's grid "
                "in this build, so no crossing is given.")

    def unit(u: str) -> str:
        a, lo, hi, star = (float(v[f"{g}_{u}_fine_{k}"])
                           for k in ("alpha", "alpha_lo", "alpha_hi", "alpha_star"))
        p = float(v[f"{g}_{u}_line_p"])
        fits = "fits" if p >= 0.05 else "does not fit"
        line = ("no line through the end points is tested (their bits are equal)"
                if not np.isfinite(p) else
                f"a line through the end points {fits} the points between "
                f"(p = {p:.2g})")
        return (f"{v[f'{g}_{u}_cross_said']}; with fine IDs alpha_SID is {a:.3f} "
                f"[{lo:.3f}, {hi:.3f}] against alpha* {star:.3f}; {line}")

    return (f"In the {world} math world, the one-shot draft's margin below its bar "
            f"(alpha* - alpha_SID; positive where semantic drafting cannot win) was "
            f"measured at several k-means resolutions of the semantic IDs and at fine "
            f"IDs (every token its own ID), against the bits an ID tells about its "
            f"anchor. With one anchor per content word it is {unit('word')}. With "
            f"every content piece an anchor (each digit of a number) it is "
            f"{unit('piece')} (measured on the regime page).")
