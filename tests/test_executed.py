"""Claim checks on the notebooks the book build executed (`make book` first).

The values tested are the values published: they are read back from the glue
data that the build wrote next to each executed notebook.
"""

import json
import re
from pathlib import Path

import pytest

from dlmspec_min.plumbing import claims, provenance

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = claims.load_registry()
BUILT = {
    cid: c for cid, c in REGISTRY["claims"].items() if (ROOT / c["notebook"]).exists()
}
HTML = ROOT / "_build" / "html"


def _values(notebook: str) -> dict:
    path = claims.executed_path(notebook)
    glue = path.with_suffix(".glue.json")
    if not glue.exists():
        pytest.fail(
            f"{notebook} has not been executed by the book build ({glue} missing); "
            "run `make book` first"
        )
    return claims.read_glued(path)


@pytest.mark.parametrize("cid", sorted(BUILT))
def test_claim_values_recorded_and_in_range(cid):
    claim = BUILT[cid]
    problems = claims.check_values(claim["keys"], _values(claim["notebook"]))
    assert not problems, problems


@pytest.mark.parametrize("cid", sorted(BUILT))
def test_glued_verdict_matches_the_rule(cid):
    values = _values(BUILT[cid]["notebook"])
    key = f"{cid.lower()}_verdict"
    assert key in values, f"{cid}'s notebook does not record {key}"
    assert values[key] == claims.verdict(cid, values, REGISTRY)


@pytest.mark.parametrize("cid", sorted(c for c in BUILT if "secondary" in BUILT[c]))
def test_glued_secondary_verdict_matches_its_rule(cid):
    """2026-12-01: the piece-level verdict beside the word-level headline."""
    values = _values(BUILT[cid]["notebook"])
    key = BUILT[cid]["secondary"]["glued"]
    assert key in values, f"{cid}'s notebook does not record {key}"
    assert values[key] == claims.secondary_verdict(cid, values, REGISTRY)


@pytest.mark.parametrize("group", sorted(REGISTRY["checks"]))
def test_quality_gates(group):
    check = REGISTRY["checks"][group]
    values = _values(check["notebook"])
    failed = [
        f"{name}: {rule}"
        for name, rule in check["rules"].items()
        if not claims.evaluate(rule, values)
    ]
    assert not failed, f"quality gates failed: {failed}"


def test_the_models_page_reports_its_targets_as_the_rules_say():
    """The ladder's targets are reported, not required: what the page glues must
    be what their rules give on its values, met or not."""
    targets = REGISTRY["checks"]["models"]["targets"]
    values = _values(REGISTRY["checks"]["models"]["notebook"])
    met = sum(bool(claims.evaluate(rule, values)) for rule in targets.values())
    assert (values["m_targets_met"], values["m_targets_total"]) == (met, len(targets))


def test_dashboard_shows_every_claim_with_its_computed_verdict():
    page = HTML / "book" / "claims.html"
    assert page.exists(), "run `make book` first"
    shown = dict(re.findall(r'data-claim="(C\d)"[^>]*>([^<]+)</td>', page.read_text()))
    assert sorted(shown) == sorted(REGISTRY["claims"])
    for cid, claim in REGISTRY["claims"].items():
        expected = (
            claims.verdict(cid, _values(claim["notebook"]), REGISTRY)
            if cid in BUILT
            else claims.NOT_REBUILT
        )
        assert shown[cid] == expected
    secondary = dict(re.findall(
        r'data-secondary-claim="(C\d)">[^<]*<span[^>]*>([^<]+)</span>',
        page.read_text()))
    assert sorted(secondary) == sorted(c for c in REGISTRY["claims"]
                                       if "secondary" in REGISTRY["claims"][c])
    for cid in secondary:
        expected = (claims.secondary_verdict(cid, _values(BUILT[cid]["notebook"]),
                                             REGISTRY) if cid in BUILT
                    else claims.NOT_REBUILT)
        assert secondary[cid] == expected


def test_every_notebook_page_was_built():
    for nb in (ROOT / "notebooks").glob("[0-9][0-9]_*.md"):
        assert (HTML / "notebooks" / f"{nb.stem}.html").exists(), (
            f"{nb.name} has no page"
        )


