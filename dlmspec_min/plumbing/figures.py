"""The figures the book computes from what its pages glued, as inline SVG.

- ``forest_svg``, the landing page's forest plot: every claim's evidence in
  every world at once;
- ``rates_svg``, the trajectory page's: tokens per forward of every decoder the
  page measured, in every world, beside the papers' rates.

The forest plot has one panel per comparison a claim's verdict rests on
(``claims.evidence``): per world, this build's figure with its 95 % interval
(a dot coloured by the world's verdict), what the rule holds it against (a
grey diamond with its interval: the bar alpha*, a bound, or the value of "no
effect"), and the paper's figure of the same quantity where its abstract
gives one (a red dashed line). Both figures are drawn with seaborn's style
on matplotlib and returned as inline SVG (text as text, so a reader can
search it and the page stays self-contained).
"""

from __future__ import annotations

import io
import math
import re

from .. import catalogue
from . import claims

COLOURS = claims.VERDICT_COLOURS
PAPER_COLOUR = "#cf222e"
BAR_COLOUR = "#57606a"
LOG_FLOOR = 1e-3  # a log axis' lower end when nothing lies below it


def panels(rows, registry: dict) -> list[dict]:
    """What the plot draws: per comparison its claim, labels, paper figure,
    scale, and per book world (``claims.WORLD_SUFFIXES``) the sides and the
    world's verdict (``claims.world_cells``)."""
    out = []
    for row in rows:
        values = row.get("values") or {}
        cells = claims.world_cells(row, registry) if values else {}
        per_world = {w: claims.evidence(row["id"], claims.world_values(values, w),
                                        registry) for w in claims.WORLD_SUFFIXES}
        for i, first in enumerate(per_world[catalogue.DEFAULT]):
            out.append({
                "claim": row["id"], "labels": first["labels"],
                "paper": first["paper"], "scale": first["scale"],
                "worlds": {w: {"a": ev[i]["a"], "b": ev[i]["b"],
                               "verdict": (cells.get(w) or {}).get(
                                   "verdict", claims.NOT_MEASURED)}
                           for w, ev in per_world.items()},
            })
    return out


def _finite(xs) -> list[float]:
    return [x for x in xs if isinstance(x, (int, float)) and math.isfinite(x)]


def _err(value: float, low: float, high: float):
    """An errorbar's xerr for (value, low, high): None without a finite interval;
    an end on the wrong side of the value draws no arm."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return [[max(0.0, value - low)], [max(0.0, high - value)]]


def _draw(ax, panel: dict) -> None:
    worlds = list(panel["worlds"])
    shown = []
    for y, w in enumerate(reversed(worlds)):
        d = panel["worlds"][w]
        (a, a_lo, a_hi), (b, b_lo, b_hi) = d["a"], d["b"]
        if math.isfinite(b):
            ax.errorbar([b], [y - 0.18], xerr=_err(b, b_lo, b_hi), fmt="D",
                        color=BAR_COLOUR, mfc="white", ms=5, capsize=2, lw=1)
            shown += [b, b_lo, b_hi]
        if math.isfinite(a):
            ax.errorbar([a], [y + 0.12], xerr=_err(a, a_lo, a_hi), fmt="o",
                        color=COLOURS.get(d["verdict"], "#000"), ms=6,
                        capsize=3, lw=1.6)
            shown += [a, a_lo, a_hi]
    if panel["paper"] is not None:
        ax.axvline(panel["paper"], color=PAPER_COLOUR, ls="--", lw=1.2)
        shown.append(panel["paper"])
    ax.set_yticks(range(len(worlds)))
    ax.set_yticklabels([f"{w}: {panel['worlds'][w]['verdict']}"
                        for w in reversed(worlds)], fontsize=10)
    for tick, w in zip(ax.get_yticklabels(), reversed(worlds), strict=True):
        tick.set_color(COLOURS.get(panel["worlds"][w]["verdict"], "#000"))
    ax.set_ylim(-0.6, len(worlds) - 0.4)
    finite = _finite(shown)
    if panel["scale"] == "log":
        ax.set_xscale("log")
        positive = [x for x in finite if x > 0]
        low = min([*positive, LOG_FLOOR * 10]) / 2
        ax.set_xlim(max(low, LOG_FLOOR / 2), 1.3)
    elif finite:
        span = (max(finite) - min(finite)) or abs(max(finite)) or 1.0
        ax.set_xlim(min(finite) - 0.12 * span, max(finite) + 0.12 * span)
    first, second = panel["labels"]
    ax.set_title(f"{panel['claim']}: {first}\nagainst {second}", fontsize=10,
                 loc="left")
    ax.tick_params(axis="x", labelsize=10)


def forest_svg(rows, registry: dict) -> str:
    """The forest plot of ``rows`` (``claims.dashboard_rows``) as an ``<svg>``
    element; '' when the registry names no evidence."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.lines import Line2D

    drawn = panels(rows, registry)
    if not drawn:
        return ""
    ncols = 2
    nrows = math.ceil(len(drawn) / ncols)
    with sns.axes_style("whitegrid"), matplotlib.rc_context(
            {"svg.fonttype": "none", "svg.hashsalt": "dlmspec-forest"}):
        fig, axes = plt.subplots(nrows, ncols, figsize=(10, 1.75 * nrows + 0.8))
        flat = list(axes.flat)
        for ax, panel in zip(flat, drawn, strict=False):
            _draw(ax, panel)
        for ax in flat[len(drawn):]:
            ax.set_visible(False)
        handles = [Line2D([], [], marker="o", ls="", color="#444",
                          label="this build, 95 % interval (colour: verdict)"),
                   Line2D([], [], marker="D", ls="", mfc="white", color=BAR_COLOUR,
                          label="what the rule compares it with"),
                   Line2D([], [], ls="--", color=PAPER_COLOUR,
                          label="the paper's figure")]
        fig.legend(handles=handles, loc="upper center", ncol=3, fontsize=10,
                   frameon=False)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))
        return _svg(fig)


