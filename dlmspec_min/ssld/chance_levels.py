"""The chance levels alpha_SID is read against, averaged over codebooks.

A uniform guess of the ID (1/K), a guess drawn from the anchors' own ID
frequencies (sum_s P(s)^2) and always guessing the most frequent ID
(max_s P(s)); each from ``semantic``'s definitions, per codebook, then
averaged (``mean_chance_levels``).
"""

from __future__ import annotations

import numpy as np
import torch

from .codebooks import Codebook
from .semantic import frequency_chance, majority_chance, uniform_chance

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
