"""Claims plumbing: record values in notebooks, read them back, compute verdicts.

A notebook records each measured value with ``record(key, value)``, which glues
a plain Python scalar (myst-nb's ``glue``). The book build writes every
executed notebook's glue data next to it (``_build/jupyter_execute/**.glue.json``);
papermill runs keep it in the executed ``.ipynb``. ``read_glued`` reads both.
Verdicts come from the rules in ``book/claims.yml`` (data, not code), evaluated
by a small expression evaluator that only knows numbers, names, arithmetic,
comparisons and and/or/not.
"""

from __future__ import annotations

import ast
import json
import math
import numbers
import operator
import re
from pathlib import Path
from typing import Any

import yaml

from .. import catalogue
from ..paths import REPO_ROOT

REGISTRY = REPO_ROOT / "book" / "claims.yml"
EXECUTED_DIR = REPO_ROOT / "_build" / "jupyter_execute"
NOT_REBUILT = "not yet rebuilt"
NOT_REPLICATED = "not replicated"
STALE = "stale"  # the notebook ran under another fingerprint than the build's
# the glue keys of a run's provenance (``provenance.record_provenance`` records them)
FINGERPRINT_KEY = "provenance_fingerprint"
COMMIT_KEY = "provenance_commit"
INCONCLUSIVE = "inconclusive"
NOT_MEASURED = "not measured"  # a world this claim's page did not measure
# the book's worlds (catalogue.BOOK) and the suffix of their glue names on a
# claim's page (issue 26: the math world's values are glued as c2_alpha_sid_math)
WORLD_SUFFIXES = {w: catalogue.get(w).suffix for w in catalogue.BOOK}
# the kinds a registry without its own ``verdicts:`` list may use
# a verdict's colour wherever the book shows it (dashboard, forest plot)
VERDICT_COLOURS = {
    "replicated": "#1a7f37",
    "direction only": "#9a6700",
    INCONCLUSIVE: "#0969da",
    NOT_REPLICATED: "#cf222e",
    NOT_REBUILT: "#6e7781",
    STALE: "#8250df",
    NOT_MEASURED: "#6e7781",
}
VERDICTS = ["replicated", "direction only", INCONCLUSIVE, NOT_REPLICATED, NOT_REBUILT]


def plain(value: Any) -> int | float | str | bool:
    """Cast numpy/torch scalars to plain Python scalars; refuse anything else."""
    if isinstance(value, (bool, str)):
        return value
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"only scalars can be recorded, got {type(value).__name__}")


def record(key: str, value: Any, display: bool = False):
    """Glue ``value`` (cast to a plain scalar) under ``key``; return it."""
    from myst_nb import glue

    value = plain(value)
    glue(key, value, display=display)
    return value


def record_all(values: dict[str, Any]) -> dict[str, Any]:
    """Glue every entry of a measurement's ``values``; return them as recorded."""
    return {key: record(key, value) for key, value in values.items()}


# --- reading executed notebooks -----------------------------------------------------


NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}  # repr of floats


def _parse_plain(text: str):
    if text.strip() in NON_FINITE:  # a float glued as nan or inf, not a string
        return NON_FINITE[text.strip()]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text.strip("'\"")


def _value_of(output: dict) -> Any:
    data = output.get("data", {})
    text = data.get("text/plain")
    if text is None:  # a glue with display=False keeps a prefixed mime type
        text = next((v for k, v in data.items() if k.endswith("text/plain")), None)
    if isinstance(text, list):
        text = "".join(text)
    return None if text is None else _parse_plain(text)


def read_glued(path: Path) -> dict[str, Any]:
    """Glued values of one executed notebook: a ``.glue.json`` or an ``.ipynb``."""
    path = Path(path)
    if path.suffix == ".ipynb":
        glue_json = path.with_suffix(".glue.json")
        if glue_json.exists():
            return read_glued(glue_json)
        nb = json.loads(path.read_text())
        values = {}
        for cell in nb.get("cells", []):
            for out in cell.get("outputs", []):
                meta = out.get("metadata", {}).get("scrapbook")
                if meta:
                    values[meta["name"]] = _value_of(out)
        return values
    return {k: _value_of(v) for k, v in json.loads(path.read_text()).items()}


def executed_path(notebook: str, executed_dir: Path = EXECUTED_DIR) -> Path:
    """Where the book build writes the executed copy of ``notebooks/NN_x.md``."""
    return Path(executed_dir) / Path(notebook).with_suffix(".ipynb")


