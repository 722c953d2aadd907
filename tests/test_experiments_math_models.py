"""The models page's math-world measurement on tiny random models."""

import math
import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from dlmspec_min.decoding.denoisers import Denoiser
from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion
from dlmspec_min.experiments import math_models as page
from dlmspec_min.experiments.common import Measurement
from dlmspec_min.experiments.models import Config as sizes
from dlmspec_min.plumbing.claims import evaluate, load_registry
from dlmspec_min.texts.tokenizer import EOS_ID, MASK_ID
from dlmspec_min.training import train_math

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tok():
    return page.WORLD.tokenizer()


def tiny(tok, seed=0):
    torch.manual_seed(seed)
    cfg = DLMConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                    num_hidden_layers=1, num_attention_heads=2,
                    max_position_embeddings=train_math.SEQ_LEN)
    return Denoiser(DLMForMaskedDiffusion(cfg), MASK_ID)


def test_grade_reads_answers_endings_and_empty_texts(tok):
    problems = page.WORLD.problems(3)
    def row(text):
        ids = tok(text, add_special_tokens=False)["input_ids"] if text else []
        return ids + [EOS_ID] * (12 - len(ids))
    gen = torch.tensor([row(f"#### {problems[0].answer}"), row("Mia has 4 . #### 1"),
                        row("")])
    g = page.grade(tok, gen, problems)
    assert g.correct.tolist() == [True, problems[1].answer == 1, False]
    assert g.ended.tolist() == [True, True, False]
    assert g.no_text.tolist() == [False, False, True]
    no_eos = torch.tensor([tok(f"#### {problems[0].answer}",
                               add_special_tokens=False)["input_ids"]])
    assert not page.grade(tok, no_eos, problems[:1]).ended.item()


def test_measure_on_tiny_models_reports_a_missing_one(tok):
    models = {"small": tiny(tok, 0), "base": tiny(tok, 1), "large": None}
    r = page.measure(models, tok, sizes(math_problems=6, math_unseen=4,
                                        math_regime_problems=3, n_bootstrap=50),
                     batch_size=4)
    v = r.values
    for key in ("m_math_small_answer_acc", "m_math_base_answer_acc",
                "m_math_threshold_tokens_per_nfe", "m_math_ended_share"):
        assert 0 <= v[key] <= (train_math.GEN_LENGTH if "tokens" in key else 1), key
    k = "m_math_threshold_tokens_per_nfe"
    assert v[f"{k}_lo"] <= v[k] <= v[f"{k}_hi"]
    assert math.isnan(v["m_math_large_answer_acc"])
    assert v["m_math_regime_problems"] == 3  # every key the page's text glues
    page_text = (ROOT / "notebooks" / "00_models.md").read_text()
    glued = set(re.findall(r"\{glue:text\}`(m_math_[a-z0-9_]+)", page_text))
    assert glued - {"m_math_vocabulary"} <= set(v), glued - set(v)
    targets = load_registry()["checks"]["models"]["targets"]
    math_rules = [r for r in targets.values() if "m_math_" in r]
    assert len(math_rules) == 7
    for size in ("small", "base"):  # the skills (issue 34), measured per rung
        for skill in page.SKILLS:
            x = v[f"m_math_{size}_{skill}"]
            assert math.isnan(x) or 0 <= x <= 1, (size, skill)
    assert all(math.isnan(v[f"m_math_large_{s}"]) for s in page.SKILLS)
    assert not evaluate(targets["math_large_copies_90"], v)
    assert set(page.SKILLS.values()) <= set(r.tables["ladder"].columns)
    for rule in math_rules:  # every name is measured; NaN reads as not met
        assert evaluate(rule, v) in (True, False)
    assert not evaluate(targets["math_large_answer_acc_0.3_to_0.95"], v)
    assert v["m_math_large_vs_base"] == "not measured (large not trained yet)"
    assert v["m_math_base_vs_small"].startswith(("base above", "base below",
                                                 "base and small within"))
    assert r.tables["ladder"].loc["large", "status"] == "not trained yet"
    training = page.training_table(["small", "nonesuch"])  # counts stay integers
    assert str(training["steps"].dtype) == "Int64"
    assert training.loc["small", "steps"] == train_math.STEPS["small"]
    assert training.loc["small", "peak learning rate"] == train_math.lr_for("small")
    assert training.loc["nonesuch", "status"] == "not trained yet"
    assert pd.isna(training.loc["nonesuch", "steps"])
    blocks = r.tables["block_lengths"]  # how the block length moves the regime
    assert list(blocks.index) == page.block_lengths(train_math.GEN_LENGTH)
    assert blocks.index[-1] == train_math.BLOCK_LENGTH == v["m_math_block_length"]
    own = f"m_math_block{train_math.BLOCK_LENGTH}_tokens_per_nfe"
    assert v[own] == pytest.approx(v["m_math_threshold_tokens_per_nfe"])
    assert ((blocks.low <= blocks["tokens per forward"])
            & (blocks["tokens per forward"] <= blocks.high)).all()
    assert page.block_lengths(96) == [8, 16, 24, 32, 48, 96]
    reg = r.tables["regime"]
    assert page.BASELINE in reg.index and len(reg) >= 3
    assert reg.loc[page.BASELINE, "tokens_per_forward"] == pytest.approx(1.0)
    assert reg.answer_accuracy.between(0, 1).all()
    assert list(r.tables["examples"].columns[:2]) == ["question", "reference"]
    assert (r.tables["generator"].templates.sum() == v["m_math_templates"]
            == len(train_math.DIALS.template_names))
    assert v["m_math_prompt_length"] == train_math.PROMPT_LENGTH
    if v["m_math_n_unseen"] == 0:  # a world that holds no template back
        assert math.isnan(v["m_math_small_unseen_answer_acc"])
        assert "unseen templates" not in r.tables["ladder"].columns
    with pytest.raises(ValueError, match="math_problems must be"):
        page.measure(models, tok, sizes(math_problems=0))


