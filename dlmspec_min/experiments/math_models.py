"""The models page, math world (notebook 00): the generator, the ladder, the regime.

The page measures two ladders: the narrow world's (``WORLD``, ``data/models/math``;
the claims' math world from 2026-12-04 to 12-06, a dated record since) and the
free world's (``free_ladder``, ``data/models/math_free``; the claims' math world
since 2026-12-06, issue 42).

Every figure is measured here on held-out problems (``problems.HELD_OUT_SEED``,
never drawn in training) with the world's default decode: greedy,
``train_math.GEN_LENGTH`` tokens in blocks of 32, Fast-dLLM's threshold rule at
0.9 (``worlds.gsm``).

- **Ladder**: per model, exact final-answer accuracy (the number after the
  first ``####`` of the text before the first ``[EOS]`` equals the answer), with
  a 95 % bootstrap interval over problems; the same on problems written with
  templates never used in training (``problems.UNSEEN_TEMPLATES``), a
  generalisation figure, where the world writes such templates.
- **Text that ends**: the share of decodes whose text ends with ``#### n``
  followed by ``[EOS]``, and the share whose text is empty (``[EOS]`` first).
- **Regime** (on the ladder's target, ``base``): tokens per forward of the
  threshold decode over the whole generated window, with its interval; and
  LLaDA's baseline and every accelerator the claims measure against, each
  decode cut at its first ``[EOS]`` into text and tail
  (``measures.eos_tail``), with its answer accuracy.

A model of the ladder that is not trained yet (no weights in ``data/models``) is
reported as missing, its figures NaN, never dropped silently.

- **The first world** (``first_world``): the ladder trained on the grammar's
  first dials (``problems.LANDED``, rows of 64 + 96 tokens) before issue 34 moved
  the ladder to the pilot's world; its models are kept in
  ``data/models/math_first`` and measured the same way on that world.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pandas as pd
import torch

from ..decoding.config import DecodeConfig
from ..decoding.decode import generate
from ..decoding.denoisers import ModelNotAvailableError, load_denoiser
from ..measures import eos_tail, stats
from ..paths import data_dir, models_dir
from ..ssld import accelerators
from ..texts import problems as P
from ..texts.tokenizer import EOS_ID
from ..training import math_pilot, math_skills, train_math
from ..worlds.gsm import MATH_NARROW
from .common import Measurement

# the narrow world, the claims' math world from 2026-12-04 to 12-06: the page's
# dated record (since then the claims are measured in the free world, MATH)
WORLD = MATH_NARROW
SIZES = tuple(name.rsplit("/", 1)[1] for name in WORLD.ladder)  # small, base, large
BASELINE = "baseline (one token per forward)"
N_SHOWN = 3  # problems shown with each model's solution


def load_ladder(sizes=SIZES, *, device: str = "cpu", dtype: str | None = "float32",
                device_map: str | None = "none", world=WORLD) -> dict[str, Any]:
    """size -> denoiser for every trained model of ``world``'s ladder (default:
    the narrow world's; ``worlds.gsm.MATH``: the free ladder, the claims'
    math world); None where missing."""
    out = {}
    for s in sizes:
        try:
            out[s] = load_denoiser(f"{ladder_prefix(world)}{s}", device=device,
                                   dtype=dtype, device_map=device_map)[0]
        except ModelNotAvailableError:
            out[s] = None
    return out


def generator_table(dials: P.Dials | None = None) -> pd.DataFrame:
    """What the world's grammar draws from: templates per part (of its dials)."""
    dials = dials or train_math.DIALS
    held = set(P.UNSEEN_TEMPLATES)
    used = dials.template_names
    rows = [(part, len(set(names) & used), len(set(names) & used & held),
             ", ".join(sorted(set(names) & used)))
            for part, names in (("openings", P.OPENINGS), ("events", P.EVENTS),
                                ("questions", P.QUESTIONS))]
    out = pd.DataFrame(rows, columns=["part", "templates", "never trained on",
                                      "names"]).set_index("part")
    return out


def ranges_table(dials: P.Dials | None = None) -> pd.DataFrame:
    d = dials or train_math.DIALS
    rows = [("names", f"{d.names} first names"),
            ("objects", f"{d.objects} plural nouns, {d.containers} containers"),
            ("steps", f"{d.min_steps} to {d.max_steps} arithmetic sentences"),
            ("opening count", f"{d.start[0]} to {d.start[1]}"),
            ("added or subtracted", f"{d.add[0]} to {d.add[1]}"),
            ("factors, divisors, groups, days", f"{d.factor[0]} to {d.factor[1]}"),
            ("group size", f"{d.group[0]} to {d.group[1]}"),
            ("every intermediate result", f"an integer in [0, {d.max_value:,}]"),
            ("held-out seed", repr(P.HELD_OUT_SEED)),
            ("training seeds", repr(P.train_seed(0, 0)) + " ... (one per step)")]
    return pd.DataFrame(rows, columns=["what", "range"]).set_index("what")


