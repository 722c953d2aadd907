"""Semantic IDs of tokens, the size-matched random control, chance levels.

SPEC.md section 3 ("Semantic IDs", "Size-matched random clustering",
"Acceptance"), our formalization [DERIVED] of the paper's SSLD ("Speculating
the Bottleneck", abstract): a semantic ID maps every token of the vocabulary to
one of K clusters, ``sigma: V -> [K]``.

- **Which vectors.** The rows of the TARGET's input embedding matrix
  (``model.get_input_embeddings().weight``, shape (V, D)), L2-normalised, so
  that k-means groups tokens by the direction of their embedding (cosine
  geometry).
- **k-means.** Lloyd's algorithm with k-means++ seeding (Arthur & Vassilvitskii,
  2007), all randomness from one ``torch.Generator`` seeded by the caller;
  assignment ties go to the lowest cluster index; an emptied cluster is
  re-seeded with the point farthest from its centroid. Deterministic on CPU.
- **Special tokens** ([PAD], [UNK], [BOS], [EOS], [MASK], or whatever the
  tokenizer declares) are left out of the clustering and share one extra
  bucket, id ``n_clusters``, that no acceptance ever targets: a cluster
  marginal (``cluster_marginal``) drops it.
- **Residual codes** (optional, ``levels = H > 1``): level h clusters the
  residual left by levels < h (residual k-means, as in RQ-VAE-style semantic
  IDs); a token's code is the tuple of its H cluster indices and "exact" means
  the whole tuple matches. ``flat`` numbers the distinct tuples densely, so
  every later step works on one partition of the vocabulary.
- **Random control.** ``sigma_r = sigma o pi`` for a uniform random
  permutation ``pi`` of the non-special tokens (specials stay in their bucket):
  the multiset of cluster sizes is exactly that of ``sigma``; only meaning is
  removed.
- **Chance levels.** ``1 / n_clusters`` (a uniform guess) and the
  frequency-weighted ``sum_s P(s)^2`` (a guess drawn from the clusters' own
  frequency among the targets); also ``max_s P(s)`` (always guessing the most
  frequent cluster).

``permutation_test`` is the vectorized control of SPEC.md section 5 (C4): the
(draft token, target token) pairs are fixed once; each random clustering is a
gather and a compare; one-sided ``p = (1 + #{alpha_random <= alpha}) / (R + 1)``
for "random clusterings accept more than the semantic one".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

KMEANS_ITERS = 30
PERMUTATION_CHUNK = 500  # random clusterings materialised at once, (chunk, V) longs


# --- k-means ----------------------------------------------------------------------


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """Rows scaled to unit length (zero rows stay zero): (N, D) -> (N, D) float32."""
    x = x.detach().float()
    return x / x.norm(dim=1, keepdim=True).clamp(min=1e-12)


def _sq_dist(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances (N, D), (K, D) -> (N, K), clamped at 0."""
    d = (x * x).sum(1, keepdim=True) - 2 * x @ c.T + (c * c).sum(1)[None, :]
    return d.clamp(min=0)


def kmeans_pp_init(x: torch.Tensor, K: int, generator: torch.Generator) -> torch.Tensor:
    """k-means++ seeding: (N, D) -> K centroids (K, D), drawn with ``generator``.

    Each next centre is point i with probability d2_i / sum(d2), d2 the squared
    distance to the nearest centre so far (inverse-CDF draw, float64).
    """
    N = x.shape[0]
    x_sq = (x * x).sum(1)  # (N,)

    def dist_to(i: int) -> torch.Tensor:
        return (x_sq - 2 * (x @ x[i]) + x_sq[i]).clamp(min=0)  # (N,)

    first = int(torch.randint(N, (1,), generator=generator))
    centers = [first]
    d2 = dist_to(first)
    for _ in range(1, K):
        cum = torch.cumsum(d2.double(), 0)  # (N,)
        total = float(cum[-1])
        if total <= 0:  # every point sits on a centre: take the next unused one
            used = set(centers)
            nxt = next(i for i in range(N) if i not in used)
        else:
            u = float(torch.rand((), generator=generator, dtype=torch.float64)) * total
            nxt = min(int(torch.searchsorted(cum, torch.tensor(u, dtype=torch.float64),
                                             right=True)), N - 1)
        centers.append(nxt)
        d2 = torch.minimum(d2, dist_to(nxt))
    return x[centers].clone()


