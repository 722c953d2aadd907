"""The decoding regime: text and [EOS] tail, on synthetic decode traces."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from dlmspec_min.measures import eos_tail

EOS = 3


def trace(generated, commit_step, nfe):
    return SimpleNamespace(generated=torch.tensor(generated),
                           commit_step=torch.tensor(commit_step), nfe=torch.tensor(nfe))


def test_first_eos_and_the_text_before_it():
    g = torch.tensor([[5, 6, EOS, 7], [5, 6, 7, 8], [EOS, EOS, 5, 6]])
    assert eos_tail.first_eos(g, EOS).tolist() == [2, 4, 0]
    assert eos_tail.first_eos(g, None).tolist() == [4, 4, 4]
    assert eos_tail.text_mask(g, EOS).sum(1).tolist() == [2, 4, 0]
    assert eos_tail.cut_at_eos(g.tolist(), EOS) == [[5, 6], [5, 6, 7, 8], []]


def test_a_forward_is_the_tails_only_when_all_it_commits_is_tail():
    # the [EOS] at 2 comes with the last text token (step 2): a text forward
    r = trace([[5, 6, EOS, EOS, EOS, EOS]], [[1, 2, 2, 3, 3, 4]], [4])
    p = eos_tail.text_and_tail(r, EOS).iloc[0]
    assert (p.text_tokens, p.tail_tokens) == (2, 4)
    assert (p.text_forwards, p.tail_forwards) == (2, 2)
    assert (p.text_forward_tokens, p.tail_forward_tokens) == (3, 3)
    assert p.text_fraction == pytest.approx(2 / 6)


def test_the_table_splits_tokens_per_forward_and_the_parts_add_up():
    r = trace([[5, 6, EOS, EOS, EOS, EOS], [5, 6, 7, 8, 9, EOS]],
              [[1, 2, 2, 3, 3, 4], [1, 2, 3, 4, 5, 5]], [4, 5])
    t = eos_tail.regime_table({"d": r}, EOS, n_boot=200).loc["d"]
    assert t.tokens_per_forward == pytest.approx(12 / 9)
    assert t.text_tokens_per_forward == pytest.approx((3 + 6) / (2 + 5))
    assert t.tail_tokens_per_forward == pytest.approx(3 / 2)
    assert t.text_fraction == pytest.approx((2 / 6 + 5 / 6) / 2)
    for k in ("tokens_per_forward", "text_tokens_per_forward", "text_fraction"):
        assert t[f"{k}_low"] <= t[k] <= t[f"{k}_high"]
    assert t.text_forwards_per_sample + t.tail_forwards_per_sample == pytest.approx(4.5)


def test_text_that_never_ends_has_no_tail():
    r = trace([[5, 6, 7, 8]], [[1, 1, 2, 2]], [2])
    t = eos_tail.regime_table({"d": r}, EOS, n_boot=50).loc["d"]
    assert t.text_fraction == 1 and t.tail_forwards_per_sample == 0
    assert np.isnan(t.tail_tokens_per_forward)
    assert t.tokens_per_forward == t.text_tokens_per_forward == 2
    with pytest.raises(ValueError, match="no decodes"):
        eos_tail.regime_table({}, EOS)


def test_a_real_decode_splits_into_parts_that_add_up(tiny_models):
    from dlmspec_min.decoding.config import DecodeConfig
    from dlmspec_min.decoding.decode import generate

    den, tok = tiny_models["target"]
    prompt = torch.full((3, 1), tok.bos_token_id)
    cfg = DecodeConfig(gen_length=16, block_length=8, rule="threshold", threshold=0.5,
                       temperature=1.0)
    gens = [torch.Generator().manual_seed(i) for i in range(3)]
    r = generate(den, prompt, cfg, gens)
    p = eos_tail.text_and_tail(r, tok.eos_token_id)
    assert (p.text_forwards + p.tail_forwards).tolist() == r.nfe.tolist()
    assert (p.text_forward_tokens + p.tail_forward_tokens == 16).all()
    first = eos_tail.first_eos(r.generated, tok.eos_token_id)
    assert p.text_tokens.tolist() == first.tolist()


ENDED = ([[5, 6, EOS, EOS, EOS, EOS], [5, 6, 7, 8, 9, EOS]],
         [[1, 2, 2, 3, 3, 4], [1, 2, 3, 4, 5, 5]], [4, 5])


def test_the_split_beside_a_bar_is_the_tables_and_says_both_parts():
    r = trace(*ENDED)
    t = eos_tail.regime_table({"d": r}, EOS, n_boot=200, seed=1).loc["d"]
    b = eos_tail.bar_split(r, EOS, n_boot=200, seed=1)
    assert set(b) == {"regime_text_fraction", "regime_text_fraction_lo",
                      "regime_text_fraction_hi", "regime_text_tpf", "regime_tail_tpf",
                      "regime_note"}
    assert b["regime_text_fraction"] == t.text_fraction
    assert t.text_fraction == pytest.approx(0.5833, abs=1e-4)
    assert (b["regime_text_fraction_lo"], b["regime_text_fraction_hi"]) == (
        t.text_fraction_low, t.text_fraction_high)
    assert b["regime_text_tpf"] == pytest.approx(9 / 7)
    assert b["regime_tail_tpf"] == pytest.approx(3 / 2)
    note = b["regime_note"]
    assert "0.583 of the window" in note and "1.29 tokens each in the text" in note
    assert "1.50 in the [EOS] tail" in note and "`" not in note  # glued as plain text


def test_the_split_of_text_that_never_ends_says_there_is_no_tail():
    b = eos_tail.bar_split(trace([[5, 6, 7, 8]], [[1, 1, 2, 2]], [2]), EOS, n_boot=50)
    assert b["regime_text_fraction"] == 1 and np.isnan(b["regime_tail_tpf"])
    assert b["regime_text_tpf"] == 2
    assert "all text" in b["regime_note"] and "`" not in b["regime_note"]
    assert "2.00 tokens per forward" in b["regime_note"]


def test_the_accelerator_table_carries_the_split_of_each_decode():
    from dlmspec_min.ssld import accelerators

    ended = trace(*ENDED)
    ended.token_forwards = torch.tensor([4, 5])
    plain = trace([[5, 6, 7, 8]], [[1, 1, 2, 2]], [2])
    plain.token_forwards = torch.tensor([2])
    t = accelerators.accelerator_table({"ended": ended, "plain": plain}, 100, 0, EOS)
    assert t.loc["ended", "text_fraction"] == pytest.approx((2 / 6 + 5 / 6) / 2)
    assert t.loc["ended", "text_tokens_per_nfe"] == pytest.approx(9 / 7)
    assert t.loc["ended", "tail_tokens_per_nfe"] == pytest.approx(3 / 2)
    assert t.loc["plain", "text_fraction"] == 1
    assert np.isnan(t.loc["plain", "tail_tokens_per_nfe"])
    # without an [EOS] id every decode is all text, [EOS] tokens included
    t0 = accelerators.accelerator_table({"ended": ended}, 100, 0)
    assert t0.loc["ended", "text_fraction"] == 1
    assert t0.loc["ended", "text_tokens_per_nfe"] == t0.loc["ended", "tokens_per_nfe"]
