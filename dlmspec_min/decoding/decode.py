"""One decoding loop for masked diffusion LMs, with LLaDA and Fast-dLLM options.

The loop is LLaDA's semi-autoregressive sampler (Nie et al., 2025, "Large
Language Diffusion Models": inference with low-confidence remasking over
blocks; public ``generate.py``) with the approximate KV cache and the
confidence-aware parallel decoding of Fast-dLLM (Wu et al., 2025, "Fast-dLLM:
Training-free Acceleration of Diffusion LLM by Enabling KV Cache and Parallel
Decoding": threshold rule, and the factor rule of its public code).
SPEC.md sections 2.1 and 2.2.

State: ``x = prompt ++ [MASK] * gen_length``, cut into blocks decoded left to
right. Every step makes one forward and, inside the current block only,

1. proposes ``x0 = argmax(logits / tau + Gumbel)`` per masked position (float64
   noise; tau = 0 is plain argmax; the mask token is never proposed),
2. scores each proposal: its softmax probability under the UN-tempered logits
   (``"low_confidence"``; a quirk kept from both reference codes) or a uniform
   draw (``"random"``),
3. commits some proposals (``transfer_index``): the top-k of a fixed schedule
   (``"schedule"``), every one at or above a threshold plus the best one
   (``"threshold"``), or the largest n with (n + 1)(1 - c_(n)) <= f
   (``"factor"``).

Choices this module makes on purpose (the book's Formalization chapter states them):

- Ties in confidence go to the leftmost position (a stable sort), where the
  references rely on ``torch.topk``'s unspecified order.
- Rule arithmetic (threshold / factor comparisons) runs in float64, so a bf16
  confidence is never compared to a bf16-rounded threshold.
- The mask token is excluded from the argmax (its logit stays in the softmax
  normaliser), so a committed position can never hold ``[MASK]`` again.
- Mask tokens inside the prompt are context: they are never decoded.
- Tokens given through ``init`` (pre-committed, e.g. SSLD's accepted anchors)
  are kept; the schedule rule's m is the row's masks left in the block, and a
  block with nothing masked costs that row no forward.
- A row whose current block has no masks left sits out the forward (it is not
  recomputed), so batched decoding costs and returns exactly what each row
  would alone; blocks are still synchronised across the batch.
- Randomness comes only from the caller's ``torch.Generator`` (or one per row),
  in a fixed order per step: Gumbel noise ``(rows, block, V)`` if tau > 0, then
  the ``(rows, block)`` uniform scores if ``remasking="random"``, both float64.

The step logic lives in small functions of ``steps`` (``block_logits``,
``propose_tokens``, ``token_confidence``, ``transfer_index``; the options and
the result are ``config``'s) so that a trajectory-speculation option can reuse
them around a different "what to verify" step:
``speculate="trajectory"`` (SPEC.md 4) hands the decode to
``speculate.decode_trajectory``, which drafts future states, verifies them in
one batched call and follows this loop's own commit rule (``select_commits``)
through them, so its output is this loop's output (``lookahead`` "none" or
"exact"; "stale" drifts).
"""

from __future__ import annotations

import operator

import torch

from .config import DecodeConfig, DecodeResult, GeneratorArg
from .speculate import decode_trajectory
from .steps import (
    _check_generator,
    _Trace,
    block_logits,
    num_transfer_tokens,
    select_commits,
)


def _check_denoiser(denoiser):
    try:
        operator.index(denoiser.mask_id)  # an int, numpy's or torch's included
        has_mask = True
    except (AttributeError, TypeError):
        has_mask = False
    if not callable(getattr(denoiser, "logits", None)) or not has_mask:
        hint = (" (load_denoiser returns (denoiser, tokenizer): unpack both)"
                if hasattr(denoiser, "convert_tokens_to_ids") else "")
        raise TypeError(
            "denoiser must be a Denoiser (anything with an int mask_id and "
            f"logits(x)), got {type(denoiser).__name__}{hint}; wrap a model with "
            "Denoiser(model, mask_id=...)"
        )


def _check_ids(name: str, ids: torch.Tensor, vocab: int | None):
    """Token ids in [0, vocab): checked here, not by the first forward's lookup."""
    if ids.numel() == 0 or vocab is None:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab:
        bad = low if low < 0 else high
        raise ValueError(
            f"{name} holds token id {bad}, outside the denoiser's vocabulary "
            f"[0, {vocab}); encode it with the denoiser's own tokenizer"
        )


def _check_inputs(denoiser, prompt: torch.Tensor, config: DecodeConfig,
                  allow_empty_prompt: bool = False):
    if not isinstance(config, DecodeConfig):
        raise TypeError(f"config must be a DecodeConfig, got {type(config).__name__}")
    _check_denoiser(denoiser)
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 2 \
            or prompt.dtype != torch.long:
        raise ValueError(
            "prompt must be a LongTensor of shape (batch, prompt_length); "
            "use prompt[None] for a single sequence"
        )
    if prompt.shape[0] == 0:
        raise ValueError("prompt has no rows (batch 0); give at least one prompt")
    if prompt.shape[1] == 0 and not allow_empty_prompt:
        raise ValueError(
            f"prompt is empty (shape {tuple(prompt.shape)}): no token, not even the "
            "start token; begin it with [tokenizer.bos_token_id] (encode_prompts "
            "does), or pass allow_empty_prompt=True to decode with no context at all"
        )
    _check_ids("prompt", prompt, getattr(denoiser, "vocab_size", None))
    if config.cache != "none" and not getattr(denoiser, "supports_cache", False):
        raise ValueError(
            f"cache={config.cache!r} needs a denoiser with an approximate KV cache "
            "(prefill / logits_window, unshifted logits); use cache='none' for this one"
        )


