"""The regime page (notebook 11): settings, freedom bits, the trajectory gain and
the whole measurement on tiny random models."""

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from dlmspec_min.decoding.denoisers import Denoiser, ModelNotAvailableError
from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion
from dlmspec_min.experiments import crossing_grid, regime_figures
from dlmspec_min.experiments import regime as ra
from dlmspec_min.experiments.common import Measurement, Models
from dlmspec_min.measures import stats
from dlmspec_min.plumbing.claims import evaluate, load_registry, verdict
from dlmspec_min.texts import problems as P
from dlmspec_min.texts.tokenizer import MASK_ID
from dlmspec_min.training import math_pilot, train_math
from dlmspec_min.worlds.gsm import MATH

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(n_samples=3, K=8, n_codebooks=1, n_train=16, n_permutations=20,
             n_bootstrap=20)


def spec():
    return load_registry()["checks"]["regime"]


def measure(progress=print, **kw):
    return ra.measure(spec()["settings"], verdict, ra.Config(**kw), progress=progress)


def tiny(tok, seed):
    torch.manual_seed(seed)
    cfg = DLMConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                    num_hidden_layers=1, num_attention_heads=2,
                    max_position_embeddings=train_math.SEQ_LEN)
    return Denoiser(DLMForMaskedDiffusion(cfg), MASK_ID)


def test_the_registry_s_settings_are_the_pilot_s_worlds_with_their_own_models():
    settings = spec()["settings"]
    assert len(settings) >= 6  # issue 46: at least three more
    worlds = {n: ra.setting_world(n, s) for n, s in settings.items()}
    for name in ("narrow", "order", "free"):  # fine IDs on the same world and models
        fine = settings[f"{name}_fine"]
        assert ra.instrument(name, settings[name]) == "kmeans"
        assert ra.instrument(name, fine) == "fine"
        assert worlds[f"{name}_fine"] is worlds[name]
    chains = worlds["chains"]
    assert chains.dials == P.CHAINS and chains.prompt_length == 48
    assert chains.decode["gen_length"] == 64 and chains.row_length == 112
    tok = MATH.tokenizer()
    assert chains.prompts(tok, 2).shape == (2, 48)
    assert all(3 <= p.steps <= 4 for p in chains.problems(20))
    with pytest.raises(ValueError, match="ids must be one of"):
        ra.instrument("x", dict(ids="words"))
    with pytest.raises(ValueError, match="must name its world"):
        ra.setting_world("x", dict(freedom="zero", world="math"))
    with pytest.raises(ValueError, match="is not a math world of the catalogue"):
        ra.setting_world("x", dict(world="prose"))
    assert worlds["narrow"].dials == P.NARROW and worlds["free"] is MATH
    assert worlds["order"].dials == P.ORDER and worlds["free"].dials == P.FREE
    # 2026-12-06 (issue 47): the settings name catalogue worlds; these are the
    # settings as first written, the freedom pilot's candidates on the same models
    pilot = math_pilot.spec("freedom_pilot")["candidates"]
    first = {"narrow": ("zero", "dlmspec/math/small", "dlmspec/math/base"),
             "order": ("order", "dlmspec/math_order/small", "dlmspec/math_order/base"),
             "free": ("openers_order", "dlmspec/math_free/small",
                      "dlmspec/math_free/base")}
    for name, (candidate, draft, target) in first.items():
        assert worlds[name].dials == math_pilot.dials_of(pilot[candidate])
        assert (worlds[name].draft, worlds[name].target) == (draft, target)
        assert worlds[name].decode == MATH.decode
        assert worlds[name].prompt_length == MATH.prompt_length
    assert (worlds["chains"].draft, worlds["chains"].target) == (
        "dlmspec/math_chains/small", "dlmspec/math_chains/base")
    for w in worlds.values():
        assert w.target != w.draft
    pairs = {(worlds[n].target, ra.instrument(n, s)) for n, s in settings.items()}
    assert len(pairs) == len(settings)


