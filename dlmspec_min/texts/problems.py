"""Generated grade-school word problems: the text source of the ``math`` world.

A seeded, pure-Python grammar in the shape of GSM8K (Cobbe et al., 2021): a
question in words, then a worked solution with one sentence per arithmetic step
(``12 + 5 = 17``) and a last line ``#### 17``. Synthetic grade-school math is an
established instrument (iGSM, Ye et al., "Physics of Language Models: Part 2.1",
2024; GSM-Symbolic, Mirzadeh et al., 2024); this grammar is the project's own
(SPEC.md section 6, DERIVED).

A problem follows one person's count of one kind of object through 1 to 4
arithmetic steps:

- an opening (``Mia has 23 stamps.``; a composite one multiplies: ``Mia has 3
  boxes with 8 stamps in each.``),
- 0 to 3 events that change the count (buy, give away, multiply, split, ...),
- a question, which may itself ask for one more step (``If Mia puts the stamps
  into 4 equal groups, how many stamps are in each group?``).

Every phrasing is a *template* (``TEMPLATES``, 46 of them); ``UNSEEN_TEMPLATES``
are never used for training and give a generalisation figure. Every word the
grammar writes carries its *role* (``NUMBER``, ``NAME``, ``OBJECT``, ``SYMBOL``,
``WORD``), so content and function are exact in this world: numbers, names and
objects are content (``CONTENT_ROLES``); template words and symbols are not.
Every intermediate result is an integer in [0, ``MAX_VALUE``].
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

# --- roles ----------------------------------------------------------------------------
NUMBER, NAME, OBJECT, SYMBOL, WORD = "number", "name", "object", "symbol", "word"
ROLES = (NUMBER, NAME, OBJECT, SYMBOL, WORD)
CONTENT_ROLES = frozenset({NUMBER, NAME, OBJECT})
SYMBOLS = frozenset({".", ",", "?", "+", "-", "*", "/", "=", "####"})

MAX_VALUE = 10_000  # every intermediate result is an integer in [0, MAX_VALUE]
MIN_STEPS, MAX_STEPS = 1, 4  # arithmetic sentences per solution
# the longest question and solution, in tokens (a number: one per digit), so that
# every problem fits the training layout ([BOS] + question; solution + [EOS])
MAX_QUESTION_TOKENS, MAX_SOLUTION_TOKENS = 63, 95
ANSWER_MARK = "####"

# --- lexicon (150+ names, 60+ objects, containers) ------------------------------------
NAMES = tuple("""
Aaron Abby Adam Aisha Alan Alex Alice Amir Amy Ana Andre Anna Arjun Asha Ava Ben
Bella Beth Brian Bruno Caleb Carla Carlos Carmen Chen Chloe Chris Clara Cody Dana
Daniel Dara David Dev Diego Dina Dora Dylan Eddie Elena Eli Ella Emil Emma Eric
Erin Ethan Eva Felix Fiona Frank Gabe Gina Grace Greg Hana Hank Hassan Helen Henry
Ian Ida Igor Ines Iris Isaac Ivan Jack Jade Jake James Jana Jenny Jin Joel John
Jose Joy Julia Kai Kara Karim Kate Keith Kevin Kim Kira Kofi Lara Laura Leo Liam
Lily Lina Luca Lucy Luis Luke Maya Mark Marta Max Mei Mia Mike Mila Nadia Nate
Nina Noah Nora Omar Oscar Owen Paul Pedro Petra Priya Quinn Rafael Rahul Rosa Ruby
Ryan Sam Sara Sean Simon Sofia Sonia Tara Ted Tess Theo Tina Tom Uma Vera Victor
Wade Wendy Will Xavier Yara Yuki Zack Zara Zoe Abel Bianca Farah Hugo Leon Selma
""".split())
OBJECTS = tuple("""
apples pears plums lemons oranges peaches cherries grapes carrots potatoes
onions eggs cookies cupcakes muffins candies pies sandwiches stickers stamps
coins marbles buttons beads shells stones feathers pencils crayons markers pens
erasers notebooks books comics magazines cards letters postcards balloons kites
toys dolls puzzles blocks balls bottles cups plates spoons bowls candles flowers
roses tulips seeds plants socks shirts hats scarves gloves ribbons tickets nails
""".split())
CONTAINERS = tuple("boxes bags baskets jars crates packs trays buckets".split())

# --- templates ------------------------------------------------------------------------
# Slots: {p} the person, {q} another person, {o} the object, {c} a container,
# {a} {n} {m} {k} {v} {r} numbers. Every other space-separated word is a template
# word, or a symbol if it is in SYMBOLS. Each template: (question, solution lines).
# A solution line with arithmetic is one step; {v} is the count before the event.
OPENINGS = {
    "open_has": ("{p} has {a} {o} .", []),
    "open_starts": ("{p} starts with {a} {o} .", []),
    "open_owns": ("{p} owns {a} {o} .", []),
    "open_collects": ("{p} collects {a} {o} .", []),
    "open_there": ("There are {a} {o} in the room of {p} .", []),
    "open_boxes": ("{p} has {m} {c} with {n} {o} in each .",
                   ["{p} has {m} * {n} = {r} {o} ."]),
    "open_gets": ("{q} gives {p} {m} {c} of {n} {o} each .",
                  ["{p} gets {m} * {n} = {r} {o} ."]),
}
EVENTS = {
    # add n
    "add_buys": ("{p} buys {n} more {o} .", ["{p} now has {v} + {n} = {r} {o} ."]),
    "add_given": ("{q} gives {p} {n} more {o} .",
                  ["{p} now has {v} + {n} = {r} {o} ."]),
    "add_finds": ("Then {p} finds {n} more {o} .",
                  ["{p} now has {v} + {n} = {r} {o} ."]),
    "add_from": ("{p} gets {n} more {o} from {q} .",
                 ["{p} now has {v} + {n} = {r} {o} ."]),
    "add_picks": ("Later {p} picks up {n} more {o} .",
                  ["That makes {v} + {n} = {r} {o} ."]),
    "add_earns": ("{p} earns {n} more {o} .", ["That makes {v} + {n} = {r} {o} ."]),
    "add_gift": ("{p} receives {n} {o} as a gift .",
                 ["{p} now has {v} + {n} = {r} {o} ."]),
    # subtract n
    "sub_gives": ("{p} gives {n} {o} to {q} .", ["{p} has {v} - {n} = {r} {o} left ."]),
    "sub_sells": ("{p} sells {n} of the {o} .", ["{p} has {v} - {n} = {r} {o} left ."]),
    "sub_loses": ("Then {p} loses {n} {o} .", ["{p} has {v} - {n} = {r} {o} left ."]),
    "sub_takes": ("{q} takes {n} {o} from {p} .",
                  ["That leaves {v} - {n} = {r} {o} ."]),
    "sub_uses": ("{p} uses {n} of the {o} .", ["That leaves {v} - {n} = {r} {o} ."]),
    "sub_donates": ("{p} donates {n} {o} to the school .",
                    ["{p} has {v} - {n} = {r} {o} left ."]),
    # multiply by n
    "mul_times": ("{p} then has {n} times as many {o} .",
                  ["{p} now has {v} * {n} = {r} {o} ."]),
    "mul_grows": ("The number of {o} grows {n} times .",
                  ["That makes {v} * {n} = {r} {o} ."]),
    "mul_swaps": ("Each of the {o} is swapped for {n} new ones .",
                  ["{p} now has {v} * {n} = {r} {o} ."]),
    "mul_ends": ("{p} ends up with {n} times as many {o} .",
                 ["{p} now has {v} * {n} = {r} {o} ."]),
    # divide by n
    "div_piles": ("{p} splits the {o} into {n} equal piles and keeps one pile .",
                  ["{p} keeps {v} / {n} = {r} {o} ."]),
    "div_share": ("{p} shares the {o} equally with {k} friends and keeps one share .",
                  ["There are {k} + 1 = {n} shares .",
                   "{p} keeps {v} / {n} = {r} {o} ."]),
    "div_boxes": ("{p} divides the {o} evenly into {n} {c} and keeps one of them .",
                  ["{p} keeps {v} / {n} = {r} {o} ."]),
    # add m groups of n
    "addmul_bags": ("{p} buys {m} {c} with {n} {o} in each .",
                    ["{p} buys {m} * {n} = {k} {o} .",
                     "{p} now has {v} + {k} = {r} {o} ."]),
    "addmul_gift": ("{q} gives {p} {m} {c} of {n} {o} each .",
                    ["{q} gives {m} * {n} = {k} {o} .",
                     "{p} now has {v} + {k} = {r} {o} ."]),
    "addmul_days": ("For {m} days {p} gets {n} more {o} each day .",
                    ["In {m} days {p} gets {m} * {n} = {k} {o} .",
                     "{p} now has {v} + {k} = {r} {o} ."]),
    # subtract m groups of n
    "submul_friends": ("{p} gives {m} friends {n} {o} each .",
                       ["{p} gives away {m} * {n} = {k} {o} .",
                        "{p} has {v} - {k} = {r} {o} left ."]),
    "submul_sells": ("{p} sells {m} {c} of {n} {o} each .",
                     ["{p} sells {m} * {n} = {k} {o} .",
                      "{p} has {v} - {k} = {r} {o} left ."]),
    "submul_days": ("For {m} days {p} uses {n} {o} each day .",
                    ["In {m} days {p} uses {m} * {n} = {k} {o} .",
                     "That leaves {v} - {k} = {r} {o} ."]),
}
QUESTIONS = {
    "ask_now": ("How many {o} does {p} have now ?", []),
    "ask_end": ("How many {o} does {p} have in the end ?", []),
    "ask_left": ("How many {o} are left ?", []),
    "ask_has": ("How many {o} does {p} have ?", []),
    "ask_owns": ("How many {o} does {p} own now ?", []),
    "ask_total": ("What is the total number of {o} now ?", []),
    "ask_groups": ("If {p} puts the {o} into {n} equal groups , "
                   "how many {o} are in each group ?",
                   ["Each group has {v} / {n} = {r} {o} ."]),
    "ask_more": ("{q} has {n} more {o} than {p} . How many {o} does {q} have ?",
                 ["{q} has {v} + {n} = {r} {o} ."]),
    "ask_fewer": ("{q} has {n} fewer {o} than {p} . How many {o} does {q} have ?",
                  ["{q} has {v} - {n} = {r} {o} ."]),
    "ask_together": ("{q} has {n} {o} . How many {o} do {p} and {q} have together ?",
                     ["Together they have {v} + {n} = {r} {o} ."]),
    "ask_double": ("{q} has {n} times as many {o} as {p} . "
                   "How many {o} does {q} have ?",
                   ["{q} has {v} * {n} = {r} {o} ."]),
    "ask_need": ("How many more {o} does {p} need to have {n} ?",
                 ["{p} needs {n} - {v} = {r} more {o} ."]),
}
TEMPLATES = {**OPENINGS, **EVENTS, **QUESTIONS}
# Never used for training: one opening, one event of each of the four operations
# and one question; problems using any of them give the generalisation figure.
UNSEEN_TEMPLATES = frozenset(
    {"open_owns", "add_gift", "sub_donates", "mul_ends", "div_boxes", "ask_fewer"}
)

# --- solution freedom (issue 42): choices a solution may make, every role exact ------
# A GSM8K solution is one of many a reader would accept; in the worlds above it is
# fixed by the question. Two kinds of freedom, each a dial of ``Dials`` drawn
# uniformly per problem, let a world's solutions vary without changing what they
# compute (grading reads only ``#### n``):
# - glue: a solution sentence's wording. ``PHRASINGS`` gives interchangeable
#   wordings of a solution line (the first is the template's own); a line that
#   starts with the person's name may also open with one of ``OPENERS``.
# - content: the order of a commutative step's operands (``12 + 5`` or ``5 + 12``).
#   The other content freedom, the order of independent steps, does not arise in
#   this grammar: every solution line uses the line before it.
# Only words the committed math tokenizer already holds are used.
OPENERS = ("", "Then", "Later")
PHRASINGS = {
    "{p} now has {v} + {n} = {r} {o} .": (
        "{p} now has {v} + {n} = {r} {o} .", "That makes {v} + {n} = {r} {o} .",
        "{p} has {v} + {n} = {r} {o} now ."),
    "{p} has {v} - {n} = {r} {o} left .": (
        "{p} has {v} - {n} = {r} {o} left .", "That leaves {v} - {n} = {r} {o} .",
        "{p} now has {v} - {n} = {r} {o} ."),
    "{p} has {m} * {n} = {r} {o} .": (
        "{p} has {m} * {n} = {r} {o} .", "That makes {m} * {n} = {r} {o} .",
        "In total {p} has {m} * {n} = {r} {o} ."),
    "Together they have {v} + {n} = {r} {o} .": (
        "Together they have {v} + {n} = {r} {o} .",
        "That makes {v} + {n} = {r} {o} together .",
        "In total they have {v} + {n} = {r} {o} ."),
}
COMMUTATIVE = frozenset({"+", "*"})


# --- number ranges (the world's difficulty, fixed before any model was trained) -------
START = (2, 60)  # a plain opening's count
ADD = (2, 60)  # an added or subtracted amount, the "more/fewer/together" amounts
FACTOR = (2, 5)  # multipliers, divisors, counts of groups and days
GROUP = (2, 12)  # the size of a group (a bag, a day's amount)


@dataclass(frozen=True)
class Dials:
    """What a world of this grammar draws from: its dials (issue 34).

    ``templates`` names the templates the world uses (None: every one);
    ``names``, ``objects`` and ``containers`` how many of the word lists' first
    entries it draws from; the step and number ranges bound its arithmetic;
    ``max_question_tokens`` and ``max_solution_tokens`` its row layout (a longer
    problem is drawn again). ``reserve``: when > 0, one question in ``reserve``
    (by a hash of its text, ``reserved``) is kept for evaluation, so that no
    held-out question is ever a training one: the ``"train"`` split never draws
    one, ``"test"`` and ``"unseen"`` draw only those. 0 keeps none apart, which
    suits only a world large enough that the two streams hardly meet by chance.
    ``LANDED`` is the first world, every dial at the module's constants; other
    worlds change some dials and keep every role exact.

    Solution freedom (issue 42; 1, 1, False: none, the solution is fixed by
    the question): ``openers`` how many of ``OPENERS`` a name-led solution
    sentence opens with (1: only the empty one), ``phrasings`` how many of a
    line's ``PHRASINGS`` it is written in, ``free_order`` whether a commutative
    step's operands come in either order. Each is drawn uniformly per line.
    """

    templates: frozenset[str] | None = None
    names: int = len(NAMES)
    objects: int = len(OBJECTS)
    containers: int = len(CONTAINERS)
    min_steps: int = MIN_STEPS
    max_steps: int = MAX_STEPS
    start: tuple[int, int] = START
    add: tuple[int, int] = ADD
    factor: tuple[int, int] = FACTOR
    group: tuple[int, int] = GROUP
    max_value: int = MAX_VALUE
    max_question_tokens: int = MAX_QUESTION_TOKENS
    max_solution_tokens: int = MAX_SOLUTION_TOKENS
    reserve: int = 0
    openers: int = 1
    phrasings: int = 1
    free_order: bool = False

    def __post_init__(self):
        if not isinstance(self.reserve, int) or self.reserve < 0 or self.reserve == 1:
            raise ValueError(f"reserve must be 0 (none) or an integer >= 2, got "
                             f"{self.reserve!r}")
        unknown = set(self.templates or ()) - set(TEMPLATES)
        if unknown:
            raise ValueError(f"unknown templates {sorted(unknown)}; known: "
                             f"{sorted(TEMPLATES)}")
        if self.templates is not None:
            for part, names in (("opening", OPENINGS), ("event", EVENTS),
                                ("question", QUESTIONS)):
                if not self.templates & set(names):
                    raise ValueError(f"a world needs at least one {part} template")
        for dial, n, most in (("names", self.names, len(NAMES)),
                              ("objects", self.objects, len(OBJECTS)),
                              ("containers", self.containers, len(CONTAINERS))):
            if not (2 if dial == "names" else 1) <= n <= most:
                raise ValueError(f"{dial} must be in [1, {most}] (names: at least "
                                 f"2, a question may name two people), got {n}")
        if not MIN_STEPS <= self.min_steps <= self.max_steps <= MAX_STEPS:
            raise ValueError(f"steps must satisfy {MIN_STEPS} <= min_steps <= "
                             f"max_steps <= {MAX_STEPS}, got {self.min_steps}, "
                             f"{self.max_steps}")
        for dial, most in (("openers", len(OPENERS)),
                           ("phrasings", max(map(len, PHRASINGS.values())))):
            n = getattr(self, dial)
            if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= most:
                raise ValueError(f"{dial} must be an integer in [1, {most}], got {n!r}")
        if not isinstance(self.free_order, bool):
            raise ValueError(f"free_order must be True or False, got "
                             f"{self.free_order!r}")
        for dial in ("start", "add", "factor", "group"):
            lo, hi = getattr(self, dial)
            if not 1 <= lo <= hi <= self.max_value:
                raise ValueError(f"{dial} must be a range 1 <= lo <= hi <= max_value, "
                                 f"got {(lo, hi)}")

    @property
    def name_list(self) -> tuple[str, ...]:
        return NAMES[: self.names]

    @property
    def object_list(self) -> tuple[str, ...]:
        return OBJECTS[: self.objects]

    @property
    def container_list(self) -> tuple[str, ...]:
        return CONTAINERS[: self.containers]

    @property
    def free(self) -> bool:
        """Whether this world's solutions have any freedom (issue 42)."""
        return self.openers > 1 or self.phrasings > 1 or self.free_order

    def uses(self, template: str) -> bool:
        return self.templates is None or template in self.templates

    @property
    def template_names(self) -> frozenset[str]:
        """The templates this world writes (unseen ones included)."""
        return frozenset(t for t in TEMPLATES if self.uses(t))