def _check_init(init: torch.Tensor, batch: int, gen_length: int,
                vocab: int | None = None):
    if not isinstance(init, torch.Tensor) or init.dtype != torch.long \
            or tuple(init.shape) != (batch, gen_length):
        raise ValueError(
            f"init must be a LongTensor of shape (batch, gen_length) = ({batch}, "
            f"{gen_length}) holding pre-committed tokens and the mask id elsewhere"
        )
    if bool((init < 0).any()):
        raise ValueError("init holds negative token ids; put the mask id in open slots")
    _check_ids("init", init, vocab)


def generate(
    denoiser, prompt: torch.Tensor, config: DecodeConfig | None = None,
    generator: GeneratorArg = None, *, init: torch.Tensor | None = None,
    allow_empty_prompt: bool = False,
) -> DecodeResult:
    """Decode ``config.gen_length`` tokens after ``prompt`` (B, P) with one loop.

    LLaDA's semi-autoregressive sampler with Fast-dLLM's rules and caches, and
    trajectory speculation, chosen by ``config`` (see ``DecodeConfig``). Every
    forward proposes a token for each masked position of the current block and
    commits some of them; a block is done when it has no masks left.

    Parameters
    ----------
    denoiser : Denoiser
        Anything with ``mask_id`` (int) and ``logits(x)``: (B, L) long ->
        (B, L, V) position-aligned logits; with a cache also
        ``supports_cache``, ``prefill`` and ``logits_window`` (``Denoiser``
        provides them for the embedded model).
    prompt : torch.Tensor
        (B, P) long token ids; ``prompt[None]`` for a single sequence. Mask
        tokens inside it are context, never decoded. Its device is the
        decode's.
    config : DecodeConfig or None, default None
        The options; ``None``: ``DecodeConfig()`` (64 tokens, one block,
        LLaDA's schedule at one token per forward, greedy).
    generator : torch.Generator, sequence of torch.Generator, or None
        Randomness, needed only when ``config.needs_generator``: one generator
        (rows share its stream, so a sampled row depends on the batch) or one
        per row (each row then decodes exactly as it would alone).
    init : torch.Tensor or None, keyword-only, default None
        (B, G) long: tokens already committed before decoding starts (the mask
        id where nothing is), e.g. SSLD's accepted anchors. They are kept and
        never count as committed by a step (``commit_step`` 0); a block with
        nothing masked costs no forward.
    allow_empty_prompt : bool, keyword-only, default False
        True: a prompt of no tokens, (B, 0), decodes with no context at all (a
        masked LM without a start token). False: it is refused, as the mistake
        it usually is (an empty text encoded without the start token).

    Returns
    -------
    DecodeResult
        The tokens (B, P + G) and the decode's costs: per-row forwards
        (``nfe``), positions computed (``token_forwards``) and when each token
        was committed.

    Raises
    ------
    ValueError
        Before the first forward: on a prompt that is not a (B, P) long
        tensor, an empty prompt, token ids outside the denoiser's vocabulary
        (in ``prompt`` or ``init``), a cache the denoiser does not support, a
        missing or misshapen generator, or a bad ``init``.
    TypeError
        When ``config`` is not a ``DecodeConfig``, or ``denoiser`` is not a
        denoiser (a tokenizer, a bare model).
    """
    config = DecodeConfig() if config is None else config
    _check_inputs(denoiser, prompt, config, allow_empty_prompt)
    B, P = prompt.shape
    G, bl, mask_id = config.gen_length, config.block_length, int(denoiser.mask_id)
    _check_generator(generator, B, config)
    device = prompt.device
    if init is None:
        gen = torch.full((B, G), mask_id, dtype=prompt.dtype, device=device)
    else:
        _check_init(init, B, G, getattr(denoiser, "vocab_size", None))
        gen = init.to(device=device, dtype=prompt.dtype)
    x = torch.cat([prompt, gen], dim=1)  # (B, L), a fresh tensor
    if config.speculate == "trajectory":
        return decode_trajectory(denoiser, x, P, config, generator)
    trace = _Trace(B, P, G, device)
    all_rows = torch.arange(B, device=device)
    for b in range(config.num_blocks):
        start, end = P + b * bl, P + (b + 1) * bl
        schedule = None  # (B, T) per-row counts, fixed at the block's first step
        cache, step, cached = None, 0, all_rows
        while True:
            masked = x[:, start:end] == mask_id  # (B, bl)
            active = masked.any(dim=1)  # (B,)
            if not bool(active.any()):
                break
            if step == 0:  # the block's cache covers the rows active at its start
                cached = all_rows if bool(active.all()) else active.nonzero().squeeze(1)
                if config.rule == "schedule":  # m = masks in the block, per row
                    schedule = num_transfer_tokens(masked.sum(dim=1),
                                                   config.steps_per_block)
            # rows never rejoin a block, so ``cached`` holds every later active row
            x_c = x if len(cached) == B else x.index_select(0, cached)  # (c, L)
            local_active = active[cached]  # (c,)
            everyone = bool(local_active.all())
            local = None if everyone else local_active.nonzero().squeeze(1)
            rows = cached if everyone else cached[local]
            logits, width, cache = block_logits(
                denoiser, x_c, local, start, end, config, cache, first_step=step == 0,
            )  # (b, bl, V)
            k = None if schedule is None else schedule[rows, step]  # (b,)
            x0, commit = select_commits(
                logits, masked[rows], config, mask_id, k, generator, rows
            )  # (b, bl) twice
            block = x[rows, start:end]
            x[rows, start:end] = torch.where(commit, x0.to(x.dtype), block)
            trace.record(rows, width, start, commit)
            step += 1
    return trace.result(x)
