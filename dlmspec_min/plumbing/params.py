"""Notebook parameters: reading the ``parameters`` cell and validating values.

Every notebook has exactly one cell tagged ``parameters`` holding literal
assignments ``name: type = value  # help``. papermill's ``inspect_notebook``
reads that cell (names, types, defaults, help); this module adds what papermill
does not do: coercing command-line strings to the declared type and checking
each value against the rule for its name, so a bad value is one clear line
before any model is loaded. Notebooks check their own parameters too
(``validated``: the page's ``Config`` from its cell's values), so a bad
override fails the same way under papermill.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import catalogue

DEVICE_RE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")


def _model_name(v):
    from ..decoding.denoisers import known_model_names

    names = known_model_names()  # the embedded ones this machine holds
    if v in names or v in catalogue.rungs() or Path(v).is_dir():
        return None  # a catalogue rung not trained here: preflight says how
    return f"must be a registered model ({', '.join(names)}) or a local model folder"


def _positive_int(v):
    return (
        None
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1
        else "must be an integer >= 1"
    )


def _nonneg_int(v):
    return (
        None
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0
        else "must be an integer >= 0"
    )


def _unit_interval_open_left(v):
    return (
        None
        if isinstance(v, (int, float)) and 0 < v <= 1
        else "must be a number in (0, 1]"
    )


def _fraction(v):
    return (
        None
        if isinstance(v, (int, float)) and 0 <= v < 1
        else "must be a number in [0, 1)"
    )


def _nonneg_float(v):
    return None if isinstance(v, (int, float)) and v >= 0 else "must be a number >= 0"


def _positive_float(v):
    return None if isinstance(v, (int, float)) and v > 0 else "must be a number > 0"


def _device(v):
    return (
        None
        if isinstance(v, str) and DEVICE_RE.match(v)
        else "must be 'cpu', 'cuda', 'cuda:N' or 'mps'"
    )


def _prompt_source(v):
    from .prompt_sources import check_source

    return check_source(v)


def _choices(*options):
    def check(v):
        return (
            None if v in options else f"must be one of {', '.join(map(repr, options))}"
        )

    return check


def _world(v):
    return (None if v in catalogue.NAMES
            else "must be a world of the catalogue: one of "
            + ", ".join(catalogue.NAMES))


def _k_list(v):
    ok = isinstance(v, list) and v and all(isinstance(k, int) and k >= 2 for k in v)
    return None if ok else "must be a non-empty list of integers >= 2"


def _float_list(v):
    ok = (
        isinstance(v, list)
        and v
        and all(isinstance(x, (int, float)) and 0 < x <= 1 for x in v)
    )
    return None if ok else "must be a non-empty list of numbers in (0, 1]"


def _seed_list(v):
    ok = (isinstance(v, list) and v and len(set(v)) == len(v)
          and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in v))
    return None if ok else "must be a non-empty list of distinct integers >= 0"


def _claim_list(v):
    ok = (isinstance(v, list) and v and len(set(v)) == len(v)
          and all(isinstance(c, str) for c in v))
    return None if ok else "must be a non-empty list of distinct claim ids, e.g. ['C2']"


def _sizes(v):
    ok = isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(p, dict) for k, p in v.items())
    return None if ok else "must map claim ids to {parameter: value} dicts"


# Rules by parameter name, shared by every notebook.
RULES: dict[str, Callable[[Any], str | None]] = {
    "model": _model_name,
    "target": _model_name,
    "draft": _model_name,
    "small_model": _model_name,
    "large_model": _model_name,
    "seed": _nonneg_int,
    "prompt_seed": _nonneg_int,
    "n_samples": _positive_int,
    "n_prompts": _positive_int,
    "n_texts": _positive_int,
    "n_heldout": _positive_int,
    "regime_samples": _positive_int,
    "math_problems": _positive_int,  # held-out problems per math model (00)
    "math_unseen": _positive_int,  # held-out problems of unseen templates (00)
    "math_regime_problems": _positive_int,  # problems of the math regime table (00)
    "gen_length": _positive_int,
    "block_length": _positive_int,
    "prompt_length": _nonneg_int,
    "n_bootstrap": _positive_int,
    "n_permutations": _positive_int,
    "n_repeats": _positive_int,
    "batch_size": _positive_int,
    "K": _positive_int,
    "K_sweep": _k_list,
    "n_codebooks": _positive_int,  # codebooks alpha_SID averages (02, 03, 06, 07)
    "n_codebooks_fine": _positive_int,  # codebooks of a fine-ID setting (11)
    "threshold": _unit_interval_open_left,
    "thresholds": _float_list,
    "factor": _positive_float,
    "temperature": _nonneg_float,
    "quality_bound": _fraction,
    "device": _device,
    "dtype": _choices("float32", "bfloat16", "float16", "none"),  # none: checkpoint's
    "device_map": lambda v: (  # given to from_pretrained; "auto" shards (accelerate)
        None if v in ("none", "auto") or (isinstance(v, str) and DEVICE_RE.match(v))
        else "must be 'none', 'auto' or a device ('cpu', 'cuda', 'cuda:N', 'mps')"
    ),
    "world": _world,  # what a claim is measured in (SPEC.md section 6; 01-05, 07, 09)
    "prompt_source": _prompt_source,  # bos | brown | a datasets dataset (03, 09)
    "trust_remote_code": lambda v: (
        None if isinstance(v, bool) else "must be true or false"
    ),
    "judge": _choices("smollm2-135m", "gpt2"),
    "levels": _positive_int,  # residual semantic-ID levels (02, 03)
    "n_train": _positive_int,  # training windows of the SID head (02, 03)
    "threads": _positive_int,  # torch CPU threads of a timing notebook (09)
    "n_sweep": _positive_int,  # prompts per threshold of the speed/quality sweep (09)
    "n_timed": _positive_int,  # samples in each wall-clock repeat (03)
    "spec_budget": _nonneg_int,  # draft-tree nodes per verify call (09)
    "spec_low": lambda v: (  # lowest confidence the draft branches on (09)
        None if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1
        else "must be a number in [0, 1]"
    ),
    "n_windows": _positive_int,  # held-out windows measured (07)
    "n_positions": _nonneg_int,  # positions measured per window, 0 = all (07)
    "n_tau": _positive_int,  # samples decoded by every accelerator for tau_acc (07)
    "sequential": lambda v: (  # looks by the rule of claims.yml power: sequential
        None if isinstance(v, bool) else "must be true or false"
    ),
    "n_bins": _positive_int,  # equal-count bins of a per-anchor measure (08)
    "n_side": _positive_int,  # samples of the side decodes (08)
    "seeds": _seed_list,  # seeds every claim is rerun at (10)
    "claims": _claim_list,  # claims rerun (10)
    "sizes": _sizes,  # each claim's reduced sizes, its notebook's parameters (10)
}

_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def coerce(value: Any, type_name: str | None) -> Any:
    """Turn a command-line string into the declared type (int, float, list...)."""
    if not isinstance(value, str) or type_name in (None, "str", "None"):
        return value
    if type_name == "bool":
        low = value.lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise ValueError(f"{value!r} is not a boolean (true/false)")
    if type_name in _TYPES:
        return _TYPES[type_name](value)
    if type_name.startswith(("list", "tuple", "dict")):
        return ast.literal_eval(value)
    return value


def check(name: str, value: Any) -> None:
    """Raise ``ValueError`` naming the parameter if ``value`` breaks its rule."""
    rule = RULES.get(name)
    problem = rule(value) if rule else None
    if problem:
        raise ValueError(f"parameter {name}={value!r} {problem}")


def config_of(name: str) -> dict:
    """A model's config.json if it is on this machine without loading the model
    (embedded models, local folders); else {} (hub names are checked at load)."""
    import json

    from ..decoding.denoisers import EMBEDDED_PREFIX
    from ..paths import models_dir

    folder = (models_dir() / name[len(EMBEDDED_PREFIX):]
              if name.startswith(EMBEDDED_PREFIX) else Path(name))
    try:
        return json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}


TARGETS = ("model", "large_model", "small_model")  # parameters naming a denoiser


def _divides(values):
    G, bl = values["gen_length"], values["block_length"]
    if bl > G or G % bl:
        return (f"gen_length={G} must be a multiple of block_length={bl} (blocks are "
                f"decoded left to right); e.g. block_length={math.gcd(G, bl)}")
    return None


def _draft_vocabulary(values):
    """The draft shares its target's vocabulary: large_model's where a notebook
    has one (07), else model's."""
    target_name = "large_model" if "large_model" in values else "model"
    target, draft = values.get(target_name), values["draft"]
    if target is None:
        return None
    vt = config_of(target).get("vocab_size")
    vd = config_of(draft).get("vocab_size")
    if vt is not None and vd is not None and vt != vd:
        return (f"draft={draft!r} has a vocabulary of {vd} tokens, {target_name}="
                f"{target!r} one of {vt}: the draft must share its target's tokenizer")
    return None