LANDED = Dials()  # the first world (2026-12-02 to 2026-12-04), every dial as written
# The world the pilot chose (its candidate "narrow" in book/claims.yml, tested
# equal): the ladder's world from 2026-12-04. It holds no template back. It is
# small enough that a training stream meets held-out questions by chance (the
# 6,000 steps of 64 problems of its first draft held 57 of the first 400 held-out
# questions, measured 2026-12-04), so one question in 8 is reserved for
# evaluation (``Dials.reserve``), a dial the pilot did not have.
NARROW = Dials(
    templates=frozenset({"open_has", "open_boxes", "add_buys", "sub_gives",
                         "ask_now", "ask_together"}),
    names=24, objects=12, containers=3, min_steps=1, max_steps=2,
    start=(2, 30), add=(2, 30), max_question_tokens=31, max_solution_tokens=31,
    reserve=8)


# The world the freedom pilot chose (issue 42; its candidate "openers_order" in
# book/claims.yml, tested equal): narrow's questions, each name-led solution
# sentence opening with "Then", "Later" or nothing, and a commutative step's
# operands in either order. The free ladder's world (data/models/math_free/).
FREE = Dials(**{**NARROW.__dict__, "openers": 3, "free_order": True})
# The regime page's third setting (issue 42, item 4; the pilot's candidate
# "order", tested equal): narrow with content freedom only, a commutative step's
# operands in either order. Its ladder's draft and target are in
# data/models/math_order/.
ORDER = Dials(**{**NARROW.__dict__, "free_order": True})
# The regime page's chained setting (issue 46, item 2; book/claims.yml, checks:
# regime, written before it was trained): free's grammar and freedom, every
# solution 3 or 4 arithmetic steps, each result used by the next, in rows of
# 48 + 64 tokens (a question of at most 47 tokens, a solution of at most 63)
# decoded in two blocks of 32. Its draft and target are in data/models/math_chains/.
CHAINS = Dials(**{**FREE.__dict__, "min_steps": 3, "max_steps": 4,
                  "max_question_tokens": 47, "max_solution_tokens": 63})


