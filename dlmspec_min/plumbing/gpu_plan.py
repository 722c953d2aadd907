"""Where ``make paper`` runs each notebook: GPUs of its own per run, and the
preflight table it prints before the first run.

With ``--jobs N`` up to N notebooks run at a time. A run that computes on a GPU
(``preflight.wants_gpu``: ``device: cuda...``, or ``device_map: auto``) gets
GPUs of its own through ``CUDA_VISIBLE_DEVICES`` in its environment: one GPU,
or, for ``device_map: auto``, a group of ``visible // concurrent`` GPUs, where
``concurrent`` is N or the number of GPU runs if that is smaller. GPUs are
handed out round robin (the free ones after those handed out last) and come
back when the run ends. More concurrent GPU runs than visible GPUs is refused
before anything runs. Each run is checked (``preflight``) against the least
capable GPUs it may be given, as it will see them (``cuda:0`` onwards).

The preflight table shows, per notebook, its models, dtype, the profile's
estimates of GPU memory and time (``estimate:`` in the profile), the GPUs the
run gets, and whether they hold that memory.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace

from .gpus import VISIBLE_ENV, Gpu
from .preflight import MODEL_PARAMETERS, wants_gpu


def plan(values: dict[str, dict], jobs: int, gpus: list[Gpu]) -> dict[str, int]:
    """GPUs each run gets (0: a CPU run), by notebook; ``ValueError`` (one line)
    if more GPU runs would run at a time than there are visible GPUs."""
    gpu_runs = [stem for stem, v in values.items() if wants_gpu(v)]
    concurrent = min(jobs, len(gpu_runs))
    if gpus and concurrent > len(gpus):  # none at all: the device check says so
        raise ValueError(
            f"--jobs {jobs} runs {concurrent} GPU notebooks at a time, but "
            f"{len(gpus)} GPU(s) are visible ({VISIBLE_ENV} decides which): use "
            f"--jobs {len(gpus)} (make paper PAPER_JOBS={len(gpus)}) or fewer")
    group = max(1, len(gpus) // max(1, concurrent))
    return {stem: (group if v.get("device_map") == "auto" else 1) if wants_gpu(v)
            else 0 for stem, v in values.items()}


def least_capable(gpus: list[Gpu], n: int) -> list[Gpu]:
    """The ``n`` visible GPUs a run may get that can do least (no bfloat16 and
    least memory first), numbered as that run sees them (``cuda:0`` onwards)."""
    chosen = sorted(gpus, key=lambda g: (g.bf16, g.memory_gb))[:n]
    return [replace(g, index=i) for i, g in enumerate(chosen)]


class GpuPool:
    """The visible GPUs, handed out round robin to runs and given back after;
    safe to share between the threads that start the runs."""

    def __init__(self, gpus: list[Gpu]):
        self._gpus = list(gpus)
        self._free = set(range(len(self._gpus)))
        self._next = 0
        self._changed = threading.Condition()

    def take(self, n: int) -> list[Gpu]:
        """``n`` free GPUs, the next after those taken last (waits for them)."""
        if n == 0:
            return []
        with self._changed:
            self._changed.wait_for(lambda: len(self._free) >= n)
            count = len(self._gpus)
            cycle = [(self._next + k) % count for k in range(count)]
            chosen = [i for i in cycle if i in self._free][:n]
            self._free -= set(chosen)
            self._next = (chosen[-1] + 1) % count
            return [self._gpus[i] for i in chosen]

    def give_back(self, taken: list[Gpu]) -> None:
        with self._changed:
            self._free |= {self._gpus.index(g) for g in taken}
            self._changed.notify_all()


def _models(v: dict) -> str:
    names = dict.fromkeys(v[n] for n in (*MODEL_PARAMETERS, "judge") if n in v)
    return ", ".join(map(str, names))


def _placement(group: list[Gpu]) -> str:
    if not group:
        return "none"
    counts = Counter((g.name, g.memory_gb) for g in group)
    return " + ".join(f"{n} x {name} ({gb:.0f} GB)" for (name, gb), n in counts.items())


def _fits(v: dict, group: list[Gpu], estimate: dict | None) -> str:
    if estimate is None or not group:
        return "?"
    held = (sum(g.memory_gb for g in group) if v.get("device_map") == "auto"
            else group[0].memory_gb)
    need = estimate["gpu_memory_gb"]
    return "yes" if held >= need else f"NO ({held:.0f} < {need:g} GB)"


def table(values: dict[str, dict], estimates: dict[str, dict | None],
          needs: dict[str, int], gpus: list[Gpu], jobs: int) -> str:
    """The preflight table: per notebook its models, dtype, estimated GPU memory
    and time, the GPUs it gets (its least capable possible group) and whether
    they hold that memory; then the estimated time in all."""
    head = ("notebook", "models", "dtype", "GPU memory", "time", "runs on", "fits")
    rows = []
    for stem, v in values.items():
        est, need = estimates.get(stem), needs.get(stem, 0)
        group = least_capable(gpus, need)
        rows.append((
            stem, _models(v), str(v.get("dtype", "")),
            f"{est['gpu_memory_gb']:g} GB" if est else "?",
            f"{est['minutes']:g} min" if est else "?",
            _placement(group) if need else "cpu",
            _fits(v, group, est) if need else "-",
        ))
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in (head, *rows)]
    minutes = [e["minutes"] for e in estimates.values() if e]
    if minutes:
        lines.append(f"estimated time: {sum(minutes):g} min in all, at least "
                     f"{max(max(minutes), sum(minutes) / jobs):.0f} min at {jobs} "
                     "at a time")
    return "\n".join(lines)
