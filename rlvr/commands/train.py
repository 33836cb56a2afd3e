"""``rlvr train``: run any recipe; resume a run; compare loss variants on one budget."""

from __future__ import annotations

HELP = "Run an RL recipe (YAML + overrides), resume a run, or sweep loss variants."
EPILOG = """examples:
  rlvr train grpo                                   # a built-in recipe: grpo dapo scalerl quickstart
  rlvr train configs/dapo.yaml train.steps=100 loss.eps_high=0.3
  rlvr train --resume runs/quickstart-20261202-101500
  rlvr train --resume runs/quickstart-20261202-101500 --steps 200
  rlvr train quickstart --variants grpo,dapo,cispo,gspo,wapo --seeds 0,1,2
output: RUN/config.yaml, RUN/metrics.jsonl, RUN/checkpoints/step_*/ ; a sweep writes sweep.json
"""


def add_arguments(p) -> None:
    from rlvr.commands._common import add_config_args, add_run_dir_args

    add_config_args(p, "quickstart")
    add_run_dir_args(p, "continue this run from its last good checkpoint, with its saved config.yaml")
    p.add_argument("--steps", type=int, help="with --resume: new total number of steps (recorded in "
                   "RUN/resume.json; config.yaml is not changed)")
    p.add_argument("--variants", help="comma-separated loss names: one run each on the same budget")
    p.add_argument("--seeds", default="0", help="with --variants: comma-separated seeds (default 0)")


def run(args) -> int:
    from pathlib import Path

    from rlvr.commands._common import (
        check_resumable,
        check_run_dir,
        load_checked,
        progress_mode,
        refuse_config_on_resume,
        split_config_and_overrides,
    )
    from rlvr.errors import UserError
    from rlvr.train.launch import run_training

    mode = progress_mode(args)
    if args.resume:
        refuse_config_on_resume(args)
        if args.variants:
            raise UserError("--variants starts a sweep of new runs; --resume continues one run: drop one")
        check_resumable(Path(args.resume), args.steps)
        run_dir = run_training(resume=args.resume, progress=mode, extra_steps=args.steps)
        print(run_dir)
        return 0
    if args.steps is not None:
        raise UserError("--steps goes with --resume; for a new run use train.steps=N")
    path, over = split_config_and_overrides(args)
    if args.variants:
        from rlvr.train.sweep import print_sweep, sweep_variants

        if args.run_dir:
            raise UserError("--variants writes one run per variant under train.out_dir/sweep-<name>; drop "
                            "--run-dir (set train.out_dir=DIR to move the sweep)")

        try:
            seeds = [int(s) for s in args.seeds.split(",")]
        except ValueError:
            raise UserError(f"--seeds must be comma-separated integers, got {args.seeds!r}") from None
        load_checked(path, over)
        result = sweep_variants(path, over, args.variants.split(","), seeds, mode, overwrite=args.overwrite)
        print_sweep(result, args.plain)
        return 0
    cfg = load_checked(path, over)
    if args.overwrite and not args.run_dir:
        raise UserError("--overwrite goes with --run-dir DIR (a new run's folder is always new); add --run-dir")
    check_run_dir(args.run_dir, cfg, args.overwrite)
    print(run_training(cfg, run_dir=args.run_dir, progress=mode, overwrite=args.overwrite))
    return 0
