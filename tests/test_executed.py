"""Claim checks on the notebooks the book build executed (`make book` first).

The values tested are the values published: they are read back from the glue
data that the build wrote next to each executed notebook.
"""

import re
from pathlib import Path

import pytest

from dlmspec_min import claims

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


def test_every_notebook_page_was_built():
    for nb in (ROOT / "notebooks").glob("[0-9][0-9]_*.md"):
        assert (HTML / "notebooks" / f"{nb.stem}.html").exists(), (
            f"{nb.name} has no page"
        )
