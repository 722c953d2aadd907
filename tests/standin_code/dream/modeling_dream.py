"""A tiny Dream-like masked diffusion model (written for dlmspec's tests).

Traits copied from Dream's released code as they affect a loader: the rotary
embedding looks up ``ROPE_INIT_FUNCTIONS["default"]`` (transformers 5 removed
that key: ``KeyError: 'default'``), the class is reached as ``AutoModel``, and
the logits are SHIFTED: Dream is initialised from an autoregressive model, so
row j of ``model(input_ids).logits`` predicts token j + 1 (a decoder shifts them
back). Attention is bidirectional. ``post_init()`` is called, as in Dream.
"""

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from .configuration_dream import DreamConfig


class DreamRotary(nn.Module):
    def __init__(self, config):
        super().__init__()
        rope_type = (config.rope_scaling or {}).get("rope_type", "default")
        inv_freq, self.scaling = ROPE_INIT_FUNCTIONS[rope_type](config, None)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x):  # x: (B, H, L, D)
        pos = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)
        ang = pos[:, None] * self.inv_freq.to(x.device)[None, :]
        cos = (ang.cos().repeat(1, 2) * self.scaling).to(x.dtype)
        sin = (ang.sin().repeat(1, 2) * self.scaling).to(x.dtype)
        d = x.shape[-1]
        return x * cos + torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1) * sin


class DreamLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        d, self.heads = config.hidden_size, config.num_attention_heads
        self.input_layernorm = nn.RMSNorm(d, eps=config.rms_norm_eps)
        self.q_proj = nn.Linear(d, d, bias=True)
        self.k_proj = nn.Linear(d, d, bias=True)
        self.v_proj = nn.Linear(d, d, bias=True)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.post_attention_layernorm = nn.RMSNorm(d, eps=config.rms_norm_eps)
        self.gate_proj = nn.Linear(d, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(d, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, d, bias=False)
        self.rotary = DreamRotary(config)

    def forward(self, h):
        b, n, _ = h.shape
        x = self.input_layernorm(h)
        q, k, v = (p(x).view(b, n, self.heads, -1).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        a = F.scaled_dot_product_attention(self.rotary(q), self.rotary(k), v)
        h = h + self.o_proj(a.transpose(1, 2).reshape(b, n, -1))
        x = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DreamBaseModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DreamLayer(config)
                                    for _ in range(config.num_hidden_layers))
        self.norm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, input_ids):
        """Hidden states: the embeddings, each layer's, the last one normed."""
        h = self.embed_tokens(input_ids)
        states = [h]
        for layer in self.layers:
            h = layer(h)
            states.append(h)
        states[-1] = self.norm(h)
        return tuple(states)


class DreamModel(PreTrainedModel):
    config_class = DreamConfig
    base_model_prefix = "model"
    _no_split_modules = ["DreamLayer"]

    def __init__(self, config: DreamConfig):
        super().__init__(config)
        self.model = DreamBaseModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size,
                                 bias=getattr(config, "head_bias", False))
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=self.config.initializer_range)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, input_ids=None, attention_mask=None, return_dict=None,
                output_hidden_states=None, **kwargs):
        states = self.model(input_ids)
        # row j: the prediction for token j + 1 (next-token style)
        return MaskedLMOutput(logits=self.lm_head(states[-1]),
                              hidden_states=states if output_hidden_states else None)