def _svg(fig) -> str:
    """``fig`` as an ``<svg>`` element, closed; the same figure gives the same
    bytes (no date, a fixed hash salt)."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


RATE_KEY = re.compile(r"^t_tokens_per_nfe_(\w+?)$")
PAPER_RATES = {  # checks.trajectory.paper's names, as the figure says them
    "fast_dllm_tokens_per_step": "Fast-dLLM on GSM8K",
    "traj_tokens_per_step_before": "trajectory paper, its base",
    "traj_tokens_per_step_after": "trajectory paper, speculating",
}


def rates(values: dict, check: dict) -> dict[str, dict[str, tuple]]:
    """Per book world, per decoder the page measured (its glued
    ``t_tokens_per_nfe_<decoder>``), (tokens per forward, low, high), the ends
    NaN where the page glued no interval."""
    out = {}
    for world in claims.WORLD_SUFFIXES:
        wv = claims.world_values(values, world)
        found = {}
        for key, v in wv.items():
            m = RATE_KEY.match(key)
            if (m is None or m.group(1).endswith(("_lo", "_hi"))
                    or not isinstance(v, (int, float)) or not math.isfinite(v)):
                continue  # a decoder this world did not run: not drawn
            found[m.group(1)] = (float(v), float(wv.get(f"{key}_lo", math.nan)),
                                 float(wv.get(f"{key}_hi", math.nan)))
        if found:
            out[world] = found
    return out


def rates_svg(values: dict, check: dict, names: dict | None = None) -> str:
    """Tokens per forward of every decoder in every world (``rates``) as
    horizontal bars, with the papers' rates (``check["paper"]``) as lines; ''
    when the page glued none. ``names`` maps a decoder's glue suffix to the
    name the page gives it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    measured = rates(values, check)
    if not measured:
        return ""
    decoders = sorted({d for per in measured.values() for d in per})
    worlds = list(measured)
    with sns.axes_style("whitegrid"), matplotlib.rc_context(
            {"svg.fonttype": "none", "svg.hashsalt": "dlmspec-rates"}):
        fig, ax = plt.subplots(figsize=(9, 0.42 * len(decoders) * len(worlds) + 1.4))
        height = 0.8 / len(worlds)
        for j, world in enumerate(worlds):
            for i, d in enumerate(decoders):
                if d not in measured[world]:
                    continue
                v, lo, hi = measured[world][d]
                y = i + (j - (len(worlds) - 1) / 2) * height
                ax.barh(y, v, height=height * 0.9, color=f"C{j}",
                        label=world if i == 0 else None)
                if math.isfinite(lo) and math.isfinite(hi):
                    ax.errorbar(v, y, xerr=[[max(0, v - lo)], [max(0, hi - v)]],
                                color="k", capsize=2, lw=1)
        for k, (key, label) in enumerate(PAPER_RATES.items()):
            rate = (check.get("paper") or {}).get(key)
            if rate is not None:
                ax.axvline(rate, color="0.3", ls=("--", ":", "-.")[k % 3], lw=1.2,
                           label=f"{label}: {rate:g}")
        names = names or {}
        ax.set_yticks(range(len(decoders)),
                      [names.get(d, d.replace("_", " ")) for d in decoders])
        ax.set_xlabel("tokens committed per forward (95 % interval where measured)")
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        return _svg(fig)
