"""Reliability: SIGKILL during a checkpoint write resumes exactly; reward failures and NaN losses
are isolated and counted; a full disk keeps the previous checkpoint; bad rows and over-long prompts
are skipped with a count."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rlvr.algo import losses as L
from rlvr.cli import main
from rlvr.config import load_config
from rlvr.errors import UserError
from rlvr.log import read_metrics
from rlvr.rewards.verify import verify_checked
from rlvr.tasks.arithmetic import ArithmeticTask
from rlvr.tasks.registry import register_task
from rlvr.train.checkpoint import latest_good_checkpoint, list_checkpoints, verify_checkpoint
from rlvr.train.loop import build_policy, build_state, train

ROOT = Path(__file__).resolve().parents[2]
VOLATILE = {"wall_s", "gen_s", "train_s", "score_s", "scored_per_s"}
SMALL = ["algo.prompts_per_step=4", "algo.group_size=4", "sampling.max_new_tokens=24",
         "sampling.interruption_budget=16", "train.eval_problems=8", "algo.overlong_cache=12"]


class FlakyArithmetic(ArithmeticTask):
    """Arithmetic whose verifier raises on completions of length divisible by 3 (about a third)."""

    def verify(self, completion, problem):
        if len(completion) % 3 == 0:
            raise ValueError("flaky verifier boom")
        return super().verify(completion, problem)


class HangingArithmetic(ArithmeticTask):
    """Arithmetic whose verifier hangs on the completion "hang" and raises on "boom"."""

    def verify(self, completion, problem):
        if completion == "hang":
            time.sleep(60)
        if completion == "boom":
            raise KeyError("no such field")
        return super().verify(completion, problem)


def _overrides(tiny_overrides, *extra) -> list[str]:
    return ["quickstart", *tiny_overrides, *SMALL, *extra]


def _cfg(tiny_overrides, *extra):
    return load_config("quickstart", [*tiny_overrides, *SMALL, *extra])


def _stable(rows):
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def test_sigkill_during_checkpoint_write_resumes_exactly(tiny_overrides, tmp_path):
    torch.manual_seed(0)
    extra = ("train.deterministic=true", "train.steps=4", "train.checkpoint_every=2", "train.eval_every=2")
    full = train(_cfg(tiny_overrides, *extra), run_dir=tmp_path / "full", progress="none")  # also builds base
    run = tmp_path / "killed"
    env = dict(os.environ, RLVR_SLOW_CKPT_S="0.4")  # each checkpoint file hashed 0.4 s slower
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "checks" / "kill_resume.py"), "--child",
                             *_overrides(tiny_overrides, *extra), "--run-dir", str(run)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tmp = run / "checkpoints" / ".tmp_step_000004"
    deadline = time.monotonic() + 240
    while not (tmp.exists() and any(tmp.iterdir())) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert tmp.exists(), "the kill did not land inside the step-4 checkpoint write"
    assert verify_checkpoint(latest_good_checkpoint(run)) is None
    assert latest_good_checkpoint(run).name == "step_000002"
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    assert not list((run / "checkpoints").glob(".tmp_step_*"))
    assert [r["step"] for r in read_metrics(run)] == [1, 2, 3, 4]
    assert _stable(read_metrics(run)) == _stable(read_metrics(full))
    from safetensors.torch import load_file

    wa = load_file(str(latest_good_checkpoint(full) / "model.safetensors"))
    wb = load_file(str(latest_good_checkpoint(run) / "model.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_verifier_exception_and_timeout_get_the_failure_value():
    task = HangingArithmetic()
    probs = task.problems("train", 4)
    texts = ["hang", "boom", f"A: {probs[2].answer}", "A: x"]
    t0 = time.monotonic()
    rep = verify_checked(task, texts, probs, failure_value=-1.0, timeout_s=0.5)
    assert time.monotonic() - t0 < 10  # the hanging worker was killed, not waited for
    assert [v.reward for v in rep.verdicts] == [-1.0, -1.0, 1.0, 0.0]
    assert [v.status for v in rep.verdicts] == ["malformed", "malformed", "right", "malformed"]
    assert [i for i, _ in rep.failures] == [0, 1] and rep.timeouts == 1
    assert "timeout" in rep.failures[0][1] and "KeyError" in rep.failures[1][1]
    assert all(v.answer is None for v in rep.verdicts[:2])  # the error text is not an "answer"


def test_reward_exception_is_isolated_and_counted(tiny_overrides, tmp_path):
    register_task("flaky_arith_test", FlakyArithmetic, replace=True)
    cfg = _cfg(tiny_overrides, "task.name=flaky_arith_test", "train.steps=2", "train.max_reward_failure_rate=0.9",
               "train.reward_failure_value=-0.5")
    with pytest.warns(RuntimeWarning, match="flaky verifier boom"):
        run = train(cfg, run_dir=tmp_path / "r", progress="none")
    rows = read_metrics(run)
    assert [r["step"] for r in rows] == [1, 2]
    fails = rows[-1]["warnings"]["reward_failures"]
    assert 0 < fails < 2 * 16
    assert rows[0]["warnings"]["reward_failures"] <= fails
    with pytest.raises(UserError, match="max_reward_failure_rate"):
        train(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, max_reward_failure_rate=0.0)),
              run_dir=tmp_path / "strict", progress="none")


def test_nan_loss_skips_the_update_and_stops_after_max_nan_steps(tiny_overrides, tmp_path, monkeypatch):
    orig = L.policy_loss

    def nan_loss(*a, **k):
        loss, stats = orig(*a, **k)
        return loss * float("nan"), stats

    monkeypatch.setattr(L, "policy_loss", nan_loss)
    cfg = _cfg(tiny_overrides, "train.steps=8", "train.max_nan_steps=3", "train.checkpoint_every=1",
               "train.keep_last=0")
    with pytest.raises(UserError, match="NaN/Inf loss"):
        train(cfg, run_dir=tmp_path / "r", progress="none")
    rows = read_metrics(tmp_path / "r")
    assert rows[-1]["warnings"]["nonfinite_loss_updates"] >= 3
    last = latest_good_checkpoint(tmp_path / "r")
    state = json.loads((last / "state.json").read_text())
    assert state["nan_steps"] == 2 and state["version"] == 0  # every optimiser step was skipped
    assert len(rows) == state["step"] + 1  # the stopping step's line is logged, not checkpointed
    from safetensors.torch import load_file

    base, _ = build_policy(cfg)
    w = load_file(str(last / "model.safetensors"))
    assert all(torch.equal(w[k], v) for k, v in base.state_dict().items() if k in w)


def test_disk_full_during_checkpoint_keeps_the_previous_one(tiny_overrides, tmp_path, monkeypatch):
    resource = pytest.importorskip("resource")
    import rlvr.train.loop as loop

    orig = loop.save_checkpoint

    def fail_at_step_2(run, st, *a, **k):  # files over 20 kB cannot be written: EFBIG, like a full disk
        if st.step != 2:
            return orig(run, st, *a, **k)
        old_sig, old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN), resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, old[1]))
        try:
            return orig(run, st, *a, **k)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, old)
            signal.signal(signal.SIGXFSZ, old_sig)

    monkeypatch.setattr(loop, "save_checkpoint", fail_at_step_2)
    cfg = _cfg(tiny_overrides, "train.steps=3", "train.checkpoint_every=1", "train.keep_last=3")
    with pytest.raises(UserError, match="could not write checkpoint .*step_000002.*previous checkpoint is intact"):
        train(cfg, run_dir=tmp_path / "r", progress="none")
    ckpts = list_checkpoints(tmp_path / "r" / "checkpoints")
    assert [c.name for c in ckpts] == ["step_000001"] and verify_checkpoint(ckpts[0]) is None
    assert not list((tmp_path / "r" / "checkpoints").glob(".tmp_step_*"))
    monkeypatch.setattr(loop, "save_checkpoint", orig)
    train(resume=tmp_path / "r", progress="none")
    assert [r["step"] for r in read_metrics(tmp_path / "r")] == [1, 2, 3]


def test_bad_rows_and_overlong_prompts_are_skipped_with_counts(tiny_overrides, tmp_path):
    good = [{"q": f"{i}+{i}", "a": str(2 * i)} for i in range(1, 6)]
    bad = [{"q": "1+1"}, {"q": ["1", "+"], "a": "2"}, {"q": "   ", "a": "1"}, {"q": "2+2", "a": None}]
    long = [{"q": "9+" * 40 + "9", "a": "369"}]
    lines = [json.dumps(r) for r in good + bad + long] + ["{not json"]
    (tmp_path / "train.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "heldout.jsonl").write_text("\n".join(json.dumps(r) for r in good) + "\n")
    knobs = {"train": str(tmp_path / "train.jsonl"), "heldout": str(tmp_path / "heldout.jsonl"),
             "columns": {"prompt": "q", "answer": "a"}, "verifier": "numeric", "template": "Q: {question}\n"}
    cfg = _cfg(tiny_overrides)
    cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, name="jsonl", knobs=knobs))
    model, tok = build_policy(cfg)
    with pytest.warns(RuntimeWarning, match="longer than the context"):
        st = build_state(cfg, model, tok)
    assert st.counters == {"bad_rows_skipped": 5, "long_prompts_skipped": 1}
    assert sorted(p.answer for p in st.data.problems) == sorted(r["a"] for r in good)
    too_long = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, knobs={**knobs, "heldout": None,
                                                                                  "train": str(tmp_path / "l.jsonl")}))
    (tmp_path / "l.jsonl").write_text(json.dumps(long[0]) + "\n")
    with pytest.raises(UserError, match="every train prompt is longer"):
        build_state(too_long, model, tok)


def test_a_verifier_that_keeps_failing_is_given_up_on():
    task = HangingArithmetic()
    probs = task.problems("train", 6)
    rep = verify_checked(task, ["hang"] * 6, probs, failure_value=-1.0, timeout_s=0.5, max_failures=1)
    # both workers time out together (2 > 1 allowed): the other 4 calls are not run; b87d620 ran all 6
    assert [v.reward for v in rep.verdicts] == [-1.0] * 6 and len(rep.failures) == 6
    assert rep.timeouts == 2 and sum(m.startswith("not run") for _, m in rep.failures) == 4


def test_cli_train_stops_on_a_reward_function_that_always_fails(tiny_overrides, tmp_path):
    # b87d620: every sample scored 0, one warning per step, exit 0
    rewards = tmp_path / "rewards.py"
    rewards.write_text("def broken(prompts, completions, **kwargs):\n    raise RuntimeError('always')\n")
    over = [*tiny_overrides, "model.context=64", "train.steps=3", "algo.prompts_per_step=2", "algo.group_size=2",
            "sampling.max_new_tokens=8", "sampling.interruption_budget=0", "train.eval_every=0",
            "train.eval_problems=2", "task.retention_tasks=[]", "reward.kind=funcs",
            f"reward.funcs=['{rewards}:broken']"]
    proc = subprocess.run([sys.executable, "-c", "import sys; from rlvr.cli import main; sys.exit(main(sys.argv[1:]))",
                           "train", "quickstart", *over, "--run-dir", str(tmp_path / "run"), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "error: step 1: reward function" in proc.stderr and "max_reward_failure_rate" in proc.stderr
    assert "Traceback" not in proc.stderr
