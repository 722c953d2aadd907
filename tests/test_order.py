"""Decode-order analysis (C1): synthetic traces, then a tiny random model end to end."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from dlmspec_min.decoding.config import DecodeConfig, DecodeResult
from dlmspec_min.decoding.decode import generate
from dlmspec_min.decoding.denoisers import load_denoiser
from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion
from dlmspec_min.measures import order
from dlmspec_min.measures.tagger import CONTENT, FUNCTION, PUNCT, SPECIAL, Lexicon
from dlmspec_min.texts.tokenizer import load_tokenizer, tokenizer_dir


@pytest.fixture(scope="module")
def tok():
    try:
        return load_tokenizer()
    except FileNotFoundError as err:
        pytest.skip(str(err))


LEXICON = Lexicon({"the": FUNCTION, "of": FUNCTION, ",": PUNCT, ".": PUNCT},
                  {"the": FUNCTION, "of": FUNCTION})  # everything else: content


def _ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def _result(tokens, prompt_length, commit_step):
    """A DecodeResult built by hand from tokens and commit steps."""
    tokens = torch.as_tensor(tokens)
    steps = torch.as_tensor(commit_step)
    nfe = steps.amax(1)
    per_step = torch.zeros(steps.shape[0], int(nfe.max()), dtype=torch.long)
    for b in range(steps.shape[0]):
        per_step[b] = torch.bincount(steps[b] - 1, minlength=per_step.shape[1])
    return DecodeResult(tokens=tokens, prompt_length=prompt_length, nfe=nfe,
                        n_forwards=int(nfe.max()), token_forwards=nfe * tokens.shape[1],
                        commit_step=steps, committed_per_step=per_step)


# --- set-up and decode time ----------------------------------------------------------


def test_unconditional_prompt_prefers_bos_then_cls_then_empty():
    bos = SimpleNamespace(bos_token_id=2, cls_token_id=101)
    cls = SimpleNamespace(bos_token_id=None, cls_token_id=101)
    none = SimpleNamespace(bos_token_id=None)
    assert order.unconditional_prompt(bos, 3).tolist() == [[2]] * 3
    assert order.unconditional_prompt(cls, 2).tolist() == [[101]] * 2
    empty = order.unconditional_prompt(none, 2)
    assert empty.shape == (2, 0) and empty.dtype == torch.long
    with pytest.raises(ValueError, match="n must be"):
        order.unconditional_prompt(bos, 0)


def test_one_token_per_step_config():
    cfg = order.one_token_per_step(12)
    assert (cfg.steps, cfg.block_length, cfg.rule) == (12, 12, "schedule")
    assert order.one_token_per_step(12, 4, "random").remasking == "random"
    with pytest.raises(ValueError, match="multiple of block_length"):
        order.one_token_per_step(12, 5)


def test_row_generators_are_seeded_distinct_and_stream_specific():
    draws = [[torch.rand(3, generator=g) for g in order.row_generators(5, 4, stream=s)]
             for s in (0, 0, 1)]
    assert all(torch.equal(a, b) for a, b in zip(draws[0], draws[1], strict=True))
    assert len({tuple(d.tolist()) for d in draws[0]}) == 4
    assert not any(torch.equal(a, b) for a, b in zip(draws[0], draws[2], strict=True))


def test_normalized_decode_time():
    g = torch.Generator().manual_seed(0)
    steps = torch.stack([torch.randperm(9, generator=g) + 1 for _ in range(3)])
    r = order.normalized_decode_time(steps)
    assert r.dtype == torch.float64
    for row_r, row_s in zip(r, steps, strict=True):
        assert sorted(row_r.tolist()) == pytest.approx([k / 8 for k in range(9)])
        assert row_r[row_s == 1].item() == 0 and row_r[row_s == 9].item() == 1
    parallel = torch.tensor([[1, 1, 2, 3], [1, 1, 1, 1]])
    assert order.normalized_decode_time(parallel).tolist() == [[0, 0, 0.5, 1], [0] * 4]
    assert order.normalized_decode_time(parallel, torch.tensor([5, 2]))[0, 3] == 0.5
    with pytest.raises(ValueError, match="never committed"):
        order.normalized_decode_time(torch.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="exceeds"):
        order.normalized_decode_time(torch.tensor([[1, 3]]), torch.tensor([2]))


# --- the token table -----------------------------------------------------------------


def test_token_table_classes_times_sizes_and_frequency(tok):
    gen = _ids(tok, "the unbelievably dog , of")  # 'unbelievably' is 6 pieces
    G = len(gen)
    tokens = torch.tensor([[tok.bos_token_id, *gen], [tok.bos_token_id, *gen]])
    steps = torch.tensor([list(range(1, G + 1)),  # one per step, left to right
                          [1] * 5 + [2] * (G - 5)])  # a big step, then the rest
    counts = np.zeros(len(tok), dtype=np.int64)
    counts[gen[0]] = 9
    t = order.token_table(_result(tokens, 1, steps), tok, LEXICON, counts)
    assert len(t) == 2 * G and list(t.seq.unique()) == [0, 1]
    row0 = t[t.seq == 0]
    expected = [FUNCTION] + [CONTENT] * 6 + [CONTENT, PUNCT, FUNCTION]
    assert row0.cls.tolist() == expected  # '##' pieces inherit their word's class
    assert row0.r.tolist() == pytest.approx(np.arange(G) / (G - 1))
    assert (row0.step_size == 1).all()
    row1 = t[t.seq == 1]
    assert row1.step_size.tolist() == [5] * 5 + [G - 5] * (G - 5)
    assert row1.r.tolist() == [0.0] * 5 + [1.0] * (G - 5)
    assert row0.log_freq.iloc[0] == pytest.approx(np.log(10))
    assert (row0.log_freq.iloc[1:] == 0).all()
    assert row0.piece.tolist() == tok.convert_ids_to_tokens(gen)


def test_special_tokens_are_counted_and_excluded(tok):
    gen = [tok.eos_token_id, *_ids(tok, "the dog")]
    tokens = torch.tensor([[tok.bos_token_id, *gen]])
    t = order.token_table(_result(tokens, 1, torch.tensor([[1, 2, 3]])), tok, LEXICON)
    assert t.cls.tolist() == [SPECIAL, FUNCTION, CONTENT]
    out = order.class_order(t, n_boot=10)
    assert out["n_special"] == 1 and out["n_content"] == 1 and out["n_function"] == 1
    assert out["auc"] == 1.0
    shares = order.grouped_shares(t, pd.Series(0, index=t.index), n_boot=10)
    assert shares.n_group.tolist() == [2, 2, 2]  # the [EOS] is not a word


# --- analyses on synthetic tables ----------------------------------------------------


def _synthetic_table(n_seq=40, G=20, seed=0, effect=0.0):
    """Content tokens sit at odd positions; r is a noisy function of position
    (plus ``effect`` for content); frequency is random."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_seq):
        pos = np.arange(G)
        is_content = rng.random(G) < 0.2 + 0.6 * (pos / G)  # more content late
        cls = np.where(is_content, CONTENT, FUNCTION)
        score = pos / G + effect * is_content + 0.3 * rng.normal(size=G)
        step = np.argsort(np.argsort(score)) + 1  # one token per step
        rows.append(pd.DataFrame(dict(
            seq=s, pos=pos, cls=cls, step=step, n_steps=G, r=(step - 1) / (G - 1),
            step_size=1, log_freq=rng.normal(size=G))))
    return pd.concat(rows, ignore_index=True)


