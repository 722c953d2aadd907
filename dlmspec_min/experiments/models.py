"""The models page (notebook 00): what the book's models are and how good they are.

Every number the page shows is measured here: the Brown corpus and the
tokenizer, held-out masked-token accuracy of the three committed models against
the unigram baseline (fixed mask patterns, bootstrap intervals over sequences),
unconditional samples of the vanilla and the threshold decoder, the exactness of
the dual KV cache when nothing in it is stale, the content/function tagger's
agreement with Brown's gold tags, and the independent judge's separation of
real from shuffled text. The quality gates (``book/claims.yml``, ``checks:
models``) are evaluated by the page on these values.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd
import torch

from ..decoding.config import DecodeConfig
from ..decoding.decode import generate
from ..decoding.denoisers import load_denoiser
from ..measures import eos_tail, stats, tagger
from ..measures import judge as judges
from ..measures.order import row_generators, unconditional_prompt
from ..paths import models_dir
from ..ssld import accelerators
from ..texts import corpus
from ..texts.tokenizer import BOS_ID
from ..training import train
from . import parameters
from .common import Measurement
from .parameters import param, shared

SIZES = ("small", "base", "large")
UNIGRAM = "unigram"
TOKENIZER_SENTENCES = 2000  # held-out sentences whose words count tokens per word
EXAMPLE_SENTENCE = 3  # the held-out sentence shown tokenized
N_SHOWN = 3  # generated samples shown per decoder
JUDGE_WORDS = (8, 40)  # sentence lengths (words) the judge's texts are drawn from


def load_sizes(sizes=SIZES, *, device: str = "cpu", dtype: str | None = "float32",
               device_map: str | None = "none") -> dict[str, Any]:
    """The committed models ``dlmspec/<size>``, each loaded once."""
    return {s: load_denoiser(f"dlmspec/{s}", device=device, dtype=dtype,
                             device_map=device_map)[0] for s in sizes}


def corpus_tables(train_ds, test_ds) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Documents, sentences and words per genre and split, and words per
    (genre, split) in long form (what the page's bar chart draws)."""
    frames = []
    for split, ds in [("train", train_ds), ("held out", test_ds)]:
        df = ds.select_columns(["doc_id", "genre"]).to_pandas()
        df["words"] = [len(w) for w in ds["words"]]
        frames.append(df.assign(split=split))
    sents = pd.concat(frames)
    by_genre = sents.groupby(["genre", "split"]).agg(
        documents=("doc_id", "nunique"), sentences=("doc_id", "size"),
        words=("words", "sum")
    ).unstack("split").fillna(0).astype(int)
    words = sents.groupby(["genre", "split"])["words"].sum().reset_index()
    return by_genre, words


def tokens_per_word(tokenizer, test_ds,
                    n_sentences: int = TOKENIZER_SENTENCES) -> float:
    """Mean tokenizer pieces per word over the first held-out sentences' words."""
    held_words = [w for ws in test_ds["words"][:n_sentences] for w in ws]
    n_tokens = sum(len(tokenizer(w, add_special_tokens=False)["input_ids"])
                   for w in held_words)
    return n_tokens / len(held_words)


def training_summary(sizes=SIZES) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each model's ``training.json`` as a table, and its training log (long form)."""
    summaries = {s: json.loads((models_dir() / s / "training.json").read_text())
                 for s in sizes}
    logs = pd.concat(pd.read_json(models_dir() / s / "train_log.jsonl", lines=True)
                     .assign(model=s) for s in sizes)
    table = pd.DataFrame({
        s: {"parameters (M)": round(v["parameters"] / 1e6, 2),
            "cosine cycles (steps)": " + ".join(map(str, v["cycles"])),
            "tokens seen (M)": round(v["tokens_seen"] / 1e6, 2),
            "training time (min)": round(v["train_seconds"] / 60, 1),
            "threads": v["hyperparameters"]["threads"]}
        for s, v in summaries.items()
    }).T
    return table, logs