def test_freedom_bits_are_zero_without_freedom_and_content_bits_count_orders():
    settings = spec()["settings"]
    narrow = ra.freedom_bits(ra.setting_world("narrow", settings["narrow"]), 50)
    order = ra.freedom_bits(ra.setting_world("order", settings["order"]), 50)
    free = ra.freedom_bits(ra.setting_world("free", settings["free"]), 50)
    assert narrow == (0.0, 0.0)
    assert order[0] == 0.0 and order[1] > 0.5  # a commutative step: one bit each
    assert free[0] > 0.5 and free[1] > 0.5


def test_the_summary_runs_from_the_most_determined_setting_to_the_freest():
    def fig(tpf, a_star, alpha, margin):
        return dict(tau_acc=tpf + 1, threshold_tpf=tpf, alpha_star=a_star,
                    alpha=alpha, margin=margin)

    figs = {"a": fig(4.0, 0.8, 0.85, -0.1), "b": fig(10.0, 0.95, 0.9, 0.02),
            "c": dict(fig(1, 0, 0, 0), tau_acc=math.nan)}
    v = {f"r_{n}_{k}": x for n, f in figs.items() for k, x in f.items()}
    text = ra.summary(v, figs)
    assert text.startswith("from b (10.00 slots per forward) to a (4.00)")
    assert "alpha* moves from 0.950 to 0.800" in text
    assert text.endswith("in 1 of 2 measured settings")
    assert ra.summary(v, ["a"]).startswith("one setting is measured, a")


def test_the_trajectory_gain_and_its_exactness_read_c3_s_decodes():
    nfe = {ra.THRESHOLD: torch.tensor([8, 6, 4]), ra.TRAJ: torch.tensor([4, 3, 2])}
    gen = {ra.DUAL: torch.tensor([[1, 2], [3, 4], [5, 6]]),
           ra.TRAJ: torch.tensor([[1, 2], [3, 4], [5, 7]])}
    m = Measurement(arrays={"nfe_by_accelerator": nfe, "generated_by_accelerator": gen})
    gain = ra.traj_gain(m, n_bootstrap=50, seed=0)
    assert gain[0] == pytest.approx(2.0) and gain[1] <= 2.0 <= gain[2]
    assert ra.traj_exact(m) == pytest.approx(2 / 3)
    none = Measurement(arrays={"nfe_by_accelerator": {},
                               "generated_by_accelerator": {}})
    assert math.isnan(ra.traj_gain(none, 50, 0)[0]) and math.isnan(ra.traj_exact(none))


