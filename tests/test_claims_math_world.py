"""Every claim's measurement runs in the math world (``world=MATH``), at tiny
sizes, with the committed ``math/small`` as the target (random weights would write
no function word) and a tiny random draft with the math tokenizer: the same glue
names as in prose, the world's held-out questions as prompts, and anchors only
where the grammar's roles say content (numbers, names, objects). C6 and C8, which
compare decodes with and without context, measure the math world's prompted side
alone (its models answer questions)."""

import pytest
import torch

from dlmspec_min.experiments import c1_easy_first as c1
from dlmspec_min.experiments import c2_anchor_acceptance as c2
from dlmspec_min.experiments import c3_win_condition as c3
from dlmspec_min.experiments import c4_cluster_verification as c4
from dlmspec_min.experiments import c5_bounded_quality as c5
from dlmspec_min.experiments import c6_conditional as c6
from dlmspec_min.experiments import c7_strong_model as c7
from dlmspec_min.experiments import c8_information as c8
from dlmspec_min.measures import order
from dlmspec_min.texts import problems as P
from dlmspec_min.training import train_math
from dlmspec_min.worlds import MATH, PROSE, get_world
from dlmspec_min.worlds.gsm import token_roles

G = 16  # generated tokens: about the first sentence of a solution
CONTENT_ROLES = {P.NUMBER, P.NAME, P.OBJECT}



@pytest.fixture(scope="module")
def math_small():
    from dlmspec_min.decoding.denoisers import load_denoiser

    return load_denoiser(MATH.draft)


def _same_keys(math_result, prose_result):
    assert list(math_result.values) == list(prose_result.values)


def _anchors_are_content(tok, rows, anchors):
    """Every anchor (B, G) of the generated part of rows (B, P + G) is a content
    role's word start."""
    for row, a in zip(rows, anchors, strict=True):
        roles = token_roles(tok, row.tolist())[-a.shape[0]:]
        assert all(r in CONTENT_ROLES for r, hit in zip(roles, a.tolist(),
                                                         strict=True) if hit)


C1 = dict(n_samples=8, gen_length=20, block_length=10, temperature=1.0, threshold=0.9,
          thresholds=[0.1], n_bootstrap=30, seed=1)


def test_c1_orders_the_math_decodes_of_held_out_questions(tiny_math_pair, tiny_pair):
    r = c1.measure(tiny_math_pair, MATH, c1.Config(**C1))
    assert torch.equal(r.arrays["prompt"], MATH.prompts(tiny_math_pair.tokenizer, 8,
                                                        seed=1))
    _same_keys(r, c1.measure(tiny_pair, PROSE, c1.Config(**C1)))


def test_c1_orders_math_decodes_inside_the_worlds_blocks(tiny_math_pair):
    """In the math world (``order_in_blocks``) every C1 decoder runs in the page's
    blocks and its decode time counts inside each block; a greedy decoder that
    repeats another (the blocked row) shares its result; blocks shorter than a
    decile of decode order are refused."""
    sizes = {**C1, "gen_length": 20, "block_length": 10, "temperature": 0.0}
    r = c1.measure(tiny_math_pair, MATH, c1.Config(**sizes))
    blocked = c1.blocked_name(10)
    assert r.arrays["results"][blocked] is r.arrays["results"][c1.PRIMARY]
    assert r.values["c1_order_unit"].startswith("in blocks of 10 tokens")
    for name, res in r.arrays["results"].items():
        steps = res.commit_step
        assert (steps[:, :10].amax(1) < steps[:, 10:].amin(1)).all(), name
        t = r.arrays["tokens"][name]
        assert t.r.between(0, 1).all() and (t.step <= t.n_steps).all(), name
        assert (t.r == order.within_block_time(
            t.assign(step=t.step_global), 10)).all(), name
    prim = r.arrays["tokens"][c1.PRIMARY]
    assert (prim.n_steps == 10).all()  # one token per step, ten per block
    assert r.values["c1_auc"] == r.values["c1_blocked_auc_within"]
    with pytest.raises(ValueError, match="block_length must be at least 10"):
        c1.measure(tiny_math_pair, MATH, c1.Config(**{**sizes, "block_length": 8}))
    prose = c1.decoders(16, 8, 1.0, 0.9, [0.1])
    assert prose[c1.PRIMARY].block_length == 16  # prose: one block, unchanged
    assert c1.decoders(20, 10, 1.0, 0.9, [0.1], in_blocks=True)[
        "threshold 0.1"].block_length == 10


