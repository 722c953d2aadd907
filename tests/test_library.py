"""The decoder as a library: its public API, the core install and the wheel.

``pip install .`` installs the core requirements only (pyproject.toml's
``dependencies``); everything else is an extra. These tests check that

- ``dlmspec_min.decoding`` exports a documented ``__all__`` (every name has a
  docstring that names each of its parameters) and loads lazily;
- every import of ``decoding/`` (read with ``ast``, the ones inside functions
  included) is the standard library, the package itself, or a module of a
  distribution in the dependency closure of the core requirements, read from
  the installed metadata;
- the wheel lists only the core requirements without an extra marker and
  holds the decoding package and ``py.typed``;
- a fresh virtual environment with only torch and that wheel loads an
  embedded model by folder and decodes it, and holds nothing but the core's
  closure (transformers' optional packages, which it imports only when they
  happen to be installed, are absent there).
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata as md
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
import torch

import dlmspec_min.decoding as decoding
from dlmspec_min.decoding import files

ROOT = Path(__file__).resolve().parents[1]
DECODING = ROOT / "dlmspec_min" / "decoding"
SMALL = ROOT / "data" / "models" / "small"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CORE = PROJECT["dependencies"]
TORCH_PIN = "torch==2.13.0"


def _name(requirement: str) -> str:
    return _canonical(re.split(r"[=<>!~\[ ;(]", requirement.strip(), maxsplit=1)[0])


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --- the public API ---------------------------------------------------------------

EXPECTED_API = {
    "generate", "encode_prompts", "DecodeConfig", "DecodeResult", "SpecTrace",
    "Denoiser",
    "MDLMDenoiser", "load_denoiser", "known_model_names", "ModelNotAvailableError",
    "DLMConfig", "DLMForMaskedDiffusion",
}


def test_all_is_the_deliberate_short_list():
    assert set(decoding.__all__) == EXPECTED_API
    assert len(decoding.__all__) == len(set(decoding.__all__))


def _documented_parameters(obj) -> list[str]:
    """The parameters a caller passes: a function's, or a class's own __init__'s."""
    if inspect.isclass(obj):
        init = obj.__dict__.get("__init__")
        if init is None and "__dataclass_fields__" in obj.__dict__:
            init = obj.__init__  # a dataclass's generated __init__: its fields
        if init is None:
            return []  # inherits its constructor (an exception)
        target = init
    else:
        target = obj
    params = inspect.signature(target).parameters.values()
    return [p.name for p in params if p.name != "self"]


@pytest.mark.parametrize("name", sorted(EXPECTED_API))
def test_every_exported_name_is_documented(name):
    obj = getattr(decoding, name)
    doc = inspect.getdoc(obj) or ""
    assert len(doc.split()) >= 10, f"{name} has no real docstring"
    assert obj.__module__.startswith("dlmspec_min.decoding."), obj.__module__
    for param in _documented_parameters(obj):
        shown = f"**{param}" if param == "kwargs" else param
        assert re.search(rf"(^|\s){re.escape(shown)}\b", doc, re.M), (
            f"{name}'s docstring does not document its parameter {param!r}"
        )
    if "Parameters" in doc or _documented_parameters(obj):
        assert "Parameters\n----------" in doc, (
            f"{name}: document parameters in the NumPy style (a Parameters section)"
        )


def test_internal_names_stay_importable_but_unexported():
    from dlmspec_min.decoding.speculate import decode_trajectory
    from dlmspec_min.decoding.steps import transfer_index

    assert callable(transfer_index) and callable(decode_trajectory)
    assert "transfer_index" not in decoding.__all__
    with pytest.raises(AttributeError, match="no attribute 'transfer_index'"):
        decoding.transfer_index  # noqa: B018
    assert EXPECTED_API <= set(dir(decoding))


