"""A page's parameters, declared once: one typed ``Config`` per notebook.

Each claim's experiment module declares ``Config``, a frozen dataclass whose
fields are its notebook's parameters: name, type, default and help
(``param``). Everything else is generated from it or checked against it:

- the notebook's ``parameters`` cell is ``Config.cell()``, written into the
  notebook by ``python -m dlmspec_min.plumbing.cells`` (papermill needs the
  literal cell; ``tests/test_cells.py`` fails where the two differ);
- the notebook builds its config from the cell's values with
  ``plumbing.params.validated(Config, globals())``: each value against the rule
  for its name (``plumbing.params.RULES``: a parameter means the same on every
  page), then the rules between values;
- the module's ``measure`` reads it: ``measure(models, world, config)`` for
  each claim, ``measure(models, config, ...)`` for the trajectory page,
  ``measure(settings, verdict, config)`` for the regime page,
  ``measure(models, tokenizer, config)`` for the models page;
- the runner's ``--help`` and checks read the cell, the seed page's sizes are
  checked against the claim's fields (``plumbing.seeds``).

``Config()`` is the page's defaults, ``config.replace(n_samples=4)`` a changed
copy, as ``GenerationConfig`` and ``generate(..., **overrides)`` in transformers.

Pages share one parameter tree (issue 54). A name that more than one page takes
is declared once, in ``SHARED`` (its default and help; its rule is
``plumbing.params.RULES[name]``), and the bases below hold what the pages take
in common: ``Measured`` (sizes, seed, loading), ``Loaded`` (``device_map``),
``Claim`` (world, target, the world's decode), ``Sampled`` (temperature),
``Drafted`` (draft and K) and ``Coded`` (the SID head's codebooks). A page
extends one of them with its own few fields (``param``), takes a further shared
name with ``shared(name)``, and overrides a shared default with a plain literal
(``n_samples: int = 24``) or ``shared(name, default, note)``. The decode
defaults are the default world's catalogue entry (``catalogue.get(DEFAULT)``:
the prose world's decode is written there only); a page whose decode differs
overrides it, and its cell says so (``(this page's; the world's is 48)``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, ClassVar

from .. import catalogue

TYPES = ("int", "float", "str", "bool", "list", "dict")  # what a cell may declare


def param(default: Any, help: str) -> Any:
    """A parameter's field: its default and its one-line help (no '=' in it:
    papermill's parser would skip the line)."""
    if "=" in help or "\n" in help:
        raise ValueError(f"help must be one line without '=': {help!r}")
    return _field(default, {"help": help})


def _field(default: Any, meta: dict) -> Any:
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default),
                                 metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def literal(value: Any) -> str:
    """A default as the cell writes it: Python's True/False, JSON otherwise."""
    if isinstance(value, bool):
        return repr(value)
    return json.dumps(value)


