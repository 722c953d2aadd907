"""Timing a decode: its model forwards alone against the whole decoding loop.

A ``Recorder`` wraps a denoiser and keeps every call one decode makes
(``logits``, ``prefill``, ``logits_window`` with their inputs); ``replay`` runs
exactly those calls back to back. ``loop_overhead`` times both (median of
repeats after one warm-up, wall-clock and process CPU time) and reports the
ratio decode / forwards: how much the loop's own work (drafting, bookkeeping,
commit rules) adds to the forwards it runs. On a machine shared with other
jobs, the CPU-time ratio is the one to trust.
"""

from __future__ import annotations

import statistics
import time

import torch


class Recorder:
    """A denoiser proxy that remembers every call, so the forwards can be replayed."""

    def __init__(self, denoiser):
        self.d, self.calls = denoiser, []
        self.mask_id = denoiser.mask_id
        self.supports_cache = getattr(denoiser, "supports_cache", False)

    def logits(self, x):
        self.calls.append(("logits", (x.clone(),)))
        return self.d.logits(x)

    def prefill(self, x):
        self.calls.append(("prefill", (x.clone(),)))
        return self.d.prefill(x)

    def logits_window(self, xw, start, cache):
        self.calls.append(("logits_window", (xw.clone(), start, cache)))
        return self.d.logits_window(xw, start, cache)


def replay(denoiser, calls):
    for name, args in calls:
        getattr(denoiser, name)(*args)


def timed(fn, repeats: int, warmup: bool = True) -> tuple[float, float]:
    """Median (wall, process CPU) seconds over ``repeats`` runs after a warm-up."""
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if warmup:
        fn()
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


@torch.no_grad()
def loop_overhead(denoiser, prompt, config, repeats: int = 3, generator=None,
                  warmup: bool = True) -> dict:
    """Forwards alone (replayed) vs the whole ``generate`` call, for one batch.

    ``generator``: a function returning fresh generators (or None for greedy),
    so that every repeat decodes the same thing. ``warmup=False`` skips the
    untimed first runs (when the model is warm already). Returns seconds and
    ratios.
    """
    from ..decoding.decode import generate

    gen = generator or (lambda: None)
    rec = Recorder(denoiser)
    generate(rec, prompt, config, gen())
    fwd = timed(lambda: replay(denoiser, rec.calls), repeats, warmup)
    dec = timed(lambda: generate(denoiser, prompt, config, gen()), repeats, warmup)
    return {"forward_calls": len(rec.calls), "forwards_s": fwd[0], "decode_s": dec[0],
            "ratio": dec[0] / fwd[0], "forwards_cpu_s": fwd[1],
            "decode_cpu_s": dec[1], "cpu_ratio": dec[1] / fwd[1]}


class TimedDenoiser:
    """A denoiser proxy that adds up the wall and CPU time spent in model calls.

    Timing the forwards inside the very decode being measured costs two clock
    reads per call, so a notebook gets "forwards alone vs the whole decode"
    without decoding twice.
    """

    def __init__(self, denoiser):
        self.d = denoiser
        self.mask_id = denoiser.mask_id
        self.supports_cache = getattr(denoiser, "supports_cache", False)
        self.wall = self.cpu = 0.0
        self.calls = 0

    def _timed(self, fn, *args):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn(*args)
        self.wall += time.perf_counter() - w0
        self.cpu += time.process_time() - c0
        self.calls += 1
        return out

    def logits(self, x):
        return self._timed(self.d.logits, x)

    def prefill(self, x):
        return self._timed(self.d.prefill, x)

    def logits_window(self, xw, start, cache):
        return self._timed(self.d.logits_window, xw, start, cache)


def timed_generate(denoiser, prompt, config, generator=None):
    """``generate`` with its forwards timed: (result, times and ratios)."""
    from ..decoding.decode import generate

    timed = TimedDenoiser(denoiser)
    w0, c0 = time.perf_counter(), time.process_time()
    result = generate(timed, prompt, config, generator)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return result, {
        "wall_s": wall, "cpu_s": cpu, "forward_wall_s": timed.wall,
        "forward_cpu_s": timed.cpu, "forward_calls": timed.calls,
        "ratio": wall / timed.wall if timed.wall else float("nan"),
        "cpu_ratio": cpu / timed.cpu if timed.cpu else float("nan"),
    }


# --- the decode-speed benchmark's last run (benchmarks/decode_speed.py) -----------


def speed_report(path):
    """The header (machine, date, threads, repeats) and the rows, a DataFrame, of
    a JSON written by ``benchmarks/decode_speed.py --json``."""
    import json

    import pandas as pd

    data = json.loads(open(path).read())
    rows = pd.DataFrame(data.pop("rows"))
    rows["rule"] = rows["setting"].str.split(" / ").str[0]
    rows["cache"] = rows["setting"].str.split(" / ").str[1]
    return data, rows


def speed_summary(rows, near: float = 0.1) -> dict:
    """Per model and batch: the fastest setting, those within ``near`` of its
    tokens per second (timing noise cannot order them), and how many times slower
    trajectory speculation is than its base policy (threshold, same cache), in
    wall time, with the forwards it saves, and its CPU setting (one drafted
    state, dual cache; nan in a run without it) over the dual-cache threshold."""
    out = {}
    for (model, batch), g in rows.groupby(["model", "batch"], sort=False):
        g = g.set_index("setting")
        slow = {c: g.loc[f"trajectory / {c}", "wall_s"] / g.loc[f"threshold / {c}",
                                                                  "wall_s"]
                for c in ("none", "prefix", "dual")}
        saved = {c: g.loc[f"threshold / {c}", "nfe_per_row"]
                 / g.loc[f"trajectory / {c}", "nfe_per_row"]
                 for c in ("none", "prefix", "dual")}
        one = "trajectory 1-draft / dual"  # the CPU setting, where the run has it
        cpu = (g.loc[one, "wall_s"] / g.loc["threshold / dual", "wall_s"]
               if one in g.index else float("nan"))
        best = g["tokens_per_s"].max()
        out[(model, batch)] = {
            "fastest": g["tokens_per_s"].idxmax(),
            "near_fastest": list(g.index[g["tokens_per_s"] >= (1 - near) * best]),
            "fastest_tokens_per_s": float(best),
            "spec_slowdown": slow, "spec_fewer_forwards": saved,
            "cpu_setting_slowdown": cpu,
        }
    return out


def draw_speed(rows, machine: str):
    """Tokens per second of every setting, a panel per model and batch."""
    import seaborn as sns

    grid = sns.catplot(data=rows, kind="bar", x="tokens_per_s", y="rule",
                       hue="cache", row="model", col="batch", height=2.6,
                       aspect=1.6, sharex=False, palette="crest")
    grid.set_axis_labels("generated tokens per second", "")
    grid.set_titles("{row_name}, batch {col_name}")
    grid.figure.suptitle(machine, y=1.02, fontsize=9)
    return grid
