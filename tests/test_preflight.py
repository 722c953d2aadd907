"""What this machine cannot run is one line and exit code 2 before any kernel
starts (plumbing/preflight.py), with the GPUs injected (plumbing/gpus.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlmspec_min.plumbing import gpus, preflight

ROOT = Path(__file__).resolve().parents[1]
NB04 = ROOT / "notebooks" / "04_cluster_verification.md"  # the example
LLADA = "GSAI-ML/LLaDA-8B-Base"
H100 = {"name": "H100", "memory_gb": 80, "bf16": True}
V100 = {"name": "V100", "memory_gb": 32, "bf16": False}
LIMIT_SECONDS = 15  # the bound for a refused run, on a 2-core machine


def fake(*entries, visible: str | None = None) -> dict:
    env = {gpus.FAKE_ENV: json.dumps(list(entries))}
    if visible is not None:
        env[gpus.VISIBLE_ENV] = visible
    return env


def problem(values: dict, env: dict, gpu_list=None) -> str | None:
    try:
        preflight.check(values, gpu_list, env)
    except ValueError as e:
        return str(e)
    return None


def test_a_fake_list_is_the_machine_and_cuda_visible_devices_selects_from_it():
    (v100,) = gpus.visible_gpus(fake(H100, V100, visible="1"))
    assert (v100.index, v100.id, v100.name, v100.memory_gb, v100.bf16) == (
        0, "1", "V100", 32.0, False)
    assert [g.id for g in gpus.visible_gpus(fake(H100, V100))] == ["0", "1"]
    assert [g.id for g in gpus.visible_gpus(fake(H100, V100, visible="1,0"))] == [
        "1", "0"]
    assert gpus.visible_gpus(fake(H100, V100, visible="")) == []
    # as CUDA does, an invalid entry hides itself and every later one
    assert [g.id for g in gpus.visible_gpus(fake(H100, V100, visible="0,7,1"))] == [
        "0"]
    assert not gpus.mps_available(fake(H100))


@pytest.mark.parametrize("text, message", [
    ("[{", "is not JSON"),
    ('{"name": "H100"}', "must be a JSON list"),
    ('[{"name": "H100", "memory_gb": 80}]', "entry 0"),
    ('[{"name": "H100", "memory_gb": -1, "bf16": true}]', "entry 0"),
])
def test_a_malformed_fake_list_is_one_line(text, message):
    with pytest.raises(ValueError, match=message) as e:
        gpus.visible_gpus({gpus.FAKE_ENV: text})
    assert "\n" not in str(e.value)


def test_devices_this_machine_lacks():
    cpu = {"device": "cpu", "device_map": "none"}
    assert problem(cpu, fake()) is None
    assert "shows no CUDA GPU; use device cpu" in problem({"device": "cuda"}, fake())
    two = fake(H100, H100)
    assert problem({"device": "cuda:1"}, two) is None
    assert ("device='cuda:3': this machine shows 2 GPU(s), cuda:0 to cuda:1"
            in problem({"device": "cuda:3"}, two))
    assert "device_map='cuda:2'" in problem({"device_map": "cuda:2"}, two)
    assert "CUDA_VISIBLE_DEVICES='0'" in problem({"device": "cuda:1"},
                                                 fake(H100, H100, visible="0"))
    assert "no MPS device" in problem({"device": "mps"}, fake())


def test_bfloat16_needs_a_gpu_that_runs_it():
    bf16 = {"device": "cuda", "dtype": "bfloat16"}
    assert problem(bf16, fake(H100)) is None
    assert "cuda:0 (V100, 32 GB) cannot run bfloat16" in problem(bf16, fake(V100))
    assert problem({**bf16, "dtype": "float16"}, fake(V100)) is None
    assert problem({**bf16, "device": "cpu"}, fake(V100)) is None  # the CPU runs it
    # device_map auto computes on every visible GPU; the V100 among them refuses
    auto = {"device": "cuda", "device_map": "auto", "dtype": "bfloat16"}
    assert "cuda:1 (V100" in problem(auto, fake(H100, V100))
    assert problem(auto, fake(H100, V100, visible="0")) is None
    # the GPUs handed in win over the visible ones (make paper's group per run)
    assert problem(bf16, fake(V100), gpus.visible_gpus(fake(H100))) is None


def test_a_model_that_runs_its_own_code_needs_trust_remote_code(tmp_path):
    hub = {"DLMSPEC_ALLOW_HUB": "1"}  # no cache check here
    refused = problem({"model": LLADA}, hub)
    assert refused.startswith(f"parameter model='{LLADA}' runs its own Python code")
    assert "trust_remote_code: true" in refused
    assert problem({"draft": LLADA, "trust_remote_code": False}, hub).startswith(
        "parameter draft=")
    assert problem({"model": LLADA, "trust_remote_code": True}, hub) is None
    assert problem({"model": "dlmspec/base"}, hub) is None  # the embedded models
    folder = tmp_path / "llada"  # a local copy: its config names the family
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llada"}')
    assert "modelling files in that folder" in problem({"model": str(folder)}, hub)


def snapshot(hf_home: Path, repo: str, files: dict[str, str]) -> Path:
    folder = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    snap = folder / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    for name, text in files.items():
        (snap / name).write_text(text)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("abc123")
    return snap


def test_a_model_missing_from_the_local_cache_names_the_download(tmp_path):
    env = {"HF_HOME": str(tmp_path)}
    values = {"model": LLADA, "trust_remote_code": True}
    refused = problem(values, env)
    assert f"{LLADA} is not in the local Hugging Face cache ({tmp_path / 'hub'})" in (
        refused)
    assert f"`hf download {LLADA}`" in refused and "DLMSPEC_ALLOW_HUB=1" in refused
    assert problem(values, {**env, "DLMSPEC_ALLOW_HUB": "1"}) is None
    index = {"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}}
    snap = snapshot(tmp_path, LLADA, {"config.json": "{}",
                                      "model.safetensors.index.json": json.dumps(index),
                                      "model-1.safetensors": ""})
    assert "not in the local Hugging Face cache" in problem(values, env)  # a shard
    (snap / "model-2.safetensors").write_text("")
    assert problem(values, env) is None
    assert "judge='gpt2': gpt2 is not in" in problem({"judge": "gpt2"}, env)
    assert problem({"judge": "smollm2-135m"}, env) is None  # a pip package, not hub
    snapshot(tmp_path, "gpt2", {"config.json": "{}", "model.safetensors": ""})
    assert problem({"judge": "gpt2"}, env) is None


@pytest.mark.parametrize("argv, env, message", [
    (["-p", "device", "cuda"], fake(), "device='cuda': this machine shows no CUDA"),
    (["-p", "device", "cuda:3"], fake(H100, H100),
     "device='cuda:3': this machine shows 2 GPU(s)"),
    (["-p", "device", "mps"], fake(), "device='mps': this machine has no MPS"),
    (["-p", "device", "cuda", "-p", "dtype", "bfloat16"], fake(V100),
     "dtype='bfloat16': cuda:0 (V100, 32 GB) cannot run bfloat16"),
    (["-p", "model", LLADA], {}, f"model='{LLADA}' runs its own Python code"),
    (["-p", "model", LLADA, "-p", "trust_remote_code", "true"], {},
     f"run `hf download {LLADA}`"),
], ids=["cuda", "cuda:3", "mps", "bfloat16", "remote-code", "not-cached"])
def test_the_runner_refuses_in_one_line_before_any_kernel(tmp_path, argv, env,
                                                          message):
    out = tmp_path / "out.ipynb"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(ROOT), **env}
    env.pop("DLMSPEC_ALLOW_HUB", None)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dlmspec_min.plumbing.run",
                           str(NB04), *argv, "-o", str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    seconds = time.perf_counter() - t0
    print(f"{' '.join(argv)}: exit {proc.returncode} in {seconds:.1f} s")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert seconds < LIMIT_SECONDS
    assert not list(tmp_path.glob("out*.ipynb"))  # no kernel ran, nothing written


def test_without_an_injected_list_torch_answers():
    torch = pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if k != gpus.FAKE_ENV}
    found = gpus.visible_gpus(env)
    assert len(found) == (torch.cuda.device_count() if torch.cuda.is_available()
                          else 0)
    if not found:
        assert "no CUDA GPU" in problem({"device": "cuda"}, env)
