"""How much of a decode is Python bookkeeping rather than model forwards?

Runs ``dlmspec_min.decoding.decode.generate`` on the 'base' embedded model shape
(hidden 256, 4 layers, 4 heads, intermediate 768, vocab 8192; the trained
weights from data/models/base when they exist, random weights otherwise),
batch 1, a 64-token sequence. For each decoder setting it records the exact
denoiser calls one decode makes, then times

- forwards: those calls replayed back to back (the model alone),
- decode:   the whole ``generate`` call,

and reports the per-step Python overhead (decode - forwards) / NFE in ms and
the ratio decode / forwards. Medians over repeats; one warm-up run excluded.
Both wall-clock and process CPU time are measured: on a machine shared with
other jobs the CPU-time columns are the ones to trust (use --threads 1).

    python benchmarks/decode_overhead.py [--repeats 5] [--threads N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import torch

from dlmspec_min.decoding.config import DecodeConfig
from dlmspec_min.decoding.decode import generate
from dlmspec_min.decoding.denoisers import Denoiser, load_denoiser
from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion
from dlmspec_min.measures import bench
from dlmspec_min.paths import models_dir

BASE_SHAPE = {"vocab_size": 8192, "hidden_size": 256, "num_hidden_layers": 4,
              "num_attention_heads": 4, "intermediate_size": 768}
SEQ_LEN = 64
PROMPT_LENGTH = 16
BLOCK_LENGTH = 16
SEED = 0
SETTINGS = {  # name -> DecodeConfig overrides
    "schedule, 1 token/step": {"rule": "schedule"},
    "threshold 0.9": {"rule": "threshold", "threshold": 0.9},
    "threshold 0.9, dual cache": {"rule": "threshold", "threshold": 0.9,
                                  "cache": "dual"},
}


def build_denoiser():
    if (models_dir() / "base" / "config.json").exists():
        return load_denoiser("dlmspec/base")[0], "data/models/base (trained)"
    torch.manual_seed(SEED)
    model = DLMForMaskedDiffusion(DLMConfig(max_position_embeddings=SEQ_LEN,
                                            **BASE_SHAPE))
    return Denoiser(model, model.config.mask_token_id), "random weights, base shape"


def measure(denoiser, prompt, config: DecodeConfig, repeats: int) -> dict:
    rec = bench.Recorder(denoiser)
    res = generate(rec, prompt, config)
    n = res.n_forwards
    fwd = bench.timed(lambda: bench.replay(denoiser, rec.calls), repeats)
    dec = bench.timed(lambda: generate(denoiser, prompt, config), repeats)
    out = {"nfe": n, "tokens_per_nfe": res.mean_tokens_per_nfe,
           "token_forwards": int(res.token_forwards.sum())}
    for clock, t_fwd, t_dec in (("wall", fwd[0], dec[0]), ("cpu", fwd[1], dec[1])):
        out[clock] = {"forwards_ms": 1e3 * t_fwd, "decode_ms": 1e3 * t_dec,
                      "overhead_ms_per_step": 1e3 * (t_dec - t_fwd) / n,
                      "ratio": t_dec / t_fwd}
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="torch threads")
    p.add_argument("--json", type=Path, default=None, help="write results here")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    denoiser, source = build_denoiser()
    g = torch.Generator().manual_seed(SEED)
    vocab = denoiser.vocab_size
    prompt = torch.randint(denoiser.mask_id + 1, vocab, (1, PROMPT_LENGTH), generator=g)
    gen_length = SEQ_LEN - PROMPT_LENGTH
    rows = {}
    for name, over in SETTINGS.items():
        cfg = DecodeConfig(gen_length=gen_length, block_length=BLOCK_LENGTH, **over)
        rows[name] = measure(denoiser, prompt, cfg, a.repeats)
    print(f"model: {source}; batch 1, {SEQ_LEN} tokens ({PROMPT_LENGTH} prompt + "
          f"{gen_length} generated, blocks of {BLOCK_LENGTH}); torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads; median of "
          f"{a.repeats} (warm-up excluded)")
    table = pd.DataFrame([
        {"setting": name, "clock": clock, "NFE": r["nfe"],
         "tok/NFE": r["tokens_per_nfe"], "fwd ms": r[clock]["forwards_ms"],
         "decode ms": r[clock]["decode_ms"],
         "ovh ms/step": r[clock]["overhead_ms_per_step"], "ratio": r[clock]["ratio"]}
        for name, r in rows.items() for clock in ("wall", "cpu")])
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {"model": source, "seq_len": SEQ_LEN, "prompt_length": PROMPT_LENGTH,
                "block_length": BLOCK_LENGTH, "batch": 1, "repeats": a.repeats,
                "threads": torch.get_num_threads(), "torch": torch.__version__}
        a.json.write_text(json.dumps({"meta": meta, "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
