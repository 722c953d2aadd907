"""Decode-order analysis: which tokens a masked DLM commits early, which late (C1).

The paper's first claim (abstract: "masked DLMs decode function/'glue' words
first and content words last (easy-first)") is measured on the decode trace of
``decode.generate``: every generated position's commit step. SPEC.md section 5
(C1) gives the protocol; these are its pieces:

- ``one_token_per_step``: LLaDA low-confidence remasking that commits exactly one
  token per step (``steps = gen_length``), by default in ONE block spanning the
  whole generation, so the order is the model's confidence order and nothing
  else (semi-autoregressive blocks would force a left-to-right order on top).
  ``remasking="random"`` is the control whose order ignores confidence.
- ``normalized_decode_time``: r = (step - 1) / (steps of the row - 1) in [0, 1];
  one token per step gives r = (commit_step - 1) / (gen_length - 1).
- ``token_table``: one row per generated token with its position, decode time,
  the size of the step that committed it, its class (content / function /
  punct = glue / special, ``tagger.classes_of_tokens``) and, optionally, its
  log frequency in the training corpus (``token_counts``).
- ``class_order``: mean r per class and the AUC P(r_content > r_function) with
  the Mann-Whitney p (tokens as independent) and a bootstrap CI over sequences.
- ``order_bins`` / ``bin_shares``: the class shares per decile of decode order.
- ``order_regression``: r on content with position fixed effects and log token
  frequency, sequence-clustered standard errors.
- ``step_size_shares`` / ``single_vs_parallel``: under Fast-dLLM's threshold
  rule (Wu et al., 2025, Sec. 3.2), what steps of each size commit.

Content vs function is decided only between content and function tokens;
punctuation ("glue" in SPEC.md) is reported separately, special tokens
([EOS], [PAD], ...) are counted and excluded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..decoding.config import DecodeConfig, DecodeResult
from . import stats
from .tagger import CONTENT, FUNCTION, PUNCT, SPECIAL, classes_of_tokens

N_BINS = 10  # deciles of decode order
GLUE = PUNCT  # SPEC.md calls punctuation "glue"
WORD_CLASSES = (CONTENT, FUNCTION, PUNCT)  # the classes whose shares are reported
STEP_SIZE_EDGES = (1, 2, 3, 5, 9, 17)  # step-size bins: 1, 2, 3-4, 5-8, 9-16, 17+
TOKEN_COUNTS_FORMAT = 1


# --- decoding set-up ------------------------------------------------------------------


def unconditional_prompt(tokenizer, n: int, device="cpu") -> torch.Tensor:
    """The prompt of unconditional generation: (n, 1) [BOS], else [CLS], else (n, 0).

    The embedded models were trained on sequences that start with [BOS]; a
    masked LM without a BOS token gets its [CLS]; a tokenizer with neither gets
    an empty prompt, which ``generate`` refuses unless called with
    ``allow_empty_prompt=True``: a page decoding such a model stops there with
    that message (every model the book supports has a start token: the
    embedded ones, LLaDA, Dream, MDLM's GPT-2 tokenizer, BERT's [CLS]).
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    for attr in ("bos_token_id", "cls_token_id"):
        tid = getattr(tokenizer, attr, None)
        if isinstance(tid, int):
            return torch.full((n, 1), tid, dtype=torch.long, device=device)
    return torch.empty((n, 0), dtype=torch.long, device=device)


def held_out_prompts(tokenizer, n: int, length: int, seed: int = 0) -> torch.Tensor:
    """(n, length) prompts: a start token, then the first tokens of held-out sentences.

    Sentences of the held-out Brown documents are taken in a seeded order; those
    with too few tokens are skipped. The start token is the tokenizer's [BOS]
    (else [CLS], else none), as in unconditional generation, so greedy decoding
    still gives every prompt its own text.
    """
    from ..texts.corpus import brown_dataset

    texts = [" ".join(w) for w in brown_dataset("test")["words"]]
    return prefix_prompts(tokenizer, texts, n, length, seed, "held-out sentences")


