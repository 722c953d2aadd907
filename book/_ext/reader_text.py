"""Sphinx extension: a glued value that is missing or infinite reads in words.

myst-nb pastes a glued value into the prose as text (``{glue:text}`key:.3f```),
so a value the build could not measure (NaN) would read "nan" and an infinite
one "inf". After each page is resolved, every pasted text's whole-word "nan"
becomes "not measured" and "inf" "unbounded" (the words of
``dlmspec_min.measures.stats``, the book's one number formatter). And an
estimate pasted with its interval, ``A (B–C)`` (three pasted values), is
written as ``stats.with_interval`` writes it, ``A [B, C]`` to the digits the
interval supports, whatever format each of the three was pasted with. Only
pasted values change, never the page's own words or code.
"""

from __future__ import annotations

import re

from docutils import nodes

from dlmspec_min.measures.stats import NOT_MEASURED, UNBOUNDED, with_interval

RAW = re.compile(r"(?<![\w.])(-?)(nan|inf)\b", re.IGNORECASE)


def in_words(text: str) -> str:
    """``text`` with each whole-word nan or inf said in words."""
    def word(m):
        if m.group(2).lower() == "nan":
            return NOT_MEASURED
        return f"minus {UNBOUNDED}" if m.group(1) else UNBOUNDED

    return RAW.sub(word, text)


def _pasted(node) -> bool:
    return isinstance(node, nodes.inline) and "pasted-text" in node.get("classes", [])


def _number(node) -> float | None:
    try:
        return float(node.astext())
    except ValueError:
        return None


def intervals(doctree) -> int:
    """Rewrite each pasted ``A (B–C)`` with B <= A <= C as ``A [B, C]`` to the
    digits its interval supports; returns how many were rewritten."""
    done, removed = 0, set()
    for a in list(doctree.findall(_pasted)):
        parent = a.parent
        if parent is None or id(a) in removed:
            continue
        i = parent.index(a)
        run = parent.children[i + 1:i + 5]
        if len(run) < 4 or not (isinstance(run[0], nodes.Text) and str(run[0]) == " ("
                                and _pasted(run[1]) and isinstance(run[2], nodes.Text)
                                and str(run[2]) == "–" and _pasted(run[3])):
            continue
        close = parent.children[i + 5] if len(parent.children) > i + 5 else None
        if not (isinstance(close, nodes.Text) and str(close).startswith(")")):
            continue
        value, low, high = _number(a), _number(run[1]), _number(run[3])
        if None in (value, low, high) or not low <= value <= high:
            continue
        a.children = [nodes.Text(with_interval(value, low, high))]
        a.children[0].parent = a
        rest = nodes.Text(str(close)[1:])
        rest.parent = parent
        removed.update(id(node) for node in run)
        # by position: a Text equals any other Text of the same words
        parent.children[i + 1:i + 6] = [rest]
        done += 1
    return done


def resolve(app, doctree, docname):
    intervals(doctree)
    for node in doctree.findall(nodes.inline):
        if "pasted-text" not in node.get("classes", []):
            continue
        for text in list(node.findall(nodes.Text)):
            said = in_words(str(text))
            if said != str(text):
                text.parent.replace(text, nodes.Text(said))


def setup(app):
    app.connect("doctree-resolved", resolve)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
