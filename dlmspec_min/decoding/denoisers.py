"""Denoisers: one small interface over every masked model the decoder runs.

A denoiser maps a partly masked sequence x (B, L) to position-aligned logits
(B, L, V): the logits at j predict the token at j. That is what LLaDA's
``model(x).logits`` gives (Nie et al., 2025) and what any BERT-style masked LM
gives (a masked LM is a one-step denoiser). Dream (Ye et al., 2025) predicts
position j from hidden state j - 1, so its wrapper shifts the logits right by
one (SPEC.md section 2.3). MDLM (Sahoo et al., 2024) needs its SUBS
parameterisation: the mask token gets zero probability.

Models with Fast-dLLM's approximate KV cache (Wu et al., 2025, Sec. 3.1; the
embedded ``DLMForMaskedDiffusion``) also expose ``prefill`` / ``logits_window``.

``load_denoiser`` never downloads anything unless ``DLMSPEC_ALLOW_HUB=1``:
registry models load from the local Hugging Face cache, and remote code runs
only with an explicit ``trust_remote_code=True``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from .files import (
    SHIPPED_MODELS,
    WEIGHT_FILES,
    from_package,
    has_weights,
    models_dir,
    tokenizer_dir,
)

ALLOW_HUB_ENV = "DLMSPEC_ALLOW_HUB"
EMBEDDED_PREFIX = "dlmspec/"
EMBEDDED_SIZES = ("small", "base", "large")  # the rungs of every ladder
# An embedded model is a folder of the data: dlmspec/<size> (the prose ladder,
# data/models/<size>) or dlmspec/<folder>/<size> (a math world's ladder,
# data/models/<folder>/<size>). Which ladders exist is read from the disk
# (``embedded_models``), never listed here: the worlds are dlmspec_min.catalogue's,
# and this folder imports nothing of the rest of the package.
EMBEDDED_NAME = re.compile(
    rf"^{re.escape(EMBEDDED_PREFIX)}(?:(?P<folder>[a-z0-9_]+)/)?"
    rf"(?P<size>{'|'.join(EMBEDDED_SIZES)})$")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt")

LLADA_MASK_ID, LLADA_EOS_ID, LLADA_EOT_ID = 126336, 126081, 126348
DREAM_MASK_ID = 151666
GPT2_EOS_ID = 50256
MDLM_MASK_ID = 50257  # appended after GPT-2's 50257 tokens


@dataclass(frozen=True)
class ModelSpec:
    """A paper-scale model: where it lives and the constants the decoder needs."""

    name: str
    role: str  # "denoiser" or "judge"
    auto_class: str  # the transformers Auto class that loads it
    trust_remote_code: bool
    mask_id: int | None = None
    eos_id: int | None = None
    eot_id: int | None = None
    shifted: bool = False  # Dream: logits at j come from hidden state j - 1
    tokenizer: str | None = None  # when the tokenizer lives in another repository
    kind: str = "masked_lm"  # "masked_lm" (model(input_ids).logits) or "mdlm"
    notes: str = ""


PAPER_MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        *(  # the two LLaDA-8B checkpoints share code, ids and special tokens
            ModelSpec(name, "denoiser", "AutoModel", True, LLADA_MASK_ID, LLADA_EOS_ID,
                      LLADA_EOT_ID, notes=notes)
            for name, notes in (
                ("GSAI-ML/LLaDA-8B-Base", "the strong 8B target (C7)"),
                ("GSAI-ML/LLaDA-8B-Instruct", "chat template; EoT ends a turn"),
            )
        ),
        ModelSpec(
            "Dream-org/Dream-v0-Base-7B",
            "denoiser",
            "AutoModel",
            True,
            DREAM_MASK_ID,
            shifted=True,
            notes="second 7B target",
        ),
        ModelSpec(
            "Dream-org/Dream-v0-Instruct-7B",
            "denoiser",
            "AutoModel",
            True,
            DREAM_MASK_ID,
            shifted=True,
            notes="second 7B target, chat",
        ),
        ModelSpec(
            "kuleshov-group/mdlm-owt",
            "denoiser",
            "AutoModelForMaskedLM",
            True,
            MDLM_MASK_ID,
            GPT2_EOS_ID,
            tokenizer="gpt2",
            kind="mdlm",
            notes="small public MDLM; its remote code imports flash_attn (GPU)",
        ),
        ModelSpec(
            "gpt2",
            "judge",
            "AutoModelForCausalLM",
            False,
            eos_id=GPT2_EOS_ID,
            notes="the independent judge (C5): a causal LM, not a denoiser",
        ),
    )
}


def embedded_models() -> tuple[str, ...]:
    """The embedded models on this machine: every ``data/models/<size>`` and
    ``data/models/<folder>/<size>`` (``models_dir()``) that holds a config.json,
    as ``dlmspec/...`` names, sorted. A world's ladder is found by its folder:
    adding a world adds no line here."""
    root = models_dir()
    found = [p.parent.relative_to(root).as_posix()
             for pattern in ("*/config.json", "*/*/config.json")
             for p in root.glob(pattern)]
    return tuple(sorted(EMBEDDED_PREFIX + f for f in found
                        if EMBEDDED_NAME.match(EMBEDDED_PREFIX + f)))

# How a config.json names a paper model's family: by its model_type, by an
# architecture, or by the module its auto_map points to. Members of one family
# share code, mask id, shift and special ids, so any member's spec serves.
FAMILIES: dict[str, tuple[str, tuple[str, ...], str]] = {
    # family: (model_type, (architectures, auto_map modules), registry name)
    "llada": ("llada", ("LLaDAModelLM", "modeling_llada"), "GSAI-ML/LLaDA-8B-Base"),
    "dream": ("dream", ("DreamModel", "modeling_dream"), "Dream-org/Dream-v0-Base-7B"),
    "mdlm": ("mdlm", ("MDLM", "modeling_mdlm"), "kuleshov-group/mdlm-owt"),
}


def family_of(config: dict) -> str | None:
    """The paper-model family a config.json names ("llada", "dream", "mdlm") or None."""
    model_type = str(config.get("model_type", "")).lower()
    names = set(config.get("architectures") or [])
    modules = {str(v).split(".")[0] for v in (config.get("auto_map") or {}).values()}
    for family, (mtype, markers, _) in FAMILIES.items():
        if model_type == mtype or names & set(markers) or modules & set(markers):
            return family
    return None


def spec_for_config(config: dict) -> ModelSpec | None:
    """The registry spec of the family a config.json names, else None."""
    family = family_of(config)
    return None if family is None else PAPER_MODELS[FAMILIES[family][2]]


class ModelNotAvailableError(FileNotFoundError):
    """A model that is not on this machine and may not be downloaded here.

    Raised by ``load_denoiser``: an embedded model that is not trained or
    whose weights cannot be read, or a paper-scale model missing from the
    local Hugging Face cache while downloads are off (``DLMSPEC_ALLOW_HUB``
    is not ``1``). The message names the command that makes it available. A
    subclass of ``FileNotFoundError``.
    """


def model_input_device(model) -> torch.device | None:
    """The device of a model's input embeddings, else of its first parameter, else
    None (a model without parameters reads its input where it is)."""
    try:
        return model.get_input_embeddings().weight.device
    except (AttributeError, NotImplementedError):
        first = next(model.parameters(), None)
        return None if first is None else first.device


class Denoiser:
    """Wraps a model so that ``logits(x)`` is position-aligned, without gradients.

    Any model whose ``model(input_ids=x)`` returns ``.logits`` (B, L, V) fits:
    ``AutoModelForMaskedLM`` (BERT, RoBERTa, ModernBERT, the embedded model; a
    masked LM is a one-step denoiser) and the LLaDA / Dream remote code. The
    model is put in eval mode; inputs go to its input embeddings' device and
    logits come back on the input's. A model with Fast-dLLM's approximate KV
    cache (``supports_kv_cache``, ``prefill``, ``forward_window``, as
    ``DLMForMaskedDiffusion``) can decode with ``DecodeConfig(cache=...)``.

    Parameters
    ----------
    model : torch.nn.Module
        The masked model; ``model(input_ids=x)`` (B, L) long -> an output
        with ``.logits`` (or a tuple whose first item is the logits), (B, L, V).
    mask_id : int
        The id of the mask token the decoder fills in (a BERT tokenizer's
        ``mask_token_id``; LLaDA 126336).
    shifted : bool, keyword-only, default False
        True if the logits at position j predict token j + 1 (Dream): they are
        shifted right by one so that they are position-aligned. A shifted
        denoiser cannot use a KV cache.
    vocab_size : int or None, keyword-only, default None
        V; ``None``: the model config's ``vocab_size``.

    Attributes
    ----------
    spec : ModelSpec or None
        The registry entry a paper model was loaded by (its special ids), else
        None.
    prompt_length : int or None
        The prompt length the model was trained to answer after (set by
        ``load_denoiser`` from a folder's ``training.json``, by name or by
        folder: the embedded math models' 32; pass it to ``encode_prompts``),
        else None: any prompt length.
    """

    spec: ModelSpec | None = None
    prompt_length: int | None = None

    def __init__(
        self,
        model,
        mask_id: int,
        *,
        shifted: bool = False,
        vocab_size: int | None = None,
    ):
        if mask_id is None:
            raise ValueError("a denoiser needs the mask token id; pass mask_id=...")
        self.model = model.eval()
        self.mask_id = int(mask_id)
        self.shifted = bool(shifted)
        config = getattr(model, "config", None)
        self.vocab_size = int(vocab_size or getattr(config, "vocab_size", 0)) or None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({type(self.model).__name__}, "
            f"mask_id={self.mask_id}, shifted={self.shifted})"
        )

    @property
    def input_device(self) -> torch.device | None:
        """Where the model reads its input ids: its input embeddings' device (with
        ``device_map="auto"`` a sharded model's layers live on several devices)."""
        return model_input_device(self.model)

    def _to_input(self, x: torch.Tensor) -> torch.Tensor:
        device = self.input_device
        return x if device is None else x.to(device)

    def _raw_logits(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=self._to_input(x))
        return out.logits if hasattr(out, "logits") else out[0]  # (B, L, V)

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Position-aligned logits on ``x``'s device: (B, L) -> (B, L, V)."""
        logits = self._raw_logits(x).to(x.device)  # (B, L, V); the last shard's device
        if self.shifted:  # Dream: row j holds the prediction for j + 1
            logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
        return logits

    @property
    def supports_cache(self) -> bool:
        """True iff the model has Fast-dLLM's approximate KV cache (and no shift)."""
        has_cache = bool(getattr(self.model, "supports_kv_cache", False))
        return has_cache and not self.shifted

    def _require_cache(self):
        if not self.supports_cache:
            why = "its logits are shifted" if self.shifted else "it has no KV cache"
            raise NotImplementedError(
                f"{type(self.model).__name__} cannot decode with a KV cache ({why}); "
                "use DecodeConfig(cache='none')"
            )

    @torch.no_grad()
    def prefill(self, x: torch.Tensor):
        """Full forward (B, L) -> (logits (B, L, V), cache of every layer)."""
        self._require_cache()
        logits, cache = self.model.prefill(self._to_input(x))
        return logits.to(x.device), cache

    @torch.no_grad()
    def logits_window(self, x_window: torch.Tensor, start: int, cache) -> torch.Tensor:
        """Logits (B, W, V) of positions [start, start + W); the rest from ``cache``."""
        self._require_cache()
        logits = self.model.forward_window(self._to_input(x_window), start, cache)
        return logits.to(x_window.device)


class MDLMDenoiser(Denoiser):
    """MDLM (kuleshov-group/mdlm-owt) with its SUBS parameterisation.

    Its forward takes ``timesteps``. The released model is trained without time
    conditioning (config ``time_conditioning=False``: the backbone replaces sigma
    by zeros itself), so passing zeros is exact, not an approximation. A
    time-conditioned checkpoint is refused (``NotImplementedError``). SUBS: the
    mask logit is set to -inf.

    Parameters
    ----------
    model : torch.nn.Module
        MDLM's model (its remote code, loaded with ``AutoModelForMaskedLM``).
    mask_id : int, default 50257
        The mask id MDLM appends after GPT-2's 50257 tokens.
    **kwargs
        Passed to ``Denoiser`` (``shifted``, ``vocab_size``).
    """

    def __init__(self, model, mask_id: int = MDLM_MASK_ID, **kwargs):
        if getattr(model.config, "time_conditioning", False):
            raise NotImplementedError(
                "this MDLM checkpoint is time-conditioned; the decoder has no noise "
                "level to give it (only time_conditioning=False models are supported)"
            )
        super().__init__(model, mask_id, **kwargs)

    def _raw_logits(self, x: torch.Tensor) -> torch.Tensor:
        x = self._to_input(x)
        sigma = torch.zeros(x.shape[0], device=x.device)  # ignored by the backbone
        out = self.model(input_ids=x, timesteps=sigma, return_dict=True)
        logits = out.logits.clone()  # (B, L, V)
        logits[..., self.mask_id] = float("-inf")  # SUBS: never predict [MASK]
        return logits


# --- loading --------------------------------------------------------------------


def _has_tokenizer(path: Path) -> bool:
    return any((path / f).exists() for f in TOKENIZER_FILES)


def _local_tokenizer(path: Path):
    """The tokenizer saved next to the weights, else None."""
    if not _has_tokenizer(path):
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def _mask_id(tokenizer, config) -> int:
    for source in (tokenizer, config):
        for attr in ("mask_token_id", "mask_id"):
            v = getattr(source, attr, None)
            if isinstance(v, int):
                return v
    raise ValueError(
        "cannot find the mask token id: the tokenizer has no mask token and the "
        "config no mask_token_id; build the Denoiser yourself with mask_id=..."
    )


def _read_config(path: Path) -> dict:
    try:
        return json.loads((path / "config.json").read_text())
    except (OSError, ValueError):  # no or unreadable config: transformers says why
        return {}


def _wrap(spec: ModelSpec, model):
    """The denoiser a registry spec prescribes, with the spec attached."""
    vocab = getattr(model.config, "vocab_size", None)
    if isinstance(vocab, int) and spec.mask_id >= vocab:
        raise ValueError(
            f"the config names {spec.name}'s family, but its vocabulary ({vocab}) has "
            f"no mask id {spec.mask_id}; build Denoiser(model, mask_id=...) yourself"
        )
    if spec.kind == "mdlm":
        den = MDLMDenoiser(model, spec.mask_id)
    else:
        den = Denoiser(model, spec.mask_id, shifted=spec.shifted)
    den.spec = spec
    return den


def _refuse_remote_code(what: str):
    raise ValueError(
        f"{what} runs its own Python code; opt in explicitly with "
        "load_denoiser(..., trust_remote_code=True) after reading that code"
    )


def _placed(model, device, device_map):
    """A model loaded with ``device_map`` is where accelerate put it; else move it."""
    return model if device_map is not None else model.to(device)


def check_model_folder(path: Path, argument: str = "name_or_path",
                       weights: bool = True) -> None:
    """One line, before transformers reads anything, when a folder is no
    complete saved model (``ModelNotAvailableError``): it is empty, has no
    ``config.json`` or (``weights``) lacks its weights."""
    entries = sorted(p.name for p in path.iterdir())
    if not entries:
        what = "is empty"
    elif "config.json" not in entries:
        what = f"has no config.json (it holds {', '.join(entries[:4])}" + (
            ", ...)" if len(entries) > 4 else ")")
    elif weights and not has_weights(path):
        what = ("has a config.json but no weights (no "
                f"{' or '.join(WEIGHT_FILES)}, nor an index with all its shards)")
    else:
        return
    raise ModelNotAvailableError(
        f"{argument}: the folder {path} {what}; a saved model holds config.json and "
        "its weights (save_pretrained writes both)"
    )


def _from_local_dir(path: Path, trust_remote_code: bool, device, dtype,
                    device_map=None):
    import transformers

    check_model_folder(path, weights=False)

    from . import modeling  # noqa: F401  (registers the embedded model type)

    config = _read_config(path)
    spec = spec_for_config(config)
    if spec is None and config.get("auto_map"):
        raise ValueError(
            f"{path} holds remote code of a model this package does not know "
            f"(model_type {config.get('model_type')!r}); load it yourself and wrap "
            "it: Denoiser(model, mask_id=..., shifted=...) (shifted=True if the "
            "logits at j predict token j + 1)"
        )
    if spec is not None and spec.trust_remote_code and not trust_remote_code:
        _refuse_remote_code(f"{path} (a {family_of(config)} checkpoint)")
    check_model_folder(path)
    auto = getattr(transformers, spec.auto_class if spec else "AutoModelForMaskedLM")
    model = _placed(auto.from_pretrained(
        path, trust_remote_code=trust_remote_code, local_files_only=True, dtype=dtype,
        device_map=device_map,
    ), device, device_map)
    tokenizer = _local_tokenizer(path)
    if spec is not None:
        return _wrap(spec, model), tokenizer
    denoiser = Denoiser(model, _mask_id(tokenizer, model.config))
    denoiser.prompt_length = _trained_prompt_length(path)
    return denoiser, tokenizer


def _load_embedded(name: str, device, dtype, device_map=None):
    size = name[len(EMBEDDED_PREFIX) :]
    path = models_dir() / size
    folder, _, short = size.rpartition("/")
    # a ladder in a folder is a math world's (train_math finds the world whose
    # folder it is); the prose ladder's rungs lie in data/models itself
    how = (f"`python -m dlmspec_min.training.train_math --size {short} --folder "
           f"{folder}`" if folder else
           f"`python -m dlmspec_min.training.train --size {short}`")
    if from_package() and size not in SHIPPED_MODELS:
        shipped = ", ".join(EMBEDDED_PREFIX + s for s in SHIPPED_MODELS)
        raise ModelNotAvailableError(
            f"embedded model {name!r} is not shipped with the installed package "
            f"(it ships {shipped}); the others live in the repository's data/models: "
            "clone it and set DLMSPEC_DATA=/path/to/clone/data"
        )
    if not (path / "config.json").exists():
        raise ModelNotAvailableError(
            f"embedded model {name!r} is not in {path}; train it with {how} "
            "(or set DLMSPEC_DATA)"
        )
    try:  # weights are stored in float16 (size in git); compute in float32
        denoiser, tokenizer = _from_local_dir(
            path, False, device, dtype or torch.float32, device_map
        )
    except (OSError, ValueError, RuntimeError) as e:
        raise ModelNotAvailableError(
            f"the weights in {path} could not be read ({type(e).__name__}: "
            f"{str(e)[:120]}); restore them with `git checkout -- {path}` or retrain "
            f"with {how}"
        ) from e
    if tokenizer is None:
        from transformers import AutoTokenizer

        if _has_tokenizer(tokenizer_dir()):
            tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir())
    return denoiser, tokenizer