def test_the_free_ladder_is_measured_on_its_own_world_under_its_own_names(tok):
    from dlmspec_min.texts import problems as P
    from dlmspec_min.worlds import get_world
    from dlmspec_min.worlds.gsm import MATH as MATH_FREE
    from dlmspec_min.worlds.gsm import MATH_NARROW

    # since 2026-12-06 the claims' math world is the free one; narrow is the page's
    assert get_world("math") is MATH_FREE
    assert get_world("math_narrow") is MATH_NARROW
    assert MATH_FREE.dials == P.FREE
    assert MATH_NARROW.dials == P.NARROW == page.WORLD.dials
    assert MATH_FREE.target == "dlmspec/math_free/base"
    assert MATH_NARROW.target == "dlmspec/math/base"
    assert MATH_NARROW.name == "math_narrow"
    assert page.ladder_folder(MATH_FREE) == train_math.ladder_dir("math")
    assert page.ladder_folder() == train_math.ladder_dir("math_narrow")
    # its held-out problems are written with its dials: solutions with openers
    openers = {w for w in P.OPENERS if w}
    assert any(set(p.solution_text.split()) & openers for p in MATH_FREE.problems(40))
    assert not any(set(p.solution_text.split()) & openers
                   for p in MATH_NARROW.problems(40))
    models = {"small": tiny(tok, 0), "base": tiny(tok, 1), "large": None}
    goals = load_registry()["checks"]["models"]["free_targets"]
    r = page.free_ladder(tok, goals, evaluate,
                         sizes(math_problems=4, math_unseen=2, math_regime_problems=2,
                               n_bootstrap=20), models, batch_size=4)
    v = r.values
    assert v and all(k.startswith("m_free_") for k in v)
    assert v["m_free_targets_total"] == len(r.tables["targets"]) == 5
    assert v["m_free_targets_met"] == int(r.tables["targets"].met.sum())
    assert 0 <= v["m_free_threshold_tokens_per_nfe"] <= train_math.GEN_LENGTH
    page_text = (ROOT / "notebooks" / "00_models.md").read_text()
    glued = set(re.findall(r"\{glue:text\}`(m_free_[a-z0-9_]+)", page_text))
    assert glued and glued <= set(v), glued - set(v)
    for rule in goals.values():  # every name is measured; NaN reads as not met
        assert evaluate(rule, v) in (True, False)
    assert not r.tables["targets"].loc["free_large_copies_90", "met"]  # no large here
    if (train_math.ladder_dir("math") / "base" / "training.json").exists():
        assert r.tables["training"].loc["base", "status"] == "trained"
    fig = page.draw_ladder(r.arrays["logs"])  # the committed rungs' own logs
    if len(r.arrays["logs"]):
        assert [a.get_title() for a in fig.axes] == list(page.FREEDOM_CURVES.values())
    assert page.draw_ladder(pd.DataFrame()) is None
    side = page.side_by_side(r.tables["regime"], {"free": r, "gone": Measurement()})
    assert {"prose", "free"} == set(side.index.get_level_values(0))
    with pytest.raises(ValueError, match="prefix"):
        page.measure(models, tok, sizes(math_problems=2), world=MATH_FREE,
                     prefix="free")