def has_unseen(dials: Dials) -> bool:
    """Whether the world ``dials`` writes a template never used in training."""
    return bool(dials.template_names & UNSEEN_TEMPLATES)


@dataclass(frozen=True)
class Problem:
    """One generated problem: words with their roles, and the answer."""

    question: tuple[tuple[str, str], ...]  # (word, role) pairs
    solution: tuple[tuple[str, str], ...]  # the worked steps and ``#### answer``
    answer: int
    templates: tuple[str, ...]  # opening, events..., question
    steps: int  # arithmetic sentences in the solution
    # the surprisal in bits of the solution's free choices given the question
    # (issue 42), under the world's uniform draws: wording and openers (glue),
    # operand order (content); its mean over problems is the entropy
    glue_bits: float = 0.0
    content_bits: float = 0.0

    @property
    def question_text(self) -> str:
        return render(w for w, _ in self.question)

    @property
    def solution_text(self) -> str:
        return render(w for w, _ in self.solution)


def n_tokens(words) -> int:
    """Tokens of (word, role) pairs in the math tokenizer (a number: one a digit)."""
    return sum(len(w) if w.isdigit() else 1 for w, _ in words)


def render(words) -> str:
    """Words -> text: punctuation sticks to the word before; ``####`` on a new line."""
    out = ""
    for w in words:
        if w in {".", ",", "?"}:
            out += w
        elif w == ANSWER_MARK:
            out += "\n" + w
        else:
            out += (" " if out else "") + w
    return out


