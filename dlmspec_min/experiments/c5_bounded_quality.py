"""C5 (notebook 05): speed inside a quality bound.

Every decoder generates the same unconditional samples (``[BOS]`` prompt), sample
``i`` with the same seeded stream: LLaDA's one-token-per-forward baseline,
Fast-dLLM's threshold accelerator at each threshold, exact SSLD (SPEC.md §3: the
small model's cluster-marginal draft at the baseline's content anchors, one
verify pass, the accelerator infills) and relaxed SSLD (the draft's token
accepted iff it shares the target argmax's cluster), also with every position an
anchor. Speed: NFE (draft forwards in target-forward equivalents ``c``),
token-forwards and one timed run after a warm-up. Quality: an independent
judge's top-1 agreement (its drop below the baseline, paired bootstrap over
samples), perplexity and repetition. A speedup counts inside the bound only if
the agreement is at most ``quality_bound`` below the baseline's and the text's
repeated bigrams stay within the baseline's 95 % interval (2026-12-02; before,
the agreement alone: repetitive text that a top-1 judge predicts easily counted
as quality).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from ..decoding.config import DecodeConfig
from ..decoding.decode import generate
from ..measures import judge as judges
from ..measures import quality, reuse, stats
from ..measures.order import row_generators
from ..ssld import accelerators, drafting, inputs, semantic
from ..worlds import World
from . import parameters
from .common import Measurement, Models
from .parameters import param, shared

BASELINE = "baseline"
EXACT = "exact SSLD"
RELAXED = "relaxed SSLD"
EVERY = "relaxed SSLD, every position an anchor"
N_WARMUP = 2  # samples of the untimed warm-up decode
N_SHOWN = 3  # samples shown per decoder


def accelerator_name(t: float) -> str:
    return f"accelerator (threshold {t})"


@dataclass
class BoundedQuality(Measurement):
    """C5's measurement; ``rule_values`` is what C5's verdict rule reads."""

    rule_values: dict[str, float] = field(default_factory=dict)


@dataclass
class Decoders:
    """The baseline's config and the accelerator's at any threshold."""

    gen_length: int
    block_length: int
    temperature: float

    @property
    def baseline(self) -> DecodeConfig:
        """LLaDA's schedule: one token per forward, low-confidence remasking."""
        return DecodeConfig(gen_length=self.gen_length, block_length=self.block_length,
                            steps=self.gen_length, rule="schedule",
                            temperature=self.temperature)

    def accelerator(self, t: float) -> DecodeConfig:
        """Fast-dLLM's confidence threshold ``t``."""
        return DecodeConfig(gen_length=self.gen_length, block_length=self.block_length,
                            rule="threshold", threshold=t, temperature=self.temperature)


def decode_all(models: Models, drafter, sid, prompt, decoders: Decoders,
               config: Config, *, c: float, lexicon):
    """Run every decoder once, timed, each sample on the same seeded stream: the
    baseline, the accelerator at ``config.threshold`` and each of
    ``config.thresholds``, and SSLD's variants infilling with the first.

    Returns ``runs`` (name -> (generated (B, G), NFE (B,), token-forwards (B,),
    seconds)), the accepted share of the anchors per SSLD variant, and the word
    and piece-level anchors of the baseline's decode, (B, G) each.
    """
    target, tok = models.target, models.tokenizer
    n, P = prompt.shape[0], prompt.shape[1]
    threshold, thresholds = config.threshold, config.thresholds

    def gens():
        return row_generators(config.seed, n, config.device)

    runs = {}
    # each decode's seconds are its rows' own (a sequential look reuses the rows
    # an earlier look decoded: measures.reuse)
    base, sec = reuse.generate_timed(target, prompt, decoders.baseline, gens())
    runs[BASELINE] = (base.generated, base.nfe.double(), base.token_forwards.double(),
                      sec)
    anchors = inputs.anchor_mask(tok, base.tokens, lexicon)[:, P:]  # oracle word
    anchors_piece = inputs.anchor_mask(tok, base.tokens, lexicon, unit="piece")[:, P:]
    for t in sorted(set(thresholds) | {threshold}, reverse=True):
        r, sec = reuse.generate_timed(target, prompt, decoders.accelerator(t), gens())
        runs[accelerator_name(t)] = (r.generated, r.nfe.double(),
                                     r.token_forwards.double(), sec)
    every = torch.ones_like(anchors)
    ssld = {EXACT: ("exact", anchors), RELAXED: ("relaxed", anchors),
            EVERY: ("relaxed", every)}
    accepted = {}
    for name, (mode, anc) in ssld.items():
        r, sec = accelerators.draft_then_ssld_timed(
            target, drafter, prompt, anc, sid, decoders.accelerator(threshold), gens(),
            c, mode=mode)
        runs[name] = (r.generated, r.nfe, r.token_forwards, sec)
        accepted[name] = int(r.n_accepted.sum()) / max(int(anc.sum()), 1)
    return runs, accepted, anchors, anchors_piece


