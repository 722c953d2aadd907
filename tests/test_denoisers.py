"""Denoiser adapters and loading, on tiny random-weight models (no hub, no files)."""

from __future__ import annotations

import re

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from dlmspec_min.decoding.config import DecodeConfig
from dlmspec_min.decoding.decode import generate
from dlmspec_min.decoding.denoisers import (
    PAPER_MODELS,
    Denoiser,
    MDLMDenoiser,
    ModelNotAvailableError,
    embedded_models,
    known_model_names,
    load_denoiser,
)
from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion

BERT_VOCAB, BERT_MASK = 50, 4
TINY = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 32, "max_position_embeddings": 64}


@pytest.fixture(scope="module")
def bert():
    torch.manual_seed(0)
    return BertForMaskedLM(BertConfig(vocab_size=BERT_VOCAB, **TINY))


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """An empty data folder with one tiny embedded model, ``dlmspec/small``."""
    monkeypatch.setenv("DLMSPEC_DATA", str(tmp_path))
    torch.manual_seed(0)
    model = DLMForMaskedDiffusion(DLMConfig(vocab_size=40, **TINY))
    model.save_pretrained(tmp_path / "models" / "small")
    return tmp_path


def _prompt(batch=2, length=4, vocab=BERT_VOCAB):
    g = torch.Generator().manual_seed(0)
    return torch.randint(5, vocab, (batch, length), generator=g)


def test_masked_lm_adapter(bert):
    den = Denoiser(bert, BERT_MASK)
    assert not bert.training  # eval mode: no dropout noise
    assert den.vocab_size == BERT_VOCAB and not den.supports_cache
    x = _prompt()
    logits = den.logits(x)
    assert logits.shape == (2, 4, BERT_VOCAB) and not logits.requires_grad
    torch.testing.assert_close(logits, bert(input_ids=x).logits.detach())
    res = generate(den, x, DecodeConfig(gen_length=8, block_length=4, rule="threshold"))
    assert res.tokens.shape == (2, 12) and not (res.generated == BERT_MASK).any()
    assert torch.equal(res.tokens[:, :4], x)
    with pytest.raises(ValueError, match="KV cache"):
        generate(den, x, DecodeConfig(gen_length=4, cache="prefix"))
    with pytest.raises(NotImplementedError, match="no KV cache"):
        den.prefill(x)


def test_shifted_logits(bert):
    plain, shifted = Denoiser(bert, BERT_MASK), Denoiser(bert, BERT_MASK, shifted=True)
    x = _prompt(length=6)
    a, b = plain.logits(x), shifted.logits(x)
    torch.testing.assert_close(b[:, 1:], a[:, :-1])  # position j from hidden j - 1
    torch.testing.assert_close(b[:, 0], a[:, 0])
    assert not shifted.supports_cache
    generate(shifted, x, DecodeConfig(gen_length=4))


class _FakeMDLM(torch.nn.Module):
    """The call signature of kuleshov-group/mdlm-owt, with a fixed logit table."""

    def __init__(self, time_conditioning=False):
        super().__init__()
        self.config = type("C", (), {"vocab_size": 6, "time_conditioning":
                                     time_conditioning})()
        self.table = torch.arange(6.0)  # the mask (5) has the largest logit
        self.seen = None

    def forward(self, input_ids, timesteps, return_dict=None):
        self.seen = timesteps
        logits = self.table.expand(*input_ids.shape, 6)
        return type("Out", (), {"logits": logits})()


def test_mdlm_adapter_subs_and_timesteps():
    den = MDLMDenoiser(_FakeMDLM(), mask_id=5)
    logits = den.logits(torch.zeros(2, 3, dtype=torch.long))
    assert torch.isneginf(logits[..., 5]).all()  # SUBS: [MASK] has zero probability
    assert torch.equal(den.model.seen, torch.zeros(2))
    with pytest.raises(NotImplementedError, match="time-conditioned"):
        MDLMDenoiser(_FakeMDLM(time_conditioning=True), mask_id=5)


def test_registry_constants():
    llada = PAPER_MODELS["GSAI-ML/LLaDA-8B-Instruct"]
    assert (llada.mask_id, llada.eos_id, llada.eot_id) == (126336, 126081, 126348)
    dream = PAPER_MODELS["Dream-org/Dream-v0-Base-7B"]
    assert dream.mask_id == 151666 and dream.shifted and dream.trust_remote_code
    assert PAPER_MODELS["kuleshov-group/mdlm-owt"].mask_id == 50257
    assert PAPER_MODELS["gpt2"].role == "judge"
    with pytest.raises(AttributeError):
        llada.mask_id = 0  # frozen


