"""``rlvr run``: the main job. Pretrain (or reuse) the tiny base, run the quickstart
recipe, evaluate base vs trained on the held-out split, write the report."""

from __future__ import annotations

HELP = "The main job: base model -> quickstart RL -> base-vs-trained evaluation -> report."
EPILOG = """examples:
  rlvr run                                  # the embedded default: tiny model, arithmetic task
  rlvr run train.steps=30 train.seed=1      # any override of the quickstart recipe
  rlvr run scalerl                          # another recipe through the same pipeline
  rlvr run --resume runs/quickstart-20261202-101500   # finish a run stopped in training or evaluation
output: RUN/ with config.yaml, metrics.jsonl, checkpoints/, eval.json, samples.jsonl,
        base_samples.jsonl, plots/, report.html; a summary table on stdout
"""


def add_arguments(p) -> None:
    from rlvr.commands._common import add_config_args, add_run_dir_args

    add_config_args(p, "quickstart")
    add_run_dir_args(p, "finish this run with its saved config.yaml: training from its last good checkpoint "
                     "(skipped when done), then the evaluation and the report")


def run(args) -> int:
    import sys
    import time
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
    from rlvr.eval.runner import evaluate_pair
    from rlvr.train.checkpoint import checkpoint_step, latest_good_checkpoint
    from rlvr.train.launch import run_training
    from rlvr.train.pretrain import base_model
    from rlvr.train.resume import steps_target

    t0 = time.time()
    if args.resume:
        refuse_config_on_resume(args)
        cfg = check_resumable(Path(args.resume))
    else:
        if args.overwrite and not args.run_dir:
            raise UserError("--overwrite goes with --run-dir DIR (a new run's folder is always new); add --run-dir")
        path, over = split_config_and_overrides(args)
        cfg = load_checked(path or "quickstart", over)
        check_run_dir(args.run_dir, cfg, args.overwrite)  # before the base model is pretrained
    mode = progress_mode(args) or cfg.log.progress
    base = cfg.model.init_from or str(base_model(cfg.model, cfg.pretrain, mode))
    t_base = time.time() - t0
    if not args.resume:
        run_dir = run_training(cfg, run_dir=args.run_dir, progress=mode, overwrite=args.overwrite)
    else:
        run_dir = Path(args.resume)
        last = latest_good_checkpoint(run_dir)
        target = steps_target(run_dir, cfg, None).train.steps
        if last is not None and checkpoint_step(last) >= target:
            print(f"--resume: training of {run_dir} is done (step {checkpoint_step(last)}); evaluating",
                  file=sys.stderr, flush=True)
        else:
            run_training(resume=run_dir, progress=mode)
    t_train = time.time() - t0 - t_base
    trained = latest_good_checkpoint(run_dir)
    result = evaluate_pair(cfg, base, trained, run_dir, progress=mode)
    report = None
    try:  # the numbers are saved already; a failing plot must not fail the run
        from rlvr.report.html import write_report

        report = write_report([run_dir], run_dir / "report.html")
    except Exception as e:  # noqa: BLE001
        from rlvr.log import warn

        warn(f"report failed: {e}")
    print_summary(result, run_dir, report, {"base model": t_base, "RL": t_train, "total": time.time() - t0},
                  plain=args.plain)
    return 0


def print_summary(result: dict, run_dir, report, times: dict, plain: bool = False) -> None:
    """The base-vs-trained table (pass@k, entropies, length) and the lines after it; ``plain``: the
    table as plain text even on a terminal (``--plain``)."""
    from rlvr.console import print_table

    b, t = result["base"], result["trained"]
    ks = sorted(set(b["pass_at_k"]) & set(t["pass_at_k"]), key=int)
    print(f"\nrun: {run_dir}")
    print(f"held-out problems: {b['problems']}, samples per problem: {b['n']}")
    rows = [(f"pass@{k}", b["pass_at_k"][k], t["pass_at_k"][k]) for k in ks]
    rows += [(key, b[key], t[key]) for key in ("token_entropy", "answer_entropy", "mean_num_tokens")
             if b.get(key) is not None and t.get(key) is not None]
    print_table(["metric", "base", "trained", "delta"],
                [[name, f"{base:.3f}", f"{trained:.3f}", f"{trained - base:+.3f}"] for name, base, trained in rows],
                plain=plain)
    s = result.get("support", {})
    if s:
        c = s.get("counts", {})
        print("support: " + ", ".join(f"{k}={v}" for k, v in c.items()))
    if result.get("crossover"):
        print(f"crossover k (base above trained beyond the 95% interval): {result['crossover']['text']}")
    for line in retention_lines(result.get("retention") or {}):
        print(line)
    if result.get("machine"):
        from rlvr.machine import machine_line

        print("machine: " + machine_line(result["machine"]))
    print("time: " + ", ".join(f"{k} {v:.0f}s" for k, v in times.items()))
    if report:
        print(f"report: {report}")


def retention_lines(ret: dict) -> list[str]:
    """``retention strings greedy accuracy 0.420 [0.355, 0.490] -> 0.405 [...], delta -0.015
    [-0.060, +0.030]`` per retention task (95% intervals over problems; the delta's is paired)."""

    def ci(r: dict) -> str:
        return f" [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]" if r.get("ci") else ""

    out = []
    for name, r in (ret.get("trained") or {}).items():
        rb = ret["base"][name]
        line = f"retention {name} greedy accuracy {rb['accuracy']:.3f}{ci(rb)} -> {r['accuracy']:.3f}{ci(r)}"
        d = (ret.get("delta") or {}).get(name)
        if d:
            line += f", delta {d['delta']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]"
        out.append(line)
    return out