def kmeans(
    x: torch.Tensor, K: int, generator: torch.Generator, iters: int = KMEANS_ITERS
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd's k-means, k-means++ seeding: (N, D) -> (labels (N,), centroids (K, D)).

    Stops when no assignment changes or after ``iters`` rounds. A cluster that
    empties is re-seeded with the point farthest from its own centroid.
    """
    if x.dim() != 2:
        raise ValueError(f"k-means needs a (N, D) matrix, got shape {tuple(x.shape)}")
    N = x.shape[0]
    if not (isinstance(K, int) and 1 <= K <= N):
        raise ValueError(f"K must be an int in [1, {N}] (the points), got {K!r}")
    x = x.float()
    c = kmeans_pp_init(x, K, generator)
    labels = None
    for _ in range(iters):
        d = _sq_dist(x, c)  # (N, K)
        new = d.argmin(dim=1)  # ties: lowest index
        counts = torch.bincount(new, minlength=K)
        for k in (counts == 0).nonzero().flatten().tolist():  # re-seed empty clusters
            far = int(d.gather(1, new[:, None]).squeeze(1).argmax())
            new[far] = k
            d[far] = float("inf")
            d[far, k] = 0
        if labels is not None and torch.equal(new, labels):
            break
        labels = new
        counts = torch.bincount(labels, minlength=K).clamp(min=1)
        c = torch.zeros_like(c).index_add_(0, labels, x) / counts[:, None]
    return labels, c


# --- semantic IDs -------------------------------------------------------------------


@dataclass(frozen=True)
class SemanticIDs:
    """A partition of the vocabulary: ``flat[v]`` is token v's semantic ID.

    codes (V, H): per-level cluster index in [0, K) (-1 for special tokens);
    flat (V,): dense id of the whole tuple in [0, n_clusters); special tokens
    get ``n_clusters`` (the special bucket); special (V,) bool.
    """

    codes: torch.Tensor
    flat: torch.Tensor
    special: torch.Tensor
    n_clusters: int
    K: int
    seed: int | None = None
    kind: str = "semantic"

    @property
    def levels(self) -> int:
        return self.codes.shape[1]

    @property
    def vocab_size(self) -> int:
        return self.flat.shape[0]

    @property
    def special_bucket(self) -> int:
        return self.n_clusters

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        """Semantic IDs of token ids (any shape); specials map to the special bucket."""
        return self.flat.to(ids.device)[ids]

    def sizes(self) -> torch.Tensor:
        """Tokens per cluster (n_clusters,), the special bucket excluded."""
        return torch.bincount(self.flat[~self.special], minlength=self.n_clusters)

    def members(self, cluster: int) -> torch.Tensor:
        """Token ids in one cluster."""
        return (self.flat == cluster).nonzero().flatten()

    def permuted(self, generator: torch.Generator) -> SemanticIDs:
        """The size-matched random control ``sigma o pi`` (one random clustering)."""
        flat = random_clusterings(self, 1, generator)[0]
        codes = torch.full_like(self.codes, -1)
        codes[:, 0] = torch.where(self.special, -1, flat)  # one level: the flat id
        return SemanticIDs(codes=codes, flat=flat, special=self.special,
                           n_clusters=self.n_clusters, K=self.K, seed=self.seed,
                           kind="random")


def special_mask(vocab_size: int, special_ids) -> torch.Tensor:
    """(V,) bool, True at the given special token ids; ids must lie in [0, V)."""
    ids = sorted({int(i) for i in special_ids})
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise ValueError(
            f"special token ids {bad} lie outside the vocabulary [0, {vocab_size})"
        )
    mask = torch.zeros(vocab_size, dtype=torch.bool)
    mask[ids] = True
    return mask


def fit_semantic_ids(
    embeddings: torch.Tensor, K: int, *, seed: int = 0,
    special_ids=(), levels: int = 1, iters: int = KMEANS_ITERS,
) -> SemanticIDs:
    """k-means over the L2-normalised rows of ``embeddings`` (V, D), specials excluded.

    ``levels > 1``: residual k-means, level h clustering what levels < h left.
    """
    if embeddings.dim() != 2:
        raise ValueError(f"embeddings must be (V, D), got {tuple(embeddings.shape)}")
    V = embeddings.shape[0]
    if not (isinstance(levels, int) and levels >= 1):
        raise ValueError(f"levels must be an int >= 1, got {levels!r}")
    special = special_mask(V, special_ids)
    regular = (~special).nonzero().flatten()  # (n,)
    if not (isinstance(K, int) and 2 <= K <= len(regular)):
        raise ValueError(
            f"K must be an int in [2, {len(regular)}] (non-special tokens), got {K!r}"
        )
    generator = torch.Generator().manual_seed(seed)
    resid = l2_normalize(embeddings)[regular]  # (n, D)
    level_codes = []
    for _ in range(levels):
        labels, centroids = kmeans(resid, K, generator, iters)
        level_codes.append(labels)
        resid = resid - centroids[labels]
    reg_codes = torch.stack(level_codes, dim=1)  # (n, H)
    _, dense = torch.unique(reg_codes, dim=0, return_inverse=True)  # (n,)
    n_clusters = int(dense.max()) + 1
    codes = torch.full((V, levels), -1, dtype=torch.long)
    codes[regular] = reg_codes
    flat = torch.full((V,), n_clusters, dtype=torch.long)
    flat[regular] = dense
    return SemanticIDs(codes=codes, flat=flat, special=special, n_clusters=n_clusters,
                       K=K, seed=seed)


def semantic_ids_for(
    denoiser, K: int, *, seed: int = 0, tokenizer=None, levels: int = 1,
) -> SemanticIDs:
    """Semantic IDs from a denoiser's INPUT embedding matrix (V, D).

    Specials: the tokenizer's ``all_special_ids`` (if given) plus the mask id.
    """
    weight = denoiser.model.get_input_embeddings().weight  # (V, D)
    special = {int(denoiser.mask_id)}
    if tokenizer is not None:
        V = weight.shape[0]
        special |= {int(i) for i in tokenizer.all_special_ids if int(i) < V}
    return fit_semantic_ids(weight, K, seed=seed, special_ids=special, levels=levels)


# --- the random control --------------------------------------------------------


def random_clusterings(
    sid: SemanticIDs, R: int, generator: torch.Generator
) -> torch.Tensor:
    """R size-matched random clusterings ``flat o pi_r``: (R, V) long.

    Each pi_r is a uniform random permutation of the non-special tokens (one
    ``argsort`` of uniforms per row); special tokens keep the special bucket.
    """
    regular = (~sid.special).nonzero().flatten()  # (n,)
    perm = torch.rand(R, len(regular), generator=generator).argsort(dim=1)  # (R, n)
    out = sid.flat.expand(R, -1).clone()  # (R, V)
    out[:, regular] = sid.flat[regular][perm]
    return out


# --- marginals and chance ------------------------------------------------------


def cluster_marginal(probs: torch.Tensor, sid: SemanticIDs) -> torch.Tensor:
    """Sum a token distribution within clusters: (..., V) -> (..., n_clusters).

    The special bucket is dropped (the result may sum to less than 1).
    """
    if probs.shape[-1] != sid.vocab_size:
        raise ValueError(
            f"distribution over {probs.shape[-1]} tokens, but the semantic IDs cover "
            f"{sid.vocab_size}: draft, target and IDs must share one vocabulary"
        )
    shape = (*probs.shape[:-1], sid.n_clusters + 1)
    out = torch.zeros(shape, dtype=probs.dtype, device=probs.device)
    out.index_add_(-1, sid.flat.to(probs.device), probs)
    return out[..., :-1]


def best_token_in_cluster(
    logits: torch.Tensor, clusters: torch.Tensor, sid: SemanticIDs
) -> torch.Tensor:
    """The highest-logit token inside a given cluster: (..., V), (...) -> (...) long."""
    inside = sid.flat.to(logits.device) == clusters[..., None]  # (..., V)
    return logits.masked_fill(~inside, float("-inf")).argmax(dim=-1)


def uniform_chance(sid: SemanticIDs) -> float:
    """P(a uniform guess over clusters hits) = 1 / n_clusters."""
    return 1.0 / sid.n_clusters


def cluster_frequencies(ids, n_clusters: int) -> np.ndarray:
    """Empirical P(s) of a sample of cluster ids (special-bucket ids are refused)."""
    ids = np.asarray(ids, dtype=np.int64).ravel()
    if ids.size == 0:
        raise ValueError("no cluster ids given: there is nothing to measure chance on")
    if ids.min() < 0 or ids.max() >= n_clusters:
        raise ValueError(
            f"cluster ids must lie in [0, {n_clusters}); drop special tokens first"
        )
    return np.bincount(ids, minlength=n_clusters) / ids.size


def frequency_chance(ids, n_clusters: int) -> float:
    """sum_s P(s)^2: P(an independent guess drawn from P hits a draw from P)."""
    p = cluster_frequencies(ids, n_clusters)
    return float((p * p).sum())


def majority_chance(ids, n_clusters: int) -> float:
    """max_s P(s): the hit rate of always guessing the most frequent cluster."""
    return float(cluster_frequencies(ids, n_clusters).max())


# --- the permutation test -------------------------------------------------------


@dataclass(frozen=True)
class PermutationResult:
    alpha: float  # acceptance under the semantic clustering
    null: np.ndarray  # (R,) acceptance under each random clustering
    p_random_more: float  # (1 + #{null <= alpha}) / (R + 1)

    @property
    def null_mean(self) -> float:
        return float(self.null.mean())


def one_sided_p(null, observed: float) -> float:
    """(1 + #{null <= observed}) / (R + 1): small when the null mostly exceeds it."""
    null = np.asarray(null, float)
    return float((1 + np.sum(null <= observed)) / (len(null) + 1))


def _pairs(draft_tokens, target_tokens, sid: SemanticIDs, R):
    """Flattened (N,) draft and target ids, checked, and their acceptance under sid."""
    d, t = draft_tokens.reshape(-1).long(), target_tokens.reshape(-1).long()
    if d.shape != t.shape or d.numel() == 0:
        raise ValueError(
            "draft_tokens and target_tokens must hold the same non-zero number of ids"
        )
    if not (isinstance(R, int) and R >= 1):
        raise ValueError(f"R must be an int >= 1, got {R!r}")
    return d, t, float((sid.flat[d] == sid.flat[t]).double().mean())


def permutation_test(
    draft_tokens: torch.Tensor, target_tokens: torch.Tensor, sid: SemanticIDs,
    R: int, generator: torch.Generator, chunk: int = PERMUTATION_CHUNK,
) -> PermutationResult:
    """Cluster acceptance under ``sid`` vs R size-matched random clusterings.

    draft_tokens, target_tokens: (N,) token pairs (e.g. every anchor of every
    sequence). alpha = mean 1{sigma(draft) == sigma(target)}; each random
    clustering is one gather and one compare over the fixed pairs.
    """
    d, t, alpha = _pairs(draft_tokens, target_tokens, sid, R)
    null = []
    for start in range(0, R, chunk):
        codes = random_clusterings(sid, min(chunk, R - start), generator)  # (r, V)
        null.append((codes[:, d] == codes[:, t]).double().mean(dim=1))  # (r,)
    null = torch.cat(null).numpy()
    return PermutationResult(alpha, null, one_sided_p(null, alpha))


# --- the permutation test over the tokens that matter (added for C4) ---------------


def random_labels(
    sid: SemanticIDs, tokens: torch.Tensor, R: int, generator: torch.Generator,
    chunk: int = 2000,
) -> torch.Tensor:
    """Labels of ``tokens`` (m,) distinct ids under R random clusterings: (R, m) long.

    The same distribution as ``random_clusterings(sid, R, g)[:, tokens]`` (a
    uniform permutation pi of the non-special tokens; specials keep the special
    bucket), but only the m tokens that occur are drawn: the regular ones take
    the labels of m distinct uniformly random regular tokens (a partial
    Fisher-Yates shuffle, m swaps per clustering), so each clustering costs
    O(m) instead of a sort of the vocabulary.
    """
    tokens = tokens.reshape(-1).long()
    if tokens.unique().numel() != tokens.numel():
        raise ValueError("tokens must be distinct ids (use torch.unique first)")
    regular = (~sid.special).nonzero().flatten()  # (n,)
    n = len(regular)
    reg_labels = sid.flat[regular]  # (n,)
    is_reg = ~sid.special[tokens]  # (m,)
    m_reg = int(is_reg.sum())
    out = sid.flat[tokens].expand(R, -1).clone()  # (R, m), specials already right
    cols = is_reg.nonzero().flatten()
    for start in range(0, R, chunk):
        r = min(chunk, R - start)
        slots = torch.arange(n).expand(r, -1).clone()  # (r, n) partial shuffle
        rows = torch.arange(r)
        for j in range(m_reg):
            k = j + (torch.rand(r, generator=generator, dtype=torch.float64)
                     * (n - j)).long().clamp(max=n - j - 1)  # uniform in [j, n)
            a, b = slots[rows, j].clone(), slots[rows, k].clone()
            slots[rows, j], slots[rows, k] = b, a
        out[start:start + r, cols] = reg_labels[slots[:, :m_reg]]
    return out


def permutation_test_fast(
    draft_tokens: torch.Tensor, target_tokens: torch.Tensor, sid: SemanticIDs,
    R: int, generator: torch.Generator,
) -> PermutationResult:
    """``permutation_test`` drawing only the labels of the tokens that occur.

    The (draft, target) pairs are reduced once to indices into their m distinct
    tokens; each random clustering is then one gather (``random_labels``) and
    one compare. Same null distribution as ``permutation_test`` (a different
    random stream); the same one-sided p.
    """
    d, t, alpha = _pairs(draft_tokens, target_tokens, sid, R)
    uniq, inv = torch.unique(torch.cat([d, t]), return_inverse=True)
    di, ti = inv[: len(d)], inv[len(d):]
    labels = random_labels(sid, uniq, R, generator)  # (R, m)
    null = (labels[:, di] == labels[:, ti]).double().mean(dim=1).numpy()
    return PermutationResult(alpha, null, one_sided_p(null, alpha))


def same_cluster_chance(sid: SemanticIDs) -> float:
    """P(two distinct random regular tokens share a cluster) under ``sigma o pi``.

    sum_s n_s (n_s - 1) / (n (n - 1)), n_s the cluster sizes: the probability
    that a random clustering of the same sizes merges any given pair.
    """
    sizes = sid.sizes().double()
    n = float(sizes.sum())
    if n < 2:
        raise ValueError("need at least two non-special tokens")
    return float((sizes * (sizes - 1)).sum() / (n * (n - 1)))


def expected_random_alpha(
    draft_tokens: torch.Tensor, target_tokens: torch.Tensor, sid: SemanticIDs
) -> float:
    """E[alpha_clu] over size-matched random clusterings, in closed form.

    A pair with equal tokens always agrees; a pair of two distinct regular
    tokens agrees with ``same_cluster_chance``; a special with a regular token
    never; two specials always (they share the special bucket).
    """
    return float(_expected_random_hits(draft_tokens, target_tokens, sid).mean())


def _expected_random_hits(
    draft_tokens: torch.Tensor, target_tokens: torch.Tensor, sid: SemanticIDs
) -> torch.Tensor:
    """Per pair, P(a size-matched random clustering accepts it); same shape, float64."""
    d, t = draft_tokens.long(), target_tokens.long()
    special = sid.special.to(d.device)
    sd, st = special[d], special[t]
    same = (d == t) | (sd & st)
    both_reg = ~sd & ~st & (d != t)
    return same.double() + same_cluster_chance(sid) * both_reg.double()


def random_minus_semantic(
    draft_tokens: torch.Tensor, target_tokens: torch.Tensor, where: torch.Tensor,
    sid: SemanticIDs, n_boot: int = 2000, seed: int = 0,
) -> tuple[float, float, float]:
    """Mean random-clustering alpha_clu minus the semantic one, with a 95 % CI.

    ``draft_tokens``, ``target_tokens`` and ``where`` (the anchors) are
    (B, G). Per sequence, the numerator sums, over its anchors, the closed-form
    chance that a size-matched random clustering accepts the pair
    (``expected_random_alpha``'s terms) minus the semantic hit; the
    denominator counts the anchors. The interval is the percentile bootstrap
    over sequences (``stats.ratio_bootstrap``). Returns (estimate, low, high).
    """
    from ..measures.stats import ratio_bootstrap

    if not draft_tokens.shape == target_tokens.shape == where.shape:
        raise ValueError("draft, target and where must have one shape (B, G)")
    where = where.bool().to(draft_tokens.device)
    target_tokens = target_tokens.to(draft_tokens.device)
    random_hits = _expected_random_hits(draft_tokens, target_tokens, sid)
    semantic_hits = (sid(draft_tokens) == sid(target_tokens)).double()
    diff = ((random_hits - semantic_hits.to(random_hits.device)) * where).sum(-1)
    return ratio_bootstrap(diff.cpu().numpy(), where.sum(-1).cpu().numpy(),
                           n_boot, seed)


def pair_merge_table(
    draft_tokens: torch.Tensor, target_tokens: torch.Tensor, sid: SemanticIDs,
    tokenizer=None, top: int = 10,
):
    """The most frequent confusions (draft token != target token), counted.

    One row per distinct (draft, target) pair with ``count``, ``share`` of all
    confusions, and ``same_semantic`` (1 if sigma merges the pair); the
    random-clustering probability of merging a regular pair is
    ``same_cluster_chance``. Returns (table of the ``top`` pairs, share of ALL
    confusions that sigma merges).
    """
    import pandas as pd

    d, t = draft_tokens.reshape(-1).long(), target_tokens.reshape(-1).long()
    wrong = d != t
    if not bool(wrong.any()):
        raise ValueError("no confusions: every draft token equals its target token")
    pairs, counts = torch.unique(torch.stack([d[wrong], t[wrong]], 1), dim=0,
                                 return_counts=True)
    merged = (sid.flat[pairs[:, 0]] == sid.flat[pairs[:, 1]]).long()
    share_merged = float((merged * counts).sum() / counts.sum())
    order = counts.argsort(descending=True, stable=True)[:top]
    name = (lambda i: tokenizer.convert_ids_to_tokens(int(i))) if tokenizer else int
    table = pd.DataFrame({
        "draft token": [name(pairs[i, 0]) for i in order],
        "target token": [name(pairs[i, 1]) for i in order],
        "count": counts[order].numpy(),
        "share of confusions": (counts[order] / counts.sum()).numpy(),
        "same semantic cluster": merged[order].numpy(),
    })
    return table, share_merged
