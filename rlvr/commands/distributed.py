"""torchrun entry point of data-parallel training (see :mod:`rlvr.train.distributed`)::

    torchrun --nproc_per_node=2 -m rlvr.commands.distributed quickstart train.steps=20
    torchrun --nproc_per_node=2 -m rlvr.commands.distributed --resume runs/quickstart-...

A non-empty ``--run-dir`` is refused unless ``--overwrite``; ``--resume`` takes no config or overrides.

Rank 0 writes the run directory; rank r > 0 writes ``RUN/ranks/rank<r>``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from rlvr.commands._common import (
    add_config_args,
    add_run_dir_args,
    check_resumable,
    load_checked,
    refuse_config_on_resume,
    split_config_and_overrides,
)
from rlvr.errors import UserError, os_error_line
from rlvr.paths import claim_new_dir
from rlvr.train.distributed import init_from_env
from rlvr.train.loop import new_run_dir, train


def main(argv: list[str] | None = None) -> int:
    """``-m rlvr.commands.distributed CONFIG [overrides] [--run-dir D [--overwrite] | --resume D]``."""
    ap = argparse.ArgumentParser(prog="rlvr.commands.distributed", description="data-parallel RL training")
    add_config_args(ap, "quickstart")
    add_run_dir_args(ap, "continue this run from its last good checkpoint, with its saved config.yaml")
    args = ap.parse_args(argv)
    if args.resume:
        refuse_config_on_resume(args)
        cfg = check_resumable(Path(args.resume))
    else:
        cfg = load_checked(*split_config_and_overrides(args))
        if args.run_dir and not args.overwrite:
            claim_new_dir(args.run_dir)  # every rank refuses a used folder before any process group exists
    if cfg.pipeline.mode == "async":
        raise UserError("data parallel runs the synchronous step; set pipeline.mode=sync")
    rank, world = init_from_env(cfg.pipeline.timeout_s)
    try:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        root = [args.resume or args.run_dir or str(new_run_dir(cfg))]
        if rank == 0 and args.overwrite:
            claim_new_dir(root[0], overwrite=True)
        dist.broadcast_object_list(root, src=0)  # also the barrier after rank 0 emptied the folder
        mine = root[0] if rank == 0 else os.path.join(root[0], "ranks", f"rank{rank}")
        mode = None if rank == 0 else "none"
        if args.resume:
            out = train(resume=mine, progress=mode)
        else:
            out = train(cfg, run_dir=mine, progress=mode, overwrite=None)  # claimed above
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
    except OSError as e:  # a read-only folder, a full disk: one line, as `rlvr` prints it
        print(f"error: {os_error_line(e)}", file=sys.stderr)
        sys.exit(1)
