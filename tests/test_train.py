"""Training pieces: masks, stratified ratios, windows, a reproducible step."""

import json

import pytest
import torch

from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion
from dlmspec_min.texts.tokenizer import BOS_ID, EOS_ID, MASK_ID
from dlmspec_min.training import train


def test_mask_exact_masks_exactly_k_non_bos_positions():
    x = torch.randint(5, 100, (6, 64))
    for ratio in train.EVAL_RATIOS:
        m = train.mask_exact(x, ratio, torch.Generator().manual_seed(0))
        assert (m.sum(1) == round(ratio * 63)).all()
        assert not m[:, 0].any()


def test_mask_ratios_are_stratified_and_in_range():
    t = train.mask_ratios(16, torch.Generator().manual_seed(3)).flatten()
    assert ((t >= train.MIN_MASK_RATIO) & (t <= 1)).all()
    # exactly one draw in each sixteenth of [0, 1)
    u = (t - train.MIN_MASK_RATIO) / (1 - train.MIN_MASK_RATIO)
    assert sorted((u * 16).floor().long().tolist()) == list(range(16))


def test_windows_start_with_bos_at_sentence_starts():
    docs = [(torch.arange(10, 200), [0, 50, 170]), (torch.arange(10, 40), [0])]
    w = train.windows(docs, seq_len=64)
    assert w.shape == (2, 64)  # 170 + 63 overruns the document; the short one too
    assert (w[:, 0] == BOS_ID).all()
    assert w[1, 1].item() == 60


def test_ended_windows_are_whole_sentences_then_eos_padding():
    toks = torch.arange(10, 110)  # sentences start at 0, 20, 50 and 90; ends at 100
    w = train.ended_windows([(toks, [0, 20, 50, 90])], seq_len=64)
    assert (w[:, 0] == BOS_ID).all() and w.shape[1] == 64
    texts = [row[1:][row[1:] != EOS_ID].tolist() for row in w]
    spans = {(t[0] - 10, t[-1] - 10 + 1) for t in texts}
    # every (start, end) pair of sentences whose span leaves room for one [EOS]
    assert spans == {(0, 20), (0, 50), (20, 50), (50, 90), (50, 100), (90, 100)}
    for row, t in zip(w, texts, strict=True):
        n = len(t)
        assert row[1 : 1 + n].tolist() == t  # the text is contiguous ...
        assert (row[1 + n :] == EOS_ID).all() and n <= 62  # ... then only [EOS]



def shrink_training(monkeypatch, documents: int, hidden: int) -> None:
    """``train.train`` on the first ``documents`` Brown training documents, four
    held-out windows from them, and a one-layer ``small`` of width ``hidden``."""
    from dlmspec_min.texts.corpus import brown_dataset

    small_ds = brown_dataset("train").select(range(documents))
    monkeypatch.setattr(train, "brown_dataset", lambda split: small_ds)
    monkeypatch.setattr(train, "held_out_windows", lambda tok: train.windows(
        train.encode_documents(small_ds, tok))[:4])
    monkeypatch.setitem(train.SIZES, "small", dict(
        hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=2 * hidden))

def test_a_share_of_each_batch_ends_and_a_bad_share_is_refused(tmp_path, monkeypatch):
    shrink_training(monkeypatch, documents=200, hidden=16)
    seen = []
    real = train.diffusion_loss
    monkeypatch.setattr(train, "diffusion_loss",
                        lambda model, x, gen: seen.append(x) or real(model, x, gen))
    opts = dict(batch_size=4, eval_every=50, bf16=False, log=lambda msg: None)
    train.train("small", tmp_path / "m", cycles=(3,), eos_fraction=0.5, **opts)
    assert len(seen) == 3
    for x in seen:  # two running-text rows, then two rows that end
        assert not (x[:2] == EOS_ID).any() and (x[2:, -1] == EOS_ID).all()
    with pytest.raises(ValueError, match="eos_fraction must be in"):
        train.train("small", tmp_path / "n", cycles=(1,), eos_fraction=1.5, **opts)


def test_training_steps_are_reproducible_and_lower_the_loss():
    def run():
        torch.manual_seed(0)
        cfg = DLMConfig(vocab_size=30, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)
        model = DLMForMaskedDiffusion(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        gen = torch.Generator().manual_seed(0)
        body = (torch.arange(15) % 7 + 5).repeat(8, 1)
        x = torch.cat([torch.full((8, 1), BOS_ID), body], 1)
        losses = []
        for _ in range(30):
            loss = train.diffusion_loss(model, x, gen)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, model

    a, model = run()
    b, _ = run()
    assert a == b
    assert sum(a[-5:]) < sum(a[:5])
    x = torch.cat([torch.full((1, 1), BOS_ID), (torch.arange(15) % 7 + 5)[None]], 1)
    assert train.masked_accuracy(model, x, 0.5) >= 0  # runs on a tiny model
    assert MASK_ID not in x


def test_lr_schedule_warms_up_then_decays():
    lrs = [train.lr_at(s, 100, 1.0, 10) for s in range(100)]
    assert lrs[0] < lrs[9] <= 1.0
    assert lrs[10] >= lrs[50] >= lrs[99] >= 0


def test_resume_gives_the_same_weights_as_one_run(tmp_path, monkeypatch):
    from safetensors.torch import load_file

    shrink_training(monkeypatch, documents=300, hidden=32)
    opts = dict(batch_size=4, eval_every=3, bf16=False, log=lambda msg: None)
    whole = train.train("small", tmp_path / "whole", cycles=(5, 3), **opts)
    part = tmp_path / "part"
    train.train("small", part, cycles=(5,), **opts)
    train.train("small", part, cycles=(5, 3), resume=True, **opts)
    a = load_file(whole / "model.safetensors")
    b = load_file(part / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert a["head_bias"].dtype == train.STORAGE_DTYPE
    # a later cycle may end its text: the record says which cycles did
    train.train("small", part, cycles=(5, 3, 2), resume=True, eos_fraction=0.5,
                **opts)
    summary = json.loads((part / "training.json").read_text())
    assert summary["eos_fraction_by_cycle"] == [0.0, 0.0, 0.5]
    assert summary["cycles"] == [5, 3, 2]
