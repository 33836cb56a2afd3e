"""``rlvr eval``: pass@k, support, entropy from samples files, or by sampling a checkpoint."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rlvr.console import print_table
from rlvr.errors import UserError
from rlvr.paths import atomic_write

HELP = "Evaluate pass@k, support and entropy from samples files or a checkpoint."
EPILOG = """examples:
  rlvr eval --samples runs/a/samples.jsonl
  rlvr eval --samples trained.jsonl --base-samples base.jsonl --json eval.json --plots plots/
  rlvr eval --samples out/completions/completions_00100.parquet --task gsm8k      # TRL's table
  rlvr eval --samples val_dumps/100.jsonl                                            # verl's dump
  rlvr eval --samples out/completions --plots plots/                  # TRL run folder: pass@k by step
  rlvr eval --samples val_dumps/100.jsonl --correct-threshold 1              # partial scores (format_score)
  rlvr eval --samples study_counts.csv --base-samples base_counts.csv --format counts
  rlvr eval --samples mine.csv --format table --columns prompt=q,completion=a,correct=ok
  rlvr eval --samples rl_s0.jsonl rl_s1.jsonl rl_s2.jsonl                  # per seed and seed-level interval
  rlvr eval --samples rl_s0.jsonl rl_s1.jsonl --base-samples base.jsonl   # paired difference per k over seeds
  rlvr eval runs/a/checkpoints/step_100 --task gsm8k --n 64 --problems 100 --out runs/a
  rlvr eval runs/a/checkpoints/step_100 --base Qwen/Qwen2.5-0.5B --task math500 --n 256 --out runs/a
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", nargs="?", help="checkpoint to sample from (omit with --samples)")
    src = parser.add_argument_group("from samples files (no model)")
    src.add_argument("--samples", nargs="+", metavar="FILE",
                     help="samples file of the (trained) model, or a run folder (TRL completions/, "
                     "verl / SkyRL / NeMo-RL / prime-rl dump folders): pass@k per logged step and pooled; several "
                     "files (one per seed, the same problems): pass@k per seed and over seeds with the seed-level "
                     "interval")
    src.add_argument("--base-samples", nargs="+", metavar="FILE",
                     help="samples file of the base model: adds support and crossover k; with several --samples "
                     "files: one file per seed (paired in order) or one shared, for the paired pass@k difference "
                     "per seed and over seeds")
    src.add_argument("--format", default="auto",
                     choices=["auto", "rlvr", "trl", "verl", "prime-rl", "skyrl", "nemo-rl", "counts", "table"],
                     help="samples format (default auto: by the columns): rlvr, TRL's completions table, "
                          "verl's rollout/validation dump, prime-rl / SkyRL / NeMo-RL dumps, per-problem counts "
                          "(problem, n, correct), or any table with --columns")
    src.add_argument("--columns", metavar="FIELD=COL,...",
                     help="column mapping for --samples/--base-samples: fields problem_id, prompt, completion, "
                          "answer (the model's), gold (the reference), correct, reward; counts: problem_id, n, "
                          "correct (overrides the format's own)")
    src.add_argument("--correct-threshold", metavar="T|max",
                     help="when the correctness (or reward) column holds partial scores: a sample is correct when "
                          "its score >= T, or with 'max' when it equals the file's largest score (without it such "
                          "a column is an error)")
    src.add_argument("--reverify", action="store_true",
                     help="with --task: score every completion with the task's verifier, overriding the file's "
                          "correctness")
    out = parser.add_argument_group("outputs")
    out.add_argument("--json", help="write the eval.json result here")
    out.add_argument("--plots", help="write pass_at_k.png, entropy.png (and support.png) in this folder")
    out.add_argument("--ks", help="comma-separated k values (default: powers of two up to n, plus n)")
    src.add_argument("--read-workers", type=int, metavar="N",
                     help="processes that read one rlvr samples file, each a byte range (default on Linux: the "
                          "cores, at most 4, for a file of 256 MB or more, else 1; 1: one process); the result is the "
                          "same")
    out.add_argument("--quiet", action="store_true",
                     help="no progress line while reading a long samples file (none is shown off a terminal)")
    gen = parser.add_argument_group("from a checkpoint (samples with a model)")
    gen.add_argument("--base", help="base checkpoint: sampled too, and scores perplexity of both")
    gen.add_argument("--task", help="task name, e.g. gsm8k, math500, synthetic (default for a checkpoint of an "
                     "rlvr run: the run's task.name); with --samples: score the completions with its verifier "
                     "where the file has no correctness column")
    gen.add_argument("--split", default="heldout", help="task split (default: heldout)")
    gen.add_argument("--n", type=int, default=64, help="samples per problem (default: 64)")
    gen.add_argument("--problems", type=int, default=100, help="number of problems (default: 100)")
    gen.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default: 1.0)")
    gen.add_argument("--top-p", type=float, default=1.0, help="nucleus top-p (default: 1.0)")
    gen.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed (default: 0)")
    gen.add_argument("--out", help="folder for samples.jsonl, base_samples.jsonl and eval.json")