def test_importing_the_package_loads_nothing_heavy():
    """The names load on first access: importing the package (as the runner's
    argument checks do) does not import torch."""
    code = ("import sys, dlmspec_min.decoding as d; "
            "assert 'torch' not in sys.modules, 'torch loaded'; "
            "d.DecodeConfig; assert 'torch' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_py_typed_ships_with_the_package():
    assert (ROOT / "dlmspec_min" / "py.typed").is_file()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in data["tool"]["setuptools"]["package-data"]["dlmspec_min"]


# --- the core requirements cover the decoder's imports ----------------------------


def _imports(path: Path) -> set[str]:
    """Top-level modules a file imports (absolute imports only), lazy ones too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _core_closure() -> set[str]:
    """Canonical names of the core requirements and everything they require,
    following only requirements without a marker that excludes them here (an
    extra is never asked for)."""
    from packaging.requirements import Requirement

    closure, todo = set(), [Requirement(r) for r in CORE]
    while todo:
        req = todo.pop()
        name = _canonical(req.name)
        if name in closure:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        closure.add(name)
        try:
            requires = md.requires(req.name) or []
        except md.PackageNotFoundError:
            pytest.fail(f"{req.name}, required by the core, is not installed")
        todo.extend(Requirement(r) for r in requires)
    return closure


def test_core_closure_provides_every_import_of_the_decoder():
    closure = _core_closure()
    providers = md.packages_distributions()  # top-level module -> distributions
    imports = set().union(*(_imports(f) for f in DECODING.glob("*.py")))
    assert {"torch", "transformers", "numpy"} <= imports  # the parse saw them
    outside = {}
    for module in sorted(imports):
        if module in sys.stdlib_module_names or module in ("dlmspec_min", "__future__"):
            continue
        dists = {_canonical(d) for d in providers.get(module, [])}
        if not dists & closure:
            outside[module] = sorted(dists) or "not installed"
    assert not outside, (
        f"decoding/ imports modules outside the core requirements' closure: "
        f"{outside}; add their distribution to pyproject.toml's dependencies"
    )
    # the extras are not part of it: the test would notice a leak
    assert not {"jupyter-book", "papermill", "accelerate", "pytest"} & closure


def test_the_public_api_loads_an_embedded_model_and_decodes_it():
    denoiser, tokenizer = decoding.load_denoiser("dlmspec/small")
    by_folder, _ = decoding.load_denoiser(SMALL)
    ids = tokenizer.encode("The jury said", add_special_tokens=False)
    prompt = torch.tensor([[tokenizer.bos_token_id, *ids]])
    config = decoding.DecodeConfig(gen_length=16, block_length=8, rule="threshold",
                                   cache="dual")
    out = decoding.generate(denoiser, prompt, config)
    assert isinstance(out, decoding.DecodeResult)
    assert out.generated.shape == (1, 16)
    assert not bool((out.generated == denoiser.mask_id).any())
    again = decoding.generate(by_folder, prompt, config)
    assert torch.equal(out.tokens, again.tokens)
    spec = decoding.generate(by_folder, prompt, decoding.DecodeConfig(
        gen_length=16, block_length=8, rule="threshold", cache="dual",
        speculate="trajectory"))
    assert torch.equal(spec.tokens, out.tokens)
    assert isinstance(spec.spec, decoding.SpecTrace)
    assert int(spec.nfe[0]) <= int(out.nfe[0])


# --- the wheel ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the sources (setuptools writes build/ and
    egg-info next to them) without build isolation, so offline."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "setup.py", "MANIFEST.in"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "dlmspec_min", src / "dlmspec_min",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "embedded"))
    for folder in files.SHIPPED_MODELS:  # what setup.py ships
        shutil.copytree(ROOT / "data" / "models" / folder,
                        src / "data" / "models" / folder)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
         "--no-build-isolation", "-w", str(out), str(src)],
        check=True, cwd=src,
    )
    (found,) = out.glob("dlmspec_min-*.whl")
    return found


def test_wheel_requires_only_the_core_and_holds_the_decoder(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = z.read(meta).decode()
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines()
                if line.startswith("Requires-Dist:")]
    unconditional = [r for r in requires if ";" not in r]
    assert sorted(unconditional) == sorted(CORE)
    extras = PROJECT["optional-dependencies"]
    conditional = sorted(r for r in requires if ";" in r)
    assert conditional == sorted(f'{d}; extra == "{e}"'
                                 for e, deps in extras.items() for d in deps)
    assert all(re.search(r'; extra == "\w+"$', r) for r in conditional)
    for f in DECODING.glob("*.py"):
        assert f"dlmspec_min/decoding/{f.name}" in names
    assert "dlmspec_min/py.typed" in names
    # the shipped models: loading's files, not the training logs, and nothing else
    shipped = {n.split("/embedded/", 1)[1] for n in names if "/embedded/" in n}
    expected = {f"{folder}/{f.name}"
                for folder in files.SHIPPED_MODELS
                for f in (ROOT / "data" / "models" / folder).iterdir()
                if f.name in files.SHIPPED_FILES}
    assert shipped == expected
    assert {"small/model.safetensors", "math_free/small/model.safetensors",
            "small/tokenizer.json", "math_free/small/tokenizer.json"} <= shipped
    assert wheel.stat().st_size < 8e6, f"the wheel is {wheel.stat().st_size} bytes"


def test_the_sdist_manifest_names_every_shipped_model():
    """MANIFEST.in carries setup.py's sources into an sdist (python -m build)."""
    manifest = (ROOT / "MANIFEST.in").read_text()
    for folder in files.SHIPPED_MODELS:
        assert re.search(rf"^recursive-include data/models/{folder} ", manifest, re.M)


# --- a fresh environment with the core only ---------------------------------------


def _pip_install(pip: list[str], what: str):
    run = subprocess.run([*pip, what], capture_output=True, text=True)
    if run.returncode:
        pytest.fail(
            f"pip could not install {what} into the fresh environment; it needs the "
            "package index make uses (PyPI, or the local mirror pip is configured "
            f"with). pip said: {run.stderr.strip()[-1200:]}"
        )


def _readme_example() -> str:
    """The Python block of README's library section, as a reader copies it."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using the decoder as a library", 1)[1].split("\n## ", 1)[0]
    (example,) = re.findall(r"```python\n(.*?)```", section, re.S)
    assert "from dlmspec_min.decoding import" in example
    return example


def test_a_fresh_core_environment_runs_the_readme_example(wheel, tmp_path):
    """pip install torch==2.13.0 (first, resolved as make resolves it: the CPU
    build), then the wheel, into an empty venv away from the clone; there the
    README's example runs as written, its models found by name inside the
    installed package: 40-90 s here, with pip's cache. Needs the package index
    make needs (PyPI, or the local mirror pip is configured with); without one
    it fails and says so."""
    env_dir = tmp_path / "core"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _pip_install(pip, TORCH_PIN)  # first: an unpinned resolve may pick a CUDA build
    _pip_install(pip, str(wheel))
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DLMSPEC_DATA", "PYTHONPATH")}
    env["OMP_NUM_THREADS"] = "1"
    example = _readme_example()
    run = subprocess.run([str(py), "-c", example], capture_output=True, text=True,
                         cwd=away, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    # the same output as this environment's run of the same block
    here = subprocess.run([sys.executable, "-c", example], capture_output=True,
                          text=True, cwd=away, env=env)
    assert here.returncode == 0, here.stderr[-2000:]
    assert run.stdout == here.stdout
    assert "#### 32" in run.stdout  # the math model answered the first question
    check = """
import importlib.metadata as md, importlib.util, json
import dlmspec_min.decoding as d
from dlmspec_min.decoding import files
try:
    d.load_denoiser("dlmspec/base")
    refused = ""
except d.ModelNotAvailableError as e:
    refused = str(e)
present = [m for m in ("accelerate", "scipy", "PIL", "jupyter_core", "pandas",
                       "datasets", "papermill", "pytest")
           if importlib.util.find_spec(m) is not None]
print(json.dumps({"where": str(files.models_dir()), "refused": refused,
                  "present": present, "module": d.__file__,
                  "dists": sorted(x.metadata["Name"] for x in md.distributions())}))
"""
    run = subprocess.run([str(py), "-c", check], capture_output=True, text=True,
                         cwd=away, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert str(env_dir) in got["module"] and str(ROOT) not in got["module"]
    assert got["where"].endswith("dlmspec_min/decoding/embedded")
    assert "not shipped with the installed package" in got["refused"]
    assert "DLMSPEC_DATA" in got["refused"]
    assert got["present"] == [], f"optional packages in a core install: {got}"
    seeded = {"pip", "setuptools"}  # what venv puts in (torch requires setuptools)
    installed = {_canonical(d) for d in got["dists"]} - seeded
    expected = (_core_closure() | {"dlmspec-min"}) - seeded
    assert installed == expected, sorted(installed ^ expected)


def test_core_requirements_import_in_this_environment():
    for req in CORE:
        module = {"huggingface-hub": "huggingface_hub"}.get(_name(req), _name(req))
        importlib.import_module(module)


def test_the_readme_example_runs():
    """README's library section: its Python example decodes as written, in the
    clone (the wheel's run is the fresh environment's test above)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", _readme_example()],
                         capture_output=True, text=True, cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "tensor([" in run.stdout  # the forwards it took
    assert "#### 32" in run.stdout and "#### 27" in run.stdout  # math's answers


# --- misuse: one line naming the argument, before any forward -----------------------


@pytest.fixture(scope="module")
def small():
    return decoding.load_denoiser("dlmspec/small")


def _no_forward(denoiser):
    """The denoiser, with every forward refused: a check that runs after one
    fails the test instead of the check."""
    import copy

    spy = copy.copy(denoiser)

    def refuse(*_args, **_kwargs):
        raise AssertionError("a forward ran before the inputs were checked")

    spy.logits = spy.prefill = spy.logits_window = refuse
    return spy


CONFIG = decoding.DecodeConfig(gen_length=8, rule="threshold", cache="dual")


@pytest.mark.parametrize("ids, match", [
    ([[2, 8192]], r"^prompt holds token id 8192, outside the denoiser's vocabulary "
                  r"\[0, 8192\)"),
    ([[2, -1]], r"^prompt holds token id -1"),
    ([[]], r"^prompt is empty \(shape \(1, 0\)\)"),
])
def test_bad_prompts_are_refused_before_a_forward(small, ids, match):
    den, _ = small
    with pytest.raises(ValueError, match=match):
        decoding.generate(_no_forward(den), torch.tensor(ids, dtype=torch.long), CONFIG)


def test_a_batch_of_no_rows_and_bad_init_ids_are_refused(small):
    den, _ = small
    with pytest.raises(ValueError, match="no rows"):
        decoding.generate(_no_forward(den), torch.zeros(0, 3, dtype=torch.long), CONFIG)
    init = torch.full((1, 8), den.mask_id)
    init[0, 3] = 9000
    with pytest.raises(ValueError, match=r"^init holds token id 9000"):
        decoding.generate(_no_forward(den), torch.tensor([[2]]), CONFIG, init=init)


def test_an_empty_prompt_decodes_when_asked_for(small):
    den, _ = small
    out = decoding.generate(den, torch.zeros(1, 0, dtype=torch.long), CONFIG,
                            allow_empty_prompt=True)
    assert out.generated.shape == (1, 8)


@pytest.mark.parametrize("what", ["tokenizer", "model", "tuple"])
def test_the_wrong_object_as_denoiser_is_named(small, what):
    den, tok = small
    wrong = {"tokenizer": tok, "model": den.model, "tuple": small}[what]
    with pytest.raises(TypeError, match=r"^denoiser must be a Denoiser") as e:
        decoding.generate(wrong, torch.tensor([[2, 5]]), CONFIG)
    assert ("unpack both" in str(e.value)) == (what == "tokenizer")
    assert "\n" not in str(e.value)


def test_empty_and_partial_model_folders_are_named(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(decoding.ModelNotAvailableError,
                       match=r"^name_or_path: the folder .*empty is empty; a saved "
                             r"model holds config.json"):
        decoding.load_denoiser(empty)
    only_tokenizer = tmp_path / "tok"
    shutil.copytree(ROOT / "data" / "models" / "tokenizer", only_tokenizer)
    with pytest.raises(decoding.ModelNotAvailableError,
                       match=r"has no config.json \(it holds tokenizer.json"):
        decoding.load_denoiser(only_tokenizer)
    no_weights = tmp_path / "cfg"
    no_weights.mkdir()
    shutil.copy(SMALL / "config.json", no_weights / "config.json")
    with pytest.raises(decoding.ModelNotAvailableError,
                       match=r"has a config.json but no weights"):
        decoding.load_denoiser(no_weights)
    (no_weights / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}}))
    with pytest.raises(decoding.ModelNotAvailableError, match="but no weights"):
        decoding.load_denoiser(no_weights)  # an index whose shard is missing


