"""Measurements: decode order, entropies, determinedness, the judge, word classes,
statistics, quality.
"""
