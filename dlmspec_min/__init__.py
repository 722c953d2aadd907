"""dlmspec_min: a minimal decoding package for masked diffusion language models.

Companion code for "Speculating the Bottleneck: Why Semantic Latent Speculative
Decoding Fails for Diffusion Language Models". The embedded LLaDA-style model
type is registered with the transformers Auto classes when ``decoding.modeling``
is imported, which ``decoding.denoisers.load_denoiser`` and the trainers do; the
package itself imports nothing heavy, so that a command refusing its arguments
(``plumbing.run``, ``make paper``) answers before torch and transformers load.
"""

__version__ = "0.1.0"
