"""Determinedness (C7): leave-one-out measures against a brute-force loop, their
properties, the re-encoding of text into another vocabulary, the paired ratio
bootstrap, and the paper-scale parameter profile of notebook 07."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import MASK_ID, VOCAB, ToyDenoiser

from dlmspec_min.decoding.denoisers import PAPER_MODELS, Denoiser
from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion
from dlmspec_min.measures import determinedness as det
from dlmspec_min.measures import stats
from dlmspec_min.measures.tagger import CONTENT, FUNCTION, PUNCT, SPECIAL
from dlmspec_min.plumbing import params, run

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "07_strong_model.md"
PROFILE = ROOT / "notebooks" / "profiles" / "paper" / "07_strong_model.yaml"
TINY_VOCAB, TINY_MASK = 24, 4


def _windows(batch=3, length=9, vocab=VOCAB, mask_id=MASK_ID, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, vocab - 1, (batch, length), generator=g)
    return torch.where(x >= mask_id, x + 1, x)  # every id but the mask


@pytest.fixture(scope="module")
def tiny_dlm():
    torch.manual_seed(0)
    model = DLMForMaskedDiffusion(DLMConfig(
        vocab_size=TINY_VOCAB, hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32, max_position_embeddings=32,
        initializer_range=0.5))  # large weights: peaked, varied distributions
    return Denoiser(model, TINY_MASK)


def _brute_force(logits_fn, windows, positions, mask_id):
    """Reference: mask one position, one row, one forward at a time."""
    out = {m: torch.full(windows.shape, float("nan"), dtype=torch.float64)
           for m in det.MEASURES}
    for b, j in positions.nonzero().tolist():
        x = windows[b:b + 1].clone()
        x[0, j] = mask_id
        z = logits_fn(x)[0, j].double()
        z[mask_id] = -math.inf
        p = torch.softmax(z, -1)
        nz = p[p > 0]
        out["top1_prob"][b, j] = p.max()
        out["correct"][b, j] = float(p.argmax() == windows[b, j])
        out["entropy"][b, j] = -(nz * nz.log()).sum()
        out["p_true"][b, j] = p[windows[b, j]]
    return out


@pytest.mark.parametrize("batch", [1, 4, 64])
def test_leave_one_out_matches_a_one_position_loop_on_a_tiny_model(tiny_dlm, batch):
    windows = _windows(vocab=TINY_VOCAB, mask_id=TINY_MASK)
    g = torch.Generator().manual_seed(1)
    positions = torch.rand(windows.shape, generator=g) < 0.6
    positions[:, 0] = False
    got = det.leave_one_out(tiny_dlm, windows, positions, batch=batch)
    ref = _brute_force(tiny_dlm.logits, windows, positions, TINY_MASK)
    for m in det.MEASURES:  # the output_mask fast path vs full logits, one at a time
        torch.testing.assert_close(getattr(got, m), ref[m], equal_nan=True,
                                   rtol=1e-5, atol=1e-6)
    assert torch.equal(got.measured, positions)


def test_generic_denoiser_path_matches_the_loop():
    toy = ToyDenoiser(seed=3)
    windows = _windows(batch=2, length=7)
    positions = torch.ones_like(windows, dtype=torch.bool)
    got = det.leave_one_out(toy, windows, positions, batch=5)
    ref = _brute_force(toy.logits, windows, positions, MASK_ID)
    for m in det.MEASURES:
        torch.testing.assert_close(getattr(got, m), ref[m], rtol=1e-6, atol=1e-9)


def test_each_forward_row_holds_exactly_one_mask_at_its_position():
    toy = ToyDenoiser()
    windows = _windows(batch=3, length=8)
    positions = torch.zeros_like(windows, dtype=torch.bool)
    positions[0, [1, 5]] = positions[2, 3] = True
    det.leave_one_out(toy, windows, positions, batch=2)
    seen = torch.cat(toy.calls)  # every row the model saw
    assert len(seen) == 3 and ((seen == MASK_ID).sum(1) == 1).all()
    where = [(r.tolist().index(MASK_ID)) for r in seen]
    assert where == [1, 5, 3]
    copies, rows, cols = det.masked_copies(windows, positions, MASK_ID)
    assert rows.tolist() == [0, 0, 2] and cols.tolist() == [1, 5, 3]
    unmasked = copies.clone()
    unmasked[torch.arange(3), cols] = windows[rows, cols]
    assert torch.equal(unmasked, windows[rows])  # nothing else changed


def test_measures_are_probabilities_and_entropies(tiny_dlm):
    windows = _windows(batch=4, length=10, vocab=TINY_VOCAB, mask_id=TINY_MASK, seed=5)
    positions = torch.ones_like(windows, dtype=torch.bool)
    positions[1] = False
    got = det.leave_one_out(tiny_dlm, windows, positions)
    m = positions
    top1, ptrue, ent, acc = (getattr(got, k)[m] for k in
                             ("top1_prob", "p_true", "entropy", "correct"))
    assert ((top1 > 0) & (top1 <= 1)).all() and ((ptrue >= 0) & (ptrue <= top1)).all()
    assert (top1 >= 1 / (TINY_VOCAB - 1) - 1e-12).all()  # the max beats the mean
    assert ((ent >= 0) & (ent <= math.log(TINY_VOCAB - 1) + 1e-9)).all()
    assert set(acc.tolist()) <= {0.0, 1.0}
    assert torch.allclose(top1[acc == 1], ptrue[acc == 1])
    assert torch.isnan(got.top1_prob[~m]).all()
    sums, counts = got.per_row("top1_prob", torch.ones_like(m))
    assert counts.tolist() == [10, 0, 10, 10]
    assert np.allclose(sums, np.nansum(got.top1_prob.numpy(), 1))


def test_position_measures_on_synthetic_logits():
    uniform = torch.zeros(2, 6)
    got = det.position_measures(uniform, torch.tensor([1, 2]), mask_id=5)
    assert torch.allclose(got["top1_prob"], torch.full((2,), 0.2, dtype=torch.float64))
    assert torch.allclose(got["entropy"], torch.full((2,), math.log(5),
                                                     dtype=torch.float64))
    peaked = torch.full((1, 6), -1e4)
    peaked[0, 3] = 0.0
    peaked[0, 5] = 50.0  # the mask's logit is ignored
    got = det.position_measures(peaked, torch.tensor([3]), mask_id=5)
    assert got["top1_prob"].item() == pytest.approx(1.0)
    assert got["entropy"].item() == pytest.approx(0.0, abs=1e-12)
    assert got["correct"].item() == 1.0
    with pytest.raises(ValueError, match=r"\(N, V\)"):
        det.position_measures(torch.zeros(2, 3, 4), torch.tensor([0, 1]), 0)


def test_bad_inputs_fail_with_a_message():
    toy = ToyDenoiser()
    w = _windows()
    with pytest.raises(ValueError, match="already hold mask tokens"):
        det.leave_one_out(toy, w.masked_fill(w == w[0, 0], MASK_ID),
                          torch.ones_like(w, dtype=torch.bool))
    with pytest.raises(ValueError, match="bool"):
        det.masked_copies(w, torch.ones_like(w), MASK_ID)
    with pytest.raises(ValueError, match="same shape"):
        det.masked_copies(w, torch.ones(1, 2, dtype=torch.bool), MASK_ID)
    with pytest.raises(ValueError, match="batch"):
        det.leave_one_out(toy, w, torch.ones_like(w, dtype=torch.bool), batch=0)


def test_select_positions_keeps_classes_and_subsamples_reproducibly():
    classes = np.array([[SPECIAL, CONTENT, FUNCTION, PUNCT, CONTENT, CONTENT],
                        [SPECIAL, FUNCTION, FUNCTION, CONTENT, PUNCT, PUNCT]])
    keep = (CONTENT, FUNCTION)
    full = det.select_positions(classes, keep)
    assert full.tolist() == [[False, True, True, False, True, True],
                             [False, True, True, True, False, False]]
    a = det.select_positions(classes, keep, n_per_row=2, seed=7)
    b = det.select_positions(classes, keep, n_per_row=2, seed=7)
    assert torch.equal(a, b) and a.sum(1).tolist() == [2, 2]
    assert not (a & ~full).any()
    draws = [det.select_positions(classes, keep, 1, seed=s)[0] for s in range(200)]
    share = torch.stack(draws).double().mean(0)  # uniform over the 4 eligible
    assert share[[1, 2, 4, 5]].sub(0.25).abs().max() < 0.1 and share[[0, 3]].sum() == 0
    with pytest.raises(ValueError, match="n_per_row"):
        det.select_positions(classes, keep, n_per_row=0)


# --- the same text in another tokenizer -----------------------------------------------


def _word_level_tokenizer(words):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<s>", "<unk>", "<mask>", *words])}
    t = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>",
                                   unk_token="<unk>", mask_token="<mask>")


def test_reencode_writes_the_same_words_in_another_vocabulary():
    from dlmspec_min.texts.tokenizer import load_tokenizer, words_of

    try:
        src = load_tokenizer()
    except FileNotFoundError:
        pytest.skip("the project tokenizer is not in data/models/tokenizer")
    texts = ["the dog ran home .", "a cat sat on the mat quietly ."]
    ids = [src(t, add_special_tokens=False)["input_ids"] for t in texts]
    n = min(map(len, ids))
    windows = torch.tensor([[src.bos_token_id, *r[:n]] for r in ids])
    assert torch.equal(det.reencode(windows, src, src), windows)  # same vocabulary
    words = sorted({w for t in texts for w in t.split()} | {"dogs"})
    dst = _word_level_tokenizer(words)
    out = det.reencode(windows, src, dst)
    assert out.shape[0] == 2 and (out[:, 0] == dst.bos_token_id).all()
    for row, w in zip(out, windows, strict=True):
        back = dst.convert_ids_to_tokens(row[1:].tolist())
        assert back == words_of(src, w.tolist())[:len(back)]  # same text, cut
    assert out.shape[1] == 1 + min(len(words_of(src, w.tolist())) for w in windows)
    assert not det.same_vocabulary(src, dst)


# --- the paired ratio bootstrap -------------------------------------------------------


def test_paired_ratio_bootstrap_against_a_resampling_loop():
    rng = np.random.default_rng(0)
    n = 15
    den = rng.integers(3, 9, n).astype(float)
    na, nb = den * rng.uniform(0.3, 0.6, n), den * rng.uniform(0.2, 0.4, n)
    est, lo, hi = stats.paired_ratio_bootstrap(na, den, nb, den, n_boot=300, seed=4)
    assert est == pytest.approx((na.sum() / den.sum()) / (nb.sum() / den.sum()))
    idx = np.random.default_rng(4).integers(0, n, size=(300, n))
    boot = [(na[i].sum() / den[i].sum()) / (nb[i].sum() / den[i].sum()) for i in idx]
    assert (lo, hi) == pytest.approx(tuple(np.quantile(boot, [0.025, 0.975])))
    # against B = 1 it is the plain ratio bootstrap (same seed, same resamples)
    ones = np.ones(n)
    assert stats.paired_ratio_bootstrap(na, den, ones, ones, 300, 4) == pytest.approx(
        stats.ratio_bootstrap(na, den, 300, 4))
    # pairing: a shared per-sequence factor cancels, so the interval is narrow
    shared = rng.uniform(0.1, 10, n)
    _, lo2, hi2 = stats.paired_ratio_bootstrap(2 * shared, ones, shared, ones, 300, 1)
    assert lo2 == pytest.approx(2) and hi2 == pytest.approx(2)
    with pytest.raises(ValueError, match="one, non-zero length"):
        stats.paired_ratio_bootstrap(na, den, nb[:-1], den)
    with pytest.raises(ValueError, match="denominator is zero"):
        stats.paired_ratio_bootstrap(na, den, nb, 0 * den)


# --- the paper-scale profile ----------------------------------------------------------


def test_paper_scale_profile_names_notebook_07_parameters_and_validates():
    if not NOTEBOOK.exists():
        pytest.skip("notebook 07 is not in this checkout")
    profile = run.parameters_in(PROFILE)  # less its estimate (data, not a parameter)
    declared = params.notebook_parameters(NOTEBOOK)
    assert set(profile) <= set(declared), set(profile) - set(declared)
    values = run.resolve(declared, profile)  # coerced and checked, as the runner does
    params.validate_all(values)
    assert values["large_model"] in PAPER_MODELS
    assert PAPER_MODELS[values["large_model"]].role == "denoiser"
    assert values["trust_remote_code"] is True
    assert values["device"].startswith("cuda") and values["dtype"] == "bfloat16"
    assert values["draft"] == values["large_model"]  # a draft must share its vocabulary
    for name in ("n_samples", "n_windows", "n_tau"):  # a larger run than the book's
        assert values[name] > int(declared[name]["default"])
