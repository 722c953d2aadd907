"""What a math decode got right: its answer, what it copied, its arithmetic.

Issue 34's error analysis as a measurement. A model of the math world must learn
two skills before its answers can be right: copy the question's names, objects
and numbers into the solution, and compute each step's line. Per decode (the
text before the first ``[EOS]``), against the problem it answers:

- ``correct``: the number after the first ``####`` is the answer;
- ``ended``: the text ends with ``#### n`` and an ``[EOS]`` follows; ``no_text``:
  ``[EOS]`` comes first;
- names and objects: how many the decode writes (any word of the grammar's word
  lists) and how many of those occur in the question (``copied``);
- numbers: how many of the question's distinct numbers reappear in the decode;
- arithmetic lines: every ``a op b = c`` the decode writes, and how many hold
  (``/`` only when exact).

``summarise`` pools these over decodes into shares (a ratio of sums, so a decode
that writes more lines weighs more, as a reader counting lines would).
"""

from __future__ import annotations

import operator

from ..texts import problems as P
from ..texts.tokenizer import EOS_ID

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}
LEXICON = frozenset(P.NAMES) | frozenset(P.OBJECTS) | frozenset(P.CONTAINERS)


def words_before_eos(tokenizer, ids) -> list[str]:
    """The words of a decode's text before its first ``[EOS]`` (specials dropped)."""
    ids = [int(i) for i in ids]
    if EOS_ID in ids:
        ids = ids[: ids.index(EOS_ID)]
    return tokenizer.decode(ids, skip_special_tokens=True).replace(
        ".", " . ").replace(",", " , ").replace("?", " ? ").split()


def answer_tokens(ids) -> int:
    """Tokens of a decode before its first ``[EOS]``: the answer's length, where
    the generated window's length counts its ``[EOS]`` padding too."""
    ids = [int(i) for i in ids]
    return ids.index(EOS_ID) if EOS_ID in ids else len(ids)


def answer_tokens_per_nfe(generated, nfe) -> float:
    """All decodes' answer tokens (``answer_tokens``) / all their forwards: the
    rate seed 002 reports beside slots per forward (2.77 against 3.25)."""
    forwards = float(sum(int(n) for n in nfe))
    if not forwards:
        raise ValueError("no forwards to divide by")
    return sum(answer_tokens(row) for row in generated) / forwards


def answer_in(words) -> int | None:
    """The number right after the first ``####`` of a word list, or None."""
    after = words[words.index(P.ANSWER_MARK) + 1:] if P.ANSWER_MARK in words else []
    return int(after[0]) if after and after[0].isdigit() else None


def arithmetic_lines(words) -> list[tuple[int, str, int, int]]:
    """Every ``a op b = c`` in a word list: (a, op, b, c)."""
    out = []
    for i in range(3, len(words) - 1):
        a, op, b, eq, c = words[i - 3: i + 2]
        if (eq == "=" and op in (*OPS, "/") and a.isdigit() and b.isdigit()
                and c.isdigit()):
            out.append((int(a), op, int(b), int(c)))
    return out


def line_holds(a: int, op: str, b: int, c: int) -> bool:
    if op == "/":
        return b != 0 and a % b == 0 and a // b == c
    return OPS[op](a, b) == c


def grade(tokenizer, ids, problem: P.Problem) -> dict:
    """One decode (token ids of the generated window) against its problem."""
    ids = [int(i) for i in ids]
    words = words_before_eos(tokenizer, ids)
    asked = {w for w, role in problem.question if role in (P.NAME, P.OBJECT)}
    q_numbers = {w for w, role in problem.question if role == P.NUMBER}
    written = [w for w in words if w in LEXICON]
    lines = arithmetic_lines(words)
    ended = (EOS_ID in ids and len(words) >= 2 and words[-2] == P.ANSWER_MARK
             and words[-1].isdigit())
    return dict(correct=answer_in(words) == problem.answer, ended=ended,
                no_text=not words,
                names_objects=len(written),
                names_objects_copied=sum(w in asked for w in written),
                question_numbers=len(q_numbers),
                numbers_copied=len(q_numbers & set(words)),
                lines=len(lines), lines_right=sum(line_holds(*x) for x in lines))


def summarise(graded: list[dict]) -> dict:
    """Shares over decodes: answer accuracy, ended and empty shares, the share of
    written names and objects copied from the question (``copy_acc``), of the
    question's numbers that reappear (``number_copy``) and of arithmetic lines
    that hold (``arith_acc``); NaN where a share has nothing to count."""
    def share(part, whole):
        den = sum(g[whole] for g in graded)
        return sum(g[part] for g in graded) / den if den else float("nan")

    n = len(graded)
    if not n:
        raise ValueError("nothing to summarise: no decodes")
    return dict(answer_acc=sum(g["correct"] for g in graded) / n,
                ended_share=sum(g["ended"] for g in graded) / n,
                empty_share=sum(g["no_text"] for g in graded) / n,
                copy_acc=share("names_objects_copied", "names_objects"),
                number_copy=share("numbers_copied", "question_numbers"),
                arith_acc=share("lines_right", "lines"),
                lines_per_decode=sum(g["lines"] for g in graded) / n)
