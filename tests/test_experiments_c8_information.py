"""C8's measurement as a library function (dlmspec_min.experiments.c8_information),
on the tiny random-weight models and on synthetic anchor tables."""

import math

import numpy as np
import pandas as pd
import pytest
from pages import names_recorded_on_page, rule_names, same_value, shown_glue_names

from dlmspec_min.experiments import c8_information as c8
from dlmspec_min.measures.tagger import CONTENT, FUNCTION, Lexicon
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing.claims import check_values, load_registry
from dlmspec_min.worlds import PROSE, retagged

NOTEBOOK = REPO_ROOT / "notebooks" / "08_information.md"
# sizes at which a measurement takes a second or two on one thread; the lower
# threshold is under the probability of almost any token the tiny random model
# samples (about 1/V = 1.2e-4), so that run commits blocks in parallel steps
SIZES = dict(n_samples=3, prompt_length=4, n_side=3, gen_length=8, block_length=4,
             threshold=0.9, thresholds=[1e-4], temperature=1.0, K=8, n_bins=2,
             n_bootstrap=200, seed=0)


@pytest.fixture(scope="module")
def tiny(tiny_pair):
    # every word piece is content or function (alternating by id): random text has both
    lower = {piece.lower(): (CONTENT if i % 2 else FUNCTION)
             for piece, i in tiny_pair.tokenizer.get_vocab().items()
             if not piece.startswith("##")}
    return tiny_pair, Lexicon(exact={}, lower=lower)


@pytest.fixture(scope="module")
def result(tiny):
    models, lexicon = tiny
    return c8.measure(models, retagged(PROSE, lexicon), c8.Config(**SIZES))


# --- the tiny-model measurement --------------------------------------------------


def test_every_value_the_page_and_the_rule_read_is_measured(result):
    prose = shown_glue_names(NOTEBOOK, prefix="c8_")
    claim = load_registry()["claims"]["C8"]
    # what the page's cells record itself (verdict, model, timings), figures aside
    own = {n for n in names_recorded_on_page(NOTEBOOK, prefix="c8_")
           if not n.startswith("c8_fig_")} | {"c8_cond1_note", "c8_cond2_note"}
    assert own == {"c8_verdict", "c8_model", "c8_runtime_seconds", "c8_cpu_seconds",
                   "c8_cond1_note", "c8_cond2_note", "c8_parallel_note"}
    needed = (prose | set(claim["keys"]) | rule_names(claim, prefix="c8_")) - own
    assert needed <= set(result.values), sorted(needed - set(result.values))
    assert not own & set(result.values)
    # the condition notes the page records after its verdict are worded here
    assert set(c8.condition_notes(result.values, 0.1)) == {"c8_cond1_note",
                                                            "c8_cond2_note"}


def test_values_are_plain_and_in_the_registry_ranges(result):
    v = result.values
    keys = load_registry()["claims"]["C8"]["keys"]
    # a mean over nothing is NaN: punctuation (the tiny lexicon has none) and the
    # faithful share when nothing was accepted; everything else is in range
    empty = {"c8_entropy_glue": result.tables["by_class"].loc["punct", "tokens"] == 0,
             "c8_relaxed_faithful": v["c8_relaxed_acceptance"] == 0}
    problems = check_values(keys, {k: float(v[k]) for k in keys})
    nan = [f"{k}: nan is not a finite number" for k in keys if empty.get(k)]
    assert problems == nan
    for k, x in v.items():
        assert isinstance(x, (int, float, str, np.floating, np.integer)), k
    log_v, log_k = math.log(result.facts["V"]), math.log(SIZES["K"])
    assert v["c8_log_v"] == pytest.approx(log_v)
    assert v["c8_log_k"] == pytest.approx(log_k)
    for k in ("c8_entropy_content", "c8_entropy_function", "c8_anchor_verify_entropy",
              "c8_anchor_commit_entropy"):
        assert 0 <= v[k] <= log_v + 1e-9, k
    for k in ("c8_sid_entropy_verify", "c8_sid_entropy_draft", "c8_sid_entropy_commit"):
        assert 0 <= v[k] <= log_k + 1e-9, k
    rates = [k for k in v if k.startswith(("c8_alpha", "c8_relaxed", "c8_exact",
                                           "c8_first_pass", "c8_bound_bin", "c8_top1"))
             and not k.endswith("_note")]
    for k in rates + ["c8_bayes_bound", "c8_fano_bound", "c8_majority_rate",
                      "c8_thr_parallel_share", "c8_thrlow_parallel_share"]:
        assert np.isnan(v[k]) or 0 <= v[k] <= 1, k
    assert -1 <= v["c8_corr"] <= 1 and 0 <= v["c8_corr_p"] <= 1
    assert v["c8_n_samples"] == SIZES["n_samples"] and v["c8_n_side"] == SIZES["n_side"]
    assert v["c8_prompt_length"] == SIZES["prompt_length"]