def _trained_prompt_length(path: Path) -> int | None:
    """The prompt length a model was trained with (``training.json``'s
    ``prompt_length``: the math models read ``[PAD]``s, ``[BOS]`` and the
    question, and answer from that position on), None if it had none (prose)."""
    try:
        value = json.loads((path / "training.json").read_text()).get("prompt_length")
    except (OSError, ValueError):
        return None
    return int(value) if isinstance(value, int) else None


def _load_registry(spec: ModelSpec, trust_remote_code: bool, device, dtype,
                   device_map=None):
    if spec.role != "denoiser":
        raise ValueError(
            f"{spec.name!r} is the {spec.role} ({spec.notes}), not a denoiser; load "
            f"it with transformers.{spec.auto_class}.from_pretrained"
        )
    if spec.trust_remote_code and not trust_remote_code:
        _refuse_remote_code(f"{spec.name!r} (from the hub)")
    import transformers

    allow_hub = os.environ.get(ALLOW_HUB_ENV) == "1"
    auto = getattr(transformers, spec.auto_class)
    try:
        model = auto.from_pretrained(
            spec.name,
            trust_remote_code=spec.trust_remote_code,
            local_files_only=not allow_hub,
            dtype=dtype,
            device_map=device_map,
        )
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            spec.tokenizer or spec.name,
            trust_remote_code=spec.trust_remote_code,
            local_files_only=not allow_hub,
        )
    except OSError as e:
        where = "could not be fetched" if allow_hub else "is not in the local cache"
        repos = dict.fromkeys([spec.name, spec.tokenizer or spec.name])  # ordered set
        fetch = " && ".join(f"hf download {r}" for r in repos)
        raise ModelNotAvailableError(
            f"{spec.name!r} {where}. On a machine with hub access run `{fetch}` "
            "(older huggingface_hub: `huggingface-cli download`), copy the Hugging "
            f"Face cache (HF_HOME) here and rerun; or set {ALLOW_HUB_ENV}=1 to let "
            f"this call download it. ({type(e).__name__}: {e})"
        ) from e
    return _wrap(spec, _placed(model, device, device_map)), tokenizer


