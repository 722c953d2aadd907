"""``make paper``: the paper-scale profiles, and the whole flow end to end at CI size.

The end-to-end test runs ``make paper PAPER_OVERRIDES=...`` into a temporary
folder: every notebook executes through the runner with its paper-scale profile
and shrunk overrides, then the second book is built from the executed notebooks.
The profiles' own registry names (``GSAI-ML/LLaDA-8B-Base``, ``-Instruct``) load
the remote-code stand-ins of ``tests/standins.py::write_hub_cache`` from a
temporary ``HF_HOME``, with ``trust_remote_code: true`` as profiled, under the
pinned transformers (whose 4.x line runs the paper models' own code), so a broken
paper-scale path fails here. The overrides (``tests/paper-shrink.yaml``) shrink
the sizes and swap what this machine lacks (GPU, GSM8K, GPT-2); they name no
target or draft.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from dlmspec_min.decoding.denoisers import PAPER_MODELS
from dlmspec_min.plumbing import paper, params, run

ROOT = Path(__file__).resolve().parents[1]
SHRINK = ROOT / "tests" / "paper-shrink.yaml"
MODEL_NAMES = ("model", "draft", "large_model", "small_model")
PAPER_FIGURE_PROMPTS = "gsm8k:main:test:question"  # Fast-dLLM's 3.25 tokens/step
STANDIN_NAMES = ("GSAI-ML/LLaDA-8B-Base", "GSAI-ML/LLaDA-8B-Instruct")  # the profiles'


def flow_environment(tmp_path: Path) -> dict:
    """The shrunk flow's environment: offline, one thread, the stand-ins' HF_HOME."""
    from standins import write_hub_cache

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf"))
    env.pop("DLMSPEC_ALLOW_HUB", None)
    write_hub_cache(tmp_path / "hf", STANDIN_NAMES)
    return env


def test_the_shrink_file_names_no_model():
    """The flow must run the profiles' registry names, not a substitute."""
    assert not set(yaml.safe_load(SHRINK.read_text())) & {*MODEL_NAMES,
                                                         "trust_remote_code"}


def test_every_notebook_has_a_paper_profile_with_the_papers_setting(monkeypatch):
    monkeypatch.setenv("DLMSPEC_ALLOW_HUB", "1")  # the GSM8K prompt sources
    values = paper.check_all(None)  # every profile passes the runner's checks
    assert list(values) == [nb.stem for nb in paper.notebooks()]
    estimates = paper.estimates()  # data the preflight reads, beside the arithmetic
    # what each page runs: its profile over its defaults (a profile states only
    # what differs, tests/test_notebook_worlds.py), so the paper's setting is
    # checked where it runs, written in the profile or not
    ran = paper.with_defaults(values)
    for stem, profile in values.items():
        v = ran[stem]
        assert "estimate" not in profile, stem  # not passed on as a parameter
        if "threshold" in v:  # Fast-dLLM's threshold, the paper's, on every page
            assert v["threshold"] == 0.9, stem
        header = paper.profile_of(ROOT / f"notebooks/{stem}.md").read_text()
        assert "Estimate" in header and "GB" in header and "min" in header, stem
        assert estimates[stem]["gpu_memory_gb"] > 0 and estimates[stem]["minutes"] > 0
        assert v["device"] == "cuda", stem
        if stem == "00_models":  # the embedded models' chapter: the judge changes
            assert v["judge"] == "gpt2"
            continue
        target = v.get("large_model", v["model"])
        assert target in PAPER_MODELS and target.startswith("GSAI-ML/LLaDA-8B"), stem
        assert v["trust_remote_code"] is True and v["dtype"] == "bfloat16", stem
        if "draft" in v:  # only LLaDA shares LLaDA's vocabulary; 07 drafts for itself
            assert v["draft"].startswith("GSAI-ML/LLaDA-8B"), stem
            assert (v["draft"] == target) == (stem == "07_strong_model"), stem
        if "judge" in v:
            assert v["judge"] == "gpt2", stem
        if stem != "07_strong_model":  # 07's embedded reference models take 256
            assert (v["gen_length"], v["block_length"]) == (256, 32), stem
    for stem in ("03_win_condition", "09_trajectory_speculation"):
        assert values[stem]["prompt_source"] == PAPER_FIGURE_PROMPTS


def test_every_numbered_notebook_is_profiled_or_left_out_with_a_reason():
    numbered = {nb.stem for nb in (ROOT / "notebooks").glob("[0-9][0-9]_*.md")}
    profiled = {p.stem for p in paper.PROFILES.glob("*.yaml")}
    assert profiled == {nb.stem for nb in paper.notebooks()}
    assert numbered == profiled | set(paper.NOT_AT_PAPER_SCALE)
    assert all(paper.NOT_AT_PAPER_SCALE.values())


def test_without_hub_access_the_gsm8k_profiles_are_refused_in_one_line(monkeypatch):
    monkeypatch.delenv("DLMSPEC_ALLOW_HUB", raising=False)
    with pytest.raises(run.ParameterError, match=r"^03_win_condition.md: .*"
                       r"set DLMSPEC_ALLOW_HUB=1") as e:
        paper.check_all(None)
    assert "\n" not in str(e.value)