def test_every_interval_holds_its_estimate(result):
    v = result.values
    pairs = [k[:-3] for k in v if k.endswith("_lo") and k[:-3] + "_hi" in v]
    assert len(pairs) > 20
    checked = 0
    for k in pairs:
        lo, hi = v[k + "_lo"], v[k + "_hi"]
        if np.isnan(v[k]):  # a rate among no trials (e.g. nothing accepted)
            assert np.isnan(lo) and np.isnan(hi), k
            continue
        assert lo <= v[k] + 1e-12 and v[k] <= hi + 1e-12, (k, lo, v[k], hi)
        checked += 1
    assert checked >= 15


def test_same_seed_same_values(tiny, result):
    models, lexicon = tiny
    again = c8.measure(models, retagged(PROSE, lexicon), c8.Config(**SIZES))
    assert list(again.values) == list(result.values)
    diff = [k for k, v in result.values.items() if not same_value(again.values[k], v)]
    assert diff == []


def test_prompts_are_held_out_sentences_or_the_start_token(tiny):
    models, _ = tiny
    tok = models.tokenizer
    bos, p0 = PROSE.prompt_pair(tok, 3, 4, seed=0)
    assert p0.shape == (3, 4) and (p0[:, 0] == tok.bos_token_id).all()
    assert bos.shape == (3, 1) and (bos == tok.bos_token_id).all()
    assert (p0 == PROSE.prompt_pair(tok, 3, 4, seed=0)[1]).all()
    assert not (p0 == PROSE.prompt_pair(tok, 3, 4, seed=1)[1]).all()
    for start in PROSE.prompt_pair(tok, 3, 1, seed=0):
        assert start.shape == (3, 1) and (start == tok.bos_token_id).all()


def test_counts_and_rates_recomputed_from_the_arrays(result):
    v, A, words = result.values, result.arrays["anchors"], result.arrays["words"]
    by_class = result.tables["by_class"]
    assert v["c8_n_anchors"] == len(A) >= 3
    assert by_class["tokens"].sum() == len(words)
    assert len(words) <= SIZES["n_side"] * SIZES["gen_length"]
    con = words[words.cls == CONTENT].entropy
    fun = words[words.cls == FUNCTION].entropy
    assert v["c8_entropy_content"] == pytest.approx(con.mean())
    assert v["c8_entropy_function"] == pytest.approx(fun.mean())
    assert v["c8_entropy_diff"] == pytest.approx(con.mean() - fun.mean(), abs=1e-12)
    assert v["c8_alpha_sid"] == pytest.approx(A.exact_hit.mean())
    assert v["c8_first_pass_hit"] == pytest.approx(A.first_pass_hit.mean())
    assert v["c8_relaxed_acceptance"] == pytest.approx(A.relaxed_accepted.mean())
    assert v["c8_bayes_bound"] == pytest.approx(A.sid_top1_verify.mean())
    shares = A.sid.value_counts(normalize=True)
    assert v["c8_majority_rate"] == pytest.approx(shares.max())
    assert v["c8_sid_info_verify"] == pytest.approx(A.sid_info_verify.mean())
    assert v["c8_glue_info"] == pytest.approx(
        (A.sid_info_verify - A.sid_info_commit).mean())
    assert len(result.arrays["bos_entropy"]) == SIZES["gen_length"]
    bos = result.arrays["bos_entropy"]
    assert v["c8_bos_entropy_range"] == pytest.approx(bos.max() - bos.min())


