"""Apply excursions_v2's declared recipe rule to its tuning cells (parts 1-3 of
``rlvr reproduce excursions_v2``; the rule is the declaration's header, docs/reproductions/excursions_v2):

- RL: the first candidate in the declared order whose validation pass@1 gain over the tuning base is at
  least ``--target`` (0.10); if none reaches it, the one with the largest gain (equal gains: the first),
  and the output says that no setting reached the target.
- SFT: the learning rate with the highest validation pass@1 (equal values: the lower rate).
- Equal tokens: SFT's rows per step ``b = round(rows x t_RL / t_SFT)``, with ``t_RL`` = the mean prompt
  tokens + the chosen RL candidate's mean ``response_len`` over its steps (its metrics.jsonl) and
  ``t_SFT`` the mean tokens of a gold pair, one value per SFT pipeline (one gold, all golds).

    python benchmarks/studies/excursions_recipe_pick.py OUT_DIR --base base_tune \
        --rl tune_rl_1,tune_rl_2,tune_rl_3,tune_rl_4,tune_rl_5,tune_rl_6 \
        --sft tune_sft_1=2e-4,tune_sft_2=5e-4,tune_sft_3=1e-3 \
        --early base_tune_q=tune_rl_q_1,tune_rl_q_2 --sft-tokens sft=33.0,sft_gold=35.4

Prints one row per candidate and the picks; ``--json`` writes the same. Each model's validation cell is
its own (final) cell, ``OUT/evals/*/MODEL/stats.json``; a model with no cell, or with more than one, is
an error naming it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlvr.log import read_metrics


class PickError(Exception):
    """Input the rule cannot be applied to (a missing cell or run); the message names it."""


def pass1(evals: Path, model: str) -> float:
    """Mean share of correct samples in ``model``'s one cell under ``evals`` (per-problem counts of n)."""
    cells = sorted(evals.glob(f"*/{model}/stats.json"))
    if len(cells) != 1:
        raise PickError(f"expected one validation cell of {model!r} under {evals}, found {len(cells)}")
    stats = json.loads(cells[0].read_text())
    return sum(stats["correct"]) / (stats["n"] * len(stats["correct"]))


def first_reaching(gains: list[float], target: float) -> tuple[int, bool]:
    """(index of the pick, whether it reached ``target``): the first gain >= target in listed order,
    else the largest gain (the first of equal ones)."""
    for index, gain in enumerate(gains):
        if gain >= target:
            return index, True
    return gains.index(max(gains)), False


def best_rate(values: list[float], rates: list[float]) -> int:
    """Index of the highest value; equal values go to the lower rate."""
    return min(range(len(values)), key=lambda i: (-values[i], rates[i]))


def mean_response_len(run: Path) -> float:
    """Mean of the ``response_len`` series of the run folder ``run`` (its metrics.jsonl) over its steps."""
    if not (run / "metrics.jsonl").exists():
        raise PickError(f"{run}: no metrics.jsonl (the chosen candidate's run) to read response_len from")
    lengths = [row["response_len"] for row in read_metrics(run) if "response_len" in row]
    if not lengths:
        raise PickError(f"{run}/metrics.jsonl: no response_len in any step")
    return sum(lengths) / len(lengths)


def pairs(spec: str, what: str) -> list[tuple[str, float]]:
    """``a=1e-4,b=2e-4`` -> [("a", 1e-4), ("b", 2e-4)]."""
    out = []
    for item in spec.split(","):
        name, sep, value = item.partition("=")
        try:
            out.append((name, float(value)))
        except ValueError:
            sep = ""
        if not sep or not name:
            raise PickError(f"{what}: {item!r} is not NAME=NUMBER (e.g. tune_sft_1=2e-4)")
    return out


