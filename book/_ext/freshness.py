"""Sphinx extension: a notebook that ran under another fingerprint runs again.

jupyter-cache keys a notebook on its code cells alone, and Sphinx re-reads a
page only when its source changed. Both would serve numbers that the current
library, weights, data or packages no longer give. Before Sphinx reads any
page, this extension computes the build's fingerprint
(``dlmspec_min.provenance``), drops every cache record glued with another one
(or with none), and marks those notebooks outdated, so myst-nb executes them
afresh. A page that runs other notebooks (``provenance.record_sources``) is
executed again when one of them changed. A build of unchanged sources
re-executes nothing.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.util import logging

from dlmspec_min import claims, provenance

logger = logging.getLogger(__name__)


def cache_path(app) -> Path:
    """Where myst-nb keeps its execution cache (its own default when unset)."""
    configured = app.config.nb_execution_cache_path
    if configured:
        return Path(configured)
    return Path(app.outdir).parent / ".jupyter_cache"


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
    return sorted(docs)


def setup(app):
    app.connect("env-get-outdated", stale_docs)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