def test_the_easy_tokens_obey_the_entropy_bound_at_the_lowest_threshold(result):
    v, easy = result.values, result.arrays["easy"]
    t_low = min(SIZES["thresholds"])
    assert v["c8_low_threshold"] == t_low
    par = easy[easy.group == f"accelerator {t_low}: parallel step"]
    assert v["c8_parallel_n"] == len(par) > 0
    assert v["c8_thrlow_parallel_share"] == pytest.approx(
        len(par) / (SIZES["n_side"] * SIZES["gen_length"]))
    # a parallel step commits only tokens whose probability is >= t_low, so their
    # top-1 probability is too, and their entropy is at most the bound
    assert (par.top1 >= t_low).all()
    assert (par.entropy <= v["c8_entropy_bound_low"] + 1e-9).all()
    bound_low = v["c8_entropy_bound_low"]
    assert v["c8_entropy_bound_default"] < bound_low <= v["c8_log_v"] + 1e-9
    assert v["c8_parallel_entropy"] == pytest.approx(par.entropy.mean())
    # the table counts what the arrays hold, group by group
    counts = easy.groupby("group", sort=False).size()
    assert (result.tables["easy"]["tokens"] == counts).all()


def test_the_tables_the_page_shows(result):
    t = result.tables
    assert list(t["summary"].columns) == ["rate", "low", "high"]
    assert len(t["summary"]) == len(c8.RATES) + 2  # and the two piece-level rates
    assert t["summary"]["rate"].iloc[0] == result.values["c8_alpha_sid"]
    assert list(t["correlations"].index) == list(c8.MEASURES.values())
    assert t["correlations"].iloc[0, 0] == result.values["c8_corr"]
    for col in c8.BINNED:
        assert list(t[f"bins_{col}"].index) == list(c8.OUTCOMES)
        assert t[f"bins_{col}"].shape[1] <= SIZES["n_bins"]
    assert t["bounds"]["probability"].iloc[2] == result.values["c8_bayes_bound"]
    table = c8.comparison_table(result, "inconclusive", 0.25, "C8: tiny")
    assert table.index[-1] == "verdict" and table.iloc[-1, 1] == "inconclusive"
    assert "0.25 in C2" in table.iloc[1, 0]
    assert table.index.name == "C8: tiny"


def test_too_short_a_decode_is_refused_with_a_clear_message(tiny):
    models, lexicon = tiny
    with pytest.raises(ValueError, match="both are needed: raise n_side or gen_length"):
        c8.measure(models, retagged(PROSE, lexicon), c8.Config(
            **{**SIZES, "n_side": 1, "gen_length": 1, "block_length": 1}))


# --- the smaller pieces, on synthetic inputs ----------------------------------------


def _anchors():
    """Six anchors in three sequences, with hand-countable outcomes."""
    return pd.DataFrame({
        "seq": [0, 0, 1, 1, 2, 2],
        "exact_hit": [1, 0, 0, 0, 1, 1],
        "relaxed_accepted": [1, 1, 0, 0, 0, 1],
        "relaxed_faithful": [1, 0, 0, 0, 0, 0],
        "sid": [3, 3, 1, 3, 2, 0],
        "sid_top1_verify": [0.5, 0.4, 0.3, 0.2, 0.6, 0.9],
    })


def test_rate_pools_hits_over_trials():
    A = _anchors()
    est, lo, hi = c8.rate(A, "exact_hit", None, 50, 0)
    assert est == pytest.approx(3 / 6) and lo <= est <= hi
    est, lo, hi = c8.rate(A, "relaxed_faithful", "relaxed_accepted", 50, 0)
    assert est == pytest.approx(1 / 3) and lo <= est <= hi
    nothing = A.assign(relaxed_accepted=0)
    none = c8.rate(nothing, "relaxed_faithful", "relaxed_accepted", 50, 0)
    assert all(np.isnan(none))


def test_bounds_by_hand():
    A = _anchors().assign(sid_entropy_verify=[0.0, 1.0, 2.0, 3.0, 9.0, 0.5],
                          token_top1_verify=[0.1] * 6)
    summary = pd.DataFrame({"rate": [0.5, 0.25]})
    values, table = c8.bounds(A, 4, summary)
    assert values["c8_bayes_bound"] == pytest.approx(np.mean([0.5, 0.4, 0.3, 0.2, 0.6,
                                                              0.9]))
    assert values["c8_majority_rate"] == pytest.approx(3 / 6)  # ID 3, three times
    assert values["c8_token_bayes_bound"] == pytest.approx(0.1)
    assert 0 < values["c8_fano_bound"] <= 1
    assert list(table["probability"].iloc[:2]) == [0.5, 0.25]


