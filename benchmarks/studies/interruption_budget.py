"""Where does forced length interruption act? The base model sampled on every held-out problem with
each interruption budget, against no interruption (budget 0) in the same process and with the same
sampling seed (docs/reproductions/scalerl: the length-bound variant's arms).

For each budget (no interruption always first): the share of all samples interrupted, cut inside
the marker and truncated (``length``), the pass rate and its difference from no interruption, the
pass rate among the interrupted ones, and a few interrupted completions. On the arithmetic task
a correct completion writes its reasoning (at most 14 characters on the held-out set) and then the
marker ``\\nA:``; a budget that falls before the marker is complete cuts it ("...\\nA" + the forced
"\\nA:").

    python benchmarks/studies/interruption_budget.py [--checkpoint DIR] [--budgets 0,16,17,18] [--max-new-tokens 22]
        [--samples 8] [--seed 0]

Without ``--checkpoint``: the cached default base (``rlvr pretrain --plain`` writes it).
"""

from __future__ import annotations

import argparse
import collections

from rlvr.config import SamplingConfig, load_config
from rlvr.eval.generate import samples_for
from rlvr.machine import machine_info, machine_line
from rlvr.model.io import load_policy
from rlvr.tasks.arithmetic import extract_answer
from rlvr.tasks.registry import get_task
from rlvr.train.pretrain import cached_base


def measure(model, tok, task, problems, n: int, budget: int, max_new: int, seed: int) -> dict:
    """Sample n completions per problem at T = 1 with interruption after ``budget`` tokens (0: none)."""
    cfg = SamplingConfig(max_new_tokens=max_new, interruption_budget=budget, interruption_text="\nA:",
                         interruption_extra=6, temperature=1.0)
    # chunks of the sampler's default 512 rows, whatever memory allows: the published figures' draws
    rows = samples_for(model, tok, task, problems, n, cfg, seed, batch_size=512)
    reasons = collections.Counter(r["finish_reason"] for r in rows)
    cut = [r for r in rows if r["finish_reason"] == "interrupted"]
    return {"interrupted": reasons["interrupted"] / len(rows), "length": reasons["length"] / len(rows),
            "pass": sum(r["correct"] for r in rows) / len(rows),
            "pass_interrupted": sum(r["correct"] for r in cut) / len(cut) if cut else float("nan"),
            "marker_cut": sum("\nA\nA:" in r["completion"] for r in cut) / len(rows),
            "examples": [r["completion"] for r in cut[:4]]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=None, help="model to sample (default: the cached default base)")
    ap.add_argument("--budgets", default="0,16,17,18")
    ap.add_argument("--max-new-tokens", type=int, default=22)
    ap.add_argument("--samples", type=int, default=8, help="samples per held-out problem")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    try:
        asked = [int(x) for x in a.budgets.split(",")]
    except ValueError:
        ap.error(f"--budgets takes comma-separated token counts, e.g. 0,16,18; got {a.budgets!r}")
    if any(b < 0 for b in asked):
        ap.error(f"--budgets: a budget is a number of tokens >= 0 (0: no interruption); got {a.budgets!r}")
    budgets = [0] + [b for b in asked if b != 0]  # no interruption first: every pass rate is compared with it
    cfg = load_config("quickstart")
    path = a.checkpoint or cached_base(cfg.model, cfg.pretrain)
    if path is None:
        raise SystemExit("error: no cached default base: run `rlvr pretrain --plain` first, or pass --checkpoint")
    model, tok = load_policy(path)
    task = get_task("arithmetic")
    problems = task.problems("heldout")
    print(f"model {path}; {len(problems)} held-out problems x {a.samples} samples, T = 1, "
          f"{a.max_new_tokens} new tokens; {machine_line(machine_info())}")
    print("| budget | interrupted | cut inside the marker | truncated | pass (vs none) | pass among interrupted |")
    print("|---|---|---|---|---|---|")
    base = None
    for b in budgets:
        r = measure(model, tok, task, problems, a.samples, b, a.max_new_tokens, a.seed)
        base = r["pass"] if b == 0 else base
        print(f"| {b or 'none'} | {r['interrupted']:.1%} | {r['marker_cut']:.1%} | {r['length']:.1%} | "
              f"{r['pass']:.3f} ({r['pass'] - base:+.3f}) | {r['pass_interrupted']:.3f} |")
        for t in r["examples"]:
            print(f"    {t!r} -> answer {extract_answer(t)!r}")


if __name__ == "__main__":
    main()
