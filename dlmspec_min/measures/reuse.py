"""What a sequential rule's larger look shares with the looks before it.

A claim page measured under a sequential rule (``experiments/sequential.py``;
``power: sequential:`` in ``book/claims.yml``) is measured again at each look
on more questions: the first ``n`` questions of a look are the first ``n`` of
the next (a world's held-out stream is a prefix-consistent sequence, and each
row decodes on its own seeded stream as it would alone). Inside ``session()``
nothing a look has computed is computed again:

- ``fitted(key, fit)``: what does not depend on the questions (the SID head's
  fit, a page's measurement on other data) is computed once per key;
- ``prefix(key, rows, decode)``: a decode of a batch whose first rows an
  earlier look decoded decodes only the rows it adds, and joins the results
  (``join``: per-row tensors concatenated, the batch's forwards summed: the
  calls actually made). ``seconds`` says how long the whole batch's decodes
  took, summed over the calls that decoded its rows, so a page that times
  its decoders reports every row's own decode time once.

Outside a session both run their function as it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch


@dataclasses.dataclass
class Session:
    """The memo of one sequential run: fits by key, decodes by key and rows."""

    fits: dict = dataclasses.field(default_factory=dict)
    decodes: dict = dataclasses.field(default_factory=dict)  # key -> [(rows, out, s)]
    kept: list = dataclasses.field(default_factory=list)  # objects named by id
    rows_decoded: int = 0  # rows decoded in this session (each once)
    rows_reused: int = 0  # rows served from an earlier look


_SESSION: list[Session] = []


def active() -> Session | None:
    """The innermost open session, or None."""
    return _SESSION[-1] if _SESSION else None


@contextlib.contextmanager
def session():
    """Reuse fits and decodes across the measurements made in the block."""
    s = Session()
    _SESSION.append(s)
    try:
        yield s
    finally:
        _SESSION.pop()


@contextlib.contextmanager
def paused():
    """No reuse in the block (a wall-clock timing must decode for real)."""
    saved = list(_SESSION)
    _SESSION.clear()
    try:
        yield
    finally:
        _SESSION.extend(saved)


def ident(obj) -> int:
    """``id(obj)`` for a key, with ``obj`` kept alive by the session, so that no
    later object can take its id while the key stands."""
    s = active()
    if s is not None:
        s.kept.append(obj)
    return id(obj)


def tensor_key(x: torch.Tensor | None) -> tuple:
    """A key for a tensor's contents: its shape, dtype and a hash of its bytes."""
    if x is None:
        return ("none",)
    x = x.detach().cpu().contiguous()
    digest = hashlib.blake2b(x.numpy().tobytes(), digest_size=16).hexdigest()
    return (tuple(x.shape), str(x.dtype), digest)


def row_keys(*per_row: torch.Tensor | Sequence | None) -> list[tuple]:
    """One key per row from the per-row arguments of a decode (tensors (B, ...)
    and lists of ``torch.Generator``, whose initial seeds are the rows')."""
    sizes = {len(a) for a in per_row if a is not None}
    if len(sizes) != 1:
        raise ValueError(f"per-row arguments disagree on the rows: {sorted(sizes)}")
    (n,) = sizes
    keys = []
    for i in range(n):
        k = []
        for a in per_row:
            if a is None:
                k.append(None)
            elif isinstance(a, torch.Tensor):
                k.append(tensor_key(a[i]))
            else:
                g = a[i]
                k.append(("gen", g.initial_seed()) if g is not None else None)
        keys.append(tuple(k))
    return keys


def fitted(key: tuple, fit: Callable[[], Any]) -> Any:
    """``fit()``, computed once per ``key`` within a session."""
    s = active()
    if s is None:
        return fit()
    if key not in s.fits:
        s.fits[key] = fit()
    return s.fits[key]


def _join_field(a, b, name: str):
    if a is None and b is None:
        return None
    if isinstance(a, torch.Tensor):
        if a.ndim >= 2 and a.shape[1:] != b.shape[1:]:  # e.g. (B, max nfe)
            width = max(a.shape[1], b.shape[1])
            a = torch.nn.functional.pad(a, (0, width - a.shape[1]))
            b = torch.nn.functional.pad(b, (0, width - b.shape[1]))
        return torch.cat([a, b])
    if dataclasses.is_dataclass(a):
        return join(a, b)
    if isinstance(a, list) and isinstance(b, list):  # per row (a speculation trace)
        return a + b
    if name == "n_forwards":  # calls actually made, in both batches
        return a + b
    if a != b:
        raise ValueError(f"cannot join decodes whose {name} differ: {a!r}, {b!r}")
    return a


def join(a, b):
    """Two decodes of consecutive rows (``DecodeResult``, ``SSLDResult``) as one:
    per-row tensors concatenated (a per-step table padded with zeros), the
    forwards of the two batches summed, every other field equal in both."""
    if type(a) is not type(b) or not dataclasses.is_dataclass(a):
        raise TypeError(f"cannot join {type(a).__name__} and {type(b).__name__}")
    return type(a)(**{f.name: _join_field(getattr(a, f.name), getattr(b, f.name),
                                          f.name)
                      for f in dataclasses.fields(a)})


def prefix(key: tuple, rows: list[tuple], decode: Callable[[int], Any]):
    """(decode of every row, seconds): ``decode(start)`` decodes the rows from
    ``start`` on. Within a session, the longest run of leading rows an earlier
    call with this ``key`` decoded is taken from it and only the rest is
    decoded; ``seconds`` sums the decode time of every row's own call."""
    s = active()
    if s is None:
        t0 = time.perf_counter()
        out = decode(0)
        return out, time.perf_counter() - t0
    best, best_n = None, 0
    for done_rows, out, secs in s.decodes.get(key, []):
        n = 0
        for r0, r1 in zip(done_rows, rows, strict=False):
            if r0 != r1:
                break
            n += 1
        if n == len(done_rows) and n > best_n:  # a whole earlier batch leads
            best, best_n = (out, secs), n
    if best is not None and best_n == len(rows):
        s.rows_reused += len(rows)
        return best
    t0 = time.perf_counter()
    new = decode(best_n)
    seconds = time.perf_counter() - t0
    s.rows_decoded += len(rows) - best_n
    if best is not None:
        s.rows_reused += best_n
        new, seconds = join(best[0], new), best[1] + seconds
    s.decodes.setdefault(key, []).append((list(rows), new, seconds))
    return new, seconds


def generate(target, prompt: torch.Tensor, config, generators=None, *, init=None):
    """``decoding.decode.generate``, reusing an earlier look's rows (``prefix``)."""
    return generate_timed(target, prompt, config, generators, init=init)[0]


def generate_timed(target, prompt: torch.Tensor, config, generators=None, *,
                   init=None):
    """(``generate``'s result, the seconds its rows took to decode)."""
    from ..decoding.decode import generate as raw

    if generators is not None and not isinstance(generators, (list, tuple)):
        t0 = time.perf_counter()  # one stream for the batch: rows are not apart
        out = raw(target, prompt, config, generators, init=init)
        return out, time.perf_counter() - t0
    key = ("generate", ident(target), repr(config))
    rows = row_keys(prompt, init, generators)

    def decode(start: int):
        gens = None if generators is None else list(generators)[start:]
        return raw(target, prompt[start:], config, gens,
                   init=None if init is None else init[start:])

    return prefix(key, rows, decode)


__all__ = ["Session", "active", "fitted", "ident", "generate", "generate_timed", "join",
           "paused", "prefix", "row_keys", "session", "tensor_key"]
