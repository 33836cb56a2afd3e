"""``rlvr excursions``: pretraining checkpoints x post-training pipelines (RL, SFT, SFT-Gold,
SFT->RL, parallel averaging, distillation) on equal budgets; a table and one plot per metric. A front
end over the experiment framework (:mod:`rlvr.experiments.excursions_grid`)."""

from __future__ import annotations

HELP = "Grid of pretraining checkpoints x pipelines (rl sft sft_gold sft_then_rl parallel distill)."
EPILOG = """examples:
  rlvr excursions                                   # the default grid (3 milestones x 6 pipelines)
  rlvr excursions excursions excursions.steps=8 excursions.milestones=[0.5,1.0]
  rlvr excursions excursions excursions.pipelines=[rl,parallel] excursions.out_dir=runs/exc2
  rlvr excursions excursions excursions.teacher=runs/my_rl/checkpoints/step_000060
The excursions section holds how the pipelines train (steps sft_lr sft_batch_size sft_data
parallel_weight teacher) and the grid (milestones pipelines eval_problems eval_samples
eval_temperature retention_problems out_dir).
Running it again reuses every finished cell (a model or an evaluation whose key matches); an out_dir
holding anything else (other files, a grid of another config) is refused unless --overwrite.
output: OUT/models/m<frac>_<pipeline>/{done.json,metrics.jsonl,model/}, OUT/evals/<protocol>/<model>/,
        OUT/table.md, OUT/table.json, OUT/plots/<metric>.png   (OUT = excursions.out_dir)
"""


def add_arguments(p) -> None:
    from rlvr.commands._common import add_config_args

    add_config_args(p, "excursions")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: fastest for the tiny model on a shared CPU)")
    p.add_argument("--no-plots", action="store_true", help="skip the plots")
    p.add_argument("--overwrite", action="store_true", help="excursions.out_dir may hold other files (deleted) or "
                   "cells of another config (recomputed); it says what it removes")


def run(args) -> int:
    import torch

    from rlvr.commands._common import load_checked, progress_mode, require_path, split_config_and_overrides
    from rlvr.config import load_excursions
    from rlvr.console import print_table
    from rlvr.errors import UserError
    from rlvr.experiments.excursions_grid import run_grid, table_cells

    if args.threads < 1:
        raise UserError(f"--threads {args.threads}: must be >= 1; e.g. --threads 1")
    torch.set_num_threads(args.threads)
    path, over = split_config_and_overrides(args)
    cfg = load_checked(path, over)
    _, grid = load_excursions(path, over)  # the grid keys of its excursions section
    if cfg.excursions.teacher:
        require_path(cfg.excursions.teacher, "excursions.teacher:", "pass a checkpoint directory, or \"\" for "
                     "the rl pipeline's result", hub_ok=True)
    quiet = args.quiet
    table = run_grid(cfg, grid, path or "", over, progress_mode(args) or "plain", note=None if quiet else print,
                     overwrite=args.overwrite)
    from pathlib import Path

    out = Path(grid.out_dir)
    if not args.no_plots:
        plot_table(table, out / "plots")
    if not quiet:
        head, cells = table_cells(table)
        print_table(head, cells, align="rl" + "r" * (len(head) - 2), plain=args.plain)
        print(f"\n{table['budget_note']}\n")
        reused = sum(r["reused"] for r in table["rows"])
        n = len(table["rows"])
        print(f"{n} cells ({reused} reused) in {table['wall_s']:.0f}s; table: {out / 'table.md'}")
    return 0


def plot_table(table: dict, plots_dir) -> list:
    """One PNG per metric: the metric against the pretraining milestone, one line per pipeline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlvr.experiments.excursions_grid import metric_names

    rows = table["rows"]
    plots_dir.mkdir(parents=True, exist_ok=True)
    pipelines = list(dict.fromkeys(r["pipeline"] for r in rows))
    paths = []
    for metric in metric_names(rows):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for p in pipelines:
            pts = sorted((r["milestone"], r[metric]) for r in rows if r["pipeline"] == p and metric in r)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=p, linestyle="--" if p == "base" else "-")
        ax.set_xlabel("pretraining milestone (fraction of tokens)")
        ax.set_ylabel(metric)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = plots_dir / f"{metric.replace('@', '_at_')}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
