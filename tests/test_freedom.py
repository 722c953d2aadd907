"""Issue 42's pieces: solution freedom as dials of the math grammar, answer
tokens per forward, and the freedom pilot's projection and rule."""

import dataclasses
import json
import math
from collections import Counter

import pytest

from dlmspec_min.texts import problems as P
from dlmspec_min.texts.tokenizer import EOS_ID
from dlmspec_min.training import math_pilot as M
from dlmspec_min.training import math_skills as S
from dlmspec_min.training import train_math as T

ALL = dataclasses.replace(P.NARROW, openers=3, phrasings=3, free_order=True)


@pytest.fixture(scope="module")
def tok():
    return T.load_tokenizer(T.tokenizer_dir())


def test_a_world_without_freedom_draws_the_problems_it_always_drew():
    # the committed ladder's held-out and training streams must not move
    fixed = P.problems(P.HELD_OUT_SEED, 200, "test", P.NARROW)
    assert all(p.glue_bits == p.content_bits == 0 for p in fixed)
    first = fixed[0]
    assert first.question_text.startswith("Anna has 2 boxes")  # as committed logs
    again = dataclasses.replace(P.NARROW, openers=1, phrasings=1, free_order=False)
    assert P.problems(P.HELD_OUT_SEED, 200, "test", again) == fixed


def test_free_solutions_compute_the_same_and_keep_every_role_exact(tok):
    for p in P.problems(P.HELD_OUT_SEED, 300, "test", ALL):
        words = [w for w, _ in p.solution]
        lines = S.arithmetic_lines(words)
        assert len(lines) == p.steps and all(S.line_holds(*x) for x in lines)
        assert S.answer_in(words) == p.answer
        for w, role in p.solution:
            if role == P.NUMBER:
                assert w.isdigit()
            elif role in (P.NAME, P.OBJECT):
                assert w in p.question_text.split()
            else:
                assert not w.isdigit() and w not in S.LEXICON
        ids = tok(p.solution_text, add_special_tokens=False)["input_ids"]
        assert len(ids) == P.n_tokens(p.solution)  # every free word is one token
        g = S.grade(tok, ids + [EOS_ID], p)
        assert g["correct"] and g["ended"] and g["lines_right"] == g["lines"]
        assert g["names_objects_copied"] == g["names_objects"]


def test_each_freedom_is_drawn_about_uniformly():
    import random

    rng = random.Random(0)
    line = "{p} now has {v} + {n} = {r} {o} ."
    slots = dict(p="Mia", v=3, n=4, r=7, o="pens")
    drawn = Counter(P.free_line(line, slots, rng, ALL)[0] for _ in range(6000))
    phrasings = Counter()
    openers = Counter()
    swapped = 0
    for text, count in drawn.items():
        words = text.split()
        openers[words[0] if words[0] in P.OPENERS else ""] += count
        body = " ".join(words[1:] if words[0] in P.OPENERS else words)
        swapped += count * ("{n} + {v}" in body)
        phrasings[body.replace("{n} + {v}", "{v} + {n}")] += count
    assert set(phrasings) == set(P.PHRASINGS[line])
    assert all(1800 < c < 2200 for c in phrasings.values())  # 1/3 each
    assert 2800 < swapped < 3200  # 1/2
    # openers only on the name-led phrasings (2 of 3): 1/3 of those each
    assert all(1150 < openers[o] < 1500 for o in ("Then", "Later"))
    # a world without freedom draws nothing and writes the template's line
    state = rng.getstate()
    assert P.free_line(line, slots, rng, P.NARROW) == (line, 0.0, 0.0)
    assert rng.getstate() == state


def test_bits_count_each_free_choice():
    openers = dataclasses.replace(P.NARROW, openers=3)
    for p in P.problems("bits", 100, "train", openers):
        led = sum(1 for s in p.solution_text.split("\n")[0].split(". ")
                  if s and (s.split()[0] in ("Then", "Later")
                            or s.split()[0] in P.NAMES))
        assert p.glue_bits == pytest.approx(led * math.log2(3))
        assert p.content_bits == 0
    order = dataclasses.replace(P.NARROW, free_order=True)
    for p in P.problems("bits", 100, "train", order):
        lines = S.arithmetic_lines([w for w, _ in p.solution])
        assert p.content_bits == sum(op in P.COMMUTATIVE and a != b
                                     for a, op, b, _ in lines)
        assert p.glue_bits == 0
    mean = sum(p.glue_bits for p in P.problems("bits", 400, "train", ALL)) / 400
    assert 2 < mean < 5  # phrasings log2(3) per line plus openers on some


@pytest.mark.parametrize("bad, match", [
    (dict(openers=0), "openers must be"), (dict(openers=4), "openers must be"),
    (dict(phrasings=4), "phrasings must be"), (dict(openers=True), "openers must be"),
    (dict(free_order=1), "free_order must be")])
def test_bad_freedom_dials_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(P.NARROW, **bad)


def test_answer_tokens_per_forward_counts_text_before_eos():
    rows = [[5, 6, 7, EOS_ID, EOS_ID], [5, 6, 7, 8, 9], [EOS_ID] * 5]
    assert [S.answer_tokens(r) for r in rows] == [3, 5, 0]
    assert S.answer_tokens_per_nfe(rows, [2, 3, 1]) == pytest.approx(8 / 6)
    with pytest.raises(ValueError, match="no forwards"):
        S.answer_tokens_per_nfe(rows, [0, 0, 0])


