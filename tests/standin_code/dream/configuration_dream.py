"""Configuration of the Dream stand-in (written for dlmspec's tests, not Dream's code).

Traits of Dream's released configuration that matter to a loader: the custom
``model_type`` "Dream" (capital D), Qwen2-style field names, ``rope_scaling``
None (so the rotary code asks for the "default" rope type) and the mask id.
"""

from transformers import PretrainedConfig


class DreamConfig(PretrainedConfig):
    model_type = "Dream"

    def __init__(self, vocab_size=152064, hidden_size=16, intermediate_size=32,
                 num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                 max_position_embeddings=256, rope_theta=1000000.0, rope_scaling=None,
                 rms_norm_eps=1e-6, hidden_act="silu", initializer_range=0.02,
                 mask_token_id=151666, head_bias=False, pad_token_id=151643,
                 bos_token_id=151643,
                 eos_token_id=151643, tie_word_embeddings=False, **kwargs):
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.max_position_embeddings = max_position_embeddings
        self.rope_theta, self.rope_scaling = rope_theta, rope_scaling
        self.rms_norm_eps, self.hidden_act = rms_norm_eps, hidden_act
        self.initializer_range, self.mask_token_id = initializer_range, mask_token_id
        self.head_bias = head_bias  # the stand-in's own knob (see tests/standins.py)
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id,
                         eos_token_id=eos_token_id,
                         tie_word_embeddings=tie_word_embeddings, **kwargs)