@dataclasses.dataclass(frozen=True)
class Config:
    """The base of every page's config: no fields of its own. Each page's
    module declares one subclass ``Config``, its parameters; ``NOTEBOOK`` names
    the page and ``Config.cell()`` writes its parameters cell."""

    NOTEBOOK: ClassVar[str] = ""  # the notebook's stem, e.g. "03_win_condition"

    @classmethod
    def fields(cls) -> list[dataclasses.Field]:
        """The fields in the cell's order: models first, then sizes and the
        decode, the page's own, and bootstrap, seed and loading last."""
        found = list(dataclasses.fields(cls))
        return sorted(found, key=lambda f: (_place(f.name), found.index(f)))

    @classmethod
    def help(cls, name: str) -> str:
        """The one-line help of parameter ``name`` as the cell writes it: a
        page's own field's, else ``SHARED``'s (and the page's note), and where
        the page's default differs from its world's decode, that it does."""
        f = next(f for f in dataclasses.fields(cls) if f.name == name)
        if "help" in f.metadata:
            return f.metadata["help"]
        text = SHARED[name][1]
        if f.metadata.get("note"):
            text += f"; {f.metadata['note']}"
        if name in WORLD_DECODE and _default(f) != WORLD_DECODE[name]:
            text += f" (this page's; the world's is {literal(WORLD_DECODE[name])})"
        return text

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in cls.fields()]

    @classmethod
    def cell(cls) -> str:
        """The notebook's ``parameters`` cell: ``name: type = default  # help``."""
        lines = []
        for f in cls.fields():
            if f.type.split("[")[0] not in TYPES:  # list[int] too
                raise TypeError(f"{cls.__qualname__}.{f.name}: type {f.type!r} is not "
                                f"one of {TYPES}")
            lines.append(f"{f.name}: {f.type} = {literal(_default(f))}  "
                         f"# {cls.help(f.name)}")
        return "\n".join(lines)

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Config:
        """The config of ``values`` (a dict holding every field, e.g. ``globals()``
        after the parameters cell); names it does not declare are ignored."""
        missing = [n for n in cls.names() if n not in values]
        if missing:
            raise ValueError(f"{cls.__qualname__}: no value for {missing}")
        return cls(**{n: values[n] for n in cls.names()})

    def values(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in self.names()}

    def replace(self, **changes: Any) -> Config:
        unknown = set(changes) - set(self.names())
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no parameter "
                            f"{sorted(unknown)}")
        return dataclasses.replace(self, **changes)



def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


_WORLD = catalogue.get(catalogue.DEFAULT)  # the pages' own world (their defaults)
# the default world's decode and prompts, by parameter name: the pages' defaults
WORLD_DECODE: dict[str, Any] = {
    k: v for k, v in _WORLD.defaults.items()
    if k not in ("world", *catalogue.MODEL_PARAMETERS)}

# Every name more than one page takes: (default, help), each written once. A
# model's default is the default world's rung of its role; the decode's is that
# world's (WORLD_DECODE).
SHARED: dict[str, tuple[Any, str]] = {
    "world": (catalogue.DEFAULT,
              "the world measured: a world of dlmspec_min/catalogue.py (the "
              "runner's --help lists them); -p world NAME applies its entry, then "
              "notebooks/profiles/<its profile>/<this notebook>.yaml"),
    "model": (_WORLD.role("target"),
              "the target denoiser: an embedded model (dlmspec/...), a registry "
              "name or a local folder"),
    "large_model": (_WORLD.role("strong"), "the stronger target (the paper's: "
                    "LLaDA-8B)"),
    "small_model": (_WORLD.role("draft"), "a weaker model, for context"),
    "draft": (_WORLD.role("draft"),
              "the cheap draft (same vocabulary as the target)"),
    "trust_remote_code": (False,
                          "allow a registry model's own code (LLaDA, Dream, MDLM)"),
    "n_samples": (16, "samples each decoder decodes"),
    "prompt_source": (WORLD_DECODE["prompt_source"],
                      "the prompts: [BOS] alone (bos), [BOS] and the start of "
                      "held-out Brown sentences (brown), a math world's held-out "
                      "questions (questions), or a datasets dataset "
                      "NAME:CONFIG:SPLIT:COLUMN such as gsm8k:main:test:question "
                      "(hub access opted in)"),
    "prompt_length": (WORLD_DECODE["prompt_length"],
                      "prompt tokens, [BOS] included (a brown or dataset source; "
                      "a math world's questions are as long as its rows)"),
    "gen_length": (WORLD_DECODE["gen_length"], "generated tokens per sample"),
    "block_length": (WORLD_DECODE["block_length"],
                     "block length of the blocked decoders"),
    "threshold": (WORLD_DECODE["threshold"], "Fast-dLLM confidence threshold"),
    "temperature": (WORLD_DECODE["temperature"],
                    "sampling temperature of every decode (0 is greedy and makes "
                    "every sample of one prompt identical)"),
    "K": (WORLD_DECODE["K"], "number of semantic clusters"),
    "thresholds": ([0.1], "lower thresholds also run, to see what parallel steps "
                   "commit"),
    "K_sweep": ([32, 128, 512], "further K values (cluster counts of the sweep)"),
    "levels": (1, "residual k-means levels (an ID is the tuple of all levels)"),
    "n_train": (2048, "training windows of the SID head"),
    "n_codebooks": (5, "codebooks (IDs + head) alpha_SID is averaged over: seeds "
                    "seed*n ... seed*n+n-1"),
    "n_permutations": (10000, "size-matched random clusterings per K"),
    "n_repeats": (3, "timed repeats (after one untimed warm-up)"),
    "judge": ("smollm2-135m", "independent judge model of the decoded texts"),
    "sequential": (False, "measure in looks by the sequential rule of "
                   "book/claims.yml (power: sequential), from its first size up to "
                   "its cap; false: one look at n_samples, 95 % intervals"),
    "n_bootstrap": (2000, "bootstrap replicates (resampling whole samples)"),
    "seed": (0, "seed of every random draw"),
    "dtype": ("float32", "compute dtype of the weights: float32, bfloat16, "
              "float16 or none (as saved)"),
    "device_map": ("none", "from_pretrained device_map: none (load, then move to "
                   "device), auto (shard over GPUs) or a device"),
    "device": ("cpu", "torch device"),
}
_HEAD = ("world", "model", "large_model", "small_model", "draft", "trust_remote_code",
         "n_samples", "prompt_source", "prompt_length", "gen_length", "block_length",
         "threshold", "temperature", "K")