def test_class_order_matches_a_pairwise_reference():
    t = _synthetic_table(effect=0.3)
    out = order.class_order(t, n_boot=200, seed=1)
    con, fun = t[t.cls == CONTENT].r.to_numpy(), t[t.cls == FUNCTION].r.to_numpy()
    ref = ((con[:, None] > fun[None]) + 0.5 * (con[:, None] == fun[None])).mean()
    assert out["auc"] == pytest.approx(ref)
    assert out["auc_lo"] < out["auc"] < out["auc_hi"]
    assert out["mean_content"] == pytest.approx(con.mean())
    assert out["n_punct"] == 0 and np.isnan(out["mean_punct"])
    assert out["p"] < 1e-6
    with pytest.raises(ValueError, match="both content and function"):
        order.class_order(t[t.cls == CONTENT])


def test_order_bins_split_every_row_evenly():
    t = _synthetic_table(n_seq=3, G=50)
    bins = order.order_bins(t)
    assert bins.between(0, 9).all()
    assert (bins.groupby(t.seq).value_counts() == 5).all()
    shares = order.bin_shares(t, n_boot=50)
    assert set(shares.bin) == set(range(10))
    total = shares.groupby("bin").share.sum()
    assert np.allclose(total, 1.0)
    manual = (t.assign(b=bins).query("b == 0").cls == CONTENT).mean()
    got = shares.query("bin == 0 and cls == @CONTENT").share.item()
    assert got == pytest.approx(manual)