def answer_text(tokenizer, row) -> str:
    """The decoded text before the first ``[EOS]``, specials dropped."""
    return tokenizer.decode(eos_tail.cut_at_eos([row], EOS_ID)[0],
                            skip_special_tokens=True).strip()


def grade(tokenizer, generated: torch.Tensor, batch: list[P.Problem]) -> pd.DataFrame:
    """Per decode: correct (exact final answer), ended (``#### n`` then
    ``[EOS]``), no_text (nothing before ``[EOS]``), and what it copied and
    computed (``training.math_skills.grade``: names and objects written and
    copied from the question, question numbers and those copied, arithmetic
    lines and those that hold)."""
    rows = []
    for ids, p in zip(generated.tolist(), batch, strict=True):
        text = eos_tail.cut_at_eos([ids], EOS_ID)[0]
        words = tokenizer.decode(text, skip_special_tokens=True).split()
        ended = (EOS_ID in ids and len(words) >= 2 and words[-2] == P.ANSWER_MARK
                 and words[-1].isdigit())
        skills = math_skills.grade(tokenizer, ids, p)
        rows.append(dict(correct=train_math.answer_of(tokenizer, ids) == p.answer,
                         ended=ended, no_text=not text, steps=p.steps,
                         **{k: skills[k] for k in SKILL_COUNTS}))
    return pd.DataFrame(rows)


SKILL_COUNTS = ("names_objects", "names_objects_copied", "question_numbers",
                "numbers_copied", "lines", "lines_right")
SKILLS = {"copy_acc": "names and objects copied", "number_copy":
          "question numbers copied", "arith_acc": "arithmetic lines right"}


def skill_shares(graded: pd.DataFrame) -> dict[str, float]:
    """The ladder's skills over a model's decodes (``math_skills.summarise``)."""
    out = math_skills.summarise(graded[list(SKILL_COUNTS)].assign(
        correct=graded.correct, ended=graded.ended,
        no_text=graded.no_text).to_dict("records"))
    return {k: float(out[k]) for k in SKILLS}


def _decode(model, prompts: torch.Tensor, config: DecodeConfig, batch_size: int):
    """One decode in batches (the result's rows in order); greedy, so batching
    does not change tokens."""
    results = [generate(model, prompts[i:i + batch_size], config)
               for i in range(0, len(prompts), batch_size)]
    return (torch.cat([r.generated for r in results]),
            torch.cat([r.nfe for r in results]), results)


def ordering(v: dict[str, Any], upper: str, lower: str) -> str:
    """How rung ``upper``'s answer accuracy stands against ``lower``'s, in words
    read from their 95 % intervals (``m_math_<size>_answer_acc[_lo|_hi]``)."""
    a, b = f"m_math_{upper}_answer_acc", f"m_math_{lower}_answer_acc"
    missing = [s for s, k in ((upper, a), (lower, b)) if math.isnan(v[k])]
    if missing:
        return f"not measured ({' and '.join(missing)} not trained yet)"
    if v[f"{a}_lo"] > v[f"{b}_hi"]:
        return f"{upper} above {lower}, intervals apart"
    if v[f"{a}_hi"] < v[f"{b}_lo"]:
        return f"{upper} below {lower}, intervals apart"
    return f"{upper} and {lower} within each other's intervals"


def _interval(flags, n_boot: int, seed: int) -> tuple[float, float, float]:
    return stats.mean_bootstrap(pd.Series(flags).to_numpy(float), n_boot, seed)


def _scored(v: dict[str, Any], k: str, graded: pd.DataFrame, n_bootstrap: int,
            seed: int) -> tuple[tuple[float, float, float], dict[str, float]]:
    """A model's graded answers into ``v`` as ``{k}_answer_acc`` with its
    bootstrap interval (``_lo``, ``_hi``) and ``{k}_<skill>``; the interval and
    the skills, for the page's table."""
    acc = _interval(graded.correct, n_bootstrap, seed)
    v[f"{k}_answer_acc"], v[f"{k}_answer_acc_lo"], v[f"{k}_answer_acc_hi"] = acc
    skills = skill_shares(graded)
    v.update({f"{k}_{name}": x for name, x in skills.items()})
    return acc, skills


def ladder_prefix(world) -> str:
    """``dlmspec/math/`` for the math world: its ladder's names less the size."""
    return world.ladder[0].rsplit("/", 1)[0] + "/"


def ladder_folder(world=WORLD):
    """Where ``world``'s ladder keeps its rungs (``data/models/<folder>``)."""
    return models_dir() / ladder_prefix(world)[len("dlmspec/"):-1]


