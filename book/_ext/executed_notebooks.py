"""Sphinx extension: each notebook page offers its executed notebook for download.

The theme's download menu offers the MyST source only. The executed notebook
(outputs, glue data and all) is what a reader reruns or inspects, so every page
that myst-nb executed gets a link to ``_executed/<page>.ipynb``, and the build
copies those files from ``jupyter_execute`` into the HTML output at the end,
each with its ``.glue.json`` (the recorded values, which myst-nb keeps out of
the notebook's outputs).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from docutils import nodes

FOLDER = "_executed"


def _executed(app) -> Path:
    return Path(app.outdir).parent / "jupyter_execute"


def add_link(app, doctree, docname):
    if not (_executed(app) / f"{docname}.ipynb").exists():
        return
    up = "../" * docname.count("/")
    href = f"{up}{FOLDER}/{docname}.ipynb"
    rerun = (", or rerun it with other parameters: <code>python -m "
             f"dlmspec_min.plumbing.run {docname}.md --help</code>"
             if docname.startswith("notebooks/") else "")
    html = (f'<p class="executed-notebook"><a href="{href}" download>Download '
            f"this page as an executed notebook (.ipynb)</a>{rerun}.</p>")
    doctree.append(nodes.raw("", html, format="html"))


def copy_notebooks(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    source = _executed(app)
    for nb in [*source.rglob("*.ipynb"), *source.rglob("*.glue.json")]:
        target = Path(app.outdir) / FOLDER / nb.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(nb, target)


def setup(app):
    app.connect("doctree-resolved", add_link)
    app.connect("build-finished", copy_notebooks)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
