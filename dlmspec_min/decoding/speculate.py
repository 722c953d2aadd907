"""Trajectory-level speculative decoding over Fast-dLLM's threshold rule (SPEC.md 4).

After "Trajectory-Level Speculative Decoding for Diffusion Language Models"
(seed 002, a summary only): speculate over the base sampler's denoising
trajectory, not over a token sequence. The details are this project's
formalization (DERIVED), stated in notebook 09.

Base policy F: ``decode.generate`` with ``rule="threshold"``, low-confidence
scores, greedy (or sampled with one generator per row) and its ``cache``
option. F is a deterministic map: at a state x it runs one forward (a full one
without a cache; with one, a refresh ``prefill`` at a block's first step, else
a window against that block's cache) and commits ``select_commits`` of the
block's logits. One verify call (1 NFE):

1. The pending root r, the next state of the trajectory, is known exactly; its
   logits are not.
2. Draft (``draft_children``, ``build_tree``): hypothesised descendants of r
   from the most recent logits only. Every masked position j has a top-1 token
   with confidence c_j (and a second token). Strata: c_j >= ``spec_low`` may be
   committed next (c_j >= threshold almost surely, lower ones less likely);
   below ``spec_low`` never. The draft takes each such position to be committed
   at the next step independently with probability c_j, carrying its top-1
   token (the empty set stands for F's forced single best commit). A node's
   children are its most probable commit sets (and, for a single commit, its
   second token), best first; the tree grows best-first by path log-probability
   up to ``spec_budget`` nodes; identical states are kept once.
3. Verify: one batched call over r and every node (the batch axis), each row
   computed exactly as F computes that state: a window sharing the block's
   cache, a refresh forward for a state that starts a block, or a full forward.
4. Walk: apply F's rule (``select_commits``) to r's logits; while the result is
   a node, move there and repeat. The last commit is the bonus. Every commit
   comes from the logits F computes at that state, so the output is F's token
   for token, provided a row's logits do not depend on the other rows (batch
   invariance, ``batch_invariance_gap``).

``spec_verify``: "tree" (the default, the method) computes every row of a
verify call in one batched forward per kind. "path" computes a row only when
the walk reads it, alone: the root and the nodes it accepts. The call still
counts one NFE and the whole tree's token-forwards, and with batch invariance
the tokens are the same; it is for measurements that count forwards, not for
timing the method.

Draft shapes (``spec_draft``): "tree" (above), "chain" (one path: each state
adds the next most confident position of the draft table with its top-1
token, ``chain_child``), "mix" (a chain of half the budget, then the tree)
and "rank" (the tree grown with ``rank_children``: single commits in the
table's confidence order, and its prefixes).
Which states are drafted never changes an exact walk's tokens, only how far
it gets per call.

FreeDave (Wu and Zhang, "Free Draft-and-Verification: Toward Lossless
Parallel Decoding for Diffusion Large Language Models", arXiv 2510.00294;
written here from the paper's and its README's description, no code taken)
drafts the chain of states a one-token-per-step decode would reach if the
last logits held, verifies them in one batched call and keeps the longest
confirmed prefix; the confirmed state's logits draft the next chain. In this
loop that is ``freedave_config``:

- ``"one-token"``: base F is one token per step (``rule="schedule"``,
  ``steps=gen_length``: the most confident position each forward),
  ``spec_draft="chain"``, ``spec_accept="exact"``. Exact: the walk moves only
  to F's own next state, so the output is F's token for token (with batch
  invariance), as the paper's lossless guarantee says.
- ``"threshold"``: base F is the threshold rule, ``spec_draft="chain"``,
  ``spec_accept="subset"`` (the README's "subset-based verification"): from a
  verified state the walk also accepts a drafted state whose new tokens are a
  subset of F's commits there. Not exact: the accepted state commits fewer
  tokens than F at that step, later logits are computed at states F never
  visits, so the output may differ from F's (measure it with ``drift``); it
  is a separate decoder, never a mode of the exact method.

Inter-block lookahead (``lookahead``): "none" keeps the tree in the root's
block. "exact": a node that completes the block is verified with a refresh
forward (F's own block-start prefill, which also yields the next block's cache);
its descendants wait for the next call; without a cache every row is a full
forward and the tree runs on across blocks. "stale" (cached bases only): the
descendants of a block-completing node are verified in the same call against
the current, stale cache with a window spanning both blocks: cheaper than
waiting, but not F -- the difference is trajectory drift (``drift``).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from dataclasses import dataclass

import numpy as np
import torch

from .config import DecodeConfig
from .steps import _Trace, index_rows, select_commits

CONF_CLAMP = 1e-6  # keeps log c and log(1 - c) finite in the draft's set scores
KINDS = ("full", "refresh", "window", "stale")  # how a row is computed


@dataclass
class SpecTrace:
    """What trajectory speculation adds to a ``DecodeResult`` (its ``spec``).

    The base policy F is the plain threshold decode the speculation follows; a
    verify call is one forward (one NFE) over a tree of drafted states.

    Parameters
    ----------
    trajectory_step : torch.Tensor
        (B, G) long: the base-policy step (1-based, F's own forward count)
        that committed each generated token; 0 for tokens given through
        ``init``.
    steps_per_verify : list of list of int
        Per row, per verify call: base-policy steps it advanced (>= 1; the
        speedup in forwards is their mean).
    rows_per_verify : list of list of int
        Per row, per verify call: states it verified (the root and the
        drafted nodes), the batch size of that forward.
    """

    trajectory_step: torch.Tensor  # (B, G) base-policy step committing each token
    steps_per_verify: list[list[int]]  # base-policy steps advanced per verify call
    rows_per_verify: list[list[int]]  # states verified per call (root + nodes)

    @property
    def mean_steps_per_verify(self) -> float:
        """Base-policy steps per verify call over every row's calls (NaN if none)."""
        steps = [s for row in self.steps_per_verify for s in row]
        return float(np.mean(steps)) if steps else math.nan


# --- the draft ----------------------------------------------------------------------


def best_commit_sets(conf: list[float], k: int) -> list[tuple[float, frozenset]]:
    """The k most probable sets of indices under independent Bernoulli(conf).

    Returns (log probability, set) best first: the mode {i: c_i > 1/2}, then
    flips of the cheapest items, enumerated exactly once each with a heap over
    increasing index tuples (the classic k-best subset-sum scheme).
    """
    c = [min(max(float(v), CONF_CLAMP), 1 - CONF_CLAMP) for v in conf]
    mode = frozenset(i for i, v in enumerate(c) if v > 0.5)
    lp_mode = sum(math.log(max(v, 1 - v)) for v in c)
    cost = sorted((abs(math.log(v) - math.log1p(-v)), i) for i, v in enumerate(c))
    out = [(lp_mode, mode)]
    heap = [(cost[0][0], 0, (0,))] if cost else []
    while heap and len(out) < k:
        d, j, flips = heapq.heappop(heap)
        out.append((lp_mode - d, mode ^ {cost[f][1] for f in flips}))
        if j + 1 < len(cost):
            nxt = cost[j + 1][0]
            heapq.heappush(heap, (d + nxt, j + 1, (*flips, j + 1)))
            heapq.heappush(heap, (d - cost[j][0] + nxt, j + 1, (*flips[:-1], j + 1)))
    return out


class DraftTable:
    """Per generated position: the latest top-2 tokens and probabilities seen."""

    def __init__(self, gen_length: int, device):
        self.top = torch.full((gen_length, 2), -1, dtype=torch.long, device=device)
        self.conf = torch.zeros(gen_length, 2, dtype=torch.float64, device=device)

    def update(self, logits: torch.Tensor, col: int, mask_id: int,
               open_: torch.Tensor):
        """logits (W, V) of generated positions [col, col + W) (col may be < 0).

        Only positions still to decode (``open_`` (G,) bool) are updated, in
        float32: the draft is a guess, it needs no float64.
        """
        lo, hi = max(col, 0), min(col + logits.shape[0], self.top.shape[0])
        cols = torch.arange(lo, hi, device=logits.device)
        cols = cols[open_[lo:hi]]  # (w,)
        if not len(cols):
            return
        p = torch.softmax(logits[cols - col].float(), dim=-1)  # (w, V)
        if 0 <= mask_id < p.shape[-1]:
            p[:, mask_id] = -1.0  # never proposed
        conf, top = p.topk(2, dim=-1)  # (w, 2)
        self.conf[cols], self.top[cols] = conf.double(), top


def draft_children(
    cols: list[int], top: list[list[int]], conf: list[list[float]], spec_low: float,
    k: int,
) -> list[tuple[float, tuple]]:
    """Up to k hypotheses for F's next commit at a state, best first.

    cols: the state's masked positions in the block F decodes next; top, conf:
    the draft table as lists (G x 2). Returns (log p, ((position, token), ...)).
    Only positions the table has seen are drafted.
    """
    known = [j for j in cols if top[j][0] >= 0]
    if not known:
        return []
    best = max(known, key=lambda j: conf[j][0])  # F's forced commit, guessed
    cand = [j for j in known if conf[j][0] >= spec_low]
    scores: dict[tuple, float] = {}

    def add(commits: tuple, lp: float):
        old = scores.get(commits, -math.inf)
        hi, lo = max(old, lp), min(old, lp)
        scores[commits] = hi + math.log1p(math.exp(lo - hi))  # log(e^old + e^lp)

    for lp, chosen in best_commit_sets([conf[j][0] for j in cand], k):
        pos = sorted(cand[i] for i in chosen) or [best]
        add(tuple((j, top[j][0]) for j in pos), lp)
        if len(pos) == 1 and top[pos[0]][1] >= 0:  # its second token
            j = pos[0]
            ratio = conf[j][1] / max(conf[j][0], CONF_CLAMP)
            add(((j, top[j][1]),), lp + math.log(max(ratio, CONF_CLAMP)))
    return sorted(((lp, c) for c, lp in scores.items()), key=lambda t: -t[0])[:k]


def chain_child(
    cols: list[int], top: list[list[int]], conf: list[list[float]],
) -> list[tuple[float, tuple]]:
    """FreeDave's draft step: the most confident known position of ``cols`` and
    its top-1 token, as [(log confidence, ((position, token),))] ([] if none).

    Ties go to the leftmost position, as in the base's rule.
    """
    known = [j for j in cols if top[j][0] >= 0]
    if not known:
        return []
    j = max(known, key=lambda i: conf[i][0])  # the first of equal maxima
    return [(math.log(max(conf[j][0], CONF_CLAMP)), ((j, top[j][0]),))]


RANK_DECAY = 0.5  # rank_children: prior weight of the k-th position, decay per rank
RANK_PREFIX = 0.2  # rank_children: weight of a multi-position prefix


def rank_children(
    cols: list[int], top: list[list[int]], conf: list[list[float]], spec_low: float,
    k: int,
) -> list[tuple[float, tuple]]:
    """Up to k hypotheses for F's next commit at a state, best first ("rank").

    The threshold base mostly commits one token per step, its most confident
    position under logits the draft has not seen: often the table's first
    position, less often its second or third, sometimes with its second token.
    So the children are single commits in the table's confidence order (the
    r-th position, r = 0, 1, ..., with prior weight ``(1 - RANK_DECAY) *
    RANK_DECAY**r``, split between its top-2 tokens in proportion to their
    probabilities) and the prefixes of that order of m >= 2 positions with
    their top-1 tokens (weight ``RANK_PREFIX`` times the product of their
    confidences), the base's multi-token steps. The constants were set on a
    study set (``book/claims.yml``, trajectory, 2026-12-07); ``spec_low`` is
    not used (every position is a candidate, by rank). Returns (log weight,
    ((position, token), ...)) like ``draft_children``.
    """
    order = sorted((j for j in cols if top[j][0] >= 0), key=lambda j: (-conf[j][0], j))
    out = []
    for r, j in enumerate(order):
        prior = (1 - RANK_DECAY) * RANK_DECAY ** r
        both = conf[j][0] + max(conf[j][1], 0.0)
        for t in (0, 1):
            if top[j][t] >= 0:
                share = max(conf[j][t], CONF_CLAMP) / max(both, CONF_CLAMP)
                out.append((math.log(prior * share), ((j, top[j][t]),)))
    lp = math.log(RANK_PREFIX) + math.log(max(conf[order[0]][0], CONF_CLAMP)) \
        if order else 0.0
    for m in range(2, len(order) + 1):
        lp += math.log(max(conf[order[m - 1]][0], CONF_CLAMP))
        out.append((lp, tuple(sorted((j, top[j][0]) for j in order[:m]))))
    out.sort(key=lambda c: -c[0])  # stable: singles before an equal prefix
    return out[:k]


# --- one row: tree, verify, walk -----------------------------------------------------


@dataclass
class _Tree:
    """A verify call's drafted states so far, by index (0 is the root)."""

    commits: list  # frozenset of (position, token) on top of the root
    cols: list  # masked positions of the block F decodes next at that state
    kinds: list  # how the state is computed (KINDS)
    blocks: list  # the block F decodes next at that state
    lp: list  # path log-probability under the draft

    def append(self, commits, cols, kind, block, lp):
        self.commits.append(commits)
        self.cols.append(cols)
        self.kinds.append(kind)
        self.blocks.append(block)
        self.lp.append(lp)


@dataclass
class _Row:
    """Constants of one row's decode."""

    denoiser: object
    config: DecodeConfig
    P: int  # prompt length
    generator: list | None = None  # [the row's torch.Generator] when sampling
    drafter: object = draft_children  # (cols, top, conf, spec_low, k) -> children

    def __post_init__(self):
        self.mask_id = int(self.denoiser.mask_id)
        self.bl = self.config.block_length
        self.nb = self.config.num_blocks
        self.L = self.P + self.config.gen_length
        if self.config.spec_draft == "rank" and self.drafter is draft_children:
            self.drafter = rank_children

    def block_of(self, gen: torch.Tensor) -> int:
        """The block F decodes at this state: the first with a mask (nb if none)."""
        masked = (gen == self.mask_id).view(self.nb, self.bl).any(dim=1)  # (nb,)
        return int(masked.long().argmax()) if bool(masked.any()) else self.nb

    def span(self, block: int) -> tuple[int, int]:
        return self.P + block * self.bl, self.P + (block + 1) * self.bl

    def child_kind(self, block: int, parent_block: int, parent_kind: str,
                   root_block: int) -> str | None:
        """How F computes a child state (None: not verified in this call)."""
        cfg = self.config
        if block >= self.nb or (block != root_block and cfg.lookahead == "none"):
            return None
        if cfg.cache == "none":
            return "full"
        if block == root_block:
            return "window"
        if parent_kind == "window":  # it completes the root's block: F refreshes
            return "refresh"
        if cfg.lookahead == "stale" and block == parent_block:
            return "stale"  # past a refresh, against the cache it replaces
        return None

    def build_tree(self, root: torch.Tensor, root_kind: str, table: DraftTable):
        """The root and up to spec_budget nodes: states (n, L), kinds, blocks.

        ``spec_draft``: "chain" spends the budget on one path in confidence
        order (``chain_child``), "mix" half of it, and the rest goes to the
        tree, best first by path log-probability. A node's children are drafted
        only when it is popped (its path score bounds theirs), so the heap
        holds "expand node i" entries beside "add child r of node i" entries.
        A node is its commits on top of the root: {(position, token)}.
        """
        cfg, budget, bl = self.config, self.config.spec_budget, self.bl
        masked = (root[self.P:] == self.mask_id).view(self.nb, bl)  # (nb, bl)
        open_cols = [(row.nonzero().squeeze(1) + k * bl).tolist()
                     for k, row in enumerate(masked)]  # per block: masked positions

        def next_block(b: int) -> int:
            return next((k for k in range(b + 1, self.nb) if open_cols[k]), self.nb)

        root_block = next_block(-1)
        t = _Tree([frozenset()], [open_cols[root_block]], [root_kind], [root_block],
                  [0.0])
        if root_kind != "refresh" and budget > 0:  # else the cache it needs is unmade
            top, conf = table.top.tolist(), table.conf.tolist()
            seen = {t.commits[0]}

            def add(i: int, new: tuple, lp: float) -> int | None:
                """Node i's child with commits ``new``: its index (None: not added)."""
                done = {j for j, _ in new}
                left = [j for j in t.cols[i] if j not in done]
                block = t.blocks[i] if left else next_block(t.blocks[i])
                kind = self.child_kind(block, t.blocks[i], t.kinds[i], root_block)
                key = t.commits[i].union(new)
                if kind is None or key in seen:
                    return None
                seen.add(key)
                t.append(key, left if left else open_cols[block], kind, block, lp)
                return len(t.kinds) - 1

            n_chain = {"tree": 0, "rank": 0, "chain": budget,
                       "mix": budget // 2}[cfg.spec_draft]
            cur = 0
            while cur is not None and len(t.kinds) <= n_chain:
                if t.kinds[cur] == "refresh" and cfg.lookahead != "stale":
                    break  # (an exact refresh's children need its cache)
                kid = chain_child(t.cols[cur], top, conf)
                cur = add(cur, kid[0][1], t.lp[cur] + kid[0][0]) if kid else None
            self._grow(t, budget, add, top, conf)
        states = root.repeat(len(t.kinds), 1)  # (n, L)
        idx = [(n, self.P + j, tok) for n, c in enumerate(t.commits) for j, tok in c]
        if idx:
            rows, pos, toks = torch.tensor(idx, device=root.device).T
            states[rows, pos] = toks.to(states.dtype)
        return states, t.kinds, t.blocks

    def _grow(self, t: _Tree, budget: int, add, top, conf):
        """Best-first tree growth from the root until ``t`` holds budget + 1 states."""
        cfg = self.config
        heap, tick, kids = [(0.0, 0, 0, -1)], 0, {}  # (-score, tie, node, child rank)
        while heap and len(t.kinds) <= budget:
            neg, _, i, rank = heapq.heappop(heap)
            if rank < 0:  # draft node i's children
                room = budget + 1 - len(t.kinds)  # more children could not fit
                kids[i] = self.drafter(t.cols[i], top, conf, cfg.spec_low, room)
                neg = -t.lp[i]
            else:  # add child ``rank`` of node i
                n = add(i, kids[i][rank][1], -neg)
                if n is not None and (t.kinds[n] != "refresh"
                                      or cfg.lookahead == "stale"):
                    tick += 1  # (an exact refresh's children need its cache)
                    heapq.heappush(heap, (neg, tick, n, -1))
            if rank + 1 < len(kids[i]):  # node i's next child
                tick += 1
                score = t.lp[i] + kids[i][rank + 1][0]
                heapq.heappush(heap, (-score, tick, i, rank + 1))

    def verify(self, states, kinds, blocks, cache):
        """One call: the rows' logits and a refresh row's cache (``_Verified``), and
        its cost, token-forwards and denoiser calls: the whole tree's, however
        ``spec_verify`` computes it."""
        groups: dict[str, list[int]] = {}
        for i, kind in enumerate(kinds):
            groups.setdefault(kind, []).append(i)
        root_start, spans = self.span(blocks[0])[0], {}
        for kind, idx in groups.items():
            if kind in ("full", "refresh"):
                spans[kind] = (0, self.L)
            else:  # from the root's block to the end of the rows' block (dual)
                stop = self.L if self.config.cache == "prefix" else \
                    self.span(blocks[idx[0]])[1]
                spans[kind] = (root_start, stop)
        verified = _Verified(self.denoiser, states, kinds, spans, cache)
        if self.config.spec_verify == "tree":  # the method: every row, now
            for kind in KINDS:
                if kind in groups:
                    verified.compute(groups[kind])
        token_forwards = sum(len(idx) * (spans[k][1] - spans[k][0])
                             for k, idx in groups.items())
        return verified, token_forwards, len(groups)

    def walk(self, states, blocks, logits):
        """Follow F through the verified states: path, next state, commits per step.

        Greedy F's choice depends only on the masked positions' own logits
        (committed ones score -inf and are never counted), so the rule runs on
        those columns alone, in block order (same ties); sampled F draws noise
        for the whole block, so then it gets the whole block. From a state the
        walk moves to F's next state if it is drafted; with
        ``spec_accept="subset"`` otherwise to the drafted state that adds the
        most of F's next commits and nothing else (FreeDave's subset rule).
        """
        index = {x.tobytes(): i for i, x in enumerate(states.cpu().numpy())}
        cur, path, commits = 0, [0], []
        while True:
            x = states[cur]
            s, e = self.span(blocks[cur])
            nxt, commit = self.step(x, s, e, logits[cur])
            j = index.get(nxt.cpu().numpy().tobytes())
            if j is None and self.config.spec_accept == "subset":
                j = self.subset_node(states, x, nxt)
                if j is not None:
                    commit = states[j, s:e] != x[s:e]
            commits.append((s, commit))
            if j is None:
                return path, nxt, commits
            cur = j
            path.append(j)

    def step(self, x: torch.Tensor, s: int, e: int, verified):
        """F's step at state x (L,) in block [s, e): next state, commit (bl,) bool."""
        lo, lg = verified
        masked = x[s:e] == self.mask_id  # (bl,)
        whole = self.config.needs_generator
        cols = torch.arange(e - s) if whole else masked.nonzero().squeeze(1)
        k = 1 if self.config.rule == "schedule" else None  # one token per step
        x0, take = select_commits(lg[s - lo + cols][None], masked[cols][None],
                                  self.config, self.mask_id, k, self.generator,
                                  torch.zeros(1, dtype=torch.long))  # (1, m) twice
        commit = torch.zeros_like(masked)
        commit[cols[take[0]]] = True  # (bl,)
        nxt = x.clone()
        nxt[s + cols[take[0]]] = x0[0][take[0]].to(x.dtype)
        return nxt, commit

    def subset_node(self, states: torch.Tensor, x: torch.Tensor, nxt: torch.Tensor):
        """The drafted state that adds to x (L,) only tokens of F's next state nxt,
        and the most of them (ties: the first drafted); None if none adds any."""
        open_ = x == self.mask_id  # (L,)
        agree = (states == x) | (open_ & (states == nxt))  # (n, L)
        added = (states != x).sum(dim=1)  # (n,)
        ok = agree.all(dim=1) & (added > 0)  # (n,)
        if not bool(ok.any()):
            return None
        return int(torch.where(ok, added, -1).argmax())


class _Verified:
    """A verify call's results by tree row: ``v[i]`` is (first column, logits
    (W, V)) of state i, ``v.cache_of(i)`` the cache a refresh row made.

    ``spec_verify="tree"`` computes every row up front, one batched forward per
    kind (as the method runs: one call). "path" computes a row the first time the
    walk reads it, alone (batch 1): the same logits provided batch invariance,
    at the cost of the rows the walk reads instead of the whole tree. The tokens
    and the cost counted (NFE, token-forwards) are the same either way; only
    the time is not the method's.
    """

    def __init__(self, denoiser, states, kinds, spans, cache):
        self.denoiser, self.states, self.kinds = denoiser, states, kinds
        self.spans, self.cache = spans, cache
        self.logits: dict[int, tuple[int, torch.Tensor]] = {}
        self.made: dict[int, tuple[object, int]] = {}  # refresh row -> (caches, r)

    def compute(self, idx: list[int]):
        """Rows ``idx`` (all of one kind) in one forward."""
        den, kind = self.denoiser, self.kinds[idx[0]]
        xs, (lo, hi) = self.states[idx], self.spans[kind]  # (m, L)
        if kind == "full":
            logits = den.logits(xs)  # (m, L, V)
        elif kind == "refresh":
            logits, made = den.prefill(xs)
            self.made.update({i: (made, r) for r, i in enumerate(idx)})
        else:
            logits = den.logits_window(xs[:, lo:hi], lo,
                                       repeat_rows(self.cache, len(idx)))
        self.logits.update({i: (lo, logits[r]) for r, i in enumerate(idx)})

    def __getitem__(self, i: int):
        if i not in self.logits:
            self.compute([i])
        return self.logits[i]

    def cache_of(self, i: int):
        """The batch-1 cache refresh row i made (its logits were read)."""
        made, r = self.made[i]
        return index_rows(made, torch.tensor([r]))


def repeat_rows(cache, n: int):
    """A batch-1 cache shared by n rows (views, no copy)."""
    if isinstance(cache, torch.Tensor):
        return cache.expand(n, *cache.shape[1:])
    if isinstance(cache, (list, tuple)):
        return type(cache)(repeat_rows(c, n) for c in cache)
    if isinstance(cache, dict):
        return {k: repeat_rows(v, n) for k, v in cache.items()}
    raise TypeError(f"cannot share a {type(cache).__name__} cache across tree rows")


def decode_trajectory(
    denoiser, x: torch.Tensor, P: int, config: DecodeConfig, generator=None, *,
    drafters=None,
):
    """Speculative decode of every row of x (B, L) (prompt ++ masks/init), one by one.

    Called by ``generate`` when ``config.speculate == "trajectory"``. Rows are
    decoded one after another (the batch axis holds one row's tree); each row's
    NFE counts its verify calls. Returns a ``DecodeResult`` with ``spec`` set.
    With temperature > 0 the walk draws F's noise from the row's generator in
    F's order (one draw per base-policy step; drafting draws nothing), so each
    row needs its own generator, as F's rows do to be decoded alone.
    ``drafters``: None (the tree's ``draft_children``) or a callable b -> the
    row's drafter, with ``draft_children``'s signature (an oracle, in
    ``trajectory_study``); drafting never changes the tokens of an exact walk.
    """
    B, L = x.shape
    G = config.gen_length
    if config.needs_generator and isinstance(generator, torch.Generator) and B > 1:
        raise ValueError(
            "with temperature > 0 trajectory speculation decodes rows one by one: "
            "pass one torch.Generator per row (a shared one interleaves the rows)"
        )
    trace = _Trace(B, P, G, x.device)
    traj = torch.zeros(B, G, dtype=torch.long, device=x.device)
    steps, rows_per, calls = [], [], 0
    for b in range(B):
        gen_b = None
        if config.needs_generator:
            gen_b = [generator if isinstance(generator, torch.Generator)
                     else generator[b]]
        row = _Row(denoiser, config, P, gen_b)
        if drafters is not None:
            row.drafter = drafters(b)
        table, cache, cache_block = DraftTable(G, x.device), None, -1
        root, fstep, steps_b, rows_b = x[b].clone(), 0, [], []
        while (block := row.block_of(root[P:])) < row.nb:
            kind = "full" if config.cache == "none" else (
                "window" if cache_block == block else "refresh")
            states, kinds, blocks = row.build_tree(root, kind, table)
            logits, width, n_calls = row.verify(states, kinds, blocks, cache)
            path, nxt, commits = row.walk(states, blocks, logits)
            new = torch.zeros(G, dtype=torch.bool, device=x.device)
            for k, (s, commit) in enumerate(commits):
                traj[b, s - P:s - P + row.bl][commit] = fstep + k + 1
                new[s - P:s - P + row.bl] |= commit
            made = [i for i in path if kinds[i] == "refresh"]
            if made:  # F's refreshed cache for the block of that state
                cache, cache_block = logits.cache_of(made[-1]), blocks[made[-1]]
            lo, lg = logits[path[-1]]
            table.update(lg, lo - P, row.mask_id, nxt[P:] == row.mask_id)
            trace.record(torch.tensor([b], device=x.device), width, P, new[None])
            fstep += len(path)
            steps_b.append(len(path))
            rows_b.append(len(kinds))
            calls += n_calls
            root = nxt
        x[b] = root
        steps.append(steps_b)
        rows_per.append(rows_b)
    result = trace.result(x)
    result.n_forwards = calls
    result.spec = SpecTrace(traj, steps, rows_per)
    return result


def oracle_drafters(reference):
    """Drafters that know the base's trajectory (``decode_trajectory(drafters=)``).

    ``reference``: the base's ``DecodeResult`` on the same rows. A node's only
    child is the base's next state (its next step's commits, read from
    ``commit_step``), so a tree of n nodes is the base's next n states: the
    most any draft of that size can confirm in one call. For measurement.
    """
    steps, gen = reference.commit_step.tolist(), reference.generated.tolist()

    def for_row(b: int):
        s_b, g_b = steps[b], gen[b]

        def draft(cols, top, conf, spec_low, k):
            live = [j for j in cols if s_b[j] > 0]
            if not live or k < 1:
                return []
            first = min(s_b[j] for j in live)
            return [(0.0, tuple((j, g_b[j]) for j in live if s_b[j] == first))]

        return draft

    return for_row


FREEDAVE_MODES = ("one-token", "threshold")


def freedave_config(mode: str, base: DecodeConfig) -> DecodeConfig:
    """FreeDave (arXiv 2510.00294) over ``base``'s lengths, cache and lookahead.

    ``mode="one-token"``: exact over one token per step (the base becomes
    ``rule="schedule"``, ``steps=gen_length``); ``"threshold"``: over
    ``base``'s threshold rule with the subset acceptance, not exact (the
    module docstring says why). The chain is ``base.spec_budget`` states long.
    """
    if mode not in FREEDAVE_MODES:
        raise ValueError(f"unknown FreeDave mode {mode!r}; use one of {FREEDAVE_MODES}")
    if not isinstance(base, DecodeConfig):
        raise TypeError(f"base must be a DecodeConfig, got {type(base).__name__}")
    spec = dict(speculate="trajectory", spec_draft="chain")
    if mode == "one-token":
        return dataclasses.replace(base, rule="schedule", steps=base.gen_length,
                                   spec_accept="exact", **spec)
    if base.rule != "threshold":
        raise ValueError("FreeDave's threshold mode needs a base with "
                         f"rule='threshold', got {base.rule!r}")
    return dataclasses.replace(base, spec_accept="subset", **spec)


# --- measuring -----------------------------------------------------------------------


def drift(tokens: torch.Tensor, reference: torch.Tensor) -> dict[str, np.ndarray]:
    """Per sequence against the base policy's output (B, G) each: exact, hamming."""
    if tokens.shape != reference.shape:
        raise ValueError(f"shapes differ: {tuple(tokens.shape)} vs "
                         f"{tuple(reference.shape)}; compare the generated parts")
    differ = (tokens != reference).double()  # (B, G)
    return {"exact": (differ.sum(1) == 0).double().numpy(),
            "hamming": differ.mean(1).numpy()}


@torch.no_grad()
def batch_invariance_gap(denoiser, states: torch.Tensor, start: int, stop: int):
    """Max |batched - one-by-one| over logits, full forwards and cached windows.

    states (n, L). Windows [start, stop) share the cache of states[0]; 0.0
    means a verify call returns exactly what F's batch-1 forwards return.
    """
    gap = (denoiser.logits(states) - torch.cat(
        [denoiser.logits(s[None]) for s in states])).abs().max()
    if getattr(denoiser, "supports_cache", False):
        _, cache = denoiser.prefill(states[:1])
        w = states[:, start:stop]
        many = denoiser.logits_window(w, start, repeat_rows(cache, len(states)))
        one = torch.cat([denoiser.logits_window(r[None], start, cache) for r in w])
        gap = torch.maximum(gap, (many - one).abs().max())
    return float(gap)