def _fits_context(values):
    """Prompt (or the one start token) plus gen_length fit every target's positions."""
    length = values.get("prompt_length", 1) + values["gen_length"]
    for name in TARGETS:
        if name in values:
            limit = config_of(values[name]).get("max_position_embeddings")
            if limit is not None and length > limit:
                return (f"{name}={values[name]!r} takes {limit} positions, but a "
                        f"prompt of {values.get('prompt_length', 1)} and gen_length="
                        f"{values['gen_length']} need {length}")
    return None


MODELS = (*TARGETS, "draft")  # parameters naming a model of the world's ladder
GIVES = ("the runner's -p world NAME gives a world's models (papermill: -f the "
         "YAML that `python -m dlmspec_min.plumbing.run NOTEBOOK -p world NAME "
         "--print-parameters` prints)")


def _world_prompts(values):
    """A world's prompts are its own kind's: the math worlds' are their held-out
    questions (``prompt_source='questions'``), no other world's are."""
    world, source = catalogue.get(values["world"]), values["prompt_source"]
    own = world.prompt_source
    if own == "questions" and source != own:
        return (f"the {world.name} world's prompts are its held-out questions: "
                f"prompt_source='questions', not {source!r}")
    if own != "questions" and source == "questions":
        worlds = [e.name for e in catalogue.ENTRIES if e.prompt_source == "questions"]
        return (f"prompt_source='questions' is a math world's: add -p world "
                f"{worlds[0]} (or one of {', '.join(worlds)})")
    return None


