"""What can be known before a kernel starts is checked before it starts.

A notebook's parameters (its defaults with every override applied) are checked
against this machine by the runner and by ``make paper`` (for each run, against
the GPUs it will be given) before any kernel starts, so that each of these is
one line and exit code 2 rather than a traceback from a cell minutes later:

* a ``device`` or ``device_map`` this machine lacks: ``cuda`` without a CUDA
  GPU, ``cuda:3`` where two are visible, ``mps`` off Apple silicon;
* a ``dtype`` the device cannot run: bfloat16 on a GPU older than Ampere;
* a model that runs its own code (a registry model such as LLaDA or Dream, or
  a local folder of one) without ``trust_remote_code: true``;
* a registry model or judge that is not in the local Hugging Face cache while
  downloads are off (``DLMSPEC_ALLOW_HUB`` unset).

The GPUs come from ``gpus.visible_gpus()`` (``DLMSPEC_FAKE_GPUS`` injects a
list), asked only when a parameter names a GPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .. import catalogue
from ..decoding.files import has_weights
from . import gpus as gpu_info
from .params import config_of

MODEL_PARAMETERS = ("model", "target", "draft", "large_model", "small_model")


def cuda_index(device) -> int | None:
    """0 for ``"cuda"``, N for ``"cuda:N"``, None for any other value."""
    if not isinstance(device, str) or not device.startswith("cuda"):
        return None
    return int(device.partition(":")[2] or 0)


def wants_gpu(values: dict) -> bool:
    """Whether a run with these parameters computes on a CUDA GPU."""
    return (values.get("device_map") == "auto"
            or any(cuda_index(values.get(n)) is not None
                   for n in ("device", "device_map")))


def gpu_indices(values: dict, n_visible: int) -> list[int]:
    """The visible GPUs (``cuda:i``) a run with these parameters computes on."""
    used = {cuda_index(values.get(n)) for n in ("device", "device_map")} - {None}
    if values.get("device_map") == "auto":
        used |= set(range(n_visible))
    return sorted(used)


def _visible_note(env: dict) -> str:
    raw = env.get(gpu_info.VISIBLE_ENV)
    return "" if raw is None else f" ({gpu_info.VISIBLE_ENV}={raw!r})"


def _device_problem(values: dict, gpus: list, has_mps: Callable[[], bool],
                    env: dict) -> str | None:
    for name in ("device", "device_map"):
        value, index = values.get(name), cuda_index(values.get(name))
        if index is not None and index >= len(gpus):
            shown = (f"{len(gpus)} GPU(s), cuda:0 to cuda:{len(gpus) - 1}" if gpus
                     else "no CUDA GPU")
            fix = "cuda:0" if gpus else "cpu"
            return (f"parameter {name}={value!r}: this machine shows {shown}"
                    f"{_visible_note(env)}; use {name} {fix}")
        if value == "mps" and not has_mps():
            return (f"parameter {name}='mps': this machine has no MPS device "
                    f"(Apple silicon); use {name} cpu")
    return None


def _dtype_problem(values: dict, gpus: list) -> str | None:
    if values.get("dtype") != "bfloat16":
        return None
    for i in gpu_indices(values, len(gpus)):
        if not gpus[i].bf16:
            return (f"parameter dtype='bfloat16': {gpus[i].describe()} cannot run "
                    "bfloat16 (compute capability below 8.0); use dtype float16 "
                    "or float32")
    return None


def _remote_code_problem(values: dict) -> str | None:
    from ..decoding.denoisers import PAPER_MODELS, spec_for_config

    if values.get("trust_remote_code") is True:
        return None
    for name in MODEL_PARAMETERS:
        value = values.get(name)
        if not isinstance(value, str):
            continue
        spec, where = PAPER_MODELS.get(value), "its repository"
        if spec is None and Path(value).is_dir():
            spec, where = spec_for_config(config_of(value)), "that folder"
        if spec is not None and spec.trust_remote_code:
            return (f"parameter {name}={value!r} runs its own Python code (the "
                    f"modelling files in {where}); "
                    "read that code, then opt in with trust_remote_code: true "
                    "(-p trust_remote_code true)")
    return None


def hub_cache_dir(env: dict) -> Path:
    """The local Hugging Face hub cache that a process with ``env`` reads."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(name):
            return Path(env[name]).expanduser()
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def is_cached(repo: str, env: dict, weights: bool = True) -> bool:
    """Whether the hub cache holds ``repo``'s main revision: its config and,
    with ``weights``, every weight file (a sharded index's shards included)."""
    folder = hub_cache_dir(env) / ("models--" + repo.replace("/", "--"))
    try:
        snapshot = folder / "snapshots" / (folder / "refs" / "main").read_text().strip()
    except OSError:
        return False
    return (snapshot / "config.json").is_file() and (
        not weights or has_weights(snapshot))


def _hub_repos(values: dict):
    """(parameter, value, repository, needs weights) for every hub download a
    run with these parameters makes."""
    from ..decoding.denoisers import PAPER_MODELS

    for name in MODEL_PARAMETERS:
        spec = PAPER_MODELS.get(values.get(name))
        if spec is not None:
            yield name, spec.name, spec.name, True
            if spec.tokenizer:
                yield name, spec.name, spec.tokenizer, False
    judge = PAPER_MODELS.get(values.get("judge"))
    if judge is not None:
        yield "judge", judge.name, judge.name, True


def _cache_problem(values: dict, env: dict) -> str | None:
    from ..decoding.denoisers import ALLOW_HUB_ENV

    if env.get(ALLOW_HUB_ENV) == "1":
        return None
    for name, value, repo, weights in _hub_repos(values):
        if not is_cached(repo, env, weights):
            return (f"parameter {name}={value!r}: {repo} is not in the local Hugging "
                    f"Face cache ({hub_cache_dir(env)}) and downloads are off; on a "
                    f"machine with hub access run `hf download {repo}` and copy the "
                    f"cache (HF_HOME) here, or set {ALLOW_HUB_ENV}=1 to let the run "
                    "download it")
    return None


def _untrained_problem(values: dict) -> str | None:
    """A rung of a world's ladder that this machine lacks (``catalogue``: every
    rung is named, trained or not): its name and the command that trains it."""
    from ..decoding.files import PACKAGED, models_dir

    if models_dir() == PACKAGED:  # an installed package: the loader says what ships
        return None
    for name in MODEL_PARAMETERS:
        value = values.get(name)
        world = catalogue.of_model(value) if isinstance(value, str) else None
        if world is None or value not in world.ladder:  # not a rung: the rules say
            continue
        folder = models_dir() / value.removeprefix(catalogue.EMBEDDED)
        if not (folder / "config.json").is_file():
            how = world.train_command.format(size=folder.name)
            return (f"parameter {name}={value!r}: the {world.name} world's rung "
                    f"{folder.name} is not trained on this machine ({folder} has no "
                    f"config.json); train it with `{how}`, or name another model")
    return None


def check(values: dict, gpus: list | None = None, env: dict | None = None) -> None:
    """Raise ``ValueError`` (one line) for the first parameter this machine cannot
    run; ``gpus``: the GPUs the run will see (default ``gpus.visible_gpus()``)."""
    env = os.environ if env is None else env
    if wants_gpu(values) and gpus is None:
        gpus = gpu_info.visible_gpus(env)
    problem = (_device_problem(values, gpus or [],
                               lambda: gpu_info.mps_available(env), env)
               or _dtype_problem(values, gpus or [])
               or _remote_code_problem(values)
               or _cache_problem(values, env)
               or _untrained_problem(values))
    if problem:
        raise ValueError(problem)
