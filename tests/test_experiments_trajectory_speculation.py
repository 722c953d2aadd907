"""Trajectory speculation's measurement as a library function
(dlmspec_min.experiments.trajectory_speculation), on the tiny random-weight models
with a tiny random causal judge, and on synthetic inputs."""

import dataclasses
import re

import numpy as np
import pytest
import torch
from pages import expression_names, same_value, shown_glue_names

from dlmspec_min.experiments import trajectory_speculation as tr
from dlmspec_min.measures.judge import Judge
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing.claims import evaluate, load_registry

NOTEBOOK = REPO_ROOT / "notebooks" / "09_trajectory_speculation.md"
PAGE_ONLY = {"t_checks_passed", "t_checks_total", "t_runtime_s", "t_cpu_s",
             "t_paper_gain", "t_goal_gain", "t_gain_vs_paper", "t_gain_vs_goal"}
TIMING = re.compile(r"wall|overhead|row_cost|_s$|cpu_ratio|s_per_token")  # vary by run
SIZES = dict(gen_length=12, block_length=4, threshold=0.9, spec_budget=3, spec_low=0.1,
             thresholds=[0.5, 0.9], n_sweep=2, n_repeats=1, n_bootstrap=30, seed=0)
N_PROMPTS, PROMPT_LENGTH = 4, 4


