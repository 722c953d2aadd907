"""Train the ``math`` world's ladder on generated grade-school problems (CPU).

Layout of a training row (``SEQ_LEN`` = ``PROMPT_LENGTH`` + ``GEN_LENGTH``):
``[PAD] ... [BOS] question | solution [EOS] ... [EOS]``. The question is the
prompt, left-padded so that every answer starts at ``PROMPT_LENGTH``; it is never
masked. The solution and its ``[EOS]`` padding are the response, inside the loss,
as in LLaDA's supervised fine-tuning (Nie et al., 2025, Sec. 2.3 and App. B.3):
per row draw t ~ U(eps, 1), mask each response token with probability t, and
minimise the masked cross-entropy weighted by 1/t, normalised by the response
tokens. Every step draws fresh problems (``problems.train_seed(seed, step)``), so
no problem is seen twice and the held-out problems (``problems.HELD_OUT_SEED``)
never are; ``problems.UNSEEN_TEMPLATES`` are never used for training.

    python -m dlmspec_min.training.train_math --tokenizer   # data/models/math/tokenizer
    python -m dlmspec_min.training.train_math --size small      # train, or resume
    python -m dlmspec_min.training.train_math --size small --stop-after 3600

A run checkpoints every ``checkpoint_every`` steps (``checkpoint.pt``: weights,
optimizer and log, all float32) and ``--size`` continues from a checkpoint
when there is one, exactly: each step's masks and problems are drawn from
generators seeded by (seed, step), so a resumed run gives the same weights as
an uninterrupted one (under the same compute settings). ``--stop-after S`` ends
the process after about S seconds, at a checkpoint. The compute settings
(``COMPUTE_SETTINGS``: threads, bfloat16 autocast) may change when a run resumes,
``--no-bf16`` on a CPU without native bfloat16 for instance; every change is
kept in the checkpoint's and ``training.json``'s ``compute`` list (from which
step, which settings), the rest must match. When the run is complete, the
half-precision weights, the tokenizer, ``training.json`` and ``train_log.jsonl``
are written and the checkpoint is removed. Git ignores ``checkpoint.pt``
(``.gitignore``): a model folder lands with its final weights or not at all.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from .. import catalogue
from ..decoding.config import DecodeConfig
from ..decoding.decode import generate
from ..decoding.denoisers import Denoiser
from ..decoding.modeling import DLMConfig, DLMForMaskedDiffusion
from ..decoding.prompts import encode_prompts
from ..paths import models_dir
from ..texts import problems as P
from ..texts.tokenizer import (
    EOS_ID,
    MASK_ID,
    build_math_tokenizer,
    load_tokenizer,
    save_tokenizer,
)
from . import math_skills
from .train import MIN_MASK_RATIO, lr_at, mask_exact, save_trained

# the math world's layout and decode (catalogue: "math"; the chained world's
# rows are longer, its entry's layout)
_MATH = catalogue.get("math")
PROMPT_LENGTH = _MATH.prompt_length  # [PAD]s, [BOS] and the question (<= 31 tokens)
GEN_LENGTH = _MATH.gen_length  # the solution (at most 31 tokens) and [EOS] padding
BLOCK_LENGTH = _MATH.block_length  # its default decode: Fast-dLLM's GSM8K blocks
THRESHOLD = _MATH.threshold  # Fast-dLLM's threshold rule
SEQ_LEN = PROMPT_LENGTH + GEN_LENGTH
TOKENIZER_PROBLEMS = 20_000  # of the first world, from problems.TOKENIZER_SEED
EVAL_RATIOS = (0.15, 0.5, 0.9)
EVAL_PROBLEMS = 256  # held-out problems for masked accuracy during training
DECODE_PROBLEMS = 128  # held-out problems decoded for answer accuracy during training

SIZES = {
    "small": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=384),
    "base": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                 intermediate_size=768),
    "large": dict(hidden_size=320, num_hidden_layers=6, num_attention_heads=5,
                  intermediate_size=864),
}
# One cosine cycle each, the same for every size, so the ladder differs in size
# only; sized to the budget for the ladder (the step times behind it are
# in data/README.md).
STEPS = {"small": 6000, "base": 6000, "large": 6000}
# The peak learning rate scales as 1/width from small's (2026-12-04, issue 34,
# book/claims.yml: ladder_recipe). Adam moves every weight by about the same
# step whatever the width, so a layer's output moves in proportion to its
# width (Yang et al., 2022, muP); at small's 1e-3 for every rung, base and
# large learnt to copy from the question 2,000 steps after small and ended
# below it. ``lr`` in TRAIN_DEFAULTS is the rate at ``LR_WIDTH``.
LR_WIDTH = 128
TRAIN_DEFAULTS = dict(batch_size=64, lr=1e-3, warmup=200, weight_decay=0.01,
                      eval_every=250, decode_every=500, checkpoint_every=250,
                      seed=0, threads=1, bf16=True)
# How a step is computed, not what it computes: these may change when a run
# resumes (each session takes what is fastest on its machine; bfloat16 autocast is
# about 5x slower than float32 on a CPU without native bfloat16, measured
# 2026-12-02 on an AVX2-only EPYC), and each change is logged in ``compute``.
COMPUTE_SETTINGS = ("threads", "bf16")
CHECKPOINT = "checkpoint.pt"
# The narrow grammar: the pilot's choice of 2026-12-04 (issue 34; math_pilot; the
# first world was P.LANDED, in rows of 64 + 96 tokens), the claims' math world
# until 2026-12-06, when they moved to the free world. The grammar a MathWorld
# has unless told otherwise (the pilot's candidates start from it).
DIALS = P.NARROW
# The ladders are the catalogue's math worlds (dlmspec_min.catalogue): each
# entry names its grammar (a dial set of texts.problems), its folder under
# data/models/ and its row layout; every one reads the committed tokenizer in
# math/tokenizer. (Until 2026-12-06 this module kept its own table, keyed
# narrow / free / order / chains; those ladders are the worlds math_narrow,
# math, math_order and math_chains.)
LADDERS = tuple(e.name for e in catalogue.ENTRIES if e.kind == "math")


def ladder(world: str) -> catalogue.Entry:
    """The catalogue entry of a math world (one of ``LADDERS``)."""
    if world not in LADDERS:
        raise ValueError(f"world must be one of the math worlds {list(LADDERS)}, "
                         f"got {world!r}")
    return catalogue.get(world)


def world_of_folder(folder: str) -> str:
    """The math world whose ladder lives in ``data/models/<folder>`` (what the
    decoder's hint for a missing rung names: ``--folder``)."""
    for name in LADDERS:
        if catalogue.get(name).folder == folder:
            return name
    raise ValueError(f"no math world of dlmspec_min/catalogue.py keeps its ladder in "
                     f"{folder!r}; the folders: "
                     + ", ".join(catalogue.get(n).folder for n in LADDERS))


def ladder_dir(world: str = "math") -> Path:
    """Where the ladder of the math world ``world`` keeps its rungs."""
    return models_dir() / ladder(world).folder


def dials_of_world(world: str) -> P.Dials:
    """The grammar (``problems.Dials``) that writes ``world``'s problems."""
    return getattr(P, ladder(world).grammar)


def lr_for(size: str) -> float:
    """The ladder's peak learning rate for ``size``: 1e-3 at width 128, as 1/width."""
    return TRAIN_DEFAULTS["lr"] * LR_WIDTH / SIZES[size]["hidden_size"]


def tokenizer_dir() -> Path:
    """The math worlds' shared tokenizer (``catalogue``: their ``tokenizer``)."""
    return models_dir() / _MATH.tokenizer


def template_words() -> set[str]:
    """Every word the grammar's templates write (slots and numbers left out)."""
    return {w for q, lines in P.TEMPLATES.values() for text in (q, *lines)
            for w in text.split() if not w.startswith("{") and not w.isdigit()}


def word_count_tokenizer():
    """The math world's tokenizer, deterministically (issue 34): one piece per
    word, ordered by its count over ``TOKENIZER_PROBLEMS`` problems of the first
    world (every template), then the grammar's other words; numbers digit by
    digit (``tokenizer.build_math_tokenizer``). The same on every run."""
    texts = (f"{p.question_text} {p.solution_text}"
             for p in P.problems(P.TOKENIZER_SEED, TOKENIZER_PROBLEMS, "unseen"))
    lexicon = {*P.NAMES, *P.OBJECTS, *P.CONTAINERS, *template_words()}
    return build_math_tokenizer(texts, lexicon)


def encode(tokenizer, batch: list[P.Problem], prompt_length: int = PROMPT_LENGTH,
           gen_length: int = GEN_LENGTH) -> torch.Tensor:
    """Problems -> (B, prompt_length + gen_length) rows:
    [PAD]* [BOS] question | solution [EOS]*. The prompt half is the decoder's
    ``encode_prompts``, so a user's question gets the layout the models learnt."""
    questions = [p.question_text for p in batch]
    s = tokenizer([p.solution_text for p in batch], add_special_tokens=False)
    rows = torch.full((len(batch), prompt_length + gen_length), EOS_ID,
                      dtype=torch.long)
    for i, (q, si) in enumerate(zip(questions, s["input_ids"], strict=True)):
        qi = tokenizer.encode(q, add_special_tokens=False)
        if len(qi) + 1 > prompt_length or len(si) + 1 > gen_length:
            raise ValueError(
                f"problem too long for the layout ({len(qi)} question and "
                f"{len(si)} solution tokens; at most {prompt_length - 1} and "
                f"{gen_length - 1})"
            )
        rows[i, prompt_length : prompt_length + len(si)] = torch.tensor(si)
    rows[:, :prompt_length] = encode_prompts(tokenizer, questions, length=prompt_length)
    return rows


def sft_loss(model, x: torch.Tensor, gen: torch.Generator,
             prompt_length: int = PROMPT_LENGTH) -> torch.Tensor:
    """LLaDA's SFT loss on the response (positions >= prompt_length) of (B, L) rows."""
    B, L = x.shape
    u = (torch.rand(1, generator=gen) + torch.arange(B) / B) % 1.0  # stratified t
    t = (MIN_MASK_RATIO + (1 - MIN_MASK_RATIO) * u[torch.randperm(B, generator=gen)])
    m = torch.rand(B, L, generator=gen) < t[:, None]
    m[:, :prompt_length] = False
    logits = model(x.masked_fill(m, MASK_ID), output_mask=m).logits  # (N, V)
    ce = torch.nn.functional.cross_entropy(logits.float(), x[m], reduction="none")
    return (ce / t[:, None].expand(B, L)[m]).sum() / (B * (L - prompt_length))


@torch.no_grad()
def response_accuracy(model, x: torch.Tensor, ratio: float, seed: int = 0,
                      prompt_length: int = PROMPT_LENGTH) -> float:
    """Held-out argmax accuracy at a fixed share of masked response positions."""
    gen = torch.Generator().manual_seed(seed)
    m = torch.zeros_like(x, dtype=torch.bool)
    m[:, prompt_length - 1 :] = mask_exact(x[:, prompt_length - 1 :], ratio, gen)
    logits = model(x.masked_fill(m, MASK_ID)).logits
    return ((logits.argmax(-1) == x) & m).sum().item() / m.sum().item()


def answer_of(tokenizer, ids) -> int | None:
    """The integer after the first ``####`` of decoded ids (cut at [EOS]), or None;
    read as ``math_skills.grade`` reads it (punctuation after the number is not
    part of it)."""
    return math_skills.answer_in(math_skills.words_before_eos(tokenizer, ids))


def decode_config(gen_length: int = GEN_LENGTH) -> DecodeConfig:
    """The world's default decode: greedy, Fast-dLLM's threshold rule, blocks of 32."""
    return DecodeConfig(gen_length=gen_length, block_length=BLOCK_LENGTH,
                        rule="threshold", threshold=THRESHOLD)


@torch.no_grad()
def answer_accuracy(model, tokenizer, batch: list[P.Problem], prompts: torch.Tensor,
                    gen_length: int = GEN_LENGTH):
    """(exact final-answer accuracy, tokens per forward, skills) of the default
    decode; skills: ``math_skills.summarise`` of its decodes and their
    ``answer_tokens_per_nfe``."""
    result = generate(Denoiser(model, MASK_ID), prompts, decode_config(gen_length))
    graded = [math_skills.grade(tokenizer, row, p)
              for row, p in zip(result.generated.tolist(), batch, strict=True)]
    skills = math_skills.summarise(graded)
    skills["answer_tokens_per_nfe"] = math_skills.answer_tokens_per_nfe(
        result.generated.tolist(), result.nfe.tolist())
    return skills["answer_acc"], result.mean_tokens_per_nfe, skills


def dials_record(dials: P.Dials) -> dict:
    """A world's dials as plain JSON (templates sorted; None: every template)."""
    from dataclasses import asdict

    out = asdict(dials)
    if out["templates"] is not None:
        out["templates"] = sorted(out["templates"])
    return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def _recipe(hp: dict) -> dict:
    """What a run computes: its hyperparameters but the compute settings."""
    return {k: v for k, v in hp.items() if k not in COMPUTE_SETTINGS}


def _step_generator(seed: int, step: int) -> torch.Generator:
    return torch.Generator().manual_seed(1_000_003 * seed + step)


def train(size: str, out: Path | None = None, steps: int | None = None,
          stop_after: float | None = None, log=None, *, dials: P.Dials | None = None,
          prompt_length: int | None = None, gen_length: int | None = None,
          tokenizer=None, world: str = "math", **overrides) -> Path | None:
    """Train (or resume) one rung of a math world's ladder; the saved folder, or
    None if stopped early.

    ``world`` names the math world (``LADDERS``: the catalogue gives its grammar,
    folder and layout); ``dials``, ``prompt_length``, ``gen_length`` and
    ``tokenizer`` set the world it learns (by default the world's own, and the
    committed tokenizer); the pilot
    (``math_pilot``) trains candidate worlds through them."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
    unknown = set(overrides) - set(TRAIN_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown training options {sorted(unknown)}; "
                         f"known: {sorted(TRAIN_DEFAULTS)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    hp = {**TRAIN_DEFAULTS, "lr": lr_for(size), **given}
    log = log or (lambda msg: print(msg, flush=True))
    out = Path(out or ladder_dir(world) / size)  # ladder_dir checks ``world``
    dials = dials_of_world(world) if dials is None else dials
    own_prompt, own_gen = ladder(world).layout
    prompt_length = own_prompt if prompt_length is None else prompt_length
    gen_length = own_gen if gen_length is None else gen_length
    tok = tokenizer or load_tokenizer(tokenizer_dir())
    layout = dict(prompt_length=prompt_length, gen_length=gen_length)
    held = P.problems(P.HELD_OUT_SEED, max(EVAL_PROBLEMS, DECODE_PROBLEMS), "test",
                      dials)
    held_x = encode(tok, held[:EVAL_PROBLEMS], **layout)
    decode_x = encode(tok, held[:DECODE_PROBLEMS], **layout)[:, :prompt_length]
    ckpt_file = out / CHECKPOINT
    torch.manual_seed(hp["seed"])
    model = DLMForMaskedDiffusion(DLMConfig(
        vocab_size=len(tok), max_position_embeddings=prompt_length + gen_length,
        **SIZES[size]))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=hp["lr"], betas=(0.9, 0.95))
    start, history, seconds, running, compute = 0, [], 0.0, None, []
    if ckpt_file.exists():
        ckpt = torch.load(ckpt_file, weights_only=False)
        made = ckpt["hyperparameters"]
        compute = ckpt.get("compute") or [  # checkpoints from before the log
            {"from_step": 0, **{k: made[k] for k in COMPUTE_SETTINGS}}]
        # unless given, a compute setting stays as the run last had it
        hp = {**hp, **{k: compute[-1][k] for k in COMPUTE_SETTINGS if k not in given}}
        if (_recipe(ckpt["hyperparameters"]) != _recipe(hp)
                or (steps and steps != ckpt["steps"])):
            raise ValueError(f"{ckpt_file} was made with other settings "
                             f"({ckpt['hyperparameters']}, {ckpt['steps']} steps); "
                             "delete it to start again")
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        start, history, seconds = ckpt["step"], ckpt["history"], ckpt["seconds"]
        running, steps = ckpt["running"], ckpt["steps"]
        log(f"math/{size}: resuming at step {start} of {steps}")
    now = {k: hp[k] for k in COMPUTE_SETTINGS}
    if not compute or {k: compute[-1][k] for k in COMPUTE_SETTINGS} != now:
        compute.append({"from_step": start, **now})
    torch.set_num_threads(hp["threads"])
    steps = int(steps or STEPS[size])
    n_params = sum(p.numel() for p in model.parameters())
    log(f"math/{size}: {n_params / 1e6:.2f}M parameters, {steps} steps of "
        f"{hp['batch_size']} fresh problems")
    t0 = time.perf_counter() - seconds
    session_start = time.perf_counter()

    def evaluate(step):
        model.eval()
        rec = {"step": step, "problems_seen": step * hp["batch_size"],
               "loss": running, "elapsed_s": round(time.perf_counter() - t0, 1)}
        for r in EVAL_RATIOS:
            rec[f"acc_{round(r * 100)}"] = response_accuracy(
                model, held_x, r, prompt_length=prompt_length)
        if step % hp["decode_every"] == 0 or step == steps:
            rec["answer_acc"], rec["tokens_per_nfe"], skills = answer_accuracy(
                model, tok, held[:DECODE_PROBLEMS], decode_x, gen_length)
            rec.update({k: v for k, v in skills.items() if k != "answer_acc"})
        model.train()
        history.append(rec)
        log(json.dumps(rec))

    def checkpoint(step):
        out.mkdir(parents=True, exist_ok=True)
        tmp = ckpt_file.with_suffix(".partial")
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                    "step": step, "steps": steps, "history": history,
                    "running": running, "hyperparameters": hp, "compute": compute,
                    "seconds": time.perf_counter() - t0}, tmp)
        tmp.replace(ckpt_file)

    model.train()
    for step in range(start, steps):
        if step % hp["eval_every"] == 0 and step != start or step == 0:
            evaluate(step)
        if step % hp["checkpoint_every"] == 0 and step != start:
            checkpoint(step)
            if (stop_after is not None
                    and time.perf_counter() - session_start >= stop_after):
                log(f"math/{size}: stopped at step {step}; run again to resume")
                return None
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, hp["lr"], hp["warmup"])
        batch = P.problems(P.train_seed(hp["seed"], step), hp["batch_size"], "train",
                           dials)
        x = encode(tok, batch, **layout)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=hp["bf16"]):
            loss = sft_loss(model, x, _step_generator(hp["seed"], step),
                            prompt_length)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        value = loss.item()
        running = value if running is None else 0.98 * running + 0.02 * value
    evaluate(steps)
    summary = {"world": world, "size": size, "parameters": n_params,
               "hyperparameters": hp, "compute": compute, "steps": steps,
               "problems_seen": steps * hp["batch_size"],
               "prompt_length": prompt_length, "gen_length": gen_length,
               "dials": dials_record(dials),
               "train_seconds": round(time.perf_counter() - t0, 1),
               "torch": torch.__version__, "final": history[-1]}
    return save_trained(model, tok, out, history, summary)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=sorted(SIZES))
    p.add_argument("--tokenizer", action="store_true", help="re-create the tokenizer")
    p.add_argument("--out", type=Path)
    p.add_argument("--world", choices=LADDERS, default="math",
                   help="which math world's ladder (dlmspec_min.catalogue): "
                   + ", ".join(f"{e} (data/models/{ladder(e).folder})"
                               for e in LADDERS))
    p.add_argument("--folder", help="the ladder's folder under data/models instead "
                   "of --world (its world: the catalogue entry whose folder it is)")
    p.add_argument("--steps", type=int, help="total steps (default: STEPS[size])")
    p.add_argument("--stop-after", type=float, metavar="SECONDS",
                   help="end at the first checkpoint after SECONDS (resume later)")
    for k, v in TRAIN_DEFAULTS.items():  # not given: the default, or on resume,
        # for a compute setting, what the run last used
        flag = f"--{k.replace('_', '-')}"
        if isinstance(v, bool):
            p.add_argument(flag, default=None, action=argparse.BooleanOptionalAction,
                           help=f"default: {v}")
        else:
            p.add_argument(flag, type=type(v), default=None, help=(
                "default: lr_for(size), 1e-3 * 128 / width" if k == "lr"
                else f"default: {v}"))
    a = p.parse_args(argv)
    if a.folder is not None:
        try:
            a.world = world_of_folder(a.folder)
        except ValueError as e:
            p.error(str(e))
    if not (a.tokenizer or a.size):
        p.error("give --size and/or --tokenizer")
    if a.tokenizer:
        tok = word_count_tokenizer()
        save_tokenizer(tok, a.out or tokenizer_dir())
        print(f"tokenizer with {len(tok)} tokens saved to {a.out or tokenizer_dir()}")
    if a.size:
        hp = {k: getattr(a, k) for k in TRAIN_DEFAULTS}
        saved = train(a.size, a.out, steps=a.steps, stop_after=a.stop_after,
                      world=a.world, **hp)
        print(f"saved {saved}" if saved else "stopped at a checkpoint")


if __name__ == "__main__":
    main()
