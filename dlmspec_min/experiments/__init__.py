"""Each claim's measurement as a function: the book's notebooks call these.

One module per page of the book (``models`` for the models page, ``c1`` ... for
the claims, ``trajectory`` for the related method). Each exposes one ``measure``
function that takes loaded models and the page's parameters and returns a small
result object: ``values`` (the claim values the page glues, keyed by their
glue names, plain scalars with their intervals) and the tables and arrays the
page draws. Verdicts stay with the page (``plumbing.claims.verdict`` on the
recorded values), so this folder imports nothing from ``plumbing``.
"""
