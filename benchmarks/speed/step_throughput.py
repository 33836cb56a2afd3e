"""RL steps per core-hour of the embedded recipe, this tree against a baseline commit, in one run
(issue 53, item 2; docs/performance.md, "RL steps per core-hour").

The recipe is ``rlvr run``'s default config (``rlvr/configs/quickstart.yaml``: tiny model, its cached
pretrained base, the arithmetic task, CISPO) at ``--prompts`` x ``--group`` (64 x 8), computing in
``--dtype`` (float32: what ``model.dtype=auto`` picks for this step on the CPUs measured so far;
pinned so that the precision probe is no part of the comparison). Each side is a fresh process
(``PYTHONPATH`` at its checkout: the baseline is ``git worktree add --detach`` of ``--baseline-ref``
under /tmp, removed afterwards) running ``--steps`` RL steps (``rlvr.train.step.rl_step``) from the
same base and seed on ``--threads`` torch threads; the sides alternate for ``--rounds`` rounds, so
that the machine's load weighs on both alike. The first ``--warmup`` steps of each side are left out.

Printed: the CPU (model name, family/model, flags), the load average before and after, each side's
median seconds per step and its phases (the step's own functions timed in place: sampling
``sample``, reward ``score_rollouts``, forward+backward ``micro_step``, optimiser
``clip_and_step``, the rest "other"), steps per core-hour (3600 / (s/step x threads)) and their
ratio (of the medians over every round, and each round's own: its two sides ran minutes apart, so
a burst of load that hits one round shows there, not in the others), and the numerics check
(:func:`numerics`): from the same base and seed both sides sample the same tokens at step 1, so the
first optimiser update starts from identical inputs; its
gradient, step 1's loss and the parameters after step 1 must agree within :data:`TOLERANCE`.
Later steps are compared too (sampling is discrete: a float difference of 1e-7 in the weights can
flip a draw, after which the runs are different runs), reported, not checked.

    python benchmarks/speed/step_throughput.py [--steps 8] [--warmup 2] [--rounds 3] [--threads 1]
        [--baseline-ref b87d620] [--prompts 64] [--group 8]
    python benchmarks/speed/step_throughput.py --quick   # tiny shapes, 2 steps, this tree on both sides

``--quick`` runs both sides in this process with this tree (a random tiny model, 4 x 4 rows): the
machinery and the check, in seconds (tests/unit/test_step_throughput.py). The last line is JSON.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared _timing.py
from _timing import adding_time  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PHASES = {"sample": "sampling", "score_rollouts": "reward", "micro_step": "forward+backward",
          "clip_and_step": "optimiser"}
TOLERANCE = {"grad": 1e-5, "loss": 1e-5, "param": 1e-3}
"""Relative tolerances of the numerics check. ``grad``: the first optimiser update's gradient, from
identical inputs, max |g - g_base| / max |g_base| over every parameter (float32 rounds at 6e-8; a sum
over ~10^4 tokens in another order stays near 1e-6). ``loss``: step 1's ``loss``, |l - l_base| /
|l_base|. ``param``: the parameters after step 1, ||p - p_base|| / ||p_base - p_0|| (the difference
against the step's own update, L2 over every parameter): Adam moves an element by about lr * sign(g),
so an element whose gradient is within rounding of 0 may move either way on the two sides; an
element-wise bound on the parameters would test that coin, not the computation."""
COMPARED = ("loss", "policy_loss", "reward", "entropy", "response_len", "grad_norm", "approx_kl", "clip_frac_high")


# ----------------------------------------------------------------------------- one side
def recipe_overrides(prompts: int, group: int, dtype: str, extra: list[str]) -> list[str]:
    return [f"model.dtype={dtype}", f"algo.prompts_per_step={prompts}", f"algo.group_size={group}",
            "log.progress=none", *extra]


def measure_side(steps: int, overrides: list[str], threads: int) -> dict:
    """Run ``steps`` RL steps of the recipe with the ``rlvr`` on the path; -> per-step seconds and
    phases, metrics, a hash of each step's sampled tokens, the first update's gradient and the
    parameters after step 1 and at the end (tensors, CPU)."""
    import rlvr.train.step as step
    from rlvr.config import load_config
    from rlvr.train.state import build_policy, build_state

    torch.set_num_threads(threads)
    cfg = load_config(None, overrides)
    model, tok = build_policy(cfg, "none")
    st = build_state(cfg, model, tok)
    current: dict[str, float] = collections.defaultdict(float)
    captured: dict = {"tokens": []}

    sample, clip_and_step = step.sample, step.clip_and_step

    def sampled(*a, **kw):
        rb = sample(*a, **kw)
        captured["tokens"].append(hashlib.sha256(rb.completion_ids.numpy().tobytes()).hexdigest()[:16])
        return rb

    def optimiser(st_, *a, **kw):
        if "grad" not in captured:
            captured["grad"] = {n: p.grad.detach().clone() for n, p in st_.model.named_parameters()
                                if p.grad is not None}
        return clip_and_step(st_, *a, **kw)

    originals = {name: getattr(step, name) for name in PHASES}
    step.sample, step.clip_and_step = sampled, optimiser
    for name, phase in PHASES.items():
        setattr(step, name, adding_time(getattr(step, name), phase, current))
    rows: list[dict] = []
    captured["params0"] = {n: p.detach().clone() for n, p in st.model.named_parameters()}
    try:
        for i in range(steps):
            current.clear()
            t = time.perf_counter()
            metrics = step.rl_step(st, cfg.train.steps)
            seconds = time.perf_counter() - t
            rows.append({"step_s": seconds, **{p: current[p] for p in PHASES.values()},
                         "metrics": {k: v for k, v in metrics.items() if isinstance(v, float | int)}})
            if i == 0:
                captured["params1"] = {n: p.detach().clone() for n, p in st.model.named_parameters()}
    finally:  # the step's own functions back (the quick mode measures two sides in one process)
        for name, fn in originals.items():
            setattr(step, name, fn)
    return {"steps": rows, "tokens": captured["tokens"], "grad": captured.get("grad", {}),
            "params0": captured["params0"], "params1": captured["params1"],
            "params": {n: p.detach().clone() for n, p in st.model.named_parameters()}}


# ----------------------------------------------------------------------------- comparison
def max_relative(current: dict, baseline: dict) -> float:
    """max |a - b| over every tensor of two {name: tensor} dicts, over max |b|; inf when the names differ."""
    if current.keys() != baseline.keys() or not baseline:
        return float("inf")
    diff = max(float((current[k] - baseline[k]).abs().max()) for k in baseline)
    scale = max(float(baseline[k].abs().max()) for k in baseline)
    return diff / max(scale, 1e-30)


def relative_to_update(current: dict, baseline: dict, start: dict) -> float:
    """||current - baseline|| / ||baseline - start|| (L2 over every tensor): two sides' parameters after
    a step, against the baseline's own update from ``start``; inf when the names differ."""
    if current.keys() != baseline.keys() or not baseline:
        return float("inf")
    diff = sum(float((current[k] - baseline[k]).pow(2).sum()) for k in baseline) ** 0.5
    update = sum(float((baseline[k] - start[k]).pow(2).sum()) for k in baseline) ** 0.5
    return diff / max(update, 1e-30)


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-30)


