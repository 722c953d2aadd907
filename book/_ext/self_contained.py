"""Sphinx extension: the HTML pages load nothing from outside the build.

MathJax is served from ``_static`` (``dlmspec_min.plumbing.mathjax``, ``_config.yml``).
What remains is sphinx-thebe, which Jupyter Book always enables: it puts its
configuration script (``const THEBE_JS_URL = "https://unpkg.com/..."``) on every
page twice, so each page threw "Identifier 'THEBE_JS_URL' has already been
declared", and it would load thebe from a CDN. The book has no live-code
button, so this drops thebe's scripts from every page. Any other script or
stylesheet that still points outside the build is reported as a warning, which
fails the build (``-W``).
"""

from __future__ import annotations

from sphinx.util import logging

logger = logging.getLogger(__name__)
THEBE_SCRIPT = "sphinx-thebe.js"
THEBE_MARK = "THEBE_JS_URL"


def _outside(name) -> bool:
    name = str(name or "")
    return "://" in name or name.startswith("//")


def _is_thebe(js) -> bool:
    name = str(getattr(js, "filename", "") or "")
    body = getattr(js, "attributes", {}).get("body", "")
    return name.endswith(THEBE_SCRIPT) or THEBE_MARK in body


def keep_inside(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if scripts is not None:
        context["script_files"] = [js for js in scripts if not _is_thebe(js)]
        for js in context["script_files"]:
            if _outside(getattr(js, "filename", None)):
                logger.warning(f"{pagename}: script {js.filename} is outside the "
                               "build; serve it from _static (see _config.yml)")
    for css in context.get("css_files") or []:
        if _outside(getattr(css, "filename", None)):
            logger.warning(f"{pagename}: stylesheet {css.filename} is outside the "
                           "build; serve it from _static (see _config.yml)")


def setup(app):
    # after sphinx.ext.mathjax (500) and sphinx-thebe have added theirs
    app.connect("html-page-context", keep_inside, priority=900)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
