"""The models page's measurement (dlmspec_min.experiments.models) on tiny models
and a slice of the corpus."""

import math

import pytest
import torch
from pages import names_recorded_on_page, shown_glue_names

from dlmspec_min.experiments import models as page
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing.claims import evaluate, load_registry
from dlmspec_min.texts import corpus
from dlmspec_min.training import train

NOTEBOOK = REPO_ROOT / "notebooks" / "00_models.md"
TINY = dict(seed=0, n_samples=2, gen_length=8, block_length=4, threshold=0.9,
            n_texts=3, n_heldout=16, regime_samples=3, temperature=1.0, n_bootstrap=50)
N_SENTENCES = 200  # of each Brown split


@pytest.fixture(scope="module")
def splits():
    return (corpus.brown_dataset("train").select(range(N_SENTENCES)),
            corpus.brown_dataset("test").select(range(N_SENTENCES)))


@pytest.fixture(scope="module")
def sizes(tiny_models):
    (target, tok), (draft, _) = tiny_models["target"], tiny_models["draft"]
    return {"small": draft, "base": target, "large": target}, tok


MATH_PREFIX = "m_math_"
# the narrow ladder, its pilot, the first math world, the freedom pilot, the free ladder
MATH_PREFIXES = (MATH_PREFIX, "m_pilot_", "m_first_", "m_fp_", "m_free_")


@pytest.fixture(scope="module")
def result(sizes, splits):
    models, tok = sizes
    return page.measure(models, tok, page.Config(**TINY), train_ds=splits[0],
                        test_ds=splits[1])


def test_every_value_the_page_and_its_gates_read_is_measured(result):
    """The prose world's values (the math worlds' values are measured by
    ``experiments.math_models``: tests/test_experiments_math_models.py)."""
    names = shown_glue_names(NOTEBOOK) - names_recorded_on_page(NOTEBOOK)
    names = {n for n in names if not n.startswith(MATH_PREFIXES)}
    assert names, "no glue name parsed from the notebook"
    assert names <= set(result.values), names - set(result.values)
    checks = load_registry()["checks"]["models"]
    prose_targets = [r for r in checks["targets"].values() if MATH_PREFIX not in r]
    assert len(prose_targets) < len(checks["targets"])  # the math ones are apart
    for rule in [*checks["rules"].values(), *prose_targets]:
        assert isinstance(evaluate(rule, result.values), bool)  # every name is there
    for size in [page.UNIGRAM, *page.SIZES]:
        for ratio in train.EVAL_RATIOS:
            assert page.accuracy_key(size, ratio) in result.values


def test_counts_agree_with_the_corpus_and_the_tables(result, splits):
    v, (train_ds, test_ds) = result.values, splits
    assert v["m_words_train"] == sum(len(ws) for ws in train_ds["words"])
    assert v["m_words_test"] == sum(len(ws) for ws in test_ds["words"])
    assert result.tables["corpus"]["words"].to_numpy().sum() == (
        v["m_words_train"] + v["m_words_test"])
    assert v["m_tagger_words"] == v["m_words_test"]  # every held-out word is tagged
    assert result.tables["tagger_confusion"].to_numpy().sum() == v["m_tagger_words"]
    assert v["m_n_heldout"] == TINY["n_heldout"]
    assert v["m_block_length"] == TINY["block_length"]
    assert v["m_tokens_per_word"] >= 1  # every word is at least one token


def test_passes_are_the_tokens_seen_over_the_training_windows(result, sizes, splits):
    v, (_, tok) = result.values, sizes
    n = len(train.windows(train.encode_documents(splits[0], tok)))
    assert v["m_train_windows"] == n > 0
    for size in page.SIZES:
        seen = result.tables["training"].loc[size, "tokens seen (M)"] * 1e6
        assert v[f"m_{size}_tokens_seen_m"] * 1e6 == pytest.approx(seen)
        assert v[f"m_{size}_window_passes"] == pytest.approx(
            seen / (n * (train.SEQ_LEN - 1)), rel=1e-3)  # the table rounds


def test_the_ladder_note_says_which_sizes_are_above_and_apart():
    v = {"m_small_acc15": 0.10, "m_small_acc15_lo": 0.09, "m_small_acc15_hi": 0.11,
         "m_base_acc15": 0.15, "m_base_acc15_lo": 0.14, "m_base_acc15_hi": 0.16,
         "m_large_acc15": 0.149, "m_large_acc15_lo": 0.13, "m_large_acc15_hi": 0.17}
    note = page.ladder_note(v)
    assert note == ("base is above small (0.1500 against 0.1000), and their intervals "
                    "are apart; large is not above base (0.1490 against 0.1500), and "
                    "their intervals overlap.")


def test_rates_are_rates_and_intervals_are_ordered(result):
    v, acc = result.values, result.tables["accuracy"]
    assert ((acc.low <= acc.accuracy) & (acc.accuracy <= acc.high)).all()
    assert ((acc.accuracy >= 0) & (acc.accuracy <= 1)).all()
    assert v["m_unigram_acc15"] > 0  # else the ratio below is undefined
    ratio = v["m_base_acc15"] / v["m_unigram_acc15"]
    assert v["m_base_vs_unigram"] == pytest.approx(ratio)
    for key in ["m_tagger_agreement", "m_tagger_agreement_all", "m_cache_exact_full",
                "m_cache_dual_tokens_small_block", "m_judge_agreement_real",
                "m_judge_agreement_shuffled"]:
        assert 0 <= v[key] <= 1, key
    assert v["m_judge_ppl_real"] > 1 and v["m_judge_ppl_shuffled"] > 1
    assert v["m_threshold_tokens_per_nfe"] >= 1