def test_the_first_world_s_kept_ladder_is_measured_on_its_own_world(tmp_path,
                                                                     monkeypatch):
    r = page.first_world(n_problems=4, n_bootstrap=20)
    v = r.values
    assert v["m_first_n_problems"] == 4 and v["m_first_templates"] >= 40
    for size in page.FIRST_SIZES:
        assert r.tables["ladder"].loc[size, "status"] == "kept"
        for key in ("answer_acc", *page.SKILLS):
            x = v[f"m_first_{size}_{key}"]
            assert math.isnan(x) or 0 <= x <= 1, (size, key)
        assert (v[f"m_first_{size}_answer_acc_lo"] <= v[f"m_first_{size}_answer_acc"]
                <= v[f"m_first_{size}_answer_acc_hi"])
    page_text = (ROOT / "notebooks" / "00_models.md").read_text()
    glued = set(re.findall(r"\{glue:text\}`(m_first_[a-z0-9_]+)", page_text))
    assert glued and glued <= set(v), glued - set(v)
    monkeypatch.setattr(page, "first_world_dir", lambda: tmp_path)
    gone = page.first_world(n_problems=2, n_bootstrap=20)
    assert math.isnan(gone["m_first_small_answer_acc"])
    assert gone.tables["ladder"].loc["small", "status"].startswith("missing")
    with pytest.raises(ValueError, match="n_problems must be"):
        page.first_world(n_problems=0)


def test_the_ladder_s_ordering_is_read_from_the_intervals():
    def rungs(**acc):  # size -> (lo, point, hi)
        return {f"m_math_{s}_answer_acc{k}": x for s, (lo, p, hi) in acc.items()
                for k, x in (("_lo", lo), ("", p), ("_hi", hi))}

    v = rungs(small=(0.60, 0.65, 0.70), base=(0.50, 0.55, 0.60),
              large=(0.71, 0.75, 0.80), top=(0.75, 0.8, 0.85))
    within = "within each other's intervals"
    assert page.ordering(v, "base", "small") == f"base and small {within}"
    assert page.ordering(v, "large", "small") == "large above small, intervals apart"
    assert page.ordering(v, "small", "top") == "small below top, intervals apart"
    assert page.ordering(v, "large", "top") == f"large and top {within}"
    v.update(rungs(large=(math.nan,) * 3))
    assert page.ordering(v, "large", "base") == "not measured (large not trained yet)"


def test_without_base_the_regime_figures_are_nan(tok):
    r = page.measure({"small": tiny(tok), "base": None, "large": None}, tok,
                     sizes(math_problems=2, math_unseen=2, n_bootstrap=20))
    assert math.isnan(r["m_math_threshold_tokens_per_nfe"])
    assert math.isnan(r["m_math_ended_share"]) and "regime" not in r.tables
    assert math.isnan(r[f"m_math_block{train_math.BLOCK_LENGTH}_tokens_per_nfe"])


