"""``rlvr pretrain``: train the tiny base model from scratch (milestone checkpoints)."""

from __future__ import annotations

HELP = "Pretrain the tiny base model from scratch on the synthetic corpus."
EPILOG = """examples:
  rlvr pretrain                                  # the default base, cached for `rlvr run`
  rlvr pretrain quickstart pretrain.tokens=500000 --out runs/base-small
  rlvr pretrain pretrain.milestones=[0.1,0.25,0.5,1.0] --out runs/base
output: DIR/milestone_<frac>/ checkpoints, DIR/final/, DIR/metrics.jsonl, DIR/pretrain.json
"""


def add_arguments(p) -> None:
    from rlvr.commands._common import add_config_args

    add_config_args(p, "quickstart")
    p.add_argument("--out", help="output directory, new or empty (default: the cache used by `rlvr run`)")
    p.add_argument("--overwrite", action="store_true", help="with --out: delete what the folder holds first")


def run(args) -> int:
    from rlvr.commands._common import check_output, load_checked, progress_mode, split_config_and_overrides
    from rlvr.errors import UserError
    from rlvr.paths import claim_new_dir
    from rlvr.train.pretrain import base_model, pretrain

    path, over = split_config_and_overrides(args)
    cfg = load_checked(path, over)
    mode = progress_mode(args) or cfg.log.progress
    if cfg.model.kind != "tiny":
        raise UserError("rlvr pretrain trains the tiny model only; set model.kind=tiny")
    if args.overwrite and not args.out:
        raise UserError("--overwrite goes with --out DIR (the cache is managed by rlvr); add --out")
    if args.out:
        check_output(args.out, "--out", "dir")
        claim_new_dir(args.out, args.overwrite, "--out")  # a second pretraining would append to metrics.jsonl
    model_cfg = cfg.model.with_dtype("float32")  # pretraining is float32 whatever model.dtype (RL's precision)
    final = pretrain(model_cfg, cfg.pretrain, args.out, mode) if args.out else base_model(model_cfg, cfg.pretrain, mode)
    print(final)
    return 0
