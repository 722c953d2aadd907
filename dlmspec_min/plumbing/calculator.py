"""The win-condition calculator on the C3 page: its HTML, for a notebook output.

``calculator_html`` returns a form (the inputs of SPEC.md section 3.1's win
condition), an output table and two buttons that fill the form with this
build's measured values or the paper's. Both value sets travel as JSON in data
attributes; the arithmetic runs in the reader's browser in
``book/_static/win_calculator.js``, which mirrors ``ssld``'s ``alpha_star``,
``model_a_*``, ``model_b_*`` and ``shortfall`` (the browser test checks that
they agree). Labels avoid TeX delimiters: the page's MathJax would typeset them.
"""

from __future__ import annotations

import html
import json
import math

# (key, label, help); the order is the form's
INPUTS = (
    ("tau_acc", "τ_acc", "tokens per NFE of the strongest accelerator (>= 1)"),
    ("alpha", "α", "probability that a drafted anchor ID is accepted"),
    ("alpha_hi", "α high", "upper end of α's 95 % interval (used when α = 0)"),
    ("gamma", "γ", "anchors verified per target pass (Model A)"),
    ("c", "c", "draft cost in target forwards"),
    ("n_anchors", "|A|", "anchors per sequence (Model B)"),
    ("delta", "δ", "infill forwards saved per accepted anchor (Model B)"),
    ("n_draft", "n_draft", "draft forwards per sequence (Model B)"),
    ("n_acc", "N_acc", "the accelerator's NFE per sequence (Model B)"),
)
KEYS = tuple(k for k, _, _ in INPUTS)

# (output id, what it shows)
OUTPUTS = (
    ("a-tokens", "Model A: tokens per unit of target cost"),
    ("a-beats", "Model A beats τ_acc at this α"),
    ("alpha-star", "α* = 1 − 1/τ_acc (γ → ∞, c → 0)"),
    ("a-needed", "α Model A needs at this γ and c"),
    ("b-needed", "α Model B needs, (1 + n_draft c)/(|A| δ)"),
    ("b-slowdown", "Model B at α = 0: 1 + (1 + n_draft c)/N_acc times slower"),
    ("shortfall", "shortfall α*/α"),
)
SCRIPT_SRC = "../_static/win_calculator.js"  # from a page in notebooks/
CSS_CLASS = "win-calculator"


def _checked(values: dict, name: str, allow_none: bool) -> dict:
    if not isinstance(values, dict):
        raise ValueError(f"{name} values must be a dict of {list(KEYS)}")
    missing = [k for k in KEYS if k not in values]
    if missing:
        raise ValueError(
            f"{name} values lack {missing}; give every one of {list(KEYS)}"
            + (" (None where the source reports none)" if allow_none else "")
        )
    extra = sorted(set(values) - set(KEYS))
    if extra:
        raise ValueError(f"{name} values have unknown keys {extra}; use {list(KEYS)}")
    out = {}
    for k in KEYS:
        v = values[k]
        if v is None and allow_none:
            out[k] = None
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{name} value {k} = {v!r} is not a number") from None
        if not math.isfinite(f):
            raise ValueError(f"{name} value {k} = {v!r} must be finite")
        out[k] = f
    return out


def calculator_html(build: dict, paper: dict, script_src: str = SCRIPT_SRC) -> str:
    """The calculator's HTML: inputs, outputs, two buttons and a ``<script src>``.

    ``build`` maps every key of ``KEYS`` to a measured number; ``paper`` does
    too, with None for what the paper does not report (the button then keeps
    the form's current value there). ``script_src`` is the JS file's URL
    relative to the page (the default suits a page in ``notebooks/``).
    """
    build = _checked(build, "build", allow_none=False)
    paper = _checked(paper, "paper", allow_none=True)

    def attr(obj) -> str:
        return html.escape(json.dumps(obj), quote=True)

    def text(s: str) -> str:  # ASCII-only HTML: Greek letters as character references
        return html.escape(s).encode("ascii", "xmlcharrefreplace").decode()

    rows = []
    for key, label, hint in INPUTS:
        rows.append(
            f'<label class="calc-input"><span title="{text(hint)}">'
            f"{text(label)}</span> "
            f'<input type="number" step="any" id="calc-{key}" name="{key}" '
            'style="width:8em" '
            f'value="{build[key]!r}"></label>'
        )
    outs = [
        f'<tr><th scope="row">{text(label)}</th>'
        f'<td id="calc-{oid}" data-value="">&mdash;</td></tr>'
        for oid, label in OUTPUTS
    ]
    labels = {k: label for k, label, _ in INPUTS}
    unreported = [labels[k] for k in KEYS if paper[k] is None]
    note = (
        f"The paper reports no {', '.join(unreported)}: its button keeps the "
        "form's values there."
        if unreported
        else ""
    )
    return "\n".join(
        [
            f'<div class="{CSS_CLASS}" data-build="{attr(build)}" '
            f'data-paper="{attr(paper)}">',
            '<p class="calc-buttons">'
            '<button type="button" data-values="build">this build\'s values</button> '
            '<button type="button" data-values="paper">the paper\'s values</button>'
            ' <span class="calc-source" id="calc-source">this build\'s values</span>'
            "</p>",
            '<form class="calc-form" onsubmit="return false" style="display:grid;'
            'grid-template-columns:repeat(auto-fill,minmax(13em,1fr));gap:.4em 1em">',
            *rows,
            "</form>",
            '<table class="table calc-outputs"><tbody>',
            *outs,
            "</tbody></table>",
            f'<p class="calc-note" id="calc-note">{text(note)}</p>',
            f'<script src="{html.escape(script_src, quote=True)}"></script>',
            "</div>",
        ]
    )


def paper_values(registry: dict) -> dict:
    """The paper's calculator inputs, all read from the claims registry.

    ``tau_acc`` is Fast-dLLM's tokens per step
    (``checks.trajectory.paper.fast_dllm_tokens_per_step``), ``alpha`` C2's
    ``paper_value``; the rest is C3's ``calculator_paper`` (None: not reported).
    """
    try:
        values = dict(registry["claims"]["C3"]["calculator_paper"])
        values["tau_acc"] = registry["checks"]["trajectory"]["paper"][
            "fast_dllm_tokens_per_step"
        ]
        values["alpha"] = registry["claims"]["C2"]["paper_value"]
    except KeyError as e:
        raise ValueError(
            f"the claims registry lacks {e} for the calculator's paper values; "
            "see C3's calculator_paper in book/claims.yml"
        ) from None
    return _checked(values, "paper", allow_none=True)
