from __future__ import annotations

import json

import pytest
import torch

from rlvr.algo.curriculum import PassRateTracker


def test_retires_exactly_the_prompts_at_or_over_threshold() -> None:
    tracker = PassRateTracker(threshold=0.9)
    # rates after this batch: a 16/16, b 14/16 = 0.875, c 0/16, d 9/10 = 0.9 (boundary retires)
    tracker.update(["a", "b", "c", "d"], torch.tensor([16, 14, 0, 9]), torch.tensor([16, 16, 16, 10]))
    assert tracker.retired == frozenset({"a", "d"})
    assert tracker.is_retired("a") and not tracker.is_retired("b") and not tracker.is_retired("zzz")
    assert tracker.filter(["c", "a", "b", "e", "d"]) == ["c", "b", "e"]
    # b accumulates over history: (14 + 16) / 32 = 0.9375 -> retired; c stays low
    tracker.update(["b", "c"], [16, 3], [16, 16])
    assert tracker.retired == frozenset({"a", "b", "d"})
    assert tracker.pass_rate("b") == 30 / 32 and tracker.pass_rate("c") == 3 / 32
    assert tracker.pass_rate("never") is None


def test_history_not_last_batch_decides() -> None:
    tracker = PassRateTracker(threshold=0.9)
    tracker.update(["x"], [0], [8])
    tracker.update(["x"], [8], [8])  # last batch perfect, history 8/16 = 0.5
    assert not tracker.is_retired("x")
    tracker.update(["y", "y"], [4, 4], [4, 4])  # repeated id within one call adds up
    assert tracker.pass_rate("y") == 1.0 and tracker.is_retired("y")


def test_retirement_is_permanent() -> None:
    tracker = PassRateTracker(threshold=0.5)
    tracker.update(["p"], [1], [1])
    tracker.update(["p"], [0], [10])
    assert tracker.is_retired("p") and tracker.pass_rate("p") == 1 / 11


def test_state_dict_round_trip_through_json() -> None:
    tracker = PassRateTracker(threshold=0.75)
    tracker.update(["a", "b", "c"], [3, 1, 4], [4, 4, 4])
    restored = PassRateTracker()
    restored.load_state_dict(json.loads(json.dumps(tracker.state_dict())))
    assert restored.threshold == 0.75 and restored.retired == frozenset({"a", "c"})
    assert restored.pass_rate("b") == 0.25
    restored.update(["b"], [4], [4])  # continues from history: 5/8 < 0.75
    assert not restored.is_retired("b")
    assert restored.state_dict()["total"] == {"a": 4, "b": 8, "c": 4}


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="threshold"):
        PassRateTracker(threshold=0.0)
    tracker = PassRateTracker()
    with pytest.raises(ValueError, match="2 prompt ids, 1 correct"):
        tracker.update(["a", "b"], [1], [1, 1])
    with pytest.raises(ValueError, match="0 <= correct <= total"):
        tracker.update(["a"], [5], [4])
    with pytest.raises(ValueError, match="lacks"):
        tracker.load_state_dict({"threshold": 0.9})
