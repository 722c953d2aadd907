"""A claim notebook measures the world it is given (issue 26, item 1).

``world`` is a parameter of every notebook whose claim is measured in the math
world; ``-p world NAME`` applies that world's defaults from the catalogue (its
models, prompts, decode and K) and its sizes for the notebook
(``notebooks/profiles/<profile>/<notebook>.yaml``) beneath every other file and
``-p``; a model or a prompt source of another world is one line and exit 2
before any kernel starts.
"""

from pathlib import Path

import papermill
import pytest
import yaml

from dlmspec_min import catalogue
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing import claims, params, run
from dlmspec_min.training import train_math
from dlmspec_min.worlds import MATH, WORLD_NAMES, get_world

NOTEBOOKS = REPO_ROOT / "notebooks"
# every claim notebook (06 and 08 measure their prompted side alone in the math
# world, whose models write [EOS] when given no question)
WITH_WORLD = ["01_easy_first", "02_anchor_acceptance", "03_win_condition",
              "04_cluster_verification", "05_bounded_quality", "06_conditional",
              "07_strong_model", "08_information", "09_trajectory_speculation"]
# the seed page reruns claims in the world it is given (their profiles beneath
# its sizes)
PAGES_WITH_WORLD = [*WITH_WORLD, "10_seeds"]


def _nb(stem: str) -> Path:
    return NOTEBOOKS / f"{stem}.md"


