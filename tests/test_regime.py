"""The decoding regime: text and [EOS] tail, on synthetic decode traces."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from dlmspec_min.measures import regime

EOS = 3


def trace(generated, commit_step, nfe):
    return SimpleNamespace(generated=torch.tensor(generated),
                           commit_step=torch.tensor(commit_step), nfe=torch.tensor(nfe))


def test_first_eos_and_the_text_before_it():
    g = torch.tensor([[5, 6, EOS, 7], [5, 6, 7, 8], [EOS, EOS, 5, 6]])
    assert regime.first_eos(g, EOS).tolist() == [2, 4, 0]
    assert regime.first_eos(g, None).tolist() == [4, 4, 4]
    assert regime.text_mask(g, EOS).sum(1).tolist() == [2, 4, 0]
    assert regime.cut_at_eos(g.tolist(), EOS) == [[5, 6], [5, 6, 7, 8], []]


def test_a_forward_is_the_tails_only_when_all_it_commits_is_tail():
    # the [EOS] at 2 comes with the last text token (step 2): a text forward
    r = trace([[5, 6, EOS, EOS, EOS, EOS]], [[1, 2, 2, 3, 3, 4]], [4])
    p = regime.text_and_tail(r, EOS).iloc[0]
    assert (p.text_tokens, p.tail_tokens) == (2, 4)
    assert (p.text_forwards, p.tail_forwards) == (2, 2)
    assert (p.text_forward_tokens, p.tail_forward_tokens) == (3, 3)
    assert p.text_fraction == pytest.approx(2 / 6)


def test_the_table_splits_tokens_per_forward_and_the_parts_add_up():
    r = trace([[5, 6, EOS, EOS, EOS, EOS], [5, 6, 7, 8, 9, EOS]],
              [[1, 2, 2, 3, 3, 4], [1, 2, 3, 4, 5, 5]], [4, 5])
    t = regime.regime_table({"d": r}, EOS, n_boot=200).loc["d"]
    assert t.tokens_per_forward == pytest.approx(12 / 9)
    assert t.text_tokens_per_forward == pytest.approx((3 + 6) / (2 + 5))
    assert t.tail_tokens_per_forward == pytest.approx(3 / 2)
    assert t.text_fraction == pytest.approx((2 / 6 + 5 / 6) / 2)
    for k in ("tokens_per_forward", "text_tokens_per_forward", "text_fraction"):
        assert t[f"{k}_low"] <= t[k] <= t[f"{k}_high"]
    assert t.text_forwards_per_sample + t.tail_forwards_per_sample == pytest.approx(4.5)


def test_text_that_never_ends_has_no_tail():
    r = trace([[5, 6, 7, 8]], [[1, 1, 2, 2]], [2])
    t = regime.regime_table({"d": r}, EOS, n_boot=50).loc["d"]
    assert t.text_fraction == 1 and t.tail_forwards_per_sample == 0
    assert np.isnan(t.tail_tokens_per_forward)
    assert t.tokens_per_forward == t.text_tokens_per_forward == 2
    with pytest.raises(ValueError, match="no decodes"):
        regime.regime_table({}, EOS)


def test_a_real_decode_splits_into_parts_that_add_up(tiny_models):
    from dlmspec_min.decoding.config import DecodeConfig
    from dlmspec_min.decoding.decode import generate

    den, tok = tiny_models["target"]
    prompt = torch.full((3, 1), tok.bos_token_id)
    cfg = DecodeConfig(gen_length=16, block_length=8, rule="threshold", threshold=0.5,
                       temperature=1.0)
    gens = [torch.Generator().manual_seed(i) for i in range(3)]
    r = generate(den, prompt, cfg, gens)
    p = regime.text_and_tail(r, tok.eos_token_id)
    assert (p.text_forwards + p.tail_forwards).tolist() == r.nfe.tolist()
    assert (p.text_forward_tokens + p.tail_forward_tokens == 16).all()
    first = regime.first_eos(r.generated, tok.eos_token_id)
    assert p.text_tokens.tolist() == first.tolist()
