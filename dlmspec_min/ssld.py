"""SSLD: speculative semantic latent denoising, its drafts, and its win condition.

The method is the paper's ("Speculating the Bottleneck: Why Semantic Latent
Speculative Decoding Fails for Diffusion Language Models", abstract: "have a
cheap model draft the content anchors of a sequence in a compact
representation, verify them in a single parallel pass, and infill the rest").
Its details are our formalization, SPEC.md section 3 [DERIVED]:

1. **Anchors** (``anchor_mask``): the content WORDS of the target's own decode
   of the same prompt and seed (oracle anchors, the best case for SSLD), each
   represented by its first piece; a word's continuation pieces (``##s``, an
   unmarked BPE piece) are no anchors of their own and are left to the infill
   (issue 14, 2026-12-01). ``unit="piece"`` gives the former definition, every
   content position, kept as the named secondary measurement.
2. **What the draft sees**: only what SSLD allows before infill, i.e. the
   prompt and the positions; every generated position is masked
   (``visible_input``). In SID mode a draft gives a distribution over semantic
   IDs per position; in TOK mode one token.

   - ``SmallMarginalDraft``: a small denoiser's token distribution summed
     within clusters (its argmax token is the TOK-mode proposal).
   - ``HeadDraft``: a linear softmax head on the small denoiser's final hidden
     states, trained (``train_sid_head``, seconds, full-batch L-BFGS) to predict
     sigma(true token) at the anchors (word-initial content positions) of
     training windows: Brown training text, never the held-out split or the
     target's decodes. Its inputs are what SSLD sees (prompt + masks), so with
     a ``[BOS]`` prompt it can only learn P(SID | position, content).
3. **One verify pass** (``ssld_generate``): one target forward of the same
   visible input; anchor i is accepted iff the target's cluster-marginal
   argmax equals the drafted ID; an accepted anchor is committed as the
   target's best token inside that cluster. Note what this verifies: the
   target's belief at its all-masked pass, not the token it would finally
   write; a draft that imitates that first pass is accepted for the target's
   first guess (the notebooks measure how often that guess is right).
4. **Infill**: everything else with the token-space accelerator
   (``decode.generate`` started from the accepted anchors, ``init=``).
5. **Relaxed variant** (``mode="relaxed"``, C4/C5): TOK-mode draft; accept iff
   sigma(draft token) == sigma(target argmax token); commit the DRAFT's token.

**Cost.** NFE counts target forwards (verify + infill) plus the draft's
forwards in target-forward equivalents: ``c`` = draft FLOPs / target FLOPs for
one forward of the same sequence (``forward_flops``: 2 FLOPs per
multiply-add of every linear layer and of the output projection, plus the
attention products). Token-forwards (positions computed) are kept per model.

**Codebooks** (``codebooks``, ``pooled_acceptance``): the seeded k-means IDs
and the head trained for them; alpha_SID in a verdict is the mean over several
codebooks on one decode, its CI resampling codebooks and sequences.

**Win condition** (SPEC.md section 3.1): Model A (speculative-decoding
equivalence, ``model_a_*``) and Model B (one verify pass then infill,
``model_b_*``), with ``alpha_star = 1 - 1/tau_acc``.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from . import stats
from .decoding.config import DecodeConfig, DecodeResult
from .decoding.decode import generate
from .semantic import (
    SemanticIDs,
    best_token_in_cluster,
    cluster_marginal,
    frequency_chance,
    majority_chance,
    semantic_ids_for,
    uniform_chance,
)

MODES = ("exact", "relaxed")
HEAD_STEPS = 200  # L-BFGS iterations
HEAD_L2 = 1e-3
FEATURE_BATCH = 256
NEG_INF = float("-inf")
FIRST_PASS = "target itself, first all-masked pass"  # the target's own ID guess


# --- what SSLD sees -------------------------------------------------------------------


def visible_input(prompt: torch.Tensor, gen_length: int, mask_id: int) -> torch.Tensor:
    """The prompt followed by ``gen_length`` masks: (B, P) -> (B, P + G)."""
    if prompt.dim() != 2:
        raise ValueError("prompt must be (batch, prompt_length); use prompt[None]")
    masks = torch.full((prompt.shape[0], gen_length), int(mask_id),
                       dtype=prompt.dtype, device=prompt.device)
    return torch.cat([prompt, masks], dim=1)


def content_mask(tokenizer, ids: torch.Tensor, lexicon) -> torch.Tensor:
    """(B, L) token ids -> (B, L) bool, True where the token's word is content.

    Per row, through ``tagger.classes_of_tokens`` (``##`` pieces inherit their
    word's class; special tokens are never content).
    """
    from .tagger import CONTENT, classes_of_tokens

    rows = [[c == CONTENT for c in classes_of_tokens(tokenizer, r.tolist(), lexicon)]
            for r in ids.cpu()]
    return torch.tensor(rows, dtype=torch.bool, device=ids.device).reshape(ids.shape)


ANCHOR_UNITS = ("word", "piece")  # the headline unit first


def continuation_mask(tokenizer, ids: torch.Tensor) -> torch.Tensor:
    """(B, L) token ids -> (B, L) bool, True where a token continues the word of the
    token before it (``tokenizer.continues_word``: a ``##`` piece, an unmarked
    BPE piece); word starts and special tokens are False."""
    from .tokenizer import continues_word

    if ids.dim() != 2:
        raise ValueError(f"ids must be (batch, length), got shape {tuple(ids.shape)}")
    rows = [continues_word(tokenizer, r.tolist()) for r in ids.cpu()]
    return torch.tensor(rows, dtype=torch.bool, device=ids.device).reshape(ids.shape)


def anchor_mask(tokenizer, ids: torch.Tensor, lexicon, unit: str = "word"):
    """(B, L) token ids -> (B, L) bool: the content anchors at ``unit`` level.

    ``unit="word"`` (the book's anchors): one anchor per content word, at its
    first piece; the word's continuation pieces are not anchors. ``"piece"``:
    every content position, continuation pieces included (``content_mask``).
    """
    if unit not in ANCHOR_UNITS:
        raise ValueError(f"unknown anchor unit {unit!r}; use one of {ANCHOR_UNITS}")
    if ids.dim() != 2:
        raise ValueError(f"ids must be (batch, length), got shape {tuple(ids.shape)}")
    content = content_mask(tokenizer, ids, lexicon)
    if unit == "piece":
        return content
    return content & ~continuation_mask(tokenizer, ids)


def continuation_share(tokenizer, ids: torch.Tensor, lexicon) -> float:
    """Share of the piece-level anchors of ``ids`` (B, L) that continue a word:
    the positions that ``unit="word"`` drops. Raises if there is no anchor."""
    piece = anchor_mask(tokenizer, ids, lexicon, unit="piece")
    if not piece.any():
        raise ValueError("the sequences hold no content token: no anchors to count")
    cont = piece & continuation_mask(tokenizer, ids)
    return float(cont.sum()) / float(piece.sum())


# --- cost -----------------------------------------------------------------------------


def forward_flops(model, seq_len: int) -> float:
    """FLOPs of one forward over ``seq_len`` positions (an estimate, per sequence).

    2 per multiply-add of every ``nn.Linear``, of the output projection onto
    the vocabulary (counted once, tied or not) and of the attention products
    QK^T and AV (4 L D per layer and position). Embedding lookups, norms and
    softmaxes are ignored.
    """
    cfg = model.config
    linear = sum(m.weight.numel() for m in model.modules()
                 if isinstance(m, torch.nn.Linear))
    emb = model.get_input_embeddings().weight
    V, D = emb.shape
    has_head = any(isinstance(m, torch.nn.Linear) and m.out_features == V
                   for m in model.modules())
    per_token = 2 * (linear + (0 if has_head else V * D))
    per_token += 4 * seq_len * D * int(getattr(cfg, "num_hidden_layers", 1))
    return float(per_token * seq_len)


def relative_cost(draft: Draft, target, seq_len: int) -> float:
    """c: one draft forward's FLOPs over one target forward's, same sequence length."""
    return draft.flops / draft.n_forwards / forward_flops(target.model, seq_len)


# --- features for the trained head ----------------------------------------------------


@torch.no_grad()
def final_hidden(denoiser, x: torch.Tensor) -> torch.Tensor:
    """The last hidden states (B, L, D) that the output head reads, position-aligned.

    The embedded model exposes them through a hook on its final norm; other
    models through ``output_hidden_states=True``.
    """
    from .decoding.denoisers import model_input_device
    from .decoding.modeling import DLMForMaskedDiffusion

    model, device = denoiser.model, x.device
    x = x.to(model_input_device(model) or device)  # a sharded model: its first shard
    if isinstance(model, DLMForMaskedDiffusion):
        out = {}
        handle = model.norm.register_forward_hook(lambda m, i, o: out.update(h=o))
        try:
            model(input_ids=x)
        finally:
            handle.remove()
        h = out["h"]
    else:
        h = model(input_ids=x, output_hidden_states=True).hidden_states[-1]
    if getattr(denoiser, "shifted", False):
        h = torch.cat([h[:, :1], h[:, :-1]], dim=1)
    return h.float().to(device)  # (B, L, D)


def visible_features(
    denoiser, prompt: torch.Tensor, gen_length: int, batch: int = FEATURE_BATCH
) -> torch.Tensor:
    """Hidden states at the generated positions of the visible input: (B, G, D).

    Identical prompts share one forward (with a ``[BOS]`` prompt: one in all).
    """
    uniq, inverse = torch.unique(prompt, dim=0, return_inverse=True)
    P = prompt.shape[1]
    feats = []
    for i in range(0, len(uniq), batch):
        x = visible_input(uniq[i:i + batch], gen_length, denoiser.mask_id)
        feats.append(final_hidden(denoiser, x)[:, P:])
    return torch.cat(feats)[inverse]  # (B, G, D)


@dataclass
class SIDHead:
    """A linear softmax head over standardised features: (..., D) -> (..., K)."""

    weight: torch.Tensor  # (D, K)
    bias: torch.Tensor  # (K,)
    mean: torch.Tensor  # (D,)
    scale: torch.Tensor  # (D,)
    losses: list[float] = field(default_factory=list)

    @property
    def n_clusters(self) -> int:
        return self.weight.shape[1]

    @property
    def flops_per_position(self) -> float:
        return 2.0 * self.weight.numel()

    def log_probs(self, features: torch.Tensor) -> torch.Tensor:
        """(..., D) features on any device -> (..., K) float64 log-probs there."""
        dev = features.device
        z = (features.float() - self.mean.to(dev)) / self.scale.to(dev)
        return torch.log_softmax(z @ self.weight.to(dev) + self.bias.to(dev),
                                 dim=-1).double()


def merge_rows(features: torch.Tensor, labels: torch.Tensor, n_clusters: int):
    """Merge identical rows: (N, D), (N,) -> (U, D) rows and (U, K) label counts."""
    uniq, inverse = torch.unique(features.float(), dim=0, return_inverse=True)
    counts = torch.zeros(len(uniq), n_clusters)
    counts.index_put_((inverse, labels), torch.ones(len(labels)), accumulate=True)
    return uniq, counts


def head_loss(W, b, z, counts, n: int, l2: float) -> torch.Tensor:
    """Mean cross-entropy over the n original rows plus ``l2 * |W|^2``.

    z (U, D) standardised merged rows, counts (U, K): the cross-entropy summed
    over a merged row's labels is ``-sum_k count_k log p_k``.
    """
    logp = torch.log_softmax(z @ W + b, dim=-1)  # (U, K)
    return -(counts * logp).sum() / n + l2 * (W * W).sum()


def train_sid_head(
    features: torch.Tensor, labels: torch.Tensor, n_clusters: int, *,
    steps: int = HEAD_STEPS, l2: float = HEAD_L2,
) -> SIDHead:
    """Fit a linear softmax head to (features (N, D), labels (N,)) by full-batch L-BFGS.

    The loss (``head_loss``) is the mean cross-entropy plus ``l2 * |W|^2``, a
    convex problem; L-BFGS with a strong-Wolfe line search from zero weights,
    at most ``steps`` iterations: no randomness, so the fit is deterministic.
    Identical feature rows are merged first (with a ``[BOS]`` prompt there are
    only G distinct ones, one per position), which leaves the loss unchanged.
    """
    if features.dim() != 2 or labels.shape != features.shape[:1] or len(labels) == 0:
        raise ValueError("features must be (N, D) and labels (N,), with N > 0")
    if labels.min() < 0 or labels.max() >= n_clusters:
        raise ValueError(f"labels must lie in [0, {n_clusters}); drop special tokens")
    x = features.float()
    mean, scale = x.mean(0), x.std(0).clamp(min=1e-6)
    uniq, counts = merge_rows(x, labels, n_clusters)
    z = (uniq - mean) / scale  # (U, D)
    W = torch.zeros(x.shape[1], n_clusters, requires_grad=True)
    b = torch.zeros(n_clusters, requires_grad=True)
    opt = torch.optim.LBFGS([W, b], lr=1, max_iter=steps, history_size=20,
                            line_search_fn="strong_wolfe")
    losses = []

    def closure():
        opt.zero_grad()
        loss = head_loss(W, b, z, counts, len(labels), l2)
        loss.backward()
        losses.append(float(loss.detach()))
        return loss

    with torch.enable_grad():
        opt.step(closure)
    return SIDHead(W.detach(), b.detach(), mean, scale, losses)


def head_training_data(
    denoiser, sid: SemanticIDs, windows: torch.Tensor, content: torch.Tensor,
    prompt_length: int, gen_length: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(features (M, D), labels (M,)) from training windows (N, Lw).

    Each window's first ``prompt_length`` tokens are the prompt; the draft's
    features at generated position j come from the visible input (prompt +
    masks); the label is sigma(window token at j), kept where ``content``
    (N, Lw) is True.
    """
    P, G = prompt_length, gen_length
    if windows.shape[1] < P + G or content.shape != windows.shape:
        raise ValueError(
            f"windows must be at least prompt_length + gen_length = {P + G} long, "
            "with a content mask of the same shape"
        )
    device = next(denoiser.model.parameters()).device
    # features on the model's device, the (small, convex) head fit on the CPU
    feats = visible_features(denoiser, windows[:, :P].to(device), G).cpu()  # (N, G, D)
    targets = windows[:, P:P + G].cpu()  # (N, G)
    keep = content[:, P:P + G].cpu() & ~sid.special.cpu()[targets]
    return feats[keep], sid(targets)[keep].cpu()


# --- drafts ---------------------------------------------------------------------------


@dataclass
class Draft:
    """One draft of every generated position (the decoder uses it at anchors)."""

    name: str
    log_probs: torch.Tensor  # (B, G, K) float64, SID mode
    tokens: torch.Tensor  # (B, G) long, TOK mode
    flops: float  # per sequence
    n_forwards: int = 1  # draft-model forwards per sequence

    @property
    def sids(self) -> torch.Tensor:
        return self.log_probs.argmax(dim=-1)  # (B, G)


def _tok_proposal(logits: torch.Tensor, sid: SemanticIDs) -> torch.Tensor:
    """Argmax token per position, special tokens (the mask included) excluded."""
    special = sid.special.to(logits.device)
    return logits.masked_fill(special, NEG_INF).argmax(dim=-1)  # (B, G)


def _check_vocab(denoiser, sid: SemanticIDs, what: str):
    V = denoiser.model.get_input_embeddings().weight.shape[0]
    if V != sid.vocab_size:
        raise ValueError(
            f"the {what} has {V} tokens but the semantic IDs cover {sid.vocab_size}: "
            "draft and target must share one vocabulary"
        )


class SmallMarginalDraft:
    """SID mode: a small denoiser's token distribution summed within clusters."""

    name = "small model, cluster marginal"

    def __init__(self, denoiser, sid: SemanticIDs):
        _check_vocab(denoiser, sid, "draft")
        self.denoiser, self.sid = denoiser, sid

    def __call__(self, prompt: torch.Tensor, gen_length: int) -> Draft:
        P = prompt.shape[1]
        x = visible_input(prompt, gen_length, self.denoiser.mask_id)
        logits = self.denoiser.logits(x)[:, P:]  # (B, G, V)
        probs = torch.softmax(logits.double(), dim=-1)
        marg = cluster_marginal(probs, self.sid)  # (B, G, K)
        log_probs = torch.log(marg / marg.sum(-1, keepdim=True).clamp(min=1e-300))
        flops = forward_flops(self.denoiser.model, x.shape[1])
        return Draft(self.name, log_probs, _tok_proposal(logits, self.sid), flops)


class HeadDraft:
    """SID mode: a trained linear head on the small denoiser's hidden states."""

    name = "small model + trained SID head"

    def __init__(self, denoiser, sid: SemanticIDs, head: SIDHead):
        _check_vocab(denoiser, sid, "draft")
        if head.n_clusters != sid.n_clusters:
            raise ValueError(
                f"the head predicts {head.n_clusters} clusters, the IDs have "
                f"{sid.n_clusters}: train it with these semantic IDs"
            )
        self.denoiser, self.sid, self.head = denoiser, sid, head

    @classmethod
    def fit(cls, denoiser, sid, windows, content, prompt_length, gen_length, **kw):
        feats, labels = head_training_data(
            denoiser, sid, windows, content, prompt_length, gen_length
        )
        return cls(denoiser, sid, train_sid_head(feats, labels, sid.n_clusters, **kw))

    def __call__(self, prompt: torch.Tensor, gen_length: int) -> Draft:
        P = prompt.shape[1]
        x = visible_input(prompt, gen_length, self.denoiser.mask_id)
        h = final_hidden(self.denoiser, x)  # (B, L, D)
        logits = self.denoiser.logits(x)[:, P:]  # TOK mode: the model's own argmax
        log_probs = self.head.log_probs(h[:, P:])  # (B, G, K)
        flops = forward_flops(self.denoiser.model, x.shape[1]) \
            + self.head.flops_per_position * gen_length
        return Draft(self.name, log_probs, _tok_proposal(logits, self.sid), flops)


# --- verification and the decoder -----------------------------------------------------


@dataclass
class SSLDResult:
    """SSLD's output and its costs, per row."""

    tokens: torch.Tensor  # (B, P + G)
    prompt_length: int
    anchors: torch.Tensor  # (B, G) bool
    accepted: torch.Tensor  # (B, G) bool
    target_sids: torch.Tensor  # (B, G) the verify pass's cluster-marginal argmax
    infill: DecodeResult
    c: float  # draft cost per draft forward, in target forwards
    n_draft: int  # draft forwards per sequence
    draft_token_forwards: int  # positions the draft computed per sequence
    verify_width: int  # positions the verify pass computed

    @property
    def generated(self) -> torch.Tensor:
        return self.tokens[:, self.prompt_length:]

    @property
    def n_anchors(self) -> torch.Tensor:
        return self.anchors.sum(1)  # (B,)

    @property
    def n_accepted(self) -> torch.Tensor:
        return self.accepted.sum(1)  # (B,)

    @property
    def nfe_target(self) -> torch.Tensor:
        """Target forwards per row: the verify pass plus the infill's."""
        return 1 + self.infill.nfe  # (B,)

    @property
    def nfe(self) -> torch.Tensor:
        """NFE in target-forward equivalents: 1 + n_draft * c + N_fill (float64)."""
        return self.nfe_target.double() + self.n_draft * self.c  # (B,)

    @property
    def token_forwards_target(self) -> torch.Tensor:
        return self.verify_width + self.infill.token_forwards  # (B,)

    @property
    def token_forwards(self) -> torch.Tensor:
        """Target token-forwards plus the draft's, weighted by its per-token cost c."""
        return self.token_forwards_target.double() + self.c * self.draft_token_forwards


def verify_logits(target, prompt: torch.Tensor, gen_length: int) -> torch.Tensor:
    """The ONE target forward of the visible input: logits (B, G, V) of the G slots."""
    x = visible_input(prompt, gen_length, target.mask_id)
    return target.logits(x)[:, prompt.shape[1]:]


def target_cluster_argmax(logits: torch.Tensor, sid: SemanticIDs) -> torch.Tensor:
    """argmax_s sum_{v in s} softmax(logits)_v, no specials: (B, G, V) -> (B, G)."""
    return cluster_marginal(torch.softmax(logits.double(), dim=-1), sid).argmax(-1)


def ssld_generate(
    target, prompt: torch.Tensor, draft: Draft, anchors: torch.Tensor,
    sid: SemanticIDs, infill: DecodeConfig, generator=None, *, c: float,
    mode: str = "exact",
) -> SSLDResult:
    """Draft -> one parallel verify pass -> commit accepted anchors -> infill.

    ``draft`` covers every generated position (B, G); only ``anchors`` (B, G)
    are drafted and verified: pass ``anchor_mask(..., unit="word")`` so that
    the word-initial content positions are, and continuation pieces are left
    to the infill. ``mode="exact"``: accept iff the target's cluster-marginal
    argmax equals the drafted SID, commit the target's best token in that
    cluster. ``mode="relaxed"``: accept iff sigma(draft token) == sigma(target
    argmax token), commit the draft's token. ``c`` = one draft forward's cost
    in target forwards. The infill is ``decode.generate`` with ``infill`` from
    the committed anchors.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {MODES}")
    G = infill.gen_length
    B = prompt.shape[0]
    if anchors.shape != (B, G) or draft.tokens.shape != (B, G):
        raise ValueError(
            f"anchors and the draft must be (batch, gen_length) = ({B}, {G}), got "
            f"{tuple(anchors.shape)} and {tuple(draft.tokens.shape)}"
        )
    if not (isinstance(c, (int, float)) and math.isfinite(c) and c >= 0):
        raise ValueError(f"c (draft cost in target forwards) must be >= 0, got {c!r}")
    logits = verify_logits(target, prompt, G)  # (B, G, V)
    t_sids = target_cluster_argmax(logits, sid)  # (B, G)
    anchors = anchors.to(logits.device)
    if mode == "exact":
        d_sids = draft.sids.to(logits.device)
        accepted = anchors & (d_sids == t_sids)
        tokens = best_token_in_cluster(logits, d_sids, sid)  # (B, G)
    else:
        d_tok = draft.tokens.to(logits.device)
        t_tok = _tok_proposal(logits, sid)
        accepted = anchors & (sid(d_tok) == sid(t_tok))
        tokens = d_tok
    init = torch.where(accepted, tokens, torch.full_like(tokens, target.mask_id))
    result = generate(target, prompt, infill, generator, init=init.to(prompt.dtype))
    L = prompt.shape[1] + G
    return SSLDResult(
        tokens=result.tokens, prompt_length=prompt.shape[1], anchors=anchors,
        accepted=accepted, target_sids=t_sids, infill=result, c=float(c),
        n_draft=draft.n_forwards, draft_token_forwards=draft.n_forwards * L,
        verify_width=L,
    )


# --- acceptance -----------------------------------------------------------------------


def per_sequence(hit: torch.Tensor, where: torch.Tensor):
    """Hits and trials per row, counted where ``where`` holds: (B, G) -> (B,), (B,)."""
    if hit.shape != where.shape:
        raise ValueError(
            f"hit {tuple(hit.shape)} and where {tuple(where.shape)} differ"
        )
    where = where.bool()
    return (hit.bool() & where).sum(1).cpu().numpy(), where.sum(1).cpu().numpy()


def sid_hits(
    sids: torch.Tensor, target_tokens: torch.Tensor, anchors: torch.Tensor,
    sid: SemanticIDs,
) -> tuple[np.ndarray, np.ndarray]:
    """alpha_SID's numerator and denominator per row: 1{drafted SID == sigma(token)}."""
    return per_sequence(sids.to(target_tokens.device) == sid(target_tokens), anchors)


def acceptance_table(
    sids_by_name: dict[str, torch.Tensor], tokens: torch.Tensor, anchors: torch.Tensor,
    sid: SemanticIDs, n_boot: int = 2000, seed: int = 0,
) -> pd.DataFrame:
    """alpha_SID per named prediction (B, G) of sigma(tokens) at anchors, with CIs.

    One row per name: hits, anchors, alpha and the 95 % interval of
    ``stats.rate_ci`` (sequence bootstrap united with Clopper-Pearson).
    """
    rows = []
    for name, sids in sids_by_name.items():
        hits, n = sid_hits(sids, tokens, anchors, sid)
        est, lo, hi = stats.rate_ci(hits, n, n_boot, seed)
        rows.append(dict(prediction=name, hits=int(hits.sum()), anchors=int(n.sum()),
                         alpha=est, low=lo, high=hi))
    return pd.DataFrame(rows).set_index("prediction")


@functools.lru_cache(maxsize=4)
def _training_rows(tokenizer, seq_len: int | None) -> torch.Tensor:
    """Every Brown training window of a tokenizer (cached: encoding takes seconds)."""
    from . import train
    from .corpus import brown_dataset

    docs = train.encode_documents(brown_dataset("train"), tokenizer)
    return train.windows(docs, seq_len or train.SEQ_LEN)


def training_windows(
    tokenizer, lexicon, n: int, seed: int, bos_id: int | None = None,
    seq_len: int | None = None, unit: str = "word",
) -> tuple[torch.Tensor, torch.Tensor]:
    """n Brown TRAINING windows (n, seq_len) and their anchor masks, seeded.

    The windows start at sentence boundaries (``train.windows``, which puts the
    project tokenizer's [BOS] first); ``bos_id`` replaces that first token.
    The mask is ``anchor_mask(..., unit)``: by default the head learns the IDs
    of word-initial content positions, the ones the decoder drafts.
    """
    if unit not in ANCHOR_UNITS:
        raise ValueError(f"unknown anchor unit {unit!r}; use one of {ANCHOR_UNITS}")
    rows = _training_rows(tokenizer, seq_len)
    pick = np.random.default_rng(seed).choice(len(rows), size=min(n, len(rows)),
                                              replace=False)
    windows = rows[np.sort(pick)].clone()
    if bos_id is not None:
        windows[:, 0] = int(bos_id)
    return windows, anchor_mask(tokenizer, windows, lexicon, unit)


DRAFT_NAMES = (SmallMarginalDraft.name, HeadDraft.name)


def drafts_for(draft_denoiser, sid: SemanticIDs, windows, content, prompt_length: int,
               gen_length: int, **head_kw) -> dict:
    """The two SID-mode drafts of the book, by name: the small model's cluster
    marginal, and the same model with a SID head trained on (windows, content)
    (``head_kw`` goes to ``train_sid_head``)."""
    return {
        SmallMarginalDraft.name: SmallMarginalDraft(draft_denoiser, sid),
        HeadDraft.name: HeadDraft.fit(draft_denoiser, sid, windows, content,
                                      prompt_length, gen_length, **head_kw),
    }


def best_draft_row(table: pd.DataFrame, sid: SemanticIDs, tokens: torch.Tensor,
                   anchors: torch.Tensor) -> dict:
    """One seed's summary from an ``acceptance_table`` that holds both drafts: the
    best draft, its alpha and interval, each draft's alpha, the majority-ID rate."""
    drafts = table.loc[list(DRAFT_NAMES)]
    best = drafts["alpha"].idxmax()
    return {
        "best draft": best, "alpha_SID": drafts.loc[best, "alpha"],
        "low": drafts.loc[best, "low"], "high": drafts.loc[best, "high"],
        "alpha_SID, head": drafts.loc[HeadDraft.name, "alpha"],
        "alpha_SID, marginal": drafts.loc[SmallMarginalDraft.name, "alpha"],
        "majority-ID rate": majority_chance(sid(tokens)[anchors].cpu().numpy(),
                                            sid.n_clusters),
    }


def codebook_seeds(seed: int, n: int) -> list[int]:
    """The ``n`` codebook seeds a build with ``seed`` pools: seed*n, ..., seed*n + n-1.

    Builds with different seeds draw disjoint sets, so a second build's pooled
    acceptance rests on codebooks (k-means IDs and draft heads) the first never
    used.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the number of codebooks must be an integer >= 1, got {n!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return [seed * n + i for i in range(n)]


@dataclass
class Codebook:
    """One codebook seed's semantic IDs, the drafts fitted to them, their guesses."""

    seed: int
    sid: SemanticIDs
    windows: torch.Tensor  # (N, T) the head's Brown training windows
    content: torch.Tensor  # (N, T) their anchor masks (the head's training rows)
    drafters: dict  # name -> fitted draft (SmallMarginalDraft, HeadDraft)
    outputs: dict[str, Draft]  # name -> the draft's output for the prompt
    preds: dict[str, torch.Tensor]  # name -> (B, G) IDs: the drafts and FIRST_PASS
    table: pd.DataFrame  # acceptance_table of preds


def codebooks(
    target, draft_denoiser, tokenizer, lexicon, prompt: torch.Tensor,
    tokens: torch.Tensor, anchors: torch.Tensor, K: int, seeds: Sequence[int], *,
    levels: int = 1, n_train: int = 2048, n_boot: int = 2000, boot_seed: int = 0,
    head_kw: dict | None = None, verify: torch.Tensor | None = None,
    seq_len: int | None = None, unit: str = "word",
) -> dict[int, Codebook]:
    """Rebuild the IDs and both drafts for each seed, on one fixed decode.

    For each seed: k-means IDs over the target's input embeddings
    (``semantic_ids_for``), ``n_train`` Brown training windows for the head
    (``training_windows``, their first token the prompt's), both drafts
    (``drafts_for``), the target's own first-pass guess (``verify`` (B, G, V):
    ``verify_logits`` of the prompt, computed here if None) and their
    ``acceptance_table`` on ``tokens``/``anchors`` (B, G), the target's decode.
    ``seq_len`` sets the training windows' length (default: the models');
    ``unit`` the anchors the head is trained on (``anchor_mask``; pass the unit
    of ``anchors``).
    """
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    P, G = prompt.shape[1], tokens.shape[1]
    bos = int(prompt[0, 0]) if P else None
    if verify is None:
        verify = verify_logits(target, prompt, G)
    books = {}
    for s in seeds:
        sid = semantic_ids_for(target, K, seed=s, tokenizer=tokenizer, levels=levels)
        windows, content = training_windows(tokenizer, lexicon, n_train, s, bos_id=bos,
                                            seq_len=seq_len, unit=unit)
        drafters = drafts_for(draft_denoiser, sid, windows, content, P, G,
                              **(head_kw or {}))
        outputs = {name: d(prompt, G) for name, d in drafters.items()}
        preds = {name: o.sids for name, o in outputs.items()}
        preds[FIRST_PASS] = target_cluster_argmax(verify, sid)
        table = acceptance_table(preds, tokens, anchors, sid, n_boot, boot_seed)
        books[s] = Codebook(s, sid, windows, content, drafters, outputs, preds, table)
    return books


def pooled_acceptance(
    books: dict[int, Codebook], tokens: torch.Tensor, anchors: torch.Tensor,
    n_boot: int = 2000, seed: int = 0,
) -> pd.DataFrame:
    """alpha_SID of every prediction, averaged over the codebooks, with its CI.

    One row per prediction name: ``alpha`` (the mean over codebooks of each
    codebook's rate), ``low``/``high`` (``stats.seed_pooled_rate``: resampling
    codebooks and sequences, united with Clopper-Pearson), the lowest and
    highest single-codebook rate, and ``codebooks``. ``best_pooled_draft``
    picks the draft with the highest pooled alpha (one draft for all codebooks).
    """
    if not books:
        raise ValueError("no codebooks given")
    names = list(next(iter(books.values())).preds)
    _, trials = per_sequence(anchors, anchors)
    rows = []
    for name in names:
        hits = np.stack([sid_hits(b.preds[name], tokens, anchors, b.sid)[0]
                         for b in books.values()])  # (S, B)
        est, lo, hi = stats.seed_pooled_rate(hits, trials, n_boot, seed)
        per = hits.sum(1) / trials.sum()
        rows.append(dict(prediction=name, alpha=est, low=lo, high=hi,
                         lowest=float(per.min()), highest=float(per.max()),
                         codebooks=len(books)))
    return pd.DataFrame(rows).set_index("prediction")


def best_pooled_draft(pooled: pd.DataFrame) -> str:
    """The draft (not the target's first pass) with the highest pooled alpha."""
    return str(pooled.loc[list(DRAFT_NAMES), "alpha"].idxmax())


def per_codebook(books: dict[int, Codebook], tokens: torch.Tensor,
                 anchors: torch.Tensor) -> pd.DataFrame:
    """One ``best_draft_row`` per codebook seed, indexed by seed."""
    return pd.DataFrame([{"seed": s, **best_draft_row(b.table, b.sid, tokens, anchors)}
                         for s, b in books.items()]).set_index("seed")


CHANCE_UNIFORM = "1/K (uniform guess)"
CHANCE_FREQUENCY = "sum_s P(s)^2 (frequency-weighted)"
CHANCE_MAJORITY = "max_s P(s) (majority ID)"


def mean_chance_levels(books: dict[int, Codebook], tokens: torch.Tensor,
                       anchors: torch.Tensor) -> dict[str, float]:
    """The chance levels of the anchors' IDs, each averaged over the codebooks:
    a uniform guess (1/K), a guess drawn from the anchors' ID frequencies
    (sum_s P(s)^2) and always the most frequent ID (max_s P(s))."""
    levels = []
    for b in books.values():
        ids = b.sid(tokens)[anchors].cpu().numpy()
        levels.append({CHANCE_UNIFORM: uniform_chance(b.sid),
                       CHANCE_FREQUENCY: frequency_chance(ids, b.sid.n_clusters),
                       CHANCE_MAJORITY: majority_chance(ids, b.sid.n_clusters)})
    return {k: float(np.mean([lv[k] for lv in levels])) for k in levels[0]}


# --- the win condition (SPEC.md section 3.1) ------------------------------------------


def alpha_star(tau_acc: float) -> float:
    """The asymptotic bar of Model A (gamma -> inf, c -> 0): 1 - 1/tau_acc."""
    if not tau_acc >= 1:
        raise ValueError(f"tau_acc (tokens per NFE) must be >= 1, got {tau_acc!r}")
    return 1.0 - 1.0 / tau_acc


def bar_note(alpha_lo: float, alpha_hi: float, tau_lo: float, tau_hi: float) -> str:
    """A sentence for a verdict: where alpha's 95 % interval lies against alpha*'s.

    ``alpha*`` = 1 - 1/tau_acc inherits tau_acc's interval (``tau_lo``,
    ``tau_hi``). If it overlaps alpha_SID's interval, the build cannot tell on
    which side of the bar the draft falls and the verdict is *inconclusive*;
    otherwise the note says which side alpha's interval lies on.
    """
    if not (alpha_lo <= alpha_hi and tau_lo <= tau_hi):
        raise ValueError("each interval needs low <= high")
    star_lo, star_hi = alpha_star(tau_lo), alpha_star(tau_hi)
    intervals = (f"The 95 % intervals of alpha_SID ({alpha_lo:.4f}-{alpha_hi:.4f}) "
                 f"and of alpha* ({star_lo:.4f}-{star_hi:.4f}, from tau_acc's)")
    if alpha_lo <= star_hi and star_lo <= alpha_hi:
        return (f"{intervals} overlap: this build cannot tell on which side of the "
                "bar the draft falls, so the verdict is *inconclusive*, and a build "
                "with more samples or another seed may settle it either way "
                "(formalization chapter, *Seeds*).")
    if alpha_hi < star_lo:
        return (f"{intervals} do not overlap: the draft's acceptance lies below the "
                "bar, as the claim says.")
    return (f"{intervals} do not overlap: the draft's acceptance lies above the bar, "
            "against the claim.")


def paper_bar(tau_paper: float, alpha_hi: float) -> tuple[float, float, str]:
    """The paper's own bar beside ours: context for a verdict, never the verdict.

    ``tau_paper`` is the paper's accelerator figure in tokens per forward (read
    from the registry by the caller, never typed in code). Returns
    (alpha*_paper = 1 - 1/tau_paper, the shortfall alpha*_paper / alpha_hi at the
    upper end of alpha_SID's interval, a sentence saying so).
    """
    a_paper = alpha_star(tau_paper)
    short = shortfall(a_paper, alpha_hi, alpha_hi).value
    side = ("short of that bar by this factor" if short > 1
            else "so the draft's interval reaches that bar")
    note = (f"As context, not the verdict: against the paper's own accelerator figure "
            f"({tau_paper:g} tokens per forward, alpha* = {a_paper:.3f}), the upper "
            f"end of alpha_SID's interval ({alpha_hi:.4f}) gives alpha*/alpha_hi = "
            f"{short:.1f}, {side}.")
    return a_paper, short, note


def model_a_tokens_per_cost(alpha, gamma: float, c: float):
    """(1 - alpha^(gamma+1)) / ((1 - alpha)(1 + gamma c)); the limit at alpha = 1."""
    a = np.asarray(alpha, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tokens = np.where(np.isclose(a, 1.0), gamma + 1.0,
                          (1 - a ** (gamma + 1)) / (1 - a))
    out = tokens / (1 + gamma * c)
    return float(out) if out.ndim == 0 else out


def model_a_alpha_needed(tau_acc: float, gamma: float, c: float) -> float:
    """Smallest alpha with Model A's tokens per cost > tau_acc (nan: unreachable).

    Model A's tokens per cost grows with alpha, so a bisection finds it.
    """
    if model_a_tokens_per_cost(1.0, gamma, c) <= tau_acc:
        return float("nan")
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if model_a_tokens_per_cost(mid, gamma, c) > tau_acc:
            hi = mid
        else:
            lo = mid
    return hi


def model_b_alpha_needed(n_anchors: float, delta: float, n_draft: float, c: float):
    """Model B wins iff alpha |A| delta > 1 + n_draft c: returns that bar on alpha."""
    if n_anchors <= 0 or delta <= 0:
        return float("inf")
    return (1 + n_draft * c) / (n_anchors * delta)


def model_b_slowdown(n_acc: float, n_draft: float, c: float) -> float:
    """Model B at alpha = 0: NFE_SSLD / NFE_acc = 1 + (1 + n_draft c) / N_acc."""
    return 1 + (1 + n_draft * c) / n_acc


@dataclass(frozen=True)
class Shortfall:
    value: float  # alpha* / alpha (or alpha* / alpha_hi)
    lower_bound: bool  # True when alpha was 0 and the CI's upper end was used


def shortfall(alpha_star_: float, alpha: float, alpha_hi: float) -> Shortfall:
    """alpha*/alpha; with alpha = 0, alpha*/alpha_hi, a lower bound (never 1/0)."""
    if alpha > 0:
        return Shortfall(alpha_star_ / alpha, False)
    if alpha_hi > 0:
        return Shortfall(alpha_star_ / alpha_hi, True)
    raise ValueError(
        "alpha and its CI's upper end are both 0: the shortfall is unbounded; "
        "measure more anchors (its CI must have a positive upper end)"
    )


# --- accelerators and timing ----------------------------------------------------------


def accelerators(
    gen_length: int, block_length: int, threshold: float, temperature: float,
    supports_cache: bool = True,
) -> dict[str, DecodeConfig]:
    """The token-space accelerators of ``decode.generate`` that SSLD can infill with.

    Fast-dLLM's threshold rule, the same with its dual cache, and trajectory
    speculation on top of the latter (SPEC.md 4; exact lookahead, default tree
    budget): issue 7 asks C3 to judge SSLD against the strongest of the three.
    The first entry is the plain threshold decode (notebooks take their oracle
    anchors from it). Trajectory speculation decodes rows one by one at
    temperature > 0 and computes many more positions per forward (token-forwards).
    A target without Fast-dLLM's KV cache (``supports_cache`` False, e.g. LLaDA's
    own code) gets the threshold rule and trajectory speculation without a cache.
    """
    base = dict(gen_length=gen_length, block_length=block_length, rule="threshold",
                threshold=threshold, temperature=temperature)
    if not supports_cache:
        return {
            "Fast-dLLM threshold": DecodeConfig(**base),
            "trajectory speculation (exact), no cache": DecodeConfig(
                **base, speculate="trajectory", lookahead="exact"),
        }
    return {
        "Fast-dLLM threshold": DecodeConfig(**base),
        "Fast-dLLM threshold + dual cache": DecodeConfig(**base, cache="dual"),
        "trajectory speculation (exact)": DecodeConfig(
            **base, cache="dual", speculate="trajectory", lookahead="exact"),
    }


def accelerator_table(
    runs: dict[str, DecodeResult], n_boot: int = 2000, seed: int = 0,
) -> pd.DataFrame:
    """Tokens per NFE of each named decode, with a 95 % bootstrap CI over sequences.

    One row per name: ``tokens_per_nfe`` (all generated tokens / all row
    forwards), ``low``, ``high`` (``stats.ratio_bootstrap``), ``nfe_per_sample``
    and ``token_forwards_per_sample``.
    """
    if not runs:
        raise ValueError("no accelerator runs given: pass {name: DecodeResult}")
    rows = []
    for name, r in runs.items():
        nfe = r.nfe.detach().cpu().double().numpy()  # (B,)
        n_gen = np.full(len(nfe), r.generated.shape[1], dtype=float)
        est, lo, hi = stats.ratio_bootstrap(n_gen, nfe, n_boot, seed)
        rows.append(dict(accelerator=name, tokens_per_nfe=est, low=lo, high=hi,
                         nfe_per_sample=float(nfe.mean()),
                         token_forwards_per_sample=r.token_forwards.double().mean().item()))
    return pd.DataFrame(rows).set_index("accelerator")


def strongest_accelerator(table: pd.DataFrame) -> str:
    """The most tokens per NFE; among equals, the fewest token-forwards (then order)."""
    missing = {"tokens_per_nfe", "token_forwards_per_sample"} - set(table.columns)
    if missing or table.empty:
        raise ValueError(
            f"need a non-empty accelerator_table; missing columns {sorted(missing)}")
    ranked = table.sort_values(["tokens_per_nfe", "token_forwards_per_sample"],
                               ascending=[False, True], kind="stable")
    return str(ranked.index[0])


def wall_clock(fn: Callable[[], object], repeats: int, warmup: int = 1) -> np.ndarray:
    """Seconds per call of ``fn``: ``repeats`` timed calls after ``warmup`` untimed."""
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return np.array(times)


def draft_then_ssld(
    target, draft_fn, prompt: torch.Tensor, anchors: torch.Tensor, sid: SemanticIDs,
    infill: DecodeConfig, generators: Sequence[torch.Generator] | None, c: float,
    mode: str = "exact",
) -> SSLDResult:
    """The whole SSLD pipeline, draft included (what wall-clock timings measure)."""
    draft = draft_fn(prompt, infill.gen_length)
    return ssld_generate(target, prompt, draft, anchors, sid, infill, generators, c=c,
                         mode=mode)
