"""Issue 34's pieces: the deterministic tokenizer, what a decode copies and
computes (``math_skills``), a world's training layout, and the pilot's rule."""

import json
import math

import pytest
import torch

from dlmspec_min.texts import problems as P
from dlmspec_min.texts.tokenizer import EOS_ID, SPECIAL_TOKENS, UNK_ID, words_of
from dlmspec_min.training import math_pilot as M
from dlmspec_min.training import math_skills as S
from dlmspec_min.training import train_math as T


@pytest.fixture(scope="module")
def tok():
    return T.word_count_tokenizer()


def test_the_word_count_tokenizer_is_the_same_on_every_build(tok):
    again = T.word_count_tokenizer()
    assert again.get_vocab() == tok.get_vocab()
    vocab = tok.get_vocab()
    assert [vocab[s] for s in SPECIAL_TOKENS] == list(range(len(SPECIAL_TOKENS)))
    # the most frequent word comes first; ids follow the counts
    counts = {}
    for p in P.problems(P.TOKENIZER_SEED, 500, "unseen"):
        for w, _ in p.question + p.solution:
            counts[w] = counts.get(w, 0) + 1
    top = max((w for w in counts if not w.isdigit() and w != P.ANSWER_MARK),
              key=counts.get)
    assert vocab[top] == len(SPECIAL_TOKENS)


def test_every_grammar_word_is_one_token_numbers_digits_and_no_unk(tok):
    for w in sorted(T.template_words() | set(P.NAMES) | set(P.OBJECTS)
                    | set(P.CONTAINERS)):
        assert len(tok(w, add_special_tokens=False)["input_ids"]) == 1, w
    ids = tok("Zed owns 4096 wombats .", add_special_tokens=False)["input_ids"]
    assert UNK_ID not in ids
    assert tok.convert_ids_to_tokens(ids)[:3] == ["Z", "##e", "##d"]
    assert words_of(tok, ids) == ["Zed", "owns", "4096", "wombats", "."]
    for p in P.problems(P.HELD_OUT_SEED, 100, "test"):
        s = tok(p.solution_text, add_special_tokens=False)["input_ids"]
        assert len(s) == P.n_tokens(p.solution)
        assert " ".join(tok.decode(s).split()) == " ".join(p.solution_text.split())


def _grade(tok, text, problem):
    ids = tok(text, add_special_tokens=False)["input_ids"] + [EOS_ID] * 3
    return S.grade(tok, ids, problem)


def test_grade_counts_copies_numbers_and_lines(tok):
    p = P.problems(P.HELD_OUT_SEED, 1, "test")[0]
    right = _grade(tok, p.solution_text, p)
    assert right["correct"] and right["ended"] and not right["no_text"]
    assert right["names_objects_copied"] == right["names_objects"] > 0
    assert right["lines_right"] == right["lines"] == p.steps
    other = next(n for n in P.NAMES if n not in p.question_text.split())
    words = [other if r == P.NAME else w for w, r in p.solution]
    text = P.render(words).replace(f"= {p.answer}", "= 99999")
    wrong = _grade(tok, text.replace(f"#### {p.answer}", "#### 99999"), p)
    assert wrong["names_objects_copied"] < wrong["names_objects"]
    assert not wrong["correct"] and wrong["lines_right"] < wrong["lines"]
    empty = S.grade(tok, [EOS_ID] * 5, p)
    assert empty["no_text"] and not empty["ended"] and empty["lines"] == 0


def test_arithmetic_lines_hold_only_when_exact():
    lines = S.arithmetic_lines("has 7 + 5 = 12 , 12 / 5 = 2 and 3 * 4 = 12".split())
    assert lines == [(7, "+", 5, 12), (12, "/", 5, 2), (3, "*", 4, 12)]
    assert [S.line_holds(*x) for x in lines] == [True, False, True]
    assert not S.line_holds(3, "/", 0, 0)


