"""The catalogue of worlds: every fact about a world, in one entry (issue 47).

A *world* is what a claim is measured in (SPEC.md section 6, DERIVED): a text
source, its ladder of models, its prompts and its default decode. This module
holds one ``Entry`` per world and nothing else; it imports no torch and nothing
of the package, so parameter checks, the book's extensions and the training
scripts read it cheaply. Everything that used to restate a world reads it:

- ``worlds.get_world(name)`` builds the world (``worlds.prose``, ``worlds.gsm``);
- the runner's ``-p world NAME`` injects ``Entry.defaults`` beneath the
  notebook's profile, which holds only the sizes that differ
  (``notebooks/profiles/<profile>/<notebook>.yaml``);
- ``plumbing.params`` checks ``world``, its models, prompts and layout;
- ``plumbing.claims`` and the dashboard take the book's worlds (``BOOK``) and
  their glue suffixes;
- ``training.train_math --world NAME`` trains a math world's ladder into its
  ``folder`` with its grammar and layout;
- the regime page's settings name a world (``book/claims.yml``).

Add a world by adding an entry (and training its models); ``tests/test_catalogue.py``
checks that every entry is complete and buildable.

    from dlmspec_min import catalogue
    catalogue.get("math_order").defaults   # {'world': 'math_order', 'model': ...}
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT = "prose"  # the notebooks' own world: their parameters cells' defaults are
# its values (each page's own sizes and decode; nothing is injected for it)
ROLES = ("draft", "target", "strong")
EMBEDDED = "dlmspec/"  # the project's own models: dlmspec/<folder>/<size>
# a notebook parameter naming a model -> the ladder role it takes from its world
MODEL_PARAMETERS = {"model": "target", "draft": "draft", "large_model": "strong",
                    "small_model": "draft"}


@dataclass(frozen=True)
class Entry:
    """One world. ``kind`` says which module of ``worlds/`` builds it (``prose``,
    ``math``); ``grammar`` (math) names the ``texts.problems`` dial set that writes
    its problems. ``folder``: where its ladder lives under ``data/models/`` (``""``:
    the folder itself, the prose ladder); ``sizes``: its rungs, trained or not
    (a page that needs a missing rung names it and the command that trains
    it), and ``draft``, ``target``, ``strong`` the rungs of the claims' roles.
    ``prompt_source`` .. ``K``: the world's default decode and prompts, the
    values a claim page runs at in this world unless told otherwise.
    ``profile``: the folder of ``notebooks/profiles/`` whose files hold this
    world's sizes per notebook. ``book``: the book runs every claim page in it
    (a column of the dashboard). ``history``: what was decided, and when."""

    name: str
    title: str
    kind: str
    folder: str
    prompt_source: str
    prompt_length: int
    gen_length: int
    block_length: int
    temperature: float
    K: int
    threshold: float = 0.9
    grammar: str | None = None
    sizes: tuple[str, ...] = ("small", "base", "large")
    draft: str = "small"
    target: str = "base"
    strong: str = "large"
    tokenizer: str = "tokenizer"
    profile: str | None = None
    book: bool = False
    context_free: bool = True
    order_in_blocks: bool = False
    history: str = ""

    @property
    def suffix(self) -> str:
        """The ending of this world's glue names on a claim page (``c2_alpha_sid``
        in prose, ``c2_alpha_sid_math`` in math)."""
        return "" if self.name == DEFAULT else f"_{self.name}"

    def model(self, size: str) -> str:
        """The name of one rung: ``dlmspec/<folder>/<size>``."""
        return EMBEDDED + (f"{self.folder}/{size}" if self.folder else size)

    @property
    def ladder(self) -> tuple[str, ...]:
        return tuple(self.model(s) for s in self.sizes)

    def role(self, role: str) -> str:
        """The model of a claim's role: ``draft``, ``target`` or ``strong``."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        return self.model(getattr(self, role))

    @property
    def prefix(self) -> str:
        """What every rung's name starts with (prose: its rungs are listed whole)."""
        return EMBEDDED + f"{self.folder}/" if self.folder else ""

    @property
    def decode(self) -> dict:
        return dict(gen_length=self.gen_length, block_length=self.block_length,
                    threshold=self.threshold)

    @property
    def layout(self) -> tuple[int, int]:
        """(prompt_length, gen_length): the rows its models were trained on."""
        return self.prompt_length, self.gen_length

    @property
    def defaults(self) -> dict:
        """The parameters a claim page takes from this world (``-p world NAME``),
        by name; a notebook receives those it declares."""
        out = {"world": self.name}
        out.update({p: self.role(r) for p, r in MODEL_PARAMETERS.items()})
        out.update(prompt_source=self.prompt_source, prompt_length=self.prompt_length,
                   temperature=self.temperature, K=self.K, **self.decode)
        return out

    def shares_rows(self, other: Entry) -> bool:
        """Whether ``other``'s models read this world's rows: one tokenizer, one
        layout, one kind (so any of its rungs may stand in this world's run)."""
        return (self.kind, self.tokenizer, self.layout) == (
            other.kind, other.tokenizer, other.layout)

    @property
    def train_command(self) -> str:
        """How to train one of its rungs (``{size}`` left to fill)."""
        if self.kind == "math":
            return (f"python -m dlmspec_min.training.train_math --world {self.name} "
                    "--size {size}")
        return "python -m dlmspec_min.training.train --size {size}"