def numerics(current: dict, baseline: dict) -> dict:
    """The numerics check of two sides' results (:func:`measure_side`): ``same_tokens`` (per step),
    the measured relative differences, and ``passed`` (step 1 sampled the same tokens and every
    measure is within :data:`TOLERANCE`). ``later_steps``: the largest relative difference of each
    :data:`COMPARED` metric over the steps whose tokens were all the same so far."""
    same = [a == b for a, b in zip(current["tokens"], baseline["tokens"])]
    measured = {"grad": max_relative(current["grad"], baseline["grad"]),
                "loss": relative(current["steps"][0]["metrics"]["loss"], baseline["steps"][0]["metrics"]["loss"]),
                "param": relative_to_update(current["params1"], baseline["params1"], baseline["params0"])}
    later: dict[str, float] = {}
    for i, (a, b) in enumerate(zip(current["steps"], baseline["steps"])):
        if not all(same[: i + 1]):
            break
        for key in COMPARED:
            if key in a["metrics"] and key in b["metrics"]:
                later[key] = max(later.get(key, 0.0), relative(a["metrics"][key], b["metrics"][key]))
    if all(same):
        measured["param_final"] = relative_to_update(current["params"], baseline["params"], baseline["params0"])
    passed = bool(same) and same[0] and all(measured[k] <= TOLERANCE[k] for k in TOLERANCE)
    return {"same_tokens": same, "measured": measured, "later_steps": later, "passed": passed}


