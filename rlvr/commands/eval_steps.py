"""``rlvr eval`` on a run folder: the per-step pass@k table printed before the pooled result."""

from __future__ import annotations

from typing import Any


def _cell(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


def print_steps(result: dict[str, Any]) -> None:
    """One line per logged step: problems, n, pass@k for each k, maj@n and parsable; then a line
    saying that the tables after it are all steps pooled."""
    per_step = result["per_step"]
    ks = list(next(iter(per_step.values()))["pass_at_k"])
    header = ["step", "problems", "n"] + [f"pass@{k}" for k in ks] + ["maj@n", "parsable"]
    rows = [[step, _cell(block["problems"]), _cell(block["n"])]
            + [_cell(block["pass_at_k"][k]) for k in ks]
            + [_cell(block.get("majority_accuracy")), _cell(block.get("parsable"))]
            for step, block in per_step.items()]
    for line in [header, *rows]:
        print("  ".join(f"{cell:<9}" for cell in line).rstrip())
    print(f"pooled over steps {', '.join(str(s) for s in result['steps'])}:")