def test_measure_on_tiny_models_measures_every_glued_name_and_reports_a_missing_pair(
        monkeypatch):
    tok = MATH.tokenizer()
    pair = Models(tiny(tok, 1), tiny(tok, 0), tok)

    def load(target, draft, **kw):
        if any(f"{w}/" in target for w in ("math_order", "math_chains", "math_gone")):
            raise ModelNotAvailableError(f"embedded model {target!r} is not in x; "
                                         "train it")
        return pair

    monkeypatch.setattr(ra, "load_models", load)
    world_of = ra.setting_world

    def gone(name, setting):  # narrow_fine as if its target were missing: shorter
        w = world_of(name, setting)
        gone_entry = dataclasses.replace(w.entry, folder="math_gone")  # its ladder
        return (dataclasses.replace(w, entry=gone_entry)
                if name == "narrow_fine" else w)

    monkeypatch.setattr(ra, "setting_world", gone)
    said = []
    settings = dict(spec()["settings"])
    m = ra.measure(settings, verdict, ra.Config(**SMALL), progress=said.append,
                   grid=spec()["grid"])
    v = m.values
    assert v["r_settings_total"] == len(settings) == len(said) - 1  # then the grid
    assert said[-1] == "the grid: narrow, order, free x word, piece"
    missing = [n for n, s in settings.items()
               if any(w in gone(n, s).target for w in ("math_order", "math_chains",
                                                        "math_gone"))]
    assert v["r_settings_measured"] == len(settings) - len(missing)
    assert "order: not measured" in said[1]
    assert math.isnan(v["r_order_tau_acc"])
    assert v["r_order_c3_verdict"] == "not measured"
    assert v["r_order_content_bits"] > 0  # the world is known without its models
    table = m.tables["settings"]
    split = ra.shown_tables(table)  # the page's tables, one per instrument
    assert list(split) == ["kmeans", "fine"]
    assert [list(t.data.columns) for t in split.values()] == [
        [n for n in settings if ra.instrument(n, settings[n]) == i] for i in split]
    assert "settings with fine IDs" in split["fine"].to_html()
    assert table.loc["order", "status"] == ("not measured: dlmspec/math_order/base is "
                                            "not trained")
    verdicts = set(load_registry()["verdicts"])
    for name in ("narrow", "free"):
        assert table.loc[name, "status"] == "measured"
        assert v[f"r_{name}_tau_acc_lo"] <= v[f"r_{name}_tau_acc"] <= v[
            f"r_{name}_tau_acc_hi"]
        tau = v[f"r_{name}_tau_acc"]
        assert v[f"r_{name}_alpha_star"] == pytest.approx(1 - 1 / tau)
        assert v[f"r_{name}_margin"] == pytest.approx(
            v[f"r_{name}_alpha_star"] - v[f"r_{name}_alpha_hi"])
        assert v[f"r_{name}_threshold_tpf"] <= v[f"r_{name}_tau_acc"] + 1e-9
        assert v[f"r_{name}_c3_verdict"] in verdicts
        assert v[f"r_{name}_c4_verdict"] in verdicts
        assert v[f"r_{name}_traj_exact"] == 1.0  # greedy: the base policy's tokens
    for key, ids in (("r_summary", "kmeans"), ("r_summary_fine", "fine")):
        measured = [n for n in settings if n not in missing
                    and ra.instrument(n, settings[n]) == ids]
        reach = sum(v[f"r_{n}_margin"] <= 0 for n in measured)
        tail = f"in {reach} of {len(measured)} measured setting" + "s" * (
            len(measured) > 1)
        assert v[key].endswith(tail), (key, v[key])
    rule = spec()["rules"]["trajectory_speculation_exact"]
    assert evaluate(rule, v)
    assert not evaluate(rule, {**v, "r_traj_exact_min": 0.5})
    page = (ROOT / "notebooks" / "11_regime.md").read_text()
    glued = set(re.findall(r"\{glue:text\}`(r_[a-z0-9_]+)", page))
    glued -= {"r_paper_traj_gain", "r_runtime_s", "r_paper_tau", "r_paper_alpha",
              "r_competent_copy", "r_competent_answers", "r_stop_note",
              "r_grid_n_bootstrap", "r_paper_margin", "r_runtime_cpu_s"}
    glued = {g for g in glued if not g.startswith("r_cross_")}  # the page records these
    # the grid's sentences, which the page records from the values: every one the
    # prose glues is defined although the order world's grid did not run
    said_grid = crossing_grid.prose_values(v, spec()["grid"])
    assert glued and glued <= set(v) | set(said_grid), glued - set(v) - set(said_grid)
    assert said_grid["r_grid_order_said"] == crossing_grid.NOT_RUN
    for w in ("narrow", "free"):
        assert said_grid[f"r_grid_{w}_said"].startswith("with word anchors the margin ")
        assert "End-point line: word " in said_grid[f"r_grid_{w}_said"]
        assert "nan" not in said_grid[f"r_grid_{w}_said"]
    assert said_grid["r_grid_k_said"].endswith("(narrow, piece anchors)")
    assert said_grid["r_grid_fit_test_level"] == spec()["grid"]["fit_test_level"]
    assert said_grid["r_grid_ceiling_tol"] == spec()["grid"]["ceiling_tolerance_bits"]
    fig = regime_figures.draw(m, paper_gain=1.5)
    assert len(fig.axes) == len(regime_figures.AXES) * len(regime_figures.FIGURES)
    assert all(len(ax.collections) + len(ax.lines) >= 1 for ax in fig.axes)
    assert v["r_missing_note"] == (f"{' and '.join(missing)} not measured, its "
                                   "figures NaN: the table's status row says why")
    for name in ("narrow", "free", "free_fine"):  # C8 along the axis, per setting
        assert 0 <= v[f"r_{name}_info_draft_lo"] <= v[f"r_{name}_info_draft"] <= v[
            f"r_{name}_info_draft_hi"]
        assert v[f"r_{name}_info_target"] >= 0
        alpha = v[f"r_{name}_alpha"]  # a random draft may hit nothing: inf bits
        assert v[f"r_{name}_neglog_alpha"] == (
            pytest.approx(-math.log2(alpha)) if alpha > 0 else math.inf)
    assert math.isnan(v["r_order_info_draft"])
    for name in ("narrow", "free"):  # beside Bits to Rounds: forwards per question
        assert 1 <= v[f"r_{name}_threshold_nfe"] <= 32
    assert v["r_rounds_settings"] == "narrow, order, free, chains"
    assert v["r_rounds_n"] == 2 and math.isnan(v["r_rounds_slope"])  # order missing
    assert regime_figures.draw_rounds(m) is not None
    fine = v["r_free_fine_alpha"]
    assert 0 <= v["r_free_fine_alpha_lo"] <= fine <= v["r_free_fine_alpha_hi"] <= 1
    assert v["r_free_fine_c4_verdict"] == "not measured: fine IDs are tokens"
    assert math.isnan(v["r_free_fine_c4_ratio"])
    assert v["r_free_fine_id_bits"] >= v["r_free_id_bits"] >= 0  # finer IDs: no less
    assert v["r_free_competent"] == "yes" and v["r_free_answer_acc"] > 0.3
    assert v["r_narrow_fine_competent"] == "not trained"
    grid = m.tables["grid"]  # the crossing, separated: narrow and free measured
    assert set(grid.world) == {"narrow", "free"} and set(grid.unit) == {"word", "piece"}
    for (world, unit), g in grid.groupby(["world", "unit"]):
        assert list(g.ids[:-1]) == [f"k{k}" for k in g.K[:-1]]
        assert g.ids.iloc[-1] == "fine"
        assert g.K.iloc[0] == 32 and len(set(g.K)) == 6 == len(g)  # five K and fine
        assert (g.margin_lo <= g.margin + 1e-12).all()
        assert (g.margin <= g.margin_hi + 1e-12).all()
        assert np.allclose(g.margin, g.alpha_star - g.alpha)
        assert (g.alpha_lo <= g.alpha).all() and (g.alpha <= g.alpha_hi).all()
        # the bits per ID with a bootstrap interval (a plug-in entropy's draws
        # may lie below it: the interval need not hold the point)
        assert (g.bits_lo <= g.bits_hi).all() and (g.bits_lo >= 0).all()
        cells = crossing_grid.shown_grid(g)["bits per ID"]
        num = r"\d+(\.\d+)?"  # a point, its interval beside it unless it is one
        assert all(re.fullmatch(rf"{num}( \[{num}, {num}\])?", c) for c in cells), cells
        assert any("[" in c for c in cells) or (g.bits_lo == g.bits_hi).all()
        pre = f"r_grid_{world}_{unit}"
        assert v[f"{pre}_line_df"] == 4  # p NaN where the bits do not move
        assert 0 <= v[f"{pre}_line_p"] <= 1 or g.bits.iloc[0] == g.bits.iloc[-1]
        assert re.match(r"(not crossed up to|crossed at|below its bar already at) ",
                        v[f"{pre}_cross_said"])
        assert v[f"{pre}_k_values"] == ", ".join(str(k) for k in g.K[:-1])
    assert v["r_grid_c8_n"] == int(np.isfinite(grid.neglog_alpha.astype(float)).sum())
    assert len(crossing_grid.draw_grid(grid, v, 0.69).axes) == 2
    assert len(crossing_grid.shown_grid(grid)) == len(grid)
    assert "In the free math world" in ra.crossing_sentence(v)
    assert re.match(r"The anchor unit changes where or whether the margin turns in "
                    r"\d of 2 measured worlds", v["r_grid_reading"])
    shown = ra.shown_table(table)  # a column per setting, intervals in their cells
    assert list(shown.columns) == list(settings)
    assert not {"low", "high", "tau_acc low", "alpha_SID high"} & set(shown.index)
    for name in ("narrow", "free"):
        cell = shown.loc["alpha_SID", name]
        assert re.fullmatch(r"\d\.\d+ \[\d\.\d+, \d\.\d+\]", cell), cell
        value = float(cell.split(" ")[0])
        assert value == pytest.approx(v[f"r_{name}_alpha"], abs=0.006)
        star = shown.loc["alpha*", name]
        low = 1 - 1 / v[f"r_{name}_tau_acc_lo"]
        if v[f"r_{name}_tau_acc_lo"] == v[f"r_{name}_tau_acc_hi"]:  # every draw equal
            assert float(star) == pytest.approx(low, abs=0.0006)  # the point alone
        else:
            assert float(star.split("[")[1].split(",")[0]) == pytest.approx(low,
                                                                             abs=0.06)
    assert shown.loc["tau_acc", "order"] in ("—", stats.NOT_MEASURED)  # never "nan"
    from dlmspec_min.plumbing.claims import INCONCLUSIVE
    assert ra.INCONCLUSIVE == INCONCLUSIVE
    for name in ("narrow", "free", "free_fine"):  # a size only where undecided
        undecided = v[f"r_{name}_c3_verdict"] == INCONCLUSIVE
        assert undecided or math.isnan(v[f"r_{name}_decide_n"])
        cell = shown.loc["questions to decide C3", name]
        assert cell == "—" or (undecided and (cell.isdigit()
                                              or cell == "none at these codebooks"))


