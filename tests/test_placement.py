"""Logits may come back on another device or in another dtype than the input.

With ``device_map="auto"`` a model sharded over several GPUs reads its input on
the first shard and returns logits from the last. ``Denoiser`` feeds the input
to the model's input-embedding device and moves logits back to the device of
``x``; the decode loop and the speculator see only ``Denoiser``'s logits. With
one CPU, the move is observed through a tensor that records ``.to`` calls, and
half-precision logits stand in for a bfloat16 model: decoding must give the
same tokens as from float32 logits of the same values.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from dlmspec_min.decoding.config import DecodeConfig
from dlmspec_min.decoding.decode import generate
from dlmspec_min.decoding.denoisers import Denoiser, load_denoiser

V, D, MASK = 12, 8, 11


class Elsewhere(torch.Tensor):
    """Logits 'from another device': every ``.to`` call on them is recorded."""

    moves: list = []

    def to(self, *args, **kwargs):
        Elsewhere.moves.append(args[0] if args else kwargs.get("device"))
        return torch.Tensor.to(self.as_subclass(torch.Tensor), *args, **kwargs)


class Model(torch.nn.Module):
    """A tiny context-dependent masked model with a (whole-input) KV 'cache'.

    Its logits are rounded to bfloat16 values, then returned as ``out_dtype``:
    float32, float16 or bfloat16 outputs hold the same numbers.
    """

    supports_kv_cache = True

    def __init__(self, out_dtype=torch.float32, elsewhere=False):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.emb = torch.nn.Embedding(V, D)
        self.head = torch.nn.Linear(D, V)
        with torch.no_grad():
            self.emb.weight.copy_(torch.randn(V, D, generator=g))
            self.head.weight.copy_(2 * torch.randn(V, D, generator=g))
            self.head.bias.zero_()
        self.config = SimpleNamespace(vocab_size=V)
        self.out_dtype, self.elsewhere = out_dtype, elsewhere
        self.seen_devices = []

    def get_input_embeddings(self):
        return self.emb

    def _logits(self, x):
        self.seen_devices.append(x.device)
        h = self.emb(x)
        h = h + h.cumsum(1) / torch.arange(1, x.shape[1] + 1)[:, None]  # context
        out = self.head(torch.tanh(h)).to(torch.bfloat16).float().to(self.out_dtype)
        return out.as_subclass(Elsewhere) if self.elsewhere else out

    def forward(self, input_ids):
        return SimpleNamespace(logits=self._logits(input_ids))

    def prefill(self, x):
        return self._logits(x), x.clone()

    def forward_window(self, xw, start, cache):
        x = cache.clone()
        x[:, start:start + xw.shape[1]] = xw
        return self._logits(x)[:, start:start + xw.shape[1]]


def _prompt():
    return torch.tensor([[0, 3], [0, 5], [0, 7]])


CONFIGS = {
    "threshold": DecodeConfig(gen_length=8, block_length=4, rule="threshold",
                              threshold=0.5),
    "sampled": DecodeConfig(gen_length=8, block_length=4, temperature=1.0, steps=4),
    "dual cache": DecodeConfig(gen_length=8, block_length=4, rule="threshold",
                               threshold=0.5, cache="dual"),
}
CONFIGS["trajectory"] = dataclasses.replace(
    CONFIGS["dual cache"], speculate="trajectory", spec_budget=4, spec_low=0.05)


def _decode(model, cfg):
    g = torch.Generator().manual_seed(1) if cfg.temperature > 0 else None
    return generate(Denoiser(model, MASK), _prompt(), cfg, g)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
def test_half_precision_logits_decode_to_the_same_tokens(name, out_dtype):
    cfg = CONFIGS[name]
    ref = _decode(Model(), cfg)
    half = _decode(Model(out_dtype), cfg)
    assert (ref.tokens != MASK).all()
    assert torch.equal(half.tokens, ref.tokens)
    assert torch.equal(half.nfe, ref.nfe)


@pytest.mark.parametrize("name", CONFIGS)
def test_logits_from_elsewhere_are_moved_to_the_input_device(name):
    cfg = CONFIGS[name]
    Elsewhere.moves = []
    model = Model(elsewhere=True)
    out = _decode(model, cfg)
    assert torch.equal(out.tokens, _decode(Model(), cfg).tokens)
    assert Elsewhere.moves, "the denoiser never moved the model's logits"
    assert all(torch.device(d) == _prompt().device for d in Elsewhere.moves)
    # the model read every input on its input embeddings' device
    assert set(model.seen_devices) == {model.emb.weight.device}


def test_denoiser_logits_are_plain_tensors_on_the_input_device():
    den = Denoiser(Model(torch.bfloat16, elsewhere=True), MASK)
    x = torch.tensor([[0, MASK, 4]])
    for logits in (den.logits(x), den.prefill(x)[0],
                   den.logits_window(x[:, 1:], 1, x.clone())):
        assert type(logits) is torch.Tensor and logits.device == x.device
        assert logits.dtype == torch.bfloat16


def test_load_denoiser_dtype_names_and_device_map():
    den, _ = load_denoiser("dlmspec/small", dtype="bfloat16")
    assert next(den.model.parameters()).dtype == torch.bfloat16
    den, _ = load_denoiser("dlmspec/small", dtype="none", device_map="none")
    assert next(den.model.parameters()).dtype == torch.float32  # embedded default
    den, _ = load_denoiser("dlmspec/small", device_map="cpu")  # placed by accelerate
    assert den.input_device == torch.device("cpu")
    x = torch.full((1, 6), den.mask_id)
    assert den.logits(x).shape[:2] == (1, 6)
    with pytest.raises(ValueError, match="dtype 'int8' must be one of"):
        load_denoiser("dlmspec/small", dtype="int8")
