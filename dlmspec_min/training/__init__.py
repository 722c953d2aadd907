"""The embedded models' making: the Brown corpus, the WordPiece tokenizer, training.

``corpus`` (fetching and reading Brown, the train / held-out split),
``tokenizer`` (the shared WordPiece vocabulary and word helpers), ``train``
(``python -m dlmspec_min.training.train``: the embedded models) and ``npm``
(the one way files are fetched from the npm registry).
"""
