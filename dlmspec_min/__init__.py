"""dlmspec_min: a minimal decoding package for masked diffusion language models.

Companion code for "Speculating the Bottleneck: Why Semantic Latent Speculative
Decoding Fails for Diffusion Language Models". Importing it registers the
embedded LLaDA-style model with the transformers Auto classes.
"""

from .decoding import modeling  # noqa: F401  (registers the "dlmspec" model type)

__version__ = "0.1.0"