def test_grade_counts_what_a_decode_copied_and_computed(tok):
    p = page.WORLD.problems(1)[0]
    ids = tok(p.solution_text, add_special_tokens=False)["input_ids"]
    g = page.grade(tok, torch.tensor([ids + [EOS_ID] * 4]), [p])
    shares = page.skill_shares(g)
    assert shares == {"copy_acc": 1.0, "number_copy": pytest.approx(
        g.numbers_copied[0] / g.question_numbers[0]), "arith_acc": 1.0}
    assert g.lines[0] == p.steps


def test_the_pilot_reports_candidates_figures_and_the_rules_choice(tmp_path,
                                                                   monkeypatch):
    import json

    from dlmspec_min.training import math_pilot

    monkeypatch.setattr(math_pilot, "data_dir", lambda: tmp_path)
    r = page.pilot()
    spec = math_pilot.spec()
    assert r["m_pilot_run"] == 0 and r["m_pilot_chosen"] == "none yet"
    assert page.draw_pilot(r) is None  # no curves to draw
    assert list(r.tables["dials"].index) == list(spec["candidates"])
    assert (r.tables["final"].status == "not run").all()
    figures = dict(answer_acc=0.3, copy_acc=0.8, number_copy=0.9, arith_acc=0.5,
                   ended_share=1.0, empty_share=0.0, tokens_per_nfe=4.0,
                   problems=100, correct=30, names=10, wall_seconds=60,
                   examples=[dict(question="q", decode="d")])
    for i, name in enumerate(spec["candidates"]):
        out = math_pilot.out_dir(name)
        out.mkdir(parents=True)
        f = dict(figures, trained_templates=i + 1, candidate=name)
        (out / "final.json").write_text(json.dumps(f))
        (out / "train_log.jsonl").write_text(json.dumps(dict(
            step=0, answer_acc=0.0, copy_acc=0.0, arith_acc=0.0,
            tokens_per_nfe=1.0)) + "\n")
    r = page.pilot()
    last = list(spec["candidates"])[-1]
    assert r["m_pilot_run"] == len(spec["candidates"])
    assert r["m_pilot_chosen"] == last  # all eligible: the most templates
    assert r[f"m_pilot_{last}_answer_acc_lo"] < 0.3 < r[f"m_pilot_{last}_answer_acc_hi"]
    assert r.tables["final"].eligible.all() and len(r.arrays["logs"]) == 3
    fig = page.draw_pilot(r)  # one panel per figure, one line per candidate
    assert [a.get_title() for a in fig.axes] == list(page.PILOT_CURVES.values())
    assert all(len(a.lines) >= len(spec["candidates"]) for a in fig.axes)
    page_text = (ROOT / "notebooks" / "00_models.md").read_text()
    glued = set(re.findall(r"\{glue:text\}`(m_pilot_[a-z0-9_]+)", page_text))
    assert glued and glued <= set(r.values), glued - set(r.values)


