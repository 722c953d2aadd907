"""The regime as a measured axis (notebook 11; issue 42, item 4; DERIVED).

The paper measures its claims at one regime, Fast-dLLM on GSM8K (about 3.3
tokens per forward). How far its verdicts depend on that regime is a question
the paper cannot ask; this page asks it. Each *setting* is a math world with a
given freedom in its solutions (``problems.Dials``: operand order, the content
freedom; openers, a glue freedom) and its own draft and target, trained on that
world with the ladder's recipe. The settings, their worlds and their models are
written in ``book/claims.yml`` (``checks: regime: settings``) before this page
measured any of them.

Per setting, on the world's own held-out questions and decode (greedy, 32
tokens in one block of 32, threshold 0.9):

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
  accelerator decodes), a paired ratio bootstrap over prompts, beside seed 002's
  2.6 -> 4.3 tokens per step (1.65x).

A setting whose draft or target is not trained is a row that says so, its
figures NaN; nothing is dropped.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..decoding.denoisers import ModelNotAvailableError
from ..measures import stats
from ..training import math_pilot
from ..worlds.gsm import MATH, MathWorld
from . import c3_win_condition as c3m
from . import c4_cluster_verification as c4m
from .common import Measurement, load_models

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
}
FIGURES = {  # what the page plots against each x: y, its interval, its title
    "tau_acc": ("tau_acc_lo", "tau_acc_hi", "tau_acc (tokens per forward)"),
    "alpha": ("alpha_lo", "alpha_hi", "alpha_SID (black dash: alpha*)"),
    "margin": (None, None, "C3 margin: alpha* - alpha_SID high"),
    "c4_ratio": ("c4_ratio_lo", "c4_ratio_hi", "C4 cluster gain"),
    "traj_gain": ("traj_gain_lo", "traj_gain_hi", "trajectory speculation's gain"),
}
AXES = {"threshold_tpf": "threshold rule, slots per forward",
        "content_bits": "content freedom (bits per solution)"}


def setting_world(name: str, setting: dict) -> MathWorld:
    """A setting -> its math world: narrow's dials with the freedom pilot's
    candidate ``setting["freedom"]`` applied, its draft and target."""
    pilot = math_pilot.spec("freedom_pilot")["candidates"]
    if setting["freedom"] not in pilot:
        raise ValueError(f"setting {name!r}: freedom {setting['freedom']!r} is not a "
                         f"candidate of the freedom pilot ({sorted(pilot)})")
    dials = math_pilot.dials_of(pilot[setting["freedom"]])
    return dataclasses.replace(
        MATH, name=f"math ({name})", dials=dials,
        ladder=(setting["draft"], setting["target"]), draft=setting["draft"],
        target=setting["target"], strong=setting["target"])


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


def measure_setting(models, world: MathWorld, *, n_samples: int, K: int,
                    n_codebooks: int, n_train: int, n_permutations: int,
                    n_bootstrap: int, seed: int, device: str = "cpu",
                    verdict: Callable[[str, dict], str]) -> dict[str, Any]:
    """One setting's figures (``COLUMNS``' keys), measured by C3's and C4's own
    code at the world's decode."""
    d = world.decode
    decode = dict(gen_length=d["gen_length"], block_length=d["block_length"],
                  threshold=d["threshold"], temperature=0.0)
    prompt = world.prompts(models.tokenizer, n_samples, seed=seed, device=device)
    c3 = c3m.measure(models, prompt, **decode, K=K, levels=1, n_train=n_train,
                     n_repeats=1, n_timed=1, n_bootstrap=n_bootstrap, seed=seed,
                     n_codebooks=n_codebooks, world=world)
    c4 = c4m.measure(models, n_samples=n_samples, **decode, K=K, K_sweep=(),
                     n_permutations=n_permutations, n_bootstrap=n_bootstrap,
                     seed=seed, device=device, world=world)
    v3, v4 = c3.values, {**c4.values, **c4.rule_values}
    acc = c3.tables["accelerators"]
    glue_bits, content_bits = freedom_bits(world, n_samples, seed)
    gain = traj_gain(c3, n_bootstrap, seed)
    return {
        "glue_bits": glue_bits, "content_bits": content_bits,
        "threshold_tpf": float(acc.loc[THRESHOLD, "tokens_per_nfe"]),
        "threshold_tpf_lo": float(acc.loc[THRESHOLD, "low"]),
        "threshold_tpf_hi": float(acc.loc[THRESHOLD, "high"]),
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
        "c3_verdict": verdict("C3", v3),
        "c4_verdict": verdict("C4", v4),
    }


def _missing(setting: dict, device, dtype) -> tuple[Any, str | None]:
    """(models, None), or (None, why) where a setting's model is not trained."""
    try:
        return load_models(setting["target"], setting["draft"], device=device,
                           dtype=dtype), None
    except ModelNotAvailableError as e:
        return None, str(e).split(";")[0]


