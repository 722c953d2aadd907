"""The built book as a reader's browser shows it (`make book` first).

Headless Chromium (Debian's ``chromium``) driven by Playwright opens every page
of ``_build/html`` from a local HTTP server and checks the page as rendered:
every equation typeset by MathJax, every image loaded, every internal link and
#fragment resolving, no console error, and no request leaving the machine
(each one is routed; any whose host is not the local server is aborted and
recorded). A full-page screenshot of each page goes to ``_build/screenshots/``
with ``summary.json``. The C3 page's win-condition calculator is checked
against ``ssld``'s formulas on the paper's values, this build's values and
edge cases typed in.
"""

from __future__ import annotations

import functools
import http.server
import json
import math
import os
import re
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest

from dlmspec_min.plumbing import calculator, claims
from dlmspec_min.ssld import win_condition

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = os.environ.get("DLMSPEC_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
INSTALL_HINT = (
    "install the browser with `apt-get install -y chromium` (Debian; as root) "
    "and Playwright with `pip install -e '.[dev]'` (pyproject.toml pins it); never "
    "`playwright install`, which downloads a browser"
)
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
LOCAL_SCHEMES = {"data", "blob", "about"}
NOT_PAGES = {"_static", "_sources", "_images", "_sphinx_design_static"}
NOT_PAGE_NAMES = {"genindex.html", "search.html", "py-modindex.html"}
CALC_PAGE = "notebooks/03_win_condition.html"
REL_TOL = 1e-9
REFRESH = re.compile(r'<meta http-equiv="Refresh" content="0; url=([^"]+)"', re.I)
SETTLE_JS = """async () => {
  for (const img of document.images) img.loading = "eager";
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await Promise.all([...document.images].map(img => img.complete ? null :
    new Promise(done => { img.onload = done; img.onerror = done; })));
}"""
COLLECT_JS = """() => {
  const maths = [...document.querySelectorAll("span.math, div.math")];
  const skip = "pre, code, script, style, textarea, mjx-container";
  const raw = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest(skip) || !el.getClientRects().length) continue;
    for (const d of ["\\\\[", "\\\\]", "$$", "\\\\(", "\\\\begin{"]) {
      if (n.textContent.includes(d)) raw.push(n.textContent.trim().slice(0, 80));
    }
  }
  return {
    maths: maths.length,
    untypeset: maths.filter(m => !m.querySelector("mjx-container svg"))
                    .map(m => m.textContent.trim().slice(0, 80)),
    mathErrors: [...document.querySelectorAll("mjx-merror, [data-mjx-error]")]
                    .map(e => e.getAttribute("data-mjx-error") || e.textContent),
    raw: raw,
    images: [...document.images].map(i => ({src: i.currentSrc || i.src,
                                            ok: i.complete && i.naturalWidth > 0})),
    links: [...document.querySelectorAll("a[href]")].map(a => a.href),
    assets: [...document.querySelectorAll("script[src], link[href]")]
                .map(e => e.src || e.href),
    ids: [...document.querySelectorAll("[id]")].map(e => e.id),
    text: document.body.innerText,
    forestTop: (f => f ? f.getBoundingClientRect().top : null)(
               document.querySelector("figure.forest-plot svg")),
    headings: [...document.querySelectorAll("h1, h2")].map(h => ({
               text: h.textContent.replace(/[#¶]/g, "").trim(),
               top: h.getBoundingClientRect().top})),
  };
}"""
# what a reader must not meet on the claim pages, the dashboard and the landing
# page: a missing or infinite value printed raw, or a tracker reference
RESIDUE = re.compile(r"\b(?:nan|NaN)\b|(?<![\w.])-?inf\b|\b[Ii]ssue \d+|\bsession \d")
READER_PAGES = ("book/intro.html", "book/claims.html", "book/record.html")
DASHBOARD_MAX_CHARS = 30_000


def _pages() -> list[str]:
    return sorted(
        p.relative_to(HTML).as_posix()
        for p in HTML.rglob("*.html")
        if not set(p.relative_to(HTML).parts[:-1]) & NOT_PAGES
        and p.name not in NOT_PAGE_NAMES
    )


def _is_local(url: str) -> bool:
    u = urlparse(url)
    return u.scheme in LOCAL_SCHEMES or u.hostname in LOCAL_HOSTS


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """The book's files; the favicon the browser asks for on its own is empty."""

    def do_GET(self):
        if self.path == "/favicon.ico" and not (HTML / "favicon.ico").exists():
            self.send_response(204)  # not the page's request: no console error
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def server():
    if not (HTML / "index.html").exists():
        pytest.fail(f"{HTML / 'index.html'} is missing: run `make book` first")
    handler = functools.partial(_Quiet, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.fail(f"no Chromium at {CHROMIUM}: {INSTALL_HINT}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(f"Playwright for Python is not installed: {INSTALL_HINT}")
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def context(browser):
    """One browser context; every request is routed, non-local ones aborted."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.outside = []

    def route(r):
        if _is_local(r.request.url):
            r.continue_()
        else:
            ctx.outside.append(r.request.url)
            r.abort()

    ctx.route("**/*", route)
    yield ctx
    ctx.close()


def _open(ctx, url: str):
    """A new page at ``url``, settled, with its console errors and failed loads."""
    page = ctx.new_page()
    page.problems = []
    page.on("console", lambda m: m.type == "error" and page.problems.append(
        f"console: {m.text}"))
    page.on("pageerror", lambda e: page.problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: page.problems.append(
        f"failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: r.status >= 400 and page.problems.append(
        f"HTTP {r.status}: {r.url}"))
    page.goto(url, wait_until="load")
    page.evaluate(SETTLE_JS)
    return page


@pytest.fixture(scope="session")
def rendered(context, server):
    """Every page opened once: what it rendered, logged and asked for."""
    pages = _pages()
    assert len(pages) >= 10, f"only {pages} under {HTML}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    out = {}
    for rel in pages:
        target = _redirect(rel)
        if target is not None:  # the root index.html: a meta refresh, not a page
            out[rel] = {"redirect": True, "links": [server + target], "ids": []}
            continue
        page = _open(context, server + rel)
        info = page.evaluate(COLLECT_JS)
        shot = SHOTS / (rel.removesuffix(".html").replace("/", "__") + ".png")
        page.screenshot(path=str(shot), full_page=True)
        info["problems"] = list(page.problems)
        info["screenshot"] = str(shot.relative_to(ROOT))
        out[rel] = info
        page.close()
    out["__seconds__"] = time.perf_counter() - t0
    return out


def _redirect(rel: str) -> str | None:
    """The target (relative to the build) of a meta-refresh page, else None."""
    m = REFRESH.search((HTML / rel).read_text(errors="replace"))
    if m is None:
        return None
    return (Path(rel).parent / m.group(1)).as_posix().removeprefix("./")


def _page_items(rendered):
    return {k: v for k, v in rendered.items()
            if not k.startswith("__") and not v.get("redirect")}


def _linking_items(rendered):
    return {k: v for k, v in rendered.items() if not k.startswith("__")}


def _target_ids(rendered, rel: str) -> set[str]:
    if rel in rendered:
        return set(rendered[rel]["ids"])
    return set(re.findall(r'\sid="([^"]+)"', (HTML / rel).read_text(errors="replace")))


def _check_links(rendered, server):
    """Internal links: (number checked, broken ones); external ones only counted."""
    checked, broken, external = 0, [], 0
    for rel, info in _linking_items(rendered).items():
        for href in info["links"]:
            if not href.startswith(server):
                external += urlparse(href).scheme in ("http", "https")
                continue
            url, frag = urldefrag(href)
            target = unquote(urlparse(url).path).lstrip("/")
            if target == "" or target.endswith("/"):
                target += "index.html"
            checked += 1
            if not (HTML / target).is_file():
                broken.append(f"{rel}: {href} (no {target})")
            elif frag and target.endswith(".html") and unquote(frag) not in _target_ids(
                rendered, target
            ):
                broken.append(f"{rel}: {href} (no id {frag!r} on {target})")
    return checked, broken, external


def test_every_equation_is_typeset_by_mathjax(rendered):
    pages = _page_items(rendered)
    assert sum(i["maths"] for i in pages.values()) > 0, "no equation found at all"
    bad = {p: i["untypeset"] for p, i in pages.items() if i["untypeset"]}
    assert not bad, f"equations left untypeset: {bad}"
    errors = {p: i["mathErrors"] for p, i in pages.items() if i["mathErrors"]}
    assert not errors, f"MathJax errors: {errors}"
    raw = {p: i["raw"] for p, i in pages.items() if i["raw"]}
    assert not raw, f"raw TeX delimiters visible: {raw}"


def test_every_image_loaded(rendered):
    bad = {p: [i["src"] for i in info["images"] if not i["ok"]]
           for p, info in _page_items(rendered).items()}
    bad = {p: b for p, b in bad.items() if b}
    assert not bad, f"images that did not load: {bad}"


def test_every_internal_link_and_fragment_resolves(rendered, server):
    checked, broken, _ = _check_links(rendered, server)
    assert checked > 0
    assert not broken, "broken internal links:\n" + "\n".join(broken)


def test_no_console_error_and_no_failed_load(rendered):
    bad = {p: i["problems"] for p, i in _page_items(rendered).items() if i["problems"]}
    assert not bad, f"console errors or failed loads: {bad}"


def test_nothing_is_loaded_from_outside_the_build(rendered, context):
    assert context.outside == [], f"requests that left the machine: {context.outside}"
    assets = {p: [a for a in i["assets"] if not _is_local(a)]
              for p, i in _page_items(rendered).items()}
    assets = {p: a for p, a in assets.items() if a}
    assert not assets, f"script/link tags pointing outside the build: {assets}"


def _reader_pages(rendered) -> dict:
    """The landing page, the dashboard and every claim page, as rendered."""
    pages = _page_items(rendered)
    claim_pages = {str(Path(c["notebook"]).with_suffix(".html"))
                   for c in claims.load_registry()["claims"].values()}
    return {p: i for p, i in pages.items() if p in READER_PAGES or p in claim_pages}


def test_a_reader_meets_no_raw_nan_inf_or_tracker_reference(rendered):
    """What a reader sees says "not measured", "open" or "unbounded" in words,
    and no issue or session number (the record page dates each decision)."""
    pages = _reader_pages(rendered)
    assert len(pages) >= 10, sorted(pages)
    found = {p: sorted(set(RESIDUE.findall(i["text"]))) for p, i in pages.items()}
    found = {p: f for p, f in found.items() if f}
    assert not found, f"raw nan/inf or tracker references a reader sees: {found}"


def test_the_landing_page_opens_with_the_findings_and_their_figure(rendered):
    info = _page_items(rendered)["book/intro.html"]
    tops = {h["text"]: h["top"] for h in info["headings"]}
    assert info["forestTop"] is not None, "the landing page shows no forest plot"
    assert tops["What this build found"] < info["forestTop"] < tops["Two worlds"]
    assert tops["What this build found"] < tops["What the paper claims"]


def test_the_dashboard_reads_in_minutes(rendered):
    text = _page_items(rendered)["book/claims.html"]["text"]
    assert len(text) < DASHBOARD_MAX_CHARS, f"the dashboard shows {len(text)} chars"
    assert "claims:" not in text, "the raw registry is shown; link it instead"


def test_the_html_sources_name_no_outside_script_or_stylesheet():
    tag = re.compile(
        r"<(?:script|link)\b[^>]*\b(?:src|href)=[\"']((?:https?:)?//[^\"']*)"
    )
    found = {}
    for path in HTML.rglob("*.html"):
        hits = tag.findall(path.read_text(errors="replace"))
        if hits:
            found[path.relative_to(HTML).as_posix()] = hits
    assert not found, f"outside resources in the HTML: {found}"


# --- the win-condition calculator on the C3 page -------------------------------------


def _expected(v: dict) -> dict:
    """What ssld computes for the form's inputs ``v`` (the page must show the same)."""
    star = win_condition.alpha_star(v["tau_acc"])
    tokens = win_condition.model_a_tokens_per_cost(v["alpha"], v["gamma"], v["c"])
    try:
        sf = win_condition.shortfall(star, v["alpha"], v["alpha_hi"])
        short, bound = sf.value, sf.lower_bound
    except ValueError:  # both 0: the library refuses, the page says unbounded
        short, bound = math.inf, False
    return {
        "a-tokens": tokens,
        "a-beats": tokens > v["tau_acc"],
        "alpha-star": star,
        "a-needed": win_condition.model_a_alpha_needed(v["tau_acc"], v["gamma"],
                                                       v["c"]),
        "b-needed": win_condition.model_b_alpha_needed(v["n_anchors"], v["delta"],
                                                       v["n_draft"], v["c"]),
        "b-slowdown": win_condition.model_b_slowdown(v["n_acc"], v["n_draft"], v["c"]),
        "shortfall": short,
        "shortfall-lower-bound": bound,
    }


def _same(shown, expected) -> bool:
    if isinstance(expected, bool):
        return shown == expected
    if math.isnan(expected):
        return math.isnan(shown)
    if math.isinf(expected):
        return shown == expected
    return math.isclose(shown, expected, rel_tol=REL_TOL, abs_tol=1e-300)


def _read_calculator(page) -> tuple[dict, dict]:
    inputs = {k: float(page.input_value(f"#calc-{k}")) for k in calculator.KEYS}
    shown = {}
    for oid, _ in calculator.OUTPUTS:
        raw = page.get_attribute(f"#calc-{oid}", "data-value")
        shown[oid] = raw == "true" if oid == "a-beats" else float(raw)
    bound = page.get_attribute("#calc-shortfall", "data-lower-bound")
    shown["shortfall-lower-bound"] = bound == "true"
    return inputs, shown


@pytest.fixture(scope="session")
def calc_page(context, server):
    page = _open(context, server + CALC_PAGE)
    page.wait_for_selector(".win-calculator[data-ready=true]", timeout=10_000)
    yield page
    assert page.problems == [], page.problems
    page.close()


CASES = {
    "the paper's values": [("button", "paper")],
    "this build's values": [("button", "build")],
    "alpha = 0 (a lower bound)": [("button", "build"), ("alpha", "0")],
    "alpha = 0 and its upper end 0 (unbounded)": [
        ("button", "build"), ("alpha", "0"), ("alpha_hi", "0")],
    "tau_acc out of Model A's reach": [("button", "build"), ("tau_acc", "1000")],
    "alpha = 1 (Model A's limit)": [("button", "paper"), ("alpha", "1"),
                                    ("gamma", "7"), ("c", "0.25")],
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_calculator_agrees_with_the_library(calc_page, case):
    for what, value in CASES[case]:
        if what == "button":
            calc_page.click(f"button[data-values={value}]")
        else:
            calc_page.fill(f"#calc-{what}", value)
    inputs, shown = _read_calculator(calc_page)
    expected = _expected(inputs)
    wrong = {k: (shown[k], e) for k, e in expected.items() if not _same(shown[k], e)}
    assert not wrong, f"{case}: page vs library {wrong} for inputs {inputs}"
    if case == "alpha = 0 (a lower bound)":
        assert shown["shortfall-lower-bound"] and math.isfinite(shown["shortfall"])
    if case.endswith("(unbounded)"):
        assert "unbounded" in calc_page.inner_text("#calc-shortfall")
    if case == "tau_acc out of Model A's reach":
        assert "unreachable" in calc_page.inner_text("#calc-a-needed")


def test_the_paper_button_fills_the_registry_values(calc_page):
    calc_page.click("button[data-values=paper]")
    inputs, _ = _read_calculator(calc_page)
    paper = calculator.paper_values(claims.load_registry())
    assert inputs["tau_acc"] == paper["tau_acc"] and inputs["alpha"] == paper["alpha"]
    reported = {k: v for k, v in paper.items() if v is not None}
    assert {k: inputs[k] for k in reported} == reported


def test_the_build_button_fills_the_values_the_notebook_measured(calc_page):
    calc_page.click("button[data-values=build]")
    inputs, _ = _read_calculator(calc_page)
    glued = claims.read_glued(claims.executed_path("notebooks/03_win_condition.md"))
    measured = {"tau_acc": "c3_tau_acc", "alpha": "c3_alpha", "alpha_hi": "c3_alpha_hi",
                "gamma": "c3_gamma", "c": "c3_c", "n_anchors": "c3_gamma",
                "delta": "c3_delta", "n_acc": "c3_n_acc"}
    for key, glue_key in measured.items():
        assert math.isclose(inputs[key], glued[glue_key], rel_tol=REL_TOL), key


def test_summary(rendered, server, context, capsys):
    """Counts for the CI log, also in _build/screenshots/summary.json (runs last)."""
    pages = _page_items(rendered)
    checked, broken, external = _check_links(rendered, server)
    summary = {
        "pages": len(pages),  # opened; the root index.html only redirects
        "equations": sum(i["maths"] for i in pages.values()),
        "figures": sum(len(i["images"]) for i in pages.values()),
        "internal_links_checked": checked,
        "internal_links_broken": len(broken),
        "external_links_not_followed": external,
        "requests_blocked": len(context.outside),
        "seconds_rendering": round(rendered["__seconds__"], 1),
        "screenshots": sorted(i["screenshot"] for i in pages.values()),
    }
    (SHOTS / "summary.json").write_text(json.dumps(summary, indent=2))
    with capsys.disabled():
        print(
            f"\nbrowser check: {summary['pages']} pages, {summary['equations']} "
            f"equations, {summary['figures']} figures, {checked} internal links "
            f"({len(broken)} broken), {external} external links not followed, "
            f"{len(context.outside)} requests blocked, "
            f"{summary['seconds_rendering']} s; screenshots in "
            f"{SHOTS.relative_to(ROOT)}/"
        )
    redirects = len(_linking_items(rendered)) - len(pages)
    assert summary["pages"] + redirects == len(_pages()) and redirects <= 1


def test_playwright_is_pinned_exactly():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    pins = [d for d in extras["dev"] if d.startswith("playwright")]
    assert len(pins) == 1 and "==" in pins[0], pins