@pytest.fixture(scope="module")
def judge(tiny_pair):
    """A random two-layer GPT-2 over the project tokenizer: scores, never sense."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    tok = tiny_pair.tokenizer
    cfg = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=16, n_layer=2,
                     n_head=2)
    return Judge(name="tiny", model=GPT2LMHeadModel(cfg), tokenizer=tok,
                 load_seconds=0.0, load_source="test")


@pytest.fixture(scope="module")
def prompt():
    g = torch.Generator().manual_seed(0)
    return torch.randint(5, 8000, (N_PROMPTS, PROMPT_LENGTH), generator=g)


@pytest.fixture(scope="module")
def result(tiny_pair, prompt, judge):
    return tr.measure(tiny_pair, tr.Config(**SIZES), prompt=prompt, judge=judge)


def test_every_value_the_page_and_the_checks_read_is_measured(result):
    checks = load_registry()["checks"]["trajectory"]
    rules = [*checks["rules"].values(), *checks["targets"].values()]
    wanted = (shown_glue_names(NOTEBOOK) - PAGE_ONLY) | expression_names(rules)
    assert len(wanted) > 40
    assert not wanted - set(result.values), sorted(wanted - set(result.values))
    assert not PAGE_ONLY & set(result.values)
    for rule in rules:  # the page's checks evaluate on these values
        assert evaluate(rule, result.values) in (True, False)


def test_exact_speculation_reproduces_its_base_policy(result):
    v = result.values
    assert v["t_batch_gap"] == 0.0  # the premise of exactness, on this CPU
    assert v["t_exact_match"] == 1 and v["t_hamming"] == 0
    assert v["t_exact_match_sweep"] == 1
    runs = result.arrays["results"]
    assert torch.equal(runs[tr.TRAJ].generated, runs[tr.DUAL].generated)
    assert 0 <= v["t_exact_match_stale"] <= 1 and 0 <= v["t_hamming_stale"] <= 1


def test_tokens_per_nfe_and_intervals(result):
    v, G = result.values, SIZES["gen_length"]
    assert v["t_tokens_per_nfe_vanilla"] == v["t_tokens_per_nfe_vanilla_lo"] == 1
    for key in tr.KEYS.values():
        assert 1 <= v[f"t_tokens_per_nfe_{key}"] <= G
        assert (v[f"t_tokens_per_nfe_{key}_lo"] <= v[f"t_tokens_per_nfe_{key}"]
                <= v[f"t_tokens_per_nfe_{key}_hi"]), key
        assert 0 <= v[f"t_agree_{key}"] <= 1 and v[f"t_ppl_{key}"] > 1
    for key in ["threshold", "dual", "vanilla"]:
        assert (v[f"t_speedup_vs_{key}_lo"] <= v[f"t_speedup_vs_{key}"]
                <= v[f"t_speedup_vs_{key}_hi"])
    runs = result.arrays["results"]
    assert v["t_tokens_per_nfe_traj"] == pytest.approx(
        N_PROMPTS * G / runs[tr.TRAJ].nfe.sum().item())
    # a paired ratio of sums: tokens per NFE of speculation over the threshold decode's
    assert v["t_speedup_vs_threshold"] == pytest.approx(
        v["t_tokens_per_nfe_traj"] / v["t_tokens_per_nfe_threshold"])
    exact = [v[f"t_tokens_per_nfe_{k}"] for k in ["threshold", "dual", "traj"]]
    assert v["t_best_tokens_per_nfe"] == max(exact)
    assert v["t_best_accelerator"] in tr.EXACT_ACCELERATORS


def test_acceptance_lengths_recomputed_from_the_arrays(result):
    v, steps = result.values, np.array(result.arrays["steps_per_verify"])
    runs = result.arrays["results"]
    assert len(steps) == sum(len(r) for r in runs[tr.TRAJ].spec.steps_per_verify)
    assert steps.min() >= 1
    assert v["t_mean_steps_per_verify"] == pytest.approx(steps.mean())
    assert v["t_share_single_step"] == pytest.approx((steps == 1).mean())
    sizes = result.arrays["base_step_sizes"]
    assert sizes.sum() == N_PROMPTS * SIZES["gen_length"]  # every token committed once
    assert v["t_base_tokens_per_step"] == pytest.approx(sizes.mean())


def test_the_sweep_table(result):
    v, wide, long = result.values, result.tables["sweep"], result.arrays["sweep"]
    assert list(wide.index) == SIZES["thresholds"] and len(long) == 2 * len(wide)
    assert np.allclose(wide["speedup"], wide["trajectory speculation"] / wide[tr.DUAL])
    assert v["t_sweep_min_speedup"] == wide["speedup"].min()
    assert v["t_sweep_lowest_threshold"] == 0.5 and v["t_n_sweep"] == 2
    # at the main threshold the sweep reuses the main runs' first n_sweep prompts
    runs = result.arrays["results"]
    nfe = runs[tr.DUAL].nfe[:SIZES["n_sweep"]].sum().item()
    assert wide.loc[0.9, tr.DUAL] == pytest.approx(SIZES["n_sweep"] * 12 / nfe)


def test_tables_follow_the_values(result):
    table, v = result.tables["decoders"], result.values
    assert list(table.index) == list(tr.KEYS)  # the tiny model has a KV cache
    assert table.loc[tr.TRAJ, "exact_match"] == v["t_exact_match"]
    assert table.loc[tr.VANILLA, "base_policy"] == "itself"
    assert v["t_token_forwards_ratio"] == pytest.approx(
        table.loc[tr.TRAJ, "token_forwards"] / table.loc[tr.DUAL, "token_forwards"])
    sp = result.tables["speedups"]
    assert sp.loc["dual", "speedup in tokens/NFE"] == v["t_speedup_vs_dual"]
    paper = {"fast_dllm_tokens_per_step": 3.25, "traj_tokens_per_step_before": 2.6,
             "traj_tokens_per_step_after": 4.3}
    pt = tr.paper_table(result, paper)
    assert pt.iloc[3, 0] == pytest.approx(4.3 / 2.6)
    assert pt.iloc[3, 1] == pytest.approx(pt.iloc[2, 1] / pt.iloc[1, 1])
    assert len(tr.draw_acceptance(result).axes) == 2
    assert len(tr.draw_frontier(result).axes) == 1


def test_the_same_inputs_give_the_same_values(tiny_pair, prompt, judge, result):
    again = tr.measure(tiny_pair, tr.Config(**SIZES), prompt=prompt, judge=judge)
    assert list(again.values) == list(result.values)
    differ = [k for k, v in result.values.items()
              if not TIMING.search(k) and not same_value(again.values[k], v)]
    assert not differ


def test_without_a_kv_cache_there_is_no_stale_lookahead():
    cfgs = tr.decoders(False, gen_length=8, block_length=4, threshold=0.9,
                       spec_budget=3, spec_low=0.1)
    assert tr.STALE not in cfgs
    assert cfgs[tr.DUAL][0].cache == "none" and cfgs[tr.TRAJ][0].cache == "none"
    assert cfgs[tr.TRAJ][1] == tr.DUAL and cfgs[tr.DUAL][1] == tr.THRESHOLD
    cached = tr.decoders(True, gen_length=8, block_length=4, threshold=0.9,
                         spec_budget=3, spec_low=0.1)
    assert cached[tr.STALE][0].lookahead == "stale"


def test_the_batch_invariance_check_needs_four_prompts(tiny_pair, prompt):
    with pytest.raises(ValueError, match="n_samples >= 4"):
        tr.batch_gap(tiny_pair.target, prompt[:3], 8, 4)


# --- where the forwards go (issue 57, item 3) ----------------------------------------


def test_forward_study_on_a_toy():
    from conftest import CachedToyDenoiser, make_prompt

    from dlmspec_min.decoding.config import DecodeConfig

    den = CachedToyDenoiser(seed=5, sharpness=8.0)
    prompt = make_prompt(6, 4, seed=1)
    spec = DecodeConfig(gen_length=24, block_length=8, rule="threshold",
                        threshold=0.9, cache="dual", speculate="trajectory",
                        spec_budget=3)
    out = tr.forward_study(den, prompt, spec, n_bootstrap=50, seed=0)
    for key in ("one_token_share", "draft_hit"):
        assert 0 <= out[f"{key}_lo"] <= out[key] <= out[f"{key}_hi"] <= 1
    # the oracle drafts the base's own next states: no draft of its size does better
    assert out["oracle_gain"] >= out["gain"] > 1
    assert out["oracle_steps_per_call"] <= 4  # root + 3 nodes
    assert out["oracle_gain_lo"] <= out["oracle_gain"] <= out["oracle_gain_hi"]
    again = tr.forward_study(den, prompt, spec, n_bootstrap=50, seed=0)
    assert again == out  # same seed, same numbers
    with pytest.raises(ValueError, match="exact speculative config"):
        tr.forward_study(den, prompt, dataclasses.replace(spec, speculate="none"))
    with pytest.raises(ValueError, match="exact speculative config"):
        tr.forward_study(den, prompt, dataclasses.replace(spec, spec_accept="subset"))


def test_oracle_reaches_the_budget_on_every_call_it_can():
    """With no cache and one block the oracle's call advances budget + 1 base
    steps until the trajectory ends: the figure is the draft's ceiling."""
    from conftest import CachedToyDenoiser, make_prompt

    from dlmspec_min.decoding.config import DecodeConfig
    from dlmspec_min.decoding.decode import generate

    den = CachedToyDenoiser(seed=2, sharpness=1.0)
    prompt = make_prompt(3, 4, seed=2)
    base = DecodeConfig(gen_length=16, rule="threshold", threshold=0.99)
    ref = generate(den, prompt, base)
    for budget in (0, 2, 5):
        spec = dataclasses.replace(base, speculate="trajectory", spec_budget=budget)
        out = tr.decode_oracle(den, prompt, spec, ref)
        assert torch.equal(out.tokens, ref.tokens)
        for steps, n in zip(out.spec.steps_per_verify, ref.nfe.tolist(), strict=True):
            full, last = divmod(n, budget + 1)
            assert steps == [budget + 1] * full + ([last] if last else [])


