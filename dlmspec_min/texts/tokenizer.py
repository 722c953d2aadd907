"""An 8k WordPiece tokenizer trained on Brown's training documents.

Brown is already split into words (punctuation stands alone), so the
pre-tokenizer splits on whitespace only: every Brown word is one "word" of the
tokenizer, and a generated token maps back to its word through the ``##``
continuation marker. That is what lets the tagger label subword pieces with
their word's tag (SPEC.md section 3).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from ..paths import models_dir

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
    return _as_transformers(tok)


def _as_transformers(tok):
    """A ``tokenizers.Tokenizer`` as transformers' fast tokenizer, with our specials."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        bos_token="[BOS]",
        eos_token="[EOS]",
        mask_token="[MASK]",
    )


# transformers 5 saves its generic fast tokenizer as TokenizersBackend, a name 4.x
# does not know; PreTrainedTokenizerFast loads the same tokenizer.json under both.
V5_GENERIC_CLASS = "TokenizersBackend"
PORTABLE_TOKENIZER_CLASS = "PreTrainedTokenizerFast"
LOAD_ONLY_KEYS = ("is_local", "local_files_only")  # how it was loaded, not what it is


def make_tokenizer_config_portable(path) -> bool:
    """Rewrite ``path/tokenizer_config.json`` so that transformers 4 and 5 both
    load it (v5's generic class renamed, load-time keys dropped); True if changed."""
    config_file = Path(path) / "tokenizer_config.json"
    if not config_file.exists():
        return False
    config = json.loads(config_file.read_text())
    before = dict(config)
    if config.get("tokenizer_class") == V5_GENERIC_CLASS:
        config["tokenizer_class"] = PORTABLE_TOKENIZER_CLASS
    for key in LOAD_ONLY_KEYS:
        config.pop(key, None)
    if config == before:
        return False
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return True


def save_tokenizer(tokenizer, path) -> Path:
    """``save_pretrained``, then ``make_tokenizer_config_portable``."""
    tokenizer.save_pretrained(path)
    make_tokenizer_config_portable(path)
    return Path(path)


def load_tokenizer(path: Path | None = None):
    from transformers import AutoTokenizer

    path = Path(path or tokenizer_dir())
    if not (path / "tokenizer.json").exists():
        raise FileNotFoundError(
            f"no tokenizer in {path}; it is committed with the models "
            "(re-create it with `python -m dlmspec_min.training.train --tokenizer`)"
        )
    return AutoTokenizer.from_pretrained(path)


WORD_START_MARKS = ("\u0120", "\u2581")  # byte-level BPE's "Ġ", SentencePiece's "▁"


@functools.lru_cache(maxsize=16)
def word_convention(tokenizer) -> str:
    """How a tokenizer marks word boundaries: "wordpiece" (``##`` continues a
    word: ours, BERT) or "word_start" (a piece starting with "Ġ" or "▁" begins a
    word: GPT-2/LLaMA/Qwen-style byte-level BPE and SentencePiece, e.g. the
    paper-scale LLaDA and Dream tokenizers)."""
    vocab = tokenizer.get_vocab()
    starts = sum(1 for piece in vocab if piece.startswith(WORD_START_MARKS))
    continues = sum(1 for piece in vocab if piece.startswith("##"))
    return "word_start" if starts > continues else "wordpiece"


@functools.lru_cache(maxsize=16)
def _added_pieces(tokenizer) -> frozenset[str]:
    """Tokens added whole to a tokenizer (never a word's continuation)."""
    return frozenset(tokenizer.get_added_vocab())


def _is_punct(text: str) -> bool:
    return bool(text) and not any(ch.isalnum() for ch in text)


def _pieces(tokenizer, ids):
    """(token id, piece text, starts a new word) for each id; specials: piece None."""
    special = set(tokenizer.all_special_ids)
    wordpiece = word_convention(tokenizer) == "wordpiece"
    prev_punct, bare_mark = True, False
    for tid in ids:
        tid = int(tid)
        if tid in special:
            prev_punct, bare_mark = True, False
            yield tid, None, True
            continue
        piece = tokenizer.convert_ids_to_tokens(tid)
        if wordpiece and piece in _added_pieces(tokenizer):  # e.g. "####": a word
            text, new = piece, True
        elif wordpiece:
            text, new = piece.removeprefix("##"), not piece.startswith("##")
        else:  # punctuation stands alone, as in Brown
            marked = piece.startswith(WORD_START_MARKS)
            text = piece[1:] if marked else piece
            # a bare mark ("▁" alone) starts a word that the next piece spells
            new = not bare_mark and (marked or prev_punct or _is_punct(text))
            bare_mark = marked and not text
        prev_punct = _is_punct(text)
        yield tid, text, new


