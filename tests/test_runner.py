"""The rerun command: parameter discovery, validation before any work, help."""

import os
import subprocess
import sys
import textwrap

import papermill
import pytest

from dlmspec_min.plumbing import params, run

NOTEBOOK = textwrap.dedent("""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
        format_version: 0.13
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---

    # A tiny notebook

    ```{code-cell} ipython3
    :tags: [parameters]

    model: str = "dlmspec/base"  # target model (registry name or folder)
    n_samples: int = 8  # sequences to decode
    threshold: float = 0.9  # Fast-dLLM confidence threshold
    K_sweep: list = [16, 64]  # cluster counts to sweep
    ```

    ```{code-cell} ipython3
    from dlmspec_min.plumbing.params import validate_all
    from dlmspec_min.plumbing.claims import record
    validate_all(dict(model=model, n_samples=n_samples, threshold=threshold,
                      K_sweep=K_sweep))
    record("doubled", 2 * n_samples)
    ```
    """)


@pytest.fixture
def notebook(tmp_path):
    path = tmp_path / "99_tiny.md"
    path.write_text(NOTEBOOK)
    return path


@pytest.fixture
def no_execution(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("papermill must not run for a bad parameter")

    monkeypatch.setattr(papermill, "execute_notebook", refuse)


def test_declared_parameters_are_read_with_types_and_help(notebook):
    declared = params.notebook_parameters(notebook)
    assert list(declared) == ["model", "n_samples", "threshold", "K_sweep"]
    assert declared["n_samples"]["inferred_type_name"] == "int"
    assert "sequences" in declared["n_samples"]["help"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["-p", "n_sampels", "3"],
            "unknown parameter 'n_sampels'; this notebook takes:",
        ),
        (["-p", "n_samples", "zero"], "parameter n_samples: cannot read 'zero' as int"),
        (["-p", "n_samples", "0"], "parameter n_samples=0 must be an integer >= 1"),
        (
            ["-p", "threshold", "1.5"],
            "parameter threshold=1.5 must be a number in (0, 1]",
        ),
        (
            ["-p", "model", "nope/model"],
            "parameter model='nope/model' must be a registered model",
        ),
        (["-p", "K_sweep", "[1]"], "parameter K_sweep=[1] must be a non-empty list"),
    ],
)
def test_bad_parameter_is_one_line_and_exit_2(
    notebook, no_execution, capsys, argv, message
):
    assert run.main([str(notebook), *argv]) == run.EXIT_BAD_PARAMETER
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err


def test_parameters_file_is_validated(notebook, tmp_path, no_execution, capsys):
    profile = tmp_path / "p.yaml"
    profile.write_text("n_samples: -4\n")
    assert run.main([str(notebook), "-f", str(profile)]) == run.EXIT_BAD_PARAMETER
    assert "n_samples=-4" in capsys.readouterr().err


def test_help_lists_the_notebook_parameters(notebook, capsys):
    assert run.main([str(notebook), "--help"]) == 0
    out = capsys.readouterr().out
    for name in ["model", "n_samples", "threshold", "K_sweep"]:
        assert name in out
    assert "Fast-dLLM confidence threshold" in out


