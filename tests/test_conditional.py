"""C6 machinery (``dlmspec_min.ssld.conditional``): the C1-C3 key figures of one prompt
set, and the premise that SSLD's drafts and verify pass read the prompt. Synthetic
decode results, tiny random-weight models with the project's tokenizer."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from dlmspec_min.measures.tagger import CONTENT, FUNCTION, Lexicon
from dlmspec_min.plumbing.claims import evaluate, load_registry, verdict
from dlmspec_min.ssld import (
    accelerators,
    codebooks,
    conditional,
    decoder,
    drafting,
    inputs,
)
from dlmspec_min.ssld.semantic import semantic_ids_for
from dlmspec_min.training.train import SEQ_LEN
from dlmspec_min.worlds import PROSE, retagged

P, G, BL = 4, 8, 4


def _run(nfe, gen_length=G, token_forwards=None):
    nfe = torch.tensor(nfe)
    tf = nfe * 10 if token_forwards is None else torch.tensor(token_forwards)
    return SimpleNamespace(nfe=nfe, generated=torch.zeros(len(nfe), gen_length),
                           token_forwards=tf)


# --- tau_acc --------------------------------------------------------------------------


def test_accelerator_table_pools_tokens_over_forwards():
    runs = {"a": _run([8, 4, 2]), "b": _run([8, 8, 8])}
    t = accelerators.accelerator_table(runs, n_boot=200, seed=0)
    assert list(t.index) == ["a", "b"]
    # pooled: all tokens over all forwards, not the mean of per-row ratios
    assert t.loc["a", "tokens_per_nfe"] == pytest.approx(3 * G / 14)
    assert t.loc["b", "tokens_per_nfe"] == pytest.approx(1.0)
    assert t.loc["b", "low"] == pytest.approx(1.0)
    assert t.loc["b", "high"] == pytest.approx(1.0)
    assert t.loc["a", "low"] <= t.loc["a", "tokens_per_nfe"] <= t.loc["a", "high"]
    assert t.loc["a", "nfe_per_sample"] == pytest.approx(14 / 3)
    with pytest.raises(ValueError, match="no accelerator runs"):
        accelerators.accelerator_table({})


def test_strongest_accelerator_breaks_ties_by_token_forwards():
    runs = {"plain": _run([4, 4], token_forwards=[90, 90]),
            "cached": _run([4, 4], token_forwards=[40, 40]),
            "slow": _run([8, 8], token_forwards=[10, 10])}
    t = accelerators.accelerator_table(runs, n_boot=50)
    assert accelerators.strongest_accelerator(t) == "cached"
    assert accelerators.strongest_accelerator(t.drop(index="cached")) == "plain"
    with pytest.raises(ValueError, match="accelerator_table"):
        accelerators.strongest_accelerator(t[["low"]])


# --- tiny random-weight models --------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tiny_models):
    out = dict(tiny_models)
    target, tok = out["target"]
    # every word piece is content or function (alternating by id): random text has both
    lower = {piece.lower(): (CONTENT if i % 2 else FUNCTION)
             for piece, i in tok.get_vocab().items() if not piece.startswith("##")}
    out["lexicon"] = Lexicon(exact={}, lower=lower)
    out["sid"] = semantic_ids_for(target, 8, seed=0, tokenizer=tok)
    return out


def _prompts(tok, n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    p = torch.randint(5, 8192, (n, P), generator=g)
    p[:, 0] = tok.bos_token_id
    return p


def _windows(tok, lexicon, n=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    w = torch.randint(5, 8192, (n, P + G), generator=g)
    w[:, 0] = tok.bos_token_id
    return w, inputs.anchor_mask(tok, w, lexicon)


def test_drafts_and_verify_pass_read_the_prompt(tiny):
    """The C6 premise: what a draft guesses depends on the prompt it is given."""
    (target, tok), (draft, _) = tiny["target"], tiny["draft"]
    sid, lexicon = tiny["sid"], tiny["lexicon"]
    p = _prompts(tok, 2)
    prompt = torch.stack([p[0], p[0], p[1]])  # rows 0 and 1 share a prompt
    windows, content = _windows(tok, lexicon)
    head = drafting.HeadDraft.fit(draft, sid, windows, content, P, G, steps=5)
    outs = {"small": drafting.SmallMarginalDraft(draft, sid)(prompt, G).log_probs,
            "head": head(prompt, G).log_probs,
            "verify": decoder.verify_logits(target, prompt, G)}
    for name, x in outs.items():
        assert torch.allclose(x[0], x[1]), name
        assert not torch.allclose(x[0], x[2]), name
    # the head's training features come from the windows' first P tokens
    f1, _ = drafting.head_training_data(draft, sid, windows, content, P, G)
    changed = windows.clone()
    changed[:, 1] = (changed[:, 1] + 1 - 5) % (8192 - 5) + 5
    f2, _ = drafting.head_training_data(draft, sid, changed, content, P, G)
    assert f1.shape == f2.shape and not torch.allclose(f1, f2)


@pytest.fixture(scope="module")
def figures(tiny):
    (target, tok), (draft, _) = tiny["target"], tiny["draft"]
    settings = conditional.Settings(K=8, n_train=16, gen_length=G, block_length=BL,
                                    threshold=0.5, temperature=1.0, seed=3,
                                    n_bootstrap=100)
    kw = dict(codebook_seeds=[0, 1], world=retagged(PROSE, tiny["lexicon"]),
              settings=settings, e2e_infill="Fast-dLLM threshold + dual cache",
              head_kw=dict(steps=5))
    out = {"prompted": conditional.key_figures(target, draft, tok, _prompts(tok), **kw),
           "again": conditional.key_figures(target, draft, tok, _prompts(tok), **kw),
           "unconditional": conditional.key_figures(
               target, draft, tok, torch.full((3, 1), tok.bos_token_id), **kw)}
    return out, kw


def test_key_figures_are_consistent_and_deterministic(tiny, figures):
    figs, _ = figures
    f = figs["prompted"]
    assert f.prompt_length == P and f.anchors.shape == (3, G)
    assert set(f.accelerators.index) == set(accelerators.accelerators(G, BL, 0.5, 1.0))
    assert f.tau_acc == pytest.approx(f.accelerators["tokens_per_nfe"].max())
    assert f.alpha_star == pytest.approx(1 - 1 / f.tau_acc)
    assert f.best_draft in conditional.DRAFTS
    assert f.alpha == pytest.approx(f.acceptance.loc[list(conditional.DRAFTS),
                                                     "alpha"].max())
    assert f.alpha_lo <= f.alpha <= f.alpha_hi
    # alpha_SID is pooled over the codebooks: the mean of each codebook's rate
    assert list(f.codebooks) == [0, 1]
    assert f.alpha == pytest.approx(sum(b.table.loc[f.best_draft, "alpha"]
                                        for b in f.codebooks.values()) / 2)
    if f.alpha > 0:
        assert f.shortfall.value == pytest.approx(f.alpha_star / f.alpha)
    else:
        assert f.shortfall.lower_bound
    assert 0 < f.acceptance.loc[f.best_draft, "c"] < 1
    assert math.isnan(f.acceptance.loc[conditional.FIRST_PASS, "c"])
    assert f.e2e["low"] <= f.e2e["ratio"] <= f.e2e["high"]
    # the one-token-per-step decode commits one token per step
    assert (f.order_result.committed_per_step == 1).all()
    assert f.order_result.tokens[:, :P].equal(_prompts(tiny["target"][1]))
    assert conditional.claim_values(f) == conditional.claim_values(figs["again"])
    assert figs["unconditional"].prompt_length == 1


def test_word_anchors_headline_piece_anchors_beside_it(tiny, figures):
    """alpha_SID on word anchors is the headline; the same drafts on every content
    piece give the secondary figure; word anchors are the pieces' word starts."""
    f = figures[0]["prompted"]
    tok, lexicon = tiny["target"][1], tiny["lexicon"]
    ref = f.runs["Fast-dLLM threshold"].tokens
    assert torch.equal(f.anchors, inputs.anchor_mask(tok, ref, lexicon)[:, P:])
    assert torch.equal(f.anchors_piece,
                       inputs.anchor_mask(tok, ref, lexicon, unit="piece")[:, P:])
    cont = inputs.continuation_mask(tok, ref)[:, P:]
    assert torch.equal(f.anchors, f.anchors_piece & ~cont)
    assert f.continuation_share == pytest.approx(
        float((f.anchors_piece & cont).sum() / f.anchors_piece.sum()))
    tokens = f.runs["Fast-dLLM threshold"].generated
    again = codebooks.pooled_acceptance(f.codebooks, tokens, f.anchors_piece, 100, 3)
    assert f.alpha_piece == pytest.approx(again.loc[f.best_draft, "alpha"])
    assert f.alpha_piece_lo <= f.alpha_piece <= f.alpha_piece_hi
    values = conditional.claim_values(f)
    assert values["c6_alpha_sid_piece"] == pytest.approx(f.alpha_piece)
    sec = load_registry()["claims"]["C6"]["secondary"]
    for expr in sec["rule"].values():
        evaluate(expr, values)