def test_regression_position_effects_absorb_a_position_confound():
    # r depends on position only, and content is more common late: the raw AUC
    # says "content late", the regression with position fixed effects does not
    confounded = _synthetic_table(n_seq=80, effect=0.0)
    assert order.class_order(confounded, n_boot=50)["auc"] > 0.55
    fit = order.order_regression(confounded)
    assert list(fit.index) == ["const", "content", "log_freq"]
    assert abs(fit.loc["content", "coef"]) < 2.5 * fit.loc["content", "se"]
    assert fit.attrs["n_clusters"] == 80
    raw = order.order_regression(confounded, position=False, frequency=False)
    assert list(raw.index) == ["const", "content"]
    assert raw.loc["content", "coef"] > 4 * raw.loc["content", "se"]  # confounded
    con = confounded.cls == CONTENT
    diff = confounded.r[con].mean() - confounded.r[~con].mean()
    assert raw.loc["content", "coef"] == pytest.approx(diff)  # OLS on a dummy
    real = order.order_regression(_synthetic_table(n_seq=80, effect=0.5))
    assert real.loc["content", "coef"] > 0.1 and real.loc["content", "p"] < 1e-4
    with pytest.raises(ValueError, match="log_freq"):
        order.order_regression(confounded.drop(columns="log_freq"))
    with pytest.raises(ValueError, match="constant"):
        order.order_regression(confounded.assign(log_freq=1.0))


def test_within_block_time():
    t = pd.DataFrame(dict(seq=0, pos=range(6), step=[2, 1, 3, 4, 6, 5]))
    r = order.within_block_time(t, 3)
    assert r.tolist() == [0.5, 0.0, 1.0, 0.0, 1.0, 0.5]


def test_block_times_count_the_decode_inside_each_block():
    # two rows, blocks of 3: row 0's blocks take steps 1-3 and 4-6, row 1's
    # first block one step (all three at once), its second two
    t = pd.DataFrame(dict(seq=[0] * 6 + [1] * 6, pos=list(range(6)) * 2,
                          step=[2, 1, 3, 4, 6, 5, 1, 1, 1, 3, 2, 2],
                          n_steps=[6] * 6 + [3] * 6))
    t["r"] = (t.step - 1) / (t.n_steps - 1)
    b = order.block_times(t, 3)
    assert b.step.tolist() == [2, 1, 3, 1, 3, 2, 1, 1, 1, 2, 1, 1]
    assert b.n_steps.tolist() == [3] * 6 + [1] * 3 + [2] * 3
    assert b.r.tolist() == [0.5, 0.0, 1.0, 0.0, 1.0, 0.5, 0, 0, 0, 1.0, 0, 0]
    assert b.r.tolist() == order.within_block_time(t, 3).tolist()
    assert b.block.tolist() == [0, 0, 0, 1, 1, 1] * 2
    assert (b.step_global.tolist(), b.r_global.tolist()) == (t.step.tolist(),
                                                             t.r.tolist())
    assert order.order_bins(b, 3).tolist() == [1, 0, 2, 0, 2, 1, 0, 0, 0, 1, 0, 0]
    assert order.step_keys(b) == ["seq", "block", "step"]
    assert order.step_keys(t) == ["seq", "step"]
    assert "block" not in t  # the input is left as it was
    interleaved = t.assign(step=[1, 3, 5, 2, 4, 6] + [1, 1, 1, 3, 2, 2])
    with pytest.raises(ValueError, match="one after the other"):
        order.block_times(interleaved, 3)
    with pytest.raises(ValueError, match="block_length"):
        order.block_times(t, 0)


