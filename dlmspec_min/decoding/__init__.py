"""The decoding core: model, denoisers, the decoding loop, trajectory speculation.

It imports nothing from the rest of ``dlmspec_min`` (a reader who wants only
the decoder copies this folder, or installs the package without extras:
``pip install .``): ``modeling`` (the embedded LLaDA-style model),
``denoisers`` (one interface for every model), ``config``, ``steps`` and
``decode`` (the loop: its options and result, the pieces of one step, the loop
itself), ``speculate`` (trajectory speculation), ``prompts`` (texts to a
left-padded prompt batch) and ``files`` (where the embedded models live: the
clone's ``data/models``, or the few an installed package ships).

The public API is ``__all__``::

    import torch
    from dlmspec_min.decoding import (DecodeConfig, encode_prompts, generate,
                                      load_denoiser)

    denoiser, tokenizer = load_denoiser("dlmspec/small")
    prompt = encode_prompts(tokenizer, ["The jury said"])  # (1, P): [BOS] text
    out = generate(denoiser, prompt, DecodeConfig(gen_length=32, rule="threshold"))
    print(tokenizer.decode(out.generated[0]), out.nfe)  # 32 tokens, forwards per row

Trajectory speculation is an option of the same loop
(``DecodeConfig(speculate="trajectory", rule="threshold")``); its trace is a
``SpecTrace`` in ``DecodeResult.spec``. Its draft shape (``spec_draft``: tree,
chain, mix, rank) and acceptance (``spec_accept``: exact, subset) are options too;
FreeDave's two modes (arXiv 2510.00294) are ``speculate.freedave_config``.
Every other name of the modules stays importable from its module
(``dlmspec_min.decoding.steps.transfer_index``) but is internal: it may
change without notice.

The names load on first access (PEP 562), so importing this package, as the
book's argument checks do for a constant of ``denoisers``, does not by itself
import torch and transformers' model classes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__all__ = [
    "generate",
    "encode_prompts",
    "DecodeConfig",
    "DecodeResult",
    "SpecTrace",
    "Denoiser",
    "MDLMDenoiser",
    "load_denoiser",
    "known_model_names",
    "ModelNotAvailableError",
    "DLMConfig",
    "DLMForMaskedDiffusion",
]

# exported name -> the module (of this package) that defines it
_HOMES = {
    "generate": "decode",
    "encode_prompts": "prompts",
    "DecodeConfig": "config",
    "DecodeResult": "config",
    "SpecTrace": "speculate",
    "Denoiser": "denoisers",
    "MDLMDenoiser": "denoisers",
    "load_denoiser": "denoisers",
    "known_model_names": "denoisers",
    "ModelNotAvailableError": "denoisers",
    "DLMConfig": "modeling",
    "DLMForMaskedDiffusion": "modeling",
}

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ loads them
    from .config import DecodeConfig, DecodeResult
    from .decode import generate
    from .denoisers import (
        Denoiser,
        MDLMDenoiser,
        ModelNotAvailableError,
        known_model_names,
        load_denoiser,
    )
    from .modeling import DLMConfig, DLMForMaskedDiffusion
    from .prompts import encode_prompts
    from .speculate import SpecTrace


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
