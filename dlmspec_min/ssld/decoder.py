"""The SSLD decoder: one verify pass over drafted anchors, then infill.

The method is the paper's ("Speculating the Bottleneck: Why Semantic Latent
Speculative Decoding Fails for Diffusion Language Models", abstract: "have a
cheap model draft the content anchors of a sequence in a compact
representation, verify them in a single parallel pass, and infill the rest").
Its details are our formalization, SPEC.md section 3 [DERIVED]:

1. **Anchors** (``inputs.anchor_mask``) and **what the draft sees**
   (``inputs.visible_input``); the drafts themselves are ``drafting``'s.
2. **One verify pass** (``ssld_generate``): one target forward of the same
   visible input; anchor i is accepted iff the target's cluster-marginal
   argmax equals the drafted ID; an accepted anchor is committed as the
   target's best token inside that cluster. Note what this verifies: the
   target's belief at its all-masked pass, not the token it would finally
   write; a draft that imitates that first pass is accepted for the target's
   first guess (the notebooks measure how often that guess is right).
3. **Infill**: everything else with the token-space accelerator
   (``decode.generate`` started from the accepted anchors, ``init=``).
4. **Relaxed variant** (``mode="relaxed"``, C4/C5): TOK-mode draft; accept iff
   sigma(draft token) == sigma(target argmax token); commit the DRAFT's token.

**Cost.** NFE counts target forwards (verify + infill) plus the draft's
forwards in target-forward equivalents ``c`` (``drafting.relative_cost``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..decoding.config import DecodeConfig, DecodeResult
from ..decoding.decode import generate
from .drafting import Draft, _tok_proposal
from .inputs import visible_input
from .semantic import SemanticIDs, best_token_in_cluster, cluster_marginal

MODES = ("exact", "relaxed")


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