# a quality's columns: its level, its drop below the baseline's, the drop's interval
AGREEMENT = ("judge agreement", "agreement drop", "drop low", "drop high")
ACCURACY = ("answer accuracy", "accuracy drop", "accuracy drop low",
            "accuracy drop high")


def judge_table(jm, tokenizer, runs, specials, *, quality_bound: float,
                n_bootstrap: int, seed: int, correct_of=None) -> pd.DataFrame:
    """Speed and quality per decoder against the baseline (the first run).

    Speedups in NFE (ratio bootstrap over samples), token-forwards and wall-clock;
    the judge's agreement, its drop below the baseline's (paired bootstrap),
    perplexity, repeated unigrams and bigrams, and whether the decoder is inside
    the bound: a quality drop of at most ``quality_bound`` AND repeated bigrams
    no higher than the upper end of the baseline's 95 % interval (2026-12-02:
    before, the drop alone, and repetitive text that the judge predicts easily
    counted as quality).

    The quality is the judge's agreement, or where ``correct_of`` is given (a
    world whose texts have answers: generated (B, G) -> (B,) 0/1 correctness)
    the answer accuracy, with its drop below the baseline's (paired bootstrap);
    the judge's figures stand beside it. ``attrs["quality"]`` names the
    quality's four columns (``AGREEMENT`` or ``ACCURACY``).
    """
    base_gen, b_nfe, b_tf, b_sec = runs[BASELINE]
    _, _, rep_max = quality.repetition_ci(base_gen, 2, specials, n_bootstrap, seed)
    base_correct = None if correct_of is None else correct_of(base_gen)
    base_scores, rows = None, []
    for name, (gen, nfe, tf, sec) in runs.items():
        table = jm.score(quality.texts_of(tokenizer, gen))
        base_scores = table if base_scores is None else base_scores
        s = judges.summarize(table)
        sp, sp_lo, sp_hi = stats.ratio_bootstrap(b_nfe.numpy(), nfe.numpy(),
                                                 n_bootstrap, seed)
        drop, d_lo, d_hi = quality.agreement_drop(
            base_scores["top1_agreement"], base_scores["n_tokens"],
            table["top1_agreement"], table["n_tokens"], n_bootstrap, seed)
        bigrams = float(np.nanmean(quality.repetition(gen, 2, specials)))
        row = {"decoder": name, "NFE": nfe.mean().item(), "speedup (NFE)": sp,
               "speedup low": sp_lo, "speedup high": sp_hi,
               "speedup (token-forwards)": b_tf.sum().item() / tf.sum().item(),
               "wall s": sec, "speedup (wall)": b_sec / sec}
        if correct_of is not None:  # the world's answers first, the judge beside
            correct = correct_of(gen)
            row |= dict(zip(ACCURACY, (float(correct.mean()), *quality.accuracy_drop(
                base_correct, correct, n_bootstrap, seed)), strict=True))
        row |= {"judge agreement": s["agreement"], "agreement drop": drop,
                "drop low": d_lo, "drop high": d_hi,
                "judge perplexity": s["perplexity"],
                "repeated unigrams": np.nanmean(quality.repetition(gen, 1, specials)),
                "repeated bigrams": bigrams}
        columns = AGREEMENT if correct_of is None else ACCURACY
        quality_in = quality.within_bound(row[columns[1]], quality_bound)
        repetition_in = bool(bigrams <= rep_max)  # NaN: outside
        rows.append(row | {"quality inside": quality_in,
                           "repetition inside": repetition_in,
                           "inside bound": quality_in and repetition_in})
    out = pd.DataFrame(rows).set_index("decoder")
    out.attrs["repeated_bigrams_max"] = rep_max
    out.attrs["quality"] = columns
    return out


