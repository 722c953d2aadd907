"""A page's parameters are declared once, in its Config (issue 47, item 3).

The parameters cell is written from the Config (``plumbing.cells``), papermill
reads the same names, types and defaults from it, every field has a rule, the
notebooks build their config through ``params.validated`` and pass it to
``measure(models, world, config)``, and the seed page's sizes name fields of
each claim's Config.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from dlmspec_min import catalogue
from dlmspec_min.experiments import c3_win_condition as c3
from dlmspec_min.experiments import parameters
from dlmspec_min.plumbing import cells, claims, params, seeds

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = cells.configs()


def _with_cell(path: Path) -> bool:
    return ":tags: [parameters]" in path.read_text()


def test_every_notebook_with_parameters_has_a_config_and_no_config_lacks_its_page():
    pages = {p.stem for p in (ROOT / "notebooks").glob("*.md") if _with_cell(p)}
    assert set(CONFIGS) == pages


@pytest.mark.parametrize("stem", sorted(CONFIGS))
def test_the_cell_is_the_config_written_out(stem):
    text = (ROOT / "notebooks" / f"{stem}.md").read_text()
    assert cells.cell_in(text) == CONFIGS[stem].cell(), (
        f"run python -m dlmspec_min.plumbing.cells to rewrite {stem}'s cell")


@pytest.mark.parametrize("stem", sorted(CONFIGS))
def test_papermill_reads_the_configs_names_types_and_defaults(stem):
    cls = CONFIGS[stem]
    found = params.notebook_parameters(ROOT / "notebooks" / f"{stem}.md")
    assert list(found) == cls.names()
    defaults = cls()
    for f in cls.fields():
        seen = found[f.name]
        assert seen["inferred_type_name"] == f.type, f.name
        assert ast.literal_eval(seen["default"]) == getattr(defaults, f.name), f.name
        assert seen["help"] == cls.help(f.name), f.name


@pytest.mark.parametrize("stem", sorted(CONFIGS))
def test_every_parameter_has_a_rule_and_the_defaults_pass_every_rule(stem):
    cls = CONFIGS[stem]
    assert not [n for n in cls.names() if n not in params.RULES]
    params.validated(cls())  # raises where a default breaks its rule


@pytest.mark.parametrize("stem", sorted(CONFIGS))
def test_the_notebook_builds_its_config_through_validated(stem):
    text = (ROOT / "notebooks" / f"{stem}.md").read_text()
    assert "config = validated(Config, globals())" in text
    assert "validate_all(" not in text  # no second list of the parameters


def test_each_claim_page_passes_its_config_to_measure():
    for stem in ("01_easy_first", "02_anchor_acceptance", "03_win_condition",
                 "04_cluster_verification", "05_bounded_quality", "06_conditional",
                 "07_strong_model", "08_information"):
        text = (ROOT / "notebooks" / f"{stem}.md").read_text()
        call = re.search(r"\.measure\(\s*models, get_world\(world\), config[,)]", text)
        # or, where the sequential rule may grow it, each look's config
        looks = (re.search(r"\.measure\(\s*models, get_world\(world\), cfg[,)]", text)
                 and re.search(r"sequential\.run\([\s\S]{0,400}?\bconfig\b", text))
        assert call or looks, stem
    text = (ROOT / "notebooks" / "09_trajectory_speculation.md").read_text()
    assert re.search(r"trajectory_speculation\.measure\(\s*models, config,", text)


def test_a_bad_value_is_named_and_relations_are_checked():
    good = c3.Config().values()
    with pytest.raises(ValueError, match=r"parameter threshold=1.5 must be a number"):
        params.validated(c3.Config, {**good, "threshold": 1.5})
    with pytest.raises(ValueError, match="gen_length=48 must be a multiple of "
                                         "block_length=20"):
        params.validated(c3.Config, {**good, "block_length": 20})
    with pytest.raises(ValueError, match=r"no value for \['seed'\]"):
        params.validated(c3.Config, {k: v for k, v in good.items() if k != "seed"})
    # names the Config does not declare (a notebook's globals) are ignored
    assert params.validated(c3.Config, {**good, "np": object()}) == c3.Config()
    # a Config instance alone is checked as it is
    assert params.validated(c3.Config().replace(K=8)).K == 8
    with pytest.raises(ValueError, match="parameter K=0 must be an integer >= 1"):
        params.validated(c3.Config().replace(K=0))


def test_a_config_is_frozen_replaced_by_name_and_its_lists_are_its_own():
    a = c3.Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.K = 3
    assert a.replace(K=3).K == 3 and a.K == 256
    with pytest.raises(TypeError, match="no parameter"):
        a.replace(k=3)
    s1, s2 = seeds.Config(), seeds.Config()
    s1.seeds.append(9)
    assert s2.seeds == [0, 1, 2]  # a default list is copied, never shared


def test_help_that_papermill_would_skip_is_refused_and_types_are_cell_types():
    with pytest.raises(ValueError, match="without '='"):
        parameters.param(1, "a = b")

    @dataclasses.dataclass(frozen=True)
    class Bad(parameters.Config):
        x: tuple = parameters.param((1,), "a tuple")

    with pytest.raises(TypeError, match="not one of"):
        Bad.cell()


def test_no_cell_lists_the_catalogues_worlds_the_runners_help_does(capsys):
    """A new catalogue entry changes no parameters cell (so no page re-executes);
    the runner's --help names every world."""
    others = [n for n in catalogue.NAMES if n not in catalogue.BOOK]
    for stem, cls in CONFIGS.items():
        assert not [n for n in others if re.search(rf"\b{n}\b", cls.cell())], stem
    from dlmspec_min.plumbing import run

    assert run.main([str(ROOT / "notebooks" / "03_win_condition.md"), "--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in catalogue.NAMES)


def test_a_cell_is_rewritten_in_place_and_one_cell_is_required():
    text = ("# t\n\n```{code-cell} ipython3\n:tags: [parameters]\n\nx: int = 1  # old\n"
            "```\n\nafter\n")
    new = cells.written(text, c3.Config)
    assert cells.cell_in(new) == c3.Config.cell() and new.endswith("```\n\nafter\n")
    with pytest.raises(ValueError, match="2 parameters cells"):
        cells.cell_in(text + text)
    with pytest.raises(ValueError, match="0 parameters cells"):
        cells.cell_in("# none\n")


def test_the_seed_pages_sizes_name_fields_of_each_claims_config():
    registry = claims.load_registry()
    plan = seeds.Config()
    for cid, sizes in plan.sizes.items():
        stem = Path(registry["claims"][cid]["notebook"]).stem
        cls = CONFIGS[stem]
        assert set(sizes) <= set(cls.names()), cid
        params.validated(cls, cls().replace(**sizes).values())


def test_the_writer_reports_nothing_to_rewrite(capsys):
    assert cells.main(["--check"]) == 0
    assert "0 parameters cell(s)" in capsys.readouterr().out


def _readme_config_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Rerunning one notebook with other parameters", 1)[1]
    section = section.split("\n## ", 1)[0]
    (example,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return example


def test_the_readme_s_config_example_measures_as_written():
    """README: a measurement from Python, a config changing only what differs."""
    scope: dict = {}
    exec(_readme_config_example(), scope)
    config, result = scope["config"], scope["result"]
    assert (config.n_samples, config.n_permutations, config.K) == (8, 200, 256)
    assert result.values["c4_n_permutations"] == 200
    assert 0 <= result.values["c4_alpha_tok"] <= 1


def test_a_pages_decode_is_its_worlds_and_an_override_says_so():
    """The prose world's decode is written once, in its catalogue entry: a page
    takes it from the base Config, and a page whose default differs says so in
    its cell."""
    world = catalogue.get(catalogue.DEFAULT).defaults
    assert parameters.WORLD_DECODE == {k: world[k] for k in parameters.WORLD_DECODE}
    for stem, cls in CONFIGS.items():
        for name in set(parameters.WORLD_DECODE) & set(cls.names()):
            own = getattr(cls(), name) != world[name]
            assert own == ("(this page's; the world's is" in cls.help(name)), (
                stem, name)


def _class_source(cls) -> ast.ClassDef:
    import inspect

    tree = ast.parse(inspect.getsource(inspect.getmodule(cls)))
    return next(n for n in tree.body
                if isinstance(n, ast.ClassDef) and n.name == cls.__name__)


@pytest.mark.parametrize("stem", sorted(CONFIGS))
def test_no_page_restates_a_shared_default(stem):
    """A page writes a shared name's value only where it differs from the base's
    (a literal or shared(name, value)); help and rule stay with the name."""
    cls = CONFIGS[stem]
    for node in _class_source(cls).body:
        if not (isinstance(node, ast.AnnAssign)
                and node.target.id in parameters.SHARED):
            continue
        name, value = node.target.id, node.value
        if name == "n_samples":  # every page states its own size
            continue
        if isinstance(value, ast.Call) and len(value.args) <= 1:
            continue  # shared(name[, note=...]): the base's default
        try:
            if not isinstance(value, ast.Call):
                written = ast.literal_eval(value)
            else:  # param(default, help) or shared(name, default)
                callee = getattr(value.func, "id", getattr(value.func, "attr", ""))
                written = ast.literal_eval(value.args[0 if callee == "param" else 1])
        except ValueError:  # read from elsewhere (the catalogue), not written
            continue
        base = next((getattr(b(), name) for b in cls.__mro__[1:]
                     if name in getattr(b, "__dataclass_fields__", {})),
                    parameters.SHARED[name][0])
        assert written != base, (stem, name, written)
