"""The ``math`` world: generated grade-school word problems (SPEC.md section 6).

(The module is named after GSM8K, not ``math``, which would shadow the standard
library's module for a reader running files from this folder.)

Text source: ``texts.problems``, a seeded grammar of GSM8K-shaped problems, with
the dials ``problems.FREE`` (since 2026-12-06, issue 42: the narrow grammar whose
solutions open a sentence freely and write ``+`` and ``*`` in either operand
order; from 2026-12-04 to 12-06 the claims were measured in the narrow world,
``problems.NARROW``, kept as ``MATH_NARROW``); tokenizer: one piece per grammar
word, built from word counts, numbers spelled digit by digit
(``data/models/math/tokenizer``); roles:
exact, from the grammar. Every word the grammar writes is a number, a name, an
object, a symbol or a template word, and the grammar's word lists are disjoint,
so a word's role is a function of its spelling: numbers, names and objects are
content; template words are function words; symbols (``. , ? + - * / = ####``)
are punctuation (glue). A word outside the grammar's lists (a model may spell
one) counts as a function word. Prompts: held-out questions
(``problems.HELD_OUT_SEED``), left-padded with ``[PAD]`` to the world's
``prompt_length`` as in training. Ladder, layout and default decode: the
world's entry in ``dlmspec_min.catalogue`` (``math``: ``dlmspec/math_free/...``,
rows of 32 + 32, one block of 32, Fast-dLLM's threshold 0.9, greedy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import catalogue
from ..measures.tagger import CONTENT, FUNCTION, PUNCT, SPECIAL
from ..texts import problems as P
from ..training import train_math
from .world import World

ROLE_CLASS = {P.NUMBER: CONTENT, P.NAME: CONTENT, P.OBJECT: CONTENT,
              P.SYMBOL: PUNCT, P.WORD: FUNCTION}
_NAMES, _OBJECTS = frozenset(P.NAMES), frozenset(P.OBJECTS + P.CONTAINERS)


def word_role(word: str) -> str:
    """The grammar's role of one word, from its spelling."""
    if word.isdigit():
        return P.NUMBER
    if word in _NAMES:
        return P.NAME
    if word in _OBJECTS:
        return P.OBJECT
    if word in P.SYMBOLS:
        return P.SYMBOL
    return P.WORD


def token_roles(tokenizer, ids) -> list[str]:
    """Per token id: its word's role (``problems.ROLES``), or ``special``."""
    from ..texts.tokenizer import word_ids, words_of

    ids = [int(i) for i in ids]
    roles = [word_role(w) for w in words_of(tokenizer, ids)]
    return [SPECIAL if w < 0 else roles[w] for w in word_ids(tokenizer, ids)]


def word_classes(words) -> list[str]:
    """The math world's roles (``World.roles``): words -> their classes, exact."""
    return [ROLE_CLASS[word_role(w)] for w in words]


HEAD_SEED = "math-sid-head-{seed}"  # the SID head's training problems, per seed
COUNTS_SEED, COUNTS_PROBLEMS = "math-token-counts", 4096


