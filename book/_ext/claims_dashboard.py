"""Sphinx extension: the ``{claims-dashboard}`` directive.

The directive leaves a placeholder; after every document has been read (and
so every notebook executed), ``doctree-resolved`` replaces it with a table
computed from book/claims.yml and the glue data the build just wrote. The page
holding it is re-written on every build so it never shows stale values.
"""

from __future__ import annotations

import html
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from dlmspec_min import claims

CSS = {
    "replicated": "#1a7f37",
    "direction only": "#9a6700",
    claims.INCONCLUSIVE: "#8250df",
    "not replicated": "#cf222e",
    claims.NOT_REBUILT: "#6e7781",
}


class dashboard_placeholder(nodes.General, nodes.Element):
    pass


class ClaimsDashboard(SphinxDirective):
    def run(self):
        self.env.note_dependency(str(claims.REGISTRY))
        self.env.metadata[self.env.docname]["claims_dashboard"] = True
        return [dashboard_placeholder()]


def _table(rows, docname: str) -> str:
    up = "../" * docname.count("/")
    out = [
        '<table class="table claims-dashboard">',
        "<thead><tr><th>claim</th><th>statement</th><th>paper</th>"
        "<th>this build</th><th>verdict</th></tr></thead><tbody>",
    ]
    for r in rows:
        link = up + str(Path(r["notebook"]).with_suffix(".html"))
        if r["measured"]:
            measured = "<br>".join(
                f"{html.escape(r['labels'][k])}: <b>{claims.format_value(v)}</b>"
                for k, v in r["measured"].items()
            )
            cid = f'<a href="{link}">{r["id"]}</a>'
        else:
            measured, cid = "&mdash;", r["id"]
        color = CSS.get(r["verdict"], "#000")
        out.append(
            f"<tr><td>{cid}</td><td>{html.escape(r['statement'])}</td>"
            f"<td>{html.escape(str(r['paper']))}</td><td>{measured}</td>"
            f'<td class="verdict" data-claim="{r["id"]}" '
            f'style="color:{color};font-weight:bold">'
            f"{r['verdict']}</td></tr>"
        )
    out.append("</tbody></table>")
    return "\n".join(out)


def resolve(app, doctree, docname):
    placeholders = list(doctree.findall(dashboard_placeholder))
    if not placeholders:
        return
    executed = Path(app.outdir).parent / "jupyter_execute"
    rows = claims.dashboard_rows(executed)
    for node in placeholders:
        node.replace_self(nodes.raw("", _table(rows, docname), format="html"))


def always_outdated(app, env, added, changed, removed):
    return [d for d, meta in env.metadata.items() if meta.get("claims_dashboard")]


def setup(app):
    app.add_node(dashboard_placeholder)
    app.add_directive("claims-dashboard", ClaimsDashboard)
    app.connect("doctree-resolved", resolve)
    app.connect("env-get-outdated", always_outdated)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
