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

This module is also the source text the sandboxed solution server and the trusted test runner
embed (:func:`rlvr.rewards.harness`), so it imports only the standard library.
"""

from __future__ import annotations

import json
from functools import partial

MAX_DEPTH = 64
MAX_ITEMS = 200_000
_SCALARS = (type(None), bool, int, float, str)
_TAGS = {"b", "l", "t", "s", "f", "d"}


class NotPlain(TypeError):
    """The value (or something inside it) is not plain data, or the wire text is malformed."""


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
        out = {}
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise NotPlain("malformed dict item")
            try:
                out[inner(pair[0])] = inner(pair[1])
            except TypeError as exc:  # unhashable key
                raise NotPlain("unhashable dict key") from exc
        return out
    items = [inner(x) for x in body]
    try:
        return {"l": list, "t": tuple, "s": set, "f": frozenset}[tag](items)
    except TypeError as exc:  # unhashable set element
        raise NotPlain("unhashable set element") from exc


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
    """The plain value of one wire line (str or bytes); :class:`NotPlain` when malformed."""
    try:
        return from_wire(json.loads(text))
    except (ValueError, RecursionError) as exc:
        raise NotPlain(f"malformed wire text: {str(exc)[:200]}") from exc
