"""Configuration of the LLaDA stand-in (written for dlmspec's tests, not LLaDA's code).

It keeps the traits of LLaDA's released configuration that matter to a loader:
a custom ``model_type`` ("llada"), OLMo-style field names (d_model, n_layers,
n_heads, mlp_hidden_size, embedding_size) and the special ids in the config.
"""

from transformers import PretrainedConfig


class LLaDAConfig(PretrainedConfig):
    model_type = "llada"

    def __init__(self, d_model=16, n_layers=2, n_heads=2, mlp_hidden_size=32,
                 vocab_size=126464, embedding_size=126464, max_sequence_length=256,
                 rope_theta=500000.0, rms_norm_eps=1e-5, mask_token_id=126336,
                 head_bias=False,
                 eos_token_id=126081, pad_token_id=126081, bos_token_id=126080,
                 **kwargs):
        self.d_model, self.n_layers, self.n_heads = d_model, n_layers, n_heads
        self.mlp_hidden_size = mlp_hidden_size
        self.vocab_size, self.embedding_size = vocab_size, embedding_size
        self.max_sequence_length, self.rope_theta = max_sequence_length, rope_theta
        self.rms_norm_eps, self.mask_token_id = rms_norm_eps, mask_token_id
        self.head_bias = head_bias  # the stand-in's own knob (see tests/standins.py)
        super().__init__(eos_token_id=eos_token_id, pad_token_id=pad_token_id,
                         bos_token_id=bos_token_id, **kwargs)
