"""Content/function tagger: the Brown tag map, the lexicon and token classes."""

from __future__ import annotations

import json

import pytest

from dlmspec_min.measures import tagger
from dlmspec_min.measures.tagger import (
    CONTENT,
    FUNCTION,
    PUNCT,
    SPECIAL,
    Lexicon,
    classes_of_tokens,
    coarse_class,
)
from dlmspec_min.texts.corpus import (
    CorpusError,
    brown_dir,
    read_document,
    read_genres,
)

MIN_AGREEMENT = 0.95  # the bar for held-out agreement


def _corpus_root():
    try:
        read_genres()
    except CorpusError as err:
        pytest.skip(f"Brown corpus not fetched ({err})")
    return brown_dir()


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("nn", CONTENT),
        ("nns$", CONTENT),
        ("nn-tl", CONTENT),
        ("nn-tl-hl", CONTENT),
        ("np$", CONTENT),
        ("nr", CONTENT),
        ("vbd", CONTENT),
        ("vb+ppo", CONTENT),  # "gimme": first part
        ("jjt", CONTENT),
        ("rbr", CONTENT),
        ("rn", CONTENT),
        ("cd-tl", CONTENT),
        ("od", CONTENT),
        ("uh", CONTENT),
        ("fw-nn", CONTENT),
        ("fw-in+at-tl", CONTENT),
        ("fw-*", CONTENT),  # a foreign word is content whatever follows
        ("at", FUNCTION),
        ("in-tl", FUNCTION),
        ("pps+bez", FUNCTION),  # "it's"
        ("ppss+ber-n", FUNCTION),  # truncated compound in Brown
        ("pp$$", FUNCTION),
        ("wp$", FUNCTION),
        ("bedz*", FUNCTION),  # "wasn't"
        ("md*-hl", FUNCTION),
        ("*", FUNCTION),  # "not"
        ("*-hl", FUNCTION),
        ("hvd", FUNCTION),
        ("doz*", FUNCTION),
        ("to", FUNCTION),
        ("ql", FUNCTION),
        ("wrb", FUNCTION),
        ("nil", FUNCTION),
        ("pn", FUNCTION),
        (".", PUNCT),
        (".-hl", PUNCT),
        ("---hl", PUNCT),
        ("--", PUNCT),
        ("''", PUNCT),
        ("``", PUNCT),
        ("'", PUNCT),
        ("(", PUNCT),
        (":-tl", PUNCT),
        ("NN-TL", CONTENT),
    ],
)
def test_coarse_class(tag, expected):
    assert coarse_class(tag) == expected


@pytest.mark.parametrize("tag", ["xyz", "fw-xyz", "", "nn-zz", "+", "$"])
def test_unknown_tag_raises_naming_it(tag):
    with pytest.raises(ValueError, match="unknown Brown tag") as info:
        coarse_class(tag)
    assert repr(tag) in str(info.value)


def test_every_brown_tag_maps():
    root = _corpus_root()
    tags = {
        tag
        for doc in read_genres(root)
        for sentence in read_document(root / doc)
        for _, tag in sentence
    }
    assert len(tags) > 400  # Brown has 472 distinct tag strings
    classes = {tag: coarse_class(tag) for tag in tags}  # raises on an unknown tag
    assert set(classes.values()) == {CONTENT, FUNCTION, PUNCT}


@pytest.fixture(scope="module")
def held_out():
    _corpus_root()
    from dlmspec_min.texts.corpus import brown_dataset

    return brown_dataset("test")


def test_lexicon_agreement_on_held_out(held_out):
    lexicon = tagger.default_lexicon()
    assert lexicon.meta["split"] == "train"  # fitted on the other documents
    result = tagger.agreement(lexicon, held_out)
    assert result["n_words"] > 100_000
    assert result["overall"] >= MIN_AGREEMENT
    assert result["binary"] >= MIN_AGREEMENT
    confusion = result["confusion"]
    assert int(confusion.to_numpy().sum()) == result["n_words"]
    assert (
        int(confusion.loc[[CONTENT, FUNCTION]].to_numpy().sum()) == (result["n_binary"])
    )


