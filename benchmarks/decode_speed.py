"""What decodes fastest on this machine? Every rule, cache and speculation setting.

Times ``dlmspec_min.decoding.generate`` on two embedded models, the prose
world's ``dlmspec/small`` (64 tokens after "[BOS] text", blocks of 16) and the
math world's ``dlmspec/math_free/base`` (its own layout: a 32-token question,
32 tokens in one block), at batch 1 and batch 8, greedy, for

- LLaDA's schedule (one token per forward), Fast-dLLM's threshold rule (0.9)
  and its factor rule (f = 1), each without a cache, with the prefix cache and
  with the dual cache;
- trajectory speculation over the threshold rule (exact lookahead, the
  default draft and budget), with each cache, and its CPU setting (one drafted
  state, 2 rows per call) over the dual cache.

Per setting it reports tokens per second (generated tokens of the batch over
the median wall time of ``--repeats`` decodes, after one warm-up), the wall
time, the forwards per row (``nfe``: verify calls under speculation), the
denoiser calls made for the whole batch (``n_forwards``) and the positions
computed per row (``token_forwards``). A benchmark, not a test: the numbers
depend on the machine, its load and its thread count.

    python benchmarks/decode_speed.py [--device cuda] [--threads 1] [--repeats 3]
                                      [--json benchmarks/results/decode_speed.json]

The library page (``book/library/using.md``) shows the table of the committed
JSON, with the machine it names.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from dlmspec_min.decoding import DecodeConfig, encode_prompts, generate, load_denoiser

PROSE_TEXTS = [  # 8 short openings, any text will do: speed does not read it
    "The jury said", "It was the first time", "He did not", "In the morning",
    "The city council", "She looked at", "There was no", "After the war",
]
MODELS = {  # name -> (texts' source, gen_length, block_length)
    "dlmspec/small": ("prose", 64, 16),
    "dlmspec/math_free/base": ("math", 32, 32),
}
RULES = {"schedule": {}, "threshold": {"threshold": 0.9}, "factor": {"factor": 1.0}}
CACHES = ("none", "prefix", "dual")
BATCHES = (1, 8)


def settings():
    """(label, DecodeConfig overrides) for every rule x cache, then speculation."""
    for rule, extra in RULES.items():
        for cache in CACHES:
            yield f"{rule} / {cache}", {"rule": rule, "cache": cache, **extra}
    for cache in CACHES:
        yield f"trajectory / {cache}", {"rule": "threshold", "threshold": 0.9,
                                        "cache": cache, "speculate": "trajectory",
                                        "lookahead": "exact"}
    # the CPU setting (trajectory_speculation.cpu_setting): one drafted state,
    # 2 rows per verify call, the default draft shape, over the dual cache
    yield "trajectory 1-draft / dual", {"rule": "threshold", "threshold": 0.9,
                                        "cache": "dual", "speculate": "trajectory",
                                        "lookahead": "exact", "spec_budget": 1}


def math_questions(n: int) -> list[str]:
    from dlmspec_min.worlds import get_world

    return [p.question_text for p in get_world("math").problems(n)]


def timed(denoiser, prompt, config, repeats, device):
    def once():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        out = generate(denoiser, prompt, config)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return out, time.perf_counter() - t0

    once()  # warm-up: allocator, kernels, caches
    runs = [once() for _ in range(repeats)]
    return runs[-1][0], statistics.median(t for _, t in runs)


def machine(device: torch.device, threads: int) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA), torch {torch.__version__}"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {threads} thread(s), torch {torch.__version__}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="torch device (cpu, cuda, ...)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for torch")
    ap.add_argument("--repeats", type=int, default=3, help="timed decodes per cell")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = ap.parse_args(argv)
    if args.threads < 1 or args.repeats < 1:
        ap.error("--threads and --repeats must be >= 1")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device {args.device}: torch sees no CUDA GPU here")
    torch.set_num_threads(args.threads)
    rows = []
    for name, (source, gen_length, block_length) in MODELS.items():
        denoiser, tokenizer = load_denoiser(name, device=device)
        texts = PROSE_TEXTS if source == "prose" else math_questions(max(BATCHES))
        for batch in BATCHES:
            prompt = encode_prompts(tokenizer, texts[:batch],
                                    length=denoiser.prompt_length, device=device)
            for label, overrides in settings():
                config = DecodeConfig(gen_length=gen_length, block_length=block_length,
                                      **overrides)
                out, wall = timed(denoiser, prompt, config, args.repeats, device)
                row = {
                    "model": name, "batch": batch, "setting": label,
                    "tokens_per_s": batch * gen_length / wall,
                    "wall_s": wall,
                    "nfe_per_row": float(out.nfe.double().mean()),
                    "n_forwards": int(out.n_forwards),
                    "token_forwards_per_row": float(out.token_forwards.double().mean()),
                }
                rows.append(row)
                print(f"{name:24s} B={batch} {label:22s} {row['tokens_per_s']:8.1f} "
                      f"tok/s  {wall * 1000:8.1f} ms  nfe {row['nfe_per_row']:5.1f}  "
                      f"calls {row['n_forwards']:4d}", flush=True)
    result = {
        "machine": machine(device, args.threads), "device": str(device),
        "threads": args.threads, "repeats": args.repeats,
        "date": datetime.date.today().isoformat(), "rows": rows,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
