"""Plain data across the code harness's process boundary: the only values a solution can hand back.

A value is *plain* when it is built from ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``
and ``list`` / ``tuple`` / ``dict`` / ``set`` / ``frozenset`` of plain values, each checked by exact
type (``type(v) is int``, never ``isinstance``): a subclass of ``int`` with a patched ``__eq__``, or
any object of the solution's own class, is not plain and cannot be sent. The trusted side decodes
the wire form into fresh objects of the built-in types, so nothing the solution defined survives
the trip; comparisons then run on the built-in types' own ``__eq__``.

Wire form: one JSON line. ``None``, ``bool``, ``int``, ``float`` (``NaN`` and ``Infinity`` as
Python's ``json`` writes them) and ``str`` are themselves; the rest are one-key objects:
``{"b": hex}`` bytes, ``{"l": [...]}`` list, ``{"t": [...]}`` tuple, ``{"s": [...]}`` set,
``{"f": [...]}`` frozenset, ``{"d": [[key, value], ...]}`` dict. Nesting depth is at most
:data:`MAX_DEPTH` and a value holds at most :data:`MAX_ITEMS` elements in all.

Decoding is bounded whatever the text: :func:`json_depth_ok` measures a line's JSON nesting
before ``json.loads`` sees it (a 200,000-deep line would raise ``RecursionError`` there), and a set,
frozenset or dict whose keys share one hash more than :data:`MAX_SHARED_HASH` times is refused
before it is built (integers ``k + i * (2**61 - 1)`` all hash alike, and inserting n of them costs
n^2 / 2 comparisons). The encoder never sends either.

This module is also the source text the sandboxed solution server and the trusted test runner
embed (:func:`rlvr.rewards.harness`), so it imports only the standard library.
"""

from __future__ import annotations

import json
import re
from array import array
from collections import Counter
from functools import partial
from itertools import accumulate

MAX_DEPTH = 64
MAX_ITEMS = 200_000
MAX_SHARED_HASH = 8  # keys of one set or dict that may share a hash (-1 and -2 do; a crafted set: thousands)
MAX_JSON_DEPTH = 3 * (MAX_DEPTH + 1) + 2  # a dict level is 3 JSON levels ({"d": [[k, v]]}); the deepest value: 193
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # as signed bytes: +1 opens, -1 closes
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_SCALARS = (type(None), bool, int, float, str)
_TAGS = {"b", "l", "t", "s", "f", "d"}


class NotPlain(TypeError):
    """The value (or something inside it) is not plain data, or the wire text is malformed."""


def json_depth_ok(line, limit=MAX_JSON_DEPTH):
    """True when the JSON text ``line`` (bytes) nests at most ``limit`` deep, measured without
    parsing: escapes and strings removed, each bracket a step of +1 or -1, the deepest running sum.
    Linear in the text, in C (about 0.15 s for a 1 MB line of brackets)."""
    steps = array("b", _STRING.sub(b"", _ESCAPE.sub(b"", line)).translate(_STEPS, _NOT_BRACKETS))
    return max(accumulate(steps), default=0) <= limit


def _hashable_keys(keys, what):
    """``keys`` unchanged; :class:`NotPlain` when one is unhashable or more than
    :data:`MAX_SHARED_HASH` of them share a hash (the set or dict would take quadratic time)."""
    try:
        shared = max(Counter(map(hash, keys)).values(), default=0)
    except TypeError as exc:
        raise NotPlain(f"unhashable {what}") from exc
    if shared > MAX_SHARED_HASH:
        raise NotPlain(f"{shared} {what}s share one hash (at most {MAX_SHARED_HASH})")
    return keys


def _walk(value, convert):
    """``value`` converted from the top down: a scalar passes through, anything else is
    ``convert(v, inner)``, where ``inner(part)`` converts a part one level deeper. Every visited value
    counts: :class:`NotPlain` past :data:`MAX_ITEMS` in all or deeper than :data:`MAX_DEPTH`."""
    left = MAX_ITEMS

    def visit(v, depth):
        nonlocal left
        left -= 1
        if left < 0 or depth > MAX_DEPTH:
            raise NotPlain("value too large or too deeply nested")
        if type(v) in _SCALARS:
            return v
        return convert(v, partial(visit, depth=depth + 1))

    return visit(value, 0)


def _encode(v, inner):
    """One non-scalar value -> its tagged wire object (parts through ``inner``)."""
    t = type(v)
    if t is bytes:
        return {"b": v.hex()}
    if t is list:
        return {"l": [inner(x) for x in v]}
    if t is tuple:
        return {"t": [inner(x) for x in v]}
    if t is set:
        return {"s": [inner(x) for x in v]}
    if t is frozenset:
        return {"f": [inner(x) for x in v]}
    if t is dict:
        return {"d": [[inner(k), inner(x)] for k, x in v.items()]}
    raise NotPlain(f"{t.__name__} is not plain data")


def _decode(o, inner):
    """One tagged wire object -> a fresh built-in value (parts through ``inner``)."""
    t = type(o)
    if t is not dict or len(o) != 1 or next(iter(o)) not in _TAGS:
        raise NotPlain(f"malformed wire value of type {t.__name__}")
    tag, body = next(iter(o.items()))
    if tag == "b":
        if type(body) is not str:
            raise NotPlain("malformed bytes")
        try:
            return bytes.fromhex(body)
        except ValueError as exc:
            raise NotPlain("malformed bytes") from exc
    if type(body) is not list:
        raise NotPlain(f"malformed {tag!r} body")
    if tag == "d":
        if any(type(pair) is not list or len(pair) != 2 for pair in body):
            raise NotPlain("malformed dict item")
        pairs = [(inner(key), inner(item)) for key, item in body]
        _hashable_keys([key for key, _ in pairs], "dict key")
        return dict(pairs)
    items = [inner(x) for x in body]
    if tag in ("s", "f"):
        _hashable_keys(items, "set element")
    return {"l": list, "t": tuple, "s": set, "f": frozenset}[tag](items)


def to_wire(value):
    """``value`` -> JSON-able structure; raises :class:`NotPlain` on anything else."""
    return _walk(value, _encode)


def from_wire(obj):
    """The JSON-decoded ``obj`` -> fresh built-in values; raises :class:`NotPlain` on a bad form."""
    return _walk(obj, _decode)


def dumps(value) -> str:
    """One JSON line (no newline) of the wire form of ``value``."""
    try:
        return json.dumps(to_wire(value), separators=(",", ":"))
    except (ValueError, RecursionError) as exc:  # e.g. an int past the str-conversion limit
        raise NotPlain(str(exc)[:200]) from exc


def loads(text):
    """The plain value of one wire line (str or bytes); :class:`NotPlain` when malformed or nested
    past :data:`MAX_JSON_DEPTH` (checked before parsing)."""
    if not json_depth_ok(text.encode("utf-8", "surrogatepass") if type(text) is str else bytes(text)):
        raise NotPlain(f"malformed wire text: nested past {MAX_JSON_DEPTH} levels")
    try:
        return from_wire(json.loads(text))
    except (ValueError, RecursionError) as exc:
        raise NotPlain(f"malformed wire text: {str(exc)[:200]}") from exc
