"""The information view of SSLD's failure (C8): entropies at commit time, per anchor.

The paper's unifying explanation (abstract): *"the information a draft lacks
about a content anchor is the information that fixes its token, so exact
acceptance never fires and relaxed acceptance destroys quality ... the
speculative DLM methods that do work succeed by committing easy,
high-confidence tokens in token space."* SPEC.md section 5 (C8) asks for the
conditional entropy of content vs function tokens under the target and for how
acceptance tracks the entropy of an anchor's semantic ID. The pieces (the
entropies of one distribution and the bounds are ``measures.entropy``'s):

- ``cluster_entropy``: the entropy of a token distribution summed within
  semantic clusters (``semantic.cluster_marginal``), specials dropped and the
  rest renormalised: the uncertainty about an anchor's semantic ID.
- ``CommitRecorder``: a denoiser wrapper that records, for every sequence state
  it is called on, per-position statistics of the logits (entropy, top-1
  probability, optionally the cluster entropy). ``at_commit`` then replays a
  finished decode's trace (``DecodeResult.commit_step``) state by state and
  reads off each generated position's statistics at the step that committed
  it. States are keyed by their content, so batching, rows finishing early and
  identical rows need no bookkeeping: without a KV cache a forward's logits are
  a function of the state alone. The decode loop itself is untouched.
- ``commit_logits``: the same replay (``row_states``) for a few selected
  positions, re-running the denoiser on their states: the full logits each
  one was committed from (e.g. to score the committed token's own ID).
- ``anchor_table`` / ``binned_rates``: one row per anchor (what SSLD's checks
  do there, and what is known about it), and rates in bins of one column.
"""

from __future__ import annotations

import numpy as np
import torch

from ..decoding.config import DecodeResult
from ..measures.entropy import (
    STAT_DTYPE,
    entropy_of_log_probs,
    log_probs,
    probs_entropy,
)
from .semantic import SemanticIDs, cluster_marginal


def cluster_probabilities(probs: torch.Tensor, sid: SemanticIDs) -> torch.Tensor:
    """P(ID = s) from token probabilities (..., V) -> (..., K), specials dropped.

    The clusters are renormalised to sum to one; rows whose whole mass sits on
    special tokens come out all zero.
    """
    marg = cluster_marginal(probs.to(STAT_DTYPE), sid)  # (..., K)
    total = marg.sum(-1, keepdim=True)
    norm = marg / total.clamp(min=1e-300)
    return torch.where(total > 0, norm, torch.zeros_like(marg))


def cluster_entropy(logits: torch.Tensor, sid: SemanticIDs) -> torch.Tensor:
    """Entropy (nats) of the semantic ID under softmax(logits): (..., V) -> (...).

    Token probabilities are summed within clusters; special tokens (the mask
    among them) are dropped and the clusters renormalised.
    """
    return probs_entropy(cluster_probabilities(torch.softmax(logits.to(STAT_DTYPE), -1),
                                               sid))


# --- recording what the target believed when it committed each token ------------------