def test_nothing_stale_means_the_dual_cache_is_exact(result):
    # a property of the code path, whatever the weights
    assert result.values["m_cache_exact_full"] == 1.0
    cache = result.tables["cache"]
    assert set(cache.block_length) == {TINY["gen_length"], TINY["block_length"]}
    assert (cache.compute_saved > 0).all()


def test_unigram_accuracy_recomputed_by_hand(sizes, splits):
    models, tok = sizes
    held = train.held_out_windows(tok, n=TINY["n_heldout"])
    top = page.most_frequent_token(
        tok, train.windows(train.encode_documents(splits[0], tok)))
    acc = page.masked_accuracy({"base": models["base"]}, held, top, seed=0)
    for ratio in train.EVAL_RATIOS:
        mask = train.mask_exact(held, ratio, torch.Generator().manual_seed(0))
        by_hand = ((held == top) & mask).sum().item() / mask.sum().item()
        row = acc[(acc.model == page.UNIGRAM) & (acc.masked == ratio)]
        assert row.accuracy.item() == pytest.approx(by_hand)
    again = page.masked_accuracy({"base": models["base"]}, held, top, seed=0)
    assert again.equals(acc)  # the same seed, the same table


def test_samples_table_shows_both_decoders(result):
    samples = result.tables["samples"]
    assert list(samples.index) == ["vanilla", "threshold"]
    vanilla = result.arrays["runs"]["vanilla"]
    assert samples.loc["vanilla", "forwards per sample"] == TINY["gen_length"]
    assert vanilla.generated.shape == (TINY["n_samples"], TINY["gen_length"])


class RecordingJudge:
    """A stand-in judge that keeps the texts it scores (NLL 1, agreement 0.5)."""

    def __init__(self):
        self.seen = []

    def score(self, texts):
        import pandas as pd

        self.seen.append(list(texts))
        n = [len(t.split()) for t in texts]
        return pd.DataFrame({"nll": [1.0] * len(n), "top1_agreement": [0.5] * len(n),
                             "n_tokens": n})


def test_judge_separation_scores_real_then_shuffled_seeded_texts(splits):
    test_ds = splits[1]
    a, b, c = RecordingJudge(), RecordingJudge(), RecordingJudge()
    out = page.judge_separation(a, test_ds, 3, seed=1)
    page.judge_separation(b, test_ds, 3, seed=1)
    page.judge_separation(c, test_ds, 3, seed=2)
    assert a.seen == b.seen != c.seen  # the seed decides the texts
    real, shuffled = a.seen
    lo, hi = page.JUDGE_WORDS
    for r, s in zip(real, shuffled, strict=True):  # the same words, in another order
        assert sorted(r.split()) == sorted(s.split()) and lo <= len(r.split()) <= hi
    assert out["m_judge_ppl_real"] == pytest.approx(math.e)
    assert out["m_judge_agreement_shuffled"] == 0.5
    with pytest.raises(ValueError, match="ask for fewer"):
        page.judge_separation(RecordingJudge(), test_ds, 10_000, seed=1)


def test_measure_needs_a_base_model(sizes, splits):
    models, tok = sizes
    with pytest.raises(ValueError, match="'base' entry"):
        page.measure({"small": models["small"]}, tok, page.Config(**TINY),
                     train_ds=splits[0], test_ds=splits[1])


def test_a_ratio_over_zero_is_infinite_or_undefined():
    assert page.times(3.0, 1.5) == 2.0
    assert page.times(0.2, 0.0) == float("inf")
    assert math.isnan(page.times(0.0, 0.0))


def test_the_regime_table_has_the_baseline_and_every_accelerator(result, sizes):
    table, v = result.tables["regime"], result.values
    target = sizes[0]["base"]
    accs = page.accelerators.accelerators(8, 4, 0.9, 1.0, target.supports_cache)
    assert list(table.index) == [page.BASELINE, *accs]
    base = table.loc[page.BASELINE]
    assert base.tokens_per_forward == 1.0 == v["m_regime_baseline_tpf"]  # 1 a forward
    for r in table.itertuples():
        lo, hi = r.tokens_per_forward_low, r.tokens_per_forward_high
        assert lo <= r.tokens_per_forward <= hi
        assert 0 <= r.text_fraction <= 1
        assert (r.text_forwards_per_sample + r.tail_forwards_per_sample
                >= 8 / r.tokens_per_forward - 1e-9)
        assert r.text_tokens_per_sample + r.tail_tokens_per_sample == pytest.approx(8)
    best = table.drop(index=page.BASELINE).tokens_per_forward
    assert v["m_regime_strongest"] == best.idxmax()
    assert v["m_regime_strongest_tpf"] == best.max()


def test_regime_values_read_the_table_and_name_the_strongest():
    import pandas as pd

    cols = ["tokens_per_forward", "tokens_per_forward_low", "tokens_per_forward_high",
            "text_tokens_per_forward", "tail_tokens_per_forward", "text_fraction"]
    table = pd.DataFrame([[1.0, 1.0, 1.0, 1.0, float("nan"), 1.0],
                          [1.5, 1.2, 1.8, 1.1, 4.0, 0.6],
                          [2.5, 2.0, 3.0, 1.3, 6.0, 0.5]], columns=cols,
                         index=[page.BASELINE, "Fast-dLLM threshold",
                                "trajectory speculation (exact)"])
    v = page.regime_values(table)
    assert v["m_regime_threshold_tail_tpf"] == 4.0
    assert math.isnan(v["m_regime_baseline_tail_tpf"])
    assert v["m_regime_strongest"] == "trajectory speculation (exact)"
    assert v["m_regime_strongest_tpf_lo"] == 2.0
    assert v["m_regime_strongest_tpf_hi"] == 3.0
    assert v["m_regime_strongest_text_fraction"] == 0.5