def decide(out: Path, base: str, rl: list[str], sft: list[tuple[str, float]], early: dict[str, list[str]],
           target: float, rows: int, prompt_tokens: float, sft_tokens: list[tuple[str, float]]) -> dict:
    """The rule's outcome as a report (every candidate's pass@1 and gain, the picks, the SFT batch sizes)."""
    evals = out / "evals"
    base_value = pass1(evals, base)
    rl_rows = [{"model": name, "pass1": pass1(evals, name)} for name in rl]
    for row in rl_rows:
        row["gain"] = row["pass1"] - base_value
    chosen, reached = first_reaching([row["gain"] for row in rl_rows], target)
    rl_pick = rl_rows[chosen]["model"]
    response = mean_response_len(out / "models" / rl_pick)
    t_rl = prompt_tokens + response
    sft_rows = [{"model": name, "lr": lr, "pass1": pass1(evals, name)} for name, lr in sft]
    sft_pick = sft_rows[best_rate([row["pass1"] for row in sft_rows], [row["lr"] for row in sft_rows])]
    early_rows = {}
    for start, models in early.items():
        start_value = pass1(evals, start)
        early_rows[start] = {"pass1": start_value,
                             "rows": [{"model": m, "pass1": (v := pass1(evals, m)), "gain": v - start_value}
                                      for m in models]}
    return {"base": base, "base_pass1": base_value, "target": target, "rl": rl_rows, "rl_pick": rl_pick,
            "rl_reached_target": reached, "rl_mean_response_len": response, "t_rl": t_rl,
            "sft": sft_rows, "sft_pick": sft_pick["model"], "sft_lr": sft_pick["lr"], "early": early_rows,
            "sft_batch_size": {name: round(rows * t_rl / tokens) for name, tokens in sft_tokens},
            "t_sft": dict(sft_tokens), "rows": rows}


def show(report: dict) -> None:
    print(f"{report['base']} pass@1 {report['base_pass1']:.4f}")
    for row in report["rl"]:
        print(f"rl   {row['model']:14s} pass@1 {row['pass1']:.4f} gain {row['gain']:+.4f}")
    if report["rl_reached_target"]:
        print(f"rl   pick: {report['rl_pick']} (the first with gain >= {report['target']:.2f})")
    else:
        best = max(row["gain"] for row in report["rl"])
        print(f"rl   pick: {report['rl_pick']}: no measured setting reached the {report['target']:.2f} target; "
              f"RL gains {best:+.4f} here")
    for start, block in report["early"].items():
        for row in block["rows"]:
            print(f"early {row['model']:13s} pass@1 {row['pass1']:.4f} gain {row['gain']:+.4f} over {start} "
                  f"({block['pass1']:.4f})")
    for row in report["sft"]:
        print(f"sft  {row['model']:14s} lr {row['lr']:.1e} pass@1 {row['pass1']:.4f}")
    print(f"sft  pick: {report['sft_pick']} (lr {report['sft_lr']:.1e})")
    print(f"tokens a row: RL {report['t_rl']:.2f} (mean response_len {report['rl_mean_response_len']:.2f})")
    for name, size in report["sft_batch_size"].items():
        print(f"{name}: {size} rows a step (round({report['rows']} x {report['t_rl']:.2f} / "
              f"{report['t_sft'][name]:.2f}))")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--base", default="base_tune")
    parser.add_argument("--rl", required=True, help="candidates in the declared order: m1,m2,...")
    parser.add_argument("--sft", required=True, help="model=lr,...")
    parser.add_argument("--early", action="append", default=[], help="START=m1,m2 (RL from a checkpoint)")
    parser.add_argument("--target", type=float, default=0.10)
    parser.add_argument("--rows", type=int, default=128, help="RL's rows a step")
    parser.add_argument("--prompt-tokens", type=float, default=9.2)
    parser.add_argument("--sft-tokens", default="sft=33.0,sft_gold=35.4", help="pipeline=mean tokens a pair,...")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    try:
        early = {}
        for spec in args.early:
            start, sep, models = spec.partition("=")
            if not sep or not start or not models:
                raise PickError(f"--early: {spec!r} is not START=m1,m2")
            early[start] = models.split(",")
        report = decide(args.out, args.base, args.rl.split(","), pairs(args.sft, "--sft"), early, args.target,
                        args.rows, args.prompt_tokens, pairs(args.sft_tokens, "--sft-tokens"))
    except PickError as e:
        print(f"excursions_recipe_pick: {e}", file=sys.stderr)
        return 2
    show(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
