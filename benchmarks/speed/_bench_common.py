"""What both sides of ``benchmarks/speed/vs_trl.py`` share: the reward function (one Python function,
called by TRL's ``GRPOTrainer`` and by rlvr) and the result-file helpers.

Pure Python (no torch, no rlvr import): it is imported from rlvr's environment and from the
benchmark's own TRL environment alike.
"""

from __future__ import annotations

import json
import resource
import statistics
from pathlib import Path


def digit_reward(prompts: list, completions: list, **_) -> list[float]:
    """TRL-signature reward: the share of the completion's characters that are ASCII digits
    (0.0 for an empty completion). A random byte-level model starts near 10/320 ~ 0.03 and can
    learn it within tens of steps, so the reward curve shows learning, not only plumbing."""
    out = []
    for c in completions:
        text = c if isinstance(c, str) else str(c[-1]["content"])  # TRL conversational form
        out.append(sum("0" <= ch <= "9" for ch in text) / len(text) if text else 0.0)
    return out


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summarise(r: dict, warmup: int) -> dict:
    """Medians over the steps after ``warmup`` of result ``r``'s per-step lists: seconds per step
    (wall and CPU), generation tokens/s (completion tokens / generation seconds) and training
    tokens/s (prompt + completion tokens / the rest of the step), each by wall and by CPU time."""
    n = len(r["step_s"])
    k = min(warmup, max(0, n - 1))

    def med(xs):
        return statistics.median(xs[k:n])

    out = {"steps_timed": n - k}
    for clock, step, gen in (("", "step_s", "gen_s"), ("_cpu", "step_cpu_s", "gen_cpu_s")):
        s, g = r[step], r[gen]
        out["sec_per_step" + clock] = med(s)
        out["gen_tok_s" + clock] = med([t / max(x, 1e-9) for t, x in zip(r["gen_tokens"], g)])
        out["train_tok_s" + clock] = med([t / max(a - b, 1e-9) for t, a, b in zip(r["train_tokens"], s, g)])
    return out


def write_json(path: str | Path, obj: dict) -> None:
    Path(path).write_text(json.dumps(obj, indent=1))