def _parse_ks(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(k) for k in text.split(",") if k.strip()]
    except ValueError:
        raise UserError(f"--ks must be comma-separated integers, got {text!r}; e.g. --ks 1,4,16,64") from None


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as indented JSON atomically (:func:`rlvr.paths.atomic_write`)."""
    return atomic_write(path, json.dumps(obj, indent=2, allow_nan=False) + "\n")


def _check_paths(args: argparse.Namespace) -> None:
    """The inputs exist (before any other check: a typo in a path is the likeliest mistake), and the
    outputs can be written (before any sampling)."""
    from rlvr.commands._common import check_output, require_path

    if args.checkpoint:
        require_path(args.checkpoint, "checkpoint", "pass a checkpoint directory (e.g. RUN/checkpoints/step_100) "
                     "or a hub name", hub_ok=True)
    if args.base:
        require_path(args.base, "--base", "pass a checkpoint directory or a hub name", hub_ok=True)
    for flag, path in [*(("--samples", p) for p in args.samples or []),
                       *(("--base-samples", p) for p in args.base_samples or [])]:
        if path:
            require_path(path, flag, "pass a samples file (or a run's dump folder) written by `rlvr eval`, "
                         "`rlvr run` or a peer framework")
    for flag, path, kind in (("--json", args.json, "file"), ("--plots", args.plots, "dir"), ("--out", args.out, "dir")):
        if path:
            check_output(path, flag, kind)


def saved_task(checkpoint: str) -> tuple[str, Path] | None:
    """(task name, config file) of the run a checkpoint belongs to: ``task.name`` in the
    ``config.yaml`` of the checkpoint folder itself, its parent or its run (``RUN/checkpoints/step_N``);
    None when there is none or it names no task."""
    import yaml

    d = Path(checkpoint)
    for folder in (d, d.parent, d.parent.parent):
        config = folder / "config.yaml"
        if not config.is_file():
            continue
        try:
            data = yaml.safe_load(config.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return None
        task = data.get("task") if isinstance(data, dict) else None
        name = task.get("name") if isinstance(task, dict) else None
        return (name, config) if isinstance(name, str) and name else None
    return None


def _check_mode(args: argparse.Namespace) -> None:
    if args.checkpoint and args.samples:
        raise UserError("give either a CHECKPOINT or --samples, not both; drop one")
    if not args.checkpoint and not args.samples:
        raise UserError("nothing to evaluate; pass --samples FILE or a CHECKPOINT")
    if args.base_samples and not args.samples:
        raise UserError("--base-samples needs --samples (the trained model's file); add it")
    if args.samples and args.base:
        raise UserError("--base samples a model; with --samples use --base-samples FILE instead")
    if args.checkpoint and not args.task:
        saved = saved_task(args.checkpoint)
        if saved is None:
            raise UserError("sampling a checkpoint needs a task; pass --task NAME (e.g. --task gsm8k)")
        args.task, config = saved
        print(f"task: {args.task} (from {config}; --task overrides)", file=sys.stderr)
    if args.checkpoint and not args.out:
        raise UserError(
            "sampling a checkpoint needs an output folder; pass --out DIR (e.g. the run directory)"
        )
    if args.read_workers is not None and args.read_workers < 1:
        raise UserError(f"--read-workers must be >= 1, got {args.read_workers}; 1 reads in this process alone")
    if args.checkpoint and (args.n < 1 or args.problems < 1):
        raise UserError(f"--n and --problems must be >= 1, got {args.n} and {args.problems}; raise them")


def _how(args: argparse.Namespace) -> dict[str, Any]:
    """How --samples files are read: format, columns, task (for its verifier), correctness rule."""
    from rlvr.eval.correctness import parse_rule

    task = None
    if getattr(args, "task", None):
        from rlvr.tasks.registry import get_task

        task = get_task(args.task)
    return dict(fmt=getattr(args, "format", "auto"), columns=getattr(args, "columns", None), task=task,
                rule=parse_rule(getattr(args, "correct_threshold", None)), reverify=getattr(args, "reverify", False),
                quiet=getattr(args, "quiet", False))


def several_seeds(args: argparse.Namespace) -> bool:
    """Whether --samples / --base-samples name several seeds' files (:mod:`rlvr.commands.eval_seeds`)."""
    return len(args.samples or []) > 1 or len(args.base_samples or []) > 1