def summary(results: list[dict], warmup: int, threads: int) -> dict:
    """Median seconds per step and per phase over every round's steps after ``warmup``; steps/core-hour."""
    kept = [row for r in results for row in r["steps"][warmup:]]
    med = {k: statistics.median(row[k] for row in kept) for k in ("step_s", *PHASES.values())}
    med["other"] = med["step_s"] - sum(med[p] for p in PHASES.values())
    med["steps_per_core_hour"] = 3600 / (med["step_s"] * threads)
    med["n_steps"] = len(kept)
    return med


# ----------------------------------------------------------------------------- the run
def cpu_line() -> str:
    """The CPU's name, family/model and speed-deciding flags, plus the variables holding kernels below
    those flags where any is set (the flags then say what the CPU has, not what ran)."""
    from rlvr.machine import cpu_info, held_note, kernel_limits, kernels

    cpu = cpu_info()
    flags = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in cpu["flags"]]
    note = held_note(kernels(), kernel_limits())
    note = f"; {note}" if note else ""
    return f"{cpu['model_name']} (family {cpu['family']} model {cpu['model']}; {' '.join(flags) or 'no avx2'}){note}"


def run_child(root: Path, out: Path, args, overrides: list[str]) -> dict:
    """One side in a fresh process with ``root`` first on the path; -> its :func:`measure_side` result."""
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": str(args.threads)}
    subprocess.run([sys.executable, __file__, "--side", str(out), "--steps", str(args.steps),
                    "--threads", str(args.threads), "--overrides", json.dumps(overrides)],
                   env=env, check=True, cwd=root)
    return torch.load(out, weights_only=False)


