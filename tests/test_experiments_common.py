"""The pieces every claim's measurement shares (dlmspec_min.experiments.common)."""

import numpy as np
import pytest
import torch

from dlmspec_min.experiments.common import Measurement, load_models
from dlmspec_min.plumbing.claims import record_all


def test_a_draft_named_like_the_target_is_the_same_object():
    m = load_models("dlmspec/small", "dlmspec/small")
    assert m.draft is m.target
    assert m.tokenizer is not None and m.tokenizer.mask_token == "[MASK]"


def test_a_different_draft_is_loaded_separately():
    m = load_models("dlmspec/base", "dlmspec/small")
    assert m.draft is not m.target
    n_target = sum(p.numel() for p in m.target.model.parameters())
    n_draft = sum(p.numel() for p in m.draft.model.parameters())
    assert n_draft < n_target


def test_a_model_without_a_tokenizer_is_refused_before_anything_runs(
        model_without_tokenizer):
    with pytest.raises(ValueError, match="no tokenizer saved next to it"):
        load_models(model_without_tokenizer)


def test_measurement_reads_its_values_by_glue_name():
    m = Measurement(values={"c0_x": 1.5})
    assert m["c0_x"] == 1.5
    with pytest.raises(KeyError):
        m["c0_y"]


def test_record_all_glues_plain_scalars_in_order():
    out = record_all({"b": np.float64(0.25), "a": torch.tensor(3), "c": "text"})
    assert list(out) == ["b", "a", "c"]
    assert out == {"b": 0.25, "a": 3, "c": "text"}
    assert type(out["b"]) is float and type(out["a"]) is int
    with pytest.raises(TypeError, match="only scalars"):
        record_all({"v": np.zeros(2)})
