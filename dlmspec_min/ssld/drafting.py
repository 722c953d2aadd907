"""SSLD's drafts, the SID head's training, and what a draft costs.

SPEC.md section 3 [DERIVED]. A draft sees only ``inputs.visible_input`` (the
prompt, every generated position masked). In SID mode it gives a distribution
over semantic IDs per position; in TOK mode one token.

- ``SmallMarginalDraft``: a small denoiser's token distribution summed
  within clusters (its argmax token is the TOK-mode proposal).
- ``HeadDraft``: a linear softmax head on the small denoiser's final hidden
  states, trained (``train_sid_head``, seconds, full-batch L-BFGS) to predict
  sigma(true token) at the anchors (word-initial content positions) of
  training windows (``training_windows``): the world's training text (Brown's
  training split, or fresh generated problems), never held-out text or the
  target's decodes. Its inputs are what SSLD sees
  (prompt + masks), so with a ``[BOS]`` prompt it can only learn P(SID |
  position, content).

**Cost.** ``c`` = draft FLOPs / target FLOPs for one forward of the same
sequence (``forward_flops``: 2 FLOPs per multiply-add of every linear layer
and of the output projection, plus the attention products); ``relative_cost``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..measures import reuse
from .inputs import ANCHOR_UNITS, anchor_mask, visible_input
from .semantic import SemanticIDs, cluster_marginal

HEAD_STEPS = 200  # L-BFGS iterations
HEAD_L2 = 1e-3
FEATURE_BATCH = 256
NEG_INF = float("-inf")


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
    from ..decoding.denoisers import model_input_device
    from ..decoding.modeling import DLMForMaskedDiffusion

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

    @property
    def reuse_key(self) -> tuple:
        """Equal for two such drafts of one denoiser and one partition (what
        decides their drafts), so a sequential run's looks share their decodes."""
        return ("marginal", reuse.ident(self.denoiser), reuse.tensor_key(self.sid.flat))

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


def training_windows(
    world, tokenizer, n: int, seed: int, prompt: torch.Tensor | None = None,
    seq_len: int | None = None, unit: str = "word",
) -> tuple[torch.Tensor, torch.Tensor]:
    """n TRAINING rows of ``world`` (n, L) and their anchor masks, seeded.

    The rows are ``world.training_rows`` (prose: Brown training windows from
    sentence boundaries, their first token ``prompt``'s; math: fresh generated
    problems, question then solution). The mask is ``anchor_mask(..., unit)`` with
    the world's roles: by default the head learns the IDs of word-initial content
    positions, the ones the decoder drafts.
    """
    if unit not in ANCHOR_UNITS:
        raise ValueError(f"unknown anchor unit {unit!r}; use one of {ANCHOR_UNITS}")
    windows = world.training_rows(tokenizer, n, seed, prompt=prompt, seq_len=seq_len)
    return windows, anchor_mask(tokenizer, windows, world.roles(), unit)


DRAFT_NAMES = (SmallMarginalDraft.name, HeadDraft.name)


def drafts_for(draft_denoiser, sid: SemanticIDs, windows, content, prompt_length: int,
               gen_length: int, **head_kw) -> dict:
    """The two SID-mode drafts of the book, by name: the small model's cluster
    marginal, and the same model with a SID head trained on (windows, content)
    (``head_kw`` goes to ``train_sid_head``). Within a sequential run's
    session (``measures.reuse``) the head is fitted once per IDs and rows: it
    does not depend on the questions a look measures."""
    key = ("drafts_for", reuse.ident(draft_denoiser), reuse.tensor_key(sid.flat),
           reuse.tensor_key(windows), reuse.tensor_key(content), prompt_length,
           gen_length, repr(sorted(head_kw.items())))
    return reuse.fitted(key, lambda: {
        SmallMarginalDraft.name: SmallMarginalDraft(draft_denoiser, sid),
        HeadDraft.name: HeadDraft.fit(draft_denoiser, sid, windows, content,
                                      prompt_length, gen_length, **head_kw),
    })