def load_registry(path: Path = REGISTRY) -> dict:
    return yaml.safe_load(Path(path).read_text())


# --- verdict rules ------------------------------------------------------------------

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_CMPOPS = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def evaluate(expr: str, values: dict[str, Any]):
    """Evaluate a rule expression over ``values``; unknown names raise ``KeyError``."""

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise KeyError(
                    f"rule {expr!r} needs {node.id!r}, which was not recorded"
                )
            return values[node.id]
        if isinstance(node, ast.BoolOp):
            results = [ev(v) for v in node.values]
            return all(results) if isinstance(node.op, ast.And) else any(results)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            v = ev(node.operand)
            return (not v) if isinstance(node.op, ast.Not) else -v
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = ev(comp)
                if type(op) not in _CMPOPS or not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        raise ValueError(f"unsupported syntax in rule {expr!r}: {ast.dump(node)[:60]}")

    return ev(ast.parse(expr, mode="eval"))


def check_rules(claim_id: str, registry: dict) -> None:
    """Refuse a claim whose rule names or ``otherwise`` (its own, or its
    ``secondary:`` block's) are not registered kinds."""
    kinds = registry.get("verdicts", VERDICTS)
    claim = registry["claims"][claim_id]
    blocks = [("", claim)]
    if "secondary" in claim:
        sec = claim["secondary"]
        if not isinstance(sec, dict) or not {"label", "rule"} <= set(sec):
            raise ValueError(f"{claim_id}: a secondary block needs a label and a rule")
        blocks.append(("secondary ", sec))
    for what, block in blocks:
        names = [*block["rule"], block.get("otherwise", NOT_REPLICATED)]
        unknown = [n for n in names if n not in kinds]
        if unknown:
            raise ValueError(f"{claim_id}: {what}verdicts {unknown} are not in {kinds}")


def _first_that_holds(block: dict, values: dict[str, Any]) -> str:
    for name, expr in block["rule"].items():
        if evaluate(expr, values):
            return name
    return block.get("otherwise", NOT_REPLICATED)


def verdict(claim_id: str, values: dict[str, Any], registry: dict | None = None) -> str:
    """The first verdict whose rule holds, else the claim's ``otherwise``.

    Rules are evaluated in the order the registry lists them; ``otherwise``
    defaults to "not replicated".
    """
    registry = registry or load_registry()
    check_rules(claim_id, registry)
    return _first_that_holds(registry["claims"][claim_id], values)


def secondary_verdict(claim_id: str, values: dict[str, Any],
                      registry: dict | None = None) -> str | None:
    """The verdict of the claim's ``secondary:`` block (label, rule, otherwise),
    evaluated like ``verdict``; None for a claim without one. It is shown beside
    the headline verdict (e.g. C2's on piece-level anchors), never instead."""
    registry = registry or load_registry()
    check_rules(claim_id, registry)
    claim = registry["claims"][claim_id]
    if "secondary" not in claim:
        return None
    return _first_that_holds(claim["secondary"], values)


def reading(claim_id: str, block: str, values: dict[str, Any],
            registry: dict | None = None) -> str:
    """The first rule of a claim's reading block (e.g. C3's ``e2e_quality``) that
    holds, else the block's ``otherwise``: a stated reading beside the verdict,
    named in its own words rather than by a verdict kind."""
    registry = registry or load_registry()
    spec = registry["claims"][claim_id].get(block)
    if not isinstance(spec, dict) or "rule" not in spec or "otherwise" not in spec:
        raise ValueError(f"{claim_id} has no reading block {block!r} with a rule "
                         "and an otherwise")
    return _first_that_holds(spec, values)


