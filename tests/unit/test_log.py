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
    assert {"reward", "rlvr/lag_max"} <= tags  # namespaced names (rlvr.metric_names): TRL's, else rlvr/
    assert "step" not in tags and "warnings" not in tags and "rlvr/step" not in tags
    events = acc.Scalars("reward")
    assert [e.step for e in events] == [1, 2, 3]
    assert [e.value for e in events] == pytest.approx([0.5, 1.0, 1.5])
    assert [e.value for e in acc.Scalars("rlvr/lag_max")] == pytest.approx([0.0, 1.0, 2.0])


def test_tensorboard_off_writes_no_event_dir(tmp_path):
    MetricsLog(tmp_path).close()
    assert not (tmp_path / "tb").exists()


def test_warn_reaches_the_terminal_once(capfd):
    """Before: each warning printed twice (a WARNING: line and the RuntimeWarning with its source line)."""
    import subprocess
    import sys

    code = "from rlvr.log import warn\nwarn('disk nearly full')\nwarn('disk nearly full')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr == "WARNING: disk nearly full\nWARNING: disk nearly full\n"  # one line per call
    with pytest.warns(RuntimeWarning, match="still catchable"):
        from rlvr.log import warn

        warn("still catchable")


class _Broken:
    def __init__(self):
        self.calls = 0

    def log(self, named, step):
        self.calls += 1
        raise OSError("disk full")

    def close(self):
        pass


def test_a_broken_sink_warns_once_and_the_run_goes_on(tmp_path):
    log = MetricsLog(tmp_path)
    broken = log._sinks["tensorboard"] = _Broken()
    with pytest.warns(RuntimeWarning) as rec:
        for s in (1, 2, 3):
            log.write({"step": s, "reward": 0.1})
    log.close()
    assert broken.calls == 1 and len([w for w in rec if "log.tensorboard" in str(w.message)]) == 1
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3]  # metrics.jsonl complete


def test_missing_sink_packages_warn_and_do_not_stop(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_wandb(name, *a, **k):
        if name in ("wandb", "mlflow"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.warns(RuntimeWarning, match="wandb is not installed"):
        log = MetricsLog(tmp_path, wandb={"project": "p"}, mlflow="exp")
    log.write({"step": 1, "reward": 0.2})
    log.close()
    assert read_metrics(tmp_path) == [{"step": 1, "reward": 0.2}]


def test_wandb_sink_options_and_namespaced_names(tmp_path, monkeypatch):
    import sys
    import types

    calls = {}

    class Run:
        def log(self, d, step):
            calls.setdefault("log", []).append((d, step))

        def finish(self):
            calls["finished"] = True

    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: (calls.__setitem__("init", kw), Run())[1]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    opts = dict(project="proj", name="seed1", entity="team", group="sweep-a", tags=("cispo", "gsm8k"), mode="offline")
    log = MetricsLog(tmp_path / "run7", wandb=opts, config={"loss": {"name": "cispo"}})
    log.write({"step": 3, "reward": 0.5, "zero_var_frac": 0.25, "response_len": 41.0, "lag_max": 0})
    log.close()
    init = calls["init"]
    assert (init["project"], init["name"], init["entity"], init["group"], init["tags"], init["mode"]) == \
        ("proj", "seed1", "team", "sweep-a", ["cispo", "gsm8k"], "offline")
    assert calls["log"] == [({"reward": 0.5, "frac_reward_zero_std": 0.25, "completions/mean_length": 41.0,
                              "rlvr/lag_max": 0}, 3)] and calls["finished"]


def test_flat_and_namespaced_names_read_the_same():
    from rlvr.metric_names import NAMESPACED, flat, namespaced

    old = {"step": 5, "heldout_pass_rate": 0.4, "response_len": 30.0, "lag_max": 1}
    new = {"step": 5, **{namespaced(k): v for k, v in old.items() if k != "step"}}
    assert new["eval/pass_rate"] == 0.4 and new["completions/mean_length"] == 30.0
    assert flat(new) == old and flat(old) == old
    assert len(set(NAMESPACED.values())) == len(NAMESPACED)  # one name per key: reversible


def test_tokens_is_not_sent_as_trls_num_tokens_but_old_logs_still_read():
    """TRL's num_tokens counts prompt + completion tokens seen (trl/trainer/grpo_trainer.py); rlvr's tokens count
    generated tokens plus trained tokens x ppo_epochs: another quantity, so not under TRL's name."""
    from rlvr.metric_names import flat, namespaced

    assert namespaced("tokens") == "rlvr/tokens"
    assert flat({"num_tokens": 7.0}) == {"tokens": 7.0} == flat({"rlvr/tokens": 7.0})
