"""Sphinx extension: each notebook page offers its executed notebook for download.

The theme's download menu offers the MyST source only. The executed notebook
(outputs, glue data and all) is what a reader reruns or inspects, so every page
that myst-nb executed gets a link to ``_executed/<page>.ipynb``, and the build
copies those files from ``jupyter_execute`` into the HTML output at the end,
each with its ``.glue.json`` (the recorded values, which myst-nb keeps out of
the notebook's outputs), and each world run of the page (``NN.math.ipynb``, the
same notebook executed in the math world) beside it.

myst-nb's cache mode writes ``jupyter_execute/<page>.ipynb`` as it read the
source, before the cached outputs are merged in (myst-nb 1.x renders the merged
copy but saves the other), so each notebook is merged with its jupyter-cache
record on the way out; a notebook that matches no record and has no outputs is
a build warning, never a silent empty download.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
from docutils import nodes
from sphinx.util import logging

from dlmspec_min.plumbing import claims

FOLDER = "_executed"
LOGGER = logging.getLogger(__name__)


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


def _has_outputs(nb) -> bool:
    return any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


def with_outputs(path: Path, cache) -> nbformat.NotebookNode | None:
    """The notebook at ``path`` with its outputs: as written when it has any, else
    merged with its record in ``cache`` (a jupyter-cache); None where neither."""
    nb = nbformat.read(path, as_version=4)
    if _has_outputs(nb) or cache is None:
        return nb if _has_outputs(nb) else None
    try:
        _, merged = cache.merge_match_into_notebook(nb)
    except KeyError:  # no cached execution of this source
        return None
    return merged if _has_outputs(merged) else None


def copy_notebooks(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from freshness import cache_path  # book/_ext, beside this file
    from jupyter_cache import get_cache

    source = _executed(app)
    cache_dir = cache_path(app)
    cache = get_cache(str(cache_dir)) if cache_dir.exists() else None
    for nb in sorted(source.rglob("*.ipynb")):
        target = Path(app.outdir) / FOLDER / nb.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        executed = with_outputs(nb, cache)
        if executed is None:
            LOGGER.warning(f"{nb.relative_to(source)}: no outputs and no cached "
                           "execution; its download holds the source only")
            shutil.copyfile(nb, target)
        else:
            nbformat.write(executed, target)
    for glue in source.rglob("*.glue.json"):
        target = Path(app.outdir) / FOLDER / glue.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(glue, target)


def setup(app):
    app.connect("doctree-resolved", add_link)
    app.connect("build-finished", copy_notebooks)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
