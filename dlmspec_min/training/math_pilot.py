"""The math world's pilots: which world the ladder is retrained on (issues 34, 42).

The candidates, the step count and the rule that picks one are data, written in
``book/claims.yml`` (``checks: models: pilot``) before the pilot ran. Each
candidate is a set of the grammar's dials (``problems.Dials``) and a row layout;
each trains ``math/small``'s shape with the ladder's recipe
(``train_math.train``) for the same number of steps, on the tokenizer built
deterministically from word counts (``train_math.word_count_tokenizer``), and
logs, every ``decode_every`` steps, answer accuracy, what it copies from the
question, its arithmetic lines and the threshold rule's tokens per forward
(``math_skills``). At the end its model decodes ``final_problems`` held-out
problems of its own world; ``choose`` applies the rule to those figures.

    python -m dlmspec_min.training.math_pilot                  # every candidate
    python -m dlmspec_min.training.math_pilot --candidate narrow
    python -m dlmspec_min.training.math_pilot --report         # table and choice

Weights go to the ignored ``data/cache/math_pilot/``; the logs and final figures
that the models page reads are written to ``data/math_pilot/<candidate>/``.

The second pilot (issue 42, ``checks: models: freedom_pilot``) gives narrow's
solutions freedom (``problems.Dials``: openers, phrasings, operand order) and
picks the candidate whose projected ``math/base`` rate lands in the paper's
regime (``choose_freedom``). ``--pilot freedom_pilot`` runs it; its models are
small (0.49M parameters), so each candidate's folder in
``data/math_freedom_pilot/`` keeps its half-precision weights beside its logs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import statistics
import time
from pathlib import Path

import torch
import yaml

from ..decoding.config import DecodeConfig
from ..decoding.decode import generate
from ..decoding.denoisers import Denoiser
from ..decoding.modeling import DLMForMaskedDiffusion
from ..paths import REPO_ROOT, cache_dir, data_dir
from ..texts import problems as P
from ..texts.tokenizer import MASK_ID
from . import math_skills, train_math

REGISTRY = REPO_ROOT / "book" / "claims.yml"
SIZE = "small"  # the pilot's model: the ladder's smallest rung
LAYOUT_PROBLEMS, LAYOUT_SEED = 20_000, "math-pilot-layout"
PROMPT_MULTIPLE = 8  # the prompt: the smallest multiple of 8 that holds [BOS] + q


PILOTS = ("pilot", "freedom_pilot")  # issue 34's, issue 42's
OUT_DIRS = {"pilot": "math_pilot", "freedom_pilot": "math_freedom_pilot"}


def spec(pilot: str = "pilot") -> dict:
    """A pilot's block of the registry: steps, candidates, rule."""
    if pilot not in PILOTS:
        raise ValueError(f"pilot must be one of {PILOTS}, got {pilot!r}")
    return yaml.safe_load(REGISTRY.read_text())["checks"]["models"][pilot]


FREEDOM_DIALS = ("openers", "phrasings", "free_order")


def freedom_dials(candidate: dict) -> P.Dials:
    """A freedom-pilot candidate -> its dials: the ladder's world (narrow) with
    the candidate's solution freedoms, its length bounds from the layout rule."""
    unknown = set(candidate) - set(FREEDOM_DIALS)
    if unknown:
        raise ValueError(f"unknown freedom dials {sorted(unknown)}; known: "
                         f"{FREEDOM_DIALS}")
    free = dataclasses.replace(train_math.DIALS, **candidate)
    q, g = layout_by_rule(free)
    return dataclasses.replace(free, max_question_tokens=q - 1,
                               max_solution_tokens=g - 1)


def dials_of(candidate: dict) -> P.Dials:
    """A registry candidate -> its dials (its layout bounds the problem lengths)."""
    if set(candidate) <= set(FREEDOM_DIALS):
        return freedom_dials(candidate)
    lo, hi = candidate["steps"]
    return P.Dials(templates=frozenset(candidate["templates"]),
                   names=candidate["names"], objects=candidate["objects"],
                   containers=candidate["containers"], min_steps=lo, max_steps=hi,
                   start=tuple(candidate["start"]), add=tuple(candidate["add"]),
                   max_question_tokens=candidate["prompt_length"] - 1,
                   max_solution_tokens=candidate["gen_length"] - 1)