def measure(settings: dict[str, dict], verdict: Callable[[str, dict], str], *,
            n_samples: int = 24, K: int = 32, n_codebooks: int = 5,
            n_train: int = 2048, n_permutations: int = 2000, n_bootstrap: int = 2000,
            seed: int = 0, device: str = "cpu", dtype: str | None = "float32",
            progress=print) -> Measurement:
    """Every setting of ``settings`` (the registry's ``checks: regime:
    settings``), in order. ``verdict(claim_id, values)``: a claim's verdict by
    its rule (``plumbing.claims.verdict``; the page passes it).

    Values: ``r_<setting>_<key>`` for every key of ``COLUMNS``, and
    ``r_settings_measured`` / ``r_settings_total``. Tables: ``settings`` (one
    row per setting, NaN where not measured, with its status)."""
    for name, n in [("n_samples", n_samples), ("K", K), ("n_codebooks", n_codebooks),
                    ("n_train", n_train), ("n_permutations", n_permutations),
                    ("n_bootstrap", n_bootstrap)]:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {n!r}")
    if not settings:
        raise ValueError("no settings to measure")
    v: dict[str, Any] = {}
    rows = []
    for i, (name, setting) in enumerate(settings.items(), 1):
        world = setting_world(name, setting)
        models, why = _missing(setting, device, dtype)
        if models is None:
            progress(f"[{i}/{len(settings)}] {name}: not measured ({why})")
            figures = {k: math.nan for k in COLUMNS}
            glue_bits, content_bits = freedom_bits(world, n_samples, seed)
            figures.update(glue_bits=glue_bits, content_bits=content_bits,
                           strongest="not measured", c3_verdict="not measured",
                           c4_verdict="not measured")
            status = f"not measured: {why}"
        else:
            progress(f"[{i}/{len(settings)}] {name}: C3 and C4 on {setting['target']} "
                     f"with {setting['draft']} ({n_samples} questions)")
            figures = measure_setting(models, world, n_samples=n_samples, K=K,
                                      n_codebooks=n_codebooks, n_train=n_train,
                                      n_permutations=n_permutations,
                                      n_bootstrap=n_bootstrap, seed=seed,
                                      device=device, verdict=verdict)
            status = "measured"
        v.update({f"r_{name}_{k}": x for k, x in figures.items()})
        rows.append(dict(setting=name, freedom=setting["freedom"],
                         target=setting["target"], draft=setting["draft"],
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
        f"nan: {' and '.join(missing)} not measured; the table's status row says why")
    v["r_summary"] = summary(v, settings)
    table = pd.DataFrame(rows).set_index("setting")
    long = pd.DataFrame([dict(setting=name, **{k: v[f"r_{name}_{k}"] for k in COLUMNS})
                         for name in settings])
    return Measurement(v, {"settings": table}, {"long": long})


# the page's table: a figure with its interval in one cell, to the digits it supports
SHOWN = {  # column -> (its low, its high) in ``measure``'s table
    "threshold slots/forward": ("low", "high"),
    "tau_acc": ("tau_acc low", "tau_acc high"),
    "alpha_SID": ("alpha_SID low", "alpha_SID high"),
    "cluster gain": ("cluster gain low", "cluster gain high"),
    "trajectory gain": ("trajectory gain low", "trajectory gain high"),
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
                        ("trajectory = base policy (share)", 3)):
        out[col] = [f"{float(x):.{digits}f}" for x in out[col]]
    return out.T


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


def draw(m: Measurement, paper_gain: float | None = None):
    """The axis: a row per figure (``FIGURES``), a column per x (``AXES``), a
    point per measured setting with its 95 % interval; ``None`` when no setting
    was measured. ``paper_gain``: seed 002's trajectory gain, a dotted line."""
    import matplotlib.pyplot as plt

    long = m.arrays["long"]
    long = long[np.isfinite(long["tau_acc"].astype(float))]
    if not len(long):
        return None
    fig, axes = plt.subplots(len(FIGURES), len(AXES), figsize=(8.0, 2.4 * len(FIGURES)),
                             squeeze=False, constrained_layout=True)
    for r, (y, (lo, hi, title)) in enumerate(FIGURES.items()):
        for c, (x, xlabel) in enumerate(AXES.items()):
            ax = axes[r, c]
            xs, ys = long[x].astype(float), long[y].astype(float)
            if lo is not None:
                low, high = long[lo].astype(float), long[hi].astype(float)
                err = np.vstack([ys - low, high - ys])
                ax.errorbar(xs, ys, yerr=np.clip(err, 0, None), fmt="o", capsize=3)
            else:
                ax.plot(xs, ys, "o")
            for xi, yi, name in zip(xs, ys, long.setting, strict=True):
                ax.annotate(name, (xi, yi), textcoords="offset points", xytext=(4, 4),
                            fontsize=8)
            if y == "alpha":
                ax.plot(xs, long["alpha_star"].astype(float), "k_", markersize=14,
                        label="alpha*")
            if y == "margin":
                ax.axhline(0, color="grey", lw=0.8)
            if y == "c4_ratio":
                ax.axhline(1, color="grey", lw=0.8, ls=":")
            if y == "traj_gain" and paper_gain is not None:
                ax.axhline(paper_gain, color="grey", lw=0.8, ls=":",
                           label=f"seed 002: {paper_gain:.2f}x")
                ax.legend(fontsize=7, loc="lower right")
            ax.set_title(title, fontsize=9)
            ax.margins(x=0.15)  # room for the settings' names
            if r == len(FIGURES) - 1:
                ax.set_xlabel(xlabel, fontsize=9)
    plt.close(fig)
    return fig