def test_row_costs_grow_with_rows(tiny_pair, prompt):
    costs = tr.row_costs(tiny_pair.target, prompt, 4, repeats=3)
    assert list(costs) == list(tr.ROW_COUNTS) and costs[1] == 1.0
    assert costs[16] > costs[1]  # sixteen rows never cost what one does on a CPU
    with pytest.raises(ValueError, match="repeats must be"):
        tr.row_costs(tiny_pair.target, prompt, 4, repeats=0)


def test_forward_study_reads_the_callers_decodes():
    """Given the base's and the exact run's decodes, the study does not decode
    them again and returns the same figures; per-prompt forwards come back."""
    from conftest import CachedToyDenoiser, make_prompt

    from dlmspec_min.decoding.config import DecodeConfig
    from dlmspec_min.decoding.decode import generate

    den = CachedToyDenoiser(seed=5, sharpness=8.0)
    prompt = make_prompt(6, 4, seed=1)
    spec = DecodeConfig(gen_length=24, block_length=8, rule="threshold",
                        threshold=0.9, cache="dual", speculate="trajectory",
                        spec_budget=3, spec_draft="rank")
    base = generate(den, prompt, dataclasses.replace(spec, speculate="none"))
    run = generate(den, prompt, spec)
    alone = tr.forward_study(den, prompt, spec, n_bootstrap=50, seed=0)
    given = tr.forward_study(den, prompt, spec, n_bootstrap=50, seed=0, base=base,
                             run=run)
    assert given == alone
    assert given["nfe"] == run.nfe.tolist()
    assert given["base_nfe_rows"] == base.nfe.tolist()
    assert given["gain"] == pytest.approx(sum(base.nfe.tolist()) / sum(given["nfe"]))
    wrong = dataclasses.replace(run, tokens=run.tokens.flip(0))  # not the base's
    with pytest.raises(RuntimeError, match="left its base policy"):
        tr.forward_study(den, prompt, spec, n_bootstrap=50, seed=0, base=base,
                         run=wrong)