def test_the_recipes_curves_put_each_run_under_the_rate_it_trained_at(tmp_path,
                                                                       monkeypatch):
    import json

    monkeypatch.setenv("DLMSPEC_DATA", str(tmp_path))
    assert page.draw_recipes(page.recipe_logs()) is None  # no run: nothing drawn

    def run(folder, size, lr, copy):
        d = tmp_path / folder / size
        d.mkdir(parents=True)
        (d / "training.json").write_text(json.dumps({"hyperparameters": {"lr": lr}}))
        rows = [dict(step=0, loss=None, answer_acc=0.0, copy_acc=0.0,
                     arith_acc=math.nan),
                dict(step=250, loss=1.0),  # a masked-accuracy row: no decodes
                dict(step=500, loss=0.5, answer_acc=0.2, copy_acc=copy, arith_acc=0.1)]
        (d / "train_log.jsonl").write_text("\n".join(map(json.dumps, rows)))

    run("models/math", "small", 1e-3, 1.0)  # 1e-3 at width 128: both recipes
    run("models/math", "base", train_math.lr_for("base"), 0.9)
    run(page.SHARED_LR_DIR, "base", 1e-3, 0.1)
    run(page.SHARED_LR_DIR, "large", 5e-4, 0.1)  # neither recipe's rate: left out
    long = page.recipe_logs()
    one, width = page.RECIPES
    got = long.groupby(["recipe", "model"]).size().to_dict()
    assert got == {(one, "small"): 4, (one, "base"): 4,  # 2 decodes x 2 figures
                   (width, "small"): 4, (width, "base"): 4}
    copied = long[(long.figure == page.RECIPE_CURVES["copy_acc"]) & (long.step == 500)]
    assert copied.set_index(["recipe", "model"]).value.to_dict() == {
        (one, "base"): 0.1, (one, "small"): 1.0, (width, "small"): 1.0,
        (width, "base"): 0.9}
    fig = page.draw_recipes(long)  # a row per figure, a column per recipe
    assert len(fig.axes) == len(page.RECIPE_CURVES) * len(page.RECIPES)
    assert all(len(a.lines) >= 2 for a in fig.axes)


def test_the_freedom_pilot_reports_projections_and_the_rules_choice(tmp_path,
                                                                    monkeypatch):
    import json

    from dlmspec_min.training import math_pilot

    monkeypatch.setattr(math_pilot, "data_dir", lambda: tmp_path)
    spec = math_pilot.spec("freedom_pilot")
    r = page.freedom_pilot()
    assert r["m_fp_run"] == 0 and r["m_fp_chosen"] == "none yet"
    assert math.isnan(r["m_fp_factor"]) and page.draw_pilot(r) is None
    assert (r.tables["final"].status == "not run").all()
    narrow = train_math.ladder_dir("math_narrow")
    base = math_pilot.last_decode(narrow / "base" / "train_log.jsonl")
    # zero at half math/base's rate: a factor of 2; rates 8, 4, 2, 1.6, 1.2
    rates = dict(zip(spec["candidates"], (base["tokens_per_nfe"] / 2, 4.0, 2.0,
                                          1.6, 1.2), strict=True))
    for name, rate in rates.items():
        out = math_pilot.out_dir(name, "freedom_pilot")
        out.mkdir(parents=True)
        f = dict(answer_acc=0.4, copy_acc=1.0, arith_acc=0.5, ended_share=1.0,
                 tokens_per_nfe=rate, answer_tokens_per_nfe=rate / 2, glue_bits=1.0,
                 content_bits=0.5, problems=100, correct=40, wall_seconds=60,
                 examples=[dict(question="q", decode="d")])
        (out / "final.json").write_text(json.dumps(f))
        (out / "train_log.jsonl").write_text(json.dumps(dict(
            step=4000, answer_acc=0.4, copy_acc=1.0, arith_acc=0.5,
            tokens_per_nfe=rate, answer_tokens_per_nfe=rate / 2)) + "\n")
    r = page.freedom_pilot()
    assert r["m_fp_factor"] == pytest.approx(2.0)
    projected = {n: r[f"m_fp_{n}_projected"] for n in spec["candidates"]}
    assert list(projected.values()) == pytest.approx(
        [base["tokens_per_nfe"], 8.0, 4.0, 3.2, 2.4])
    assert r["m_fp_chosen"] == list(spec["candidates"])[3]  # 3.2: nearest 3.34
    assert r.tables["final"].eligible.tolist() == [False, False, True, True, False]
    fig = page.draw_pilot(r, page.FREEDOM_CURVES)
    assert [a.get_title() for a in fig.axes] == list(page.FREEDOM_CURVES.values())
    page_text = (ROOT / "notebooks" / "00_models.md").read_text()
    glued = set(re.findall(r"\{glue:text\}`(m_fp_[a-z0-9_]+)", page_text))
    assert glued and glued <= set(r.values), glued - set(r.values)