@pytest.mark.parametrize("name", [n for n, s in PAPER_MODELS.items()
                                  if s.trust_remote_code])
def test_remote_code_needs_opt_in(name):
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        load_denoiser(name)


def test_unavailable_model_fails_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("DLMSPEC_ALLOW_HUB", raising=False)
    with pytest.raises(ModelNotAvailableError, match="hf download GSAI-ML/LLaDA-8B"):
        load_denoiser("GSAI-ML/LLaDA-8B-Base", trust_remote_code=True)
    assert issubclass(ModelNotAvailableError, FileNotFoundError)


def test_known_model_names():
    names = known_model_names()
    assert "dlmspec/base" in names and "GSAI-ML/LLaDA-8B-Base" in names
    assert "gpt2" not in names  # the judge is not a denoiser


def test_judge_and_unknown_names():
    with pytest.raises(ValueError, match="not a denoiser"):
        load_denoiser("gpt2")
    with pytest.raises(ValueError, match="unknown model 'no/such-model'.*dlmspec/base"):
        load_denoiser("no/such-model")
    with pytest.raises(ValueError, match="unknown model"):
        load_denoiser("dlmspec/huge")


def test_embedded_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("DLMSPEC_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="--size base"):
        load_denoiser("dlmspec/base")


def test_embedded_model_and_cache(data_dir):
    assert "dlmspec/small" in embedded_models()
    den, tok = load_denoiser("dlmspec/small")
    assert tok is None  # none saved next to these weights
    assert den.mask_id == 4 and den.supports_cache
    x = _prompt(vocab=40)
    full = den.logits(x)
    pre, cache = den.prefill(x)
    torch.testing.assert_close(pre, full)
    window = den.logits_window(x[:, 1:3], 1, cache)  # same tokens: same logits
    torch.testing.assert_close(window, full[:, 1:3], atol=1e-5, rtol=1e-5)

    # with no prompt and one block, every window is the whole sequence
    empty = torch.zeros(2, 0, dtype=torch.long)
    base = {"gen_length": 8, "rule": "threshold", "threshold": 0.05}
    ref = generate(den, empty, DecodeConfig(**base), allow_empty_prompt=True)
    for cache_kind in ("prefix", "dual"):
        out = generate(den, empty, DecodeConfig(**base, cache=cache_kind),
                       allow_empty_prompt=True)
        assert torch.equal(out.tokens, ref.tokens)

    # several blocks: the real prefill / forward_window path, windows cost less
    cfg = {"gen_length": 8, "block_length": 4}
    plain = generate(den, x, DecodeConfig(**cfg))
    for cache_kind, width in (("prefix", None), ("dual", 4)):
        out = generate(den, x, DecodeConfig(**cfg, cache=cache_kind))
        assert out.nfe.tolist() == plain.nfe.tolist() == [8, 8]
        assert out.commit_step[:, 0].tolist() == plain.commit_step[:, 0].tolist()
        assert (out.token_forwards < plain.token_forwards).all()
        assert not (out.generated == den.mask_id).any()
        if width:  # per block: one full forward of 12, then 3 windows of 4
            assert out.token_forwards.tolist() == [2 * (12 + 3 * 4)] * 2

    # a plain directory loads the same model
    again, _ = load_denoiser(data_dir / "models" / "small", dtype=torch.float64)
    assert again.model.dtype == torch.float64 and again.mask_id == 4


def test_a_missing_rung_of_a_ladder_says_how_to_train_it(tmp_path, monkeypatch):
    from dlmspec_min.decoding import denoisers

    assert {"dlmspec/math/large", "dlmspec/math_free/large"} <= set(
        denoisers.embedded_models())
    monkeypatch.setattr(denoisers, "models_dir", lambda: tmp_path)
    assert denoisers.embedded_models() == ()  # read from the disk, none listed
    for name, how in [
            ("dlmspec/math_free/large", "train_math --size large --folder math_free`"),
            ("dlmspec/math/base", "train_math --size base --folder math`"),
            ("dlmspec/small", "training.train --size small`")]:
        with pytest.raises(ModelNotAvailableError, match=re.escape(how)):
            load_denoiser(name)