def test_wall_ratio_times_an_exact_setting_against_its_base(tiny_pair, prompt):
    from dlmspec_min.decoding.config import DecodeConfig

    base = DecodeConfig(gen_length=8, block_length=4, rule="threshold", cache="dual")
    spec = tr.cpu_setting(dataclasses.replace(base, speculate="trajectory"))
    assert spec.spec_budget == tr.CPU_BUDGET and spec.spec_verify == "tree"
    out = tr.wall_ratio(tiny_pair.target, prompt, base, spec, repeats=2,
                        n_bootstrap=50, seed=0)
    assert 0 < out["ratio_lo"] <= out["ratio"] <= out["ratio_hi"]
    assert out["ratio"] == pytest.approx(out["spec_s_per_token"]
                                         / out["base_s_per_token"])
    assert out["nfe_spec"] <= out["nfe_base"]
    with pytest.raises(ValueError, match="repeats must be"):
        tr.wall_ratio(tiny_pair.target, prompt, base, spec, repeats=0)
    other = dataclasses.replace(spec, threshold=1e-6)  # all at once: not the base
    with pytest.raises(RuntimeError, match="left its base policy"):
        tr.wall_ratio(tiny_pair.target, prompt, base, other, repeats=1,
                      n_bootstrap=10)


def test_targets_are_read_from_the_registry():
    checks = load_registry()["checks"]["trajectory"]
    t = tr.targets(checks)
    paper = checks["paper"]
    assert t["paper_gain"] == paper["traj_tokens_per_step_after"] / paper[
        "traj_tokens_per_step_before"]
    assert 1.6 < t["paper_gain"] < 1.7 and t["goal_gain"] == 2.0
    broken = {**checks, "worlds": {"math": {"targets": {
        "tokens_per_nfe_2x_threshold": "t_gain_traj > 2"}}}}
    with pytest.raises(ValueError, match="not 't_speedup_vs_threshold"):
        tr.targets(broken)
    assert tr.against(1.7, 1.65) == "at or above" and tr.against(1.6, 1.65) == "below"


def test_answer_scorer_reads_the_math_worlds_answers():
    from dlmspec_min.worlds import MATH, get_world

    tok = MATH.tokenizer()
    assert tr.answer_scorer(get_world("prose"), tok, 2, 0) is None
    score = tr.answer_scorer(MATH, tok, 2, 0)
    answers = MATH.answers(2, seed=0)
    right = [tok.encode(f"#### {a}", add_special_tokens=False) for a in answers]
    width = max(map(len, right))
    gen = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in right])
    assert score(gen).tolist() == [1.0, 1.0]
    assert score(gen.flip(0)).tolist() == [float(answers[0] == answers[1])] * 2


def test_gains_said_give_each_gain_with_its_interval_and_its_standing():
    v = {"t_gain_traj": 1.691, "t_gain_traj_lo": 1.597, "t_gain_traj_hi": 1.794,
         "t_gain_fd_thr": 1.651, "t_gain_fd_thr_lo": 1.534, "t_gain_fd_thr_hi": 1.79,
         "t_equal_fd_thr": 0.9375, "t_gain_fd_one": 0.68, "t_gain_fd_one_lo": 0.57,
         "t_gain_fd_one_hi": 0.79, "t_equal_fd_one": 0.9062}
    said = tr.gains_said(v, {"paper_gain": 4.3 / 2.6, "goal_gain": 2.0})
    assert said["t_gain_traj_said"] == ("1.69 [1.60, 1.79]x (at or above the paper's "
                                        "1.65x, below our goal 2.0x)")
    assert said["t_gain_fd_thr_said"] == ("1.65 [1.53, 1.79]x, token-equal to the "
                                          "base on 94%")
    assert said["t_gain_fd_one_said"].startswith("0.68 [0.57, 0.79]x, token-equal")
