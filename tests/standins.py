"""Stand-ins for the paper models' remote code: tiny, seeded, random-weight
checkpoints under the registry names, written by this project.

Each stand-in folder holds what a hub repository of LLaDA or Dream holds: a
``config.json`` whose ``auto_map`` points at a config class and a model class in
Python files next to the weights (``tests/standin_code/<family>/``), the weights
(safetensors), and a tokenizer that ``AutoTokenizer`` loads. The vocabulary size
and the special ids are the real models' (LLaDA: 126,464 tokens, mask 126336,
EOS 126081, EoT 126348; Dream: 152,064 tokens, mask 151666, EOS 151643); the
layers are tiny (hidden size 16, 2 layers). The tokenizer is the embedded
WordPiece vocabulary, its [EOS] and [MASK] moved to the registry ids and the
rest filled with ``[unused<i>]`` tokens up to the vocabulary size.

``write_hub_cache(hf_home)`` lays them out as a Hugging Face hub cache
(``hub/models--ORG--NAME/snapshots/<rev>/``, ``refs/main``), so that with
``HF_HOME=hf_home`` and ``HF_HUB_OFFLINE=1`` ``load_denoiser(name,
trust_remote_code=True)`` finds them as it would find the real ones.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CODE = Path(__file__).resolve().parent / "standin_code"
EMBEDDED_TOKENIZER = REPO / "data" / "models" / "tokenizer" / "tokenizer.json"
SEED = 0
HEAD_STD = 0.5
PRIOR_SCALE = 0.5  # half the log prior: function words frequent, content not swamped


@dataclass(frozen=True)
class Standin:
    family: str  # folder under standin_code/
    config_module: str
    config_class: str
    model_module: str
    model_class: str
    vocab_size: int
    mask_id: int
    eos_id: int
    extra_special: dict  # token -> id, beyond [MASK] and [EOS]
    config: dict  # the tiny layer sizes, in the family's own field names


LLADA = Standin(
    "llada", "configuration_llada", "LLaDAConfig", "modeling_llada", "LLaDAModelLM",
    vocab_size=126464, mask_id=126336, eos_id=126081, extra_special={"[EOT]": 126348},
    config={"d_model": 16, "n_layers": 2, "n_heads": 2, "mlp_hidden_size": 32,
            "embedding_size": 126464, "max_sequence_length": 256,
            "pad_token_id": 126081, "bos_token_id": 2},
)
DREAM = Standin(
    "dream", "configuration_dream", "DreamConfig", "modeling_dream", "DreamModel",
    vocab_size=152064, mask_id=151666, eos_id=151643, extra_special={},
    config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 2,
            "max_position_embeddings": 256, "pad_token_id": 151643,
            "bos_token_id": 2},
)
STANDINS: dict[str, Standin] = {
    "GSAI-ML/LLaDA-8B-Base": LLADA,
    "GSAI-ML/LLaDA-8B-Instruct": LLADA,
    "Dream-org/Dream-v0-Base-7B": DREAM,
    "Dream-org/Dream-v0-Instruct-7B": DREAM,
}


def _tokenizer(s: Standin):
    """The embedded WordPiece tokenizer grown to the model's vocabulary."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    base = Tokenizer.from_file(str(EMBEDDED_TOKENIZER))
    by_id = {i: t for t, i in base.get_vocab().items()}
    moved = {"[MASK]": s.mask_id, "[EOS]": s.eos_id, **s.extra_special}
    at = {i: t for t, i in moved.items()}
    vocab = {}
    for i in range(s.vocab_size):
        token = at.get(i) or by_id.get(i)
        if token is None or (token in moved and moved[token] != i):
            token = f"[unused{i}]"  # a filler, or the old place of a moved token
        vocab[token] = i
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]",
                                     max_input_chars_per_word=100))
    tok.normalizer, tok.pre_tokenizer = base.normalizer, base.pre_tokenizer
    tok.decoder = base.decoder
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", bos_token="[BOS]",
        eos_token="[EOS]", mask_token="[MASK]",
        additional_special_tokens=list(s.extra_special),
    )
    for token, i in {"[PAD]": 0, "[UNK]": 1, "[BOS]": 2, **moved}.items():
        assert fast.convert_tokens_to_ids(token) == i, (token, i)
    return fast


def _seed(name: str) -> int:
    """Each registry name its own weights (a draft is never its target's copy)."""
    return SEED + int(hashlib.sha1(name.encode()).hexdigest()[:8], 16)