_TAIL = ("n_bootstrap", "seed", "dtype", "device_map", "device")


def _place(name: str) -> tuple[int, int]:
    if name in _HEAD:
        return 0, _HEAD.index(name)
    if name in _TAIL:
        return 2, _TAIL.index(name)
    return 1, 0  # the page's own, in the order it declares them


_NONE = object()


def shared(name: str, default: Any = _NONE, note: str = "") -> Any:
    """A field of a name in ``SHARED``: its default unless the page gives its own,
    its help with the page's ``note`` after it."""
    if name not in SHARED:
        raise ValueError(f"{name!r} is not a shared parameter; declare it with "
                         "param(default, help) on its page")
    if "=" in note or "\n" in note:
        raise ValueError(f"a note must be one line without '=': {note!r}")
    value = SHARED[name][0] if default is _NONE else default
    return _field(value, {"note": note} if note else {})


@dataclasses.dataclass(frozen=True)
class Measured(Config):
    """What every measuring page takes: its sizes, seed and loading."""

    n_samples: int = shared("n_samples")
    n_bootstrap: int = shared("n_bootstrap")
    seed: int = shared("seed")
    dtype: str = shared("dtype")
    device: str = shared("device")


@dataclasses.dataclass(frozen=True)
class Loaded(Measured):
    """A page that may place a model with ``from_pretrained``'s ``device_map``."""

    device_map: str = shared("device_map")


@dataclasses.dataclass(frozen=True)
class Claim(Loaded):
    """A claim page: a world, its target and the world's decode."""

    world: str = shared("world")
    model: str = shared("model")
    trust_remote_code: bool = shared("trust_remote_code")
    gen_length: int = shared("gen_length")
    block_length: int = shared("block_length")
    threshold: float = shared("threshold")


@dataclasses.dataclass(frozen=True)
class Sampled(Claim):
    """A claim page that samples (the world's temperature)."""

    temperature: float = shared("temperature")


@dataclasses.dataclass(frozen=True)
class Drafted(Sampled):
    """A claim page with a draft and semantic clusters."""

    draft: str = shared("draft")
    K: int = shared("K")


@dataclasses.dataclass(frozen=True)
class Sequential(Config):
    """A claim page the sequential rule may grow in looks (``plumbing.sequential``,
    ``book/claims.yml`` power: sequential:); a base beside the others."""

    sequential: bool = shared("sequential")


@dataclasses.dataclass(frozen=True)
class Coded(Drafted):
    """A claim page that trains SID heads and averages over codebooks."""

    levels: int = shared("levels")
    n_train: int = shared("n_train")
    n_codebooks: int = shared("n_codebooks")
