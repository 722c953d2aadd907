"""Train the embedded masked diffusion LMs on Brown (seeded, CPU).

Objective (MDLM/LLaDA): per sequence draw t ~ U(eps, 1), mask each token
(except the leading [BOS]) with probability t, and minimise the cross-entropy
on masked positions weighted by 1/t, normalised by the number of tokens
(LLaDA, Nie et al. 2025, Eq. 3).

    python -m dlmspec_min.training.train --tokenizer      # re-create the tokenizer
    python -m dlmspec_min.training.train --size base      # re-create data/models/base

Every run is reproducible on CPU with the same seed and thread count; the log
(loss and held-out masked accuracy at 15/50/90 % masking) is written next to
the weights.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from pathlib import Path

import torch

from ..decoding.modeling import DLMConfig, DLMForMaskedDiffusion
from ..paths import models_dir
from ..texts.corpus import brown_dataset
from ..texts.tokenizer import (
    BOS_ID,
    EOS_ID,
    MASK_ID,
    load_tokenizer,
    save_tokenizer,
    tokenizer_dir,
    train_tokenizer,
)

SEQ_LEN = 64  # [BOS] + 63 tokens
STORAGE_DTYPE = torch.float16  # committed weights: half the bytes; loaded as float32
EVAL_RATIOS = (0.15, 0.5, 0.9)
EVAL_WINDOWS = 256
MIN_MASK_RATIO = 1e-3

SIZES = {
    "small": dict(
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=384,
    ),
    "base": dict(
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=768,
    ),
    "large": dict(
        hidden_size=320,
        num_hidden_layers=6,
        num_attention_heads=5,
        intermediate_size=864,
    ),
}
# Cosine cycles (warm restarts) per size: small one long cycle, base and large
# three equal ones, each restart at half the previous peak (RESTART_DECAY): three
# times the tokens of the first committed models (1,600 / 2,400 / 2,400 steps,
# issue 13). See the models page; ``--resume`` continues a saved model with the
# cycles it has not done yet.
CYCLES = {"small": (4800,), "base": (2400, 2400, 2400), "large": (2400, 2400, 2400)}
RESTART_DECAY = 0.5  # each restart peaks at half the previous cycle's learning rate
TRAIN_DEFAULTS = dict(
    batch_size=32,
    lr=5e-4,
    warmup=100,
    weight_decay=0.01,
    eval_every=100,
    seed=0,
    threads=1,
    bf16=True,
    eos_fraction=0.0,
)


def encode_documents(dataset, tokenizer) -> list[tuple[torch.Tensor, list[int]]]:
    """Per document: its token ids (1-D) and the offsets where sentences start."""
    enc = tokenizer([" ".join(w) for w in dataset["words"]], add_special_tokens=False)[
        "input_ids"
    ]
    docs: dict[str, tuple[list[int], list[int]]] = {}
    for doc_id, ids in zip(dataset["doc_id"], enc, strict=True):
        toks, starts = docs.setdefault(doc_id, ([], []))
        starts.append(len(toks))
        toks.extend(ids)
    return [(torch.tensor(t), s) for t, s in docs.values()]


def windows(docs, seq_len: int = SEQ_LEN) -> torch.Tensor:
    """All sequences [BOS] + (seq_len - 1) tokens starting at a sentence start."""
    body = seq_len - 1
    rows = []
    for toks, starts in docs:
        for s in starts:
            if s + body <= len(toks):
                rows.append(torch.cat([torch.tensor([BOS_ID]), toks[s : s + body]]))
    return torch.stack(rows)


def ended_windows(docs, seq_len: int = SEQ_LEN) -> torch.Tensor:
    """Text that ends: every span of whole sentences of one document that fits,
    then ``[EOS]`` padding to the window (at least one ``[EOS]``).

    A row is ``[BOS]``, the sentences from one sentence start to a later sentence
    end (or the document's end), and ``[EOS]`` up to ``seq_len``; the padding is
    inside the loss, as in LLaDA's fine-tuning (Nie et al. 2025, Appendix B.3).
    Every (start, end) pair that fits is one row, so short texts are as common as
    the sentence lengths make them.
    """
    body = seq_len - 1
    rows = []
    for toks, starts in docs:
        ends = [*starts[1:], len(toks)]
        for i, s in enumerate(starts):
            for e in ends[i:]:
                if e - s > body - 1:
                    break
                row = torch.full((seq_len,), EOS_ID, dtype=toks.dtype)
                row[0] = BOS_ID
                row[1 : 1 + e - s] = toks[s:e]
                rows.append(row)
    return torch.stack(rows)


def held_out_windows(
    tokenizer, n: int = EVAL_WINDOWS, seq_len: int = SEQ_LEN
) -> torch.Tensor:
    """A fixed set of non-overlapping held-out sequences starting at sentences.

    Each row is the tokenizer's [BOS] (the project's id if it has none) and
    ``seq_len - 1`` tokens of one held-out document.
    """
    docs = encode_documents(brown_dataset("test"), tokenizer)
    bos = getattr(tokenizer, "bos_token_id", None)
    bos = BOS_ID if bos is None else int(bos)
    body, rows = seq_len - 1, []
    for toks, starts in docs:
        last = -body
        for s in starts:
            if s >= last + body and s + body <= len(toks):
                rows.append(torch.cat([torch.tensor([bos]), toks[s : s + body]]))
                last = s
    gen = torch.Generator().manual_seed(1234)
    idx = torch.randperm(len(rows), generator=gen)[:n]
    return torch.stack([rows[i] for i in sorted(idx.tolist())])


def mask_exact(x: torch.Tensor, ratio: float, gen: torch.Generator) -> torch.Tensor:
    """Mask exactly round(ratio * (L-1)) random non-BOS positions per row."""
    B, L = x.shape
    k = max(1, round(ratio * (L - 1)))
    scores = torch.rand(B, L - 1, generator=gen)
    idx = scores.argsort(dim=1)[:, :k] + 1
    m = torch.zeros(B, L, dtype=torch.bool)
    m.scatter_(1, idx, True)
    return m


@torch.no_grad()
def masked_hits(model, x: torch.Tensor, ratio: float, seed: int = 0, batch: int = 64):
    """Per held-out row: (correct argmax predictions, masked positions), fixed masks."""
    gen = torch.Generator().manual_seed(seed)
    m = mask_exact(x, ratio, gen)
    hits = []
    for i in range(0, len(x), batch):
        xb, mb = x[i : i + batch], m[i : i + batch]
        logits = model(xb.masked_fill(mb, MASK_ID).to(model.device)).logits.cpu()
        hits.append(((logits.argmax(-1) == xb) & mb).sum(1))
    return torch.cat(hits), m.sum(1)


def masked_accuracy(model, x: torch.Tensor, ratio: float, seed: int = 0) -> float:
    """Held-out argmax accuracy at masked positions, fixed mask pattern."""
    hits, counts = masked_hits(model, x, ratio, seed)
    return hits.sum().item() / counts.sum().item()


def mask_ratios(batch: int, gen: torch.Generator) -> torch.Tensor:
    """t ~ U(eps, 1) per sequence, stratified over the batch (MDLM's low-discrepancy
    sampler, Sahoo et al. 2024, Sec. 3.5): same objective, lower gradient variance."""
    u = (torch.rand(1, generator=gen) + torch.arange(batch) / batch) % 1.0
    u = u[torch.randperm(batch, generator=gen)]
    return (MIN_MASK_RATIO + (1 - MIN_MASK_RATIO) * u)[:, None]  # (B, 1)


def diffusion_loss(model, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    B, L = x.shape
    t = mask_ratios(B, gen)
    m = torch.rand(B, L, generator=gen) < t
    m[:, 0] = False  # [BOS] is never masked
    logits = model(x.masked_fill(m, MASK_ID), output_mask=m).logits  # (N, V)
    ce = torch.nn.functional.cross_entropy(logits.float(), x[m], reduction="none")
    return (ce / t.expand(B, L)[m]).sum() / (B * (L - 1))


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    return lr * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))


def _round_to_storage(model) -> None:
    """Round the weights through the storage dtype, as saving and loading would."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(STORAGE_DTYPE).float())