@pytest.fixture
def no_execution(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("papermill must not run for a bad parameter")

    monkeypatch.setattr(papermill, "execute_notebook", refuse)


def test_the_world_parameter_takes_exactly_the_catalogues_worlds():
    assert WORLD_NAMES == catalogue.NAMES
    for name in catalogue.NAMES:
        params.check("world", name)
    with pytest.raises(ValueError, match="must be a world of the catalogue"):
        params.check("world", "maths")


@pytest.mark.parametrize("stem", PAGES_WITH_WORLD)
def test_a_claim_notebook_takes_a_world_with_prose_its_default(stem):
    declared = run.declared_parameters(_nb(stem))
    assert run.with_defaults(declared, {})["world"] == "prose"


@pytest.mark.parametrize("stem", WITH_WORLD)
def test_world_math_brings_the_math_profile_beneath_every_p(stem):
    declared = run.declared_parameters(_nb(stem))
    profile = run.parameters_in(run.world_profile(_nb(stem), "math"))
    values = run.gather(declared, pairs=[("world", "math"), ("seed", "3")],
                        notebook=_nb(stem))
    assert values["seed"] == 3  # -p wins
    assert {k: values[k] for k in profile} == profile
    # the profile is the world's own: its ladder's roles and its decode
    assert values["model"] == MATH.target
    assert values.get("draft", MATH.draft) == MATH.draft
    assert values.get("large_model", MATH.strong) == MATH.strong
    for k in ("gen_length", "block_length", "threshold"):
        assert values[k] == MATH.decode[k], k
    # and it runs on the math models: vocabulary and context checked
    params.check_relations(run.with_defaults(declared, values))


def test_every_math_profile_belongs_to_a_notebook_that_takes_a_world():
    stems = sorted(p.stem for p in (NOTEBOOKS / "profiles" / "math").glob("*.yaml"))
    assert stems == PAGES_WITH_WORLD


@pytest.mark.parametrize("folder", ["math", "math-full"])
def test_a_profile_holds_only_what_differs_from_its_worlds_defaults(folder):
    """The world's models, prompts, decode and K live in its catalogue entry
    alone; a profile holds sizes (issue 47), and a world profile names its
    world, so that papermill -f it alone fails loudly on the prose models."""
    world_keys = set(catalogue.get("math").defaults) - {"world"}
    for f in sorted((NOTEBOOKS / "profiles" / folder).glob("*.yaml")):
        data = yaml.safe_load(f.read_text())
        assert not world_keys & set(data), (f.name, world_keys & set(data))
        assert data.get("world", "math") == "math", f.name
        if folder == "math":
            assert data["world"] == "math", f.name


def test_a_paper_profile_states_only_what_differs_from_its_page_s_defaults():
    """A paper-scale profile restates no default of its page (issue 54: the
    world's decode is written once); a line that keeps a default on purpose says
    why in a comment on that line."""
    for f in sorted((NOTEBOOKS / "profiles" / "paper").glob("*.yaml")):
        defaults = run.with_defaults(run.declared_parameters(_nb(f.stem)), {})
        said = {line.split(":")[0] for line in f.read_text().splitlines()
                if "#" in line.split(":", 1)[-1]}
        same = {k for k, v in run.parameters_in(f).items() if k not in said
                and v == defaults[k] and isinstance(v, bool) == isinstance(
                    defaults[k], bool)}
        assert not same, (f.name, sorted(same))


@pytest.mark.parametrize("world", [w for w in catalogue.NAMES if w != "prose"])
@pytest.mark.parametrize("stem", WITH_WORLD)
def test_every_claim_page_takes_every_world_of_the_catalogue(stem, world):
    """-p world NAME selects any catalogue world on any claim page: its entry's
    models, decode and prompt layout, checked like any run's parameters."""
    entry = catalogue.get(world)
    declared = run.declared_parameters(_nb(stem))
    values = run.gather(declared, pairs=[("world", world)], notebook=_nb(stem))
    assert values["world"] == world and values["model"] == entry.role("target")
    assert values.get("draft", entry.role("draft")) == entry.role("draft")
    assert values.get("large_model", entry.role("strong")) == entry.role("strong")
    for k in ("gen_length", "block_length", "threshold"):
        assert values[k] == get_world(world).decode[k], k
    if "prompt_length" in declared:
        assert values["prompt_length"] == entry.prompt_length
    params.check_relations(run.with_defaults(declared, values))


def test_a_files_world_brings_its_profile_too(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("world: math\nn_samples: 2\n")
    values = run.gather(run.declared_parameters(_nb("01_easy_first")), files=[f],
                        notebook=_nb("01_easy_first"))
    assert values["model"] == MATH.target and values["n_samples"] == 2


def test_world_prose_given_explicitly_adds_nothing():
    values = run.gather(run.declared_parameters(_nb("01_easy_first")),
                        pairs=[("world", "prose")], notebook=_nb("01_easy_first"))
    assert values == {"world": "prose"}


@pytest.mark.parametrize(("stem", "pairs", "message"), [
    ("01_easy_first", [("world", "math"), ("model", "dlmspec/base")],
     "model='dlmspec/base' is a model of the prose world, whose rows the math "
     "world's do not share"),
    ("02_anchor_acceptance", [("world", "math"), ("draft", "dlmspec/small")],
     "draft='dlmspec/small' is a model of the prose world"),
    ("02_anchor_acceptance", [("model", "dlmspec/math/base")],
     "model='dlmspec/math/base' is a model of the math_narrow world, whose rows "
     "the prose world's do not share: add -p world math_narrow"),
    ("03_win_condition", [("world", "math_chains"), ("draft", "dlmspec/math/small")],
     "draft='dlmspec/math/small' is a model of the math_narrow world, whose rows "
     "the math_chains world's do not share"),
    ("03_win_condition", [("world", "math"), ("model", "GSAI-ML/LLaDA-8B-Base")],
     "is not a model of the math world"),
    ("03_win_condition", [("world", "math"), ("prompt_source", "bos")],
     "the math world's prompts are its held-out questions"),
    ("09_trajectory_speculation", [("world", "math"), ("prompt_length", "8")],
     "the math world's questions are 32 tokens long"),
    ("06_conditional", [("world", "math_chains"), ("prompt_length", "32")],
     "the math_chains world's questions are 48 tokens long"),
    ("03_win_condition", [("prompt_source", "questions")],
     "prompt_source='questions' is a math world's: add -p world math"),
    ("01_easy_first", [("world", "maths")], "must be a world of the catalogue"),
])
def test_a_model_or_prompt_of_the_other_world_is_one_line_and_exit_2(
        stem, pairs, message, no_execution, capsys):
    argv = [str(_nb(stem))]
    for name, value in pairs:
        argv += ["-p", name, value]
    assert run.main(argv) == run.EXIT_BAD_PARAMETER
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_a_notebook_without_a_world_refuses_one(no_execution, capsys):
    """The models page measures both worlds itself and takes no world."""
    assert run.main([str(_nb("00_models")), "-p", "world", "math"]) == 2
    assert "unknown parameter 'world'" in capsys.readouterr().err


def test_c1_measures_the_math_world_end_to_end(tmp_path):
    """The notebook itself, under papermill, on the math world's questions and
    roles (math/small as the target, the quickest; the build runs it on
    math/base)."""
    out = tmp_path / "c1_math.ipynb"
    assert run.main([str(_nb("01_easy_first")), "-p", "world", "math",
                     "-p", "model", "dlmspec/math/small", "-p", "n_samples", "4",
                     "-p", "n_bootstrap", "50", "-o", str(out)]) == 0
    glued = claims.read_glued(out)
    assert 0 <= glued["c1_auc"] <= 1 and 0 <= glued["c1_auc_p"] <= 1
    # the math world's regime: its threshold rule commits several tokens per
    # forward over the 96-token window (prose: about one)
    assert glued["c1_thr_tokens_per_step"] > 2
    import ast

    import nbformat

    text = "".join(o.get("text", "") for c in nbformat.read(out, 4).cells
                   if c.cell_type == "code" for o in c.get("outputs", []))
    line = next(ln for ln in text.splitlines() if ln.startswith("dlmspec/math/small:"))
    prompt = ast.literal_eval(line[line.index("prompt [") + len("prompt "):])
    assert len(prompt) == train_math.PROMPT_LENGTH and "[BOS]" in prompt  # a question


SMALL = "dlmspec/math/small"  # the quickest math model (the build runs math/base)
TINY = {
    # sequential false: the math profiles' sequential rule starts at its own sizes
    "02_anchor_acceptance": dict(model=SMALL, n_samples=3, K=8, K_sweep=[8], n_train=32,
                                 n_bootstrap=50, n_codebooks=1, sequential=False),
    "03_win_condition": dict(model=SMALL, n_samples=3, K=8, n_train=32, n_repeats=1,
                             n_timed=1, n_bootstrap=50, n_codebooks=1,
                             sequential=False),
    "04_cluster_verification": dict(model=SMALL, n_samples=3, K=8, K_sweep=[8],
                                    n_permutations=50, n_bootstrap=50),
    "05_bounded_quality": dict(model=SMALL, n_samples=2, K=8, thresholds=[0.9],
                               n_bootstrap=50, sequential=False),
    "06_conditional": dict(model=SMALL, n_samples=3, K=8, n_train=32, n_bootstrap=50,
                           n_codebooks=1, sequential=False),
    "07_strong_model": dict(model=SMALL, large_model=SMALL, n_windows=4, n_positions=4,
                            batch_size=16, n_samples=3, n_tau=2, K=8, n_train=32,
                            n_bootstrap=50, n_codebooks=1, sequential=False),
    "08_information": dict(model=SMALL, n_samples=4, n_side=3, K=8, n_bootstrap=50),
    "09_trajectory_speculation": dict(model=SMALL, n_samples=4, n_sweep=1,
                                      thresholds=[0.9], n_repeats=1, n_bootstrap=50,
                                      gen_length=32, block_length=16),  # two blocks
}


@pytest.fixture(scope="module")
def tiny_math_draft(tmp_path_factory):
    """A local folder: a tiny random model with the math tokenizer (a draft
    that differs from math/small, which C4 needs)."""
    import torch

    from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion

    tok = MATH.tokenizer()
    path = tmp_path_factory.mktemp("math_draft")
    torch.manual_seed(1)
    DLMForMaskedDiffusion(DLMConfig(
        vocab_size=len(tok), hidden_size=8, intermediate_size=16, num_hidden_layers=1,
        num_attention_heads=2, max_position_embeddings=train_math.SEQ_LEN),
    ).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("stem", sorted(TINY))
def test_every_world_notebook_runs_in_the_math_world_at_a_tiny_size(
        stem, tmp_path, tiny_math_draft):
    """Every page's own code under -p world math (no page code may assume
    Brown), math/small the target and a tiny random draft, its verdict computed."""
    out = tmp_path / f"{stem}.ipynb"
    argv = [str(_nb(stem)), "-p", "world", "math", "-o", str(out)]
    if "draft" in run.declared_parameters(_nb(stem)):
        argv += ["-p", "draft", tiny_math_draft]
    for name, value in TINY[stem].items():
        argv += ["-p", name, str(value)]
    assert run.main(argv) == 0
    glued = claims.read_glued(out)
    registry = claims.load_registry()
    ids = [c for c, d in registry["claims"].items()
           if d["notebook"].endswith(stem + ".md")]
    for c in ids:  # the claim's verdict, from its rule on this world's values
        assert glued[f"{c.lower()}_verdict"] in claims.VERDICTS
        assert glued[f"{c.lower()}_verdict"] == claims.verdict(c, glued, registry)
    if stem == "06_conditional":  # the prompted side alone: nothing unconditional
        assert "c6_alpha_sid" in glued and "c6_same_verdict" not in glued
        assert not any(k.startswith("c6_uncond_") for k in glued)