def test_step_size_bins_and_shares():
    labels = order.step_size_bin([1, 2, 3, 4, 5, 8, 9, 16, 17, 40])
    assert list(labels.astype(str)) == ["1", "2", "3-4", "3-4", "5-8", "5-8", "9-16",
                                        "9-16", "17+", "17+"]
    with pytest.raises(ValueError, match="start at 1"):
        order.step_size_bin([1], edges=(2, 4))
    # one row: a step of 3 glue tokens, a step of 2 function, then 2 single content
    t = pd.DataFrame(dict(seq=0, pos=range(7), step=[1, 1, 1, 2, 2, 3, 4],
                          cls=[PUNCT] * 3 + [FUNCTION] * 2 + [CONTENT] * 2,
                          step_size=[3, 3, 3, 2, 2, 1, 1], n_steps=4))
    t["r"] = (t.step - 1) / 3
    s = order.step_size_shares(t, n_boot=20).set_index(["size", "cls"])
    assert s.loc[("1", CONTENT), "share"] == 1.0
    assert s.loc[("2", FUNCTION), "share"] == 1.0
    assert s.loc[("3-4", PUNCT), "share"] == 1.0
    assert s.loc[("3-4", PUNCT), "n_steps_in_bin"] == 1
    assert s.loc[("1", CONTENT), "n_steps_in_bin"] == 2
    assert s.loc[("1", CONTENT), "mean_r"] == pytest.approx(5 / 6)
    sp = order.single_vs_parallel(t, n_boot=20).set_index(["kind", "cls"])
    assert sp.loc[("single", CONTENT), "share"] == 1.0
    assert sp.loc[("parallel", PUNCT), "share"] == pytest.approx(0.6)


# --- end to end on a tiny random model -----------------------------------------------


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, tok):
    """A random-weight DLMForMaskedDiffusion saved with the project's tokenizer."""
    path = tmp_path_factory.mktemp("tiny_dlm")
    torch.manual_seed(0)
    model = DLMForMaskedDiffusion(DLMConfig(
        vocab_size=len(tok), hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64))
    model.save_pretrained(path)
    for f in tokenizer_dir().iterdir():
        shutil.copy(f, path / f.name)
    return path


