"""The embedded models' making: tokenizers and training, on the texts of ``texts``.

``tokenizer`` (the shared WordPiece vocabulary and word helpers; the math
world's tokenizer), ``train`` (``python -m dlmspec_min.training.train``: the
prose models), ``train_math`` (the math ladder), ``math_skills`` (what a math
decode copied and computed) and ``math_pilot`` (the pilot that chose the math
world the ladder is retrained on).
"""
