"""A LLaDA-style masked diffusion transformer, small enough to train on 2 cores.

Architecture as in LLaDA (Nie et al., 2025, "Large Language Diffusion Models",
Sec. 2 and App. B): a Llama-like stack of pre-RMSNorm blocks with rotary
positions and SwiGLU, but with NO causal mask, trained to predict masked tokens.
The output head shares the input embedding matrix.

It also offers Fast-dLLM's approximate KV cache (Wu et al., 2025, Sec. 3.1):
``prefill`` runs the full sequence once and returns every layer's keys/values;
``forward_window`` recomputes only positions ``[start, start + W)`` and attends
to the cached keys/values everywhere else (a prefix cache when the window runs
to the end of the sequence, a dual cache when it is one block).
Registered with the transformers Auto classes on ``import dlmspec_min``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import MaskedLMOutput

KVCache = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: (B, nh, L, hd) twice


class DLMConfig(PretrainedConfig):
    """Configuration of the embedded model (``model_type="dlmspec"``).

    Registered with transformers' ``AutoConfig`` on import, so a folder saved
    with ``save_pretrained`` loads with ``AutoModelForMaskedLM`` or
    ``load_denoiser``. Sizes are in tokens (vocabulary, positions) or features.

    Parameters
    ----------
    vocab_size : int, default 8192
        V, tokens of the vocabulary.
    hidden_size : int, default 256
        Width D of the residual stream; divisible by ``num_attention_heads``.
    num_hidden_layers : int, default 4
        Transformer blocks.
    num_attention_heads : int, default 4
        Attention heads per block (head size ``hidden_size // heads``).
    intermediate_size : int, default 768
        Hidden width of each SwiGLU feed-forward.
    max_position_embeddings : int, default 256
        Longest sequence (prompt + generated tokens) the model accepts.
    rope_theta : float, default 10000.0
        Base of the rotary position frequencies.
    rms_norm_eps : float, default 1e-5
        Epsilon of the RMS norms.
    initializer_range : float, default 0.02
        Standard deviation of the initial weights.
    mask_token_id : int, default 4
        The mask token; ``load_denoiser`` gives it to the ``Denoiser``.
    pad_token_id : int, default 0
        Padding token.
    bos_token_id : int, default 2
        Start token; the embedded models were trained on sequences that begin
        with it, so a prompt should too.
    eos_token_id : int, default 3
        End token.
    **kwargs
        Passed to ``transformers.PretrainedConfig``.
    """

    model_type = "dlmspec"

    def __init__(
        self,
        vocab_size: int = 8192,
        hidden_size: int = 256,
        num_hidden_layers: int = 4,
        num_attention_heads: int = 4,
        intermediate_size: int = 768,
        max_position_embeddings: int = 256,
        rope_theta: float = 10000.0,
        rms_norm_eps: float = 1e-5,
        initializer_range: float = 0.02,
        mask_token_id: int = 4,
        pad_token_id: int = 0,
        bos_token_id: int = 2,
        eos_token_id: int = 3,
        **kwargs,
    ):
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be divisible by "
                f"num_attention_heads ({num_attention_heads})"
            )
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.rope_theta = rope_theta
        self.rms_norm_eps = rms_norm_eps
        self.initializer_range = initializer_range
        self.mask_token_id = mask_token_id
        super().__init__(
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            **kwargs,
        )


def rotary_tables(cfg: DLMConfig, positions: torch.Tensor, dtype: torch.dtype):
    """cos/sin tables (W, hd/2) for the given absolute positions."""
    hd = cfg.hidden_size // cfg.num_attention_heads
    inv = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, device=positions.device) / hd)
    ang = positions.float()[:, None] * inv[None, :]
    return ang.cos().to(dtype), ang.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., ::2], x[..., 1::2]  # (B, nh, W, hd/2)
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg: DLMConfig):
        super().__init__()
        self.nh = cfg.num_attention_heads
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size, bias=False)
        self.out = nn.Linear(cfg.hidden_size, cfg.hidden_size, bias=False)

    def forward(self, h, cos, sin, cache=None, start=0):
        B, W, D = h.shape
        q, k, v = (
            self.qkv(h).view(B, W, 3, self.nh, D // self.nh).permute(2, 0, 3, 1, 4)
        )
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)  # (B, nh, W, hd)
        fresh = (k, v)
        if cache is not None:  # stale keys/values outside the window
            ck, cv = cache
            k = torch.cat([ck[:, :, :start], k, ck[:, :, start + W :]], dim=2)
            v = torch.cat([cv[:, :, :start], v, cv[:, :, start + W :]], dim=2)
        y = F.scaled_dot_product_attention(q, k, v)  # bidirectional: no mask
        return self.out(y.transpose(1, 2).reshape(B, W, D)), fresh


class SwiGLU(nn.Module):
    def __init__(self, cfg: DLMConfig):
        super().__init__()
        self.gate_up = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=False)
        self.down = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, h):
        gate, up = self.gate_up(h).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: DLMConfig):
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.attn = Attention(cfg)
        self.norm2 = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, h, cos, sin, cache=None, start=0):
        a, fresh = self.attn(self.norm1(h), cos, sin, cache, start)
        h = h + a
        return h + self.mlp(self.norm2(h)), fresh


class DLMForMaskedDiffusion(PreTrainedModel):
    """The embedded LLaDA-style model: a bidirectional transformer, logits everywhere.

    Pre-RMSNorm blocks with rotary positions and SwiGLU, no causal mask, the
    output head tied to the input embedding (LLaDA, Nie et al., 2025). It has
    Fast-dLLM's approximate KV cache (``prefill``, ``forward_window``), so
    ``Denoiser(model, config.mask_token_id)`` decodes it with any
    ``DecodeConfig.cache``.

    Parameters
    ----------
    config : DLMConfig
        Its sizes and special ids.
    """

    config_class = DLMConfig
    base_model_prefix = "dlm"
    _no_split_modules = ["Block"]

    def __init__(self, config: DLMConfig):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.blocks = nn.ModuleList(
            Block(config) for _ in range(config.num_hidden_layers)
        )
        self.norm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        # the tied head gets its own bias (as BERT's): token frequencies for free
        self.head_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=self.config.initializer_range)
        elif isinstance(module, nn.RMSNorm):
            nn.init.ones_(module.weight)

    def get_input_embeddings(self):
        return self.embed

    def _run(self, input_ids, start=0, cache=None, output_mask=None):
        W = input_ids.shape[1]
        if start + W > self.config.max_position_embeddings:
            raise ValueError(
                f"sequence of {start + W} tokens exceeds max_position_embeddings "
                f"({self.config.max_position_embeddings})"
            )
        h = self.embed(input_ids)  # (B, W, D)
        pos = torch.arange(start, start + W, device=input_ids.device)
        cos, sin = rotary_tables(self.config, pos, h.dtype)
        fresh = []
        for i, block in enumerate(self.blocks):
            h, kv = block(h, cos, sin, None if cache is None else cache[i], start)
            fresh.append(kv)
        if output_mask is not None:  # training: the head only where the loss looks
            h = h[output_mask]  # (N, D)
        logits = F.linear(self.norm(h), self.embed.weight, self.head_bias)  # (B, W, V)
        return logits, fresh

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor | None = None,
        output_mask: torch.Tensor | None = None,
        **kwargs,
    ):
        """Logits (B, L, V); with a bool ``output_mask`` (B, L), only there: (N, V).

        Parameters
        ----------
        input_ids : torch.Tensor
            (B, L) long token ids, L at most ``max_position_embeddings``.
        labels : torch.Tensor or None
            (B, L) long targets (-100: ignored); then ``loss`` is their mean
            cross-entropy.
        output_mask : torch.Tensor or None
            (B, L) bool: compute the head only where True (training).
        **kwargs
            Ignored (what transformers' callers pass besides).

        Returns
        -------
        transformers.modeling_outputs.MaskedLMOutput
            ``logits`` and ``loss`` (None without ``labels``).
        """
        logits, _ = self._run(input_ids, output_mask=output_mask)
        loss = None
        if labels is not None:
            if output_mask is not None:
                labels = labels[output_mask]
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(),
                labels.reshape(-1),
                ignore_index=-100,
            )
        return MaskedLMOutput(loss=loss, logits=logits)

    # --- Fast-dLLM approximate KV cache -------------------------------------------
    supports_kv_cache = True

    @torch.no_grad()
    def prefill(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, KVCache]:
        """Full forward; returns logits (B, L, V) and every layer's keys/values.

        Parameters
        ----------
        input_ids : torch.Tensor
            (B, L) long token ids.

        Returns
        -------
        tuple of (torch.Tensor, list of (torch.Tensor, torch.Tensor))
            The logits (B, L, V) and, per layer, keys and values (B, heads, L,
            head size): the cache ``forward_window`` reads.
        """
        return self._run(input_ids)

    @torch.no_grad()
    def forward_window(
        self, window_ids: torch.Tensor, start: int, cache: KVCache
    ) -> torch.Tensor:
        """Logits (B, W, V) for positions [start, start + W); the rest cached.

        Parameters
        ----------
        window_ids : torch.Tensor
            (B, W) long token ids of the recomputed positions.
        start : int
            Position of the window's first token.
        cache : list of (torch.Tensor, torch.Tensor)
            ``prefill``'s keys and values; the window attends to its own fresh
            keys/values and to the cached ones everywhere else (Fast-dLLM's
            prefix cache when the window runs to the end, dual cache otherwise).
        """
        logits, _ = self._run(window_ids, start=start, cache=cache)
        return logits


AutoConfig.register("dlmspec", DLMConfig)
AutoModelForMaskedLM.register(DLMConfig, DLMForMaskedDiffusion)