def role_of(word: str, slot: str | None) -> str:
    if slot is not None:
        return {"p": NAME, "q": NAME, "o": OBJECT, "c": OBJECT}.get(slot, NUMBER)
    if word.isdigit():  # a number written into a template ("{k} + 1")
        return NUMBER
    return SYMBOL if word in SYMBOLS else WORD


def fill(template: str, slots: dict[str, object]) -> list[tuple[str, str]]:
    """A template with its slots filled: (word, role) pairs."""
    out = []
    for w in template.split():
        if w.startswith("{") and w.endswith("}"):
            out.append((str(slots[w[1:-1]]), role_of(w, w[1:-1])))
        else:
            out.append((w, role_of(w, None)))
    return out


def free_line(line: str, slots: dict, rng: random.Random,
              d: Dials) -> tuple[str, float, float]:
    """One solution line as this problem writes it in the world ``d``: (template
    line, glue bits, content bits). A world without freedom returns ``line``
    and draws nothing from ``rng``, so its problems are those it always drew."""
    if not d.free:
        return line, 0.0, 0.0
    glue = content = 0.0
    choices = PHRASINGS.get(line, (line,))[: d.phrasings]
    if len(choices) > 1:
        line = rng.choice(choices)
        glue += math.log2(len(choices))
    openers = OPENERS[: d.openers]
    if len(openers) > 1 and line.split()[0] in ("{p}", "{q}"):
        opener = rng.choice(openers)
        line = f"{opener} {line}".strip()
        glue += math.log2(len(openers))
    words = line.split()
    if d.free_order:
        for i, w in enumerate(words):
            if w in COMMUTATIVE and 0 < i < len(words) - 1:
                a, b = words[i - 1], words[i + 1]
                if rng.random() < 0.5:
                    words[i - 1], words[i + 1] = b, a
                if str(slots.get(a.strip("{}"), a)) != str(slots.get(b.strip("{}"), b)):
                    content += 1.0  # equal operands read the same either way
        line = " ".join(words)
    return line, glue, content