def _from_samples(args: argparse.Namespace, ks: list[int] | None) -> dict[str, Any]:
    """The result from samples files or run folders, each read once into per-problem tallies
    (:mod:`rlvr.eval.tally`): memory grows with problems and distinct answers, not with the file."""
    from rlvr.eval.importers import iter_imported
    from rlvr.eval.run_folders import step_files
    from rlvr.eval.steps import summarize_step_tallies
    from rlvr.eval.summary import compare_tallies, summarize_tallies
    from rlvr.eval.tally import tally_rows

    how = _how(args)
    if Path(args.samples).is_dir() and not args.base_samples:  # a run folder: per logged step and pooled
        by_step = {step: tally_rows(row for f in files for row in iter_imported(f, **how))
                   for step, files in step_files(args.samples).items()}
        return summarize_step_tallies(by_step, ks, seed=args.seed)
    trained = _tallies(args.samples, how, args.read_workers)
    if args.base_samples:
        return compare_tallies(_tallies(args.base_samples, how, args.read_workers), trained, ks, seed=args.seed)
    return summarize_tallies(trained, ks, seed=args.seed)


def _tallies(path: str, how: dict[str, Any], workers: int | None) -> Any:
    """The per-problem tallies of one samples file or folder: an rlvr samples file by ``workers``
    processes over byte ranges (:mod:`rlvr.eval.parallel_read`; default by its size and the cores;
    one: straight from its rows, without the importers' layers), anything else (and anything with
    ``--reverify``, which the importers check) in one pass of this process."""
    from rlvr.eval.importers import iter_any, not_utf8_error, reads_as_rlvr_samples
    from rlvr.eval.parallel_read import default_workers, tally_samples_file
    from rlvr.eval.tally import tally_rows

    try:
        if not how["reverify"] and Path(path).is_file() and reads_as_rlvr_samples(path, how["fmt"], how["columns"]):
            return tally_samples_file(path, default_workers(path) if workers is None else workers, how["quiet"])
    except UnicodeDecodeError as e:  # as iter_any says it
        raise not_utf8_error(path, e) from None
    return tally_rows(iter_any(path, **how))


def _machine(args: argparse.Namespace) -> dict[str, Any]:
    """The machine record of a checkpoint evaluation: the trained checkpoint's precision (its saved
    model.dtype, auto resolved as loading resolves it), and the base's when it differs."""
    from rlvr.machine import machine_info
    from rlvr.model.io import resolve_device
    from rlvr.model.precision import checkpoint_precision

    dev = resolve_device("auto")  # where generate_samples puts the models
    info = machine_info(checkpoint_precision(args.checkpoint, dev).dtype, dev)
    if args.base:
        base = checkpoint_precision(args.base, dev).dtype
        if base != info["precision"]:
            info["base_precision"] = base
    return info


