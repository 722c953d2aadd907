"""``make paper``: GPUs of its own per run, and the preflight table
(plumbing/gpu_plan.py), on machines injected through ``DLMSPEC_FAKE_GPUS``."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from dlmspec_min.plumbing import gpu_plan, gpus, paper

README = Path(__file__).resolve().parents[1] / "README.md"

H100 = {"name": "H100", "memory_gb": 80, "bf16": True}
A100_40 = {"name": "A100", "memory_gb": 40, "bf16": True}
V100 = {"name": "V100", "memory_gb": 32, "bf16": False}
GPU_RUN = {"device": "cuda", "device_map": "none"}
AUTO_RUN = {"device": "cuda", "device_map": "auto"}
CPU_RUN = {"device": "cpu", "device_map": "none"}


def machine(monkeypatch, *entries):
    monkeypatch.setenv(gpus.FAKE_ENV, json.dumps(list(entries)))
    monkeypatch.delenv(gpus.VISIBLE_ENV, raising=False)
    return gpus.visible_gpus()


def test_one_gpu_per_run_a_group_for_device_map_auto(monkeypatch):
    four = machine(monkeypatch, *[H100] * 4)
    values = {"a": GPU_RUN, "b": AUTO_RUN, "c": CPU_RUN, "d": GPU_RUN}
    assert gpu_plan.plan(values, 2, four) == {"a": 1, "b": 2, "c": 0, "d": 1}
    assert gpu_plan.plan(values, 1, four) == {"a": 1, "b": 4, "c": 0, "d": 1}
    # three GPU runs at most run at a time, whatever --jobs says
    assert gpu_plan.plan(values, 8, machine(monkeypatch, *[H100] * 3))["b"] == 1
    assert gpu_plan.plan({"c": CPU_RUN}, 8, []) == {"c": 0}


def test_more_concurrent_gpu_runs_than_gpus_are_refused_in_one_line(monkeypatch):
    two = machine(monkeypatch, H100, H100)
    values = {"a": GPU_RUN, "b": GPU_RUN, "c": GPU_RUN, "d": CPU_RUN}
    with pytest.raises(ValueError) as e:
        gpu_plan.plan(values, 4, two)
    assert str(e.value).startswith("--jobs 4 runs 3 GPU notebooks at a time, but 2 "
                                   "GPU(s) are visible")
    assert "PAPER_JOBS=2" in str(e.value) and "\n" not in str(e.value)
    assert gpu_plan.plan(values, 2, two) == {"a": 1, "b": 1, "c": 1, "d": 0}


def test_a_run_is_checked_against_the_least_capable_gpus_it_may_get(monkeypatch):
    mixed = machine(monkeypatch, H100, V100, A100_40)
    (worst,) = gpu_plan.least_capable(mixed, 1)
    assert (worst.name, worst.index, worst.id) == ("V100", 0, "1")
    assert [g.name for g in gpu_plan.least_capable(mixed, 2)] == ["V100", "A100"]
    assert [g.index for g in gpu_plan.least_capable(mixed, 2)] == [0, 1]


def test_the_pool_hands_gpus_out_round_robin(monkeypatch):
    pool = gpu_plan.GpuPool(machine(monkeypatch, *[H100] * 3))
    handed = []
    for _ in range(4):
        (g,) = pool.take(1)
        handed.append(g.id)
        pool.give_back([g])
    assert handed == ["0", "1", "2", "0"]
    first = pool.take(2)
    assert [g.id for g in first] == ["1", "2"]
    assert [g.id for g in pool.take(1)] == ["0"]  # the only one free
    pool.give_back(first[1:])
    assert [g.id for g in pool.take(1)] == ["2"]  # 1 and 0 are still out
    assert pool.take(0) == []


def record_runs(monkeypatch):
    """Replace each run by a short sleep that records the GPUs it was given and
    fails the test if two runs under way ever share one."""
    busy, seen, lock = set(), [], threading.Lock()

    def fake_run(cmd, env, cwd, stdout=None, stderr=None):
        ids = env.get(gpus.VISIBLE_ENV, "").split(",")
        with lock:
            assert not busy & set(ids), f"{ids} shared with {busy}"
            busy.update(ids)
            seen.append(ids)
        time.sleep(0.5 if len(seen) == 1 else 0.02)  # the first run holds its GPU
        with lock:
            busy.difference_update(ids)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(paper.subprocess, "run", fake_run)
    return seen


def test_runs_in_parallel_never_share_a_gpu(tmp_path, monkeypatch):
    four = machine(monkeypatch, *[H100] * 4)
    seen = record_runs(monkeypatch)
    needs = {nb.stem: 1 for nb in paper.notebooks()}
    paper.execute(tmp_path, None, {}, jobs=3, needs=needs, gpus=four)
    assert len(seen) == len(needs) and all(len(ids) == 1 for ids in seen)
    assert {ids[0] for ids in seen} == {"0", "1", "2", "3"}  # round robin, all used


def test_a_device_map_auto_run_gets_a_group(tmp_path, monkeypatch):
    four = machine(monkeypatch, *[H100] * 4)
    seen = record_runs(monkeypatch)
    needs = {nb.stem: 2 for nb in paper.notebooks()}
    paper.execute(tmp_path, None, {}, jobs=2, needs=needs, gpus=four)
    assert all(len(ids) == 2 for ids in seen)
    assert {tuple(sorted(ids)) for ids in seen} == {("0", "1"), ("2", "3")}


def run_main(monkeypatch, capsys, *argv, allow_hub=True):
    if allow_hub:
        monkeypatch.setenv("DLMSPEC_ALLOW_HUB", "1")  # the GSM8K prompt sources
    else:
        monkeypatch.delenv("DLMSPEC_ALLOW_HUB", raising=False)
    monkeypatch.setattr(paper, "build_book", lambda *a: a[0] / "index.html")
    code = paper.main(list(argv))
    return code, capsys.readouterr().err


def test_make_paper_prints_the_preflight_then_runs_each_on_its_own_gpu(
    tmp_path, monkeypatch, capsys
):
    machine(monkeypatch, *[H100] * 2)
    seen = record_runs(monkeypatch)
    code, err = run_main(monkeypatch, capsys, "--jobs", "2", "--out", str(tmp_path))
    assert code == 0, err
    assert err.index("== preflight") < err.index("dlmspec_min.plumbing.run")
    rows = {line.split()[0]: line for line in err.splitlines()
            if re.match(r"\d\d_", line)}
    assert list(rows) == [nb.stem for nb in paper.notebooks()]
    assert re.search(r"bfloat16\s+60 GB\s+30 min\s+1 x H100 \(80 GB\)\s+yes$",
                     rows["02_anchor_acceptance"])
    assert "GSAI-ML/LLaDA-8B-Base, GSAI-ML/LLaDA-8B-Instruct" in rows[
        "02_anchor_acceptance"]
    assert "estimated time: 190 min in all" in err
    assert len(seen) == len(rows) and {ids[0] for ids in seen} == {"0", "1"}
    assert re.findall(r"== CUDA_VISIBLE_DEVICES=(\d) ", err)  # each run says where


def test_the_preflight_says_where_the_memory_falls_short(tmp_path, monkeypatch,
                                                        capsys):
    machine(monkeypatch, A100_40)

    def refuse(*a, **k):
        raise AssertionError("--check runs nothing")

    monkeypatch.setattr(paper.subprocess, "run", refuse)
    code, err = run_main(monkeypatch, capsys, "--check", "--out", str(tmp_path))
    assert code == 0, err
    assert re.search(r"01_easy_first .* 1 x A100 \(40 GB\)\s+yes$", err, re.M)
    assert re.search(r"02_anchor_acceptance .* NO \(40 < 60 GB\)$", err, re.M)
    assert not (tmp_path / "notebooks").exists()


@pytest.mark.parametrize("fake, jobs, message", [
    ([H100, H100], "3", "error: --jobs 3 runs 3 GPU notebooks at a time, but 2 GPU(s)"),
    ([V100], "1", "error: 01_easy_first.md: parameter dtype='bfloat16': cuda:0 "
                  "(V100, 32 GB) cannot run bfloat16"),
    ([], "1", "error: 00_models.md: parameter device='cuda': this machine shows no "
              "CUDA GPU"),
], ids=["too-many-jobs", "no-bfloat16", "no-gpu"])
def test_a_flow_this_machine_cannot_run_stops_before_its_first_run(
    tmp_path, monkeypatch, capsys, fake, jobs, message
):
    machine(monkeypatch, *fake)

    def refuse(*a, **k):
        raise AssertionError("no notebook may run")

    monkeypatch.setattr(paper.subprocess, "run", refuse)
    code, err = run_main(monkeypatch, capsys, "--jobs", jobs, "--out", str(tmp_path))
    assert code == 2
    assert err.startswith(message) and err.count("\n") == 1, err


def test_a_profile_model_missing_from_the_cache_stops_the_flow(tmp_path, monkeypatch,
                                                              capsys):
    machine(monkeypatch, H100)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    brown = tmp_path / "brown.yaml"  # GSM8K needs the hub: Brown prompts instead
    brown.write_text("prompt_source: brown\n")
    code, err = run_main(monkeypatch, capsys, "--overrides", str(brown), "--out",
                         str(tmp_path / "o"), allow_hub=False)
    assert code == 2
    assert err.startswith("error: 00_models.md: parameter judge='gpt2': gpt2 is not "
                          "in the local Hugging Face cache")
    assert "hf download gpt2" in err and err.count("\n") == 1


def test_the_readme_shows_the_preflight_this_code_prints(tmp_path, monkeypatch,
                                                         capsys):
    """The README's table is the output of ``--check --jobs 2`` on two H100s."""
    shown = re.search(r"```text\n(== preflight.*?)```", README.read_text(), re.S)
    machine(monkeypatch, H100, H100)
    code, err = run_main(monkeypatch, capsys, "--check", "--jobs", "2", "--out",
                         str(tmp_path))
    assert code == 0 and err == shown.group(1)