_MATH = dict(kind="math", prompt_source="questions", prompt_length=32, gen_length=32,
             block_length=32, temperature=0.0, K=32, tokenizer="math/tokenizer",
             profile="math", context_free=False, order_in_blocks=True)

ENTRIES: tuple[Entry, ...] = (
    Entry(name="prose", title="Brown prose", kind="prose", folder="",
          prompt_source="bos", prompt_length=16, gen_length=48, block_length=16,
          temperature=1.0, K=256, book=True,
          history="The Brown corpus; ~1.1 tokens per forward under the threshold "
                  "rule. K 256: 8,192 tokens, about 32 per cluster."),
    Entry(name="math", title="grade-school math, free solutions", folder="math_free",
          grammar="FREE", book=True, **_MATH,
          history="Generated grade-school problems in GSM8K's shape (rows of 32 + 32, "
                  "one block of 32, Fast-dLLM's threshold 0.9, greedy; K 32: 826 "
                  "tokens, as many per cluster as prose). The claims' math world "
                  "since 2026-12-06 (issue 42): the free grammar, the ladder trained "
                  "to the paper's regime. From 2026-12-04 to 12-06 it was "
                  "math_narrow."),
    Entry(name="math_narrow", title="grade-school math, narrow solutions",
          folder="math", grammar="NARROW", **_MATH,
          history="The narrow grammar (the pilot's choice of 2026-12-04, issue 34): "
                  "the claims' math world until 2026-12-06; a point of the regime "
                  "page and a dated record on the models page."),
    Entry(name="math_order", title="grade-school math, free operand order",
          folder="math_order", grammar="ORDER", **_MATH,
          history="Content freedom alone (problems.ORDER): a setting of the regime "
                  "page (issue 42); small and base trained, large not (C7 in this "
                  "world says how to train it)."),
    Entry(name="math_chains", title="grade-school math, chained steps",
          folder="math_chains", grammar="CHAINS",
          **{**_MATH, "prompt_length": 48, "gen_length": 64},
          history="3-4 chained steps, each result used by the next (problems.CHAINS), "
                  "rows of 48 + 64 decoded in two blocks of 32: a setting of the "
                  "regime page (issue 46); small trained, base and large not yet."),
)
WORLDS: dict[str, Entry] = {e.name: e for e in ENTRIES}
NAMES: tuple[str, ...] = tuple(WORLDS)
BOOK: tuple[str, ...] = tuple(e.name for e in ENTRIES if e.book)  # DEFAULT first


def get(name: str) -> Entry:
    """The entry of the world called ``name``; a clear error for any other name."""
    if name not in WORLDS:
        raise ValueError(f"unknown world {name!r}; use one of {', '.join(NAMES)}")
    return WORLDS[name]


def of_model(name: str) -> Entry | None:
    """The world whose ladder ``name`` (``dlmspec/...``) belongs to, else None."""
    for e in ENTRIES:
        if name in e.ladder or (e.prefix and name.startswith(e.prefix)):
            return e
    return None


def rungs() -> tuple[str, ...]:
    """Every rung of every world's ladder (``dlmspec/<folder>/<size>``), trained
    or not: the names a page may give a model parameter besides the decoder's
    (``decoding.denoisers.embedded_models``: those on this machine)."""
    return tuple(m for e in ENTRIES for m in e.ladder)