def most_frequent_token(tokenizer, train_windows: torch.Tensor) -> int:
    """The unigram baseline's prediction: the training windows' most frequent
    non-``[BOS]`` token (``train.windows`` of the training documents)."""
    return int(torch.bincount(train_windows[:, 1:].flatten(),
                              minlength=len(tokenizer)).argmax())


def masked_accuracy(models: dict[str, Any], held: torch.Tensor, top_token: int,
                    seed: int) -> pd.DataFrame:
    """Held-out masked-token accuracy with 95 % bootstrap intervals over sequences.

    One row per (model, masked ratio), the unigram baseline first at each ratio:
    exactly ``ratio`` of the non-``[BOS]`` positions masked, one fixed pattern per
    ratio (``train.mask_exact`` seeded by ``seed``) for the baseline, and the
    same patterns inside ``train.masked_hits`` for the models.
    """
    rows = []
    for ratio in train.EVAL_RATIOS:
        mask = train.mask_exact(held, ratio, torch.Generator().manual_seed(seed))
        uni_hits = ((held == top_token) & mask).sum(1)
        est, lo, hi = stats.ratio_bootstrap(uni_hits, mask.sum(1), seed=seed)
        rows.append(dict(model=UNIGRAM, masked=ratio, accuracy=est, low=lo, high=hi))
        for s, d in models.items():
            hits, counts = train.masked_hits(d.model, held, ratio, seed=seed)
            est, lo, hi = stats.ratio_bootstrap(hits, counts, seed=seed)
            rows.append(dict(model=s, masked=ratio, accuracy=est, low=lo, high=hi))
    return pd.DataFrame(rows)


def accuracy_key(model: str, ratio: float) -> str:
    """The glue name of a model's accuracy at a masked ratio (``m_base_acc15``)."""
    return f"m_{model}_acc{round(ratio * 100)}"


def times(a: float, b: float) -> float:
    """``a / b``; ``inf`` (or ``nan`` when ``a`` is 0 too) when ``b`` is 0."""
    if b == 0:
        return float("nan") if a == 0 else float("inf")
    return a / b


def ladder_note(values: dict[str, float], sizes=SIZES) -> str:
    """One sentence per neighbouring pair of sizes: is the larger one more
    accurate at 15 % masking, and are the two 95 % intervals apart?"""
    acc = {m: accuracy_key(m, 0.15) for m in sizes}
    parts = []
    for lo, hi in itertools.pairwise(sizes):
        a, b = values[acc[hi]], values[acc[lo]]
        apart = (values[acc[hi] + "_lo"] > values[acc[lo] + "_hi"]
                 or values[acc[lo] + "_lo"] > values[acc[hi] + "_hi"])
        parts.append(f"{hi} is {'above' if a > b else 'not above'} {lo} ({a:.4f} "
                     f"against {b:.4f}), and their intervals "
                     f"{'are apart' if apart else 'overlap'}")
    return "; ".join(parts) + "."


def decoder_configs(gen_length: int, block_length: int, threshold: float
                    ) -> dict[str, DecodeConfig]:
    """LLaDA's vanilla decoder (one token per step) and Fast-dLLM's threshold rule,
    both greedy and semi-autoregressive in blocks of ``block_length``."""
    return {
        "vanilla": DecodeConfig(gen_length=gen_length, block_length=block_length,
                                steps=gen_length),
        "threshold": DecodeConfig(gen_length=gen_length, block_length=block_length,
                                  rule="threshold", threshold=threshold),
    }


def unconditional_samples(target, tokenizer, prompt: torch.Tensor,
                          configs: dict[str, DecodeConfig]):
    """Decode ``prompt`` with each config; the runs (with ``seconds``) and a table of
    forwards per sample, tokens per forward and the first samples' texts."""
    runs, rows = {}, []
    for name, cfg in configs.items():
        t0 = time.perf_counter()
        runs[name] = generate(target, prompt, cfg)
        runs[name].seconds = time.perf_counter() - t0
    for name, r in runs.items():
        rows.append({"decoder": name,
                     "forwards per sample": round(r.nfe.float().mean().item(), 1),
                     "tokens per forward": round(r.mean_tokens_per_nfe, 2),
                     **{f"sample {i}": tokenizer.decode(row.tolist())
                        for i, row in enumerate(r.generated[:N_SHOWN])}})
    return runs, pd.DataFrame(rows).set_index("decoder")


