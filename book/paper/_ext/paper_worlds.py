"""Sphinx extension of the paper-scale book: the claim pages' ``{claim-worlds}``
table (and the trajectory page's ``{check-worlds}`` and ``{decoder-rates}``
figure) belongs to the main book (its worlds, prose and math, measured by the
embedded models); here, where the profiles' models are the only world, it says
so in one line instead."""

from __future__ import annotations

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


class ClaimWorlds(SphinxDirective):
    optional_arguments = 1

    def run(self):
        claim = self.arguments[0] if self.arguments else "this claim"
        text = (f"{claim} in the book's worlds (Brown prose, generated math) is on the "
                "main book's page; this book measures the models its profiles name.")
        return [nodes.paragraph(text=text, classes=["claim-worlds-elsewhere"])]


class DecoderRates(SphinxDirective):
    optional_arguments = 1

    def run(self):
        text = ("Every decoder's tokens per forward in the book's worlds is on the "
                "main book's page; this run's are in the decoders table above.")
        return [nodes.paragraph(text=text, classes=["claim-worlds-elsewhere"])]


def setup(app):
    app.add_directive("claim-worlds", ClaimWorlds)
    app.add_directive("check-worlds", ClaimWorlds)  # its argument: the check
    app.add_directive("decoder-rates", DecoderRates)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
