"""What every claim's measurement shares: the loaded models and the result type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..decoding.denoisers import load_denoiser


@dataclass
class Models:
    """A target, the draft (the target itself when they are the same name) and
    the target's tokenizer."""

    target: Any
    draft: Any
    tokenizer: Any


def load_models(
    model: str,
    draft: str | None = None,
    *,
    trust_remote_code: bool = False,
    device: str = "cpu",
    dtype: str | None = "float32",
    device_map: str | None = "none",
) -> Models:
    """Load ``model`` and ``draft`` (each once) with the page's loading parameters.

    A claim page needs the target's tokenizer (to tag words and judge texts), so a
    model saved without one is refused here, before anything runs.
    """
    kw = dict(trust_remote_code=trust_remote_code, device=device, dtype=dtype,
              device_map=device_map)
    target, tok = load_denoiser(model, **kw)
    if tok is None:
        raise ValueError(f"{model!r} has no tokenizer saved next to it; save one there")
    same = draft is None or draft == model
    draft_den = target if same else load_denoiser(draft, **kw)[0]
    return Models(target, draft_den, tok)


@dataclass
class Measurement:
    """A claim's measured values and what its page shows.

    ``values``: glue name -> plain scalar, in the order the page records them;
    ``tables``: name -> ``pandas.DataFrame``; ``arrays``: name -> anything the
    page's figures draw (tensors, arrays, lists).
    """

    values: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]
