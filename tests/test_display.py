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