def test_no_executed_page_is_stale():
    """Every page's numbers ran under this checkout's fingerprint (`make book`)."""
    current = provenance.fingerprint()
    executed = ROOT / "_build" / "jupyter_execute"
    pages = [ROOT / c["notebook"] for c in REGISTRY["claims"].values()]
    pages += sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
    pages.append(ROOT / "book" / "status.md")
    for page in sorted(set(pages)):
        glue = executed / page.relative_to(ROOT).with_suffix(".glue.json")
        assert glue.exists(), f"{page.name} was not executed by the build"
        ran = claims.read_glued(glue).get(provenance.FINGERPRINT_KEY)
        assert ran == current, (
            f"{page.name} ran under fingerprint {ran}, this checkout is {current}: "
            "its numbers may be stale; run `make book`"
        )


def test_status_page_lists_each_page_fingerprint_and_commit():
    page = (HTML / "book" / "status.html").read_text()
    current = provenance.fingerprint()
    assert f"fingerprint <code>{current}</code>" in page
    states = dict(re.findall(r'class="state" data-doc="([^"]+)">([^<]+)<', page))
    for nb in (ROOT / "notebooks").glob("[0-9][0-9]_*.md"):
        assert states.get(f"notebooks/{nb.stem}") == "current", nb.name
    commits = re.findall(r"<td><code>([0-9a-f]{12}(?:\+dirty)?)</code></td>", page)
    assert len(commits) >= len(states)


def test_landing_page_states_what_this_build_found():
    page = (HTML / "book" / "intro.html").read_text()
    lines = dict(re.findall(r'class="claim-line" data-claim="(C\d)">(.*?)</li>', page))
    assert sorted(lines) == sorted(REGISTRY["claims"])
    rows = {r["id"]: r for r in claims.dashboard_rows(
        ROOT / "_build" / "jupyter_execute", REGISTRY, provenance.fingerprint())}
    for cid, line in lines.items():
        assert rows[cid]["verdict"] in line
        sec = rows[cid]["secondary"]  # the piece-level verdict, beside the headline
        if sec is not None:
            assert f"({sec['label']}: <span" in line and sec["verdict"] in line
        for value in rows[cid]["finding"].values():
            assert claims.format_value(value) in line
    counts = {}
    for r in rows.values():
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    for verdict_kind, n in counts.items():
        assert re.search(rf"{n} <span[^>]*>{verdict_kind}</span>", page), verdict_kind
    paper_tau = REGISTRY["checks"]["trajectory"]["paper"]["fast_dllm_tokens_per_step"]
    c3 = rows["C3"]["values"]
    regime = re.search(r'class="regime">(.*?)</p>', page).group(1)
    assert f"{c3['c3_tau_acc']:.3g}" in regime and f"{paper_tau:g}" in regime


def test_dashboard_and_landing_page_open_with_the_claim_by_world_matrix():
    rows = claims.dashboard_rows(ROOT / "_build" / "jupyter_execute", REGISTRY,
                                 provenance.fingerprint())
    for page in ("claims", "intro"):
        html_text = (HTML / "book" / f"{page}.html").read_text()
        cells = re.findall(r'class="world-verdict" data-claim="(C\d)" '
                           r'data-world="(\w+)"><span[^>]*>([^<]+)</span>', html_text)
        got = {(cid, w): v for cid, w, v in cells}
        want = {(r["id"], w): c["verdict"] for r in rows
                for w, c in claims.world_cells(r, REGISTRY).items()}
        assert got == want, page
        c3 = next(r for r in rows if r["id"] == "C3")
        assert got[("C3", "prose")] == c3["verdict"]
    page = (HTML / "book" / "claims.html").read_text()
    assert page.index('class="table claims-matrix"') < page.index(
        'class="table claims-dashboard"')


def test_every_claim_page_shows_its_claim_in_every_world():
    rows = claims.dashboard_rows(ROOT / "_build" / "jupyter_execute", REGISTRY,
                                 provenance.fingerprint())
    for r in rows:
        page = (HTML / Path(r["notebook"]).with_suffix(".html")).read_text()
        table = re.search(rf'<table class="table claim-worlds" data-claim="{r["id"]}">'
                          r"(.*?)</table>", page, re.S)
        assert table, f"{r['notebook']} shows no claim-worlds table"
        got = dict(re.findall(r'class="claim-world-verdict" data-world="(\w+)">'
                              r"<span[^>]*>([^<]+)</span>", table.group(1)))
        want = {w: c["verdict"] for w, c in claims.world_cells(r, REGISTRY).items()}
        assert got == want, r["id"]


