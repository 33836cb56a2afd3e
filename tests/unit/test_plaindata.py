"""The plain-data codec between the sandboxed solution and the trusted test runner."""

from __future__ import annotations

import json
import math

import pytest

from rlvr.rewards.plaindata import (
    MAX_DEPTH,
    MAX_JSON_DEPTH,
    MAX_SHARED_HASH,
    NotPlain,
    dumps,
    from_wire,
    json_depth_ok,
    loads,
    to_wire,
)


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 10 ** 30, 1.5, -0.0, "héllo", b"\x00\xff", [], [1, [2, [3]]], (1, "a"), (),
    {1, 2}, frozenset({"x"}), {"k": [1, 2], 3: (4, 5), (1, 2): None}, {frozenset({1}): b"b"},
])
def test_round_trip_keeps_value_and_exact_type(value) -> None:
    back = loads(dumps(value))
    assert back == value and type(back) is type(value)
    if isinstance(value, (list, tuple)) and value:
        assert [type(x) for x in back] == [type(x) for x in value]


def test_bool_int_float_stay_distinct() -> None:
    assert [type(v) for v in loads(dumps([True, 1, 1.0]))] == [bool, int, float]


def test_nan_and_infinity_survive() -> None:
    back = loads(dumps([math.nan, math.inf, -math.inf]))
    assert math.isnan(back[0]) and back[1:] == [math.inf, -math.inf]


class _Eq:
    def __eq__(self, other):
        return True


class _Int(int):
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [_Eq(), _Int(3), [1, _Int(2)], {"k": _Eq()}, type("S", (str,), {})("x"),
                                   iter([1]), (x for x in ()), len, object()])
def test_anything_not_plain_by_exact_type_is_refused(value) -> None:
    with pytest.raises(NotPlain):
        dumps(value)


def test_self_reference_depth_and_huge_ints_are_refused() -> None:
    x: list = []
    x.append(x)
    with pytest.raises(NotPlain):
        dumps(x)
    deep: list = []
    for _ in range(MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(NotPlain):
        dumps(deep)
    with pytest.raises(NotPlain):
        dumps(10 ** 100_000)  # past Python's int-to-str limit


@pytest.mark.parametrize("text", ['[1, 2]', '{"x": 1}', '{"l": 1}', '{"b": "zz"}', '{"d": [[1]]}',
                                  '{"s": [{"l": []}]}', '{"d": [[{"l": []}, 1]]}', '{"l": [], "t": []}', 'nope',
                                  '{"b": 5}'])
def test_malformed_wire_text_is_refused(text: str) -> None:
    with pytest.raises(NotPlain):
        loads(text)


def test_wire_form_is_one_json_line() -> None:
    line = dumps({"a": (1, b"x")})
    assert "\n" not in line and json.loads(line) == to_wire({"a": (1, b"x")})
    assert from_wire(json.loads(line)) == {"a": (1, b"x")}


def test_json_depth_is_measured_before_parsing() -> None:
    assert json_depth_ok(b"[[1, {\"a\": [2]}]]", limit=4) and not json_depth_ok(b"[[1, {\"a\": [2]}]]", limit=3)
    assert json_depth_ok(b'["[[[[", "\\"]]]]", {"k": "{{{{"}]', limit=2)  # brackets in strings do not count
    deepest = dumps(_nested(MAX_DEPTH))
    assert json_depth_ok(b'{"ok": ' + deepest.encode() + b"}")  # the deepest plain value fits
    for line in (b"[" * 200_000, b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)):
        assert not json_depth_ok(line)
        with pytest.raises(NotPlain):  # b87d620 parsed first: RecursionError inside json.loads
            loads(line)


def _nested(depth: int):
    """``depth`` dicts, each inside the next (None innermost)."""
    value = None
    for _ in range(depth):
        value = {"k": value}
    return value


def test_keys_sharing_one_hash_are_refused_before_a_set_or_dict_is_built() -> None:
    """Integers k + i * (2**61 - 1) share a hash: n of them cost n^2 / 2 comparisons to insert."""
    collide = [7 + i * ((1 << 61) - 1) for i in range(MAX_SHARED_HASH + 1)]
    assert loads(dumps(set(collide[:MAX_SHARED_HASH]))) == set(collide[:MAX_SHARED_HASH])
    assert loads(dumps({-1, -2})) == {-1, -2}  # hash(-1) == hash(-2): a natural collision passes
    for value in (set(collide), frozenset(collide), dict.fromkeys(collide, 0)):
        with pytest.raises(NotPlain, match="share one hash"):  # b87d620 built them
            loads(dumps(value))
    with pytest.raises(NotPlain, match="share one hash"):  # duplicates the encoder never sends
        loads('{"s": [1, 1, 1, 1, 1, 1, 1, 1, 1]}')