def _init_weights(model, vocab_size: int, log_prior, seed: int = SEED):
    """Seeded random weights: unit-variance layers, an output head peaked enough
    that confidences vary (top probabilities of a few tenths, not 1 / vocab).

    The head's bias is ``log_prior``: the log unigram frequency of each real
    WordPiece token on Brown's training split, and a large negative value for
    the filler ids and [MASK]. The samples are then noise drawn near the
    corpus's unigram distribution, real tokens with function words among them,
    which the claim notebooks need in order to tag content and function words.
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, module in sorted(model.named_modules()):
            if isinstance(module, torch.nn.Linear | torch.nn.Embedding):
                head = isinstance(module, torch.nn.Linear) and \
                    module.weight.shape[0] == vocab_size
                std = HEAD_STD if head else module.weight.shape[1] ** -0.5
                module.weight.copy_(torch.randn(module.weight.shape, generator=g) * std)
                if getattr(module, "bias", None) is not None:
                    module.bias.copy_(log_prior if head else 0.0)


def _log_prior(s: Standin, vocab: dict[str, int]):
    """(vocab_size,) log unigram frequencies of the stand-in's real tokens."""
    import torch
    from tokenizers import Tokenizer

    from dlmspec_min.measures.order import brown_token_counts
    from dlmspec_min.texts.tokenizer import load_tokenizer

    counts = brown_token_counts(load_tokenizer())  # the embedded ids
    by_token = {t: counts[i] for t, i in Tokenizer.from_file(
        str(EMBEDDED_TOKENIZER)).get_vocab().items() if i < len(counts)}
    prior = torch.full((s.vocab_size,), -30.0)
    total = float(counts.sum())
    for token, i in vocab.items():
        if token in by_token and token != "[MASK]":
            prior[i] = PRIOR_SCALE * float(np.log((by_token[token] + 1.0) / total))
    return prior


def _code(family: str, module: str):
    """A module of ``standin_code/<family>/``, imported as a package so that its
    relative imports work (without touching transformers' module cache)."""
    pkg = f"dlmspec_standin_{family}"
    if pkg not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            pkg, CODE / family / "__init__.py",
            submodule_search_locations=[str(CODE / family)],
        )
        sys.modules[pkg] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[pkg])
    return importlib.import_module(f"{pkg}.{module}")


def write_standin(name: str, folder: Path) -> Path:
    """Write the stand-in of registry model ``name`` to a plain ``folder``."""
    from dlmspec_min.texts.tokenizer import save_tokenizer

    if name not in STANDINS:
        raise ValueError(f"no stand-in for {name!r}; one of {', '.join(STANDINS)}")
    s = STANDINS[name]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for src in sorted((CODE / s.family).glob("*.py")):
        if src.name != "__init__.py":
            shutil.copyfile(src, folder / src.name)
    auto_map = {
        "AutoConfig": f"{s.config_module}.{s.config_class}",
        "AutoModel": f"{s.model_module}.{s.model_class}",
    }
    config_cls = getattr(_code(s.family, s.config_module), s.config_class)
    model_cls = getattr(_code(s.family, s.model_module), s.model_class)
    config = config_cls(vocab_size=s.vocab_size, mask_token_id=s.mask_id,
                        eos_token_id=s.eos_id, head_bias=True, **s.config)
    model = model_cls(config)
    tokenizer = _tokenizer(s)
    prior = _log_prior(s, tokenizer.get_vocab())
    _init_weights(model, s.vocab_size, prior, _seed(name))
    model.save_pretrained(folder, safe_serialization=True)
    cfg_file = folder / "config.json"
    cfg = json.loads(cfg_file.read_text())
    cfg.update(architectures=[s.model_class], auto_map=auto_map)
    cfg_file.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    save_tokenizer(tokenizer, folder)
    return folder


def _revision(name: str) -> str:
    return hashlib.sha1(f"dlmspec stand-in {name}".encode()).hexdigest()


def write_hub_cache(hf_home: Path, names=None) -> dict[str, Path]:
    """Write the stand-ins of ``names`` (default: all four) as a Hugging Face hub
    cache under ``hf_home`` (use it as ``HF_HOME``); returns name -> snapshot."""
    names = list(STANDINS) if names is None else list(names)
    hub = Path(hf_home) / "hub"
    out = {}
    for name in names:
        repo = hub / ("models--" + name.replace("/", "--"))
        rev = _revision(name)
        snapshot = repo / "snapshots" / rev
        if snapshot.exists():
            shutil.rmtree(snapshot)
        write_standin(name, snapshot)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(rev)
        out[name] = snapshot
    return out