def test_the_freedom_pilot_candidates_are_narrow_with_freedom():
    pilot = M.spec("freedom_pilot")
    assert M.dials_of(pilot["candidates"][pilot["projection"]["zero"]]) == T.DIALS
    for name, cand in pilot["candidates"].items():
        d = M.dials_of(cand)
        assert dataclasses.replace(d, openers=1, phrasings=1,
                                   free_order=False) == T.DIALS, name
    assert sum(M.dials_of(c).free for c in pilot["candidates"].values()) == 4
    with pytest.raises(ValueError, match="unknown freedom dials"):
        M.freedom_dials({"openers": 2, "synonyms": 3})
    with pytest.raises(ValueError, match="pilot must be one of"):
        M.spec("third")


FREE_RULE = dict(projected_tokens_per_nfe=[2.6, 4.3], min_copy_acc=0.9,
                 min_ended_share=0.95)


def _f(tpf, copy=1.0, ended=1.0):
    return dict(tokens_per_nfe=tpf, copy_acc=copy, ended_share=ended)


def test_the_freedom_rule_picks_the_projection_nearest_the_bands_middle():
    finals = {"zero": _f(8.0), "a": _f(2.0), "b": _f(1.6), "c": _f(1.4)}
    name, why, projected = M.choose_freedom(finals, FREE_RULE, 2.0)
    assert projected == {"zero": 16.0, "a": 4.0, "b": 3.2, "c": 2.8}
    assert name == "b" and "eligible: a, b, c" in why
    finals["b"]["copy_acc"] = 0.5  # has not learnt to copy: out
    assert M.choose_freedom(finals, FREE_RULE, 2.0)[0] == "c"
    finals = {"zero": _f(8.0), "a": _f(3.0), "b": _f(2.5, ended=0.5)}
    name, why, _ = M.choose_freedom(finals, FREE_RULE, 2.0)
    assert name == "a" and "none eligible" in why  # 6.0 is the nearest learner
    with pytest.raises(ValueError, match="chooses none"):
        M.choose_freedom({"a": _f(2.0, copy=float("nan"))}, FREE_RULE, 2.0)
    with pytest.raises(ValueError, match="positive"):
        M.choose_freedom(finals, FREE_RULE, float("nan"))


def test_the_projection_factor_reads_both_logs(tmp_path, monkeypatch):
    monkeypatch.setattr(M, "data_dir", lambda: tmp_path)
    zero = M.out_dir("zero", "freedom_pilot")
    zero.mkdir(parents=True)
    (zero / "train_log.jsonl").write_text("\n".join(json.dumps(r) for r in [
        dict(step=3500, tokens_per_nfe=7.0), dict(step=3750),
        dict(step=4000, tokens_per_nfe=8.0), dict(step=4000)]))
    factor, parts = M.projection_factor()
    base = M.last_decode(T.ladder_dir("math_narrow") / "base" / "train_log.jsonl")
    assert factor == pytest.approx(base["tokens_per_nfe"] / 8.0)
    assert parts["zero_step"] == 4000 and parts["target_step"] == base["step"]
    (zero / "train_log.jsonl").write_text(json.dumps(dict(step=0)))
    with pytest.raises(ValueError, match="no decode figures"):
        M.projection_factor()


def test_the_free_world_is_the_freedom_pilots_choice_by_its_rule():
    pilot = M.spec("freedom_pilot")
    finals = M.results("freedom_pilot")
    assert set(finals) == set(pilot["candidates"])  # every candidate committed
    factor, _ = M.projection_factor(pilot)
    chosen, _, projected = M.choose_freedom(finals, pilot["rule"], factor)
    assert M.dials_of(pilot["candidates"][chosen]) == P.FREE
    assert T.dials_of_world("math") == P.FREE
    assert T.dials_of_world("math_narrow") == T.DIALS
    # the regime page's content-freedom setting is the pilot's "order"
    assert M.dials_of(pilot["candidates"]["order"]) == P.ORDER == T.dials_of_world(
        "math_order")
    assert P.ORDER.free_order and P.ORDER.openers == P.NARROW.openers
    for name, f in finals.items():  # the committed figures are the run's own
        assert f["candidate"] == name and f["problems"] == pilot["final_problems"]
        log = M.last_decode(M.out_dir(name, "freedom_pilot") / "train_log.jsonl")
        assert log["step"] == pilot["steps"]
        assert (M.out_dir(name, "freedom_pilot") / "model.safetensors").exists()
        assert not (M.out_dir(name, "freedom_pilot") / "checkpoint.pt").exists()


def test_the_ladders_have_their_own_folders_and_unknown_worlds_are_refused():
    assert T.ladder_dir("math_narrow") == T.tokenizer_dir().parent
    assert T.ladder_dir("math").name == "math_free"
    assert T.ladder_dir("math_order").name == "math_order"
    with pytest.raises(ValueError, match="world must be one of"):
        T.ladder_dir("wide")
    with pytest.raises(ValueError, match="world must be one of"):
        T.train("small", world="wide", steps=1)
