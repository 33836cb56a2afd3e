"""Is the RL step bit-identical to another commit's? Six steps of seven configurations, every metric
(wall times aside) and a SHA-256 of every weight, compared between two captures.

The configurations cover every part of the step: quickstart (CISPO, batch std, FP32 logits, a mixed
reward), GRPO with a KL anchor, an entropy bonus and two PPO epochs, DAPO (dynamic sampling, overlong
shaping), WAPO with overlong shaping, two mismatch corrections (token_mis, seq_tis) and data parallel
(gloo, one rank); 2 mini-batches of micro-batches each, one torch thread, from a small base pretrained
with a fixed seed into ``--base`` (reused when present). Capture at each commit (e.g. a ``git worktree``
of the other one, run with ``PYTHONPATH`` at its root), then compare:

    python benchmarks/checks/step_identity.py capture /tmp/a.json --base /tmp/step_base
    PYTHONPATH=/tmp/old python benchmarks/checks/step_identity.py capture /tmp/b.json --base /tmp/step_base
    python benchmarks/checks/step_identity.py compare /tmp/b.json /tmp/a.json

``compare`` prints every differing metric (run, step, key, both values) and differing weights, then
IDENTICAL or the count; exit 1 on any difference. Issue 46 measured this at b87d620: identical but for
the intended ``zero_var_frac`` change.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

STEPS = 6
WALL = {"wall_s", "gen_s", "train_s", "score_s", "scored_per_s", "gen_busy_s", "gen_idle_s", "trainer_busy_s",
        "trainer_idle_s", "samples_per_s", "tokens_per_s"}
SHAPE = ["model.n_layer=2", "model.d_model=64", "model.n_head=2"]
MIX = ["reward.kind=mix", "reward.weights={verifier: 1.0, neg_entropy: 0.1}"]
RUNS = {
    "quickstart": ("quickstart", MIX),
    "grpo": ("grpo", ["loss.kl_coef=0.01", "loss.entropy_coef=0.01", "algo.ppo_epochs=2"]),
    "dapo": ("dapo", ["algo.overlong_cache=4"]),
    "wapo_overlong": ("grpo", ["loss.name=wapo", "loss.aggregation=", "loss.std_norm=", "algo.overlong_cache=4"]),
    "mismatch": ("quickstart", [*MIX, "loss.is_correction=token_mis", "loss.is_cap=1.0"]),
    "mismatch_seq": ("grpo", ["loss.is_correction=seq_tis", "loss.is_cap=2.0"]),
    "data_parallel": ("quickstart", [*MIX, "loss.kl_coef=0.01"]),
}


def overrides(base: Path, extra: list[str]) -> list[str]:
    return [*SHAPE, f"model.init_from={base}", "task.train_size=48", "algo.prompts_per_step=8",
            "algo.group_size=4", "algo.minibatches=2", "algo.micro_batch_size=4", "sampling.max_new_tokens=24",
            "sampling.interruption_budget=16", "optim.lr=3e-3", "optim.warmup_steps=2", "log.progress=none", *extra]


def pretrained(base: Path) -> Path:
    final = base / "final"
    if not final.exists():
        subprocess.run([sys.executable, "-c", "import sys; from rlvr.cli import main; sys.exit(main(sys.argv[1:]))",
                        "pretrain", "quickstart", *SHAPE, "pretrain.tokens=2000000", "--quiet", "--out", str(base)],
                       check=True)
    return final


def capture(out: Path, base: Path) -> None:
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("RLVR_AUTO_DTYPE", "float32")
    import torch.distributed as dist

    from rlvr.config import load_config
    from rlvr.train.distributed import DataParallelSharding, DataParallelSource
    from rlvr.train.state import build_policy, build_state
    from rlvr.train.step import LOCAL, SyncSource, rl_step

    init = pretrained(base)
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (recipe, extra) in RUNS.items():
            cfg = load_config(recipe, overrides(init, extra))
            st = build_state(cfg, *build_policy(cfg, "none"))
            parallel = name == "data_parallel"
            if parallel:
                dist.init_process_group("gloo", init_method=f"file://{Path(tmp) / 'pg'}", rank=0, world_size=1,
                                        timeout=datetime.timedelta(seconds=60))
            source, sharding = ((DataParallelSource(st), DataParallelSharding(cfg.pipeline.bucket_mb)) if parallel
                                else (SyncSource(), LOCAL))
            try:
                rows = [{k: v for k, v in rl_step(st, STEPS, source, sharding).items() if k not in WALL}
                        for _ in range(STEPS)]
            finally:
                source.close()
                if parallel:
                    dist.destroy_process_group()
            weights = {n: hashlib.sha256(p.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]
                       for n, p in st.model.state_dict().items()}
            result[name] = {"metrics": rows, "weights": weights}
            print(f"{name}: captured", file=sys.stderr)
    out.write_text(json.dumps(result, indent=1, sort_keys=True, default=str))


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def compare(old: dict, new: dict) -> int:
    differences = 0
    for run in old:
        if run not in new:
            print(f"{run}: missing")
            differences += 1
            continue
        for i, (a, b) in enumerate(zip(old[run]["metrics"], new[run]["metrics"]), start=1):
            for key in sorted(set(a) | set(b)):
                va, vb = a.get(key, "<absent>"), b.get(key, "<absent>")
                if not _same(va, vb):
                    print(f"{run} step {i} {key}: {va!r} -> {vb!r}")
                    differences += 1
        changed = [n for n in old[run]["weights"] if old[run]["weights"][n] != new[run]["weights"].get(n)]
        if changed:
            print(f"{run}: {len(changed)} weight tensors differ, e.g. {changed[:3]}")
            differences += 1
    print("IDENTICAL" if not differences else f"{differences} differences")
    return differences


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    cap = sub.add_parser("capture", help="run the seven configurations, write their metrics and weight digests")
    cap.add_argument("out", type=Path)
    cap.add_argument("--base", type=Path, default=Path(tempfile.gettempdir()) / "rlvr_step_identity_base",
                     help="folder of the small pretrained base (made on first use, then reused)")
    cmp = sub.add_parser("compare", help="compare two captures: OLD NEW")
    cmp.add_argument("old", type=Path)
    cmp.add_argument("new", type=Path)
    args = ap.parse_args(argv)
    if args.what == "capture":
        capture(args.out, args.base)
        return 0
    return 1 if compare(json.loads(args.old.read_text()), json.loads(args.new.read_text())) else 0


if __name__ == "__main__":
    sys.exit(main())
