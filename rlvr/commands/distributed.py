"""torchrun entry point of data-parallel training (see :mod:`rlvr.train.distributed`)::

    torchrun --nproc_per_node=2 -m rlvr.commands.distributed quickstart train.steps=20
    torchrun --nproc_per_node=2 -m rlvr.commands.distributed --resume runs/quickstart-...

Rank 0 writes the run directory; rank r > 0 writes ``RUN/ranks/rank<r>``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist

from rlvr.config import load_config
from rlvr.errors import UserError
from rlvr.train.distributed import init_from_env
from rlvr.train.loop import new_run_dir, train
from rlvr.train.validate import validate


def main(argv: list[str] | None = None) -> int:
    """``-m rlvr.commands.distributed CONFIG [overrides] [--run-dir D | --resume D]``."""
    ap = argparse.ArgumentParser(prog="rlvr.commands.distributed", description="data-parallel RL training")
    ap.add_argument("config", nargs="?", default="quickstart")
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--run-dir")
    ap.add_argument("--resume", metavar="RUN_DIR")
    args = ap.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    validate(cfg)
    if cfg.pipeline.mode == "async":
        raise UserError("data parallel runs the synchronous step; set pipeline.mode=sync")
    rank, world = init_from_env(cfg.pipeline.timeout_s)
    try:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        root = [args.resume or args.run_dir or str(new_run_dir(cfg))]
        dist.broadcast_object_list(root, src=0)
        mine = root[0] if rank == 0 else os.path.join(root[0], "ranks", f"rank{rank}")
        mode = None if rank == 0 else "none"
        out = train(resume=mine, progress=mode) if args.resume else train(cfg, run_dir=mine, progress=mode)
        dist.barrier()
        if rank == 0:
            print(out)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