def _toy_lexicon():
    classes = {"The": FUNCTION, "cat": CONTENT, ".": PUNCT, "dog": CONTENT}
    classes["cats"] = FUNCTION  # artificial: pieces must follow the WORD's class
    return Lexicon(exact=classes, lower={w.lower(): c for w, c in classes.items()})


def test_lexicon_lookup_order_and_unseen_rule():
    lexicon = Lexicon(exact={"US": CONTENT}, lower={"us": FUNCTION, "the": FUNCTION})
    assert lexicon.classify("US") == CONTENT  # exact form first
    assert lexicon.classify("Us") == FUNCTION  # then lower-cased
    assert lexicon.classify("THE") == FUNCTION
    assert lexicon.classify("zyzzyva") == CONTENT  # unseen word
    assert lexicon.classify("1984") == CONTENT  # unseen number
    assert lexicon.classify("?!") == PUNCT  # unseen punctuation
    assert lexicon.classify("$") == PUNCT  # symbols count as punct
    assert lexicon(["US", "?!"]) == [CONTENT, PUNCT]


def test_fit_takes_majority_with_fixed_tie_break():
    data = {
        "words": [["that", "that", "that", "Run", "run"]],
        "tags": [["cs", "dt", "dt", "vb", "nn"]],
    }
    lexicon = Lexicon.fit(data)
    assert lexicon.classify("that") == FUNCTION
    assert lexicon.exact["Run"] == CONTENT
    data = {"words": [["so", "so"]], "tags": [["rb", "cs"]]}  # tie: content first
    assert Lexicon.fit(data).classify("so") == CONTENT


def test_save_load_round_trip(tmp_path):
    lexicon = _toy_lexicon()
    lexicon.meta = {"split": "toy"}
    path = lexicon.save(tmp_path / "sub" / "lexicon.json")
    loaded = Lexicon.load(path)
    assert loaded == lexicon and loaded.meta == {"split": "toy"}
    assert [p.name for p in path.parent.iterdir()] == ["lexicon.json"]  # no temp left
    path.write_text(json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="delete it"):
        Lexicon.load(path)


def test_unknown_class_rejected():
    with pytest.raises(ValueError, match="unknown classes"):
        Lexicon(exact={"x": "noun"}, lower={})


@pytest.fixture(scope="module")
def small_tokenizer():
    from dlmspec_min.texts.tokenizer import train_tokenizer

    sentences = [["The", "dog", "is", "running", "."], ["The", "cat", "sat", "."]] * 5
    return train_tokenizer(sentences, vocab_size=60)


def test_subword_pieces_inherit_their_word_class(small_tokenizer):
    from dlmspec_min.texts.tokenizer import BOS_ID, EOS_ID, MASK_ID, PAD_ID

    tok = small_tokenizer
    text_ids = tok("The cats dog .", add_special_tokens=False)["input_ids"]
    pieces = tok.convert_ids_to_tokens(text_ids)
    assert pieces[:3] == ["The", "cat", "##s"], pieces  # "cats" is split
    ids = [BOS_ID, *text_ids, MASK_ID, EOS_ID, PAD_ID]
    classes = classes_of_tokens(tok, ids, _toy_lexicon())
    assert (
        classes
        == [SPECIAL, FUNCTION, FUNCTION, FUNCTION, CONTENT, PUNCT] + [SPECIAL] * 3
    )
    # the piece "cat" alone would be content; inside "cats" it is the word's class
    assert classes_of_tokens(tok, text_ids[1:2], _toy_lexicon()) == [CONTENT]


