"""Measurements, each usable on any decode or model of the package.

``order`` (which tokens a decode commits early, C1), ``entropy`` (entropies of
token distributions and the bounds C8 uses), ``determinedness`` (leave-one-out
determinedness, C7), ``judge`` (an independent causal LM), ``tagger``
(content / function / punctuation classes), ``stats`` (bootstraps over
sequences, rank AUCs, clustered regressions), ``quality`` (text quality and
speed inside a quality bound, C5) and ``bench`` (a decode's forwards against
its whole loop).
"""
