"""The regime page's figures (notebook 11), drawn from ``regime.measure``'s
``Measurement``: the axis (a row per figure, a column per x) and the threshold
rule's forwards against a solution's bits of free choice. The measurement is in
``regime.py``; the grid's figures are in ``crossing_grid.py``."""

from __future__ import annotations

import math

import numpy as np

from .common import Measurement

FIGURES = {  # what the page plots against each x: y, its interval, its title
    "tau_acc": ("tau_acc_lo", "tau_acc_hi", "tau_acc (tokens per forward)"),
    "alpha": ("alpha_lo", "alpha_hi", "alpha_SID (black dash: alpha*)"),
    "margin": (None, None, "C3 margin: alpha* - alpha_SID high"),
    "c4_ratio": ("c4_ratio_lo", "c4_ratio_hi", "C4 cluster gain"),
    "traj_gain": ("traj_gain_lo", "traj_gain_hi", "trajectory speculation's gain"),
}
AXES = {"threshold_tpf": "threshold rule, slots per forward",
        "content_bits": "content freedom (bits per solution)"}


def draw_rounds(m: Measurement):
    """The threshold rule's forwards per question against a solution's bits of
    free choice, one point per world, with ``rounds_fit``'s line. None when no
    world is measured."""
    import matplotlib.pyplot as plt

    long = m.arrays["long"]
    long = long[np.isfinite(long["threshold_nfe"].astype(float))
                & long.setting.isin(m.values.get("r_rounds_settings", "").split(", "))]
    if not len(long):
        return None
    x = (long["glue_bits"] + long["content_bits"]).astype(float)
    y = long["threshold_nfe"].astype(float)
    fig, ax = plt.subplots(figsize=(5.0, 3.4), constrained_layout=True)
    ax.plot(x, y, "o")
    for xi, yi, name in zip(x, y, long.setting, strict=True):
        ax.annotate(name, (xi, yi), textcoords="offset points", xytext=(5, 3),
                    fontsize=7)
    v = m.values
    if np.isfinite(v.get("r_rounds_slope", math.nan)):
        xs = np.linspace(0, float(x.max()) * 1.1, 2)
        ax.plot(xs, v["r_rounds_intercept"] + v["r_rounds_slope"] * xs, color="C1",
                lw=1, label=f"linear: {v['r_rounds_slope']:.2f} forwards per bit, "
                            f"R^2 {v['r_rounds_r2']:.2f}")
        ax.legend(fontsize=7, loc="upper left")
    ax.set_xlabel("bits of free choice per solution (glue + content)", fontsize=9)
    ax.set_ylabel("threshold rule: forwards per question", fontsize=9)
    plt.close(fig)
    return fig


def draw(m: Measurement, paper_gain: float | None = None):
    """The axis: a row per figure (``FIGURES``), a column per x (``AXES``), a
    point per measured setting with its 95 % interval; ``None`` when no setting
    was measured. ``paper_gain``: the trajectory paper's gain, a dotted line."""
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
                           label=f"trajectory paper: {paper_gain:.2f}x")
                ax.legend(fontsize=7, loc="lower right")
            ax.set_title(title, fontsize=9)
            ax.margins(x=0.15)  # room for the settings' names
            if r == len(FIGURES) - 1:
                ax.set_xlabel(xlabel, fontsize=9)
    plt.close(fig)
    return fig