class CommitRecorder:
    """Wrap a denoiser; record per-position statistics of every state it sees.

    ``logits(x)`` returns the wrapped denoiser's logits unchanged, so a decode
    through the recorder is the decode without it. For each row of ``x``
    (B, L) it stores, keyed by the row's tokens, float64 arrays (L,):
    ``entropy`` and ``top1`` of the token distribution (mask token excluded)
    and, given ``sid``, ``sid_entropy`` and ``sid_top1`` of the semantic ID.
    Only cache-free decodes can be replayed (``supports_cache`` is False, so
    ``decode.generate`` refuses a cache with a clear error).
    """

    supports_cache = False

    def __init__(self, denoiser, sid: SemanticIDs | None = None):
        if getattr(denoiser, "mask_id", None) is None:
            raise ValueError("the wrapped denoiser needs a mask_id")
        self.denoiser = denoiser
        self.sid = sid
        self.mask_id = int(denoiser.mask_id)
        self.model = getattr(denoiser, "model", None)
        self.vocab_size = getattr(denoiser, "vocab_size", None)
        self.shifted = False  # the wrapped denoiser's logits are already aligned
        self.states: dict[bytes, dict[str, np.ndarray]] = {}
        self.n_calls = 0

    @property
    def stat_names(self) -> tuple[str, ...]:
        base = ("entropy", "top1")
        return base + (("sid_entropy", "sid_top1") if self.sid is not None else ())

    def clear(self) -> None:
        self.states.clear()
        self.n_calls = 0

    @staticmethod
    def key(row: torch.Tensor) -> bytes:
        return row.detach().to("cpu", torch.long).contiguous().numpy().tobytes()

    def summarize(self, logits: torch.Tensor) -> dict[str, torch.Tensor]:
        """Statistics of logits (..., V): name -> (...) float64."""
        logp = log_probs(logits, self.mask_id)  # (..., V)
        p = logp.exp()
        out = {"entropy": -(p * logp.masked_fill(p == 0, 0.0)).sum(-1),
               "top1": p.amax(-1)}
        if self.sid is not None:
            q = cluster_probabilities(p, self.sid)  # (..., K)
            out["sid_entropy"] = probs_entropy(q)
            out["sid_top1"] = q.amax(-1)
        return out

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The wrapped denoiser's logits (b, L, V), unchanged; records the state.

        Only masked positions can be committed from a state, so only they are
        summarised (NaN elsewhere).
        """
        logits = self.denoiser.logits(x)  # (b, L, V)
        self.n_calls += 1
        masked = x == self.mask_id  # (b, L)
        stats = {}
        for k, v in self.summarize(logits[masked]).items():  # (n,) each
            full = torch.full(x.shape, float("nan"), dtype=STAT_DTYPE)
            full[masked.cpu()] = v.cpu()
            stats[k] = full.numpy()
        for i in range(x.shape[0]):
            self.states[self.key(x[i])] = {k: v[i] for k, v in stats.items()}
        return logits

    def at_commit(self, result: DecodeResult) -> dict[str, torch.Tensor]:
        """Each generated position's statistics at the step that committed it.

        Replays ``result`` row by row (``row_states``) and looks each state up.
        Returns name -> (B, G) float64, NaN where a position was not committed
        by a step (pre-committed ``init`` tokens). Raises ``ValueError`` if a
        state was never seen (decode through this recorder, without a cache).
        """
        steps = result.commit_step.detach().cpu().long()  # (B, G)
        B, G = steps.shape
        P = result.prompt_length
        out = {k: torch.full((B, G), float("nan"), dtype=STAT_DTYPE)
               for k in self.stat_names}
        for b, s, state, now in row_states(result, self.mask_id):
            rec = self.states.get(self.key(state))
            if rec is None:
                raise ValueError(
                    f"row {b}, step {s}: this state was never passed to the "
                    "recorder; decode with the recorder as the denoiser and "
                    "cache='none' before calling at_commit"
                )
            cols = now.nonzero().flatten()
            for k in out:
                out[k][b, cols] = torch.as_tensor(rec[k][P + cols.numpy()])
        return out


# --- replaying a decode ---------------------------------------------------------------


def row_states(result: DecodeResult, mask_id: int):
    """Yield (row, step, state (L,), committed now (G,) bool) for every row step.

    The state before step s holds the prompt, the tokens given in ``init``
    (``commit_step`` 0) and the tokens committed at steps < s, the mask
    elsewhere: exactly the input of that step's forward in a cache-free decode.
    """
    tokens = result.tokens.detach().cpu().long()  # (B, P + G)
    steps = result.commit_step.detach().cpu().long()  # (B, G)
    P = result.prompt_length
    for b in range(steps.shape[0]):
        state = tokens[b].clone()
        gen = state[P:]  # a view: unmasking it updates ``state``
        gen[steps[b] > 0] = int(mask_id)
        last = int(steps[b].max()) if steps.shape[1] else 0
        for s in range(1, last + 1):
            now = steps[b] == s  # (G,)
            if bool(now.any()):
                yield b, s, state.clone(), now
                gen[now] = tokens[b, P:][now]


@torch.no_grad()
def commit_logits(
    denoiser, result: DecodeResult, where: torch.Tensor, batch: int = 256,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The logits a cache-free decode saw at each selected position when committing it.

    ``where`` (B, G) bool selects generated positions (pre-committed ``init``
    positions are skipped). Rebuilds each one's state (``row_states``),
    runs identical states once, ``batch`` at a time. Returns logits (N, V),
    rows (N,) and columns (N,) of the selected committed positions, in row-major
    order.
    """
    steps = result.commit_step.detach().cpu()
    if tuple(where.shape) != tuple(steps.shape):
        raise ValueError(
            f"where must be (batch, gen_length) = {tuple(steps.shape)}, "
            f"got {tuple(where.shape)}"
        )
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an integer >= 1, got {batch!r}")
    where = where.detach().cpu().bool()
    P = result.prompt_length
    states, rows, cols = [], [], []
    for b, _, state, now in row_states(result, denoiser.mask_id):
        pick = (now & where[b]).nonzero().flatten()
        for j in pick.tolist():
            states.append(state)
            rows.append(b)
            cols.append(j)
    rows_t = torch.tensor(rows, dtype=torch.long)
    cols_t = torch.tensor(cols, dtype=torch.long)
    order = torch.argsort(rows_t * steps.shape[1] + cols_t)  # row-major
    rows_t, cols_t = rows_t[order], cols_t[order]
    if not states:
        V = int(getattr(denoiser, "vocab_size", 0) or 0)
        return torch.zeros(0, V), rows_t, cols_t
    x = torch.stack(states)[order]  # (N, L)
    uniq, inverse = torch.unique(x, dim=0, return_inverse=True)  # (U, L), (N,)
    device = result.tokens.device
    out = []
    for i in range(0, len(uniq), batch):
        chunk = uniq[i:i + batch].to(device)
        idx = (inverse >= i) & (inverse < i + batch)
        logits = denoiser.logits(chunk)  # (u, L, V)
        out.append((idx.nonzero().flatten(),
                    logits[inverse[idx] - i, P + cols_t[idx]].cpu()))
    V = out[0][1].shape[-1]
    full = torch.empty(len(rows_t), V, dtype=out[0][1].dtype)
    for idx, vals in out:
        full[idx] = vals
    return full, rows_t, cols_t


