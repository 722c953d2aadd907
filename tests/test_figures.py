"""The book's computed figures, drawn from synthetic glued values."""

import math

from dlmspec_min.plumbing import claims, figures

REGISTRY = claims.load_registry()


def _rows(values_of):
    return [{"id": cid, "notebook": c["notebook"], "verdict": claims.INCONCLUSIVE,
             "values": values_of(cid), "stale_worlds": []}
            for cid, c in REGISTRY["claims"].items()]


def _values(cid):
    """In-range values for a claim's evidence names, in both worlds."""
    out = {}
    for spec in REGISTRY["evidence"][cid]:
        sides = (REGISTRY["power"]["claims"][cid]["sides"] if spec["sides"] == "power"
                 else spec["sides"])
        for side, (v, lo, hi) in zip(sides, [(0.3, 0.2, 0.4), (0.8, 0.75, 0.85)],
                                     strict=True):
            for expr, x in zip(side, (v, lo, hi), strict=True):
                for name in (str(expr).split() if isinstance(expr, str) else []):
                    if name.isidentifier():
                        x = 5.0 if "tau" in name else x
                        out[name] = out[f"{name}_math"] = x
    return out


def test_one_panel_per_comparison_with_every_world():
    panels = figures.panels(_rows(_values), REGISTRY)
    assert len(panels) == sum(len(v) for v in REGISTRY["evidence"].values())
    for p in panels:
        assert list(p["worlds"]) == list(claims.WORLD_SUFFIXES)
        assert all(math.isfinite(w["a"][0]) for w in p["worlds"].values()), p["claim"]
    c2 = next(p for p in panels if p["claim"] == "C2")
    assert c2["paper"] == REGISTRY["claims"]["C2"]["paper_value"]
    assert c2["scale"] == "log"


def test_the_svg_is_inline_deterministic_and_names_every_claim():
    rows = _rows(_values)
    svg = figures.forest_svg(rows, REGISTRY)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert svg == figures.forest_svg(rows, REGISTRY)  # same rows, same bytes
    for cid in REGISTRY["claims"]:
        assert f"{cid}: " in svg


def test_a_claim_not_measured_draws_no_point_and_says_so():
    rows = _rows(lambda cid: {} if cid == "C4" else _values(cid))
    panels = [p for p in figures.panels(rows, REGISTRY) if p["claim"] == "C4"]
    assert panels and all(w["verdict"] == claims.NOT_MEASURED
                          for p in panels for w in p["worlds"].values())
    svg = figures.forest_svg(rows, REGISTRY)
    assert "prose: not measured" in svg and "nan" not in svg.lower()


def test_no_evidence_no_figure():
    registry = {**REGISTRY, "evidence": {}}
    assert figures.forest_svg(_rows(_values), registry) == ""


def test_rates_reads_every_decoder_of_every_world_with_its_interval():
    check = REGISTRY["checks"]["trajectory"]
    values = {"t_tokens_per_nfe_threshold": 2.0, "t_tokens_per_nfe_traj": 3.0,
              "t_tokens_per_nfe_traj_lo": 2.5, "t_tokens_per_nfe_traj_hi": 3.5,
              "t_tokens_per_nfe_threshold_math": 5.0, "t_other": 1.0,
              "t_tokens_per_nfe_stale_math": float("nan")}  # not run: not drawn
    got = figures.rates(values, check)
    assert set(got) == {"prose", "math"}
    assert got["prose"]["traj"] == (3.0, 2.5, 3.5)
    assert set(got["prose"]) == {"threshold", "traj"}
    assert got["math"]["threshold"][0] == 5.0
    assert math.isnan(got["math"]["threshold"][1])
    assert set(got["math"]) == {"threshold"}
    svg = figures.rates_svg(values, check, {"traj": "trajectory speculation"})
    assert svg.startswith("<svg") and "trajectory speculation" in svg
    for rate in check["paper"].values():
        if isinstance(rate, float) and rate > 2:
            assert f"{rate:g}" in svg
    assert figures.rates_svg({}, check) == ""
