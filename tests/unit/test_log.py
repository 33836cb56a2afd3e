"""Progress output (plain / none / auto off a terminal), metric sinks and resume truncation."""

from __future__ import annotations

import json
import re

import pytest
import torch

from rlvr.log import MetricsLog, Progress, read_metrics, scalars

_LINE = re.compile(r"^\[train\] (\d+)/(\d+) eta (\d+s|\?) ?(.*)$")


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def test_plain_progress_prints_steps_total_eta_and_metrics_to_stderr(capsys):
    p = Progress(total=4, desc="train", mode="plain")
    for i in range(4):
        p.update(reward=0.25 * i, loss=1.5, not_shown=7.0)
    p.close()
    out, err = capsys.readouterr()
    assert out == ""
    lines = _lines(err)
    assert len(lines) == 4
    parsed = [_LINE.match(ln) for ln in lines]
    assert all(parsed), lines
    assert [int(m.group(1)) for m in parsed] == [1, 2, 3, 4]
    assert {int(m.group(2)) for m in parsed} == {4}
    assert parsed[-1].group(3) == "0s"  # nothing left to do
    assert "reward=0.75" in lines[-1] and "loss=1.5" in lines[-1]
    assert "not_shown" not in err


def test_plain_progress_every_n_and_resume_start(capsys):
    p = Progress(total=7, desc="train", mode="plain", every=3, start=2)
    for _ in range(5):
        p.update()
    steps = [int(_LINE.match(ln).group(1)) for ln in _lines(capsys.readouterr().err)]
    assert steps == [3, 6, 7]  # multiples of every, plus the last step


def test_none_mode_prints_nothing(capsys):
    p = Progress(total=3, desc="train", mode="none")
    for _ in range(3):
        p.update(reward=1.0)
    p.close()
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_auto_mode_off_a_terminal_is_plain(capsys):
    p = Progress(total=2, desc="train", mode="auto")  # pytest's captured stderr is not a TTY
    assert p.mode == "plain"
    p.update()
    assert _LINE.match(_lines(capsys.readouterr().err)[0])


def test_scalars_converts_tensors_and_drops_none():
    row = scalars({"a": torch.tensor(2.5), "b": None, "c": 3, "d": float("nan")})
    assert row == {"a": 2.5, "c": 3, "d": None}
    assert isinstance(row["a"], float)


def test_metrics_jsonl_one_line_per_step(tmp_path):
    log = MetricsLog(tmp_path)
    for s in (1, 2, 3):
        log.write({"step": s, "reward": torch.tensor(0.1 * s)})
    log.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2, 3]
    assert read_metrics(tmp_path)[2]["reward"] == pytest.approx(0.3)


def test_truncate_after_on_resume_drops_later_steps(tmp_path):
    log = MetricsLog(tmp_path)
    for s in range(1, 6):
        log.write({"step": s, "reward": float(s)})
    log.close()
    log = MetricsLog(tmp_path, truncate_after=3)  # resumed from the step-3 checkpoint
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3]
    log.write({"step": 4, "reward": 40.0})
    log.close()
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert rows[-1]["reward"] == 40.0


def test_truncate_after_drops_a_torn_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "reward": 0.5}\n{"step": 2, "reward": 0.6}\n{"step": 3, "rew')
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2]
    MetricsLog(tmp_path, truncate_after=10).close()
    assert path.read_text() == '{"step": 1, "reward": 0.5}\n{"step": 2, "reward": 0.6}\n'


def test_tensorboard_sink_writes_readable_events(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path, tensorboard=True)
    for s in (1, 2, 3):
        log.write({"step": s, "reward": 0.5 * s, "lag_max": s - 1, "warnings": {"x": 1}})
    log.close()
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"reward", "lag_max"} <= tags
    assert "step" not in tags and "warnings" not in tags
    events = acc.Scalars("reward")
    assert [e.step for e in events] == [1, 2, 3]
    assert [e.value for e in events] == pytest.approx([0.5, 1.0, 1.5])
    assert [e.value for e in acc.Scalars("lag_max")] == pytest.approx([0.0, 1.0, 2.0])


def test_tensorboard_off_writes_no_event_dir(tmp_path):
    MetricsLog(tmp_path).close()
    assert not (tmp_path / "tb").exists()