def test_every_notebook_page_offers_its_executed_notebook():
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md")):
        page = (HTML / "notebooks" / f"{nb.stem}.html").read_text()
        href = f"../_executed/notebooks/{nb.stem}.ipynb"
        assert f'href="{href}" download' in page, nb.name
        executed = HTML / "_executed" / "notebooks" / f"{nb.stem}.ipynb"
        assert executed.exists(), f"{executed} was not copied into the book"
        # what a reader downloads is the executed notebook, outputs and all
        # (myst-nb's cache mode saves the source; the extension merges the cache)
        cells = json.loads(executed.read_text())["cells"]
        outputs = [o for c in cells if c["cell_type"] == "code" for o in c["outputs"]]
        assert len(outputs) >= 3, f"{executed.name} holds {len(outputs)} outputs"
        ran = claims.read_glued(executed.with_suffix(".glue.json"))
        assert ran[provenance.FINGERPRINT_KEY] == provenance.fingerprint()


def _world_runs():
    """(page notebook, world) for every world run the book makes."""
    from dlmspec_min.plumbing import worldruns

    pages = sorted({c["notebook"] for c in REGISTRY["claims"].values()}
                   | {c["notebook"] for c in REGISTRY["checks"].values()})
    return [(nb, w) for nb in pages if (ROOT / nb).exists()
            for w in worldruns.worlds_of(ROOT / nb)]


@pytest.mark.parametrize("notebook,world", _world_runs())
def test_each_world_run_ran_or_its_models_are_missing(notebook, world):
    """A world run the build did not write is one whose models are missing (and
    the page says so); one it wrote records in-range values under the claim's
    names and the verdict its rule gives on them."""
    import jupytext

    from dlmspec_min.plumbing import worldruns

    executed = claims.world_run_path(claims.executed_path(notebook), world)
    if not executed.exists():
        r = worldruns.world_run(ROOT / notebook, jupytext.read(ROOT / notebook), world)
        assert r.missing, (f"{executed} missing though the {world} world's models "
                           "are trained: run `make book`")
        return
    values = claims.read_glued(executed)
    assert values.get(provenance.FINGERPRINT_KEY) == provenance.fingerprint(), (
        f"{executed} ran under another fingerprint than this build's")
    for cid, claim in REGISTRY["claims"].items():
        if claim["notebook"] != notebook:
            continue
        recorded = {k: v for k, v in values.items() if k in claim["keys"]}
        problems = [p for p in claims.check_values(claim["keys"], recorded)
                    if "not recorded" not in p]
        assert not problems, problems
        assert values[f"{cid.lower()}_verdict"] == claims.verdict(cid, values, REGISTRY)
    for check in REGISTRY["checks"].values():
        if check["notebook"] != notebook:
            continue
        rules = ((check.get("worlds") or {}).get(world) or {}).get("rules", {})
        failed = [f"{n}: {r}" for n, r in rules.items()
                  if not claims.evaluate(r, values)]
        assert not failed, f"{world} world's quality gates failed: {failed}"


def _every_page_values() -> dict:
    """Every executed page's glued values, its world runs' under their suffixes."""
    executed = ROOT / "_build" / "jupyter_execute"
    pages = {}
    for glue in sorted(executed.rglob("*.glue.json")):
        if glue.name.count(".") > 2:  # a world run (NN.<world>.glue.json): below
            continue
        path = glue.with_name(glue.name.removesuffix(".glue.json") + ".ipynb")
        values = claims.read_glued(path)
        claims.add_world_runs(path, values, None)
        pages[str(glue.relative_to(executed)).removesuffix(".glue.json")] = values
    return pages


def test_one_name_holds_one_value_across_the_book():
    """A quantity the book shows on several pages is one value everywhere: a
    glued key two pages record, and two keys the registry shows under one name,
    agree in every world. Pages that measure the same symbol on other questions
    name it apart (e.g. tau_acc on C2's questions, on C3's)."""
    pages = _every_page_values()
    assert len(pages) >= 10, "run `make book` first"
    problems = claims.two_values(pages, REGISTRY)
    assert not problems, "\n".join(problems)
