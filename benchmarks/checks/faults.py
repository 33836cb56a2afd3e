"""Fault injection table: what a tiny ``rlvr train`` run does under each fault, and that nothing is lost.

Faults: a reward function that raises, one that hangs (killed after ``reward.timeout_s``), a NaN
loss on one step and on every step, a corrupt newest checkpoint plus a leftover partial write, a
full disk while checkpointing (a real 1.5 MB tmpfs when it can be mounted, and a per-file size
limit, EFBIG, everywhere), and malformed / over-long dataset rows. Each row says how the fault was
injected, what happened, where it was counted, the run's outcome and the "nothing lost" check.
Prints the markdown table, writes it into docs/reliability.md (between the ``faults`` markers) and
ends with a machine-readable JSON line.

    python benchmarks/checks/faults.py [--out /tmp/faults] [--no-docs]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch

from rlvr.analysis.metric_series import without_wall_clock
from rlvr.tasks.arithmetic import ArithmeticTask

TINY = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "pretrain.tokens=20000",
        "pretrain.batch_size=16", "pretrain.seq_len=64", "algo.prompts_per_step=4", "algo.group_size=4",
        "sampling.max_new_tokens=24", "sampling.interruption_budget=16", "train.eval_problems=8",
        "algo.overlong_cache=12", "log.progress=none", "train.eval_every=2"]
DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
BEGIN, END = "<!-- faults:begin -->", "<!-- faults:end -->"

class RaisingTask(ArithmeticTask):
    """Verifier raises on completions whose length is divisible by 3."""

    def verify(self, completion, problem):
        if len(completion) % 3 == 0:
            raise ValueError("injected reward bug")
        return super().verify(completion, problem)


class HangingTask(ArithmeticTask):
    """Verifier hangs for 60 s on completions whose length is 1 modulo 3."""

    def verify(self, completion, problem):
        if len(completion) % 3 == 1:
            time.sleep(60)
        return super().verify(completion, problem)


def cfg_of(*extra: str):
    from rlvr.config import load_config

    return load_config("quickstart", [*TINY, *extra])


def quiet_train(*args, **kw) -> tuple[Path | None, str | None, list[str]]:
    """train(...) -> (run dir or None, UserError text or None, warning messages)."""
    from rlvr.errors import UserError
    from rlvr.train.loop import train

    with warnings.catch_warnings(record=True) as caught, open(os.devnull, "w") as null, \
            contextlib.redirect_stderr(null):
        warnings.simplefilter("always")
        try:
            return train(*args, progress="none", **kw), None, [str(w.message) for w in caught]
        except UserError as e:
            return None, str(e), [str(w.message) for w in caught]


def steps_of(run: Path) -> list[int]:
    from rlvr.log import read_metrics

    return [r["step"] for r in read_metrics(run)]


def last_warnings(run: Path) -> dict:
    from rlvr.log import read_metrics

    rows = read_metrics(run)
    return rows[-1].get("warnings", {}) if rows else {}


def good_ckpt(run: Path) -> str | None:
    from rlvr.train.checkpoint import latest_good_checkpoint

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = latest_good_checkpoint(run)
    return c.name if c else None


def complete(run: Path, n: int) -> bool:
    return steps_of(run) == list(range(1, n + 1)) and good_ckpt(run) == f"step_{n:06d}"


def row(fault, injection, happened, counted, outcome, lost_check) -> dict:
    return {"fault": fault, "injection": injection, "what happened": happened, "counted as": counted,
            "outcome": outcome, "nothing lost": lost_check}


# ----------------------------------------------------------------------------- the faults
def reward_exception(out: Path) -> dict:
    from rlvr.tasks.registry import register_task

    register_task("faults_raising", RaisingTask, replace=True)
    run, err, ws = quiet_train(cfg_of("task.name=faults_raising", "train.steps=4",
                                      "train.max_reward_failure_rate=0.9"), run_dir=out / "reward_exc")
    w = last_warnings(run) if run else {}
    msg = next((m for m in ws if "reward calls failed" in m), "")
    _, strict_err, _ = quiet_train(cfg_of("task.name=faults_raising", "train.steps=2",
                                          "train.max_reward_failure_rate=0.1"), run_dir=out / "reward_exc_strict")
    return row("reward function raises", "verify() raises ValueError on ~1/3 of samples",
               f"failed samples scored train.reward_failure_value=0; warning: `{msg[:90]}...`; with "
               f"max_reward_failure_rate=0.1: `{(strict_err or 'no error')[:80]}...`",
               f"warnings.reward_failures={w.get('reward_failures')} of {4 * 16} samples",
               f"{'completed 4/4 steps' if run and err is None else err}",
               f"steps 1..4 logged once, final checkpoint verifies: {run is not None and complete(run, 4)}")


def reward_timeout(out: Path) -> dict:
    from rlvr.tasks.registry import register_task

    register_task("faults_hanging", HangingTask, replace=True)
    t0 = time.monotonic()
    run, err, _ = quiet_train(cfg_of("task.name=faults_hanging", "train.steps=3", "reward.timeout_s=1",
                                     "train.max_reward_failure_rate=0.9"), run_dir=out / "reward_timeout")
    wall = time.monotonic() - t0
    w = last_warnings(run) if run else {}
    return row("reward function hangs", "verify() sleeps 60 s on ~1/3 of samples; reward.timeout_s=1",
               f"stuck worker killed after 1 s and replaced; sample scored 0; 3 steps took {wall:.0f} s "
               f"(vs {w.get('reward_timeouts', 0) * 60} s if waited)",
               f"warnings.reward_timeouts={w.get('reward_timeouts')}, reward_failures={w.get('reward_failures')}",
               "completed 3/3 steps" if run and err is None else str(err),
               f"steps 1..3 logged once, final checkpoint verifies: {run is not None and complete(run, 3)}")


@contextlib.contextmanager
def nan_loss_on(steps: set[int] | None):
    """Make the policy loss NaN on the given 1-based steps (all steps if None)."""
    import rlvr.train.loop as loop
    from rlvr.algo import losses as L

    orig_loss, orig_step, current = L.policy_loss, loop.rl_step, {"step": 0}

    def loss(*a, **k):
        value, stats = orig_loss(*a, **k)
        return (value * float("nan") if steps is None or current["step"] in steps else value), stats

    def step(st, total, *a, **k):
        current["step"] = st.step + 1
        return orig_step(st, total, *a, **k)

    L.policy_loss, loop.rl_step = loss, step
    try:
        yield
    finally:
        L.policy_loss, loop.rl_step = orig_loss, orig_step


def nan_once(out: Path) -> dict:
    with nan_loss_on({2}):
        run, err, _ = quiet_train(cfg_of("train.steps=4"), run_dir=out / "nan_once")
    w = last_warnings(run) if run else {}
    return row("NaN loss (one step)", "policy loss x NaN on step 2",
               "step 2's optimiser updates skipped (no backward), weights untouched; training continued",
               f"warnings.nonfinite_loss_updates={w.get('nonfinite_loss_updates')}, nan_steps=1",
               "completed 4/4 steps" if run and err is None else str(err),
               f"steps 1..4 logged once, final checkpoint verifies: {run is not None and complete(run, 4)}")


def nan_always(out: Path) -> dict:
    with nan_loss_on(None):
        run, err, _ = quiet_train(cfg_of("train.steps=8", "train.max_nan_steps=3", "train.checkpoint_every=1"),
                                  run_dir=out / "nan_always")
    d = out / "nan_always"
    state = json.loads((d / "checkpoints" / str(good_ckpt(d)) / "state.json").read_text())
    return row("NaN loss (every step)", "policy loss x NaN on every step; train.max_nan_steps=3",
               f"every update skipped (checkpointed version={state['version']}); stopped: `{(err or '')[:80]}...`",
               f"nan_steps={state['nan_steps']} in {good_ckpt(d)}, then 3 -> stop",
               "UserError (exit 2)" if err else "did not stop",
               f"steps 1..{len(steps_of(d))} logged; {good_ckpt(d)} verifies and resumes")


def corrupt_checkpoint(out: Path) -> dict:
    det = ("train.deterministic=true", "train.checkpoint_every=1", "train.keep_last=3")
    ref, _, _ = quiet_train(cfg_of(*det, "train.steps=5"), run_dir=out / "corrupt_ref")
    run, _, _ = quiet_train(cfg_of(*det, "train.steps=4"), run_dir=out / "corrupt")
    ck = out / "corrupt" / "checkpoints"
    (ck / "step_000004" / "model.safetensors").write_bytes(b"bit rot")  # corrupt the newest
    (ck / ".tmp_step_000005").mkdir()  # and leave a partial write behind
    (ck / ".tmp_step_000005" / "optimizer.pt").write_bytes(b"half")
    run, err, ws = quiet_train(resume=out / "corrupt", extra_steps=5)
    from rlvr.log import read_metrics

    strip = [without_wall_clock(read_metrics(d)) for d in (ref, run)]
    used = next((m for m in ws if "corrupt or partial" in m), "")
    return row("corrupt checkpoint", "newest checkpoint's model.safetensors overwritten; a .tmp_step_ dir left",
               f"`{used[:95]}...`; .tmp_step_000005 removed; steps 4-5 rerun",
               "a warning per broken checkpoint skipped",
               "resumed and completed 5/5 steps" if run and err is None else str(err),
               f"metrics equal an uninterrupted deterministic run: {strip[0] == strip[1]}; steps 1..5 once: "
               f"{steps_of(out / 'corrupt') == [1, 2, 3, 4, 5]}")


@contextlib.contextmanager
def file_size_limit(nbytes: int):
    import resource

    old_sig, old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN), resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old)
        signal.signal(signal.SIGXFSZ, old_sig)


def disk_full_limit(out: Path) -> dict:
    import rlvr.train.loop as loop

    orig = loop.save_checkpoint

    def save(run, st, *a, **k):
        if st.step != 3:
            return orig(run, st, *a, **k)
        with file_size_limit(20_000):
            return orig(run, st, *a, **k)

    loop.save_checkpoint = save
    try:
        _, err, _ = quiet_train(cfg_of("train.steps=4", "train.checkpoint_every=1"), run_dir=out / "efbig")
    finally:
        loop.save_checkpoint = orig
    d = out / "efbig"
    left = good_ckpt(d)
    run, err2, _ = quiet_train(resume=d)
    return row("disk full (file size limit)", "RLIMIT_FSIZE=20 kB during the step-3 checkpoint (EFBIG)",
               f"`{err or 'no error'}`; tmp dir removed",
               "-", f"{'UserError (exit 2)' if err else 'no error'}; after the limit was lifted --resume "
               f"completed: {err2 is None}",
               f"last good checkpoint {left} intact; after resume steps 1..4 once: {complete(d, 4)}")


def disk_full_tmpfs(out: Path) -> dict | None:
    """A real ENOSPC: the run directory on a 1.5 MB tmpfs (needs root and mount; else None)."""
    mnt = out / "tmpfs"
    mnt.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=700k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        return None
    try:
        _, err, _ = quiet_train(cfg_of("train.steps=12", "train.checkpoint_every=1", "train.keep_last=2"),
                                run_dir=mnt / "run")
        left, logged = good_ckpt(mnt / "run"), len(steps_of(mnt / "run"))
        shutil.copytree(mnt / "run", out / "enospc_moved")  # "free disk space": move the run
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
    run, err2, _ = quiet_train(resume=out / "enospc_moved")
    return row("disk full (real ENOSPC)", "run directory on a 700 kB tmpfs, 12 steps, checkpoint every step",
               f"`{err or 'no error'}`", f"{logged} metric lines written before the error",
               f"{'UserError (exit 2)' if err else 'no error'}; run moved to a roomy disk, --resume completed: "
               f"{err2 is None}",
               f"last good checkpoint {left} intact; after resume steps 1..12 once: "
               f"{complete(out / 'enospc_moved', 12)}")


def malformed_rows(out: Path) -> dict:
    d = out / "rows"
    d.mkdir(parents=True, exist_ok=True)
    good = [{"q": f"{i}+{j}", "a": str(i + j)} for i in range(1, 5) for j in range(1, 5)]
    bad = [{"q": "1+1"}, {"q": ["1"], "a": "1"}, {"q": "  ", "a": "1"}, {"q": "2+2", "a": {"x": 4}}]
    lines = [json.dumps(r) for r in good + bad + [{"q": "9+" * 40 + "9", "a": "369"}]] + ["{truncated"]
    (d / "train.jsonl").write_text("\n".join(lines) + "\n")
    (d / "heldout.jsonl").write_text("\n".join(json.dumps(r) for r in good[:8]) + "\n")
    knobs = {"train": str(d / "train.jsonl"), "heldout": str(d / "heldout.jsonl"), "verifier": "numeric",
             "columns": {"prompt": "q", "answer": "a"}, "template": "Q: {question}\n"}
    cfg = cfg_of("train.steps=2")
    cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, name="jsonl", knobs=knobs))
    run, err, _ = quiet_train(cfg, run_dir=d / "run")
    w = last_warnings(run) if run else {}
    return row("malformed dataset rows", "JSONL with a missing field, a list prompt, a blank prompt, a dict "
               "answer, a torn line and an 83-token prompt (context 96 - 33 budget)",
               "bad rows dropped by the loader, the over-long prompt dropped at load time (not mid-run)",
               f"warnings.bad_rows_skipped={w.get('bad_rows_skipped')}, "
               f"long_prompts_skipped={w.get('long_prompts_skipped')}",
               "completed 2/2 steps on the 16 good rows" if run and err is None else str(err),
               f"steps 1..2 logged once, final checkpoint verifies: {run is not None and complete(run, 2)}")


def markdown(rows: list[dict]) -> str:
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r[c]).replace("|", "\\|").replace("\n", " ") for c in cols) + " |" for r in rows]
    return "\n".join(out)


def write_doc(table: str) -> None:
    text = DOC.read_text() if DOC.exists() else f"# Reliability\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1] if END in rest else ""
    stamp = time.strftime("%Y-%m-%d")
    generated = f"_Generated by `python benchmarks/checks/faults.py` on {stamp}._"
    DOC.write_text(f"{head}{BEGIN}\n{generated}\n\n{table}\n{END}{tail}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/faults")
    ap.add_argument("--no-docs", action="store_true", help="do not rewrite the table in docs/reliability.md")
    args = ap.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    os.environ.setdefault("RLVR_CACHE", str(out / "cache"))
    torch.set_num_threads(1)
    t0 = time.monotonic()
    rows = []
    for fn in (reward_exception, reward_timeout, nan_once, nan_always, corrupt_checkpoint, disk_full_limit,
               disk_full_tmpfs, malformed_rows):
        t = time.monotonic()
        r = fn(out)
        if r is not None:
            rows.append(r)
            print(f"{r['fault']}: {time.monotonic() - t:.0f}s", file=sys.stderr, flush=True)
    table = markdown(rows)
    print(table)
    if not args.no_docs:
        write_doc(table)
    ok = all("False" not in r["nothing lost"] + r["outcome"] and "did not stop" not in r["outcome"]
             and "no error" not in r["outcome"] for r in rows)
    print(json.dumps({"benchmark": "faults", "faults": len(rows), "ok": ok,
                      "wall_s": round(time.monotonic() - t0, 1)}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