def training_logs(sizes=SIZES, folder=None) -> pd.DataFrame:
    """Every trained model's log in ``folder`` (default ``data/models/math``), one
    row per evaluation, with its size and the peak learning rate it trained at."""
    folder = models_dir() / "math" if folder is None else folder
    frames = []
    for s in sizes:
        f = folder / s / "train_log.jsonl"
        if f.exists():
            recs = [json.loads(line) for line in f.read_text().splitlines()]
            made = json.loads((folder / s / "training.json").read_text())
            frames.append(pd.DataFrame(recs).assign(
                model=s, lr=made["hyperparameters"]["lr"]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def training_table(sizes=SIZES, world=WORLD) -> pd.DataFrame:
    rows = []
    for s in sizes:
        f = ladder_folder(world) / s / "training.json"
        if not f.exists():
            rows.append(dict(model=s, status="not trained yet"))
            continue
        t = json.loads(f.read_text())
        rows.append(dict(model=s, status="trained",
                         **{"parameters (M)": round(t["parameters"] / 1e6, 2),
                            "peak learning rate": t["hyperparameters"]["lr"],
                            "steps": t["steps"], "problems seen": t["problems_seen"],
                            "training minutes": round(t["train_seconds"] / 60, 1)}))
    table = pd.DataFrame(rows).set_index("model")
    counts = [c for c in ("steps", "problems seen") if c in table]
    return table.astype({c: "Int64" for c in counts})  # counts stay whole


def run_values(dials: P.Dials, n_problems: int, n_unseen: int,
               regime_problems: int, config: DecodeConfig) -> dict[str, Any]:
    """What the math ladder's run was: its sizes, layout, grammar and decode."""
    return {"m_math_n_problems": n_problems, "m_math_n_unseen": n_unseen,
            "m_math_prompt_length": train_math.PROMPT_LENGTH,
            "m_math_reserve": dials.reserve,
            "m_math_regime_problems": min(regime_problems, n_problems),
            "m_math_templates": len(dials.template_names),
            "m_math_unseen_templates": len(dials.template_names
                                           & P.UNSEEN_TEMPLATES),
            "m_math_gen_length": config.gen_length,
            "m_math_block_length": config.block_length,
            "m_math_threshold": config.threshold}


def measure(models: dict[str, Any], tokenizer, sizes, *, batch_size: int = 64,
            world=WORLD, prefix: str = "m_math_") -> Measurement:
    """Everything the models page measures in the math world (module docstring).

    ``models``: size -> denoiser or None (``load_ladder``). ``sizes``: the models
    page's ``Config`` (``experiments.models.Config``): ``math_problems`` held-out
    problems, ``math_unseen`` of unseen templates, ``math_regime_problems`` for
    the regime table, ``n_bootstrap``, ``seed`` and ``device``. Values are glued as
    ``<prefix>*`` (default ``m_math_*``); a missing model's figures are NaN.
    ``world``: a math world (``worlds.gsm.MathWorld``): its dials write the
    held-out problems, its folder holds the training logs.
    """
    if not prefix.startswith("m_") or not prefix.endswith("_"):
        raise ValueError(f"prefix must look like 'm_<name>_', got {prefix!r}")
    n_problems, n_unseen = sizes.math_problems, sizes.math_unseen
    regime_problems = sizes.math_regime_problems
    n_bootstrap, seed, device = sizes.n_bootstrap, sizes.seed, sizes.device
    dials = world.dials
    for name, n in [("math_problems", n_problems), ("math_unseen", n_unseen),
                    ("math_regime_problems", regime_problems),
                    ("batch_size", batch_size)]:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {n!r}")
    v: dict[str, Any] = {}
    tables: dict[str, Any] = {"generator": generator_table(dials),
                              "ranges": ranges_table(dials),
                              "training": training_table(list(models), world)}
    arrays: dict[str, Any] = {"logs": training_logs(list(models), ladder_folder(world))}
    held = world.problems(n_problems)
    if not P.has_unseen(dials):  # a world that holds no template back
        n_unseen = 0
    unseen = world.problems(n_unseen, "unseen") if n_unseen else []
    prompts = world.prompts(tokenizer, n_problems).to(device)
    config = train_math.decode_config()
    v.update(run_values(dials, n_problems, n_unseen, regime_problems, config))
    ladder, shown = [], {}
    for size, model in models.items():
        k = f"m_math_{size}"
        if model is None:
            for key in ("answer_acc", "answer_acc_lo", "answer_acc_hi",
                        "unseen_answer_acc", "tokens_per_nfe", *SKILLS):
                v[f"{k}_{key}"] = math.nan
            ladder.append(dict(model=size, status="not trained yet"))
            continue
        gen, nfe, _ = _decode(model, prompts, config, batch_size)
        graded = grade(tokenizer, gen.cpu(), held)
        acc, skills = _scored(v, k, graded, n_bootstrap, seed)
        tpf = stats.ratio_bootstrap([config.gen_length] * len(nfe),
                                    nfe.cpu().numpy(), n_bootstrap, seed)
        v[f"{k}_tokens_per_nfe"] = tpf[0]
        v[f"{k}_unseen_answer_acc"] = math.nan
        if unseen:
            unseen_prompts = train_math.encode(tokenizer, unseen)[
                :, :train_math.PROMPT_LENGTH]
            ugen, _, _ = _decode(model, unseen_prompts.to(device), config, batch_size)
            v[f"{k}_unseen_answer_acc"] = float(
                grade(tokenizer, ugen.cpu(), unseen).correct.mean())
        by_steps = graded.groupby("steps").correct.mean()
        ladder.append(dict(model=size, status="trained",
                           **{"answer accuracy": acc[0], "low": acc[1], "high": acc[2],
                              **({"unseen templates": v[f"{k}_unseen_answer_acc"]}
                                 if unseen else {}),
                              "tokens per forward": tpf[0],
                              "ended": graded.ended.mean(),
                              "no text": graded.no_text.mean(),
                              **{SKILLS[n]: x for n, x in skills.items()}},
                           **{f"accuracy, {s} step{'s' * (s > 1)}":
                              by_steps.get(s, math.nan)
                              for s in range(dials.min_steps,
                                             dials.max_steps + 1)}))
        shown[size] = [answer_text(tokenizer, row) for row in gen[:N_SHOWN].tolist()]
        if size == "base":  # the claims' target: the regime and the ending
            v["m_math_threshold_tokens_per_nfe"] = tpf[0]
            v["m_math_threshold_tokens_per_nfe_lo"] = tpf[1]
            v["m_math_threshold_tokens_per_nfe_hi"] = tpf[2]
            v["m_math_ended_share"] = float(graded.ended.mean())
            v["m_math_empty_share"] = float(graded.no_text.mean())
    tables["ladder"] = pd.DataFrame(ladder).set_index("model")
    if {"small", "base", "large"} <= set(models):
        v["m_math_base_vs_small"] = ordering(v, "base", "small")
        v["m_math_large_vs_base"] = ordering(v, "large", "base")
    tables["examples"] = pd.DataFrame(
        {"question": [p.question_text for p in held[:N_SHOWN]],
         "reference": [p.solution_text for p in held[:N_SHOWN]],
         **{f"{s} decodes": t for s, t in shown.items()}})
    base_v, base_tables = base_regime(models.get("base"), tokenizer, held, prompts,
                                      sizes, regime_problems, batch_size)
    v.update(base_v)
    tables.update(base_tables)
    if prefix != "m_math_":
        v = {prefix + k[len("m_math_"):]: x for k, x in v.items()}
    return Measurement(v, tables, arrays)


def base_regime(base, tokenizer, held, prompts, sizes, regime_problems: int,
                batch_size: int) -> tuple[dict, dict]:
    """The base rung's tokens per forward at each block length and its regime
    table (``m_math_block*``, ``m_math_regime_*``), on ``held``/``prompts`` with
    ``sizes``' bootstrap; all NaN where ``base`` is None (not trained yet)."""
    v: dict[str, Any] = {}
    tables: dict[str, Any] = {}
    n_bootstrap, seed = sizes.n_bootstrap, sizes.seed
    gen_length = train_math.decode_config().gen_length
    if base is None:
        for key in ("threshold_tokens_per_nfe", "threshold_tokens_per_nfe_lo",
                    "threshold_tokens_per_nfe_hi", "ended_share", "empty_share",
                    *(f"block{bl}_tokens_per_nfe{end}"
                      for bl in block_lengths(gen_length)
                      for end in ("", "_lo", "_hi"))):
            v[f"m_math_{key}"] = math.nan
        return v, tables
    tables["block_lengths"] = block_length_table(base, tokenizer, held, prompts,
                                                 n_bootstrap, seed, batch_size)
    for bl, row in tables["block_lengths"].iterrows():
        for col, key in (("tokens per forward", "tokens_per_nfe"),
                         ("low", "tokens_per_nfe_lo"),
                         ("high", "tokens_per_nfe_hi")):
            v[f"m_math_block{bl}_{key}"] = float(row[col])
    tables["regime"] = regime_table(base, tokenizer, held, prompts, regime_problems,
                                    n_bootstrap, seed, batch_size)
    best = tables["regime"].drop(index=BASELINE).tokens_per_forward.idxmax()
    v["m_math_regime_strongest"] = best
    v["m_math_regime_strongest_tpf"] = float(
        tables["regime"].loc[best, "tokens_per_forward"])
    v["m_math_regime_strongest_text_fraction"] = float(
        tables["regime"].loc[best, "text_fraction"])
    return v, tables


def regime_table(target, tokenizer, held, prompts, n: int, n_bootstrap: int,
                 seed: int, batch_size: int) -> pd.DataFrame:
    """LLaDA's baseline and every accelerator, greedy, on the first ``n`` (at most
    all) held-out
    questions: tokens per forward (text and tail) and answer accuracy."""
    config = train_math.decode_config()
    G, bl = config.gen_length, config.block_length
    configs = {BASELINE: DecodeConfig(gen_length=G, block_length=bl, steps=G),
               **accelerators.accelerators(G, bl, config.threshold, 0.0,
                                           supports_cache=target.supports_cache)}
    runs, acc = {}, {}
    for name, cfg in configs.items():
        gen, _, results = _decode(target, prompts[:n], cfg, batch_size)
        runs[name] = _merge(results)
        acc[name] = float(grade(tokenizer, gen.cpu(), held[:n]).correct.mean())
    table = eos_tail.regime_table(runs, EOS_ID, n_bootstrap, seed)
    table["answer_accuracy"] = pd.Series(acc)
    return table


def block_lengths(gen_length: int) -> list[int]:
    """Block lengths of the block-length table: multiples of 8 dividing the window."""
    return [b for b in range(8, gen_length + 1, 8) if gen_length % b == 0]


def block_length_table(target, tokenizer, held, prompts, n_bootstrap: int, seed: int,
                       batch_size: int) -> pd.DataFrame:
    """The world's threshold decode on ``target`` at every block length from 8 that
    divides the window (the world's own is the largest): tokens per forward
    with its 95 % interval, and answer accuracy, on the same questions."""
    config = train_math.decode_config()
    G = config.gen_length
    rows = {}
    for bl in block_lengths(G):
        cfg = DecodeConfig(gen_length=G, block_length=bl, rule="threshold",
                           threshold=config.threshold)
        gen, nfe, _ = _decode(target, prompts, cfg, batch_size)
        tpf = stats.ratio_bootstrap([G] * len(nfe), nfe.cpu().numpy(), n_bootstrap,
                                    seed)
        rows[bl] = {"tokens per forward": tpf[0], "low": tpf[1], "high": tpf[2],
                    "answer accuracy": float(grade(tokenizer, gen.cpu(), held)
                                             .correct.mean())}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("block length")


def _merge(results):
    """One ``DecodeResult``-like view of batched results (what ``regime`` reads)."""
    if len(results) == 1:
        return results[0]
    width = max(r.committed_per_step.shape[1] for r in results)

    class Merged:
        generated = torch.cat([r.generated for r in results])
        nfe = torch.cat([r.nfe for r in results])
        commit_step = torch.cat([r.commit_step for r in results])
        committed_per_step = torch.cat([torch.nn.functional.pad(
            r.committed_per_step, (0, width - r.committed_per_step.shape[1]))
            for r in results])

    return Merged()


# --- the first world, whose ladder did not learn it (issues 25, 26, 34) -----------
FIRST_WORLD = P.LANDED
FIRST_LAYOUT = (64, 96)  # prompt, response: its rows
FIRST_SIZES = ("small", "base")  # its large was never trained


def first_world_dir():
    return models_dir() / "math_first"


def first_world(n_problems: int = 400, n_bootstrap: int = 2000, seed: int = 0,
                batch_size: int = 64, device: str = "cpu", dtype: str = "float32",
                device_map: str = "none") -> Measurement:
    """The first world's ladder, measured on its own world as the models page
    measured it until 2026-12-04: ``n_problems`` held-out problems of
    ``FIRST_WORLD`` in its layout, the default decode (greedy, 96 tokens in
    blocks of 32, threshold 0.9), answer accuracy with a bootstrap interval and
    the skills (values ``m_first_{size}_*``; a missing model's are NaN)."""
    if (not isinstance(n_problems, int) or isinstance(n_problems, bool)
            or n_problems < 1):
        raise ValueError(f"n_problems must be an integer >= 1, got {n_problems!r}")
    prompt_length, gen_length = FIRST_LAYOUT
    config = train_math.decode_config(gen_length)
    held = P.problems(P.HELD_OUT_SEED, n_problems, "test", FIRST_WORLD)
    v: dict[str, Any] = {"m_first_n_problems": n_problems,
                         "m_first_templates": len(FIRST_WORLD.template_names),
                         "m_first_names": FIRST_WORLD.names}
    rows = []
    for size in FIRST_SIZES:
        k, path = f"m_first_{size}", first_world_dir() / size
        try:
            model, tok = load_denoiser(str(path), device=device, dtype=dtype,
                                       device_map=device_map)
        except (ModelNotAvailableError, OSError, ValueError):
            for key in ("answer_acc", "answer_acc_lo", "answer_acc_hi", *SKILLS):
                v[f"{k}_{key}"] = math.nan
            rows.append(dict(model=size, status=f"missing ({path})"))
            continue
        prompts = train_math.encode(tok, held, prompt_length,
                                    gen_length)[:, :prompt_length].to(device)
        gen, _, _ = _decode(model, prompts, config, batch_size)
        graded = grade(tok, gen.cpu(), held)
        acc, skills = _scored(v, k, graded, n_bootstrap, seed)
        trained = json.loads((path / "training.json").read_text())
        rows.append(dict(model=size, status="kept",
                         **{"parameters (M)": round(trained["parameters"] / 1e6, 2),
                            "steps": trained["steps"], "answer accuracy": acc[0],
                            "low": acc[1], "high": acc[2],
                            **{SKILLS[n]: x for n, x in skills.items()}}))
    return Measurement(v, {"ladder": pd.DataFrame(rows).set_index("model")}, {})


# --- the pilot that chose the world the ladder is retrained on (issue 34) -------------
PILOT_FIGURES = {"answer_acc": "answer accuracy", "copy_acc": SKILLS["copy_acc"],
                 "number_copy": SKILLS["number_copy"],
                 "arith_acc": SKILLS["arith_acc"], "ended_share": "ended",
                 "tokens_per_nfe": "tokens per forward (threshold 0.9)"}


def pilot() -> Measurement:
    """The pilot's candidates, their final figures and curves, and the rule's choice.

    Read from the committed logs (``data/math_pilot``, written by
    ``python -m dlmspec_min.training.math_pilot``) and the registry's rule; a
    candidate not run yet is listed as such and no choice is made. Answer
    accuracy gets a 95 % Wilson interval over the final problems.
    """
    from statsmodels.stats.proportion import proportion_confint

    spec, finals = math_pilot.spec(), math_pilot.results()
    v: dict[str, Any] = {"m_pilot_steps": spec["steps"],
                         "m_pilot_final_problems": spec["final_problems"],
                         "m_pilot_candidates": len(spec["candidates"]),
                         "m_pilot_run": len(finals)}
    for k, x in spec["rule"].items():
        v[f"m_pilot_rule_{k}"] = x
    dials, rows = [], []
    for name, cand in spec["candidates"].items():
        d = math_pilot.dials_of(cand)
        dials.append({"candidate": name,
                      "templates (trained)": math_pilot.trained_templates(d),
                      "templates (never trained)":
                          len(d.templates & P.UNSEEN_TEMPLATES),
                      "names": d.names, "objects": d.objects,
                      "containers": d.containers,
                      "steps": f"{d.min_steps} to {d.max_steps}",
                      "amounts": f"{d.start[0]} to {d.start[1]}",
                      "prompt + response": f"{cand['prompt_length']} + "
                                           f"{cand['gen_length']}"})
        f = finals.get(name)
        if f is None:
            rows.append({"candidate": name, "status": "not run"})
            for key in PILOT_FIGURES:
                v[f"m_pilot_{name}_{key}"] = math.nan
            continue
        lo, hi = proportion_confint(f["correct"], f["problems"], method="wilson")
        row = {"candidate": name, "status": "run",
               **{label: f[key] for key, label in PILOT_FIGURES.items()},
               "low": lo, "high": hi,
               "eligible": math_pilot.eligible(f, spec["rule"]),
               "minutes": round(f["wall_seconds"] / 60, 1)}
        rows.append(row)
        v.update({f"m_pilot_{name}_{key}": float(f[key]) for key in PILOT_FIGURES})
        v[f"m_pilot_{name}_answer_acc_lo"], v[f"m_pilot_{name}_answer_acc_hi"] = lo, hi
    if len(finals) == len(spec["candidates"]):
        v["m_pilot_chosen"], v["m_pilot_why"] = math_pilot.choose(finals, spec["rule"])
    else:
        v["m_pilot_chosen"] = "none yet"
        v["m_pilot_why"] = (f"{len(spec['candidates']) - len(finals)} candidate(s) "
                            "not run")
    logs = []
    for name in finals:
        f = math_pilot.out_dir(name) / "train_log.jsonl"
        recs = [json.loads(line) for line in f.read_text().splitlines()]
        logs.append(pd.DataFrame(recs).assign(candidate=name))
    examples = pd.DataFrame([dict(candidate=n, **e) for n, f in finals.items()
                             for e in f["examples"][:2]])
    return Measurement(
        v, {"dials": pd.DataFrame(dials).set_index("candidate"),
            "final": pd.DataFrame(rows).set_index("candidate"),
            "examples": examples},
        {"logs": pd.concat(logs, ignore_index=True) if logs else pd.DataFrame()})


# --- the second pilot: freedom in the solutions (issue 42) ------------------------
FREEDOM_FIGURES = {"answer_acc": "answer accuracy", "copy_acc": SKILLS["copy_acc"],
                   "arith_acc": SKILLS["arith_acc"], "ended_share": "ended",
                   "tokens_per_nfe": "slots per forward",
                   "answer_tokens_per_nfe": "answer tokens per forward",
                   "glue_bits": "glue bits", "content_bits": "content bits"}


def freedom_pilot() -> Measurement:
    """Issue 42's pilot: its candidates' dials and final figures, each one's
    projected ``math/base`` rate, and the rule's choice (``book/claims.yml``:
    ``freedom_pilot``; ``math_pilot.choose_freedom``). Read from the committed
    logs in ``data/math_freedom_pilot``; no choice is made until every
    candidate has run. Answer accuracy gets a 95 % Wilson interval."""
    from statsmodels.stats.proportion import proportion_confint

    which = "freedom_pilot"
    spec, finals = math_pilot.spec(which), math_pilot.results(which)
    lo_band, hi_band = spec["rule"]["projected_tokens_per_nfe"]
    v: dict[str, Any] = {"m_fp_steps": spec["steps"],
                         "m_fp_final_problems": spec["final_problems"],
                         "m_fp_candidates": len(spec["candidates"]),
                         "m_fp_run": len(finals), "m_fp_band_lo": lo_band,
                         "m_fp_band_hi": hi_band,
                         "m_fp_band_middle": math.sqrt(lo_band * hi_band),
                         "m_fp_rule_min_copy_acc": spec["rule"]["min_copy_acc"],
                         "m_fp_rule_min_ended_share": spec["rule"]["min_ended_share"]}
    zero = spec["projection"]["zero"]
    factor = math.nan
    if zero in finals:
        factor, parts = math_pilot.projection_factor(spec)
        v["m_fp_factor_target"] = parts["target_tokens_per_nfe"]
        v["m_fp_factor_zero"] = parts["zero_tokens_per_nfe"]
    v["m_fp_factor"] = factor
    rows = []
    for name, cand in spec["candidates"].items():
        row = {"candidate": name, **cand}
        f = finals.get(name)
        if f is None:
            rows.append({**row, "status": "not run"})
            continue
        lo, hi = proportion_confint(f["correct"], f["problems"], method="wilson")
        row.update({"status": "run",
                    **{label: f[key] for key, label in FREEDOM_FIGURES.items()},
                    "low": lo, "high": hi,
                    "projected math/base slots per forward":
                        f["tokens_per_nfe"] * factor,
                    "minutes": round(f["wall_seconds"] / 60, 1)})
        rows.append(row)
        v.update({f"m_fp_{name}_{key}": float(f[key]) for key in FREEDOM_FIGURES})
        v[f"m_fp_{name}_answer_acc_lo"], v[f"m_fp_{name}_answer_acc_hi"] = lo, hi
        v[f"m_fp_{name}_projected"] = f["tokens_per_nfe"] * factor
    if len(finals) == len(spec["candidates"]):
        v["m_fp_chosen"], v["m_fp_why"], _ = math_pilot.choose_freedom(
            finals, spec["rule"], factor)
    else:
        v["m_fp_chosen"] = "none yet"
        v["m_fp_why"] = (f"{len(spec['candidates']) - len(finals)} candidate(s) "
                         "not run")
    table = pd.DataFrame(rows).set_index("candidate")
    if "low" in table:
        table["eligible"] = [
            name in finals
            and lo_band <= r["projected math/base slots per forward"] <= hi_band
            and r[SKILLS["copy_acc"]] >= spec["rule"]["min_copy_acc"]
            and r["ended"] >= spec["rule"]["min_ended_share"]
            for name, r in table.iterrows()]
    logs = [pd.DataFrame([json.loads(line) for line in
                          (math_pilot.out_dir(n, which) / "train_log.jsonl")
                          .read_text().splitlines()]).assign(candidate=n)
            for n in finals]
    examples = pd.DataFrame([dict(candidate=n, **e) for n, f in finals.items()
                             for e in f["examples"][:2]])
    return Measurement(v, {"final": table, "examples": examples},
                       {"logs": pd.concat(logs, ignore_index=True) if logs
                        else pd.DataFrame()})


PILOT_CURVES = {"answer_acc": "answer accuracy",
                "copy_acc": "names and objects copied",
                "arith_acc": "arithmetic lines right",
                "tokens_per_nfe": "tokens per forward"}
FREEDOM_CURVES = {**PILOT_CURVES, "tokens_per_nfe": "slots per forward",
                  "answer_tokens_per_nfe": "answer tokens per forward"}


SHARED_LR_DIR = "math_ladder_shared_lr"  # under data/: base and large at 1e-3 (logs)
RECIPES = {"one rate: 1e-3 for every rung": lambda size: 1e-3,
           "1/width: 1e-3 x 128 / width": train_math.lr_for}
RECIPE_CURVES = {k: PILOT_CURVES[k] for k in ("copy_acc", "answer_acc")}


def recipe_logs(sizes=SIZES) -> pd.DataFrame:
    """Each rung's in-training decodes (128 held-out problems every 500 steps)
    under the two learning-rate recipes, long form (step, model, recipe, figure,
    value). Base and large first trained at one rate, 1e-3 (their logs are kept in
    ``data/math_ladder_shared_lr``); the ladder now trains at 1/width
    (``train_math.lr_for``). A run goes under the recipe whose rate its
    ``training.json`` records, so small (1e-3 at width 128) is under both."""
    runs = pd.concat([training_logs(sizes, data_dir() / SHARED_LR_DIR),
                      training_logs(sizes)], ignore_index=True)
    frames = [runs[[math.isclose(lr, rule(s))
                    for lr, s in zip(runs.lr, runs.model, strict=True)]]
              .assign(recipe=name)
              for name, rule in RECIPES.items()] if len(runs) else []
    if not frames:
        return pd.DataFrame(columns=["step", "model", "recipe", "figure", "value"])
    return (pd.concat(frames, ignore_index=True).dropna(subset=["answer_acc"])
            .drop_duplicates(["model", "recipe", "step"])  # a run in both folders
            .melt(id_vars=["step", "model", "recipe"], value_vars=list(RECIPE_CURVES),
                  var_name="figure")
            .assign(figure=lambda d: d.figure.map(RECIPE_CURVES)))


def draw_recipes(long: pd.DataFrame):
    """``recipe_logs`` as a grid: a row per figure, a column per recipe, a line
    per rung; ``None`` when no run has a log."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    if not len(long):
        return None
    g = sns.relplot(long, x="step", y="value", hue="model", hue_order=list(SIZES),
                    row="figure", col="recipe", col_order=list(RECIPES), kind="line",
                    marker="o", height=2.4, aspect=1.5,
                    facet_kws=dict(margin_titles=True))
    g.set_titles(row_template="{row_name}", col_template="{col_name}")
    g.set_axis_labels("training step", "")
    plt.close(g.figure)
    return g.figure


def _draw_curves(logs: pd.DataFrame, hue: str, curves: dict[str, str], **facets):
    """In-training decodes, one panel per figure of ``curves`` (those the logs
    hold), one line per ``hue``; ``None`` when there is no log."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    if not len(logs):
        return None
    present = [c for c in curves if c in logs]
    long = (logs.dropna(subset=["answer_acc"])
            .melt(id_vars=["step", hue], value_vars=present, var_name="figure")
            .assign(figure=lambda d: d.figure.map(curves)))
    g = sns.relplot(long, x="step", y="value", hue=hue, col="figure", kind="line",
                    marker="o", facet_kws=dict(sharey=False), **facets)
    g.set_titles("{col_name}")
    g.set_axis_labels("training step", "")
    plt.close(g.figure)
    return g.figure


def draw_pilot(m: Measurement, curves: dict[str, str] = PILOT_CURVES):
    """A pilot's curves, one panel per figure of ``curves`` and one line per
    candidate, from the decodes its runs logged during training; ``None`` when
    no candidate ran."""
    return _draw_curves(m.arrays["logs"], "candidate", curves, col_wrap=2,
                        height=2.6, aspect=1.4)


def draw_ladder(logs: pd.DataFrame, curves: dict[str, str] = FREEDOM_CURVES):
    """A ladder's in-training decodes (``training_logs``: 128 held-out problems
    every 500 steps), one panel per figure of ``curves``, one line per rung;
    ``None`` when no rung has a log."""
    rungs = [s for s in SIZES if s in set(logs.get("model", ()))]
    return _draw_curves(logs, "model", curves, hue_order=rungs, col_wrap=3,
                        height=2.4, aspect=1.3)


def targets_table(goals: dict[str, str], values: dict[str, Any],
                  evaluate: Callable[[str, dict], Any]) -> pd.DataFrame:
    """Each target's rule evaluated on ``values`` by ``evaluate(rule, values)``
    (``plumbing.claims.evaluate``: NaN reads as not met)."""
    return pd.DataFrame([(name, rule, bool(evaluate(rule, values)))
                         for name, rule in goals.items()],
                        columns=["target", "rule", "met"]).set_index("target")


def free_ladder(tokenizer, goals: dict[str, str], evaluate: Callable[[str, dict], Any],
                sizes, models: dict[str, Any] | None = None, *,
                batch_size: int = 64) -> Measurement:
    """The free ladder (issue 42, ``worlds.gsm.MATH``) measured as ``measure``
    measures the math ladder, on its own world's held-out problems, glued as
    ``m_free_*``; with its targets (``checks: models: free_targets``, written
    before it trained: ``goals``) evaluated: table ``targets``,
    ``m_free_targets_met`` of
    ``m_free_targets_total``. ``sizes``: the models page's ``Config``, as
    ``measure`` takes it. ``models`` (default: the committed free ladder,
    ``load_ladder(world=MATH)`` with ``sizes``' ``dtype`` and ``device_map``)."""
    from ..worlds.gsm import MATH

    if models is None:
        models = load_ladder(device=sizes.device, dtype=sizes.dtype,
                             device_map=sizes.device_map, world=MATH)
    m = measure(models, tokenizer, sizes, batch_size=batch_size, world=MATH,
                prefix="m_free_")
    table = targets_table(goals, m.values, evaluate)
    m.tables["targets"] = table
    m.values["m_free_targets_met"] = int(table.met.sum())
    m.values["m_free_targets_total"] = len(table)
    return m


REGIME_COLUMNS = ["tokens_per_forward", "text_fraction", "text_tokens_per_forward",
                  "tail_tokens_per_forward"]


def side_by_side(prose: pd.DataFrame, worlds: dict[str, Measurement]) -> pd.DataFrame:
    """The prose regime table beside each math world's (``measure``'s ``regime``
    table, with answer accuracy), one column group per world; a world whose
    base is not trained is left out and named in the printed line."""
    side = {"prose": prose[REGIME_COLUMNS]}
    for name, m in worlds.items():
        if "regime" in m.tables:
            side[name] = m.tables["regime"][REGIME_COLUMNS + ["answer_accuracy"]]
        else:
            print(f"{name}: its base, the claims' target, is not trained yet: "
                  "no regime table")
    return pd.concat(side, axis=1).T
