"""Content, function and punctuation classes for words and generated tokens.

SPEC.md section 3 ("Content vs function"): a finished sequence's tokens are
mapped to words, and a word is *content* if its universal POS (Petrov, Das &
McDonald, 2012, "A Universal Part-of-Speech Tagset") is NOUN, PROPN, VERB,
ADJ, ADV or NUM (INTJ and X count as content), *function* if DET, ADP, PRON,
AUX, CCONJ, SCONJ or PART, and *punct* for PUNCT/SYM. Subword pieces inherit
their word's class.

Gold classes come from the Brown corpus tags (Francis & Kucera, 1979) through
``coarse_class``. A Brown tag is normalised in this order:

1. lower-cased; the suffixes ``-tl`` (title), ``-hl`` (headline) and ``-nc``
   (cited word) are stripped, repeatedly (``nn-tl-hl`` -> ``nn``, ``---hl`` ->
   ``--``);
2. a ``fw-`` prefix (foreign word) makes the word **content** (universal X),
   whatever the tag after it, which must itself be a valid tag;
3. a compound tag joined by ``+`` (contractions: ``pps+bez`` "it's",
   ``vb+ppo`` "gimme") takes its FIRST part; the rest of a compound is not
   checked (Brown truncates some, e.g. ``ppss+ber-n``);
4. the negation marker ``*`` is stripped from the end (``bedz*`` "wasn't" ->
   ``bedz``), except for the bare tag ``*`` ("not", "n't");
5. possessive ``$`` markers are stripped from the end (``np$`` -> ``np``,
   ``pp$$`` "mine" -> ``pp``).

The base tag is then looked up in this table (an unknown base tag raises a
``ValueError`` naming the tag; every tag that occurs in Brown maps):

========  ===================================================  ===========
class     Brown base tags                                      universal
========  ===================================================  ===========
content   nn nns np nps nr nrs                                 NOUN, PROPN
content   vb vbd vbg vbn vbz                                   VERB
content   jj jjr jjs jjt                                       ADJ
content   rb rbr rbt rn                                        ADV
content   cd od                                                NUM
content   uh                                                   INTJ
content   fw-* (any foreign-word tag)                          X
function  at ap abn abl abx dt dti dts dtx                     DET
function  in                                                   ADP
function  cc / cs                                              CCONJ/SCONJ
function  pp pp$ ppl ppls ppo pps ppss pn wp wpo wps           PRON
function  wdt                                                  DET
function  md be bed bedz beg bem ben ber bez hv hvd hvg hvn    AUX
          hvz do dod doz
function  to rp ex ``*`` (not) nil                             PART, ADP, PRON
function  ql qlp wql wrb                                       ADV (!)
punct     ``.`` ``,`` ``:`` ``--`` ``(`` ``)`` ``''``          PUNCT
          `````` ``'``
========  ===================================================  ===========

Choices that depart from a strict universal-POS reading, all as the issue
specifies: every form of *be*, *have* and *do* is function (AUX), even where it
is a main verb ("has a car"), because Brown's tags do not tell the two apart;
the qualifiers ``ql``/``qlp`` ("very", "enough") and the wh-adverbs
``wql``/``wrb`` ("how", "when") are function although Petrov et al. map them
to ADV; ``pn`` ("nothing", "everyone") is PRON (function) as in Universal
Dependencies; ``nil`` (a handful of untaggable tokens) is function.

``Lexicon`` is the deterministic tagger used on generated text: each word's
most frequent gold class on Brown's training split (ties broken in the order
content, function, punct), looked up case-sensitively, then lower-cased; an
unseen word is punct if every character is punctuation or a symbol (Unicode
categories P*, S*), otherwise content (numbers included). ``agreement``
measures it against the gold classes of the held-out split.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import unicodedata
from collections import Counter
from functools import lru_cache
from pathlib import Path

from ..paths import cache_dir

CONTENT, FUNCTION, PUNCT, SPECIAL = "content", "function", "punct", "special"
CLASSES = (CONTENT, FUNCTION, PUNCT)  # also the tie-break order of Lexicon.fit

CONTENT_TAGS = frozenset(
    ["nn", "nns", "np", "nps", "nr", "nrs"]  # NOUN, PROPN
    + ["vb", "vbd", "vbg", "vbn", "vbz"]  # VERB
    + ["jj", "jjr", "jjs", "jjt"]  # ADJ
    + ["rb", "rbr", "rbt", "rn"]  # ADV
    + ["cd", "od", "uh"]  # NUM, INTJ
)
FUNCTION_TAGS = frozenset(
    ["at", "ap", "abn", "abl", "abx", "dt", "dti", "dts", "dtx", "wdt"]  # DET
    + ["in", "cc", "cs"]  # ADP, CCONJ, SCONJ
    + ["pp", "ppl", "ppls", "ppo", "pps", "ppss", "pn", "wp", "wpo", "wps"]  # PRON
    + ["md", "be", "bed", "bedz", "beg", "bem", "ben", "ber", "bez"]  # AUX
    + ["hv", "hvd", "hvg", "hvn", "hvz", "do", "dod", "doz"]  # AUX
    + ["to", "rp", "ex", "*", "nil"]  # PART, ADP; "there" (ex) is PRON in UD
    + ["ql", "qlp", "wql", "wrb"]  # ADV in Petrov et al.; function here
)
PUNCT_TAGS = frozenset([".", ",", ":", "--", "(", ")", "''", "``", "'"])
TAG_SUFFIXES = ("-tl", "-hl", "-nc")
FOREIGN_PREFIX = "fw-"
NEGATION = "*"
POSSESSIVE = "$"

LEXICON_FORMAT = 1
LEXICON_FILE = "lexicon.json"


def _base_class(tag: str, original: str) -> str:
    if tag in PUNCT_TAGS:
        return PUNCT
    if tag in CONTENT_TAGS:
        return CONTENT
    if tag in FUNCTION_TAGS:
        return FUNCTION
    raise ValueError(
        f"unknown Brown tag {original!r} (base tag {tag!r}); add it to the table "
        "in dlmspec_min/measures/tagger.py"
    )


@lru_cache(maxsize=4096)
def coarse_class(brown_tag: str) -> str:
    """Map a Brown tag to ``"content"``, ``"function"`` or ``"punct"``.

    See the module docstring for the normalisation steps and the table.
    """
    if not isinstance(brown_tag, str) or not brown_tag.strip():
        raise ValueError(
            f"unknown Brown tag {brown_tag!r}: expected a non-empty string"
        )
    tag = brown_tag.strip().lower()
    stripped = True
    while stripped:
        stripped = False
        for suffix in TAG_SUFFIXES:
            if tag.endswith(suffix) and len(tag) > len(suffix):
                tag, stripped = tag[: -len(suffix)], True
    if tag.startswith(FOREIGN_PREFIX) and len(tag) > len(FOREIGN_PREFIX):
        try:
            coarse_class(tag[len(FOREIGN_PREFIX) :])  # what follows must be valid
        except ValueError:
            raise ValueError(
                f"unknown Brown tag {brown_tag!r}: {tag[len(FOREIGN_PREFIX) :]!r} "
                "after 'fw-' is not a Brown tag"
            ) from None
        return CONTENT
    if tag not in PUNCT_TAGS:
        tag = tag.split("+")[0]
        if tag != NEGATION:
            tag = tag.rstrip(NEGATION)
        tag = tag.rstrip(POSSESSIVE)
    return _base_class(tag, brown_tag)


def unseen_word_class(word: str) -> str:
    """The class of a word the lexicon has never seen: punct or content."""
    if word and all(unicodedata.category(ch)[0] in "PS" for ch in word):
        return PUNCT
    return CONTENT


def _majority(counts: Counter) -> str:
    return max(CLASSES, key=lambda c: (counts[c], -CLASSES.index(c)))


def mapping_fingerprint() -> str:
    """A hash of everything that decides a lexicon's content (for cache keys)."""
    parts = [
        f"format={LEXICON_FORMAT}",
        "content=" + " ".join(sorted(CONTENT_TAGS)),
        "function=" + " ".join(sorted(FUNCTION_TAGS)),
        "punct=" + " ".join(sorted(PUNCT_TAGS)),
        "classes=" + " ".join(CLASSES),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


class Lexicon:
    """A word -> class lookup: exact form, then lower-cased, then a rule."""

    def __init__(self, exact: dict[str, str], lower: dict[str, str], meta=None):
        for name, table in (("exact", exact), ("lower", lower)):
            bad = {c for c in table.values() if c not in CLASSES}
            if bad:
                raise ValueError(f"{name} table holds unknown classes {sorted(bad)}")
        self.exact = dict(exact)
        self.lower = dict(lower)
        self.meta = dict(meta or {})

    @classmethod
    def fit(cls, dataset, meta=None) -> Lexicon:
        """Each word's most frequent gold class in ``dataset`` (words, tags columns)."""
        exact: dict[str, Counter] = {}
        lower: dict[str, Counter] = {}
        for words, tags in zip(dataset["words"], dataset["tags"], strict=True):
            if len(words) != len(tags):
                raise ValueError("a sentence has different numbers of words and tags")
            for word, tag in zip(words, tags, strict=True):
                c = coarse_class(tag)
                exact.setdefault(word, Counter())[c] += 1
                lower.setdefault(word.lower(), Counter())[c] += 1
        return cls(
            {w: _majority(n) for w, n in exact.items()},
            {w: _majority(n) for w, n in lower.items()},
            meta,
        )

    def classify(self, word: str) -> str:
        c = self.exact.get(word)
        if c is None:
            c = self.lower.get(word.lower())
        return c if c is not None else unseen_word_class(word)

    def __call__(self, words) -> list[str]:
        return [self.classify(w) for w in words]

    def __len__(self) -> int:
        return len(self.exact)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Lexicon)
            and self.exact == other.exact
            and self.lower == other.lower
        )

    def save(self, path) -> Path:
        """Write JSON atomically (temporary file in the same folder, then rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "format": LEXICON_FORMAT,
            "meta": self.meta,
            "exact": self.exact,
            "lower": self.lower,
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(payload, f, ensure_ascii=False, sort_keys=True)
            os.chmod(tmp, 0o644)  # mkstemp creates 0600
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path) -> Lexicon:
        path = Path(path)
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            if payload.get("format") != LEXICON_FORMAT:
                raise ValueError(
                    f"format {payload.get('format')!r}, expected {LEXICON_FORMAT}"
                )
            return cls(payload["exact"], payload["lower"], payload.get("meta"))
        except (json.JSONDecodeError, KeyError, ValueError, AttributeError) as err:
            raise ValueError(
                f"{path} is not a valid lexicon ({err}); delete it"
            ) from err


def _default_meta() -> dict:
    from ..texts.corpus import BROWN_SHA256, HELD_OUT_FRACTION, SPLIT_SEED

    return {
        "corpus_sha256": BROWN_SHA256,
        "held_out_fraction": HELD_OUT_FRACTION,
        "split_seed": SPLIT_SEED,
        "split": "train",
        "mapping": mapping_fingerprint(),
    }


def default_lexicon(path: Path | None = None) -> Lexicon:
    """The lexicon fitted on Brown's training split, cached as JSON.

    The cache is rebuilt when the corpus checksum, the split or the tag table
    changed since it was written.
    """
    from ..texts.corpus import brown_dataset

    path = Path(path or cache_dir() / LEXICON_FILE)
    meta = _default_meta()
    if path.exists():
        try:
            lexicon = Lexicon.load(path)
        except ValueError:
            lexicon = None
        if lexicon is not None and lexicon.meta == meta:
            return lexicon
    lexicon = Lexicon.fit(brown_dataset("train"), meta=meta)
    lexicon.save(path)
    return lexicon


def agreement(lexicon: Lexicon, dataset) -> dict:
    """Word-level agreement of ``lexicon`` with the gold classes of ``dataset``.

    Returns ``overall`` (three classes, every word), ``binary`` (the
    content-vs-function decision over words whose GOLD class is not punct; a
    punct prediction there counts as a disagreement), ``n_words``,
    ``n_binary`` and ``confusion`` (a DataFrame of counts, gold rows x
    predicted columns, in the order content, function, punct).
    """
    import pandas as pd

    counts: Counter = Counter()
    for words, tags in zip(dataset["words"], dataset["tags"], strict=True):
        for word, tag in zip(words, tags, strict=True):
            counts[coarse_class(tag), lexicon.classify(word)] += 1
    n_words = sum(counts.values())
    if n_words == 0:
        raise ValueError("the dataset holds no words")
    confusion = pd.DataFrame(
        [[counts[g, p] for p in CLASSES] for g in CLASSES],
        index=pd.Index(CLASSES, name="gold"),
        columns=pd.Index(CLASSES, name="predicted"),
    )
    n_binary = sum(n for (g, _), n in counts.items() if g != PUNCT)
    agree_binary = counts[CONTENT, CONTENT] + counts[FUNCTION, FUNCTION]
    return {
        "overall": sum(counts[c, c] for c in CLASSES) / n_words,
        "binary": agree_binary / n_binary if n_binary else float("nan"),
        "n_words": n_words,
        "n_binary": n_binary,
        "confusion": confusion,
    }


def classes_of_tokens(tokenizer, ids, lexicon: Lexicon) -> list[str]:
    """Per token id, the class of the word it belongs to.

    Words are rebuilt with ``tokenizer.word_ids``/``words_of`` (``##`` pieces
    continue the previous word, so they inherit its class). Every special token
    ([PAD], [UNK], [BOS], [EOS], [MASK]) gives ``"special"``.
    """
    from ..texts.tokenizer import word_ids, words_of

    ids = [int(i) for i in ids]
    words = words_of(tokenizer, ids)
    word_classes = lexicon(words)
    return [SPECIAL if w < 0 else word_classes[w] for w in word_ids(tokenizer, ids)]