C2 = dict(n_samples=3, gen_length=G, block_length=4, threshold=0.9, temperature=1.0,
          K=8, levels=1, K_sweep=[4, 8], n_train=16, n_bootstrap=50, seed=0,
          n_codebooks=2)


def test_c2_anchors_are_the_grammars_content_words(tiny_math_pair):
    r = c2.measure(tiny_math_pair, MATH, c2.Config(**C2), paper_alpha=0.0035,
                   paper_tau=3.25)
    tok = tiny_math_pair.tokenizer
    prompt = r.arrays["prompt"]
    assert prompt.shape == (3, train_math.PROMPT_LENGTH)
    rows = torch.cat([prompt, r.arrays["tokens"]], dim=1)
    _anchors_are_content(tok, rows, r.arrays["anchors"])
    # the SID head learned from generated training problems, not Brown
    book = next(iter(r.arrays["books"].values()))
    assert torch.equal(book.windows, MATH.training_rows(tok, C2["n_train"], book.seed))
    assert r.values["c2_n_anchors"] == int(r.arrays["anchors"].sum())


def test_c3_c4_run_in_the_math_world(tiny_math_pair):
    tok = tiny_math_pair.tokenizer
    prompt = MATH.prompts(tok, 3)
    w3 = c3.measure(tiny_math_pair, MATH, c3.Config(
        gen_length=G, block_length=4, threshold=0.9, temperature=1.0, K=8, levels=1,
        n_train=16, n_repeats=1, n_timed=1, n_bootstrap=50, seed=0, n_codebooks=1),
        prompt=prompt)
    assert w3.values["c3_tau_acc"] >= 1
    w4 = c4.measure(tiny_math_pair, MATH, c4.Config(
        n_samples=3, gen_length=G, block_length=4, K=8, K_sweep=[4], n_permutations=20,
        n_bootstrap=30))
    assert w4.values["c4_n_anchors"] >= 0


def test_c8_measures_the_math_world_on_its_questions(tiny_math_pair):
    """C8 in the math world: the anchors' decode and the content-vs-function decode
    answer held-out questions (the latter in the world's blocks, its time counted
    inside each block), and there is no [BOS] case: its values are nan."""
    import math

    tok = tiny_math_pair.tokenizer
    m = c8.measure(tiny_math_pair, MATH, c8.Config(
        n_samples=4, prompt_length=train_math.PROMPT_LENGTH, n_side=4, gen_length=32,
        block_length=16, threshold=0.9, thresholds=[1e-4], temperature=1.0, K=8,
        n_bins=2, n_bootstrap=100, seed=0))
    assert m.facts["P"] == train_math.PROMPT_LENGTH
    assert m.facts["example"] == tok.decode(MATH.prompts(tok, 1)[0].tolist())
    words = m.arrays["words"]
    assert {"block", "step_global"} <= set(words) and (words.n_steps == 16).all()
    assert m.arrays["bos_entropy"] is None
    v = m.values
    assert math.isnan(v["c8_bos_entropy_range"])
    assert math.isnan(v["c8_bos_entropy_range_after_first"])
    assert v["c8_n_anchors"] >= 3 and v["c8_prompt_length"] == train_math.PROMPT_LENGTH
    assert c8.order_group(False) in m.tables["easy"].index
    from dlmspec_min.plumbing import claims

    keys = claims.load_registry()["claims"]["C8"]["keys"]
    assert not set(keys) - set(v) - {"c8_verdict"}, sorted(set(keys) - set(v))


