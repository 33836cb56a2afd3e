"""A model declared in bf16 trains only where bf16 is fast (scalerl's FP32-logits arms); the quick
form trains it anyway."""

from __future__ import annotations

from rlvr.experiments.runner import part_cells, slow_bf16
from rlvr.experiments.spec import load
from rlvr.model.precision import ENV_PIN


def test_bf16_models_are_refused_where_bf16_is_slow(monkeypatch):
    exp = load("scalerl")
    cells, _ = part_cells(exp, 3, (28,))
    assert sorted({c.model for c in cells}) == ["base", "bf16", "bf16_logits"]
    monkeypatch.setenv(ENV_PIN, "float32")  # what the machine's measurement would say on a slow-bf16 CPU
    slow = slow_bf16(exp, cells)
    assert sorted(slow) == ["bf16", "bf16_logits"] and "slow on this machine" in slow["bf16"]
    assert slow_bf16(exp, part_cells(exp, 3, (1,))[0]) == {}  # float32 arms are never refused
    assert slow_bf16(exp.quick_form(), cells) == {}
    monkeypatch.setenv(ENV_PIN, "bfloat16")  # a machine where bf16 autocast is faster
    assert slow_bf16(exp, cells) == {}