def test_nothing_measured_draws_nothing_and_bad_sizes_are_refused(monkeypatch):
    def load(target, draft, **kw):
        raise ModelNotAvailableError("missing; train it")

    monkeypatch.setattr(ra, "load_models", load)
    m = measure(**SMALL, progress=lambda s: None)
    assert m["r_settings_measured"] == 0 and math.isnan(m["r_traj_exact_min"])
    assert m["r_summary"] == "no setting is measured in this build"
    assert regime_figures.draw(m) is None
    assert not evaluate(spec()["rules"]["trajectory_speculation_exact"], m.values)
    with pytest.raises(ValueError, match="n_samples must be"):
        measure(n_samples=0)
    with pytest.raises(ValueError, match="no settings"):
        ra.measure({}, verdict, ra.Config())


def test_the_stop_note_names_settings_decided_below_the_bar_and_incompetent_ones():
    def fig(alpha_hi, tau_lo, competent="yes"):
        return dict(tau_acc=5.0, alpha_hi=alpha_hi, tau_acc_lo=tau_lo,
                    competent=competent)

    figs = {"a": fig(0.70, 5.0), "b": fig(0.85, 5.0), "c": fig(0.5, 5.0, "no: x"),
            "d": dict(fig(0.1, 5.0), tau_acc=math.nan)}
    v = {f"r_{n}_{k}": x for n, f in figs.items() for k, x in f.items()}
    note = ra.stop_note(v, figs)
    assert note.startswith("met by a,") and "not competent: c" in note
    assert ra.stop_note(v, ["b"]).startswith("not met")