def _world_prompt_length(values):
    """A math world's questions are as long as its models' rows say
    (``catalogue``: its ``prompt_length``)."""
    world = catalogue.get(values["world"])
    length = values["prompt_length"]
    if world.prompt_source == "questions" and length != world.prompt_length:
        return (f"the {world.name} world's questions are {world.prompt_length} tokens "
                f"long (the layout its models were trained on): prompt_length="
                f"{world.prompt_length}, not {values['prompt_length']}")
    return None


def _world_models(values):
    """A world's claims are measured on models that read its rows: its own
    ladder's, or those of a catalogue world that shares its tokenizer and
    layout (``Entry.shares_rows``), or a local folder; the project's models of
    any other world are refused (a hub name is checked when it loads)."""
    world = catalogue.get(values["world"])
    for name in MODELS:
        model = values.get(name)
        if model is None:
            continue
        home = catalogue.of_model(model)
        if home is None:
            if world.kind != "prose" and not Path(model).is_dir():
                return (f"{name}={model!r} is not a model of the {world.name} world "
                        f"(its ladder: {', '.join(world.ladder)}); {GIVES}")
            continue
        if not world.shares_rows(home):
            return (f"{name}={model!r} is a model of the {home.name} world, whose "
                    f"rows the {world.name} world's do not share: add -p world "
                    f"{home.name}, or name a model of {world.name} "
                    f"({', '.join(world.ladder)}); {GIVES}")
    return None


