"""Checks on the seed page the book build executed (`make book` first).

The page (notebooks/10_seeds.md) reruns claims' notebooks at several seeds and
glues, for every run, the values the claim's rule reads and the verdict it
gave; here each verdict is recomputed from those values by the registry's rule.
"""

from pathlib import Path

import pytest

from dlmspec_min.plumbing import claims, provenance, seeds

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = claims.load_registry()
PAGE = REGISTRY["checks"]["seeds"]["notebook"]
KINDS = [*REGISTRY.get("verdicts", claims.VERDICTS), seeds.NOT_MEASURED]


@pytest.fixture(scope="module")
def glued():
    path = claims.executed_path(PAGE)
    if not path.with_suffix(".glue.json").exists():
        pytest.fail(f"{PAGE} has not been executed by the book build; run `make book`")
    return claims.read_glued(path)


def _listed(text: str) -> list:
    return [s.strip() for s in text.split(",")]


def test_the_page_runs_c2_c3_c6_c7_at_seeds_0_1_2_on_its_defaults(glued):
    assert _listed(glued["seeds_claims"]) == ["C2", "C3", "C6", "C7"]
    assert _listed(glued["seeds_seeds"]) == ["0", "1", "2"]
    assert glued["seeds_n_runs"] == glued["seeds_n_planned"] == 12


def test_every_run_verdict_is_its_claim_rule_on_its_values(glued):
    for cid in _listed(glued["seeds_claims"]):
        verdicts = []
        for s in map(int, _listed(glued["seeds_seeds"])):
            inputs = {name: glued[seeds.run_key(cid, s, name)]
                      for name in seeds.rule_inputs(cid, REGISTRY)
                      if seeds.run_key(cid, s, name) in glued}
            shown = glued[seeds.run_key(cid, s, "verdict")]
            assert shown == claims.verdict(cid, inputs, REGISTRY), (cid, s)
            piece = glued[seeds.run_key(cid, s, "verdict_piece")]
            assert piece in KINDS, (cid, s)
            if "secondary" in REGISTRY["claims"][cid]:  # judged here, as on the page
                assert piece == seeds.piece_verdict(cid, inputs, REGISTRY), (cid, s)
            lo, hi = (glued[seeds.run_key(cid, s, k)] for k in ("alpha_lo", "alpha_hi"))
            assert 0 <= lo <= glued[seeds.run_key(cid, s, "alpha")] <= hi <= 1
            assert glued[seeds.run_key(cid, s, "seconds")] > 0
            verdicts.append(shown)
        assert glued[f"seeds_agree_{cid}"] == pytest.approx(seeds.agreement(verdicts))
        seed_list = list(map(int, _listed(glued["seeds_seeds"])))
        assert glued[f"seeds_verdicts_{cid}"] == seeds.listing(seed_list, verdicts)


def test_the_page_ran_the_checkout_notebooks(glued):
    """The execution cache keys the page on its own code only: a change to a
    notebook it runs must not leave its old runs on the page."""
    claim_ids = _listed(glued["seeds_claims"])
    notebooks = sorted(REGISTRY["claims"][c]["notebook"] for c in claim_ids)
    assert glued[provenance.SOURCE_FILES_KEY].split(",") == notebooks
    assert provenance.sources_current(glued), (
        "a notebook the seed page runs changed since the page executed; `make book` "
        "executes it again")