def test_claim_values_feed_the_c6_rule(figures):
    figs, _ = figures
    values = conditional.claim_values(figs["prompted"])
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool)
               for v in values.values())
    names = conditional.FIGURE_KEYS + conditional.E2E_KEYS
    assert {f"c6_{k}" for k in names} == set(values)
    c6 = load_registry()["claims"]["C6"]
    for expr in c6["rule"].values():
        evaluate(expr, values)  # every name the rule reads is there
    assert verdict("C6", values) in load_registry()["verdicts"]
    unc = conditional.claim_values(figs["unconditional"], prefix="c6_uncond_")
    assert all(k.startswith("c6_uncond_") for k in unc)
    assert unc["c6_uncond_prompt_length"] == 1


def test_side_by_side_has_every_metric_per_condition(figures):
    figs, _ = figures
    two = {k: figs[k] for k in ("unconditional", "prompted")}
    t = conditional.side_by_side(two)
    assert isinstance(t, pd.DataFrame)
    assert (t.groupby("metric").size() == 2).all() and t.metric.nunique() == 8
    auc = t[(t.metric.str.startswith("C1")) & (t.condition == "prompted")].iloc[0]
    assert auc.value == pytest.approx(figs["prompted"].order["auc"])
    ok = t.dropna(subset=["low"])
    assert ((ok.low <= ok.value + 1e-12) & (ok.value <= ok.high + 1e-12)).all()
    with pytest.raises(ValueError, match="no prompt sets"):
        conditional.side_by_side({})


