"""The math world: its tokenizer, roles, prompts, training layout and resume."""

import json

import pytest
import torch

from dlmspec_min.measures.tagger import FUNCTION, PUNCT, SPECIAL
from dlmspec_min.ssld import inputs
from dlmspec_min.texts import problems as P
from dlmspec_min.texts.tokenizer import (
    BOS_ID,
    EOS_ID,
    MASK_ID,
    PAD_ID,
    continues_word,
    words_of,
)
from dlmspec_min.training import train_math as T
from dlmspec_min.worlds import get_world
from dlmspec_min.worlds.gsm import ROLE_CLASS, token_roles, word_role

WORLD = get_world("math")


@pytest.fixture(scope="module")
def tok():
    return WORLD.tokenizer()


@pytest.fixture(scope="module")
def held():
    return WORLD.problems(300)


def test_every_grammar_word_is_one_token_and_numbers_are_digits(tok):
    words = {w for q, lines in P.TEMPLATES.values() for line in [q, *lines]
             for w in line.split() if not w.startswith("{")}
    for w in sorted(words | set(P.NAMES) | set(P.OBJECTS) | set(P.CONTAINERS)):
        ids = tok(w, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, (w, tok.convert_ids_to_tokens(ids))
    ids = tok("4096", add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["4", "##0", "##9", "##6"]
    assert continues_word(tok, ids) == [False, True, True, True]
    assert not any(any(ch.isdigit() for ch in piece) and piece.lstrip("#") not in
                   P.ANSWER_MARK + "0123456789" for piece in tok.get_vocab())


def test_token_counts_words_and_decode_round_trip(tok, held):
    for p in held:
        q = tok(p.question_text, add_special_tokens=False)["input_ids"]
        s = tok(p.solution_text, add_special_tokens=False)["input_ids"]
        assert len(q) == P.n_tokens(p.question) and len(s) == P.n_tokens(p.solution)
        assert words_of(tok, q + s) == [w for w, _ in p.question + p.solution]
        assert " ".join(tok.decode(s).split()) == " ".join(p.solution_text.split())


def test_token_roles_are_the_grammar_roles(tok, held):
    for p in held:
        words = p.question + p.solution
        ids = tok([w for w, _ in words], is_split_into_words=True,
                  add_special_tokens=False)
        expected = [words[w][1] for w in ids.word_ids()]
        assert token_roles(tok, ids["input_ids"]) == expected
        classes = WORLD.token_classes(tok, [BOS_ID, *ids["input_ids"], EOS_ID])
        assert classes[0] == classes[-1] == SPECIAL
        assert classes[1:-1] == [ROLE_CLASS[r] for r in expected]
    assert word_role("Mia") == P.NAME and word_role("17") == P.NUMBER
    assert word_role("stamps") == P.OBJECT and word_role("####") == P.SYMBOL
    assert word_role("xyzzy") == P.WORD
    assert (ROLE_CLASS[P.WORD], ROLE_CLASS[P.SYMBOL]) == (FUNCTION, PUNCT)


def test_anchors_are_content_words_at_their_first_piece(tok):
    ids = torch.tensor([tok("Mia has 305 stamps . #### 305",
                            add_special_tokens=False)["input_ids"]])
    pieces = tok.convert_ids_to_tokens(ids[0])
    roles = WORLD.roles()
    word = inputs.anchor_mask(tok, ids, roles, "word")[0].tolist()
    piece = inputs.anchor_mask(tok, ids, roles, "piece")[0].tolist()
    assert [p for p, a in zip(pieces, word, strict=True) if a] == ["Mia", "3", "stamps",
                                                                   "3"]
    assert sum(piece) == 8  # every digit piece of both numbers, the name and object
    assert inputs.content_mask(tok, ids, roles)[0].tolist() == piece


def test_prompts_are_left_padded_held_out_questions(tok):
    x = WORLD.prompts(tok, 4)
    assert x.shape == (4, T.PROMPT_LENGTH)
    for row, p in zip(x, WORLD.problems(4), strict=True):
        row = row.tolist()
        b = row.index(BOS_ID)
        assert set(row[:b]) <= {PAD_ID} and tok.decode(row[b + 1 :]) == p.question_text
    assert torch.equal(WORLD.prompts(tok, 2, seed=1), x[2:4])
    with pytest.raises(ValueError, match="n must be"):
        WORLD.prompts(tok, 0)


def test_encode_layout_and_the_loss_sees_only_the_response(tok, held):
    x = T.encode(tok, held[:8])
    assert x.shape == (8, T.SEQ_LEN) and (x[:, T.PROMPT_LENGTH - 1] != PAD_ID).all()
    assert (x[:, -1] == EOS_ID).all()
    for row, p in zip(x, held[:8], strict=True):
        assert T.answer_of(tok, row[T.PROMPT_LENGTH:]) == p.answer

    class Spy(torch.nn.Module):
        def forward(self, inp, output_mask=None):
            self.inp, self.mask = inp, output_mask
            return type("O", (), {"logits": torch.zeros(int(output_mask.sum()), 900)})

    spy = Spy()
    T.sft_loss(spy, x, torch.Generator().manual_seed(0))
    assert not spy.mask[:, : T.PROMPT_LENGTH].any() and spy.mask.any()
    assert torch.equal(spy.inp[:, : T.PROMPT_LENGTH], x[:, : T.PROMPT_LENGTH])
    assert (spy.inp[spy.mask] == MASK_ID).all()


def test_answer_of_reads_the_first_answer_line(tok):
    enc = tok("Mia has 3 + 4 = 7 stamps . #### 7", add_special_tokens=False)
    assert T.answer_of(tok, enc["input_ids"] + [EOS_ID, 9, 9]) == 7
    assert T.answer_of(tok, tok("Mia has 7 stamps .")["input_ids"]) is None
    assert T.answer_of(tok, tok("#### stamps")["input_ids"]) is None
    # punctuation after the number: read as the skills' grader reads it
    ids = tok("Mia has 7 stamps . #### 7 .")["input_ids"]
    assert T.answer_of(tok, ids) == 7
    from dlmspec_min.training import math_skills
    assert math_skills.answer_in(math_skills.words_before_eos(tok, ids)) == 7


def quiet(msg):
    """A training log that says nothing."""


def tiny_training(monkeypatch, evals: int, decodes: int, width: int):
    """Make ``small`` a one-layer model of ``width`` that evaluates ``evals``
    held-out problems and decodes ``decodes``: a training run of seconds."""
    monkeypatch.setattr(T, "EVAL_PROBLEMS", evals)
    monkeypatch.setattr(T, "DECODE_PROBLEMS", decodes)
    monkeypatch.setitem(T.SIZES, "small", dict(hidden_size=width, num_hidden_layers=1,
                                               num_attention_heads=2,
                                               intermediate_size=2 * width))


def test_resume_gives_the_same_weights_as_one_run(tmp_path, monkeypatch):
    tiny_training(monkeypatch, evals=8, decodes=4, width=32)
    hp = dict(batch_size=4, eval_every=2, decode_every=4, checkpoint_every=2,
              warmup=2)
    one = T.train("small", tmp_path / "one", steps=6, log=quiet, **hp)
    assert T.train("small", tmp_path / "two", steps=6, stop_after=0.0, log=quiet,
                   **hp) is None
    assert (tmp_path / "two" / T.CHECKPOINT).exists()
    two = T.train("small", tmp_path / "two", log=quiet, **hp)
    assert not (two / T.CHECKPOINT).exists()
    from safetensors.torch import load_file

    a, b = load_file(one / "model.safetensors"), load_file(two / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    log_one = (one / "train_log.jsonl").read_text().splitlines()
    log_two = (two / "train_log.jsonl").read_text().splitlines()
    strip = lambda lines: [{k: v for k, v in json.loads(x).items()  # noqa: E731
                            if k != "elapsed_s"} for x in lines]
    assert strip(log_one) == strip(log_two)
    assert [r["step"] for r in strip(log_one)] == [0, 2, 4, 6]
    assert "answer_acc" in strip(log_one)[-1]
    summary = json.loads((one / "training.json").read_text())
    assert summary["steps"] == 6 and summary["world"] == "math"
    # a checkpoint resumes only under the settings it was made with
    assert T.train("small", tmp_path / "three", steps=6, stop_after=0.0, log=quiet,
                   **hp) is None
    with pytest.raises(ValueError, match="other settings"):
        T.train("small", tmp_path / "three", steps=8, log=quiet, **hp)
    with pytest.raises(ValueError, match="other settings"):
        T.train("small", tmp_path / "three", log=quiet, **{**hp, "lr": 0.1})
    # ... but how a step is computed may change, and the change is logged
    three = T.train("small", tmp_path / "three", log=quiet, **{**hp, "bf16": False})
    compute = json.loads((three / "training.json").read_text())["compute"]
    assert compute == [{"from_step": 0, "threads": 1, "bf16": True},
                       {"from_step": 2, "threads": 1, "bf16": False}]
    assert summary["compute"] == [{"from_step": 0, "threads": 1, "bf16": True}]


def test_c6s_prompt_pair_is_refused_with_its_reason(tok):
    with pytest.raises(ValueError, match="no prompts without context"):
        WORLD.prompt_pair(tok, 3, T.PROMPT_LENGTH)


def test_training_rows_are_fresh_problems_in_the_training_layout(tok):
    rows = WORLD.training_rows(tok, 5, seed=2)
    assert rows.shape == (5, T.SEQ_LEN) and WORLD.row_length == T.SEQ_LEN
    assert torch.equal(rows, WORLD.training_rows(tok, 5, seed=2))
    assert not torch.equal(rows, WORLD.training_rows(tok, 5, seed=3))
    held = {tuple(r.tolist()) for r in WORLD.held_out_rows(200)[1]}
    assert not held & {tuple(r.tolist()) for r in rows}  # no held-out problem
    assert (rows[:, T.PROMPT_LENGTH - 1] != PAD_ID).all()  # a question ends the prompt
    # the SID head's windows: anchors only where the roles say content
    from dlmspec_min.ssld.drafting import training_windows

    win, anchors = training_windows(WORLD, tok, 5, 2, prompt=WORLD.prompts(tok, 2))
    assert torch.equal(win, rows)
    assert torch.equal(anchors, inputs.anchor_mask(tok, rows, WORLD.roles()))
    long = f"math prompts are {T.PROMPT_LENGTH} tokens long"
    with pytest.raises(ValueError, match=long):
        WORLD.training_rows(tok, 5, 2, prompt=torch.zeros(2, 1, dtype=torch.long))


def test_held_out_rows_and_token_counts(tok):
    ref_tok, rows = WORLD.held_out_rows(4, seed=1)
    assert ref_tok.vocab_size == tok.vocab_size
    assert torch.equal(rows[:, : T.PROMPT_LENGTH], WORLD.prompts(tok, 4, seed=1))
    counts = WORLD.token_counts(tok, vocab_size=1000)
    assert counts.shape == (1000,) and counts[[PAD_ID, MASK_ID]].sum() == 0
    digits = [tok.convert_tokens_to_ids(f"##{d}") for d in "0123456789"]
    assert counts[digits].min() > 0  # every digit occurs
    assert (counts == WORLD.token_counts(tok, vocab_size=1000)).all()


def test_git_never_takes_a_checkpoint_from_a_model_folder():
    # a run left unfinished in data/models/math/<size> holds a ~92 MB float32
    # checkpoint; the repository takes final half-precision weights only
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout")
    for size in T.SIZES:
        path = f"data/models/math/{size}/{T.CHECKPOINT}"
        ran = subprocess.run(["git", "check-ignore", "-q", path], cwd=root)
        assert ran.returncode == 0, f"git would commit {path}"
    ran = subprocess.run(["git", "check-ignore", "-q", "data/models/math/small/"
                          "model.safetensors"], cwd=root)
    assert ran.returncode == 1, "the final weights must stay committable"


def test_the_ladder_learning_rate_scales_as_one_over_width_as_claims_yml_says():
    from pathlib import Path

    import yaml

    claims = Path(__file__).resolve().parents[1] / "book" / "claims.yml"
    recipe = yaml.safe_load(claims.read_text())["checks"]["models"]["ladder_recipe"]
    assert recipe["lr_scaling"] == "1/width"
    for size, shape in T.SIZES.items():
        want = recipe["lr_at_width_128"] * 128 / shape["hidden_size"]
        assert T.lr_for(size) == pytest.approx(want, rel=1e-12)
    assert T.lr_for("small") == 1e-3
    assert T.lr_for("base") == pytest.approx(5e-4)
    assert T.lr_for("large") == pytest.approx(4e-4)


def test_a_ladder_trains_on_its_own_layout_unless_told_otherwise(tmp_path, monkeypatch):
    tiny_training(monkeypatch, evals=4, decodes=2, width=16)
    hp = dict(batch_size=2, eval_every=2, decode_every=2, checkpoint_every=2,
              warmup=1, bf16=False)
    chains = T.train("small", tmp_path / "c", steps=1, log=quiet, world="math_chains",
                     **hp)
    record = json.loads((chains / "training.json").read_text())
    assert (record["prompt_length"], record["gen_length"]) == (48, 64)
    assert record["world"] == "math_chains" and record["dials"]["min_steps"] == 3
    free = T.train("small", tmp_path / "f", steps=1, log=quiet, world="math", **hp)
    record = json.loads((free / "training.json").read_text())
    assert (record["prompt_length"], record["gen_length"]) == (T.PROMPT_LENGTH,
                                                               T.GEN_LENGTH)