def test_a_bad_override_stops_the_flow_before_any_notebook_runs(
    tmp_path, monkeypatch, capsys
):
    def refuse(*a, **k):
        raise AssertionError("no notebook may run after a bad parameter")

    monkeypatch.setattr(paper.subprocess, "run", refuse)
    bad = tmp_path / "bad.yaml"
    bad.write_text(SHRINK.read_text() + "block_length: 3\n")  # 20 % 3 != 0
    assert paper.main(["--overrides", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: 00_models.md: parameters gen_length, block_length")
    assert "\n" not in err


def test_jobs_below_one_are_refused_in_one_line(tmp_path, capsys):
    assert paper.main(["--jobs", "0", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == "error: --jobs must be at least 1, not 0"
    assert not (tmp_path / "o").exists()


def test_runs_in_parallel_stop_at_a_failure_and_show_its_log(
    tmp_path, monkeypatch, capsys
):
    """With --jobs 2 a failing run's exit code ends the flow, its log's end is
    printed, and the runs not yet started never start."""
    started = []

    def fake_run(cmd, env, cwd, stdout=None, stderr=None):
        # [python, -m, dlmspec_min.plumbing.run, notebook, ...]
        stem = Path(cmd[3]).stem
        started.append(stem)
        if stem == "01_easy_first":
            stdout.write("Traceback ...\nValueError: the stand-in broke\n")
            stdout.flush()
            return subprocess.CompletedProcess(cmd, 3)
        if stem == "00_models":  # still running when 01 fails
            time.sleep(0.5)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(paper.subprocess, "run", fake_run)
    with pytest.raises(SystemExit) as e:
        paper.execute(tmp_path, None, {}, jobs=2)
    assert e.value.code == 3
    err = capsys.readouterr().err
    assert "01_easy_first.md failed" in err and "the stand-in broke" in err
    # the failing run stops its worker before it takes the next notebook, and the
    # other worker after its run: nothing else starts, however the threads interleave
    # (which of the first two starts first is up to the threads)
    assert sorted(started) == ["00_models", "01_easy_first"]


def test_runs_in_parallel_return_every_time_in_page_order(tmp_path, monkeypatch):
    monkeypatch.setattr(paper.subprocess, "run",
                        lambda cmd, **k: subprocess.CompletedProcess(cmd, 0))
    seconds = paper.execute(tmp_path, None, {}, jobs=3)
    assert list(seconds) == [nb.stem for nb in paper.notebooks()]
    assert all(s >= 0 for s in seconds.values())
    assert len(list((tmp_path / "logs").glob("*.log"))) == len(seconds)


def test_every_page_link_in_the_paper_book_names_a_page_it_has():
    """The paper-scale book has the numbered pages and the formalization, not
    the dashboard or the seed page: a page's link elsewhere becomes plain text
    (a link ``-W`` would refuse, as 5dd0591's link from C5 to the dashboard was)."""
    import re

    values = {nb.stem: {} for nb in paper.notebooks()}
    here = {"book/formalization", *(f"notebooks/{stem}" for stem in values)}
    rewritten = 0
    for nb in paper.notebooks():
        text = nb.read_text()
        kept = paper._main_book_only(text, values, "notebooks")
        rewritten += kept != text
        for target in re.findall(r"\{doc\}`(?:[^`<]*<)?([^`>]+)>?`", kept):
            doc = target[1:] if target.startswith("/") else f"notebooks/{target}"
            assert doc in here, (nb.name, target)
    assert rewritten, "no page links to the dashboard: this test would check nothing"


def test_every_override_is_taken_by_some_notebook():
    declared = set()
    for nb in paper.notebooks():
        declared |= set(params.notebook_parameters(nb))
    assert set(yaml.safe_load(SHRINK.read_text())) <= declared


def test_make_paper_end_to_end_at_ci_size(tmp_path):
    env = flow_environment(tmp_path)
    out = tmp_path / "paper"
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["make", "-o", "data", "paper", f"PY={sys.executable}", "PAPER_JOBS=2",
         f"PAPER_OVERRIDES={SHRINK}", f"PAPER_DIR={out}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads((out / "runs.json").read_text())
    profiles = {nb.stem: yaml.safe_load(paper.profile_of(nb).read_text())
                for nb in paper.notebooks()}
    assert set(runs["parameters"]) == {nb.stem for nb in paper.notebooks()}
    for stem, v in runs["parameters"].items():
        executed = out / "notebooks" / f"{stem}.ipynb"
        assert executed.is_file(), stem
        assert not executed.with_name(f"{stem}.partial.ipynb").exists(), stem
        assert v["device"] == "cpu"  # the overrides won over the profile
        # the profile's own registry names and opt-in reached the notebook
        assert v == {**v, **{k: w for k, w in profiles[stem].items()
                             if k in (*MODEL_NAMES, "trust_remote_code")}}, stem
        page = out / "_build" / "html" / "notebooks" / f"{stem}.html"
        assert page.is_file(), stem
    # the executed values reach the rendered pages (glue read from the outputs)
    from dlmspec_min.plumbing.claims import read_glued

    glued = read_glued(out / "notebooks" / "03_win_condition.ipynb")
    page = (out / "_build/html/notebooks/03_win_condition.html").read_text()
    assert f'Verdict: <span class="pasted-text">{glued["c3_verdict"]}</span>' in page
    glued = read_glued(out / "notebooks" / "09_trajectory_speculation.ipynb")
    page = (out / "_build/html/notebooks/09_trajectory_speculation.html").read_text()
    share = f'<span class="pasted-text">{glued["t_exact_match"]:.0%}</span> of the'
    assert share in page
    # a claim page's table of the book's worlds is one line here (one world)
    page = (out / "_build/html/notebooks/02_anchor_acceptance.html").read_text()
    assert 'class="claim-worlds-elsewhere"' in page and "claim-worlds" not in (
        page.replace("claim-worlds-elsewhere", ""))
    page = (out / "_build/html/notebooks/09_trajectory_speculation.html").read_text()
    assert 'class="claim-worlds-elsewhere"' in page and "check-worlds" not in page
    assert (out / "_build/html/index.html").is_file()
    print(f"make paper at CI size on the LLaDA stand-ins: {elapsed:.0f} s")
