"""The paper models' loading path, on stand-ins of their remote code.

``tests/standins.py`` writes tiny seeded checkpoints whose config and model
classes live in Python files next to the weights (reached through ``auto_map``),
with the traits of LLaDA's and Dream's released code that broke loading: no
``post_init()`` call, custom ``model_type``s, ``ROPE_INIT_FUNCTIONS["default"]``,
Dream's shifted logits, the real vocabulary sizes and special ids.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import standins
import torch
import transformers

from dlmspec_min.decoding.config import DecodeConfig
from dlmspec_min.decoding.decode import generate
from dlmspec_min.decoding.denoisers import (
    PAPER_MODELS,
    family_of,
    load_denoiser,
    spec_for_config,
)

V5 = int(transformers.__version__.split(".")[0]) >= 5
needs_v4 = pytest.mark.skipif(
    V5, reason="the paper models' code, and so these stand-ins, need transformers "
    "4.x (the pinned 4.57.1; see data/README.md)",
)
LLADA, DREAM = "GSAI-ML/LLaDA-8B-Base", "Dream-org/Dream-v0-Base-7B"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    if V5:
        pytest.skip("stand-ins need transformers 4.x")
    root = tmp_path_factory.mktemp("standins")
    return {name: standins.write_standin(name, root / name.split("/")[1])
            for name in (LLADA, DREAM)}


@pytest.fixture(scope="module")
def loaded(folders):
    return {name: load_denoiser(path, trust_remote_code=True)
            for name, path in folders.items()}


def _prompt(tok, batch=2):
    ids = tok("The jury said it did find that")["input_ids"]
    return torch.tensor([ids] * batch)


# --- recognising a paper model's folder (no weights needed) ----------------------

@pytest.mark.parametrize(("config", "family"), [
    ({"model_type": "llada"}, "llada"),
    ({"architectures": ["LLaDAModelLM"]}, "llada"),
    ({"auto_map": {"AutoModel": "modeling_llada.LLaDAModelLM"}}, "llada"),
    ({"model_type": "Dream"}, "dream"),
    ({"auto_map": {"AutoModel": "modeling_dream.DreamModel"}}, "dream"),
    ({"model_type": "mdlm", "auto_map": {"AutoModelForMaskedLM": "modeling_mdlm.MDLM"}},
     "mdlm"),
    ({"model_type": "bert", "architectures": ["BertForMaskedLM"]}, None),
])
def test_family_of_config(config, family):
    assert family_of(config) == family
    spec = spec_for_config(config)
    assert (spec is None) == (family is None)
    if spec is not None:
        assert spec.name in PAPER_MODELS and spec.role == "denoiser"


def _write_config(folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("model_type", ["llada", "Dream", "mdlm"])
def test_paper_folder_needs_opt_in(tmp_path, model_type):
    folder = _write_config(tmp_path, {"model_type": model_type,
                                      "auto_map": {"AutoModel": "m.M"}})
    with pytest.raises(ValueError, match="trust_remote_code=True") as err:
        load_denoiser(folder)
    assert "\n" not in str(err.value)  # one line


@pytest.mark.parametrize("trust", [False, True])
def test_unknown_remote_code_says_what_to_pass(tmp_path, trust):
    folder = _write_config(tmp_path, {"model_type": "mystery", "auto_map": {
        "AutoConfig": "configuration_mystery.C", "AutoModel": "modeling_mystery.M"}})
    with pytest.raises(ValueError, match=r"Denoiser\(model, mask_id=.*shifted=") as err:
        load_denoiser(folder, trust_remote_code=trust)
    assert "'mystery'" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.skipif(not V5, reason="documents why transformers 4.x is pinned")
def test_transformers_5_breaks_like_dream(tmp_path):
    with pytest.raises(KeyError, match="default"):  # ROPE_INIT_FUNCTIONS["default"]
        standins.write_standin(DREAM, tmp_path)


# --- the stand-ins loaded from a folder -------------------------------------------

@needs_v4
def test_folder_loads_with_registry_constants(loaded):
    den, tok = loaded[LLADA]
    assert type(den.model).__name__ == "LLaDAModelLM"
    assert den.spec is PAPER_MODELS[LLADA] and not den.shifted
    assert (den.mask_id, den.vocab_size) == (126336, 126464)
    assert (tok.mask_token_id, tok.eos_token_id) == (126336, 126081)
    assert tok.convert_tokens_to_ids("[EOT]") == den.spec.eot_id == 126348
    den, tok = loaded[DREAM]
    assert type(den.model).__name__ == "DreamModel"
    assert den.spec is PAPER_MODELS[DREAM] and den.shifted
    assert (den.mask_id, den.vocab_size) == (151666, 152064)
    assert (tok.mask_token_id, tok.eos_token_id, len(tok)) == (151666, 151643, 152064)


@needs_v4
def test_shifted_and_aligned_logits(loaded):
    den, tok = loaded[LLADA]
    x = _prompt(tok)
    raw = den.model(x).logits  # LLaDA's interface: model(input_ids).logits
    assert torch.equal(den.logits(x), raw.detach())  # aligned: row j predicts j
    den, tok = loaded[DREAM]
    raw = den.model(input_ids=x).logits.detach()
    aligned = den.logits(x)
    assert torch.equal(aligned[:, 1:], raw[:, :-1])  # row j comes from hidden j - 1
    assert torch.equal(aligned[:, 0], raw[:, 0])
    assert not torch.equal(aligned, raw)


OPTIONS = {  # every decoding option of DecodeConfig, on 8 tokens in 2 blocks
    "schedule": {},
    "schedule-half-steps": {"steps": 4},
    "schedule-random": {"remasking": "random", "temperature": 1.0},
    "threshold": {"rule": "threshold", "threshold": 0.3},
    "factor": {"rule": "factor", "factor": 1.0},
    "threshold-logits-softmax": {"rule": "threshold", "softmax_dtype": "logits"},
    "trajectory-none": {"speculate": "trajectory", "lookahead": "none",
                        "rule": "threshold", "threshold": 0.5},
    "trajectory-exact": {"speculate": "trajectory", "lookahead": "exact",
                         "rule": "threshold", "threshold": 0.3},
}


@needs_v4
@pytest.mark.parametrize("name", [LLADA, DREAM])
@pytest.mark.parametrize("option", list(OPTIONS))
def test_decode_every_option_batched(loaded, name, option):
    den, tok = loaded[name]
    x = _prompt(tok)
    cfg = DecodeConfig(gen_length=8, block_length=4, **OPTIONS[option])
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    out = generate(den, x, cfg, gens if cfg.temperature > 0 else None)
    assert out.tokens.shape == (2, x.shape[1] + 8)
    assert torch.equal(out.tokens[:, : x.shape[1]], x)
    assert not (out.generated == den.mask_id).any()
    assert ((out.nfe >= 2) & (out.nfe <= 8)).all()
    if cfg.speculate == "trajectory":  # exact speculation returns F's tokens
        base = generate(den, x, dataclasses.replace(cfg, speculate="none"))
        assert torch.equal(out.tokens, base.tokens)
        assert out.spec is not None
    if cfg.temperature == 0:  # greedy rows of one prompt are equal
        assert torch.equal(out.tokens[0], out.tokens[1])


@needs_v4
@pytest.mark.parametrize("name", [LLADA, DREAM])
def test_no_kv_cache_is_a_clear_error(loaded, name):
    den, tok = loaded[name]
    with pytest.raises(ValueError, match="KV cache"):
        generate(den, _prompt(tok), DecodeConfig(gen_length=4, cache="prefix"))


# --- by registry name, through a hub cache ------------------------------------------

BY_NAME = textwrap.dedent("""
    import json, sys, torch
    from transformers import AutoTokenizer
    from dlmspec_min.decoding.config import DecodeConfig
    from dlmspec_min.decoding.decode import generate
    from dlmspec_min.decoding.denoisers import load_denoiser
    out = {}
    for name, snapshot in json.loads(sys.argv[1]).items():
        den, tok = load_denoiser(name, trust_remote_code=True)
        by_folder, _ = load_denoiser(snapshot, trust_remote_code=True)
        plain = AutoTokenizer.from_pretrained(name, local_files_only=True)
        x = torch.tensor([tok("The jury said")["input_ids"]] * 3)
        res = generate(den, x, DecodeConfig(gen_length=8, block_length=4,
                                            rule="threshold", threshold=0.3))
        try:
            load_denoiser(name)
            refused = False
        except ValueError as e:
            refused = "trust_remote_code=True" in str(e)
        out[name] = {"spec": den.spec.name, "mask": den.mask_id,
                     "shifted": den.shifted, "tok_mask": plain.mask_token_id,
                     "same_as_folder": torch.equal(den.logits(x), by_folder.logits(x)),
                     "decoded": not (res.generated == den.mask_id).any().item(),
                     "refused": refused}
    print(json.dumps(out))
""")


@needs_v4
def test_registry_names_load_from_a_hub_cache(tmp_path):
    snapshots = standins.write_hub_cache(tmp_path / "hf")
    assert set(snapshots) == set(standins.STANDINS)
    for name, snap in snapshots.items():
        repo = snap.parents[1]
        assert repo.name == "models--" + name.replace("/", "--")
        assert (repo / "refs" / "main").read_text() == snap.name
        assert (snap / "config.json").exists() and (snap / "model.safetensors").exists()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "DLMSPEC_ALLOW"))}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]))
    arg = json.dumps({k: str(v) for k, v in snapshots.items()})
    run = subprocess.run([sys.executable, "-c", BY_NAME, arg], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    for name, r in result.items():
        spec = PAPER_MODELS[name]
        assert r["spec"] == name and r["mask"] == r["tok_mask"] == spec.mask_id
        assert r["shifted"] == spec.shifted
        assert r["same_as_folder"] and r["decoded"] and r["refused"]
