"""An 8k WordPiece tokenizer trained on Brown's training documents.

Brown is already split into words (punctuation stands alone), so the
pre-tokenizer splits on whitespace only: every Brown word is one "word" of the
tokenizer, and a generated token maps back to its word through the ``##``
continuation marker. That is what lets the tagger label subword pieces with
their word's tag (SPEC.md section 3).
"""

from __future__ import annotations

from pathlib import Path

from .paths import models_dir

VOCAB_SIZE = 8192
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[BOS]", "[EOS]", "[MASK]"]  # ids 0..4
PAD_ID, UNK_ID, BOS_ID, EOS_ID, MASK_ID = range(5)


def tokenizer_dir() -> Path:
    return models_dir() / "tokenizer"


def train_tokenizer(sentences, vocab_size: int = VOCAB_SIZE):
    """Train WordPiece on an iterable of sentences given as word lists."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, min_frequency=2
    )
    tok.train_from_iterator((" ".join(words) for words in sentences), trainer=trainer)
    for i, name in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(name) != i:
            raise RuntimeError(
                f"special token {name} got id {tok.token_to_id(name)}, not {i}"
            )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        bos_token="[BOS]",
        eos_token="[EOS]",
        mask_token="[MASK]",
    )


def load_tokenizer(path: Path | None = None):
    from transformers import AutoTokenizer

    path = Path(path or tokenizer_dir())
    if not (path / "tokenizer.json").exists():
        raise FileNotFoundError(
            f"no tokenizer in {path}; it is committed with the models "
            "(re-create it with `python -m dlmspec_min.train --tokenizer`)"
        )
    return AutoTokenizer.from_pretrained(path)


def word_ids(tokenizer, ids) -> list[int]:
    """For each token id, the index of its word (``##`` pieces continue a word).

    Special tokens get -1.
    """
    special = set(tokenizer.all_special_ids)
    out, w = [], -1
    for tid in ids:
        tid = int(tid)
        if tid in special:
            out.append(-1)
            continue
        piece = tokenizer.convert_ids_to_tokens(tid)
        if not piece.startswith("##") or w < 0:
            w += 1
        out.append(w)
    return out


def words_of(tokenizer, ids) -> list[str]:
    """The words a token sequence spells (special tokens dropped)."""
    words: list[str] = []
    special = set(tokenizer.all_special_ids)
    for tid in ids:
        tid = int(tid)
        if tid in special:
            continue
        piece = tokenizer.convert_ids_to_tokens(tid)
        if piece.startswith("##") and words:
            words[-1] += piece[2:]
        else:
            words.append(piece.removeprefix("##"))
    return words
