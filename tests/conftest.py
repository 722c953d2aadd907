"""Synthetic denoisers for decoder tests: no model, no files, vocab 16.

``ToyDenoiser`` is a two-"layer" bidirectional function of the tokens, so
committing one token changes the logits everywhere (as in a real DLM), and
rows never interact. ``CachedToyDenoiser`` adds a Fast-dLLM-style approximate
cache: it stores each layer's per-position features at ``prefill`` and, for a
window, recomputes only the window against those stale features.
"""

from __future__ import annotations

import pytest
import torch

LONGEST_FIRST = ("test_paper_flow.py",)  # started first, so no worker waits on it


def pytest_collection_modifyitems(config, items):
    """The longest test file first: under ``pytest -n auto --dist loadfile``
    (``make test``) a worker starts it at once while the others take the rest."""
    items.sort(key=lambda item: item.path.name not in LONGEST_FIRST)  # stable

VOCAB = 16
MASK_ID = VOCAB - 1  # the mask is a real vocabulary entry with its own logit
HIDDEN = 8
MAX_LEN = 64


class ToyDenoiser:
    supports_cache = False
    shifted = False

    def __init__(self, seed: int = 0, sharpness: float = 6.0, dtype=torch.float32):
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.randn(VOCAB, HIDDEN, generator=g)
        self.pos = torch.randn(MAX_LEN, HIDDEN, generator=g)
        self.out = torch.randn(HIDDEN, VOCAB, generator=g) * sharpness / HIDDEN**0.5
        self.mask_id, self.vocab_size, self.dtype = MASK_ID, VOCAB, dtype
        self.calls: list[torch.Tensor] = []  # every input seen, for trace tests

    def _embed(self, x, start=0):
        return self.emb[x] + self.pos[start:start + x.shape[1]]  # (B, W, D)

    @staticmethod
    def _layer(h_query, h_all):
        return torch.tanh(h_query + h_all.mean(dim=1, keepdim=True))  # (B, W, D)

    def _head(self, z_query, z_all):
        return (self._layer(z_query, z_all) @ self.out).to(self.dtype)  # (B, W, V)

    def logits(self, x):
        self.calls.append(x.clone())
        h = self._embed(x)
        z = self._layer(h, h)
        return self._head(z, z)


class CachedToyDenoiser(ToyDenoiser):
    supports_cache = True

    def prefill(self, x):
        self.calls.append(x.clone())
        h = self._embed(x)
        z = self._layer(h, h)
        return self._head(z, z), (h, z)

    def logits_window(self, xw, start, cache):
        self.calls.append(xw.clone())
        h_old, z_old = cache
        stop = start + xw.shape[1]
        h = self._embed(xw, start)
        z = self._layer(h, torch.cat([h_old[:, :start], h, h_old[:, stop:]], dim=1))
        return self._head(z, torch.cat([z_old[:, :start], z, z_old[:, stop:]], dim=1))


@pytest.fixture
def toy():
    return ToyDenoiser()


@pytest.fixture
def cached_toy():
    return CachedToyDenoiser()


def make_prompt(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, MASK_ID, (batch, length), generator=g)  # no masks


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """A tiny random-weight target (hidden 16) and a tinier draft (hidden 8) with
    the project's tokenizer, saved and loaded from disk like any registry model:
    {"target": (denoiser, tokenizer), "draft": (denoiser, tokenizer)}."""
    import shutil

    from dlmspec_min.decoding.denoisers import load_denoiser
    from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion
    from dlmspec_min.paths import models_dir

    root = tmp_path_factory.mktemp("tiny_models")
    tok_dir = models_dir() / "tokenizer"
    if not (tok_dir / "tokenizer.json").exists():
        pytest.skip("the project tokenizer is not in data/models/tokenizer")
    out = {}
    for name, seed, h in [("target", 0, 16), ("draft", 1, 8)]:
        torch.manual_seed(seed)
        cfg = DLMConfig(vocab_size=8192, hidden_size=h, intermediate_size=2 * h,
                        num_hidden_layers=2, num_attention_heads=2,
                        max_position_embeddings=64)
        DLMForMaskedDiffusion(cfg).save_pretrained(root / name)
        for f in tok_dir.iterdir():
            shutil.copy(f, root / name)
        out[name] = load_denoiser(str(root / name))
    return out


@pytest.fixture(scope="module")
def tiny_pair(tiny_models):
    """``tiny_models`` as the ``Models`` a claim's measurement takes: the tiny
    target, the tinier draft and the (shared) project tokenizer."""
    from dlmspec_min.experiments.common import Models

    (target, tokenizer), (draft, _) = tiny_models["target"], tiny_models["draft"]
    return Models(target, draft, tokenizer)


@pytest.fixture
def model_without_tokenizer(tmp_path):
    """The path of a tiny random model saved with no tokenizer next to it."""
    from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion

    torch.manual_seed(0)
    cfg = DLMConfig(vocab_size=64, hidden_size=8, intermediate_size=16,
                    num_hidden_layers=1, num_attention_heads=2,
                    max_position_embeddings=16)
    DLMForMaskedDiffusion(cfg).save_pretrained(tmp_path / "m")
    return str(tmp_path / "m")


@pytest.fixture(scope="module")
def tiny_math_pair(tmp_path_factory):
    """The math world's small target and a tiny random draft sharing its
    tokenizer (``experiments.common.Models``): claim code in the math world
    without a trained draft."""
    from dlmspec_min.decoding.denoisers import load_denoiser
    from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion
    from dlmspec_min.experiments.common import Models
    from dlmspec_min.training import train_math
    from dlmspec_min.worlds import MATH

    den, tok = load_denoiser(MATH.draft)
    path = tmp_path_factory.mktemp("math_draft")
    torch.manual_seed(1)
    DLMForMaskedDiffusion(DLMConfig(
        vocab_size=den.vocab_size, hidden_size=8, intermediate_size=16,
        num_hidden_layers=1, num_attention_heads=2,
        max_position_embeddings=train_math.SEQ_LEN)).save_pretrained(path)
    tok.save_pretrained(path)
    return Models(den, load_denoiser(str(path))[0], tok)