@dataclass(frozen=True)
class MathWorld(World):
    """A math world: the grammar's ``dials`` (``problems.Dials``) write its problems,
    held-out and training alike; every math world shares the tokenizer."""

    @property
    def dials(self) -> P.Dials:
        """The grammar that writes its problems (the entry's ``grammar``)."""
        return getattr(P, self.entry.grammar)

    @property
    def prompt_length(self) -> int:
        """The row layout its models were trained on: ``prompt_length`` tokens of
        question, then ``decode["gen_length"]`` of solution."""
        return self.entry.prompt_length

    def tokenizer(self):
        from ..texts.tokenizer import load_tokenizer

        return load_tokenizer(train_math.tokenizer_dir())

    def default_roles(self):
        return word_classes

    def problems(self, n: int, split: str = "test") -> list[P.Problem]:
        """The first ``n`` held-out problems (``"unseen"``: of unseen templates)."""
        seed = P.UNSEEN_SEED if split == "unseen" else P.HELD_OUT_SEED
        return P.problems(seed, n, split, self.dials)

    def _held_out_problems(self, n: int, seed: int) -> list[P.Problem]:
        """The ``seed``-th n held-out problems (seed 0: the first n)."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        return self.problems((seed + 1) * n)[seed * n:]

    def _held_out(self, tokenizer, n: int, seed: int) -> torch.Tensor:
        """The ``seed``-th n held-out problems, encoded."""
        return train_math.encode(tokenizer, self._held_out_problems(n, seed),
                                 **self.layout)

    @property
    def layout(self) -> dict:
        """``prompt_length`` and ``gen_length`` of the world's rows."""
        return dict(prompt_length=self.prompt_length,
                    gen_length=self.decode["gen_length"])

    def answers(self, n, seed=0):
        """The answers (the ``####`` numbers) of the questions ``prompts`` gives."""
        return [p.answer for p in self._held_out_problems(n, seed)]

    def answer_correct(self, tokenizer, generated, answers):
        """(B,) 1.0 where the decode's first ``####`` number (cut at ``[EOS]``)
        equals the answer, 0.0 otherwise (no answer written counts as wrong)."""
        if len(generated) != len(answers):
            raise ValueError(f"{len(generated)} decodes but {len(answers)} answers")
        return np.array([float(train_math.answer_of(tokenizer, g) == a)
                         for g, a in zip(generated.tolist(), answers, strict=True)])

    def prompts(self, tokenizer, n: int, seed: int = 0, device="cpu") -> torch.Tensor:
        """(n, prompt_length) held-out questions; ``seed`` picks which n (seed 0:
        the first n, seed s: the s-th following n of the held-out stream)."""
        return self._held_out(tokenizer, n, seed)[:, : self.prompt_length].to(device)

    def prompt_pair(self, tokenizer, n, prompt_length, seed=0, device="cpu"):
        """Refused: C6 compares decodes without context and with a text prefix
        (C8 needs the context-free side too), and this world has none. Its
        models were trained only to answer questions; given no question
        (``[PAD]``s, then ``[BOS]``), ``math/small`` writes ``[EOS]`` at every
        position (checked 2026-12-02)."""
        raise ValueError(
            "the math world has no prompts without context: its models answer "
            "questions, and with no question they write [EOS] only (C6 and C8 need "
            "such prompts; measure them in the prose world)")

    @property
    def row_length(self) -> int:
        return self.prompt_length + self.decode["gen_length"]

    def training_rows(self, tokenizer, n, seed, prompt=None, seq_len=None):
        """n fresh training problems (seed string ``HEAD_SEED``, no training step's
        or held-out seed), encoded as the models were trained: question (the
        prompt, ``PROMPT_LENGTH`` tokens) then solution and ``[EOS]`` padding.
        ``prompt`` must have that layout; ``seq_len`` cannot differ from it."""
        if prompt is not None and prompt.shape[1] != self.prompt_length:
            raise ValueError(f"math prompts are {self.prompt_length} tokens long "
                             f"(the layout the models were trained on), got "
                             f"{prompt.shape[1]}")
        if seq_len not in (None, self.row_length):
            raise ValueError(f"math rows are {self.row_length} tokens long")
        batch = P.problems(HEAD_SEED.format(seed=seed), n, "train", self.dials)
        return train_math.encode(tokenizer, batch, **self.layout)

    def held_out_rows(self, n, seed=0):
        """The world's tokenizer and ``n`` held-out problems, question then solution
        (the ``seed``-th n of the held-out stream, as ``prompts``)."""
        tok = self.tokenizer()
        return tok, self._held_out(tok, n, seed)

    def token_counts(self, tokenizer, vocab_size=None):
        """Token counts over ``COUNTS_PROBLEMS`` generated training problems
        (question and solution text)."""
        from ..measures.order import token_counts

        batch = P.problems(COUNTS_SEED, COUNTS_PROBLEMS, "train", self.dials)
        texts = [f"{p.question_text} {p.solution_text}".split() for p in batch]
        return token_counts(tokenizer, texts, vocab_size)


def math_world(entry: catalogue.Entry) -> MathWorld:
    """The math world of a catalogue entry (``kind == "math"``): its grammar, its
    ladder and roles, its row layout and decode; the one constructor of every
    math world (``worlds.get_world`` calls it)."""
    if entry.kind != "math":
        raise ValueError(f"{entry.name!r} is a {entry.kind} world, not a math world")
    if not isinstance(getattr(P, entry.grammar or "", None), P.Dials):
        raise ValueError(f"{entry.name!r}: grammar {entry.grammar!r} is not a dial set "
                         "of dlmspec_min.texts.problems (e.g. FREE, NARROW)")
    return MathWorld(entry)


# The claims' math world: the free world since 2026-12-06 (issue 42, item 5),
# the world whose ladder trained to the paper's regime (models page); the
# narrow world, the claims' from 2026-12-04 to 12-06, stays a dated record (the
# models page) and a point of the regime page (catalogue: math_narrow).
MATH = math_world(catalogue.get("math"))
MATH_NARROW = math_world(catalogue.get("math_narrow"))
