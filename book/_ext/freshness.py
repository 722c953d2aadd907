"""Sphinx extension: a notebook that ran under another fingerprint runs again.

jupyter-cache keys a notebook on its code cells alone, and Sphinx re-reads a
page only when its source changed. Both would serve numbers that the current
library, weights, data or packages no longer give. Before Sphinx reads any
page, this extension computes the build's fingerprint
(``dlmspec_min.plumbing.provenance``), drops every cache record glued with another one
(or with none), and marks those notebooks outdated, so myst-nb executes them
afresh. A page that runs other notebooks (``provenance.record_sources``) is
executed again when one of them changed. A build of unchanged sources
re-executes nothing.

Then every notebook that Sphinx is about to read and that has no cache record
is executed, one CPU thread each and several at a time
(``dlmspec_min.plumbing.bookexec``; the option ``dlmspec_execution_jobs``, 0 for
one per core), so that reading only renders. With them run the pages' world
runs (``dlmspec_min.plumbing.worldruns``: each claim notebook again in every other
world it has a profile for), written beside the pages' executed notebooks; a
page whose world run executed is read again, so that its table of worlds shows
the new values. A world run that fails is a warning (the book builds with -W).
"""

from __future__ import annotations

from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

from dlmspec_min.plumbing import bookexec, claims, provenance, worldruns

logger = logging.getLogger(__name__)


def cache_path(app) -> Path:
    """Where myst-nb keeps its execution cache (its own default when unset)."""
    configured = app.config.nb_execution_cache_path
    if configured:
        return Path(configured)
    return Path(app.outdir).parent / ".jupyter_cache"


def _previous_seconds(app) -> dict[str, float]:
    from jupyter_cache import get_cache

    path = cache_path(app)
    return bookexec.previous_seconds(get_cache(str(path))) if path.exists() else {}


def _is_stale(executed: Path, docname: str, current: str) -> bool:
    """The page's last run glued another fingerprint, or sources that changed."""
    glue = executed / f"{docname}.glue.json"
    if not glue.exists():
        return False
    glued = claims.read_glued(glue)
    return (glued.get(provenance.FINGERPRINT_KEY) != current
            or not provenance.sources_current(glued))


def stale_docs(app, env, added, changed, removed):
    current = provenance.fingerprint()
    previous = _previous_seconds(app)  # before stale records go
    dropped = provenance.invalidate_stale(cache_path(app), current)
    docs = {doc for doc in map(env.path2doc, dropped) if doc}
    executed = Path(app.outdir).parent / "jupyter_execute"
    for doc in env.found_docs:
        if _is_stale(executed, doc, current):
            docs.add(doc)
    if docs:
        logger.info(f"[freshness] {len(docs)} notebook(s) ran under another "
                    f"fingerprint than this build's ({current}) or ran notebooks "
                    f"that changed since; executing them "
                    f"again: {', '.join(sorted(docs))}")
    docs |= execute_ahead(app, env, {*added, *changed, *docs}, previous)
    return sorted(docs)


def _notebooks(env, docs) -> dict:
    """Source path -> notebook as myst-nb reads it, for the notebook pages among
    ``docs``."""
    from myst_nb.core.read import create_nb_reader

    notebooks = {}
    for doc in sorted(docs):
        path = Path(env.doc2path(doc))
        if not path.is_file():
            continue
        text = path.read_text("utf8")
        reader = create_nb_reader(str(path), env.myst_config, env.mystnb_config, text)
        if reader is None:  # a plain Markdown page
            continue
        notebooks[str(path)] = reader.read(text)
    return notebooks


def execute_ahead(app, env, to_read, previous: dict[str, float]) -> set[str]:
    """Execute the notebooks among ``to_read`` and every page's world runs that
    lack a cache record, several at a time, into the cache myst-nb reads
    (``dlmspec_min.plumbing.bookexec``); write the world runs beside the pages'
    executed notebooks. Returns the pages whose world runs executed."""
    if env.mystnb_config.execution_mode != "cache":
        return set()
    pages = _notebooks(env, env.found_docs)
    notebooks = {p: nb for p, nb in pages.items() if env.path2doc(p) in to_read}
    try:
        runs = worldruns.world_runs(pages)
    except ValueError as e:  # a profile the page's parameters refuse
        raise ExtensionError(f"[worlds] {e}") from None
    notebooks.update({r.key: r.notebook for r in runs if r.notebook is not None})
    outcomes = []
    if notebooks:
        try:
            jobs = bookexec.jobs_from(app.config.dlmspec_execution_jobs,
                                      len(notebooks))
        except ValueError as e:
            raise ExtensionError(str(e)) from None
        outcomes = bookexec.execute_missing(
            cache_path(app), notebooks, jobs, env.mystnb_config.execution_timeout,
            previous, log=logger.info)
    for o in outcomes:
        if o.error is None:
            continue
        if worldruns.SEPARATOR in o.path:  # myst-nb never reads a world run
            logger.warning(f"[worlds] {o.path} failed: "
                           f"{bookexec.last_line(o.error)}\n{o.error[-2000:]}")
        else:
            logger.warning(f"[execute] {o.path} failed ahead of reading; myst-nb "
                           f"executes it again and reports the error:\n"
                           f"{o.error[-2000:]}")
    executed = Path(app.outdir).parent / "jupyter_execute"
    worldruns.write_executed(
        cache_path(app), runs,
        lambda p: executed / f"{env.path2doc(p)}.ipynb", log=logger.info)
    ran = {o.path for o in outcomes if o.error is None}
    return {env.path2doc(r.path) for r in runs if r.key in ran}


def setup(app):
    app.add_config_value("dlmspec_execution_jobs", 0, "env")  # 0: one per core
    app.connect("env-get-outdated", stale_docs)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