def test_competence_reads_the_target_s_training_log_and_the_bars():
    got = ra.competence("dlmspec/math_free/base", {"copy_acc": 0.9, "answer_acc": 0.3})
    assert got["competent"] == "yes" and got["copy_acc"] >= 0.9
    low = ra.competence("dlmspec/math_free/base", {"answer_acc": 0.99})
    assert low["competent"].startswith("no: answer_acc 0.8")
    none = ra.competence("dlmspec/math_nowhere/base", {})
    assert none["competent"] == "not trained" and math.isnan(none["answer_acc"])


def test_id_information_is_the_entropy_and_the_majority_share():
    bits, major = ra.id_information([torch.tensor([1, 1, 2, 3]),
                                     torch.tensor([5, 5, 5, 5])])
    assert bits == pytest.approx((1.5 + 0.0) / 2) and major == pytest.approx(0.75)
    assert all(map(math.isnan, ra.id_information([torch.tensor([], dtype=torch.long)])))


def test_the_landing_page_s_crossing_sentence_reads_the_grid_s_values():
    v = {}
    for unit, said, p in (("word", "not crossed up to 4.10 bits (95 % interval: at "
                           "least 3.00; ...)", 0.3),
                          ("piece", "crossed at 3.20 bits (95 % interval 2.80 to "
                           "3.60)", 0.001)):
        g = f"r_grid_free_{unit}"
        v |= {f"{g}_cross_said": said, f"{g}_line_p": p, f"{g}_fine_alpha": 0.68,
              f"{g}_fine_alpha_lo": 0.62, f"{g}_fine_alpha_hi": 0.74,
              f"{g}_fine_alpha_star": 0.81}
    said = ra.crossing_sentence(v)
    assert "With one anchor per content word it is not crossed up to 4.10 bits" in said
    assert "each digit of a number) it is crossed at 3.20 bits" in said
    assert "alpha_SID is 0.680 [0.620, 0.740] against alpha* 0.810" in said
    assert "end points fits the points between (p = 0.3)" in said
    assert "does not fit the points between (p = 0.001)" in said
    assert ra.interval_words(-math.inf, 3.8).startswith("95 % interval: at most 3.80")
    assert ra.interval_words(2.0, math.inf).startswith("95 % interval: at least 2.00")
    assert "open at both ends" in ra.interval_words(-math.inf, math.inf)
    assert "did not run" in ra.crossing_sentence(None)
    assert "could not measure" in ra.crossing_sentence(
        {k: x for k, x in v.items() if "piece" not in k})