def quality_values(res: pd.DataFrame) -> dict[str, float]:
    """The world's quality (``res.attrs["quality"]``: the judge's agreement, or
    the answer accuracy where texts have answers) of the baseline and relaxed
    SSLD, and relaxed SSLD's drop with its interval: ``c5_quality_*``."""
    rx, bs = res.loc[RELAXED], res.loc[BASELINE]
    level, drop, lo, hi = res.attrs["quality"]
    return {"c5_quality_base": float(bs[level]), "c5_quality_relaxed": float(rx[level]),
            "c5_quality_drop": float(rx[drop]), "c5_quality_drop_lo": float(rx[lo]),
            "c5_quality_drop_hi": float(rx[hi])}


def rule_values(res: pd.DataFrame, quality_bound: float) -> dict[str, float]:
    """The keys C5's rule reads (relaxed SSLD against the baseline)."""
    rx = res.loc[RELAXED]
    return quality_values(res) | {k: float(x) for k, x in {
        "c5_speedup": rx["speedup (NFE)"], "c5_quality_bound": quality_bound,
        "c5_rep2_relaxed": rx["repeated bigrams"],
        "c5_rep2_base_hi": res.attrs["repeated_bigrams_max"]}.items()}


@dataclass(frozen=True)
class Config(parameters.Drafted, parameters.Sequential):
    NOTEBOOK: ClassVar[str] = "05_bounded_quality"

    n_samples: int = shared("n_samples", 12, "unconditional (the prompt is [BOS])")
    judge: str = shared("judge")
    thresholds: list = shared("thresholds", [0.9, 0.5],
                              "the accelerator settings on the frontier")
    quality_bound: float = param(0.05,
        "allowed drop of judge top-1 agreement below the baseline")


