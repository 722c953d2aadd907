"""A world is one definition (issue 54, item 4): its catalogue entry and its
models are all that adding it takes.

A subprocess appends an entry to a temporary copy of ``catalogue.py`` (what
README's "Adding a world" asks for by hand) and reads its models from a data
folder whose ``models/math_new`` holds copies of the math ladder's rungs (as
training it would). Everything else is the package and notebooks as they are:
no notebook's parameters cell differs from its Config, the runner resolves and
preflights ``-p world math_new`` for a claim page, and the page's own steps
(its Config from those values, ``load_models``, ``measure`` in ``get_world``)
run C4 there. The notebook is not executed under papermill: its kernel would
import the repository's catalogue, which this test leaves unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dlmspec_min import catalogue
from dlmspec_min.paths import REPO_ROOT, data_dir, models_dir

ENTRY = ('    Entry(name="math_new", title="a world added by a test", '
         'folder="math_new", grammar="FREE", **_MATH),\n')

SCRIPT = r'''
import json, sys, types
from pathlib import Path

import dlmspec_min

src = (Path(dlmspec_min.__file__).parent / "catalogue.py").read_text()
anchor = "\n)\nWORLDS: dict"
assert src.count(anchor) == 1, "the catalogue's ENTRIES tuple moved"
src = src.replace(anchor, "\n" + ENTRY + anchor[1:], 1)
module = types.ModuleType("dlmspec_min.catalogue")
sys.modules[module.__name__] = dlmspec_min.catalogue = module
exec(compile(src, "catalogue.py (temporary copy)", "exec"), module.__dict__)

from dlmspec_min.experiments import c4_cluster_verification as c4m
from dlmspec_min.experiments.common import load_models
from dlmspec_min.plumbing import cells, params, run
from dlmspec_min.worlds import get_world

assert "math_new" in dlmspec_min.catalogue.NAMES
out = {"cells": cells.main(["--check"])}
page = Path("notebooks/04_cluster_verification.md")
out["print"] = run.main([str(page), "-p", "world", "math_new", "--print-parameters"])
declared = run.declared_parameters(page)
small = [("world", "math_new"), ("n_samples", 3), ("K_sweep", [8]),
         ("n_permutations", 30), ("n_bootstrap", 30)]
values = run.gather(declared, (), (), small, notebook=page)
run.check_machine(declared, values)
config = params.validated(c4m.Config, run.with_defaults(declared, values))
models = load_models(config.model, config.draft, device=config.device,
                     dtype=config.dtype, device_map=config.device_map)
result = c4m.measure(models, get_world(config.world), config)
out.update(model=config.model, draft=config.draft, gen_length=config.gen_length,
           alpha_tok=float(result.values["c4_alpha_tok"]))
print("RESULT " + json.dumps(out))
'''


@pytest.fixture()
def data_with_a_new_ladder(tmp_path):
    """A data folder like this one's, plus models/math_new: the math world's
    trained rungs under the new world's folder."""
    math = catalogue.get("math")
    rungs = [models_dir() / math.folder / s for s in math.sizes]
    if not all((r / "config.json").is_file() for r in rungs[:2]):
        pytest.skip("the math ladder's small and base are not on this machine")
    (tmp_path / "models").mkdir()
    for item in data_dir().iterdir():
        if item.name != "models":
            (tmp_path / item.name).symlink_to(item)
    for item in models_dir().iterdir():
        (tmp_path / "models" / item.name).symlink_to(item)
    (tmp_path / "models" / "math_new").symlink_to(models_dir() / math.folder)
    return tmp_path


def test_a_new_catalogue_entry_runs_a_claim_page_and_changes_no_other_file(
        data_with_a_new_ladder):
    env = {**os.environ, "DLMSPEC_DATA": str(data_with_a_new_ladder),
           "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", f"ENTRY = {ENTRY!r}\n" + SCRIPT],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    out = json.loads(line.removeprefix("RESULT "))
    assert out["cells"] == 0  # no notebook's parameters cell changes
    assert out["print"] == 0  # the runner resolves and preflights the world
    assert out["model"] == "dlmspec/math_new/base"
    assert out["draft"] == "dlmspec/math_new/small"
    assert out["gen_length"] == catalogue.get("math").gen_length  # its entry's
    assert 0 <= out["alpha_tok"] <= 1
    assert "world: math_new" in done.stdout  # --print-parameters' YAML