def test_c3_refuses_an_unknown_anchor_unit_before_any_work():
    from dlmspec_min.experiments import c3_win_condition as c3m

    kw = dict(gen_length=4, block_length=4, threshold=0.9, temperature=0.0, K=2,
              levels=1, n_train=1, n_repeats=1, n_timed=1, n_bootstrap=1, seed=0,
              n_codebooks=1)
    with pytest.raises(ValueError, match="anchor_unit must be one of"):
        c3m.measure(None, MATH, c3m.Config(**kw),
                    prompt=torch.zeros(1, 2, dtype=torch.long), anchor_unit="line")


def test_information_bits_average_anchors_in_bits_per_codebook_with_an_interval():
    import pandas as pd

    ln2 = math.log(2)
    a = pd.DataFrame({"seq": [0, 0, 1], "sid_info_draft": [ln2, ln2, 4 * ln2],
                      "sid_info_verify": [0.0, 0.0, ln2]})
    b = pd.DataFrame({"seq": [0, 1], "sid_info_draft": [2 * ln2, 2 * ln2],
                      "sid_info_verify": [0.0, 0.0]})
    got = ra.information_bits([a, b], n_bootstrap=200, seed=0)
    assert got["info_draft"] == pytest.approx((6 / 3 + 4 / 2) / 2)  # 2 bits each
    assert got["info_target"] == pytest.approx((1 / 3 + 0) / 2)
    assert got["info_draft_lo"] <= got["info_draft"] <= got["info_draft_hi"]
    assert got == ra.information_bits([a, b], n_bootstrap=200, seed=0)
    assert math.isnan(ra.information_bits([], 10, 0)["info_draft"])