def judged_values(res: pd.DataFrame, config: Config, with_answers: bool) -> dict:
    """The ``c5_*`` values read from the judge's table (``judge_table``): each
    decoder's speed-up, agreement and repetition, the bound, and (``with_answers``)
    each decoder's answer accuracy."""
    rx, bs, every = res.loc[RELAXED], res.loc[BASELINE], res.loc[EVERY]
    acc = res.loc[accelerator_name(config.threshold)]
    v = {
        "c5_speedup": rx["speedup (NFE)"],
        "c5_speedup_lo": rx["speedup low"],
        "c5_speedup_hi": rx["speedup high"],
        "c5_speedup_vs_acc": acc["NFE"] / rx["NFE"],
        "c5_speedup_tf": rx["speedup (token-forwards)"],
        "c5_speedup_wall": rx["speedup (wall)"],
        "c5_agree_base": bs["judge agreement"],
        "c5_agree_relaxed": rx["judge agreement"],
        "c5_agree_acc": acc["judge agreement"],
        "c5_agree_exact": res.loc[EXACT, "judge agreement"],
        "c5_agree_every": every["judge agreement"],
        "c5_speedup_every": every["speedup (NFE)"],
        "c5_agree_drop": rx["agreement drop"],
        "c5_agree_drop_lo": rx["drop low"],
        "c5_agree_drop_hi": rx["drop high"],
        "c5_ppl_base": bs["judge perplexity"],
        "c5_ppl_relaxed": rx["judge perplexity"],
        "c5_rep_base": bs["repeated unigrams"],
        "c5_rep_relaxed": rx["repeated unigrams"],
        "c5_rep2_base": bs["repeated bigrams"],
        "c5_rep2_base_hi": res.attrs["repeated_bigrams_max"],
        "c5_rep2_relaxed": rx["repeated bigrams"],
        "c5_rep2_every": every["repeated bigrams"],
        "c5_quality_bound": config.quality_bound,
        **quality_values(res),
        "c5_quality_measure": res.attrs["quality"][0],
        "c5_relaxed_within_bound": int(rx["inside bound"]),
        "c5_every_within_bound": int(every["inside bound"]),
    }
    if with_answers:  # each decoder's answer accuracy, beside the judge
        v |= {
            f"c5_answer_acc_{k}": res.loc[name, "answer accuracy"]
            for k, name in (
                ("base", BASELINE),
                ("acc", accelerator_name(config.threshold)),
                ("exact", EXACT),
                ("relaxed", RELAXED),
                ("every", EVERY),
            )
        }
    inside = res[res["inside bound"]]
    v["c5_best_speedup_in_bound"] = float(inside["speedup (NFE)"].max())
    v["c5_best_in_bound"] = str(inside["speedup (NFE)"].idxmax())
    return v


def measure(models: Models, world: World, config: Config) -> BoundedQuality:
    """Everything C5's page measures on ``world``'s prompts and roles, in the page's
    order (``values``: the ``c5_*`` glue names except the verdict and the run time,
    which the page records)."""
    target, tok = models.target, models.tokenizer
    jm = judges.load_judge(config.judge, device=config.device)
    lexicon = world.roles()
    prompt = world.prompts(
        tok, config.n_samples, seed=config.seed, device=config.device
    )
    L = prompt.shape[1] + config.gen_length
    sid = semantic.semantic_ids_for(target, config.K, seed=config.seed, tokenizer=tok)
    drafter = drafting.SmallMarginalDraft(models.draft, sid)
    c = drafting.relative_cost(drafter(prompt[:1], config.gen_length), target, L)
    decoders = Decoders(config.gen_length, config.block_length, config.temperature)
    n_warm = min(N_WARMUP, config.n_samples)
    generate(
        target,
        prompt[:n_warm],
        decoders.baseline,
        row_generators(config.seed, n_warm, config.device),
    )  # warm-up, untimed

    runs, accepted, anchors, piece = decode_all(models, drafter, sid, prompt,
                                                decoders, config, c=c, lexicon=lexicon)
    v = {
        "c5_continuation_share_of_anchors": float(
            (piece & ~anchors).sum() / piece.sum()
        ),
        "c5_c": c,
        "c5_relaxed_acceptance": accepted[RELAXED],
        "c5_exact_acceptance": accepted[EXACT],
    }

    specials = sid.special.nonzero().flatten().tolist()
    answers = world.answers(config.n_samples, seed=config.seed)
    correct_of = (
        None if answers is None else lambda gen: world.answer_correct(tok, gen, answers)
    )
    res = judge_table(
        jm,
        tok,
        runs,
        specials,
        quality_bound=config.quality_bound,
        n_bootstrap=config.n_bootstrap,
        seed=config.seed,
        correct_of=correct_of,
    )
    v.update(judged_values(res, config, answers is not None))

    examples = pd.DataFrame(
        {name: quality.texts_of(tok, runs[name][0][:N_SHOWN]) for name in runs}
    )  # a sample of every decoder's text
    examples.index.name = "sample"
    return BoundedQuality(
        values=v,
        tables={"decoders": res, "examples": examples},
        arrays={
            "runs": runs,
            "accepted": accepted,
            "anchors": anchors,
            "anchors_piece": piece,
        },
        rule_values=rule_values(res, config.quality_bound),
    )
