"""The catalogue of worlds (issue 47): one entry per world, read by everything.

Each entry must build its world, and every place that needs a world's facts
reads them from the entry: the worlds, the parameter rules, the runner, the
claims' glue suffixes and training; the decoder, which imports nothing of the
package, finds the ladders' folders on disk (``tests/test_new_world.py`` adds a
world).
"""

import shutil
import subprocess
import sys

import pytest

from dlmspec_min import catalogue
from dlmspec_min.decoding import denoisers
from dlmspec_min.paths import REPO_ROOT, models_dir
from dlmspec_min.plumbing import claims, params
from dlmspec_min.texts import problems as P
from dlmspec_min.training import train_math
from dlmspec_min.worlds import WORLDS, get_world

MATH_WORLDS = [e.name for e in catalogue.ENTRIES if e.kind == "math"]


def test_the_catalogue_imports_no_torch_and_nothing_of_the_package():
    code = ("import sys, dlmspec_min.catalogue as c; "
            "mods = [m for m in sys.modules if m.startswith('dlmspec_min.')]; "
            "assert 'torch' not in sys.modules, 'torch'; "
            "assert mods == ['dlmspec_min.catalogue'], mods")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_names_are_unique_and_the_default_and_book_worlds_come_first():
    assert len(set(catalogue.NAMES)) == len(catalogue.ENTRIES)
    assert catalogue.NAMES[0] == catalogue.DEFAULT == "prose"
    assert catalogue.BOOK == ("prose", "math")
    assert claims.WORLD_SUFFIXES == {"prose": "", "math": "_math"}
    with pytest.raises(ValueError, match="unknown world 'poetry'; use one of prose, "
                                         "math, math_narrow"):
        catalogue.get("poetry")


@pytest.mark.parametrize("name", catalogue.NAMES)
def test_every_entry_builds_its_world_with_the_entrys_facts(name):
    entry, world = catalogue.get(name), get_world(name)
    assert world is WORLDS[name] and world.name == name
    assert world.title == entry.title and world.ladder == entry.ladder
    assert (world.draft, world.target, world.strong) == tuple(
        entry.role(r) for r in catalogue.ROLES)
    assert set(world.ladder) >= {world.draft, world.target, world.strong}
    assert world.decode == entry.decode
    assert world.context_free == entry.context_free
    assert world.order_in_blocks == entry.order_in_blocks
    assert entry.gen_length % entry.block_length == 0
    if entry.kind == "math":
        assert world.dials == getattr(P, entry.grammar)
        assert world.dials == train_math.dials_of_world(name)
        assert (world.prompt_length, world.decode["gen_length"]) == entry.layout
        assert train_math.ladder_dir(name) == models_dir() / entry.folder
    else:
        assert entry.grammar is None


@pytest.mark.parametrize("name", catalogue.NAMES)
def test_an_entrys_defaults_are_parameters_the_rules_check(name):
    defaults = catalogue.get(name).defaults
    assert set(defaults) <= set(params.RULES)
    for k, v in defaults.items():
        params.check(k, v)


def test_the_decoder_finds_every_trained_rung_of_the_catalogues_ladders_on_disk():
    """The decoder lists no world: it finds the ladders' folders on disk, and its
    hint for a missing rung names the folder, whose world train_math finds."""
    trained = {m for m in catalogue.rungs()
               if (models_dir() / m.removeprefix(catalogue.EMBEDDED)
                   / "config.json").is_file()}
    assert trained and trained <= set(denoisers.embedded_models())
    assert all(denoisers.EMBEDDED_NAME.match(m) for m in catalogue.rungs())
    for name in MATH_WORLDS:
        assert train_math.world_of_folder(catalogue.get(name).folder) == name
    with pytest.raises(ValueError, match="no math world"):
        train_math.world_of_folder("nowhere")


def test_training_trains_exactly_the_math_worlds():
    assert train_math.LADDERS == tuple(MATH_WORLDS)
    assert (train_math.PROMPT_LENGTH, train_math.GEN_LENGTH) == catalogue.get(
        "math").layout
    with pytest.raises(ValueError, match="world must be one of the math worlds"):
        train_math.ladder_dir("prose")


def test_a_model_belongs_to_the_world_whose_ladder_names_it():
    assert catalogue.of_model("dlmspec/base").name == "prose"
    assert catalogue.of_model("dlmspec/math_free/large").name == "math"
    assert catalogue.of_model("dlmspec/math/small").name == "math_narrow"
    assert catalogue.of_model("dlmspec/math_chains/base").name == "math_chains"
    assert catalogue.of_model("GSAI-ML/LLaDA-8B-Base") is None
    # worlds that share rows may lend each other models, others may not
    math, narrow = catalogue.get("math"), catalogue.get("math_narrow")
    assert math.shares_rows(narrow)
    assert not math.shares_rows(catalogue.get("math_chains"))
    assert not math.shares_rows(catalogue.get("prose"))


def test_train_command_names_the_world():
    assert catalogue.get("math_order").train_command.format(size="base") == (
        "python -m dlmspec_min.training.train_math --world math_order --size base")
    assert "training.train --size" in catalogue.get("prose").train_command


@pytest.fixture
def order_without_large(tmp_path, monkeypatch):
    """A data folder whose math_order ladder has small and base but no large."""
    for size in ("small", "base"):
        folder = tmp_path / "models" / "math_order" / size
        folder.mkdir(parents=True)
        shutil.copy(models_dir() / "math_order" / size / "config.json", folder)
    monkeypatch.setenv("DLMSPEC_DATA", str(tmp_path))


def test_a_rung_this_machine_lacks_is_refused_before_any_kernel_with_its_command(
        order_without_large, capsys):
    """C7 in a world whose large rung is missing says so and how to train it, as
    one line and exit 2, before a kernel starts."""
    from dlmspec_min.plumbing import run

    page = REPO_ROOT / "notebooks" / "07_strong_model.md"
    assert run.main([str(page), "-p", "world", "math_order"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert ("large_model='dlmspec/math_order/large': the math_order world's rung "
            "large is not trained") in err
    assert "train_math --world math_order --size large" in err


def test_the_seed_page_checks_each_of_its_runs_in_its_world_before_it_starts(
        order_without_large, capsys):
    from dlmspec_min.plumbing import run

    page = REPO_ROOT / "notebooks" / "10_seeds.md"
    assert run.main([str(page), "-p", "world", "math_order", "--print-parameters"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the seed page's run of C7 at seed 0: parameter "
                          "large_model='dlmspec/math_order/large'")
    # without C7 the plan runs in that world: its parameters, checked, as YAML
    assert run.main([str(page), "-p", "world", "math_order", "-p", "claims",
                     "['C2', 'C3']", "--print-parameters"]) == 0
    out = capsys.readouterr().out
    assert "world: math_order" in out and "- C7" not in out