DTYPES = ("float32", "bfloat16", "float16")


def _torch_dtype(dtype):
    """None, a torch dtype, or one of DTYPES / "none" -> a torch dtype or None."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "none":
        return None
    if dtype not in DTYPES:
        raise ValueError(
            f"dtype {dtype!r} must be one of {', '.join(DTYPES)} or 'none'")
    return getattr(torch, dtype)


def _device_map(device_map):
    return None if device_map in (None, "none") else device_map


def known_model_names() -> list[str]:
    """Every name ``load_denoiser`` accepts besides a local directory.

    Returns
    -------
    list of str
        The embedded models on this machine (``embedded_models()``:
        ``dlmspec/base`` ... ``dlmspec/math_free/small`` ...), then the
        paper-scale denoisers (``GSAI-ML/LLaDA-8B-Base``, ...).
    """
    paper = [n for n, spec in PAPER_MODELS.items() if spec.role == "denoiser"]
    return [*embedded_models(), *paper]


def load_denoiser(
    name_or_path,
    *,
    trust_remote_code: bool = False,
    device="cpu",
    dtype: torch.dtype | str | None = None,
    device_map: str | dict | None = None,
):
    """Load a denoiser and its tokenizer, without downloading unless allowed.

    Parameters
    ----------
    name_or_path : str or os.PathLike
        One of three: an embedded model (``dlmspec/small|base|large``, or a
        math ladder's ``dlmspec/math_free/small|base|large``: the math world's;
        ``dlmspec/math/...``: the narrow world's; ``dlmspec/math_order/...``,
        from the repository's ``data/models`` or ``$DLMSPEC_DATA/models``); a
        paper-scale model of ``known_model_names()``
        (``GSAI-ML/LLaDA-8B-Base``, ...: from the local Hugging Face cache;
        ``DLMSPEC_ALLOW_HUB=1`` allows downloading); or a local directory. A
        directory whose ``config.json`` names LLaDA, Dream or MDLM (by
        ``model_type``, ``architectures`` or ``auto_map``) loads
        as that family (auto class, mask id, shift); any other loads with
        ``AutoModelForMaskedLM`` and the tokenizer's mask id.
    trust_remote_code : bool, keyword-only, default False
        Must be True for a model that runs its own Python code (LLaDA, Dream,
        MDLM); without it such a model is refused with ``ValueError``.
    device : str or torch.device, keyword-only, default "cpu"
        Where the model is moved after loading (when ``device_map`` is None).
    dtype : torch.dtype, str or None, keyword-only, default None
        A torch dtype or its name (``"float32"``, ``"bfloat16"``,
        ``"float16"``); ``"none"``/None: the checkpoint's own, float32 for the
        embedded models (stored in float16).
    device_map : str, dict or None, keyword-only, default None
        Given to ``from_pretrained``: ``"auto"`` shards a large model over the
        GPUs (needs accelerate: the ``paper`` extra); ``"none"``/None: load,
        then move to ``device``. A placed model is not moved, and ``Denoiser``
        feeds it on its input embeddings' device.

    Returns
    -------
    tuple of (Denoiser, tokenizer or None)
        The denoiser (an ``MDLMDenoiser`` for MDLM) and its tokenizer; the
        tokenizer is None when a local directory holds none.

    Raises
    ------
    ModelNotAvailableError
        A model that is not on this machine (the message says how to get it).
    ValueError
        An unknown name, a remote-code model without
        ``trust_remote_code=True``, a bad ``dtype``, or a judge (not a
        denoiser).

    Examples
    --------
    >>> denoiser, tokenizer = load_denoiser("dlmspec/small")  # doctest: +SKIP
    >>> load_denoiser("GSAI-ML/LLaDA-8B-Base", trust_remote_code=True,
    ...               device="cuda", dtype="bfloat16")  # doctest: +SKIP
    """
    name = str(name_or_path)
    dtype, device_map = _torch_dtype(dtype), _device_map(device_map)
    if EMBEDDED_NAME.match(name):  # on this machine or not: it says how to get it
        return _load_embedded(name, device, dtype, device_map)
    if name in PAPER_MODELS:
        return _load_registry(PAPER_MODELS[name], trust_remote_code, device, dtype,
                              device_map)
    if name.startswith(EMBEDDED_PREFIX) or not Path(name).is_dir():
        known = ", ".join(known_model_names())
        raise ValueError(
            f"unknown model {name!r}: not a local directory and not one of {known}"
        )
    return _from_local_dir(Path(name), trust_remote_code, device, dtype, device_map)
