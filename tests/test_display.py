"""The book's table format: missing and infinite values in words."""

import math

import pandas as pd

from dlmspec_min.plumbing import display


def test_a_table_says_not_measured_and_unbounded_and_keeps_four_digits():
    frame = pd.DataFrame({"alpha": [0.123456, math.nan, math.inf],
                          "mixed": ["a", math.nan, -math.inf],
                          "n": [1, 2, 3]}, index=["x", "y", "z"])
    html = display.table_html(frame)
    assert "NaN" not in html and "nan" not in html and "inf<" not in html
    assert html.count("not measured") == 2 and html.count("unbounded") == 2
    assert "0.1235" in html and ">3<" in html
    assert frame.loc["y", "mixed"] is math.nan or math.isnan(frame.loc["y", "mixed"])


def test_a_series_and_tiny_values():
    html = display.table_html(pd.Series([1e-6, 2.5e6], index=["a", "b"], name="v"))
    assert "1e-06" in html and "2.5e+06" in html


def test_reader_tables_registers_for_dataframes_and_series():
    class Formatter:
        def __init__(self):
            self.types = {}

        def for_type(self, t, f):
            self.types[t] = f

    class Shell:
        display_formatter = type("D", (), {"formatters": {"text/html": Formatter()}})()

    shell = Shell()
    display.reader_tables(shell)
    types = shell.display_formatter.formatters["text/html"].types
    assert types[pd.DataFrame] is display.table_html
    assert types[pd.Series] is display.table_html


def test_a_pasted_nan_or_inf_reads_in_words():
    import sys

    from dlmspec_min.paths import REPO_ROOT

    sys.path.insert(0, str(REPO_ROOT / "book" / "_ext"))
    import reader_text

    assert reader_text.in_words("nan") == "not measured"
    assert reader_text.in_words("0.5 [nan, inf]") == "0.5 [not measured, unbounded]"
    assert reader_text.in_words("-inf") == "minus unbounded"
    assert reader_text.in_words("NaN") == "not measured"
    for kept in ("financial", "info", "inference", "x_inf", "nano"):
        assert reader_text.in_words(kept) == kept


def test_a_pasted_estimate_and_interval_read_to_the_digits_the_interval_supports():
    import sys

    from docutils import nodes

    from dlmspec_min.paths import REPO_ROOT

    sys.path.insert(0, str(REPO_ROOT / "book" / "_ext"))
    import reader_text

    def pasted(text):
        return nodes.inline(text, text, classes=["pasted-text"])

    para = nodes.paragraph()
    para += [nodes.Text("–"), nodes.Text(")"),  # equal to later Texts: kept
             nodes.Text("alpha "), pasted("0.03656"), nodes.Text(" ("),
             pasted("0.008508"), nodes.Text("–"), pasted("0.0784"),
             nodes.Text("), verdict "), pasted("2"), nodes.Text(" ("), pasted("3"),
             nodes.Text("–"), pasted("4"), nodes.Text(")")]
    doc = nodes.document(None, None)
    doc += para
    assert reader_text.intervals(doc) == 1  # 2 (3–4) is no estimate in its interval
    assert para.astext() == "–)alpha 0.037 [0.009, 0.078], verdict 2 (3–4)"
