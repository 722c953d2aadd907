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
  ``measure(settings, verdict, config)`` for the regime page (the models
  page's ``measure`` still takes its sizes as keywords);
- the runner's ``--help`` and checks read the cell, the seed page's sizes are
  checked against the claim's fields (``plumbing.seeds``).

``Config()`` is the page's defaults, ``config.replace(n_samples=4)`` a changed
copy, as ``GenerationConfig`` and ``generate(..., **overrides)`` in transformers.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, ClassVar

TYPES = ("int", "float", "str", "bool", "list", "dict")  # what a cell may declare


def param(default: Any, help: str) -> Any:
    """A parameter's field: its default and its one-line help (no '=' in it:
    papermill's parser would skip the line)."""
    if "=" in help or "\n" in help:
        raise ValueError(f"help must be one line without '=': {help!r}")
    meta = {"help": help}
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
    """The base of every page's config: no fields of its own."""

    NOTEBOOK: ClassVar[str] = ""  # the notebook's stem, e.g. "03_win_condition"

    @classmethod
    def fields(cls) -> list[dataclasses.Field]:
        return list(dataclasses.fields(cls))

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
            default = (f.default_factory() if f.default is dataclasses.MISSING
                       else f.default)
            lines.append(f"{f.name}: {f.type} = {literal(default)}  "
                         f"# {f.metadata['help']}")
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


def world_param(stem: str, what: str = "the world measured", note: str = "") -> Any:
    """The ``world`` field every page declares: its help names the catalogue's
    worlds (``dlmspec_min.catalogue``), so a new entry shows in every cell."""
    from .. import catalogue

    note = f"; {note}" if note else ""
    *first, last = catalogue.NAMES
    return param(catalogue.DEFAULT,
                 f"{', '.join(first)} or {last}: {what} (prose is Brown, math the "
                 f"free math world{note}); -p world NAME applies its entry in "
                 f"dlmspec_min/catalogue.py, then notebooks/profiles/<its profile>/"
                 f"{stem}.yaml")


# The loading parameters every page with a model declares, each the same on
# every page: one definition each (a fresh field per Config).
def trust_remote_code_param() -> Any:
    return param(False, "allow a registry model's own code (LLaDA, Dream, MDLM)")


def dtype_param() -> Any:
    return param("float32", "compute dtype of the weights: float32, bfloat16, "
                 "float16 or none (as saved)")


def device_map_param() -> Any:
    return param("none", "from_pretrained device_map: none (load, then move to "
                 "device), auto (shard over GPUs) or a device")


def device_param() -> Any:
    return param("cpu", "torch device")