def agreement(a, b) -> tuple[float, float]:
    """Shares of identical whole sequences and of identical generated tokens."""
    same_seq = (a.tokens == b.tokens).all(1).float().mean().item()
    same_tok = (a.generated == b.generated).float().mean().item()
    return same_seq, same_tok


def cache_exactness(target, n_samples: int, gen_length: int, device) -> float:
    """Share of sequences the dual cache reproduces when nothing in it is stale.

    An all-mask sequence of ``1 + gen_length`` positions (no prompt) decoded as
    one block: the cache holds nothing outside the block, so cached and uncached
    decoding must agree token for token (a check of the plumbing).
    """
    empty = torch.empty((n_samples, 0), dtype=torch.long, device=device)
    full = dict(gen_length=1 + gen_length, block_length=1 + gen_length,
                steps=1 + gen_length)
    ref = generate(target, empty, DecodeConfig(**full), allow_empty_prompt=True)
    cached = generate(target, empty, DecodeConfig(**full, cache="dual"),
                      allow_empty_prompt=True)
    return agreement(ref, cached)[0]


def stale_cache_table(target, prompt: torch.Tensor, gen_length: int,
                      block_length: int) -> pd.DataFrame:
    """Prefix and dual cache against uncached decoding with the prompt cached:
    identical sequences and tokens, and the share of token-forwards saved, per
    block length (``gen_length`` and ``block_length``, where they divide it)."""
    rows = []
    for bl in sorted({gen_length, block_length}, reverse=True):
        if gen_length % bl:
            continue
        base_cfg = dict(gen_length=gen_length, block_length=bl, steps=gen_length)
        ref = generate(target, prompt, DecodeConfig(**base_cfg))
        for cache in ["prefix", "dual"]:
            out = generate(target, prompt, DecodeConfig(**base_cfg, cache=cache))
            seq, tokn = agreement(ref, out)
            rows.append(dict(block_length=bl, cache=cache, identical_sequences=seq,
                             identical_tokens=tokn,
                             compute_saved=1 - out.token_forwards.float().mean().item()
                             / ref.token_forwards.float().mean().item()))
    return pd.DataFrame(rows)


def judge_separation(jm, test_ds, n_texts: int, seed: int) -> dict[str, float]:
    """The judge's perplexity and top-1 agreement on ``n_texts`` held-out sentences
    and on the same words in a random order (one ``random.Random(seed)`` draws
    the sentences, then each shuffle)."""
    rng = random.Random(seed)
    lo, hi = JUDGE_WORDS
    pool = [ws for ws in test_ds["words"] if lo <= len(ws) <= hi]
    if len(pool) < n_texts:
        raise ValueError(f"n_texts={n_texts} but only {len(pool)} held-out sentences "
                         f"have {lo}-{hi} words; ask for fewer")
    picked = rng.sample(pool, n_texts)
    real = [" ".join(ws) for ws in picked]
    shuffled = [" ".join(rng.sample(ws, len(ws))) for ws in picked]
    real_s = judges.summarize(jm.score(real))
    shuf_s = judges.summarize(jm.score(shuffled))
    return {"m_judge_ppl_real": real_s["perplexity"],
            "m_judge_ppl_shuffled": shuf_s["perplexity"],
            "m_judge_agreement_real": real_s["agreement"],
            "m_judge_agreement_shuffled": shuf_s["agreement"]}


BASELINE = "baseline (one token per forward)"
REGIME_KEYS = {BASELINE: "baseline", "Fast-dLLM threshold": "threshold",
               "Fast-dLLM threshold + dual cache": "dual",
               "trajectory speculation (exact)": "trajectory",
               "trajectory speculation (exact), no cache": "trajectory"}


