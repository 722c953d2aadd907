"""A tiny LLaDA-like masked diffusion model (written for dlmspec's tests).

Traits copied from LLaDA's released code as they affect a loader, not its
layers: ``LLaDAModelLM.__init__`` never calls ``post_init()`` (transformers 5
sets ``all_tied_weights_keys`` there, so 5.x fails in ``from_pretrained``), the
code imports ``einops``, the interface is ``model(input_ids).logits`` with
position-aligned logits (row j predicts token j), and attention is
bidirectional. The layers are a plain pre-norm transformer.
"""

import torch
from einops import rearrange
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_llada import LLaDAConfig


def _rotate(x, theta):
    """Rotary position embedding of (B, H, L, D) by positions 0..L-1."""
    d = x.shape[-1]
    inv = theta ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)[:, None] * inv
    cos, sin = ang.cos().repeat(1, 2).to(x.dtype), ang.sin().repeat(1, 2).to(x.dtype)
    half = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
    return x * cos + half * sin


class LLaDABlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        d = config.d_model
        self.n_heads, self.theta = config.n_heads, config.rope_theta
        self.attn_norm = nn.RMSNorm(d, eps=config.rms_norm_eps)
        self.att_proj = nn.Linear(d, 3 * d, bias=False)
        self.attn_out = nn.Linear(d, d, bias=False)
        self.ff_norm = nn.RMSNorm(d, eps=config.rms_norm_eps)
        self.ff_proj = nn.Linear(d, 2 * config.mlp_hidden_size, bias=False)
        self.ff_out = nn.Linear(config.mlp_hidden_size, d, bias=False)

    def forward(self, h):
        qkv = self.att_proj(self.attn_norm(h))
        q, k, v = rearrange(qkv, "b l (t n d) -> t b n l d", t=3, n=self.n_heads)
        q, k = _rotate(q, self.theta), _rotate(k, self.theta)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=False)  # bidirectional
        h = h + self.attn_out(rearrange(a, "b n l d -> b l (n d)"))
        gate, up = self.ff_proj(self.ff_norm(h)).chunk(2, dim=-1)
        return h + self.ff_out(F.silu(gate) * up)


class LLaDAModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config.embedding_size, config.d_model)
        self.blocks = nn.ModuleList(LLaDABlock(config) for _ in range(config.n_layers))
        self.ln_f = nn.RMSNorm(config.d_model, eps=config.rms_norm_eps)
        self.ff_out = nn.Linear(config.d_model, config.embedding_size,
                                bias=getattr(config, "head_bias", False))

    def forward(self, input_ids):
        """(logits, hidden states: the embeddings, each block's, the final norm's)."""
        h = self.wte(input_ids)
        states = [h]
        for block in self.blocks:
            h = block(h)
            states.append(h)
        states[-1] = self.ln_f(h)
        return self.ff_out(states[-1]), tuple(states)


class LLaDAModelLM(PreTrainedModel):
    config_class = LLaDAConfig
    base_model_prefix = "model"
    _no_split_modules = ["LLaDABlock"]

    def __init__(self, config: LLaDAConfig, model=None, init_params: bool = False):
        super().__init__(config)
        self.model = model or LLaDAModel(config)
        # as in LLaDA's code: no self.post_init() here

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    # LLaDA's code defines these two (its embeddings sit inside its own module)
    def get_input_embeddings(self):
        return self.model.wte

    def get_output_embeddings(self):
        return self.model.ff_out

    def forward(self, input_ids=None, attention_mask=None, return_dict=None,
                output_hidden_states=None, **kwargs):
        logits, states = self.model(input_ids)
        logits = logits[..., : self.config.vocab_size]
        return CausalLMOutputWithPast(
            logits=logits, hidden_states=states if output_hidden_states else None)