# --- one row per content anchor -------------------------------------------------------


def _nats(p: torch.Tensor) -> torch.Tensor:
    """Self-information -log p in nats (p clamped away from 0), float64."""
    return -torch.log(p.to(STAT_DTYPE).clamp(min=1e-300))


def anchor_table(
    tokens: torch.Tensor, anchors: torch.Tensor, verify_logits: torch.Tensor,
    draft, sid: SemanticIDs, mask_id: int, commit: dict | None = None,
    anchor_commit_logits: torch.Tensor | None = None,
):
    """One row per anchor: what SSLD's checks do there, and what is known about it.

    tokens (B, G): the target's final tokens; anchors (B, G) bool; verify_logits
    (B, G, V): the target's all-masked pass (SSLD's verify pass); ``draft``: an
    ``drafting.Draft`` (SID log-probabilities and a TOK-mode token per position).
    Columns (s = sigma(token), q_Y = the verify pass's ID distribution):

    - ``exact_hit``: drafted ID == s (alpha_SID's event); ``first_pass_hit``:
      the verify pass's most probable ID == s;
    - ``exact_accepted``: drafted ID == the verify pass's most probable ID (the
      exact decoder's check), ``exact_faithful``: accepted and the token it
      commits (the target's best token in that ID) == token;
    - ``relaxed_accepted``: sigma(draft token) == sigma(verify argmax token),
      ``relaxed_faithful``: accepted and the committed draft token == token,
      ``relaxed_same_id``: accepted and sigma(draft token) == s;
    - ``sid_entropy_verify`` H(q_Y), ``sid_top1_verify`` max q_Y,
      ``sid_info_verify`` -log q_Y(s) (nats the draft's view leaves open about
      this anchor's ID), ``token_entropy_verify``, ``token_top1_verify``,
      ``token_info_verify`` (the same for the token, mask excluded);
    - ``sid_entropy_draft``, ``sid_info_draft``: the draft's own;
    - with ``commit`` (``CommitRecorder.at_commit`` of the decode that wrote
      ``tokens``): ``sid_entropy_commit``, ``entropy_commit``, ``top1_commit``;
    - with ``anchor_commit_logits`` (N, V), the logits each anchor was committed
      from (``commit_logits(..., where=anchors)``, row-major):
      ``sid_info_commit`` -log q_t(s), ``token_info_commit``, and
      ``glue_info`` = sid_info_verify - sid_info_commit, the nats about the ID
      that the context decoded before the anchor supplied.
    """
    import pandas as pd

    from .drafting import _tok_proposal
    from .semantic import best_token_in_cluster

    B, G = tokens.shape
    if anchors.shape != (B, G) or verify_logits.shape[:2] != (B, G) \
            or draft.tokens.shape != (B, G):
        raise ValueError(
            f"tokens, anchors, the draft and verify_logits must cover (batch, "
            f"gen_length) = ({B}, {G}) positions"
        )
    dev = verify_logits.device
    tokens, anchors = tokens.to(dev), anchors.to(dev).bool()
    s = sid(tokens)  # (B, G)
    if bool((s[anchors] >= sid.n_clusters).any()):
        raise ValueError("an anchor holds a special token; anchors must be content")
    logp = log_probs(verify_logits, mask_id)  # (B, G, V)
    q = cluster_probabilities(logp.exp(), sid)  # (B, G, K)
    t_sid = q.argmax(-1)
    d_sid, d_tok = draft.sids.to(dev), draft.tokens.to(dev)
    t_tok = _tok_proposal(verify_logits, sid)
    exact_acc = d_sid == t_sid
    relaxed_acc = sid(d_tok) == sid(t_tok)
    d_logp = draft.log_probs.to(dev)
    cols = {
        "exact_hit": d_sid == s,
        "first_pass_hit": t_sid == s,
        "exact_accepted": exact_acc,
        "exact_faithful": exact_acc
        & (best_token_in_cluster(verify_logits, d_sid, sid) == tokens),
        "relaxed_accepted": relaxed_acc,
        "relaxed_faithful": relaxed_acc & (d_tok == tokens),
        "relaxed_same_id": relaxed_acc & (sid(d_tok) == s),
        "sid_entropy_verify": probs_entropy(q),
        "sid_top1_verify": q.amax(-1),
        "sid_info_verify": _nats(q.gather(-1, s.clamp(max=sid.n_clusters - 1)
                                          [..., None])[..., 0]),
        "token_entropy_verify": entropy_of_log_probs(logp),
        "token_top1_verify": logp.amax(-1).exp(),
        "token_info_verify": -logp.gather(-1, tokens[..., None])[..., 0],
        "sid_entropy_draft": probs_entropy(d_logp.exp()),
        "sid_info_draft": -d_logp.gather(-1, s.clamp(max=d_logp.shape[-1] - 1)
                                         [..., None])[..., 0],
    }
    for name, key in [("sid_entropy_commit", "sid_entropy"),
                      ("entropy_commit", "entropy"), ("top1_commit", "top1")]:
        if commit is not None and key in commit:
            cols[name] = commit[key].to(dev)
    rows, pos = anchors.nonzero(as_tuple=True)  # row-major
    table = pd.DataFrame({
        "seq": rows.cpu().numpy(), "pos": pos.cpu().numpy(),
        "token": tokens[anchors].cpu().numpy(), "sid": s[anchors].cpu().numpy(),
    })
    for name, v in cols.items():
        v = v[anchors].cpu()
        table[name] = v.numpy().astype(int if v.dtype == torch.bool else float)
    if anchor_commit_logits is not None:
        _add_commit_information(table, anchor_commit_logits.to(dev), sid, mask_id)
    return table