def _n_tau(values):
    n_tau, n = values["n_tau"], values["n_samples"]
    return None if n_tau <= n else f"n_tau={n_tau} must not exceed n_samples={n}"


def _seed_plan(values):
    """The seed page's claims are registered for it, each with its sizes
    (``seeds.check_plan``). That the runner of each claim's notebook accepts
    those sizes (names, types, values, relations) is checked by the runner
    itself (``run.check_relations``, through ``run.prepare_runs``)."""
    from . import claims, seeds

    try:
        seeds.check_plan(values["claims"], values["seeds"], values["sizes"],
                         claims.load_registry())
    except ValueError as e:
        return str(e)
    return None


# Constraints between parameters: (names involved, check). A check runs when a
# notebook has every name it involves, after each value passed its own rule.
# A model of the other world is named before any check that reads the models'
# configurations (a draft of the other world also has the other vocabulary).
RELATIONS: list[tuple[tuple[str, ...], Callable[[dict], str | None]]] = [
    (("gen_length", "block_length"), _divides),
    (("world",), _world_models),
    (("draft",), _draft_vocabulary),
    (("gen_length",), _fits_context),
    (("world", "prompt_source"), _world_prompts),
    (("world", "prompt_length"), _world_prompt_length),
    (("n_tau", "n_samples"), _n_tau),
    (("claims", "seeds", "sizes"), _seed_plan),
]


def check_relations(values: dict[str, Any]) -> None:
    """Raise ``ValueError`` if parameters that must agree do not (one line)."""
    for names, rule in RELATIONS:
        if all(n in values for n in names):
            problem = rule(values)
            if problem:
                raise ValueError(f"parameters {', '.join(names)}: {problem}")


def validate_all(values: dict[str, Any]) -> dict[str, Any]:
    """Check every parameter of a notebook, then their relations; returns them."""
    for name, value in values.items():
        check(name, value)
    check_relations(values)
    return values


def validated(cls, values: dict[str, Any] | None = None):
    """A page's ``Config`` (``cls``) from ``values`` (a notebook's ``globals()``
    after its parameters cell; names the Config does not declare are ignored),
    every value checked by its rule, then their relations (``validate_all``).
    Given a Config instance alone, checks it and returns it."""
    config = cls if values is None else cls.from_values(values)
    validate_all(config.values())
    return config


def notebook_parameters(path: Path) -> dict[str, dict]:
    """The parameters cell of a MyST (or .ipynb) notebook, as papermill inspects it."""
    import tempfile

    import jupytext
    import papermill

    path = Path(path)
    nb = jupytext.read(path)
    n = sum("parameters" in c.metadata.get("tags", []) for c in nb.cells)
    if n != 1:
        raise ValueError(f"{path} has {n} cells tagged 'parameters' (need exactly one)")
    with tempfile.TemporaryDirectory() as tmp:
        ipynb = Path(tmp) / (path.stem + ".ipynb")
        jupytext.write(nb, ipynb)
        found = papermill.inspect_notebook(str(ipynb))
    # papermill's line parser silently skips some lines (e.g. an '=' in the help
    # text); a parameter it skips could never be overridden, so say which
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    declared = [t.target.id for t in ast.parse(cell.source).body
                if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)]
    missed = [name for name in declared if name not in found]
    if missed:
        raise ValueError(
            f"{path}: papermill cannot read the parameter line(s) of {missed}; "
            "write `name: type = value  # help` with no '=' in the help text"
        )
    return found