def test_an_installed_package_names_the_models_it_does_not_ship(monkeypatch):
    monkeypatch.delenv("DLMSPEC_DATA", raising=False)
    monkeypatch.setattr(files, "_in_a_clone", lambda: False)
    assert files.models_dir() == files.PACKAGED and files.from_package()
    with pytest.raises(decoding.ModelNotAvailableError,
                       match=r"'dlmspec/base' is not shipped with the installed "
                             r"package \(it ships dlmspec/small, "
                             r"dlmspec/math_free/small\).*DLMSPEC_DATA"):
        decoding.load_denoiser("dlmspec/base")


# --- prompts ---------------------------------------------------------------------


def test_encode_prompts_left_pads_after_a_start_token(small):
    _, tok = small
    batch = decoding.encode_prompts(tok, ["The jury said", "It"])
    jury = tok.encode("The jury said", add_special_tokens=False)
    it = tok.encode("It", add_special_tokens=False)
    width = 1 + len(jury)
    assert batch.dtype == torch.long and batch.shape == (2, width)
    assert batch[0].tolist() == [tok.bos_token_id, *jury]
    assert batch[1].tolist() == ([tok.pad_token_id] * (width - 1 - len(it))
                                 + [tok.bos_token_id, *it])
    single = decoding.encode_prompts(tok, "The jury said")
    assert torch.equal(single, batch[:1])