def power_reading(claim_id: str, values: dict[str, Any], sizes: list[int],
                  registry: dict | None = None) -> dict | None:
    """A claim's deciding comparison in one world (the registry's ``power:``
    entry): its two sides as (value, low, high) from ``values``, whether their
    intervals separate, and the questions at which they would be expected to
    (``measures.power.size_to_separate`` at the registry's level, ``sizes``
    the run's values of the entry's ``size`` parameters); where the entry
    names the ``shares`` of a mean over codebooks, the size counts them
    (None: no number of questions would do at the run's ``codebooks``), and
    ``codebooks_needed`` says how many codebooks would on the run's
    questions, and where neither alone would, ``both`` the (questions,
    codebooks) of ``power.both_to_separate``. None for a claim without an
    entry or values without its names."""
    from ..measures import power

    registry = registry or load_registry()
    spec = registry.get("power", {}).get("claims", {}).get(claim_id)
    if spec is None:
        return None
    try:
        a, b = (tuple(float(evaluate(str(e), values)) for e in side)
                for side in spec["sides"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    level = registry["power"]["level"]
    shares, books = _shares(spec, values)
    books_needed, both = None, None
    if shares is not None:  # alpha_SID's width: questions' share, codebooks' share
        books_needed = power.codebooks_to_separate(a, b, books, shares, power=level)
    need = power.size_to_separate(a, b, *sizes[:2], power=level, shares_a=shares)
    if shares is not None and need is None and books_needed is None:
        both = power.both_to_separate(a, b, sizes[0], books, shares,
                                      n_b=sizes[1] if len(sizes) > 1 else None,
                                      power=level)
    return {"a": a, "b": b, "separated": power.separated(a, b), "needed": need,
            "labels": spec.get("labels", ["one side", "the other"]),
            "sizes": dict(zip(spec["size"], sizes, strict=False)),
            "codebooks": books, "codebooks_needed": books_needed, "both": both}


def _shares(spec: dict, values: dict[str, Any]):
    """(``power.shares`` of the ``power:`` entry's ``shares`` names, the number
    of codebooks), or (None, None) where the entry names none, ``values`` lack
    them or they are unknown (one codebook)."""
    from ..measures import power

    names = spec.get("shares")
    if not names or any(str(n) not in values for n in names):
        return None, None
    q, spread, books = (values[str(n)] for n in names)
    both = power.shares(q, spread, books)
    return (None, None) if both is None else (both, int(float(books)))


def evidence(claim_id: str, values: dict[str, Any],
             registry: dict | None = None) -> list[dict]:
    """The comparisons a claim's verdict rests on, for drawing (the registry's
    ``evidence:`` entry): per comparison its ``labels``, its two sides ``a`` (the
    build's figure) and ``b`` (what the rule holds it against) as (value, low,
    high) floats, NaN where ``values`` lack a name, whether their intervals
    ``separated``, the ``paper``'s figure of the same quantity or None (a number
    or an expression over the claim's own paper figures), and the axis
    ``scale``. ``sides: power`` reads the claim's ``power:`` sides."""
    registry = registry or load_registry()
    claim = registry["claims"][claim_id]
    figures = {k: v for k, v in claim.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    out = []
    for spec in registry.get("evidence", {}).get(claim_id, []):
        sides = spec["sides"]
        if sides == "power":
            sides = registry["power"]["claims"][claim_id]["sides"]
        a, b = (tuple(_evaluated(e, values) for e in side) for side in sides)
        out.append({"labels": spec["labels"], "a": a, "b": b,
                    "separated": all(map(math.isfinite, a + b))
                    and (a[2] < b[1] or b[2] < a[1]),
                    "paper": (None if spec.get("paper") is None
                              else float(evaluate(str(spec["paper"]), figures))),
                    "scale": spec.get("scale", "linear")})
    return out


def _evaluated(expr, values: dict[str, Any]) -> float:
    """An evidence side's value: NaN where the values lack one of its names."""
    try:
        return float(evaluate(str(expr), values))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return math.nan


def check_values(keys: dict, values: dict[str, Any]) -> list[str]:
    """Problems with recorded values: missing, non-finite or out of range."""
    problems = []
    for key, spec in keys.items():
        if key not in values:
            problems.append(f"{key}: not recorded")
            continue
        v = values[key]
        if (
            not isinstance(v, (int, float))
            or isinstance(v, bool)
            or not math.isfinite(v)
        ):
            problems.append(f"{key}: {v!r} is not a finite number")
            continue
        lo, hi = spec.get("range", (-math.inf, math.inf))
        if not lo <= v <= hi:
            problems.append(f"{key}: {v} outside [{lo}, {hi}]")
    return problems


def dashboard_rows(executed_dir: Path = EXECUTED_DIR, registry: dict | None = None,
                   fingerprint: str | None = None):
    """One row per claim: paper figure, this build's headline values, verdict.

    With ``fingerprint`` (the build's, ``provenance.fingerprint()``), a notebook
    glued with another one shows the verdict ``STALE``: its numbers may not be
    what the current code gives.
    """
    registry = registry or load_registry()
    rows = []
    for cid, claim in registry["claims"].items():
        path = executed_path(claim["notebook"], executed_dir)
        row = {
            "id": cid,
            "statement": claim["statement"],
            "paper": claim["paper"],
            "notebook": claim["notebook"],
            "measured": {},
            "verdict": NOT_REBUILT,
            "glued_verdict": None,
            # the secondary verdict (label, verdict) beside the headline, if any
            "secondary": None,
        }
        sec = claim.get("secondary")
        source_exists = (REPO_ROOT / claim["notebook"]).exists()
        if source_exists and (path.exists() or path.with_suffix(".glue.json").exists()):
            values = read_glued(path)
            row["measured"] = {k: values.get(k) for k in claim["headline"]}
            row["labels"] = {k: claim["keys"][k]["label"] for k in claim["headline"]}
            row["verdict"] = verdict(cid, values, registry)
            row["glued_verdict"] = values.get(f"{cid.lower()}_verdict")
            if sec is not None:
                row["secondary"] = {"label": sec["label"],
                                    "verdict": secondary_verdict(cid, values, registry),
                                    "glued": values.get(sec.get("glued", ""))}
            row["values"] = values
            row["finding"] = {k: values.get(k)
                              for k in claim.get("finding", claim["headline"][:1])}
            row["fingerprint"] = values.get(FINGERPRINT_KEY)
            row["commit"] = values.get(COMMIT_KEY)
            if fingerprint is not None and row["fingerprint"] != fingerprint:
                row["verdict"] = STALE
                if row["secondary"] is not None:
                    row["secondary"]["verdict"] = STALE
            row["stale_worlds"] = add_world_runs(path, values, fingerprint)
        elif sec is not None:
            row["secondary"] = {"label": sec["label"], "verdict": NOT_REBUILT,
                                "glued": None}
        rows.append(row)
    return rows


def world_run_path(page_executed: Path, world: str) -> Path:
    """The executed world run of a page (``worldruns``): ``NN.<world>.ipynb``."""
    page_executed = Path(page_executed)
    return page_executed.with_name(f"{page_executed.stem}.{world}.ipynb")


def add_world_runs(path: Path, values: dict, fingerprint: str | None) -> list[str]:
    """Add to a page's ``values`` each of its world runs' glue under the world's
    suffix (``c2_alpha_sid_math``); returns the worlds whose run is stale."""
    stale = []
    for world, suffix in WORLD_SUFFIXES.items():
        run = world_run_path(path, world)
        if not suffix or not run.exists():
            continue
        glued = read_glued(run)
        values.update({f"{k}{suffix}": v for k, v in glued.items()})
        if fingerprint is not None and glued.get(FINGERPRINT_KEY) != fingerprint:
            stale.append(world)
    return stale


def world_values(values: dict[str, Any], world: str) -> dict[str, Any]:
    """The glued values of one world under the claim's own key names: prose's as
    they are, another world's those whose name ends in its suffix, suffix removed."""
    if world not in WORLD_SUFFIXES:
        raise ValueError(f"unknown world {world!r}; use one of {list(WORLD_SUFFIXES)}")
    suffix = WORLD_SUFFIXES[world]
    if not suffix:
        return {k: v for k, v in values.items()
                if not any(s and k.endswith(s) for s in WORLD_SUFFIXES.values())}
    return {k.removesuffix(suffix): v for k, v in values.items() if k.endswith(suffix)}


def world_cells(row: dict, registry: dict) -> dict[str, dict]:
    """Per world, a dashboard row's verdict and key figure (the claim's first
    ``finding`` key): ``{"verdict", "label", "value"}``. The prose world's verdict
    is the row's (stale and not-rebuilt included); another world's is the same
    rule evaluated on its values, or ``NOT_MEASURED`` when the page glued none
    (or not the ones the rule reads). ``"size"``: the questions a sequential
    run's verdict rests on (``<c>_seq_n`` where the run glued it; None
    otherwise), ``"looks"`` the looks it made."""
    claim = registry["claims"][row["id"]]
    prefix = row["id"].lower() + "_seq_"
    key = claim.get("finding", claim["headline"])[0]
    label = claim["keys"][key]["label"]
    out = {}
    for world in WORLD_SUFFIXES:
        wv = world_values(row.get("values") or {}, world)
        if world == catalogue.DEFAULT:
            out[world] = {"verdict": row["verdict"], "label": label,
                          "value": wv.get(key), "size": wv.get(prefix + "n"),
                          "looks": wv.get(prefix + "looks")}
            continue
        try:
            v = verdict(row["id"], wv, registry) if wv else NOT_MEASURED
        except KeyError:
            v = NOT_MEASURED
        if v != NOT_MEASURED and (row["verdict"] == STALE
                                  or world in row.get("stale_worlds", ())):
            v = STALE
        out[world] = {"verdict": v, "label": label, "value": wv.get(key),
                      "size": wv.get(prefix + "n"), "looks": wv.get(prefix + "looks")}
    return out


def size_words(cell: dict) -> str:
    """Where a world cell's verdict was reached: "on N questions" (and the
    look, for a run of the sequential rule's looks), or '' where the run glued
    no size."""
    n, looks = cell.get("size"), cell.get("looks")
    if not isinstance(n, int) or isinstance(n, bool):
        return ""
    if isinstance(looks, int) and looks > 1:
        return f"on {n} questions (sequential rule, look {looks})"
    return f"on {n} questions"


def format_value(v) -> str:
    """A glued value as the book shows it: a float by ``stats.with_interval``
    (4 significant digits, "not measured" for NaN, "unbounded" for infinity),
    a very small or large one in scientific notation."""
    from ..measures.stats import with_interval

    if isinstance(v, float):
        if math.isfinite(v) and v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e4):
            return f"{v:.2e}"
        return with_interval(v)
    return str(v)


# a reference a reader cannot follow: "(issue 14, item 4)", "issue 26", "session 21"
_TRACKER_REF = re.compile(r"\s*\((?:issue|session|item) \d+[^()]*\)"
                          r"|,? ?(?:second |fourth )?"
                          r"\(?(?:issue|session) \d+(?:, item \d+)?(?:'s)?\)?")
_DATED = re.compile(r"^(\s*)(?:[\w -]+:.*?)?#\s*(\d{4}-\d{2}-\d{2})\b(.*)$")


def decisions(path: Path = REGISTRY) -> list[dict]:
    """The registry's dated decisions, in file order: each comment that opens
    with a date (``# 2026-12-01: ...``) and the comment lines that continue it,
    as ``{"date", "where", "text"}``: ``where`` the claim or check it sits under
    (or "all claims"), ``text`` the comment joined into one paragraph, without
    the tracker references a reader of the book cannot follow."""
    out, current, where = [], None, "all claims"
    for line in Path(path).read_text().splitlines():
        section = re.match(r"^(?:  )?(C\d+|[a-z_]+):\s*(?:#.*)?$", line)
        if section and section.group(1) not in ("claims", "checks"):
            where = section.group(1)
        dated = _DATED.match(line)
        comment = re.match(r"^\s*#\s?(.*)$", line)
        if dated:
            current = {"date": dated.group(2), "where": where,
                       "text": dated.group(3).lstrip(" ,:")}
            out.append(current)
        elif comment and current is not None and comment.group(1).strip():
            current["text"] += " " + comment.group(1).strip()
        else:
            current = None
    for d in out:
        d["text"] = re.sub(r"\s+", " ", _TRACKER_REF.sub("", d["text"])).strip(" ,:")
    return out


def names(registry: dict) -> dict[str, list[str]]:
    """The name a reader sees for each glued key (its registry label: a claim's
    ``keys`` and a check's ``world_figures``) -> the keys shown under it."""
    out: dict[str, list[str]] = {}
    for claim in registry["claims"].values():
        for key, spec in claim["keys"].items():
            out.setdefault(spec["label"], []).append(key)
    for check in registry.get("checks", {}).values():
        for key, label in (check.get("world_figures") or {}).items():
            out.setdefault(label, []).append(key)
    return out


def two_values(pages: dict[str, dict[str, Any]], registry: dict) -> list[str]:
    """Where one name holds two values: ``pages`` maps a page to its glued values
    (another world's under its suffix, as ``add_world_runs`` reads them). A
    glued key that two pages record, or two keys shown under one registry name,
    must agree in every world (to the 4 significant digits the book shows);
    each disagreement is a line naming the name, the world and the values."""
    problems = []
    for world in WORLD_SUFFIXES:
        seen: dict[str, dict[str, Any]] = {}  # key -> page -> value
        for page, values in pages.items():
            for key, value in world_values(values, world).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    seen.setdefault(key, {})[page] = value
        groups = {f"key {k}": [(p, k) for p in by_page] for k, by_page in seen.items()}
        for label, keys in names(registry).items():
            groups[f"name {label!r}"] = [(p, k) for k in keys for p in seen.get(k, {})]
        for name, held in groups.items():
            shown = {format_value(float(seen[k][p])) for p, k in held}
            if len(shown) > 1:
                where = ", ".join(f"{p}:{k}={format_value(float(seen[k][p]))}"
                                  for p, k in held)
                problems.append(f"{name} holds {len(shown)} values in {world}: {where}")
    return problems
