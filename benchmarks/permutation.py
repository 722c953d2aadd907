"""How long does the C4 permutation test take on the default data?

Builds the (draft token, target token) pairs of notebooks/04_cluster_verification.md
on its defaults (target dlmspec/base, draft dlmspec/small, K = 256, 32
unconditional samples of 48 tokens, oracle content anchors of the Fast-dLLM
threshold decode): both the verify-pass pairs (the relaxed decoder's
comparison) and the final-token pairs (more distinct tokens, the harder case).
Then times R = 10,000 size-matched random clusterings with

- ``semantic.permutation_test_fast`` (labels drawn only for the tokens that
  occur: a gather and a compare per clustering), and
- ``semantic.permutation_test`` (a full permutation of the vocabulary each),

reporting wall-clock and process CPU time (on a shared machine the CPU column
is the one to trust), with ``torch.set_num_threads(threads)``.

    python benchmarks/permutation.py [--R 10000] [--threads 2] [--full] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from dlmspec_min.decoding.decode import generate
from dlmspec_min.decoding.denoisers import load_denoiser
from dlmspec_min.measures import tagger
from dlmspec_min.measures.order import row_generators, unconditional_prompt
from dlmspec_min.ssld import accelerators, decoder, drafting, inputs, semantic

BUDGET_SECONDS = 5.0


def default_pairs(n_samples=32, gen_length=48, K=256, seed=0):
    target, tok = load_denoiser("dlmspec/base")
    draft, _ = load_denoiser("dlmspec/small")
    sid = semantic.semantic_ids_for(target, K, seed=seed, tokenizer=tok)
    prompt = unconditional_prompt(tok, n_samples)
    cfg = accelerators.accelerators(gen_length, 16, 0.9, 1.0)["Fast-dLLM threshold"]
    ref = generate(target, prompt, cfg, row_generators(seed, n_samples))
    P = prompt.shape[1]
    anchors = inputs.anchor_mask(tok, ref.tokens, tagger.default_lexicon())[:, P:]
    logits = decoder.verify_logits(target, prompt, gen_length)
    verify = logits.masked_fill(sid.special, float("-inf")).argmax(-1)
    drafted = drafting.SmallMarginalDraft(draft, sid)(prompt, gen_length).tokens
    return sid, {"verify-pass pairs": (drafted[anchors], verify[anchors]),
                 "final-token pairs": (drafted[anchors], ref.generated[anchors])}


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--R", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--full", action="store_true",
                    help="also time the full-vocabulary permutation_test")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sid, pairs = default_pairs()
    rows = []
    tests = {"permutation_test_fast": semantic.permutation_test_fast}
    if args.full:
        tests["permutation_test"] = semantic.permutation_test
    for pname, (d, t) in pairs.items():
        m = int(torch.unique(torch.cat([d, t])).numel())
        for tname, test in tests.items():
            g = torch.Generator().manual_seed(0)
            res, wall, cpu = timed(
                lambda test=test, d=d, t=t, g=g: test(d, t, sid, args.R, g))
            rows.append(dict(pairs=pname, n_pairs=len(d), distinct_tokens=m, test=tname,
                             R=args.R, wall_s=round(wall, 3), cpu_s=round(cpu, 3),
                             alpha=res.alpha, null_mean=res.null_mean,
                             p=res.p_random_more,
                             under_budget=cpu / args.threads < BUDGET_SECONDS
                             or wall < BUDGET_SECONDS))
            print(rows[-1])
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