def test_condition_notes_follow_the_rule():
    base = {"c8_entropy_diff": 0.5, "c8_entropy_diff_lo": 0.2,
            "c8_entropy_diff_hi": 0.8, "c8_corr": 0.3, "c8_corr_p": 0.001}
    n = c8.condition_notes(base, 0.1)
    assert n["c8_cond1_note"].startswith("holds")
    assert n["c8_cond2_note"].startswith("holds")
    small = c8.condition_notes({**base, "c8_entropy_diff": 0.05,
                                "c8_entropy_diff_lo": 0.01}, 0.1)
    assert "less than the minimum effect" in small["c8_cond1_note"]
    covers = c8.condition_notes({**base, "c8_entropy_diff_lo": -0.1}, 0.1)
    assert covers["c8_cond1_note"].startswith("cannot be told")
    lower = c8.condition_notes({**base, "c8_entropy_diff": -0.5,
                                "c8_entropy_diff_lo": -0.8,
                                "c8_entropy_diff_hi": -0.2}, 0.1)
    assert "lower entropy" in lower["c8_cond1_note"]
    for corr, p in [(0.3, 0.02), (-0.3, 0.001)]:
        n = c8.condition_notes({**base, "c8_corr": corr, "c8_corr_p": p}, 0.1)
        assert n["c8_cond2_note"].startswith("fails")


def test_notes_that_depend_on_the_measurement_alone():
    assert c8.class_note(0.1).startswith("Content is committed")
    assert c8.class_note(0.0).startswith("Content is not committed")
    v = {"c8_alpha_sid_hi": 0.1, "c8_bayes_bound": 0.2, "c8_glue_info_lo": -0.1,
         "c8_anchor_commit_entropy": 2.0, "c8_anchor_verify_entropy": 1.0,
         "c8_token_info_commit": 1.0, "c8_token_info_verify": 2.0}
    closing = c8.closing_notes(v, no_par=False)
    assert "stays below" in closing["c8_aggregate_note"]
    assert "supplies information" not in closing["c8_aggregate_note"]
    assert closing["c8_verdict_note"] == ""
    both = c8.closing_notes({**v, "c8_glue_info_lo": 0.1, "c8_alpha_sid_hi": 0.3}, True)
    assert both["c8_aggregate_note"].startswith("The context decoded")
    assert "never commits two tokens" in both["c8_verdict_note"]
    easy = c8.easy_notes(v, no_par=True)
    assert easy["c8_anchor_entropy_note"].startswith("not lower")
    assert easy["c8_token_info_note"].startswith("lower than")
    assert easy["c8_easy_note"].startswith("At the default threshold")
    assert c8.easy_notes({**v, "c8_anchor_commit_entropy": 0.5}, False) == {
        "c8_anchor_entropy_note": "lower",
        "c8_token_info_note": easy["c8_token_info_note"], "c8_easy_note": ""}


def test_information_means_and_the_bos_range():
    rng = np.random.default_rng(0)
    A = pd.DataFrame({c: rng.uniform(0, 2, 8) for c in c8.INFO_COLUMNS}).assign(
        seq=[0, 0, 1, 1, 2, 2, 3, 3])
    bos_h = np.array([2.0, 1.0, 1.5, 1.25])
    values, means = c8.information_means(A, bos_h, 8, n_bootstrap=20, seed=0)
    for col in c8.INFO_COLUMNS:
        assert values[f"c8_{col}"] == pytest.approx(A[col].mean())
        assert values[f"c8_{col}_lo"] <= values[f"c8_{col}"] <= values[f"c8_{col}_hi"]
    assert values["c8_bos_entropy_range"] == 1.0
    assert values["c8_bos_entropy_range_after_first"] == 0.5
    assert values["c8_log_k"] == pytest.approx(math.log(8))
    assert set(means) == set(c8.INFO_COLUMNS)
    one, _ = c8.information_means(A, bos_h[:1], 8, n_bootstrap=20, seed=0)
    assert one["c8_bos_entropy_range_after_first"] == 0.0
