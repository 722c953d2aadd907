"""The math world's generator: determinism, exact arithmetic, variety, splits."""

import random
import re

import pytest

from dlmspec_min.texts import problems as P

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


# --- the world's dials (issue 34) -------------------------------------------------
# sha256 of the reprs of the first 500 held-out problems of the landed world, taken
# before the grammar took its dials: the first world's problems may not move.
LANDED_HELD_OUT_500 = "e20b39504ab74b5a1b864129c423d2e8d211d175b1364ff448d87f7be717d13d"


def test_the_landed_world_draws_the_problems_it_always_drew():
    import hashlib

    h = hashlib.sha256()
    for p in P.problems(P.HELD_OUT_SEED, 500, "test"):
        # the repr of a Problem as it was then: the fields issue 42 added (its
        # solution freedom's bits, 0 in this world) are left out
        assert p.glue_bits == p.content_bits == 0
        h.update((f"Problem(question={p.question!r}, solution={p.solution!r}, "
                  f"answer={p.answer!r}, templates={p.templates!r}, "
                  f"steps={p.steps!r})").encode())
    assert h.hexdigest() == LANDED_HELD_OUT_500
    assert P.problems(3, 20) == P.problems(3, 20, dials=P.LANDED)


NARROW = P.Dials(templates=frozenset({"open_has", "open_boxes", "add_buys",
                                      "sub_gives", "ask_now", "ask_together"}),
                 names=5, objects=3, containers=1, max_steps=2, start=(2, 9),
                 add=(2, 9), max_question_tokens=31, max_solution_tokens=31)


def test_a_world_draws_only_from_its_dials():
    drawn = P.problems("narrow", 400, "train", NARROW)
    names, objects = set(P.NAMES[:5]), set(P.OBJECTS[:3]) | {P.CONTAINERS[0]}
    for p in drawn:
        assert set(p.templates) <= NARROW.templates
        assert 1 <= p.steps <= 2
        assert P.n_tokens(p.question) <= 31 and P.n_tokens(p.solution) <= 31
        for w, role in p.question + p.solution:
            if role == P.NAME:
                assert w in names
            elif role == P.OBJECT:
                assert w in objects
    opening_counts = [int(w) for p in drawn for w, r in p.question[:4]
                      if r == P.NUMBER and p.templates[0] == "open_has"]
    assert opening_counts and max(opening_counts) <= 9
    assert {p.steps for p in drawn} == {1, 2}
    # every template of the world is used
    assert set().union(*(p.templates for p in drawn)) == NARROW.templates


@pytest.mark.parametrize("bad, match", [
    (dict(templates=frozenset({"open_has", "nope"})), "unknown templates"),
    (dict(templates=frozenset({"open_has", "add_buys"})), "question template"),
    (dict(names=1), "names must be"),
    (dict(objects=0), "objects must be"),
    (dict(min_steps=3, max_steps=2), "steps must satisfy"),
    (dict(max_steps=5), "steps must satisfy"),
    (dict(start=(0, 5)), "start must be"),
    (dict(add=(9, 3)), "add must be"),
])
def test_bad_dials_are_refused_with_what_is_wrong(bad, match):
    with pytest.raises(ValueError, match=match):
        P.Dials(**bad)


def test_a_world_that_cannot_make_a_problem_says_so():
    # a solution of at most 3 tokens cannot hold a step: the draws run out
    # (rather than loop for ever)
    too_short = P.Dials(templates=frozenset({"open_has", "addmul_bags", "ask_now"}),
                        min_steps=2, max_steps=2, max_solution_tokens=3)
    with pytest.raises(ValueError, match="no 2-step problem"):
        P.generate(random.Random(0), "train", dials=too_short)
    # every event of this world takes two steps, so after a 1-step opening no
    # event fits a 2-step problem: refused, never an endless search
    two_step_events = P.Dials(templates=frozenset({"open_boxes", "addmul_bags",
                                                   "ask_now"}), max_steps=2)
    assert P.generate(random.Random(0), "train", 1, two_step_events).steps == 1
    with pytest.raises(ValueError, match="no 2-step problem"):
        P.generate(random.Random(0), "train", 2, two_step_events)
    with pytest.raises(ValueError, match="no unseen template"):
        P.problems(0, 1, "unseen", NARROW)


def test_the_ladder_s_world_is_the_pilot_s_choice_with_its_questions_reserved():
    import dataclasses

    from dlmspec_min.training import math_pilot

    chosen = math_pilot.spec()["candidates"]["narrow"]
    assert dataclasses.replace(P.NARROW, reserve=0) == math_pilot.dials_of(chosen)
    assert P.NARROW.reserve == 8 and P.LANDED.reserve == 0


def test_a_reserved_question_is_never_drawn_for_training():
    held = P.problems(P.HELD_OUT_SEED, 300, "test", P.NARROW)
    assert all(P.reserved(p, P.NARROW) for p in held)
    train = [p for s in range(200)
             for p in P.problems(P.train_seed(0, s), 64, "train", P.NARROW)]
    assert not any(P.reserved(p, P.NARROW) for p in train)
    assert not {p.question_text for p in held} & {p.question_text for p in train}
    # without the reserve, this world's training stream meets its held-out
    # questions (why the dial exists): 200 steps already hold some
    open_world = P.Dials(**{**P.NARROW.__dict__, "reserve": 0})
    held_open = {p.question_text
                 for p in P.problems(P.HELD_OUT_SEED, 300, "test", open_world)}
    train_open = {p.question_text for s in range(200)
                  for p in P.problems(P.train_seed(0, s), 64, "train", open_world)}
    assert held_open & train_open
    # about one question in `reserve` is reserved (the hash splits evenly)
    share = sum(P.reserved(p, P.NARROW) for p in
                P.problems("share", 4000, "train", open_world)) / 4000
    assert 0.09 < share < 0.16
    assert not P.reserved(held[0], P.LANDED)  # the first world reserves nothing


@pytest.mark.parametrize("reserve", [1, -2, 2.5])
def test_a_reserve_is_none_or_at_least_two(reserve):
    with pytest.raises(ValueError, match="reserve must be"):
        P.Dials(reserve=reserve)
