"""Checks of the training path on one device, run as a checklist: the rows of
``benchmarks/checks/gpu_check.py`` that need no vLLM (it runs them on CUDA; the unit tests on the CPU).

A check returns (status, numbers): :data:`PASS`, :data:`FAIL` or :data:`SKIP` and one line of what was
measured. :class:`Runner` runs checks in order within a wall-clock budget (an exception in one is a FAIL
row that hides none of the others); :func:`format_table` prints the rows.

- :func:`check_step`: one RL step with backward on the tiny HF llama (``gsm8k_tiny_hf``) in one of
  :data:`STEP_SCHEDULES`: finite loss and gradient norm, weights changed, every parameter on the device.
- :func:`check_native_logp`: the native sampler's behaviour log-probs against the trainer's
  teacher-forced recomputation of the same completions (mean and max |diff| within tolerances).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import torch

from rlvr.config import ModelConfig, load_config
from rlvr.model.hf import load_hf_policy
from rlvr.model.logprobs import score
from rlvr.rollout.sample import SampleParams, generate
from rlvr.tasks.registry import get_task
from rlvr.train.loop import make_source
from rlvr.train.state import build_policy, build_state
from rlvr.train.step import rl_step

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclasses.dataclass
class Row:
    """One line of the checklist: the check's name, its status, what it measured, its seconds."""

    check: str
    status: str
    numbers: str = ""
    seconds: float = 0.0


def verdict(ok: bool) -> str:
    return PASS if ok else FAIL


class Runner:
    """Runs checks in order within ``budget_s`` wall-clock seconds and keeps their :class:`Row` s;
    a check is a callable returning (status, numbers). Past the budget a check is a SKIP row."""

    def __init__(self, budget_s: float):
        self.t0, self.budget_s, self.rows = time.perf_counter(), budget_s, []

    def run(self, check: str, fn: Callable[[], tuple[str, str]]) -> None:
        if time.perf_counter() - self.t0 > self.budget_s:
            self.rows.append(Row(check, SKIP, f"time budget {self.budget_s:.0f}s spent"))
            return
        t = time.perf_counter()
        try:
            status, numbers = fn()
        except Exception as e:  # noqa: BLE001 - one failing check must not hide the others
            first = (str(e).strip().splitlines() or [""])[0][:160]
            status, numbers = FAIL, f"{type(e).__name__}: {first}"
        self.rows.append(Row(check, status, numbers, time.perf_counter() - t))
        print(f"[{self.rows[-1].status}] {check} {numbers}", flush=True)


def format_table(rows: list[Row]) -> str:
    """Rows -> an aligned text table (check | status | seconds | numbers) with a summary line."""
    head = ("check", "status", "s", "numbers")
    cells = [(r.check, r.status, f"{r.seconds:.1f}", r.numbers) for r in rows]
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(3)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head[:3], widths)) + "  " + head[3]]
    lines.append("-" * (sum(widths) + 6 + max([len(head[3])] + [len(c[3]) for c in cells])))
    for c in cells:
        lines.append("  ".join(x.ljust(w) for x, w in zip(c[:3], widths)) + "  " + c[3])
    counts = {s: sum(r.status == s for r in rows) for s in (PASS, FAIL, SKIP)}
    lines.append(f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped")
    return "\n".join(lines)


def diff_stats(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
    """(mean, max) |a - b| over ``mask``; a, b, mask: (B, T). (0, 0) when the mask is empty."""
    d = (a.float() - b.float()).abs()[mask.bool()]
    return (float(d.mean()), float(d.max())) if d.numel() else (0.0, 0.0)


STEP_SCHEDULES = {
    "sync": [],
    "async": ["pipeline.mode=async", "pipeline.workers=1", "pipeline.max_lag=1", "pipeline.timeout_s=120"],
    # DAPO's loss (clip-higher, token mean) and overlong shaping; dynamic sampling off, so that a random
    # model (no mixed-outcome groups) still trains on its batch and the backward runs
    "dapo": ["loss.name=dapo", "algo.overlong_cache=8"],
}
"""The RL steps :func:`check_step` runs: schedule name -> config overrides."""


def check_step(schedule: str, dtype: str, out_dir: str, device: str = "cuda") -> tuple[str, str]:
    """One RL step of ``gsm8k_tiny_hf`` in ``schedule`` (:data:`STEP_SCHEDULES`) and ``dtype`` on ``device``:
    PASS when loss and gradient norm are finite, the weights moved and every parameter is on ``device``."""
    overrides = [f"train.device={device}", f"model.dtype={dtype}", f"train.out_dir={out_dir}", "log.progress=none",
                 "sampling.max_new_tokens=16", "reward.kind=neg_entropy",  # a random model solves nothing: an
                 *STEP_SCHEDULES[schedule]]  # intrinsic reward gives non-zero advantages, so gradients flow
    cfg = load_config("gsm8k_tiny_hf", overrides)
    st = build_state(cfg, *build_policy(cfg, "none"))
    before = [p.detach().clone() for p in st.model.parameters()]
    source, sharding = make_source(st)
    try:
        metrics = rl_step(st, 1, source, sharding)
    finally:
        source.close()
    devices = {str(p.device) for p in st.model.parameters()}
    moved = max(float((p.detach() - b).abs().max()) for p, b in zip(st.model.parameters(), before))
    loss, grad_norm = float(metrics.get("loss", float("nan"))), float(metrics.get("grad_norm", float("nan")))
    want = str(torch.device(device, 0) if device == "cuda" else torch.device(device))
    ok = math.isfinite(loss) and math.isfinite(grad_norm) and moved > 0 and devices == {want}
    return verdict(ok), (f"loss {loss:+.4f} grad_norm {grad_norm:.3g} max|dW| {moved:.2e} "
                         f"on {','.join(sorted(devices))}")


def heldout_prompts(n: int) -> list[str]:
    """``n`` prompts of the arithmetic task's held-out problems (repeated when there are fewer)."""
    problems = get_task("arithmetic").problems("heldout", n)
    return [problems[i % len(problems)].prompt for i in range(n)]


def hf_policy_on(path: str, dtype: str, device: str = "cuda"):
    """(policy, tokenizer) of the HF model at ``path`` in ``dtype``, on ``device``, in eval mode."""
    policy, tok = load_hf_policy(path, ModelConfig(kind="hf", path=path, dtype=dtype, chat_template=False))
    return policy.to(device).eval(), tok


def check_native_logp(path: str, dtype: str, *, prompts: int, max_new_tokens: int, mean_tol: float,
                      max_tol: float, device: str = "cuda") -> tuple[str, str]:
    """The native sampler's behaviour log-probs on ``prompts`` held-out prompts against the trainer's
    recomputation (:func:`rlvr.model.logprobs.score`): PASS when they are float32 and mean / max |diff|
    are below ``mean_tol`` / ``max_tol``."""
    policy, tok = hf_policy_on(path, dtype, device)
    ids, mask = tok.batch_encode_left(heldout_prompts(prompts))
    rb = generate(policy, ids.to(device), mask.to(device), SampleParams(max_new_tokens=max_new_tokens),
                  eos_id=tok.eos_id, pad_id=tok.pad_id, generator=torch.Generator(device).manual_seed(0))
    mean, largest = diff_stats(rb.behaviour_logp, score(policy, rb), rb.policy_mask)
    ok = rb.behaviour_logp.dtype == torch.float32 and mean < mean_tol and largest < max_tol
    return verdict(ok), (f"mean|diff| {mean:.2e} max|diff| {largest:.2e} "
                         f"over {int(rb.policy_mask.sum())} tokens")
