"""The embedded LLaDA-style model: Auto-class round trip, KV-cache windows, heads."""

import torch
from transformers import AutoConfig, AutoModelForMaskedLM

import dlmspec_min  # noqa: F401  (registers the model type)
from dlmspec_min.decoding.modeling import DLMConfig, DLMForMaskedDiffusion


def tiny(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2,
               num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    return DLMForMaskedDiffusion(DLMConfig(**{**cfg, **kw})).eval()


def test_save_and_load_through_auto_classes(tmp_path):
    model = tiny()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    assert AutoConfig.from_pretrained(tmp_path).model_type == "dlmspec"
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    x = torch.randint(0, 50, (2, 12))
    assert torch.equal(model(x).logits, loaded(x).logits)


def test_bidirectional_no_causal_mask():
    model = tiny()
    x = torch.randint(5, 50, (1, 10))
    y = x.clone()
    y[0, -1] = (x[0, -1] + 1) % 50
    # changing the LAST token changes the FIRST position's logits: attention sees right
    assert not torch.allclose(model(x).logits[0, 0], model(y).logits[0, 0])


def test_window_over_everything_equals_full_forward():
    model = tiny()
    x = torch.randint(0, 50, (3, 16))
    full, cache = model.prefill(x)
    assert torch.equal(model.forward_window(x, 0, cache), full)


def test_fresh_cache_window_matches_full_forward_in_the_window():
    model = tiny()
    x = torch.randint(0, 50, (2, 16))
    full, cache = model.prefill(x)
    win = model.forward_window(x[:, 4:8], 4, cache)  # dual-cache window, nothing stale
    torch.testing.assert_close(win, full[:, 4:8], atol=1e-5, rtol=1e-5)
    win = model.forward_window(x[:, 4:], 4, cache)  # prefix-cache window
    torch.testing.assert_close(win, full[:, 4:], atol=1e-5, rtol=1e-5)


def test_stale_cache_differs_from_fresh():
    model = tiny()
    x = torch.randint(0, 50, (1, 16))
    _, stale = model.prefill(x)
    y = x.clone()
    y[0, 10:] = (y[0, 10:] + 7) % 50  # the suffix changes after the cache was built
    fresh = model(y).logits[:, 4:8]
    approx = model.forward_window(y[:, 4:8], 4, stale)
    assert not torch.allclose(fresh, approx)


def test_output_mask_computes_the_head_only_where_asked():
    model = tiny()
    x = torch.randint(0, 50, (2, 12))
    m = torch.rand(2, 12) < 0.4
    torch.testing.assert_close(model(x, output_mask=m).logits, model(x).logits[m])


def test_too_long_sequence_is_a_clear_error():
    model = tiny(max_position_embeddings=8)
    try:
        model(torch.zeros(1, 9, dtype=torch.long))
    except ValueError as e:
        assert "max_position_embeddings" in str(e)
    else:
        raise AssertionError("no error for a sequence longer than the positions")