def test_encode_prompts_is_the_math_models_trained_layout():
    from dlmspec_min.texts.tokenizer import BOS_ID, PAD_ID
    from dlmspec_min.training import train_math
    from dlmspec_min.worlds import get_world

    den, tok = decoding.load_denoiser("dlmspec/math_free/small")
    assert den.prompt_length == train_math.PROMPT_LENGTH == 32
    by_folder, _ = decoding.load_denoiser(ROOT / "data" / "models" / "math_free"
                                          / "small")
    assert by_folder.prompt_length == 32
    problems = get_world("math").problems(6)
    prompt = decoding.encode_prompts(tok, [p.question_text for p in problems],
                                     length=den.prompt_length)
    for row, p in zip(prompt.tolist(), problems, strict=True):  # written out by hand
        q = tok.encode(p.question_text, add_special_tokens=False)
        assert row == [PAD_ID] * (31 - len(q)) + [BOS_ID, *q]
    assert torch.equal(train_math.encode(tok, problems)[:, :32], prompt)  # training's
    assert decoding.load_denoiser("dlmspec/small")[0].prompt_length is None


@pytest.mark.parametrize("texts, kw, match", [
    ([], {}, "texts is empty"),
    (["a", 3], {}, r"texts must be strings; texts\[1\] is a int"),
    (["The jury said it all"], {"length": 3}, r"texts\[0\] takes \d+ tokens"),
    (["a"], {"length": 0}, "length must be a positive int"),
])
def test_encode_prompts_refuses_what_it_cannot_lay_out(small, texts, kw, match):
    _, tok = small
    with pytest.raises(ValueError, match=match):
        decoding.encode_prompts(tok, texts, **kw)
