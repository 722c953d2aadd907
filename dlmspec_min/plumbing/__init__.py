"""The book's plumbing: claims registry, parameters, runner, paper flow, provenance.

``claims`` (``book/claims.yml``, ``record``, verdicts), ``params`` (the
parameters cells' checks), ``prompts`` (what ``prompt_source`` means), ``run``
(``python -m dlmspec_min.plumbing.run``: one notebook with other parameters),
``seeds`` (the seed page's plan), ``paper`` (``make paper``), ``provenance``
(the execution fingerprint), ``bookexec`` (executing notebooks ahead of
Sphinx), ``bookbuild`` (``make book``'s build), ``preflight`` (what this
machine cannot run, checked before a kernel starts), ``gpus`` (the visible
GPUs, or an injected list), ``gpu_plan`` (``make paper``'s GPUs per run and its
preflight table), ``interrupts`` (SIGINT and SIGTERM end every process a
command started), ``calculator`` (the win-condition calculator page), ``mathjax`` and
``fetch`` (``python -m dlmspec_min.plumbing.fetch``: what ``make data``
fetches).
"""