def test_key_figures_validates(tiny, figures):
    (target, tok), (draft, _) = tiny["target"], tiny["draft"]
    _, kw = figures
    with pytest.raises(ValueError, match="prompt_length \\+ gen_length"):
        long_prompt = torch.full((2, SEQ_LEN - G + 1), tok.bos_token_id)
        conditional.key_figures(target, draft, tok, long_prompt, **kw)
    with pytest.raises(ValueError, match="e2e_infill"):
        conditional.key_figures(target, draft, tok, _prompts(tok), **(kw | dict(
            e2e_infill="nope")))
    with pytest.raises(ValueError, match="batch, prompt_length"):
        conditional.key_figures(target, draft, tok, _prompts(tok)[0], **kw)


def test_held_out_prompts_are_prefixes_of_held_out_sentences():
    """The prompts C6 uses are real text from the HELD-OUT split (not training)."""
    from dlmspec_min.measures.order import held_out_prompts
    from dlmspec_min.texts.corpus import brown_dataset
    from dlmspec_min.texts.tokenizer import load_tokenizer

    tok = load_tokenizer()
    p = held_out_prompts(tok, 5, 9, seed=4)
    test_words = brown_dataset("test")["words"]
    prefixes = {tuple(tok(" ".join(w), add_special_tokens=False)["input_ids"][:8])
                for w in test_words}
    assert all(tuple(row[1:]) in prefixes for row in p.tolist())
    assert (p[:, 0] == tok.bos_token_id).all()
    with pytest.raises(ValueError, match="held-out sentences have"):
        held_out_prompts(tok, 10**6, 9)


def test_differences_flags_disjoint_intervals():
    long = pd.DataFrame([
        dict(metric="m1", condition="a", value=0.5, low=0.4, high=0.6),
        dict(metric="m1", condition="b", value=0.9, low=0.8, high=1.0),
        dict(metric="m2", condition="a", value=2.0, low=1.0, high=3.0),
        dict(metric="m2", condition="b", value=2.5, low=2.9, high=4.0),
        dict(metric="m3", condition="a", value=0.0, low=math.nan, high=math.nan),
        dict(metric="m3", condition="b", value=1.0, low=math.nan, high=math.nan),
    ])
    d = conditional.differences(long, "a", "b")
    assert d.loc["m1", "overlap"] is False and d.loc["m2", "overlap"] is True
    assert d.loc["m3", "overlap"] is None and math.isnan(d.loc["m3", "ratio"])
    assert d.loc["m1", "difference"] == pytest.approx(0.4)
    assert d.loc["m2", "ratio"] == pytest.approx(1.25)
    with pytest.raises(ValueError, match="must both be in the table"):
        conditional.differences(long, "a", "c")