def word_ids(tokenizer, ids) -> list[int]:
    """For each token id, the index of its word; special tokens get -1.

    With WordPiece, ``##`` pieces continue a word; with word-start markers
    ("Ġ", "▁"), unmarked pieces continue one, and punctuation stands alone.
    """
    out, w = [], -1
    for _, text, new in _pieces(tokenizer, ids):
        if text is None:
            out.append(-1)
            continue
        if new or w < 0:
            w += 1
        out.append(w)
    return out


def words_of(tokenizer, ids) -> list[str]:
    """The words a token sequence spells (special tokens dropped), as ``word_ids``
    groups them."""
    words: list[str] = []
    for _, text, new in _pieces(tokenizer, ids):
        if text is None:
            continue
        if new or not words:
            words.append(text)
        else:
            words[-1] += text
    return words


def continues_word(tokenizer, ids) -> list[bool]:
    """For each token id, True if it continues the word of the token before it
    (a ``##`` piece, an unmarked BPE piece); word starts and specials: False."""
    return [text is not None and not new for _, text, new in _pieces(tokenizer, ids)]


# --- the math world's tokenizer ------------------------------------------------------
DIGITS = tuple("0123456789")
MATH_SPLIT_PUNCT = r"[.,?]"  # split off like words; "####" and operators stand alone
ANSWER_MARK = "####"  # GSM8K's answer line; one added token (it starts with "##")
ANSWER_STAND_IN = "\u2063ANSWER"  # what the decoder sees instead of "####"


def _math_pre_tokenizer():
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as pre

    return pre.Sequence([pre.WhitespaceSplit(),
                         pre.Split(Regex(MATH_SPLIT_PUNCT), "isolated")])


def _math_tokenizer(pieces: list[str]):
    """The math world's tokenizer over a WordPiece vocabulary ``pieces`` (the
    special tokens first), with ``####`` added whole."""
    from tokenizers import Tokenizer, decoders, models, normalizers

    if list(pieces[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
        raise ValueError(f"the vocabulary must start with {SPECIAL_TOKENS}")
    if len(set(pieces)) != len(pieces):
        raise ValueError("the vocabulary repeats a piece")
    vocab = {p: i for i, p in enumerate(pieces)}
    out = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    out.normalizer = normalizers.NFC()
    out.pre_tokenizer = _math_pre_tokenizer()
    # "####" would read as a "##" continuation: hidden from the WordPiece decoder
    out.decoder = decoders.Sequence([
        decoders.Replace(ANSWER_MARK, ANSWER_STAND_IN),
        decoders.WordPiece(prefix="##", cleanup=True),
        decoders.Replace(ANSWER_STAND_IN, "\n" + ANSWER_MARK),
    ])
    out.add_tokens([ANSWER_MARK])
    out.add_special_tokens(SPECIAL_TOKENS)
    for i, name in enumerate(SPECIAL_TOKENS):
        if out.token_to_id(name) != i:
            raise RuntimeError(f"special token {name} got id {out.token_to_id(name)}")
    return _as_transformers(out)


LETTERS = tuple("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def build_math_tokenizer(texts, lexicon=()):
    """The math world's tokenizer, deterministically: a vocabulary from word counts.

    Every word of ``texts`` (split as the tokenizer splits: whitespace, then
    ``. , ?`` apart; ``####`` and words holding a digit left out) is one piece,
    in the order of its count, most frequent first, ties by spelling; then the
    words of ``lexicon`` no text used, by spelling; then single letters and
    their ``##`` continuations (any other word is spelled letter by letter, never
    ``[UNK]``), and the digits: every number is its first digit and one
    ``##d`` piece per further digit (as LLaMA-family tokenizers split numbers
    into digits). The same texts give the same ids on every machine and run,
    unlike a WordPiece trainer, whose ties vary (the first math world's
    tokenizer, kept with its models, was one; data/README.md).
    """
    import re
    from collections import Counter

    counts = Counter()
    for text in texts:
        for word in re.sub(MATH_SPLIT_PUNCT, lambda m: f" {m.group()} ",
                           text).split():
            if word != ANSWER_MARK and not any(ch.isdigit() for ch in word):
                counts[word] += 1
    words = sorted(counts, key=lambda w: (-counts[w], w))
    words += sorted(set(lexicon) - set(counts) - {ANSWER_MARK})
    chars = [c for c in LETTERS if c not in words]
    pieces = [*SPECIAL_TOKENS, *words, *chars, *(f"##{c}" for c in LETTERS),
              *DIGITS, *(f"##{d}" for d in DIGITS)]
    return _math_tokenizer(pieces)