def _add_commit_information(table, logits: torch.Tensor, sid: SemanticIDs,
                            mask_id: int) -> None:
    """``anchor_table``'s columns from the logits each anchor was committed from
    (N, V), row-major: ``sid_info_commit``, ``token_info_commit`` and
    ``glue_info`` (added to ``table`` in place)."""
    if logits.shape[0] != len(table):
        raise ValueError(
            f"anchor_commit_logits has {logits.shape[0]} rows for "
            f"{len(table)} anchors; build it with commit_logits(..., where=anchors)"
        )
    dev = logits.device
    lp = log_probs(logits, mask_id)  # (N, V)
    qt = cluster_probabilities(lp.exp(), sid)  # (N, K)
    ids = torch.tensor(table["sid"].to_numpy(), device=dev)
    toks = torch.tensor(table["token"].to_numpy(), device=dev)
    info = _nats(qt.gather(-1, ids[:, None])[:, 0])
    table["sid_info_commit"] = info.cpu().numpy()
    table["token_info_commit"] = (-lp.gather(-1, toks[:, None])[:, 0]).cpu().numpy()
    table["glue_info"] = table["sid_info_verify"] - table["sid_info_commit"]


def binned_rates(
    table, by: str, outcomes: dict, n_bins: int = 3, n_boot: int = 2000,
    seed: int = 0, means=(),
):
    """Rates of 0/1 outcomes in equal-count bins of ``table[by]``, with 95 % CIs.

    ``outcomes``: name -> (hit column, trial column or None for every row).
    Bins are quantiles of ``by`` (``pandas.qcut``; tied edges merge bins).
    One row per (bin, outcome): the bin's mean ``by``, hits, trials, rate and
    ``stats.rate_ci`` over sequences (``seq``), and ``mean_<col>`` for each
    column in ``means`` (its mean over the bin's rows). A bin without trials
    gets NaN.
    """
    import pandas as pd

    from ..measures.stats import rate_ci

    if not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1, got {n_bins!r}")
    bins = pd.qcut(table[by], n_bins, labels=False, duplicates="drop")
    seqs = np.sort(table["seq"].unique())
    rows = []
    for b, sel in table.groupby(bins, sort=True):
        for name, (hit, trial) in outcomes.items():
            t = sel[trial] if trial is not None else pd.Series(1, index=sel.index)
            h = sel[hit] * t
            n_s = t.groupby(sel["seq"]).sum().reindex(seqs, fill_value=0).to_numpy()
            h_s = h.groupby(sel["seq"]).sum().reindex(seqs, fill_value=0).to_numpy()
            est = lo = hi = float("nan")
            if n_s.sum() > 0:
                est, lo, hi = rate_ci(h_s, n_s, n_boot, seed)
            rows.append(dict(bin=int(b), by_mean=float(sel[by].mean()),
                             by_low=float(sel[by].min()), by_high=float(sel[by].max()),
                             outcome=name, hits=int(h_s.sum()), trials=int(n_s.sum()),
                             rate=est, low=lo, high=hi,
                             **{f"mean_{c}": float(sel[c].mean()) for c in means}))
    return pd.DataFrame(rows)