def _divisors(v: int, lo: int, hi: int) -> list[int]:
    return [d for d in range(lo, hi + 1) if v % d == 0]


def _plus(v: int, rng: random.Random, d: Dials) -> dict:
    """``v`` and a number drawn from ``d.add``: {n, r = v + n}."""
    n = rng.randint(*d.add)
    return dict(n=n, r=v + n)


def _minus(v: int, rng: random.Random, d: Dials) -> dict | None:
    """``v`` less a number below it (at most ``d.add``'s top); None if ``v`` < 2."""
    if v < 2:
        return None
    n = rng.randint(1, min(v - 1, d.add[1]))
    return dict(n=n, r=v - n)


def _times(v: int, rng: random.Random, d: Dials) -> dict | None:
    """``v`` times a factor from ``d.factor``; None past ``d.max_value``."""
    n = rng.randint(*d.factor)
    return dict(n=n, r=v * n) if v * n <= d.max_value else None


def _shared_by(v: int, rng: random.Random, d: Dials) -> dict | None:
    """``v`` split evenly by one of its divisors in ``d.factor``; None if none."""
    ds = _divisors(v, *d.factor)
    if not ds:
        return None
    n = rng.choice(ds)
    return dict(n=n, r=v // n)


def _event_numbers(kind: str, v: int, rng: random.Random,
                   d: Dials = LANDED) -> dict | None:
    """Numbers for one event on count ``v``: {n, m, k, r}, or None if impossible."""
    op = kind.split("_")[0]
    simple = {"add": _plus, "sub": _minus, "mul": _times}
    if op in simple:
        return simple[op](v, rng, d)
    if op == "div":
        x = _shared_by(v, rng, d)
        return None if x is None else dict(n=x["n"], k=x["n"] - 1, r=x["r"])
    if op in ("addmul", "submul"):
        m, n = rng.randint(*d.factor), rng.randint(*d.group)
        k = m * n
        r = v + k if op == "addmul" else v - k
        return dict(m=m, n=n, k=k, r=r) if 0 <= r <= d.max_value else None
    raise ValueError(f"unknown event kind {kind!r}")


def _question_numbers(kind: str, v: int, rng: random.Random,
                      d: Dials = LANDED) -> dict | None:
    asks = {"ask_groups": _shared_by, "ask_more": _plus, "ask_together": _plus,
            "ask_fewer": _minus, "ask_double": _times}
    if kind in asks:
        return asks[kind](v, rng, d)
    if kind == "ask_need":
        n = v + rng.randint(*d.add)
        return dict(n=n, r=n - v)
    return dict(r=v)


def _steps(template: tuple[str, list[str]]) -> int:
    return sum("=" in line.split() for line in template[1])


def allowed_templates(split: str, dials: Dials = LANDED) -> dict[str, set[str]]:
    """Per part (openings, events, questions): the template names a split may use.

    Only the world's templates (``dials.templates``); ``"train"`` and ``"test"``
    leave ``UNSEEN_TEMPLATES`` out; ``"unseen"`` allows every template of the
    world (and ``generate`` then requires at least one unseen one).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    keep = (lambda t: True) if split == "unseen" else (
        lambda t: t not in UNSEEN_TEMPLATES)
    allowed = {part: {t for t in names if keep(t) and dials.uses(t)}
               for part, names in (("open", OPENINGS), ("event", EVENTS),
                                   ("ask", QUESTIONS))}
    empty = [part for part, names in allowed.items() if not names]
    if empty:
        raise ValueError(f"this world has no {split!r} templates for {empty} "
                         "(every template of that part is unseen or unused)")
    return allowed


SPLITS = ("train", "test", "unseen")


def generate(rng: random.Random, split: str = "train",
             steps: int | None = None, dials: Dials = LANDED) -> Problem:
    """One problem drawn with ``rng`` in the world ``dials``; ``steps`` fixes the
    arithmetic steps (within the world's range)."""
    allowed = allowed_templates(split, dials)
    parts = {k: sorted(v) for k, v in allowed.items()}
    if steps is not None and not dials.min_steps <= steps <= dials.max_steps:
        raise ValueError(f"steps must be in [{dials.min_steps}, {dials.max_steps}], "
                         f"got {steps}")
    want = steps or rng.randint(dials.min_steps, dials.max_steps)
    if split == "unseen" and not UNSEEN_TEMPLATES & set().union(*allowed.values()):
        raise ValueError("this world uses no unseen template")
    for _ in range(MAX_ATTEMPTS):  # rejection: until the steps add up, numbers fit
        problem = _attempt(rng, parts, want, dials)
        if problem is None:
            continue
        if split == "unseen" and not UNSEEN_TEMPLATES & set(problem.templates):
            continue
        if dials.reserve and reserved(problem, dials) != (split != "train"):
            continue
        return problem
    raise ValueError(f"no {want}-step problem of this world fits its dials after "
                     f"{MAX_ATTEMPTS} draws ({dials})")


MAX_ATTEMPTS = 100_000  # draws before a world is declared unable to make a problem


def reserved(problem: Problem, dials: Dials) -> bool:
    """Whether ``problem``'s question is one the world ``dials`` keeps for
    evaluation (``Dials.reserve``): the first 8 bytes of the SHA-256 of its text,
    modulo ``reserve``, are 0. Never, when the world reserves nothing."""
    if not dials.reserve:
        return False
    digest = hashlib.sha256(problem.question_text.encode()).digest()
    return int.from_bytes(digest[:8], "big") % dials.reserve == 0


def _attempt(rng: random.Random, parts: dict, want: int,
             d: Dials = LANDED) -> Problem | None:
    names = d.name_list
    p, o = rng.choice(names), rng.choice(d.object_list)
    q = rng.choice([n for n in names if n != p])
    c = rng.choice(d.container_list)
    base = dict(p=p, q=q, o=o, c=c)
    chosen = [rng.choice(parts["open"])]
    ask = rng.choice(parts["ask"])
    budget = want - _steps(TEMPLATES[chosen[0]]) - _steps(TEMPLATES[ask])
    while budget > 0:
        if all(_steps(TEMPLATES[e]) > budget for e in parts["event"]):
            return None  # no event of this world fits what is left
        event = rng.choice(parts["event"])
        if _steps(TEMPLATES[event]) > budget:
            continue
        chosen.append(event)
        budget -= _steps(TEMPLATES[event])
    if budget < 0:
        return None
    chosen.append(ask)
    question, solution = [], []
    glue_bits = content_bits = 0.0
    v = None
    for i, name in enumerate(chosen):
        q_text, s_lines = TEMPLATES[name]
        if i == 0:
            if s_lines:
                m, n = rng.randint(*d.factor), rng.randint(*d.group)
                nums = dict(m=m, n=n, r=m * n)
            else:
                nums = dict(a=(a := rng.randint(*d.start)), r=a)
        elif i == len(chosen) - 1:
            nums = _question_numbers(name, v, rng, d)
        else:
            nums = _event_numbers(name, v, rng, d)
        if nums is None or not 0 <= nums["r"] <= d.max_value:
            return None
        slots = {**base, **nums, "v": v}
        question += fill(q_text, slots)
        for line in s_lines:
            line, g, c = free_line(line, slots, rng, d)
            glue_bits, content_bits = glue_bits + g, content_bits + c
            solution += fill(line, slots)
        v = nums["r"]
    solution += fill(f"{ANSWER_MARK} {{r}}", {"r": v})
    if (n_tokens(question) > d.max_question_tokens
            or n_tokens(solution) > d.max_solution_tokens):
        return None
    return Problem(tuple(question), tuple(solution), v, tuple(chosen), want,
                   glue_bits, content_bits)


def problems(seed: int | str, n: int, split: str = "train",
             dials: Dials = LANDED) -> list[Problem]:
    """``n`` problems of the world ``dials`` from a generator seeded with ``seed``
    (an int or a string)."""
    rng = random.Random(seed)
    return [generate(rng, split, dials=dials) for _ in range(n)]


# Seeds: training draws each step's problems from ``train_seed(seed, step)``;
# held-out problems come from HELD_OUT_SEED, a string no training seed can equal.
HELD_OUT_SEED = "math-held-out"
UNSEEN_SEED = "math-unseen-templates"
TOKENIZER_SEED = "math-tokenizer"


def train_seed(seed: int, step: int) -> str:
    return f"math-train-{seed}-{step}"
