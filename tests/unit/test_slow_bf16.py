"""A model declared in bf16 trains only where bf16 is not too slow (scalerl's FP32-logits arms); the
quick form trains it anyway."""

from __future__ import annotations

import os

import pytest
import torch

from rlvr.experiments.runner import BF16_ARM_MIN_RATIO, part_cells, slow_bf16
from rlvr.experiments.spec import load
from rlvr.model import bf16_probe, precision_cache
from rlvr.model.precision import ENV_PIN


def test_bf16_models_are_refused_where_bf16_is_slow(monkeypatch):
    exp = load("scalerl")
    cells, _ = part_cells(exp, 3, (28,))
    assert sorted({c.model for c in cells}) == ["base", "bf16", "bf16_logits"]
    monkeypatch.setenv(ENV_PIN, "float32")  # auto pinned: no measurement, the pin decides
    slow = slow_bf16(exp, cells)
    assert sorted(slow) == ["bf16", "bf16_logits"] and "not measured (auto pinned by" in slow["bf16"]
    assert "too slow" not in slow["bf16"] and f"unset {ENV_PIN}" in slow["bf16"]
    assert slow_bf16(exp, part_cells(exp, 3, (1,))[0]) == {}  # float32 arms are never refused
    assert slow_bf16(exp.quick_form(), cells) == {}
    monkeypatch.setenv(ENV_PIN, "bfloat16")  # a machine where bf16 autocast is faster
    assert slow_bf16(exp, cells) == {}


@pytest.mark.parametrize("ratio, refused", [(0.16, True), (BF16_ARM_MIN_RATIO - 0.01, True), (0.7, False),
                                            (1.5, False)])
def test_the_measured_ratio_decides(monkeypatch, tmp_path, ratio, refused):
    """0.16x (an AVX2 CPU): refused; 0.7x (a CPU with bf16 units where auto still picks float32): trained."""
    monkeypatch.delenv(ENV_PIN, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # a quiet machine: the probe measures
    monkeypatch.setattr(precision_cache, "calibration_spread", lambda: 0.0)
    monkeypatch.setattr(bf16_probe, "measure", lambda spec: {"ratio": ratio, "train_ratio": ratio,
                                                           "decode_ratio": ratio, "repeats": 3})
    exp = load("scalerl")
    cells, _ = part_cells(exp, 3, (28,))
    slow = slow_bf16(exp, cells)
    assert (sorted(slow) == ["bf16", "bf16_logits"]) if refused else slow == {}
    if refused:
        assert f"{ratio:.2f}x the speed of fp32" in slow["bf16"]


def test_a_busy_machine_says_bf16_was_not_measured_not_that_it_is_slow(monkeypatch, tmp_path):
    """The probe refuses to measure on a busy machine: the bf16 arms are not trained (an unmeasured CPU
    may run bf16 at 0.02x), and the reason is the true one: not measured, the machine busy."""
    monkeypatch.delenv(ENV_PIN, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bf16_probe, "busy_reason", lambda threads: "load 3.1 on 2 cores")

    def never(spec):
        raise AssertionError("a busy machine must not measure")

    monkeypatch.setattr(bf16_probe, "measure", never)
    exp = load("scalerl")
    slow = slow_bf16(exp, part_cells(exp, 3, (28,))[0])
    assert sorted(slow) == ["bf16", "bf16_logits"]
    why = slow["bf16"]
    assert "not measured" in why and "busy (load 3.1 on 2 cores)" in why and "when the machine is quiet" in why
    assert "too slow" not in why