def regime_runs(target, tokenizer, *, n_samples: int, gen_length: int,
                block_length: int, threshold: float, temperature: float, seed: int,
                device) -> dict:
    """The claim pages' default decode (``[BOS]`` prompt, blocks, ``temperature``,
    sample ``i`` on its own seeded stream) by LLaDA's baseline and every
    token-space accelerator the claims measure against (``ssld.accelerators``)."""
    prompt = unconditional_prompt(tokenizer, n_samples, device=device)
    configs = {BASELINE: DecodeConfig(gen_length=gen_length, block_length=block_length,
                                      steps=gen_length, temperature=temperature),
               **accelerators.accelerators(gen_length, block_length, threshold,
                                           temperature,
                                           supports_cache=target.supports_cache)}
    return {name: generate(target, prompt, cfg, row_generators(seed, n_samples, device))
            for name, cfg in configs.items()}


def regime_values(table: pd.DataFrame) -> dict[str, Any]:
    """The regime table's glue values: per decode ``m_regime_<key>_*`` (tokens per
    forward with its interval, of the text and of the tail, and the text fraction),
    then the strongest accelerator's name and figures."""
    v = {}
    for name, r in table.iterrows():
        k = f"m_regime_{REGIME_KEYS[name]}"
        v[f"{k}_tpf"] = r.tokens_per_forward
        v[f"{k}_tpf_lo"] = r.tokens_per_forward_low
        v[f"{k}_tpf_hi"] = r.tokens_per_forward_high
        v[f"{k}_text_tpf"] = r.text_tokens_per_forward
        v[f"{k}_tail_tpf"] = r.tail_tokens_per_forward
        v[f"{k}_text_fraction"] = r.text_fraction
    accs = table.drop(index=BASELINE)
    best = accs.tokens_per_forward.idxmax()
    v["m_regime_strongest"] = best
    v["m_regime_strongest_tpf"] = accs.loc[best, "tokens_per_forward"]
    v["m_regime_strongest_tpf_lo"] = accs.loc[best, "tokens_per_forward_low"]
    v["m_regime_strongest_tpf_hi"] = accs.loc[best, "tokens_per_forward_high"]
    v["m_regime_strongest_text_fraction"] = accs.loc[best, "text_fraction"]
    return v


@dataclass(frozen=True)
class Config(parameters.Loaded):
    NOTEBOOK: ClassVar[str] = "00_models"

    n_samples: int = shared("n_samples", 8, "in the cache comparison")
    gen_length: int = shared("gen_length")
    block_length: int = shared("block_length")
    threshold: float = shared("threshold")
    temperature: float = shared("temperature", note="of the regime table")
    n_texts: int = param(48,
        "held-out sentences scored by the judge (real and shuffled)")
    n_heldout: int = param(256,
        "held-out 64-token sequences of the masked-accuracy table")
    regime_samples: int = param(32,
        "unconditional samples every decoder of the regime table decodes")
    judge: str = shared("judge")
    math_problems: int = param(400,
        "held-out math problems each model of the math ladder decodes")
    math_unseen: int = param(200,
        "held-out problems written with templates never trained on")
    math_regime_problems: int = param(64,
        "held-out problems every decoder of the math regime table decodes")


