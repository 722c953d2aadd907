"""Does trajectory speculation reach its performance requirements? (issue 7)

On the embedded target (``dlmspec/base`` by default; random weights of the
same shape if it is not trained here), greedy, the default prompts of
notebook 09 (held-out Brown prefixes: [BOS] + 7 tokens), 48 generated tokens
in blocks of 16, threshold 0.9, it decodes with

- Fast-dLLM threshold (no cache) and Fast-dLLM + dual cache,
- trajectory speculation on the dual-cache base policy, exact lookahead,
- trajectory speculation with the cheap (stale) inter-block lookahead,

and reports NFE, tokens per NFE, token-forwards, wall/CPU seconds, exact match
to the base policy, the speedup in tokens per NFE over Fast-dLLM threshold
(bootstrap CI over prompts), and the loop overhead at batch 1: the whole decode
against its forwards alone, both timed inside the same decode and replayed
(``dlmspec_min.measures.bench``). Requirements (issue 7): speedup >= 1.3 with 100 %
exact match; overhead ratio < 1.10. ``--check`` exits 1 if one fails.

    python benchmarks/speculation.py [--n-prompts 8] [--threads N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import torch

from dlmspec_min.decoding.config import DecodeConfig
from dlmspec_min.decoding.denoisers import Denoiser, load_denoiser
from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion
from dlmspec_min.decoding.speculate import drift
from dlmspec_min.measures import bench, stats
from dlmspec_min.measures.order import held_out_prompts
from dlmspec_min.paths import models_dir
from dlmspec_min.texts.tokenizer import BOS_ID

BASE_SHAPE = {"vocab_size": 8192, "hidden_size": 256, "num_hidden_layers": 4,
              "num_attention_heads": 4, "intermediate_size": 768}
GEN_LENGTH, BLOCK_LENGTH, PROMPT_LENGTH, THRESHOLD = 48, 16, 8, 0.9
MIN_SPEEDUP, MAX_OVERHEAD = 1.3, 1.10  # issue 7's requirements
COMMON = {"gen_length": GEN_LENGTH, "block_length": BLOCK_LENGTH,
          "rule": "threshold", "threshold": THRESHOLD}
DECODERS = {  # name -> (DecodeConfig overrides, base policy it must reproduce)
    "threshold": ({}, None),
    "dual": ({"cache": "dual"}, None),
    "traj exact": ({"cache": "dual", "speculate": "trajectory",
                    "lookahead": "exact"}, "dual"),
    "traj stale": ({"cache": "dual", "speculate": "trajectory",
                    "lookahead": "stale"}, "dual"),
}


def target_and_prompts(n: int):
    if (models_dir() / "base" / "config.json").exists():
        den, tok = load_denoiser("dlmspec/base")
        return den, held_out_prompts(tok, n, PROMPT_LENGTH), "dlmspec/base"
    torch.manual_seed(0)
    model = DLMForMaskedDiffusion(DLMConfig(**BASE_SHAPE))
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(5, BASE_SHAPE["vocab_size"], (n, PROMPT_LENGTH), generator=g)
    prompt[:, 0] = BOS_ID
    den = Denoiser(model, model.config.mask_token_id)
    return den, prompt, "random weights, base shape"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-prompts", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3, help="replay timing repeats")
    p.add_argument("--threads", type=int, default=None, help="torch threads")
    p.add_argument("--json", type=Path, default=None, help="write results here")
    p.add_argument("--check", action="store_true", help="exit 1 if a requirement fails")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    den, prompt, source = target_and_prompts(a.n_prompts)
    bench.timed_generate(den, prompt[:1], DecodeConfig(**COMMON, cache="dual"))  # warm
    runs, rows = {}, {}
    for name, (over, base) in DECODERS.items():
        res, t = bench.timed_generate(den, prompt, DecodeConfig(**COMMON, **over))
        runs[name] = res
        row = {"nfe": float(res.nfe.double().mean()),
               "tokens_per_nfe": res.mean_tokens_per_nfe,
               "token_forwards": float(res.token_forwards.double().mean()), **t}
        if base is not None:
            d = drift(res.generated, runs[base].generated)
            row["exact_match"] = float(d["exact"].mean())
            row["hamming"] = float(d["hamming"].mean())
            row["steps_per_verify"] = res.spec.mean_steps_per_verify
        rows[name] = row
    thr, traj = runs["threshold"], runs["traj exact"]
    speedup = stats.ratio_bootstrap(thr.nfe.numpy(), traj.nfe.numpy(), 2000, 0)
    cfg = DecodeConfig(**COMMON, **DECODERS["traj exact"][0])
    replayed = bench.loop_overhead(den, prompt[:1], cfg, repeats=a.repeats)
    _, inside = bench.timed_generate(den, prompt[:1], cfg)
    print(f"target: {source}; {len(prompt)} prompts of {PROMPT_LENGTH} tokens, "
          f"{GEN_LENGTH} generated in blocks of {BLOCK_LENGTH}, threshold "
          f"{THRESHOLD}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    cols = ["nfe", "tokens_per_nfe", "token_forwards", "wall_s", "cpu_s",
            "exact_match", "hamming", "steps_per_verify"]
    table = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=cols)
    print(table.to_string(float_format=lambda v: f"{v:.3f}", na_rep=""))
    print(f"speedup in tokens/NFE over Fast-dLLM threshold: {speedup[0]:.3f} "
          f"(95 % CI {speedup[1]:.3f}-{speedup[2]:.3f})")
    print(f"loop overhead at batch 1 (decode / forwards): timed inside "
          f"{inside['cpu_ratio']:.3f} CPU, {inside['ratio']:.3f} wall; replayed "
          f"{replayed['cpu_ratio']:.3f} CPU, {replayed['ratio']:.3f} wall")
    checks = {
        f"speedup >= {MIN_SPEEDUP}": speedup[0] >= MIN_SPEEDUP,
        "100 % exact match": rows["traj exact"]["exact_match"] == 1.0,
        f"overhead (CPU, timed inside) < {MAX_OVERHEAD}":
            inside["cpu_ratio"] < MAX_OVERHEAD,
    }
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        out = {"target": source, "rows": rows, "speedup": speedup,
               "overhead_inside": inside, "overhead_replayed": replayed,
               "checks": checks, "threads": torch.get_num_threads()}
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return 1 if a.check and not all(checks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