def test_cli_fails_fast_as_a_process(notebook):
    proc = subprocess.run(
        [sys.executable, "-m", "dlmspec_min.plumbing.run", str(notebook),
         "-p", "seed", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: unknown parameter 'seed'")


def test_execution_records_values(notebook, tmp_path):
    out = tmp_path / "out.ipynb"
    assert run.main([str(notebook), "-p", "n_samples", "5", "-o", str(out)]) == 0
    from dlmspec_min.plumbing.claims import read_glued

    assert read_glued(out)["doubled"] == 10


def test_a_parameter_papermill_cannot_read_is_an_error(tmp_path):
    """papermill skips `x: int = 0  # help (0 = all)`; the runner must not."""
    nb = tmp_path / "nb.md"
    nb.write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n"
        "    format_name: myst\nkernelspec:\n  display_name: Python 3\n"
        "  language: python\n  name: python3\n---\n\n"
        "```{code-cell} ipython3\n:tags: [parameters]\n\n"
        "n_samples: int = 4  # samples\nn_positions: int = 0  # per window (0 = all)\n"
        "```\n"
    )
    with pytest.raises(ValueError, match="n_positions"):
        params.notebook_parameters(nb)
    nb.write_text(nb.read_text().replace("(0 = all)", "(0: all)"))
    assert list(params.notebook_parameters(nb)) == ["n_samples", "n_positions"]


@pytest.mark.parametrize(
    "content, message",
    [
        ("seed: [1, 2\n", "is not valid YAML at line"),
        ("- n_samples\n- 3\n", "must be a mapping of parameter names to values"),
        ("just a string\n", "not a str"),
        ("n_samples: 2.5\n", "parameter n_samples: 2.5 is a float, but the notebook "
                             "declares int"),
        ("model: 5\n", "parameter model: 5 is a int, but the notebook declares str"),
        ("threshold: true\n", "parameter threshold: True is a bool"),
        ("K_sweep: 16\n", "parameter K_sweep: 16 is a int, but the notebook declares"),
    ],
)
def test_bad_parameters_file_is_one_line_naming_it(
    notebook, tmp_path, no_execution, capsys, content, message
):
    profile = tmp_path / "profile.yaml"
    profile.write_text(content)
    assert run.main([str(notebook), "-f", str(profile)]) == run.EXIT_BAD_PARAMETER
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err
    if "YAML" in message or "mapping" in message or "not a str" in message:
        assert str(profile) in err


@pytest.mark.parametrize(
    "content", [b"\xff\xfe\x00binary", b"---\njupytext: [unclosed\n---\n"]
)
def test_unreadable_notebook_is_one_line(tmp_path, no_execution, capsys, content):
    bad = tmp_path / "bad.md"
    bad.write_bytes(content)
    assert run.main([str(bad)]) == run.EXIT_BAD_PARAMETER
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(bad) in err, err


def test_a_folder_is_no_notebook(tmp_path, no_execution, capsys):
    assert run.main([str(tmp_path)]) == run.EXIT_BAD_PARAMETER
    assert "no notebook" in capsys.readouterr().err


def test_a_failing_run_leaves_no_output_that_passes_for_done(tmp_path, capsys):
    nb = tmp_path / "98_fails.md"
    nb.write_text(NOTEBOOK.replace('record("doubled", 2 * n_samples)',
                                   'record("doubled", 2 * n_samples)\n'
                                   'raise RuntimeError("stop here")'))
    out = tmp_path / "out.ipynb"
    assert run.main([str(nb), "-o", str(out)]) == 1
    assert not out.exists()
    err = capsys.readouterr().err
    assert "RuntimeError: stop here" in err and "out.partial.ipynb" in err
    assert (tmp_path / "out.partial.ipynb").exists()
    # a later successful run replaces nothing half-written: it writes out.ipynb
    nb.write_text(NOTEBOOK)
    assert run.main([str(nb), "-o", str(out)]) == 0
    assert out.exists() and not (tmp_path / "out.partial.ipynb").exists()


NB03 = run.REPO_ROOT / "notebooks" / "03_win_condition.md"


def test_parameters_that_disagree_are_one_line_before_any_work(
    tmp_path, no_execution, capsys
):
    def err_of(*argv):
        assert run.main([str(NB03), *argv]) == run.EXIT_BAD_PARAMETER
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0, err
        return err

    assert "gen_length=50 must be a multiple of block_length=16" in err_of(
        "-p", "gen_length", "50", "-p", "block_length", "16")
    # the default block_length (16) must divide an overridden gen_length, too
    assert "multiple of block_length=16" in err_of("-p", "gen_length", "40")
    other = tmp_path / "other-vocabulary"
    other.mkdir()
    (other / "config.json").write_text('{"vocab_size": 99}')
    assert "has a vocabulary of 99 tokens" in err_of("-p", "draft", str(other))
    assert "takes 256 positions" in err_of("-p", "gen_length", "512")


def test_relations_hold_for_every_notebook_default():
    for nb in sorted((run.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.md")):
        run.check_relations(params.notebook_parameters(nb), {})


def test_later_parameter_files_win_and_shared_files_skip_unknown_names(
    notebook, tmp_path, monkeypatch
):
    seen = {}

    def fake_execute(source, output, parameters, **kw):
        seen.update(parameters)
        raise SystemExit(0)  # stop before any output is read

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    first, second, shared = (tmp_path / f"{n}.yaml" for n in ("a", "b", "s"))
    first.write_text("n_samples: 4\nthreshold: 0.5\n")
    second.write_text("n_samples: 6\n")
    shared.write_text("threshold: 0.7\nn_windows: 3\nnot_a_parameter: 1\n")
    with pytest.raises(SystemExit):
        run.main([str(notebook), "-f", str(first), "-f", str(second),
                  "-F", str(shared), "-p", "K_sweep", "[8]"])
    assert seen == {"n_samples": 6, "threshold": 0.7, "K_sweep": [8]}


def test_a_shared_file_is_validated_and_must_exist(notebook, tmp_path, no_execution,
                                                   capsys):
    shared = tmp_path / "s.yaml"
    shared.write_text("n_samples: 0\nn_windows: 3\n")
    assert run.main([str(notebook), "-F", str(shared)]) == run.EXIT_BAD_PARAMETER
    assert "n_samples=0" in capsys.readouterr().err
    missing = str(tmp_path / "none.yaml")
    assert run.main([str(notebook), "-F", missing]) == run.EXIT_BAD_PARAMETER
    assert f"no parameters file {missing}" in capsys.readouterr().err


def test_no_notebook_takes_a_parameter_named_like_a_profile_s_estimate():
    for nb in sorted((run.REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.md")):
        assert run.ESTIMATE_KEY not in params.notebook_parameters(nb), nb.name


def test_a_profile_s_estimate_is_data_checked_but_never_a_parameter(
    notebook, tmp_path, monkeypatch, capsys
):
    seen = {}

    def fake_execute(source, output, parameters, **kw):
        seen.update(parameters)
        raise SystemExit(0)

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    profile = tmp_path / "p.yaml"
    profile.write_text("estimate:\n  gpu_memory_gb: 60\n  minutes: 30\nn_samples: 3\n")
    assert run.estimate_in(profile) == {"gpu_memory_gb": 60, "minutes": 30}
    with pytest.raises(SystemExit):
        run.main([str(notebook), "-f", str(profile), "-o", str(tmp_path / "o.ipynb")])
    assert seen == {"n_samples": 3}
    capsys.readouterr()
    profile.write_text("estimate:\n  gpu_memory_gb: lots\n  minutes: 30\n")
    assert run.main([str(notebook), "-f", str(profile)]) == run.EXIT_BAD_PARAMETER
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "estimate must map gpu_memory_gb and minutes" in err


def test_kernels_ignore_tqdm_s_ipywidgets_warning_and_nothing_else():
    """What the book's kernels inherit (``run.kernel_environment``): tqdm's
    'IProgress not found' warning (huggingface_hub imports tqdm.auto) is filtered,
    every other warning still shows, and a reader's own filters are kept."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONWARNINGS": "error::FutureWarning"}
    run.kernel_environment(env)
    run.kernel_environment(env)  # twice: the filter is added once
    assert env["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    assert env["PYTHONWARNINGS"] == f"error::FutureWarning,{run.QUIET_WARNINGS}"
    code = ("import warnings; warnings.warn('IProgress not found. Please update')\n"
            "warnings.warn('another warning')\n"
            "try:\n    warnings.warn('x', FutureWarning)\n"
            "except FutureWarning:\n    print('kept')")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert "IProgress" not in out.stderr and "another warning" in out.stderr
    assert out.stdout.strip() == "kept"