def measure(models: dict[str, Any], tokenizer, config: Config, *, train_ds=None,
            test_ds=None) -> Measurement:
    """Everything the models page measures, in the page's order, at ``config``'s
    sizes and decode.

    ``models``: size name -> denoiser (``load_sizes``; the decoding and cache
    checks use ``models["base"]``); ``train_ds``/``test_ds``: the Brown splits
    (both by default; a test may pass smaller ones). ``values`` holds the page's
    glue names (``m_*``) except the gates', which the page evaluates.
    """
    if "base" not in models:
        raise ValueError(f"models needs a 'base' entry (got {sorted(models)})")
    train_ds = corpus.brown_dataset("train") if train_ds is None else train_ds
    test_ds = corpus.brown_dataset("test") if test_ds is None else test_ds
    v, tables, arrays = {}, {}, {}

    tables["corpus"], arrays["words"] = corpus_tables(train_ds, test_ds)
    w = arrays["words"]
    v["m_words_train"] = int(w.query("split == 'train'")["words"].sum())
    v["m_words_test"] = int(w.query("split == 'held out'")["words"].sum())
    v["m_tokens_per_word"] = tokens_per_word(tokenizer, test_ds)
    arrays["example"] = " ".join(test_ds["words"][EXAMPLE_SENTENCE])
    arrays["example_tokens"] = tokenizer.convert_ids_to_tokens(
        tokenizer(arrays["example"], add_special_tokens=False)["input_ids"])
    tables["training"], arrays["logs"] = training_summary(list(models))
    train_windows = train.windows(train.encode_documents(train_ds, tokenizer))
    v["m_train_windows"] = len(train_windows)
    seen = arrays["logs"].groupby("model").tokens_seen.max()  # exact, not rounded
    for size in tables["training"].index:  # windows drawn per window
        v[f"m_{size}_tokens_seen_m"] = tables["training"].loc[size, "tokens seen (M)"]
        v[f"m_{size}_window_passes"] = seen[size] / (
            len(train_windows) * (train.SEQ_LEN - 1))

    held = train.held_out_windows(tokenizer, n=config.n_heldout)
    v["m_n_heldout"] = len(held)
    top = most_frequent_token(tokenizer, train_windows)
    acc = masked_accuracy(models, held, top, config.seed)
    tables["accuracy"] = acc
    for r in acc.itertuples():
        key = accuracy_key(r.model, r.masked)
        v[key], v[f"{key}_lo"], v[f"{key}_hi"] = r.accuracy, r.low, r.high
    v["m_base_vs_unigram"] = times(v["m_base_acc15"], v["m_unigram_acc15"])
    if set(SIZES) <= set(models):
        v["m_ladder_note"] = ladder_note(v)

    v["m_block_length"] = config.block_length
    target = models["base"]
    prompt = torch.full((config.n_samples, 1), BOS_ID, device=config.device)
    arrays["runs"], tables["samples"] = unconditional_samples(
        target, tokenizer, prompt,
        decoder_configs(config.gen_length, config.block_length, config.threshold))
    v["m_threshold_tokens_per_nfe"] = arrays["runs"]["threshold"].mean_tokens_per_nfe
    v["m_cache_exact_full"] = cache_exactness(target, config.n_samples,
                                              config.gen_length, config.device)
    cache = stale_cache_table(target, prompt, config.gen_length, config.block_length)
    tables["cache"] = cache
    v["m_cache_dual_tokens_small_block"] = cache.query("cache == 'dual'").sort_values(
        "block_length")["identical_tokens"].iloc[0]

    agree = tagger.agreement(tagger.default_lexicon(), test_ds)
    tables["tagger_confusion"] = agree["confusion"]
    arrays["tagger_binary_words"] = agree["n_binary"]
    v["m_tagger_agreement"] = agree["binary"]
    v["m_tagger_agreement_all"] = agree["overall"]
    v["m_tagger_words"] = agree["n_words"]

    t0 = time.perf_counter()
    jm = judges.load_judge(config.judge, device=config.device)
    judge_load = time.perf_counter() - t0
    v.update(judge_separation(jm, test_ds, config.n_texts, config.seed))
    v["m_judge_load_seconds"] = judge_load

    # the regime: how much of the window is text, and how fast each part decodes
    runs = regime_runs(target, tokenizer, n_samples=config.regime_samples,
                       gen_length=config.gen_length, block_length=config.block_length,
                       threshold=config.threshold, temperature=config.temperature,
                       seed=config.seed, device=config.device)
    tables["regime"] = eos_tail.regime_table(runs, tokenizer.eos_token_id,
                                           config.n_bootstrap, config.seed)
    v["m_regime_samples"] = config.regime_samples
    v["m_regime_rule_threshold"] = config.threshold
    v["m_regime_temperature"] = config.temperature
    v.update(regime_values(tables["regime"]))
    return Measurement(v, tables, arrays)