def _bpe_tokenizer(kind: str):
    """A tiny byte-level BPE ("Ġ", GPT-2/LLaMA-3 style) or Metaspace ("▁",
    SentencePiece style) tokenizer, trained here on a few sentences."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    if kind == "bytelevel":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        alphabet = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,;")
    text = ["The dog barked at the old man, and the man ran home.",
            "A dog and a man walked home; the dog barked again."] * 20
    tok.train_from_iterator(text, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<s>"], initial_alphabet=alphabet))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>",
                                   bos_token="<s>")


@pytest.mark.parametrize("kind, text", [
    ("bytelevel", "The dogs barked, then walked home."),
    # Metaspace does not split punctuation off: BPE may merge "home." into one piece
    ("metaspace", "The dogs barked , then walked home ."),
])
def test_words_of_byte_level_and_sentencepiece_tokenizers(kind, text):
    from dlmspec_min.texts.tokenizer import (
        continues_word,
        word_convention,
        word_ids,
        words_of,
    )

    tok = _bpe_tokenizer(kind)
    assert word_convention(tok) == "word_start"
    ids = [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) > 8  # "dogs", "then", "walked" are split into pieces
    assert words_of(tok, ids) == ["The", "dogs", "barked", ",", "then", "walked",
                                  "home", "."]
    w = word_ids(tok, ids)
    assert w[0] == -1 and w[1:] == sorted(w[1:]) and max(w) == 7
    # a piece continues a word exactly where its word index repeats
    cont = continues_word(tok, ids)
    assert cont == [i > 0 and w[i] >= 0 and w[i] == w[i - 1] for i in range(len(ids))]
    assert any(cont) and not cont[0] and not cont[1]
    classes = tagger.classes_of_tokens(tok, ids, tagger.default_lexicon())
    by_word = dict(zip(w, classes, strict=True))
    assert [by_word[i] for i in range(8)] == [
        "function", "content", "content", "punct", "content", "content", "content",
        "punct"]


def test_our_tokenizer_keeps_the_wordpiece_convention():
    from dlmspec_min.texts.tokenizer import (
        continues_word,
        load_tokenizer,
        word_convention,
        words_of,
    )

    tok = load_tokenizer()
    assert word_convention(tok) == "wordpiece"
    ids = tok("the unbelievably quick dog", add_special_tokens=False)["input_ids"]
    assert words_of(tok, ids) == ["the", "unbelievably", "quick", "dog"]
    pieces = tok.convert_ids_to_tokens(ids)
    assert continues_word(tok, ids) == [p.startswith("##") for p in pieces]
    assert any(continues_word(tok, ids))


@pytest.mark.parametrize("kind, text", [
    ("bytelevel", "The dogs barked, then walked home."),
    ("metaspace", "The dogs barked , then walked home ."),
])
def test_word_anchors_are_one_per_content_word_with_bpe_conventions(kind, text):
    """The paper-scale conventions ("Ġ", "▁"): a word anchor per content word, at
    its first piece; the piece-level anchors add the word's continuation pieces."""
    import torch

    from dlmspec_min.ssld import inputs
    from dlmspec_min.texts.tokenizer import word_ids

    tok = _bpe_tokenizer(kind)
    ids = [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
    x = torch.tensor([ids])
    lexicon = tagger.default_lexicon()
    word = inputs.anchor_mask(tok, x, lexicon)[0].tolist()
    piece = inputs.anchor_mask(tok, x, lexicon, unit="piece")[0].tolist()
    w = word_ids(tok, ids)
    content_words = {w[j] for j in range(len(ids)) if piece[j]}
    assert len(content_words) == 5  # dogs, barked, then, walked, home
    assert [w[j] for j in range(len(ids)) if word[j]] == sorted(content_words)
    assert all(j == 0 or w[j - 1] != w[j] for j in range(len(ids)) if word[j])
    share = inputs.continuation_share(tok, x, lexicon)
    assert share == (sum(piece) - sum(word)) / sum(piece) > 0
