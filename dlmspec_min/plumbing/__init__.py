"""The book's plumbing: claims registry, parameters, runner, paper flow, provenance.

``claims`` (``book/claims.yml``, ``record``, verdicts), ``params`` (the
parameters cells' checks), ``prompts`` (what ``prompt_source`` means), ``run``
(``python -m dlmspec_min.plumbing.run``: one notebook with other parameters),
``seeds`` (the seed page's plan), ``paper`` (``make paper``), ``provenance``
(the execution fingerprint), ``bookexec`` (executing notebooks ahead of
Sphinx), ``calculator`` (the win-condition calculator page), ``mathjax`` and
``fetch`` (``python -m dlmspec_min.plumbing.fetch``: what ``make data``
fetches).
"""
