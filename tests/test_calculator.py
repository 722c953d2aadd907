"""The win-condition calculator's HTML (no browser: tests/test_browser.py runs it)."""

import json
import math
from html.parser import HTMLParser

import pytest

from dlmspec_min.plumbing import calculator, claims

VOID = {"input", "br", "img", "meta", "link", "hr"}
BUILD = {
    "tau_acc": 1.2345678901234567,
    "alpha": 0.0123456789012345,
    "alpha_hi": 0.05,
    "gamma": 17.25,
    "c": 0.3333333333333333,
    "n_anchors": 17.25,
    "delta": 0.71,
    "n_draft": 1,
    "n_acc": 23.5,
}


class Tree(HTMLParser):
    """Records every start tag with its attributes and checks that tags nest."""

    def __init__(self):
        super().__init__()
        self.stack, self.tags, self.errors = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


def _parse(text):
    tree = Tree()
    tree.feed(text)
    tree.close()
    return tree


def _paper():
    return calculator.paper_values(claims.load_registry())


def test_html_is_well_nested_and_has_every_input_output_and_both_buttons():
    tree = _parse(calculator.calculator_html(BUILD, _paper()))
    assert tree.errors == [] and tree.stack == []
    ids = {a.get("id") for _, a in tree.tags}
    for key in calculator.KEYS:
        assert f"calc-{key}" in ids
    for oid, _ in calculator.OUTPUTS:
        assert f"calc-{oid}" in ids
    assert len(ids - {None}) == sum(1 for _, a in tree.tags if "id" in a), "dup id"
    buttons = [a["data-values"] for t, a in tree.tags if t == "button"]
    assert sorted(buttons) == ["build", "paper"]
    scripts = [a["src"] for t, a in tree.tags if t == "script"]
    assert scripts == ["../_static/win_calculator.js"]


def test_values_round_trip_through_the_data_attributes_and_the_inputs():
    paper = _paper()
    tree = _parse(calculator.calculator_html(BUILD, paper))
    root = next(a for t, a in tree.tags if a.get("class") == calculator.CSS_CLASS)
    build_back = json.loads(root["data-build"])
    assert build_back == {k: float(v) for k, v in BUILD.items()}  # full precision
    assert json.loads(root["data-paper"]) == paper
    inputs = {a["name"]: a["value"] for t, a in tree.tags if t == "input"}
    assert {k: float(v) for k, v in inputs.items()} == build_back


def test_numpy_scalars_become_plain_json_numbers():
    np = pytest.importorskip("numpy")
    build = {k: np.float64(v) for k, v in BUILD.items()}
    tree = _parse(calculator.calculator_html(build, _paper()))
    root = next(a for t, a in tree.tags if a.get("class") == calculator.CSS_CLASS)
    assert json.loads(root["data-build"])["tau_acc"] == BUILD["tau_acc"]


def test_the_paper_values_come_from_the_registry():
    reg = claims.load_registry()
    paper = calculator.paper_values(reg)
    assert set(paper) == set(calculator.KEYS)
    tau = reg["checks"]["trajectory"]["paper"]["fast_dllm_tokens_per_step"]
    assert paper["tau_acc"] == tau
    assert paper["alpha"] == reg["claims"]["C2"]["paper_value"]
    # the asymptotic bar of the paper's own figures is its ~200x shortfall
    assert 150 < (1 - 1 / paper["tau_acc"]) / paper["alpha"] < 250


def test_a_registry_without_the_paper_entries_is_refused():
    reg = claims.load_registry()
    del reg["claims"]["C3"]["calculator_paper"]
    with pytest.raises(ValueError, match="calculator_paper"):
        calculator.paper_values(reg)


@pytest.mark.parametrize("key", calculator.KEYS)
def test_a_missing_key_is_refused(key):
    build = {k: v for k, v in BUILD.items() if k != key}
    with pytest.raises(ValueError, match=key):
        calculator.calculator_html(build, _paper())
    paper = {k: v for k, v in _paper().items() if k != key}
    with pytest.raises(ValueError, match=key):
        calculator.calculator_html(BUILD, paper)


@pytest.mark.parametrize("bad", [None, "x", math.nan, math.inf])
def test_a_measured_value_must_be_a_finite_number(bad):
    with pytest.raises(ValueError, match="alpha"):
        calculator.calculator_html({**BUILD, "alpha": bad}, _paper())


def test_unknown_keys_are_refused():
    with pytest.raises(ValueError, match="unknown"):
        calculator.calculator_html({**BUILD, "gama": 3.0}, _paper())