def test_c8_fit_finds_an_exact_line_and_names_the_setting_off_it():
    v = {}
    for name, bits in (("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 4.0)):
        v[f"r_{name}_info_draft"] = bits
        v[f"r_{name}_neglog_alpha"] = 0.5 * bits
    fit = ra.c8_fit(v, ["a", "b", "c", "d", "missing"])
    assert fit["c8_n"] == 4
    assert fit["c8_slope"] == pytest.approx(0.5) and fit["c8_r2"] == pytest.approx(1)
    assert fit["c8_ratio_min"] == pytest.approx(0.5) == fit["c8_ratio_max"]
    v["r_b_neglog_alpha"] = 5.0  # one setting off the line (not at an end)
    off = ra.c8_fit(v, ["a", "b", "c", "d"])
    assert off["c8_worst"] == "b" and off["c8_r2"] < 1
    assert "the largest residual is b's" in off["c8_note"]
    few = ra.c8_fit(v, ["a", "b"])
    assert math.isnan(few["c8_slope"]) and few["c8_note"].startswith("fewer than")


def test_rounds_fit_is_a_line_of_forwards_on_bits_over_three_worlds_or_more():
    v = {}
    for name, bits, nfe in (("a", 0.0, 3.0), ("b", 1.0, 5.0), ("c", 2.0, 7.0)):
        v |= {f"r_{name}_glue_bits": bits / 2, f"r_{name}_content_bits": bits / 2,
              f"r_{name}_threshold_nfe": nfe}
    fit = ra.rounds_fit(v, ["a", "b", "c"])
    assert fit["rounds_slope"] == pytest.approx(2.0)
    assert fit["rounds_intercept"] == pytest.approx(3.0)
    assert fit["rounds_r2"] == pytest.approx(1.0) and fit["rounds_n"] == 3
    assert math.isnan(ra.rounds_fit(v, ["a", "b"])["rounds_slope"])


def test_a_fine_setting_pools_n_codebooks_fine_and_a_kmeans_one_n_codebooks(
        monkeypatch):
    """Fine IDs are the same in every codebook (book/claims.yml, 2026-12-06,
    fourth session): their settings fit the head n_codebooks_fine times."""
    used, said = {}, []

    def recorded(models, world, config, *, n_codebooks, ids, **kw):
        used[world.name, ids] = n_codebooks
        return {**{k: math.nan for k in ra.COLUMNS}, "strongest": "x",
                "c3_verdict": "inconclusive", "c4_verdict": "inconclusive"}

    monkeypatch.setattr(ra, "_missing", lambda world, device, dtype: (object(), None))
    monkeypatch.setattr(ra, "measure_setting", recorded)
    settings = {"free": {"world": "math"},
                "free_fine": {"world": "math", "ids": "fine"}}
    ra.measure(settings, verdict, ra.Config(**{**SMALL, "n_codebooks": 4},
                                            n_codebooks_fine=2), progress=said.append)
    assert used == {("math", "kmeans"): 4, ("math", "fine"): 2}
    assert "4 codebooks" in said[0] and "2 codebooks" in said[1]
    with pytest.raises(ValueError, match="n_codebooks_fine must be an integer >= 1"):
        ra.measure(settings, verdict, ra.Config(**SMALL, n_codebooks_fine=0))


def test_no_grid_run_leaves_every_sentence_the_page_glues_defined():
    grid = spec()["grid"]
    g = crossing_grid.measure_grid({}, grid, 1, 1, 10, 0)  # no world's decode
    assert g.values["grid_reading"] == "No world of the grid is measured in this build."
    assert {f"grid_seconds_{k}" for k in ("features", "token_head_fits", "points",
                                           "total")} <= set(g.values)
    said = crossing_grid.prose_values({f"r_{k}": x for k, x in g.values.items()}, grid)
    assert {said[f"r_grid_{w}_said"] for w in grid["worlds"]} == {crossing_grid.NOT_RUN}
    assert said["r_grid_k_said"] == said["r_grid_k32_said"] == (
        "no world's grid is measured in this build")


def test_the_fit_test_s_level_and_the_ceiling_come_from_the_registry():
    v = {}
    for w in ("narrow", "free"):
        for u, p in (("word", 0.03), ("piece", 0.2)):
            v |= {f"grid_{w}_{u}_cross": math.nan, f"grid_{w}_{u}_cross_said":
                  "not crossed up to 3 bits", f"grid_{w}_{u}_line_p": p,
                  f"grid_{w}_{u}_k_as_fine": 128}
    strict = crossing_grid.grid_reading(v, ["narrow", "free"], ["word", "piece"],
                                        0.01, 0.05)
    loose = crossing_grid.grid_reading(v, ["narrow", "free"], ["word", "piece"],
                                       0.05, 0.1)
    assert "(p < 0.01) in 0 of 4" in strict and "within 0.05 bits" in strict
    assert "(p < 0.05) in 2 of 4" in loose and "within 0.1 bits" in loose


def test_bits_per_id_carry_a_bootstrap_interval_over_questions():
    from dlmspec_min.ssld.semantic import SemanticIDs

    flat = torch.tensor([0, 1, 2, 3])
    sid = SemanticIDs(codes=flat[:, None], flat=flat,
                      special=torch.zeros(4, dtype=bool), n_clusters=4, K=4)
    same = torch.zeros(6, 3, dtype=torch.long)  # one ID everywhere: 0 bits, always
    anchors = torch.ones(6, 3, dtype=torch.bool)
    assert crossing_grid.id_bits_interval([sid], same, anchors, 200, 0) == (0.0, 0.0)
    two = torch.tensor([[0] * 3, [1] * 3] * 3)  # two IDs, one per question
    lo, hi = crossing_grid.id_bits_interval([sid], two, anchors, 200, 0)
    assert crossing_grid.id_bits(sid, two, anchors) == pytest.approx(1.0)
    assert 0 <= lo < 1 and hi == pytest.approx(1.0)  # draws can hold one ID more often
