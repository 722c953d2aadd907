"""SSLD, speculative semantic latent denoising: the paper's method, and its failure.

One concept per module: ``semantic`` (semantic IDs, k-means, the random
control), ``inputs`` (what SSLD sees: the visible input, the content anchors),
``drafting`` (the drafts and the SID head's training, their cost),
``decoder`` (one verify pass, then infill), ``codebooks`` (seeded codebooks
and alpha_SID pooled over them), ``chance_levels``, ``win_condition`` (the
bars alpha* and the Model A / B formulas), ``accelerators`` (the token-space
decoders SSLD must beat, and wall-clock timing), ``information`` (C8: what the
draft lacks at the anchors) and ``conditional`` (C6: the C1-C3 key figures for
one prompt set).
"""
