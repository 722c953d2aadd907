"""Sphinx extension: each notebook page offers its executed notebook for download.

The theme's download menu offers the MyST source only. The executed notebook
(outputs, glue data and all) is what a reader reruns or inspects, so every page
that myst-nb executed gets a link to ``_executed/<page>.ipynb``, and the build
copies those files from ``jupyter_execute`` into the HTML output at the end,
each with its ``.glue.json`` (the recorded values, which myst-nb keeps out of
the notebook's outputs), and each world run of the page (``NN.math.ipynb``, the
same notebook executed in the math world) beside it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from docutils import nodes

from dlmspec_min.plumbing import claims

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
    worlds = "".join(  # the page's world runs (dlmspec_min.plumbing.worldruns)
        f' (and <a class="world-run" data-world="{w}" href="{up}{FOLDER}/{docname}.'
        f'{w}.ipynb" download>as run in the {w} world</a>)'
        for w in claims.WORLD_SUFFIXES
        if (_executed(app) / f"{docname}.{w}.ipynb").exists())
    html = (f'<p class="executed-notebook"><a href="{href}" download>Download '
            f"this page as an executed notebook (.ipynb)</a>{worlds}{rerun}.</p>")
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