def prefix_prompts(tokenizer, texts, n: int, length: int, seed: int = 0,
                   what: str = "texts") -> torch.Tensor:
    """(n, length): the start token, then the first tokens of texts in a seeded
    order (texts with too few tokens are skipped)."""
    start = unconditional_prompt(tokenizer, 1)[0].tolist()
    body = length - len(start)
    if not (isinstance(n, int) and n >= 1 and isinstance(length, int) and body >= 1):
        raise ValueError(f"need n >= 1 and length > {len(start)} (the start token), "
                         f"got n={n!r}, length={length!r}")
    order = np.random.default_rng(seed).permutation(len(texts))
    rows = []
    for i in order:
        ids = tokenizer(texts[i], add_special_tokens=False)["input_ids"]
        if len(ids) >= body:
            rows.append(start + ids[:body])
            if len(rows) == n:
                return torch.tensor(rows, dtype=torch.long)
    raise ValueError(f"only {len(rows)} {what} have {body} tokens (need {n})")


def row_generators(
    seed: int, n: int, device="cpu", stream: int = 0,
) -> list[torch.Generator]:
    """One seeded ``torch.Generator`` per row, so each sample decodes as it would alone.

    Seeds come from ``numpy.random.SeedSequence((seed, stream))``: rows get
    distinct, reproducible streams, and a different ``stream`` (one per decoder)
    gives different ones.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    states = np.random.SeedSequence((seed, stream)).generate_state(n, dtype=np.uint64)
    return [torch.Generator(device=device).manual_seed(int(s)) for s in states]


def one_token_per_step(
    gen_length: int, block_length: int | None = None,
    remasking: str = "low_confidence", temperature: float = 0.0,
) -> DecodeConfig:
    """LLaDA decoding that commits exactly one token per step (steps = gen_length).

    ``block_length=None`` is one block over the whole generation: pure
    confidence order (or, with ``remasking="random"``, a uniformly random order).
    Unconditional generation from one [BOS] needs ``temperature > 0``: greedy
    decoding would give every sample the same text.
    """
    return DecodeConfig(gen_length=gen_length, block_length=block_length,
                        steps=gen_length, rule="schedule", remasking=remasking,
                        temperature=temperature)


# --- decode time ---------------------------------------------------------------------


def normalized_decode_time(commit_step: torch.Tensor, n_steps=None) -> torch.Tensor:
    """r = (step - 1) / (n_steps - 1) per generated position: (B, G) -> (B, G) float64.

    ``n_steps`` (B,) is each row's number of steps (``DecodeResult.nfe``);
    ``None`` takes the row's last commit step. A row decoded in a single step
    gets r = 0 everywhere. Raises if a position was never committed (step 0)
    or committed after ``n_steps``.
    """
    steps = torch.as_tensor(commit_step).long()
    if steps.dim() != 2:
        raise ValueError(
            f"commit_step must be (batch, gen_length), got {tuple(steps.shape)}")
    if (steps < 1).any():
        raise ValueError("commit_step holds 0: a position was never committed")
    n = steps.amax(dim=1) if n_steps is None else torch.as_tensor(n_steps).long()
    n = n.to(steps.device).reshape(-1)
    if n.shape[0] != steps.shape[0]:
        raise ValueError(f"n_steps has {n.shape[0]} rows, commit_step {steps.shape[0]}")
    if (steps > n[:, None]).any():
        raise ValueError("a commit step exceeds the row's number of steps")
    denom = (n - 1).clamp(min=1).double()[:, None]  # (B, 1)
    return (steps - 1).double() / denom  # (B, G)


# --- token frequency -----------------------------------------------------------------


def token_counts(tokenizer, sentences, vocab_size: int | None = None) -> np.ndarray:
    """How often each token id occurs when ``sentences`` (lists of words) are encoded.

    Words are joined by single spaces (Brown is pre-tokenised) and encoded
    without special tokens. Returns int64 counts of length
    ``max(vocab_size, len(tokenizer), largest id + 1)``.
    """
    texts = [" ".join(words) for words in sentences]
    if not texts:
        raise ValueError("no sentences to count tokens in")
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    flat = np.fromiter((i for row in ids for i in row), dtype=np.int64)
    size = max(int(vocab_size or 0), len(tokenizer), int(flat.max(initial=-1)) + 1)
    return np.bincount(flat, minlength=size)


def _tokenizer_fingerprint(tokenizer) -> str | None:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    return hashlib.sha256(backend.to_str().encode()).hexdigest()[:16]


def brown_token_counts(tokenizer, vocab_size: int | None = None) -> np.ndarray:
    """``token_counts`` over Brown's training split, cached per tokenizer and corpus.

    The cache (``paths.cache_dir() / "token_counts"``) is keyed on a hash of the
    tokenizer's serialised form and the corpus checksum and split; tokenizers
    without a serialisable backend are counted afresh every time.
    """
    from ..paths import cache_dir
    from ..texts.corpus import (
        BROWN_SHA256,
        HELD_OUT_FRACTION,
        SPLIT_SEED,
        brown_dataset,
    )

    fp = _tokenizer_fingerprint(tokenizer)
    path = None
    if fp is not None:
        key = "|".join(map(str, (TOKEN_COUNTS_FORMAT, fp, BROWN_SHA256,
                                 HELD_OUT_FRACTION, SPLIT_SEED)))
        name = hashlib.sha256(key.encode()).hexdigest()[:20]
        path = Path(cache_dir()) / "token_counts" / f"{name}.npy"
        if path.exists():
            counts = np.load(path)
            size = max(int(vocab_size or 0), len(counts))
            return np.pad(counts, (0, size - len(counts)))
    counts = token_counts(tokenizer, brown_dataset("train")["words"], vocab_size)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, counts)
        tmp.replace(path)
    return counts


# --- one row per generated token -----------------------------------------------------


def token_table(
    result: DecodeResult, tokenizer, lexicon, counts: np.ndarray | None = None,
    block_length: int | None = None,
) -> pd.DataFrame:
    """One row per generated token of a decode.

    Columns: ``seq`` (row of the batch), ``pos`` (0-based generated position),
    ``token`` (id), ``piece`` (its string), ``cls`` (content / function / punct /
    special; words are rebuilt over prompt + generation, so a ``##`` piece
    continues the prompt's last word), ``step`` (1-based commit step), ``n_steps``
    (the row's steps), ``r`` (``normalized_decode_time``), ``step_size`` (tokens
    the committing step committed in that row) and, with ``counts``,
    ``log_freq`` = log(1 + count of the token id). With ``block_length``, the
    decode time is counted inside each block of a blocked decode
    (``block_times``).
    """
    tokens = result.tokens.detach().cpu()  # (B, P + G)
    P = result.prompt_length
    steps = result.commit_step.detach().cpu()  # (B, G)
    B, G = steps.shape
    n_steps = result.nfe.detach().cpu()  # (B,)
    r = normalized_decode_time(steps, n_steps)  # (B, G)
    per_step = result.committed_per_step.detach().cpu()  # (B, max steps)
    size = per_step.gather(1, steps - 1)  # (B, G)
    classes = [classes_of_tokens(tokenizer, row.tolist(), lexicon)[P:]
               for row in tokens]
    gen = tokens[:, P:]  # (B, G)
    table = pd.DataFrame({
        "seq": np.repeat(np.arange(B), G),
        "pos": np.tile(np.arange(G), B),
        "token": gen.reshape(-1).numpy(),
        "piece": tokenizer.convert_ids_to_tokens(gen.reshape(-1).tolist()),
        "cls": [c for row in classes for c in row],
        "step": steps.reshape(-1).numpy(),
        "n_steps": np.repeat(n_steps.numpy(), G),
        "r": r.reshape(-1).numpy(),
        "step_size": size.reshape(-1).numpy(),
    })
    if counts is not None:
        counts = np.asarray(counts)
        ids = table["token"].to_numpy()
        c = np.where(ids < len(counts), counts[np.minimum(ids, len(counts) - 1)], 0)
        table["log_freq"] = np.log1p(c)
    return table if block_length is None else block_times(table, block_length)


def _block_span(table: pd.DataFrame, block_length: int):
    """(block, first step, last step) of each token's block, ``pos // block_length``."""
    if not isinstance(block_length, int) or block_length < 1:
        raise ValueError(f"block_length must be an integer >= 1, got {block_length!r}")
    block = table["pos"] // block_length
    g = table.groupby([table["seq"], block])["step"]
    return block, g.transform("min"), g.transform("max")


def within_block_time(table: pd.DataFrame, block_length: int) -> pd.Series:
    """Decode time inside each block: (step - block's first) / (block's last - first).

    Blocks are ``pos // block_length``; a block decoded in one step gets 0.
    """
    _, first, last = _block_span(table, block_length)
    return ((table["step"] - first) / (last - first).clip(lower=1)).astype(float)


def block_times(table: pd.DataFrame, block_length: int) -> pd.DataFrame:
    """``table`` with decode order counted inside each block of a blocked decode.

    Semi-autoregressive blocks decode left to right, so a token's step over the
    whole decode says mostly which block it is in. Here ``step`` becomes the step
    within its block (1 = the block's first), ``n_steps`` the block's steps and
    ``r`` the time within the block (``within_block_time``), so that every
    measure of this module (``class_order``, ``order_bins``, ``order_regression``,
    the step sizes) compares tokens by when their own block committed them. The
    whole-decode values stay as ``step_global``, ``n_steps_global`` and
    ``r_global``; ``block`` is the block's index. The blocks must be decoded one
    after the other (each block's steps after the previous block's last).
    """
    block, first, last = _block_span(table, block_length)
    spans = (pd.DataFrame({"seq": table["seq"], "block": block, "first": first,
                           "last": last}).drop_duplicates()
             .sort_values(["seq", "block"]))
    seq, first_, last_ = (spans[c].to_numpy() for c in ("seq", "first", "last"))
    if ((seq[1:] == seq[:-1]) & (first_[1:] <= last_[:-1])).any():
        raise ValueError("the blocks were not decoded one after the other")
    out = table.assign(block=block, step_global=table["step"],
                       n_steps_global=table["n_steps"], r_global=table["r"])
    out["step"] = table["step"] - first + 1
    out["n_steps"] = last - first + 1
    out["r"] = ((table["step"] - first) / (last - first).clip(lower=1)).astype(float)
    return out


def step_keys(table: pd.DataFrame) -> list[str]:
    """The columns that name one decode step of a table (``block_times`` counts
    steps within blocks, so there a step is also named by its block)."""
    return ["seq", "block", "step"] if "block" in table else ["seq", "step"]


# --- content vs function -------------------------------------------------------------


def class_order(
    table: pd.DataFrame, time: str = "r", n_boot: int = 2000, seed: int = 0,
) -> dict:
    """Mean decode time per class and the AUC P(time_content > time_function).

    Returns n_<class> and mean_<class> for content, function, punct (glue) and
    the count of special tokens; ``auc`` with the Mann-Whitney ``p`` (tokens
    treated as independent) and ``auc_lo``/``auc_hi``, a percentile CI from
    resampling sequences (``stats.auc_bootstrap``).
    """
    if time not in table:
        raise ValueError(f"the table has no column {time!r}")
    out: dict = {"n_special": int((table["cls"] == SPECIAL).sum())}
    for c in WORD_CLASSES:
        sel = table[table["cls"] == c]
        out[f"n_{c}"] = len(sel)
        out[f"mean_{c}"] = float(sel[time].mean()) if len(sel) else float("nan")
    con, fun = table[table["cls"] == CONTENT], table[table["cls"] == FUNCTION]
    if not len(con) or not len(fun):
        raise ValueError(
            f"need both content and function tokens (got {len(con)} and {len(fun)}); "
            "decode more or longer samples"
        )
    out["auc"], out["p"] = stats.mann_whitney(con[time], fun[time])
    _, out["auc_lo"], out["auc_hi"] = stats.auc_bootstrap(
        con[time], fun[time], con["seq"], fun["seq"], n_boot=n_boot, seed=seed)
    return out


def order_bins(table: pd.DataFrame, n_bins: int = N_BINS) -> pd.Series:
    """Bin of decode order per token: ((step - 1) * n_bins) // n_steps, in [0, n_bins).

    Integer arithmetic, so every row's steps split into n_bins nearly equal runs
    (with one token per step and gen_length 48: 4 or 5 tokens per decile).
    """
    if not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1, got {n_bins!r}")
    return ((table["step"] - 1) * n_bins) // table["n_steps"]


def grouped_shares(
    table: pd.DataFrame, by: pd.Series, n_boot: int = 2000, seed: int = 0,
) -> pd.DataFrame:
    """Share of each class among the non-special tokens of each group of ``by``.

    One row per (group, class) with ``share`` and a percentile CI over
    sequences (``stats.ratio_bootstrap`` of per-sequence counts), ``n`` tokens
    of the class and ``n_group`` non-special tokens in the group.
    """
    words = table[table["cls"] != SPECIAL].assign(group=by[table["cls"] != SPECIAL])
    seqs = np.sort(table["seq"].unique())
    rows = []
    for group, sel in words.groupby("group", sort=True):
        den = sel.groupby("seq").size().reindex(seqs, fill_value=0).to_numpy()
        for c in WORD_CLASSES:
            num = (sel[sel["cls"] == c].groupby("seq").size()
                   .reindex(seqs, fill_value=0).to_numpy())
            share, lo, hi = stats.ratio_bootstrap(num, den, n_boot=n_boot, seed=seed)
            rows.append(dict(group=group, cls=c, share=share, low=lo, high=hi,
                             n=int(num.sum()), n_group=int(den.sum())))
    return pd.DataFrame(rows)


def bin_shares(
    table: pd.DataFrame, n_bins: int = N_BINS, n_boot: int = 2000, seed: int = 0,
) -> pd.DataFrame:
    """Class shares per bin of decode order (``order_bins``); column ``bin``."""
    out = grouped_shares(table, order_bins(table, n_bins), n_boot, seed)
    return out.rename(columns={"group": "bin"})


# --- regression ----------------------------------------------------------------------


def regression_design(
    table: pd.DataFrame, time: str = "r", position: bool = True, frequency: bool = True,
) -> tuple[np.ndarray, pd.DataFrame, np.ndarray]:
    """y, X, groups for ``time ~ 1 + content [+ log_freq] [+ C(pos)]``.

    Content and function tokens only. Position enters as fixed effects (one
    dummy per generated position but the first), so any position profile of
    decode time is absorbed; ``log_freq`` (``token_table(counts=...)``)
    controls for token frequency.
    """
    sel = table[table["cls"].isin([CONTENT, FUNCTION])]
    if sel["cls"].nunique() < 2:
        raise ValueError("need both content and function tokens for the regression")
    X = pd.DataFrame({"const": 1.0, "content": (sel["cls"] == CONTENT).astype(float)},
                     index=sel.index)
    if frequency:
        if "log_freq" not in table:
            raise ValueError(
                "the table has no log_freq: build it with token_table(counts=...)")
        X["log_freq"] = sel["log_freq"].astype(float)
        if X["log_freq"].nunique() < 2:
            raise ValueError(
                "log_freq is constant over these tokens, so frequency cannot be "
                "controlled for; count tokens in a corpus that holds them")
    if position:
        pos = pd.get_dummies(sel["pos"], prefix="pos", drop_first=True, dtype=float)
        X = pd.concat([X, pos], axis=1)
    return sel[time].to_numpy(float), X, sel["seq"].to_numpy()


def order_regression(
    table: pd.DataFrame, time: str = "r", position: bool = True, frequency: bool = True,
) -> pd.DataFrame:
    """Clustered OLS of decode time on content (``regression_design``).

    Returns the rows const, content and (with ``frequency``) log_freq of
    ``stats.clustered_ols``; position dummies are fitted but not returned.
    ``.attrs`` holds n and n_clusters.
    """
    y, X, groups = regression_design(table, time, position, frequency)
    fit = stats.clustered_ols(y, X, groups)
    out = fit.loc[[c for c in ("const", "content", "log_freq") if c in X]]
    out.attrs.update(fit.attrs)
    return out


# --- parallel steps (Fast-dLLM threshold rule) ---------------------------------------


def step_size_bin(sizes, edges=STEP_SIZE_EDGES) -> pd.Categorical:
    """Label step sizes by bins starting at ``edges``: 1, 2, 3-4, 5-8, 9-16, 17+."""
    edges = list(edges)
    if not edges or edges[0] != 1 or sorted(set(edges)) != edges:
        raise ValueError(f"edges must be increasing and start at 1, got {edges}")
    labels = [str(a) if b - a == 1 else f"{a}-{b - 1}"
              for a, b in zip(edges[:-1], edges[1:], strict=True)]
    labels.append(f"{edges[-1]}+")
    sizes = np.asarray(sizes)
    if (sizes < 1).any():
        raise ValueError("step sizes must be >= 1")
    idx = np.searchsorted(edges, sizes, side="right") - 1
    return pd.Categorical.from_codes(idx, categories=labels, ordered=True)


def step_size_shares(
    table: pd.DataFrame, edges=STEP_SIZE_EDGES, n_boot: int = 2000, seed: int = 0,
) -> pd.DataFrame:
    """Class shares per step-size bin, with the bin's steps and their mean r.

    Columns: ``size`` (bin label), cls, share, low, high, n, n_group, and
    ``n_steps_in_bin`` (distinct (sequence, step) pairs) and ``mean_r`` (mean
    decode time of the bin's tokens: are large steps early?).
    """
    size = pd.Series(step_size_bin(table["step_size"], edges), index=table.index)
    out = grouped_shares(table, size.cat.codes, n_boot, seed)
    labels = size.cat.categories
    codes = size.cat.codes
    steps = (table.assign(group=codes)[["group", *step_keys(table)]].drop_duplicates()
             .groupby("group").size())
    mean_r = table.groupby(codes)["r"].mean()
    out["n_steps_in_bin"] = out["group"].map(steps).astype(int)
    out["mean_r"] = out["group"].map(mean_r)
    out.insert(0, "size", pd.Categorical(labels[out.pop("group")], categories=labels,
                                         ordered=True))
    return out


def single_vs_parallel(
    table: pd.DataFrame, n_boot: int = 2000, seed: int = 0,
) -> pd.DataFrame:
    """Class shares of tokens committed alone (step size 1) vs in parallel (>= 2).

    Columns: ``kind`` ("single" / "parallel"), cls, share, low, high, n, n_group.
    """
    kind = pd.Series(np.where(table["step_size"] > 1, "parallel", "single"),
                     index=table.index)
    return grouped_shares(table, kind, n_boot, seed).rename(columns={"group": "kind"})


def parallel_summary(
    result: DecodeResult, table: pd.DataFrame, n_boot: int = 2000, seed: int = 0,
) -> dict:
    """What a parallel decoder (e.g. Fast-dLLM's threshold rule) commits, in one dict.

    ``tokens_per_step`` (generated tokens / forwards), ``parallel_fraction``
    (share of generated tokens committed by steps of two or more), ``n_single``
    and ``n_parallel`` (non-special tokens committed by each kind), for each
    kind of step ("single", "parallel") and class (content, function, glue)
    ``<class>_<kind>`` with ``_lo``/``_hi`` (nan where that kind of step never
    occurred), and ``auc``, ``auc_lo``, ``auc_hi``, ``p`` of ``class_order``.
    """
    out = {"tokens_per_step": float(result.mean_tokens_per_nfe),
           "parallel_fraction": float((table["step_size"] > 1).mean())}
    split = single_vs_parallel(table, n_boot, seed).set_index(["kind", "cls"])
    for kind in ("single", "parallel"):
        n = split.loc[kind, "n_group"].iloc[0] if kind in split.index else 0
        out[f"n_{kind}"] = int(n)  # non-special tokens committed by such steps
        for c, key in ((CONTENT, "content"), (FUNCTION, "function"), (PUNCT, "glue")):
            row = split.loc[(kind, c)] if (kind, c) in split.index else None
            for col, suffix in (("share", ""), ("low", "_lo"), ("high", "_hi")):
                out[f"{key}_{kind}{suffix}"] = (
                    float("nan") if row is None else float(row[col]))
    co = class_order(table, n_boot=n_boot, seed=seed)
    out.update({k: co[k] for k in ("auc", "auc_lo", "auc_hi", "p")})
    return out