def checkout(path: Path, ref: str) -> Path:
    """A detached ``git worktree`` of ``ref`` at ``path`` (removed by the caller)."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), ref], check=True,
                   capture_output=True)
    return path


def remove_checkouts(roots) -> None:
    """Remove the :func:`checkout` worktrees among ``roots`` (this tree, ``REPO``, stays)."""
    for root in roots:
        if root != REPO:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(root)], check=False)


def quick_base(tmp: Path) -> Path:
    """A random tiny model (1 layer, width 32) saved as a base: the quick mode needs no pretraining."""
    from rlvr.config import load_config
    from rlvr.model.io import save_policy
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer

    torch.manual_seed(0)
    cfg = load_config(None, ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "model.dtype=float32"])
    save_policy(TinyGPT(cfg.model, CharTokenizer().vocab_size), CharTokenizer(), tmp / "base")
    return tmp / "base"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--baseline-ref", default="b87d620")
    ap.add_argument("--current-ref", default="", help="a commit to measure instead of the working tree")
    ap.add_argument("--quick", action="store_true", help="tiny shapes, 2 steps, both sides this tree, in process")
    ap.add_argument("--side", help=argparse.SUPPRESS)  # child mode: write one side's results here
    ap.add_argument("--overrides", default="[]", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side:
        torch.save(measure_side(args.steps, json.loads(args.overrides), args.threads), args.side)
        return {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="step_throughput") as tmp_name:
        tmp = Path(tmp_name)
        if args.quick:
            args.steps, args.warmup, args.rounds, args.prompts, args.group = 2, 1, 1, 4, 4
            extra = [f"model.init_from={quick_base(tmp)}", "sampling.max_new_tokens=12",
                     "sampling.interruption_budget=8", "task.train_size=32",
                     "reward.kind=mix", "reward.weights={verifier: 1.0, neg_entropy: 0.1}"]  # a random model
            # is never right: the entropy term gives its groups unequal rewards, so that the step trains
            overrides = recipe_overrides(args.prompts, args.group, args.dtype, extra)
            sides = {name: [measure_side(args.steps, overrides, args.threads)] for name in ("baseline", "current")}
            baseline_name = "this tree"
        else:
            overrides = recipe_overrides(args.prompts, args.group, args.dtype, [])
            roots = {"baseline": checkout(tmp / "baseline", args.baseline_ref),
                     "current": checkout(tmp / "current", args.current_ref) if args.current_ref else REPO}
            sides = {"baseline": [], "current": []}
            try:
                for r in range(args.rounds):
                    for name, root in roots.items():
                        sides[name].append(run_child(root, tmp / f"{name}{r}.pt", args, overrides))
                        seconds = [row["step_s"] for row in sides[name][-1]["steps"][args.warmup:]]
                        print(f"round {r + 1}/{args.rounds} {name}: {statistics.median(seconds):.3f} s/step")
            finally:
                remove_checkouts(roots.values())
            baseline_name = args.baseline_ref
    return report(args, sides, baseline_name, load_before, os.getloadavg())


def report(args, sides: dict, baseline_name: str, load_before, load_after) -> dict:
    """Print the tables and the check; -> the JSON record (also printed as the last line)."""
    med = {name: summary(results, args.warmup, args.threads) for name, results in sides.items()}
    checks = [numerics(c, b) for c, b in zip(sides["current"], sides["baseline"])]
    ratio = med["current"]["steps_per_core_hour"] / med["baseline"]["steps_per_core_hour"]
    paired = [summary([b], args.warmup, 1)["step_s"] / summary([c], args.warmup, 1)["step_s"]
              for b, c in zip(sides["baseline"], sides["current"])]  # each round's two sides, minutes apart
    print(f"cpu: {cpu_line()}; torch {torch.__version__}, {args.threads} thread(s) a side")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f}")
    print(f"recipe: quickstart at {args.prompts} x {args.group}, {args.dtype}; {args.steps} steps a side "
          f"({args.warmup} warm-up left out) x {args.rounds} round(s); baseline {baseline_name}, "
          f"current {args.current_ref or 'the working tree'}")
    print(f"{'median s':18s} {'baseline':>9s} {'current':>9s}")
    for key in ("step_s", *PHASES.values(), "other"):
        print(f"  {key:16s} {med['baseline'][key]:9.3f} {med['current'][key]:9.3f}")
    print(f"steps per core-hour: baseline {med['baseline']['steps_per_core_hour']:.0f}, "
          f"current {med['current']['steps_per_core_hour']:.0f}; ratio {ratio:.2f}x (of the medians over every "
          f"round; per round {' '.join(f'{r:.2f}' for r in paired)}, their median {statistics.median(paired):.2f}x)")
    for r, check in enumerate(checks):
        measured = ", ".join(f"{k} {v:.1e}" for k, v in check["measured"].items())
        print(f"numerics round {r + 1}: {'PASS' if check['passed'] else 'FAIL'} (tolerance "
              f"{', '.join(f'{k} {v:.0e}' for k, v in TOLERANCE.items())}); measured {measured}; same tokens "
              f"{sum(check['same_tokens'])}/{len(check['same_tokens'])} steps; later steps "
              + ", ".join(f"{k} {v:.1e}" for k, v in check["later_steps"].items()))
    record = {"benchmark": "step_throughput", "cpu": cpu_line(), "threads": args.threads,
              "load": [round(load_before[0], 2), round(load_after[0], 2)], "ratio": round(ratio, 3),
              "ratio_per_round": [round(r, 3) for r in paired],
              "median": {n: {k: round(v, 4) for k, v in m.items()} for n, m in med.items()},
              "numerics": [{"passed": c["passed"], **{k: float(f"{v:.3g}") for k, v in c["measured"].items()}}
                           for c in checks]}
    print(json.dumps(record))
    return record


if __name__ == "__main__":
    main()
