"""How a page's tables read: one number format for every table of the book.

A notebook calls ``reader_tables()`` once, in its setup cell. From then on a
pandas table it shows as its cell's output (HTML) writes a missing value (NaN)
as "not measured", an infinite one as "unbounded", and every other float the
way the book's prose and dashboard do (``measures.stats.with_interval``: four
significant digits). The data themselves are untouched; only their display
changes, and only in that kernel.
"""

from __future__ import annotations

import math

import numpy as np

from ..measures.stats import NOT_MEASURED, with_interval


def cell(value) -> str:
    """One table cell as a reader sees it."""
    if isinstance(value, float):
        if math.isfinite(value) and value != 0 and (abs(value) < 1e-3
                                                     or abs(value) >= 1e5):
            return f"{value:.3g}"
        return with_interval(value)
    return str(value)


def table_html(frame) -> str:
    """A DataFrame (or Series) as HTML in the book's number format."""
    import pandas as pd

    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    mixed = [c for c, t in frame.dtypes.items() if t is np.dtype(object)]
    if mixed:  # floats among strings: the same words and digits
        frame = frame.copy()
        for c in mixed:
            frame[c] = frame[c].map(lambda v: cell(v) if isinstance(v, float) else v)
    return frame.to_html(na_rep=NOT_MEASURED, float_format=cell,
                         classes="dataframe reader-table", border=0)


def reader_tables(shell=None) -> None:
    """Show this kernel's DataFrames and Series in the book's number format
    (no-op outside IPython)."""
    import pandas as pd

    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython ships with the book
            return
        shell = get_ipython()
    if shell is None:
        return
    html = shell.display_formatter.formatters["text/html"]
    html.for_type(pd.DataFrame, table_html)
    html.for_type(pd.Series, table_html)
