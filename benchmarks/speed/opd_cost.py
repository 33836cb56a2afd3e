"""What on-policy distillation costs per step against the RL step (docs/methods/on_policy_distillation.md,
"Cost"): the same process, the same policy, the same sampled batch, the same shapes.

One batch is sampled and scored once from the embedded default's cached tiny base (``rlvr run``'s
model; ``--prompts`` x ``--group`` completions, ``--tokens`` new tokens at most), then the update
(:func:`rlvr.train.step.train_on`: forward, objective, backward, optimiser) is timed on a fresh copy of
the policy for each loss, alternating, ``--repeats`` times:

* RL: GRPO's clipped surrogate, token-mean (the RL step's update);
* OPD: ``loss.name=opd`` (reverse KL over the full vocabulary) with a teacher of the student's own
  shapes (the base itself: a teacher's cost depends on its size, not on its weights), i.e. one more
  forward pass without gradient and the divergence over V logits per token.

Both configs keep every group (``algo.zero_var_filter=false``), so they train on the same rows. It
prints the medians, the update ratio OPD / RL, and the whole-step ratio (sampling + scoring, which
distillation leaves unchanged, measured once here, plus the update), with the CPU model, its flags,
the torch threads and the load average before and after. Run it niced, on an otherwise idle machine
if you can:

    nice -n 5 python benchmarks/speed/opd_cost.py [--repeats 7] [--prompts 16] [--group 8] [--threads 1]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from rlvr.config import load_config
from rlvr.machine import machine_info, machine_line
from rlvr.model.io import save_policy
from rlvr.train.state import build_policy, build_state, sampling_generator
from rlvr.train.step import rollout, train_on


def configs(teacher: Path, args) -> dict:
    shared = [f"algo.prompts_per_step={args.prompts}", f"algo.group_size={args.group}", "algo.minibatches=1",
              f"sampling.max_new_tokens={args.tokens}", "train.eval_every=0", "log.progress=none"]
    return {"rl": load_config("opd", [*shared, "loss.name=grpo", "loss.teacher="]),
            "opd": load_config("opd", [*shared, f"loss.teacher={teacher}"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        teacher_dir = Path(tmp) / "teacher"
        cfgs = configs(teacher_dir, args)
        base, tok = build_policy(cfgs["rl"], progress="none")
        save_policy(base, tok, teacher_dir)
        states = {name: build_state(cfg, copy.deepcopy(base), tok) for name, cfg in cfgs.items()}
        st = states["rl"]
        t0 = time.perf_counter()
        batch = rollout(st, st.next_problems(args.prompts), sampling_generator(0, 0), "opd_cost")
        collect_s = time.perf_counter() - t0
        times: dict[str, list[float]] = {name: [] for name in states}
        for _ in range(args.repeats + 1):  # the first round warms up and is dropped
            for name, state in states.items():
                trial = copy.copy(state)
                trial.model = copy.deepcopy(base)
                trial.opt = torch.optim.AdamW(trial.model.parameters(), lr=cfgs[name].optim.lr)
                t0 = time.perf_counter()
                metrics = train_on(trial, batch)
                times[name].append(time.perf_counter() - t0)
                assert "grad_norm" in metrics, name
    rl, opd = (statistics.median(times[name][1:]) for name in ("rl", "opd"))
    rows = batch.rollouts.size
    print(f"batch: {rows} rows x {batch.rollouts.completion_ids.shape[1]} tokens, "
          f"{int(batch.rollouts.loss_mask.sum())} loss tokens; V = {base.lm_head.weight.shape[0]}")
    print(f"sample + score once: {collect_s:.3f} s")
    print(f"update, median of {args.repeats}: RL (grpo) {rl:.3f} s, OPD (reverse KL) {opd:.3f} s")
    print(f"ratio OPD / RL: update {opd / rl:.2f}x, whole step {(collect_s + opd) / (collect_s + rl):.2f}x")
    print("machine: " + machine_line(machine_info("float32", torch.device("cpu"))))
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}; "
          f"nice {os.nice(0)}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")


if __name__ == "__main__":
    main()
