"""What a notebook page shows and records, and what a verdict rule reads: the names
the tests of ``dlmspec_min.experiments`` compare with a measurement's values.

Plain functions, imported by the test files as ``from pages import ...`` (pytest puts
``tests/`` on ``sys.path``, as for ``standins``).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable
from pathlib import Path

# a glue name: letters (C2 has c2_K...), digits and underscores; it ends at the
# closing backtick or at the ``:`` of a format (``{glue:text}`name:.2f```)
_SHOWN_TEXT = re.compile(r"\{glue:text\}`(\w+)")
_SHOWN_FIGURE = (re.compile(r"\{glue:figure\}`(\w+)"),  # the inline role
                 re.compile(r"```\{glue:figure\} (\w+)"))  # the directive
_RECORDED = re.compile(r"""(?:record|glue)\(\s*["'](\w+)["']""")


def _names(pattern: re.Pattern, text: str, prefix: str) -> set[str]:
    return {n for n in pattern.findall(text) if n.startswith(prefix)}


def shown_glue_names(path: Path, prefix: str = "", figures: bool = False) -> set[str]:
    """The glue names the page's prose shows with ``{glue:text}`` (with
    ``figures=True`` also those shown as ``{glue:figure}``), only those starting
    with ``prefix``."""
    text = Path(path).read_text()
    names = _names(_SHOWN_TEXT, text, prefix)
    if figures:
        for pattern in _SHOWN_FIGURE:
            names |= _names(pattern, text, prefix)
    return names


_LOOKS = re.compile(r'sequential\.run\(\s*(?:#[^\n]*\n\s*)?"(C\d)"')


def names_recorded_on_page(path: Path, prefix: str = "") -> set[str]:
    """The names the page's own code records, ``record("name", ...)`` or
    ``glue("name", ...)``, and, where it records ``looks.values()``, the names of
    the sequential run's ``Looks`` (``<c>_seq_*``); only those starting with
    ``prefix``."""
    text = Path(path).read_text()
    names = _names(_RECORDED, text, prefix)
    if "record_all(looks.values())" in text:
        from dlmspec_min.plumbing.sequential import Looks

        for cid in _LOOKS.findall(text):
            names |= {k for k in Looks(cid, 1, 0.95, "", 1, None).values()
                      if k.startswith(prefix)}
    return names


def expression_names(expressions: Iterable[str]) -> set[str]:
    """Every variable name the Python expressions read (through ``ast``, so a name
    inside a string or an attribute is not one)."""
    return {node.id for expr in expressions
            for node in ast.walk(ast.parse(expr, mode="eval"))
            if isinstance(node, ast.Name)}


def rule_names(claim: dict, prefix: str = "") -> set[str]:
    """The names a claim's verdict rules read (its secondary verdict's too, where it
    has one), only those starting with ``prefix``."""
    secondary = claim.get("secondary", {}).get("rule", {})
    rules = [*claim["rule"].values(), *secondary.values()]
    return {n for n in expression_names(rules) if n.startswith(prefix)}


def same_value(a, b) -> bool:
    """Equal, or both float NaN (NaN is not equal to itself): two runs of the same
    measurement agree on this value."""
    return (a == b) or (isinstance(a, float) and isinstance(b, float)
                        and math.isnan(a) and math.isnan(b))