def layout_by_rule(dials: P.Dials) -> tuple[int, int]:
    """(prompt_length, gen_length) the registry's layout rule gives ``dials``: the
    smallest multiple of 8 holding [BOS] and the longest of ``LAYOUT_PROBLEMS``
    questions drawn, the smallest multiple of the block holding the longest
    solution and its [EOS] (drawn without the dials' own length bounds)."""
    free = P.Dials(**{**dials.__dict__, "max_question_tokens": 10**6,
                      "max_solution_tokens": 10**6})
    drawn = P.problems(LAYOUT_SEED, LAYOUT_PROBLEMS, "train", free)
    q = max(P.n_tokens(p.question) for p in drawn) + 1
    s = max(P.n_tokens(p.solution) for p in drawn) + 1
    block = train_math.BLOCK_LENGTH
    return (-(-q // PROMPT_MULTIPLE) * PROMPT_MULTIPLE, -(-s // block) * block)


def trained_templates(dials: P.Dials) -> int:
    return len(set().union(*P.allowed_templates("train", dials).values()))


def out_dir(name: str, pilot: str = "pilot") -> Path:
    """Where a candidate's logs and final figures are committed."""
    return data_dir() / OUT_DIRS[pilot] / name


@torch.no_grad()
def final_figures(model, tokenizer, dials: P.Dials, prompt_length: int,
                  gen_length: int, n: int) -> dict:
    """The candidate's model on ``n`` held-out problems of its world: the skills
    (``math_skills.summarise``), tokens per forward of the threshold rule, and the
    counts behind the answer accuracy."""
    held = P.problems(P.HELD_OUT_SEED, n, "test", dials)
    prompts = train_math.encode(tokenizer, held, prompt_length,
                                gen_length)[:, :prompt_length]
    config: DecodeConfig = train_math.decode_config(gen_length)
    result = generate(Denoiser(model, MASK_ID), prompts, config)
    graded = [math_skills.grade(tokenizer, row, p)
              for row, p in zip(result.generated.tolist(), held, strict=True)]
    out = math_skills.summarise(graded)
    out.update(problems=n, correct=sum(g["correct"] for g in graded),
               tokens_per_nfe=result.mean_tokens_per_nfe,
               answer_tokens_per_nfe=math_skills.answer_tokens_per_nfe(
                   result.generated.tolist(), result.nfe.tolist()),
               glue_bits=statistics.fmean(p.glue_bits for p in held),
               content_bits=statistics.fmean(p.content_bits for p in held),
               examples=[dict(question=p.question_text,
                              decode=" ".join(math_skills.words_before_eos(
                                  tokenizer, row)))
                         for p, row in zip(held[:3],
                                           result.generated[:3].tolist(),
                                           strict=True)])
    return out


def run(name: str, threads: int = 1, log=None, which: str = "pilot") -> dict:
    """Train and judge one candidate of the pilot ``which``; its final figures
    (also written to disk)."""
    log = log or (lambda msg: print(msg, flush=True))
    pilot = spec(which)
    if name not in pilot["candidates"]:
        raise ValueError(f"unknown candidate {name!r}; the registry names "
                         f"{sorted(pilot['candidates'])}")
    cand = pilot["candidates"][name]
    dials = dials_of(cand)
    stated = (dials.max_question_tokens + 1, dials.max_solution_tokens + 1)
    if "prompt_length" in cand:
        stated = (cand["prompt_length"], cand["gen_length"])
    if layout_by_rule(dials) != stated:
        raise ValueError(f"{name}: the registry's layout {stated} is not the rule's "
                         f"{layout_by_rule(dials)}")
    if which == "pilot":
        tok = train_math.word_count_tokenizer()
        work = cache_dir() / "math_pilot" / name
    else:  # the committed tokenizer; the small weights are kept with the logs
        tok = train_math.load_tokenizer(train_math.tokenizer_dir())
        work = out_dir(name, which)
    log(f"pilot {name}: {trained_templates(dials)} trained templates, layout "
        f"{stated}, {pilot['steps']} steps")
    t0 = time.perf_counter()
    saved = train_math.train(SIZE, work, steps=pilot["steps"], log=log, dials=dials,
                             prompt_length=stated[0], gen_length=stated[1],
                             tokenizer=tok, threads=threads)
    model = DLMForMaskedDiffusion.from_pretrained(saved, dtype=torch.float32).eval()
    final = final_figures(model, tok, dials, *stated, pilot["final_problems"])
    final.update(candidate=name, trained_templates=trained_templates(dials),
                 names=dials.names, wall_seconds=round(time.perf_counter() - t0, 1))
    final.update(layout=list(stated), **{k: getattr(dials, k) for k in FREEDOM_DIALS})
    dest = out_dir(name, which)
    dest.mkdir(parents=True, exist_ok=True)
    if dest != saved:
        for f in ("train_log.jsonl", "training.json"):
            shutil.copy(saved / f, dest / f)
    (dest / "final.json").write_text(json.dumps(final, indent=1) + "\n")
    log(f"pilot {name}: " + json.dumps({k: v for k, v in final.items()
                                        if k != "examples"}))
    return final


def results(which: str = "pilot") -> dict[str, dict]:
    """Every candidate's committed final figures (missing: not run yet)."""
    out = {}
    for name in spec(which)["candidates"]:
        f = out_dir(name, which) / "final.json"
        if f.exists():
            out[name] = json.loads(f.read_text())
    return out


def eligible(final: dict, rule: dict) -> bool:
    def ok(v, lo=-math.inf, hi=math.inf):
        return not math.isnan(v) and lo <= v <= hi

    return (ok(final["copy_acc"], rule["min_copy_acc"])
            and ok(final["ended_share"], rule["min_ended_share"])
            and ok(final["answer_acc"], rule["min_answer_acc"],
                   rule["max_answer_acc"]))


def choose(finals: dict[str, dict], rule: dict) -> tuple[str, str]:
    """(the chosen candidate, why) by the registry's rule over ``finals``; its
    callers pass every candidate's figures (a choice among some would not be
    the rule's: ``--report`` and the models page choose only then)."""
    if not finals:
        raise ValueError("no candidate has run")
    ok = [n for n, f in finals.items() if eligible(f, rule)]
    if ok:
        best = max(ok, key=lambda n: (finals[n]["trained_templates"],
                                      finals[n]["names"]))
        return best, (f"eligible: {', '.join(ok)}; the most trained templates "
                      f"({finals[best]['trained_templates']})")
    best = max(finals, key=lambda n: (-math.inf if math.isnan(finals[n]["copy_acc"])
                                      else finals[n]["copy_acc"]))
    return best, "none eligible: the highest copy share"


def last_decode(log_file: Path) -> dict:
    """The last record of a training log that has decode figures."""
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    decoded = [r for r in records if "tokens_per_nfe" in r]
    if not decoded:
        raise ValueError(f"{log_file} holds no decode figures")
    return decoded[-1]


def projection_factor(pilot: dict | None = None) -> tuple[float, dict]:
    """(factor, its parts) of the freedom pilot's projection: math/base's
    tokens per forward at the last decode of its training log over the zero
    candidate's at the last decode of its own (the same 128 held-out problems of
    narrow)."""
    pilot = pilot or spec("freedom_pilot")
    proj = pilot["projection"]
    rung = proj["target_model"].split("/")[1]
    base = last_decode(train_math.ladder_dir("math_narrow") / rung / "train_log.jsonl")
    zero = last_decode(out_dir(proj["zero"], "freedom_pilot") / "train_log.jsonl")
    parts = dict(target_tokens_per_nfe=base["tokens_per_nfe"],
                 target_step=base["step"], zero_tokens_per_nfe=zero["tokens_per_nfe"],
                 zero_step=zero["step"])
    return base["tokens_per_nfe"] / zero["tokens_per_nfe"], parts


def choose_freedom(finals: dict[str, dict], rule: dict,
                   factor: float) -> tuple[str, str, dict[str, float]]:
    """(the chosen candidate, why, each one's projected math/base rate) by the
    freedom pilot's rule (``book/claims.yml``: ``freedom_pilot``)."""
    if not finals:
        raise ValueError("no candidate has run")
    if not factor > 0:
        raise ValueError(f"the projection factor must be positive, got {factor}")
    lo, hi = rule["projected_tokens_per_nfe"]
    middle = math.sqrt(lo * hi)
    projected = {n: f["tokens_per_nfe"] * factor for n, f in finals.items()}

    def learnt(n):
        f = finals[n]
        return (not math.isnan(f["copy_acc"]) and f["copy_acc"] >= rule["min_copy_acc"]
                and f["ended_share"] >= rule["min_ended_share"])

    ok = [n for n in finals if learnt(n) and lo <= projected[n] <= hi]
    if ok:
        best = min(ok, key=lambda n: abs(math.log(projected[n] / middle)))
        return best, (f"eligible: {', '.join(ok)}; projected {projected[best]:.2f} "
                      f"slots per forward, the nearest to {middle:.2f}"), projected
    learners = [n for n in finals if learnt(n)]
    if not learners:
        raise ValueError("no candidate copies and ends as the rule asks: the "
                         "pilot chooses none")

    def distance(n):
        return max(math.log(lo / projected[n]), math.log(projected[n] / hi), 0.0)

    best = min(learners, key=distance)
    return best, (f"none eligible: no projection in [{lo}, {hi}]; the nearest is "
                  f"{best}'s {projected[best]:.2f}"), projected


def report(which: str) -> None:
    pilot = spec(which)
    finals = results(which)
    for name, f in finals.items():
        print(name, {k: v for k, v in f.items() if k != "examples"})
    missing = sorted(set(pilot["candidates"]) - set(finals))
    if missing:
        print(f"not run yet: {', '.join(missing)}")
    elif which == "pilot":
        print("chosen: {} ({})".format(*choose(finals, pilot["rule"])))
    else:
        factor, parts = projection_factor(pilot)
        chosen, why, projected = choose_freedom(finals, pilot["rule"], factor)
        print(f"projection factor {factor:.3f} ({parts})")
        print("projected:", {n: round(v, 2) for n, v in projected.items()})
        print(f"chosen: {chosen} ({why})")


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pilot", choices=PILOTS, default="pilot",
                   help="issue 34's pilot (default) or issue 42's freedom_pilot")
    p.add_argument("--candidate", action="append",
                   help="run this candidate (repeatable; default: every one)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--report", action="store_true",
                   help="print the committed figures and the rule's choice")
    a = p.parse_args(argv)
    if a.report:
        report(a.pilot)
        return
    for name in a.candidate or spec(a.pilot)["candidates"]:
        run(name, a.threads, which=a.pilot)


if __name__ == "__main__":
    main()