def test_end_to_end_on_a_tiny_random_model(tiny_model_dir, tok):
    den, tok2 = load_denoiser(str(tiny_model_dir))
    n, G = 6, 12
    prompt = order.unconditional_prompt(tok2, n)
    words = tok2.convert_ids_to_tokens(list(range(len(tok2))))
    # a code-path lexicon: even token ids are function words, odd ones content
    lex = Lexicon({w.removeprefix("##"): (FUNCTION, CONTENT)[i % 2]
                   for i, w in enumerate(words)}, {})
    counts = order.token_counts(tok2, [["the", "dog", "ran"], ["the", "cat"]])
    assert counts[_ids(tok2, "the")[0]] == 2 and counts.sum() == 5
    assert len(counts) == len(tok2)
    counts = np.arange(len(tok2))  # random tokens need varied frequencies

    greedy = generate(den, prompt, order.one_token_per_step(G))
    assert (greedy.generated == greedy.generated[0]).all()  # why we sample

    def gens(stream=0):
        return order.row_generators(3, n, stream=stream)

    conf = generate(den, prompt, order.one_token_per_step(G, temperature=1.0), gens())
    assert (conf.committed_per_step == 1).all() and (conf.nfe == G).all()
    assert len({tuple(r) for r in conf.generated.tolist()}) > 1
    random_cfg = order.one_token_per_step(G, remasking="random", temperature=1.0)
    runs = [generate(den, prompt, random_cfg, gens(1)) for _ in range(2)]
    assert torch.equal(runs[0].tokens, runs[1].tokens)  # seeded
    assert torch.equal(runs[0].commit_step, runs[1].commit_step)
    thr = generate(den, prompt, DecodeConfig(gen_length=G, rule="threshold",
                                             threshold=0.05, temperature=1.0), gens())
    for res in (conf, runs[0], thr):
        t = order.token_table(res, tok2, lex, counts)
        assert len(t) == n * G and t.r.between(0, 1).all()
        out = order.class_order(t, n_boot=50)
        assert 0 <= out["auc_lo"] <= out["auc"] <= out["auc_hi"] <= 1
        assert np.allclose(order.bin_shares(t, n_boot=20).groupby("bin").share.sum(), 1)
    fit = order.order_regression(order.token_table(conf, tok2, lex, counts))
    assert np.isfinite(fit.to_numpy()).all()
    t = order.token_table(thr, tok2, lex, counts)
    assert (t.groupby(["seq", "step"]).size() == t.groupby(["seq", "step"])
            .step_size.first()).all()  # step_size counts the step's tokens
    sizes = order.step_size_shares(t, n_boot=20)
    assert sizes.groupby("size", observed=True).share.sum().round(9).eq(1).all()


def test_parallel_summary_reports_nan_for_a_missing_kind_of_step(tok):
    gen = _ids(tok, "the dog , of cat")
    tokens = torch.tensor([[tok.bos_token_id, *gen]] * 2)
    steps = torch.tensor([[1, 2, 3, 4, 5], [1, 3, 1, 1, 2]])
    res = _result(tokens, 1, steps)
    t = order.token_table(res, tok, LEXICON)
    out = order.parallel_summary(res, t, n_boot=20)
    assert out["tokens_per_step"] == pytest.approx(10 / 8)
    assert out["parallel_fraction"] == pytest.approx(3 / 10)  # row 1: the , of
    assert out["glue_parallel"] == pytest.approx(1 / 3)
    assert out["function_parallel"] == pytest.approx(2 / 3)
    assert out["content_single"] == pytest.approx(4 / 7)
    assert (out["n_single"], out["n_parallel"]) == (7, 3)
    single = order.parallel_summary(_result(tokens[:1], 1, steps[:1]), t[t.seq == 0],
                                    n_boot=20)
    assert single["parallel_fraction"] == 0 and np.isnan(single["content_parallel"])
    assert single["n_parallel"] == 0
    assert single["auc"] == pytest.approx(0.75)  # dog@2, cat@5 vs the@1, of@4


def test_held_out_prompts():
    from dlmspec_min.measures.order import held_out_prompts
    from dlmspec_min.texts.tokenizer import BOS_ID, load_tokenizer

    tok = load_tokenizer()
    p = held_out_prompts(tok, 6, 5, seed=1)
    assert p.shape == (6, 5) and (p[:, 0] == BOS_ID).all()
    assert len({tuple(r) for r in p.tolist()}) == 6  # six different prompts
    assert torch.equal(p, held_out_prompts(tok, 6, 5, seed=1))
    assert not torch.equal(p, held_out_prompts(tok, 6, 5, seed=2))
    with pytest.raises(ValueError, match="length > 1"):
        held_out_prompts(tok, 2, 1)