def train(
    size: str,
    out: Path | None = None,
    log=None,
    cycles: tuple[int, ...] | None = None,
    resume: bool = False,
    **overrides,
) -> Path:
    """Train one embedded model over its cycles of cosine-scheduled steps.

    Each cycle starts a fresh AdamW and a generator seeded ``seed + cycle`` and
    ends with the weights rounded to the storage dtype, so ``resume=True``
    (continue a saved model with its remaining cycles) gives the same weights
    as one uninterrupted run.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
    unknown = set(overrides) - set(TRAIN_DEFAULTS)
    if unknown:
        raise ValueError(
            f"unknown training options {sorted(unknown)}; "
            f"known: {sorted(TRAIN_DEFAULTS)}"
        )
    hp = {**TRAIN_DEFAULTS, **overrides}
    cycles = tuple(cycles or CYCLES[size])
    if not cycles or any(int(c) < 1 for c in cycles):
        raise ValueError(f"cycles must be positive step counts, got {cycles}")
    log = log or (lambda msg: print(msg, flush=True))
    torch.set_num_threads(hp["threads"])
    torch.manual_seed(hp["seed"])
    out = Path(out or models_dir() / size)
    tok = load_tokenizer()
    docs = encode_documents(brown_dataset("train"), tok)
    data = windows(docs)
    if not 0 <= hp["eos_fraction"] <= 1:
        raise ValueError(f"eos_fraction must be in [0, 1], got {hp['eos_fraction']}")
    n_ended = round(hp["eos_fraction"] * hp["batch_size"])
    ended = ended_windows(docs) if n_ended else None
    held = held_out_windows(tok)
    history, done, seconds, eos_by_cycle = [], 0, 0.0, []
    if resume:
        from transformers import AutoModelForMaskedLM

        model = AutoModelForMaskedLM.from_pretrained(out, dtype=torch.float32)
        _round_to_storage(model)  # a no-op for weights saved by this module
        previous = json.loads((out / "training.json").read_text())
        done = previous.get("cycles_done", 1)
        seconds = previous["train_seconds"]
        history = [json.loads(line) for line in (out / "train_log.jsonl").open()]
        last_loss = history.pop()["loss"]  # re-measured below on the stored weights
        eos_by_cycle = previous.get(
            "eos_fraction_by_cycle",
            [previous["hyperparameters"].get("eos_fraction", 0.0)] * done,
        )[:done]
        if tuple(previous.get("cycles", cycles[:done])) != cycles[:done]:
            raise ValueError(
                f"{out} was trained with other cycles; retrain from scratch"
            )
    else:
        cfg = DLMConfig(vocab_size=len(tok), max_position_embeddings=256, **SIZES[size])
        model = DLMForMaskedDiffusion(cfg)
        with torch.no_grad():  # start from the unigram solution: log token frequencies
            counts = torch.bincount(data[:, 1:].flatten(), minlength=cfg.vocab_size)
            model.head_bias.copy_(torch.log((counts + 1) / (counts + 1).sum()))
    n_params = sum(p.numel() for p in model.parameters())
    log(
        f"{size}: {n_params / 1e6:.2f}M parameters, {len(data)} windows"
        + (f" and {len(ended)} ended ({n_ended} per batch)" if n_ended else "")
        + f", cycles {cycles}"
    )
    t0 = time.perf_counter() - seconds

    def evaluate(step, loss):
        model.eval()
        rec = {
            "step": step,
            "tokens_seen": step * hp["batch_size"] * (SEQ_LEN - 1),
            "loss": loss,
            "elapsed_s": round(time.perf_counter() - t0, 1),
        }
        for r in EVAL_RATIOS:
            rec[f"acc_{round(r * 100)}"] = masked_accuracy(model, held, r)
        model.train()
        history.append(rec)
        log(json.dumps(rec))

    offset = sum(cycles[:done])
    if resume:
        evaluate(offset, last_loss)
    for c in range(done, len(cycles)):
        steps, peak = cycles[c], hp["lr"] * RESTART_DECAY**c
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": hp["weight_decay"]},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=peak,
            betas=(0.9, 0.95),
        )
        gen = torch.Generator().manual_seed(hp["seed"] + c)
        model.train()
        running = None
        for step in range(steps):
            if step % hp["eval_every"] == 0 and (step or c == 0):
                evaluate(offset + step, running)
            for g in opt.param_groups:
                g["lr"] = lr_at(step, steps, peak, hp["warmup"])
            idx = torch.randint(len(data), (hp["batch_size"] - n_ended,), generator=gen)
            batch = data[idx]
            if n_ended:  # the batch's first rows are running text, the rest end
                jdx = torch.randint(len(ended), (n_ended,), generator=gen)
                batch = torch.cat([batch, ended[jdx]])
            # bf16 autocast (fp32 master weights): ~1.6x faster with AMX/AVX512-BF16
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=hp["bf16"]):
                loss = diffusion_loss(model, batch, gen)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            running = (
                loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
            )
        offset += steps
        _round_to_storage(model)
        evaluate(offset, running)
    summary = {
        "size": size,
        "parameters": n_params,
        "hyperparameters": hp,
        "cycles": list(cycles),
        "cycles_done": len(cycles),
        # a resumed run may end its text in later cycles only (pretrain, then
        # fine-tune, as LLaDA does); each cycle's share of ended windows
        "eos_fraction_by_cycle": eos_by_cycle
        + [hp["eos_fraction"]] * (len(cycles) - done),
        "restart_lr_decay": RESTART_DECAY,
        "seq_len": SEQ_LEN,
        "tokens_seen": offset * hp["batch_size"] * (SEQ_LEN - 1),
        "train_seconds": round(time.perf_counter() - t0, 1),
        "torch": torch.__version__,
        "final": history[-1],
    }
    return save_trained(model, tok, out, history, summary)


def save_trained(model, tokenizer, out: Path, history: list, summary: dict) -> Path:
    """Write a trained model to ``out`` whole or not at all: half-precision
    weights, the tokenizer, ``train_log.jsonl`` and ``training.json``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        tmp = Path(tmp) / out.name
        model.to(STORAGE_DTYPE).save_pretrained(tmp)
        save_tokenizer(tokenizer, tmp)
        (tmp / "train_log.jsonl").write_text(
            "".join(json.dumps(h) + "\n" for h in history)
        )
        (tmp / "training.json").write_text(json.dumps(summary, indent=1) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size", choices=sorted(SIZES))
    p.add_argument("--tokenizer", action="store_true", help="re-create the tokenizer")
    p.add_argument("--out", type=Path)
    p.add_argument("--cycles", type=int, nargs="+", help="steps per cosine cycle")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the saved model at --out with its remaining cycles",
    )
    for k, v in TRAIN_DEFAULTS.items():
        if isinstance(v, bool):
            p.add_argument(
                f"--{k.replace('_', '-')}",
                action=argparse.BooleanOptionalAction,
                default=v,
            )
        else:
            p.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    a = p.parse_args(argv)
    if a.tokenizer:
        tok = train_tokenizer(brown_dataset("train")["words"])
        save_tokenizer(tok, a.out or tokenizer_dir())
        print(f"tokenizer with {len(tok)} tokens saved to {a.out or tokenizer_dir()}")
    if a.size:
        hp = {k: getattr(a, k) for k in TRAIN_DEFAULTS}
        saved = train(a.size, a.out, cycles=a.cycles, resume=a.resume, **hp)
        print(f"saved {saved}")
    if not (a.tokenizer or a.size):
        p.error("give --size and/or --tokenizer")


if __name__ == "__main__":
    main()