def _from_checkpoint(args: argparse.Namespace, ks: list[int] | None) -> dict[str, Any]:
    from rlvr.eval.generate import perplexity_under
    from rlvr.eval.stream import generate_samples
    from rlvr.eval.summary import compare, summarize
    from rlvr.train.tiny_hf import build_if_tiny

    build_if_tiny(args.checkpoint, args.base or "")  # a tiny-hf:<arch> model is built on first use
    out = Path(args.out)
    gen = dict(
        task=args.task,
        split=args.split,
        n=args.n,
        num_problems=args.problems,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
    )
    trained = generate_samples(args.checkpoint, **gen, out=out / "samples.jsonl")  # streamed, resumable
    if not args.base:
        result = summarize(trained, ks, seed=args.seed)
    else:
        base = generate_samples(args.base, **gen, out=out / "base_samples.jsonl")
        ppl = {"trained": perplexity_under(args.base, trained), "base": perplexity_under(args.base, base)}
        result = compare(base, trained, ks, perplexity_under_base=ppl, seed=args.seed)
    result["machine"] = _machine(args)
    write_json(out / "eval.json", result)
    return result


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def _tables(result: dict[str, Any]) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """(pass@k header, pass@k rows, [name, value] rows of the other metrics)."""
    models = (
        {"base": result["base"], "trained": result["trained"]} if "support" in result else {"model": result}
    )
    first = next(iter(models.values()))
    header = ["k"] + [f"{name} pass@k [95% CI]" for name in models]
    rows = [
        [k]
        + [
            f"{b['pass_at_k'][k]:.4f} [{b['pass_at_k_ci'][k][0]:.4f}, {b['pass_at_k_ci'][k][1]:.4f}]"
            for b in models.values()
        ]
        for k in first["pass_at_k"]
    ]
    keys = ("problems", "n", "mean_reward", "majority_accuracy", "parsable", "token_entropy",
            "answer_entropy", "mean_num_tokens")
    other = [[f"{name} {key}", _fmt(b.get(key))] for name, b in models.items() for key in keys]
    if "support" in result:
        sup = result["support"]
        other += [[f"support {c}", _fmt(v)] for c, v in sup["counts"].items()]
        other += [[f"support {r}", _fmt(v)] for r, v in sup["rates"].items()]
        cross = result.get("crossover", {}).get("text") or _fmt(result["crossover_k"])
        other += [["crossover k (base above beyond the 95% interval)", cross],
                  ["common problems", _fmt(sup["problems"])]]
    return header, rows, other


def print_result(result: dict[str, Any]) -> None:
    """Print the pass@k table and the table of the other metrics (:func:`rlvr.console.print_table`),
    then the machine line when the result has one."""
    header, rows, other = _tables(result)
    print_table(header, rows, align="r" + "l" * (len(header) - 1))
    print()
    print_table(["metric", "value"], other, align="lr")
    if result.get("machine"):
        from rlvr.machine import machine_line

        base = result["machine"].get("base_precision")
        print("machine: " + machine_line(result["machine"]) + (f" (base {base})" if base else ""))


def run(args: argparse.Namespace) -> int:
    _check_paths(args)
    _check_mode(args)
    ks = _parse_ks(args.ks)
    if args.samples and several_seeds(args):
        from rlvr.commands.eval_seeds import from_seed_files, print_seed_result

        result = from_seed_files(args.samples, args.base_samples, _how(args), ks, args.seed, args.plots)
        if args.json:
            write_json(args.json, result)
        print_seed_result(result)
        return 0
    args.samples = args.samples[0] if args.samples else None  # one file (or run folder) each
    args.base_samples = args.base_samples[0] if args.base_samples else None
    result = _from_samples(args, ks) if args.samples else _from_checkpoint(args, ks)
    if args.json:
        write_json(args.json, result)
    if args.plots:
        from rlvr.eval.plots import plot_all

        plot_all(result, args.plots)
    if "per_step" in result:
        from rlvr.commands.eval_steps import print_steps

        print_steps(result)
        result = result["pooled"]
    print_result(result)
    return 0