def test_c6_measures_the_math_worlds_prompted_side_alone(tiny_math_pair):
    """Every math decode answers a question: C6's prompted set is the held-out
    questions, and there is no unconditional side to compare with."""
    tok = tiny_math_pair.tokenizer
    assert not MATH.context_free and PROSE.context_free
    sets = c6.prompt_sets(tok, 3, train_math.PROMPT_LENGTH, 0, world=MATH)
    assert list(sets) == [c6.PRO]
    assert torch.equal(sets[c6.PRO], MATH.prompts(tok, 3))
    m = c6.measure(tiny_math_pair, MATH, c6.Config(
        n_samples=3, prompt_length=train_math.PROMPT_LENGTH, gen_length=32,
        block_length=16, threshold=0.5, temperature=1.0, K=8, levels=1, n_train=16,
        n_bootstrap=50, seed=3, prompt_seed=0, n_codebooks=1))
    assert list(m.figures) == [c6.PRO] and m.unconditional_as_claim() is None
    v = m.values
    assert not any(k.startswith("c6_uncond_") for k in v) and "c6_n_differ" not in v
    assert v["c6_auc_words"] == c6.NO_UNC and v["c6_bar_words"].endswith("with prompts")
    assert v["c6_prompt_length"] == train_math.PROMPT_LENGTH
    # the rule reads only the prompted side, so it is computed here
    from dlmspec_min.plumbing import claims

    assert claims.verdict("C6", v, claims.load_registry()) in claims.VERDICTS
    assert list(m.tables["side_by_side"].columns) == [c6.PRO]
    assert "without" in c6.verdict_table(m, "p", "v", "v", "t").index[1]


def test_the_math_world_s_answers_belong_to_its_prompts():
    tok = MATH.tokenizer()
    for seed in (0, 2):
        rows = MATH.held_out_rows(5, seed)[1]  # question, then the true solution
        P = train_math.PROMPT_LENGTH
        assert torch.equal(rows[:, :P], MATH.prompts(tok, 5, seed))
        answers = MATH.answers(5, seed)
        solutions = rows[:, train_math.PROMPT_LENGTH:]
        assert MATH.answer_correct(tok, solutions, answers).tolist() == [1.0] * 5
        wrong = [a + 1 for a in answers]
        assert MATH.answer_correct(tok, solutions, wrong).tolist() == [0.0] * 5
    assert PROSE.answers(5) is None
    with pytest.raises(ValueError, match="3 decodes but 2 answers"):
        MATH.answer_correct(tok, solutions[:3], answers[:2])


def test_c5_s_quality_in_the_math_world_is_the_answer_accuracy(tiny_math_pair):
    """Issue 26, item 3: the bound is on exact final-answer accuracy, the judge's
    agreement beside it (math/small decodes the whole 96-token window)."""
    r = c5.measure(tiny_math_pair, MATH, c5.Config(
        n_samples=2, gen_length=train_math.GEN_LENGTH,
        block_length=train_math.BLOCK_LENGTH, threshold=0.9, thresholds=[0.9],
        temperature=0.0, K=8, quality_bound=0.05, n_bootstrap=30, seed=0))
    res, v = r.tables["decoders"], r.values
    assert res.attrs["quality"] == c5.ACCURACY and v["c5_quality_measure"] == (
        "answer accuracy")
    answers = MATH.answers(2, 0)
    for key, name in (("base", c5.BASELINE), ("relaxed", c5.RELAXED)):
        gen = r.arrays["runs"][name][0]
        acc = MATH.answer_correct(tiny_math_pair.tokenizer, gen, answers).mean()
        assert v[f"c5_answer_acc_{key}"] == pytest.approx(acc)
        assert v[f"c5_quality_{key}"] == pytest.approx(acc)
    assert v["c5_quality_drop"] == pytest.approx(
        v["c5_answer_acc_base"] - v["c5_answer_acc_relaxed"])
    assert "judge agreement" in res.columns  # beside it


def test_c7_measures_determinedness_on_held_out_problems(math_small):
    names = dict.fromkeys(("small", "base", "large"), MATH.draft)
    roles = c7.StrongModels(names, {MATH.draft: math_small}, MATH.draft)
    r = c7.measure(roles, MATH, c7.Config(
        n_windows=4, n_positions=3, batch_size=8, n_samples=3, n_tau=2, gen_length=G,
        block_length=4, threshold=0.9, temperature=1.0, K=8, levels=1, n_train=16,
        n_bootstrap=50, seed=0, n_codebooks=1), paper_ratio=2, tau_paper=3.25)
    held = r.arrays["held"]
    assert torch.equal(torch.as_tensor(held), MATH.held_out_rows(4, 0)[1])
    assert r.values["c7_det_ratio"] == pytest.approx(1.0)  # base and large the same


def test_prose_is_the_default_world():
    for m in (c1, c2, c3, c4, c5, c6, c7, c8):
        assert m.Config().world == "prose" and get_world(m.Config().world) is PROSE