def test_summarise_pools_counts_and_says_nan_when_there_is_nothing():
    g = [dict(correct=True, ended=True, no_text=False, names_objects=3,
              names_objects_copied=3, question_numbers=2, numbers_copied=1,
              lines=1, lines_right=1),
         dict(correct=False, ended=False, no_text=True, names_objects=1,
              names_objects_copied=0, question_numbers=2, numbers_copied=2,
              lines=3, lines_right=0)]
    s = S.summarise(g)
    assert s["answer_acc"] == 0.5 and s["copy_acc"] == 0.75
    assert s["number_copy"] == 0.75 and s["arith_acc"] == 0.25
    assert math.isnan(S.summarise([{**g[1], "lines": 0}])["arith_acc"])
    with pytest.raises(ValueError, match="no decodes"):
        S.summarise([])


def test_encode_takes_a_layout(tok):
    batch = P.problems(P.HELD_OUT_SEED, 4, "test", M.dials_of(
        M.spec()["candidates"]["narrow"]))
    x = T.encode(tok, batch, 32, 32)
    assert x.shape == (4, 64)
    assert (x[:, 31] != EOS_ID).all() and (x[:, -1] == EOS_ID).all()
    with pytest.raises(ValueError, match="too long for the layout"):
        T.encode(tok, P.problems(P.HELD_OUT_SEED, 50, "test"), 32, 32)


def test_every_candidate_layout_is_the_rules():
    for name, cand in M.spec()["candidates"].items():
        dials = M.dials_of(cand)
        assert M.layout_by_rule(dials) == (cand["prompt_length"],
                                           cand["gen_length"]), name
        assert M.trained_templates(dials) == len(
            set(cand["templates"]) - P.UNSEEN_TEMPLATES)


RULE = dict(min_copy_acc=0.5, min_ended_share=0.9, min_answer_acc=0.05,
            max_answer_acc=0.6)


def _final(templates, names, copy, answer, ended=1.0):
    return dict(trained_templates=templates, names=names, copy_acc=copy,
                answer_acc=answer, ended_share=ended)


def test_the_rule_picks_the_most_varied_eligible_world():
    finals = {"narrow": _final(6, 24, 0.9, 0.5), "middle": _final(12, 48, 0.6, 0.2),
              "wide": _final(24, 96, 0.2, 0.01)}
    assert M.choose(finals, RULE)[0] == "middle"
    finals["middle"]["answer_acc"] = 0.7  # too easy: nothing left for the ladder
    assert M.choose(finals, RULE)[0] == "narrow"
    finals["narrow"]["ended_share"] = 0.5
    name, why = M.choose(finals, RULE)
    assert name == "narrow" and "none eligible" in why  # the highest copy share
    finals["narrow"]["copy_acc"] = float("nan")
    assert M.choose(finals, RULE)[0] == "middle"
    with pytest.raises(ValueError, match="no candidate"):
        M.choose({}, RULE)


def test_the_registry_states_the_rule_and_unknown_candidates_are_refused():
    pilot = M.spec()
    assert set(pilot["rule"]) == set(RULE)
    assert pilot["steps"] > 0 and pilot["final_problems"] >= 400
    with pytest.raises(ValueError, match="unknown candidate"):
        M.run("nope")


def test_training_logs_skills_in_a_candidate_world(tmp_path, monkeypatch, tok):
    monkeypatch.setattr(T, "EVAL_PROBLEMS", 8)
    monkeypatch.setattr(T, "DECODE_PROBLEMS", 4)
    monkeypatch.setitem(T.SIZES, "small", dict(hidden_size=32, num_hidden_layers=1,
                                               num_attention_heads=2,
                                               intermediate_size=64))
    dials = M.dials_of(M.spec()["candidates"]["narrow"])
    out = T.train("small", tmp_path / "n", steps=4, log=lambda m: None, dials=dials,
                  prompt_length=32, gen_length=32, tokenizer=tok, batch_size=4,
                  eval_every=2, decode_every=4, checkpoint_every=2, warmup=1)
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert {"copy_acc", "arith_acc", "number_copy", "ended_share",
            "tokens_per_nfe"} <= set(log[-1])
    summary = json.loads((out / "training.json").read_text())
    assert summary["dials"]["templates"] == sorted(dials.templates)
    assert (summary["prompt_length"], summary["gen_length"]) == (32, 32)
    model = T.DLMForMaskedDiffusion.from_pretrained(out, dtype=torch.float32)
    assert model.config.max_position_embeddings == 64
    final = M.final_figures(model, tok, dials, 32, 32, 6)
    assert final["problems"] == 6 and 0 <= final["answer_acc"] <= 1
    assert len(final["examples"]) == 3
