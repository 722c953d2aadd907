"""Same parameters and seed, same numbers: one claim notebook executed twice.

The formalization chapter (*Seeds*) says which numbers are bit-exact on the CPU
(all recorded values) and which are not expected to be (GPU kernels, other
thread counts, wall-clock timings). Notebook 04 is the fastest claim notebook;
it runs here at reduced sizes through the same runner a reader uses.
"""

import math
from pathlib import Path

from dlmspec_min.plumbing import claims, provenance, run

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "04_cluster_verification.md"
SMALL = ["-p", "n_samples", "6", "-p", "K_sweep", "[32]", "-p", "n_permutations",
         "500", "-p", "n_bootstrap", "200", "-p", "seed", "3"]
# measured times of the run itself, not its numbers
TIMINGS = ("_seconds", "_wall", "_cpu")


def test_a_claim_notebook_gives_identical_values_twice(tmp_path):
    runs = []
    for name in ("first", "second"):
        out = tmp_path / f"{name}.ipynb"
        assert run.main([str(NOTEBOOK), *SMALL, "-o", str(out)]) == 0
        runs.append(claims.read_glued(out))
    first, second = runs
    assert first.keys() == second.keys()
    assert "c4_verdict" in first and "c4_alpha_clu" in first
    assert first[provenance.FINGERPRINT_KEY] == provenance.fingerprint()
    numbers = 0
    for key, value in first.items():
        if key.endswith(TIMINGS):
            continue
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(second[key]), key
        else:
            assert second[key] == value, f"{key}: {value!r} then {second[key]!r}"
        numbers += isinstance(value, (int, float))
    assert numbers >= 10, "too few recorded values to call this a check"
