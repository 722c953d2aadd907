"""The GPUs a run on this machine can see: their number, names, memory and
bfloat16 support.

Every check that needs to know (``preflight``: a device or dtype this machine
lacks; ``gpu_plan``: ``make paper``'s GPUs per run) asks ``visible_gpus()``.
It asks torch (``torch.cuda``, which honours ``CUDA_VISIBLE_DEVICES``), unless
the environment variable ``DLMSPEC_FAKE_GPUS`` holds a JSON list describing
the machine's GPUs instead, one object per physical GPU::

    DLMSPEC_FAKE_GPUS='[{"name": "H100", "memory_gb": 80, "bf16": true},
                        {"name": "V100", "memory_gb": 32, "bf16": false}]'

``CUDA_VISIBLE_DEVICES`` then selects among the listed GPUs by index, as CUDA
selects among real ones, so a run that ``make paper`` placed on GPU 1 sees
one GPU, the V100, there too. With a fake list MPS counts as absent. Tests
use it, and so can anyone checking a plan for a GPU machine on a laptop.

torch is imported only when a run asks for a GPU or MPS, and asked only for
the device count and each device's properties (never run on a real GPU by
this project: the tests inject their GPUs).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

FAKE_ENV = "DLMSPEC_FAKE_GPUS"
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
BF16_COMPUTE_CAPABILITY = 8  # Ampere and later run bfloat16 natively
BYTES_PER_GB = 1e9


@dataclass(frozen=True)
class Gpu:
    """One GPU as a run sees it: ``cuda:{index}``, named ``id`` in
    ``CUDA_VISIBLE_DEVICES`` (what ``make paper`` hands a run)."""

    index: int
    id: str
    name: str
    memory_gb: float
    bf16: bool

    def describe(self) -> str:
        return f"cuda:{self.index} ({self.name}, {self.memory_gb:.0f} GB)"


def _visible_ids(n_physical: int, env: dict) -> list[str]:
    """The ids ``CUDA_VISIBLE_DEVICES`` names, up to its first invalid entry
    (CUDA ignores the rest); every GPU when it is unset."""
    raw = env.get(VISIBLE_ENV)
    if raw is None:
        return [str(i) for i in range(n_physical)]
    ids = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry.isdigit() or int(entry) >= n_physical or entry in ids:
            break
        ids.append(entry)
    return ids


def _fake_entry(i: int, entry) -> tuple[str, float, bool]:
    ok = (isinstance(entry, dict) and isinstance(entry.get("name"), str)
          and isinstance(entry.get("memory_gb"), (int, float))
          and not isinstance(entry.get("memory_gb"), bool)
          and entry["memory_gb"] > 0 and isinstance(entry.get("bf16"), bool))
    if not ok:
        raise ValueError(
            f"{FAKE_ENV} entry {i} ({entry!r}) must be an object like "
            '{"name": "H100", "memory_gb": 80, "bf16": true}')
    return entry["name"], float(entry["memory_gb"]), entry["bf16"]


def fake_gpus(text: str, env: dict) -> list[Gpu]:
    """The GPUs a ``DLMSPEC_FAKE_GPUS`` JSON list describes, as
    ``CUDA_VISIBLE_DEVICES`` in ``env`` selects them; ``ValueError`` if malformed."""
    try:
        entries = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{FAKE_ENV} is not JSON ({e})") from None
    if not isinstance(entries, list):
        raise ValueError(f"{FAKE_ENV} must be a JSON list of GPUs, not "
                         f"{type(entries).__name__}")
    physical = [_fake_entry(i, e) for i, e in enumerate(entries)]
    return [Gpu(index, id_, *physical[int(id_)])
            for index, id_ in enumerate(_visible_ids(len(physical), env))]


def _torch_gpus(env: dict) -> list[Gpu]:
    import torch

    if not torch.cuda.is_available():
        return []
    n = torch.cuda.device_count()
    raw = env.get(VISIBLE_ENV)
    ids = ([e.strip() for e in raw.split(",")][:n] if raw is not None
           else [str(i) for i in range(n)])
    out = []
    for i in range(n):
        p = torch.cuda.get_device_properties(i)
        out.append(Gpu(i, ids[i], p.name, p.total_memory / BYTES_PER_GB,
                       p.major >= BF16_COMPUTE_CAPABILITY))
    return out


def visible_gpus(env: dict | None = None) -> list[Gpu]:
    """The CUDA GPUs a process started with ``env`` (default: this one's) sees,
    from ``DLMSPEC_FAKE_GPUS`` when set, else from torch; ``ValueError`` for a
    malformed fake list."""
    env = os.environ if env is None else env
    if env.get(FAKE_ENV) is not None:
        return fake_gpus(env[FAKE_ENV], env)
    return _torch_gpus(env)


def mps_available(env: dict | None = None) -> bool:
    """Whether Apple's MPS device is there (never, under a fake GPU list)."""
    env = os.environ if env is None else env
    if env.get(FAKE_ENV) is not None:
        return False
    import torch

    return bool(torch.backends.mps.is_available())
