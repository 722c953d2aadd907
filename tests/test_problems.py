"""The math world's generator: determinism, exact arithmetic, variety, splits."""

import random
import re

import pytest

from dlmspec_min.training import problems as P

STEP = re.compile(r"(\d+) ([-+*/]) (\d+) = (\d+)")
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


@pytest.fixture(scope="module")
def held():
    return P.problems(P.HELD_OUT_SEED, 2000, "test")


def test_same_seed_same_problems_and_other_seeds_differ():
    a, b = P.problems(7, 50), P.problems(7, 50)
    assert a == b
    assert a != P.problems(8, 50)
    assert P.problems("x", 5) == P.problems("x", 5)


def test_every_step_is_exact_integer_arithmetic_within_range(held):
    for p in held:
        steps = STEP.findall(p.solution_text)
        assert len(steps) == p.steps and P.MIN_STEPS <= p.steps <= P.MAX_STEPS
        for a, op, b, r in steps:
            a, b, r = int(a), int(b), int(r)
            if op == "/":
                assert b and a % b == 0 and a // b == r, p.solution_text
            else:
                assert OPS[op](a, b) == r, p.solution_text
            assert 0 <= r <= P.MAX_VALUE
        assert int(steps[-1][3]) == p.answer
        assert p.solution_text.endswith(f"{P.ANSWER_MARK} {p.answer}")


def test_step_counts_are_all_drawn_and_can_be_fixed(held):
    counts = {s: sum(p.steps == s for p in held) for s in range(1, 5)}
    assert all(c > 300 for c in counts.values()), counts
    rng = random.Random(0)
    assert {P.generate(rng, steps=3).steps for _ in range(20)} == {3}
    with pytest.raises(ValueError, match="steps must be"):
        P.generate(rng, steps=5)


def test_variety_matches_the_issue():
    assert len(P.TEMPLATES) >= 40
    assert len(set(P.NAMES)) >= 150 and len(set(P.OBJECTS)) >= 60
    template_words = {w for q, lines in P.TEMPLATES.values()
                      for line in [q, *lines] for w in line.split()
                      if not w.startswith("{")}
    lists = [set(P.NAMES), set(P.OBJECTS), set(P.CONTAINERS), template_words]
    for i, a in enumerate(lists):  # disjoint: a word's role follows from its spelling
        for b in lists[i + 1 :]:
            assert not a & b


def test_every_word_carries_its_role(held):
    for p in held[:300]:
        for word, role in p.question + p.solution:
            assert role in P.ROLES
            if role == P.NUMBER:
                assert word.isdigit()
            elif role == P.NAME:
                assert word in P.NAMES
            elif role == P.OBJECT:
                assert word in P.OBJECTS or word in P.CONTAINERS
            elif role == P.SYMBOL:
                assert word in P.SYMBOLS
            else:
                assert word not in P.SYMBOLS and not word.isdigit()


def test_unseen_templates_stay_out_of_training_and_held_out_sets(held):
    train = P.problems(P.train_seed(0, 0), 2000, "train")
    for p in train + held:
        assert not P.UNSEEN_TEMPLATES & set(p.templates)
    unseen = P.problems(P.UNSEEN_SEED, 300, "unseen")
    assert all(P.UNSEEN_TEMPLATES & set(p.templates) for p in unseen)
    assert P.HELD_OUT_SEED != P.train_seed(0, 0)
    with pytest.raises(ValueError, match="split must be"):
        P.problems(0, 1, "validation")


def test_held_out_questions_are_not_in_a_training_stream(held):
    seen = {p.question_text for s in range(20)
            for p in P.problems(P.train_seed(0, s), 64)}
    assert not seen & {p.question_text for p in held}
