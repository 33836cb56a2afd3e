"""Training histories of other frameworks -> rlvr metrics lines, for ``rlvr fit``.

Readers:

- a W&B run-history CSV export (``run.history().to_csv()`` or the run page's "Export CSV"): one
  row per logged step, a ``_step`` column, one column per key, empty cells where a key was not
  logged at that step;
- TensorBoard event files (a folder searched recursively for ``events.out.tfevents.*``, or one
  file), read with tensorboard's own ``EventAccumulator`` (``pip install 'rlvr[import]'``): the scalar
  tags become keys, merged by step.

Key maps (:data:`KEY_MAPS`) say where each framework keeps the held-out pass rate and the compute
axes. TRL logs through transformers' integrations, which prefix train keys ``train/`` and eval keys
``eval/`` (``train/num_tokens`` is cumulative; ``eval/rewards/<func>/mean`` is a reward function's
held-out mean, a pass rate when that function is 0/1 accuracy). verl logs ``val-core/<data
source>/acc/mean@N`` (or ``.../reward/mean@N`` without ``acc``) and ``perf/total_num_tokens`` per step
(summed here). prime-rl logs ``eval/<env>/all/<agent>/avg@<G>`` (the mean eval reward; a pass rate for a
0/1 reward) and ``progress/total_tokens`` (cumulative) (src/prime_rl/orchestrator/metrics.py
``EvalMetrics.to_wandb``, orchestrator.py). NeMo-RL logs ``validation/accuracy`` (the mean validation
reward) and ``train/total_num_tokens`` per step (nemo_rl/algorithms/grpo.py: the step's input lengths
summed). SkyRL logs ``eval/all/avg_score`` but no token count, so it has no map (pass ``--y`` with a step
axis of your own). FLOPs are logged by none: the ``flops`` axis falls back to tokens.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from rlvr.errors import UserError
from rlvr.metric_names import flat

# framework -> role -> ordered candidate key patterns (regex, full match); the first present wins
KEY_MAPS: dict[str, dict[str, tuple[str, ...]]] = {
    "trl": {
        "heldout_pass_rate": (r"eval/rewards/.*acc.*/mean", r"eval/rewards/.*correct.*/mean", r"eval/reward"),
        "tokens": (r"train/num_tokens", r"num_tokens"),
        "step": (r"train/global_step", r"_step"),
    },
    "verl": {
        "heldout_pass_rate": (r"val-core/.+/acc/mean@\d+", r"val-core/.+/reward/mean@\d+"),
        "tokens_per_step": (r"perf/total_num_tokens",),
        "step": (r"training/global_step", r"_step"),
    },
    "prime-rl": {
        "heldout_pass_rate": (r"eval/[^/]+/all/[^/]+/avg@\d+",),
        "tokens": (r"progress/total_tokens",),
        "step": (r"step", r"_step"),
    },
    "nemo-rl": {
        "heldout_pass_rate": (r"validation/accuracy",),
        "tokens_per_step": (r"train/total_num_tokens",),
        "step": (r"_step",),
    },
}


def _number(v) -> float | None:
    if v is None or v == "" or isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def read_wandb_csv(path: Path) -> list[dict]:
    """Rows of a W&B history CSV: numeric cells as floats, empty / text cells dropped."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = [{k.strip(): x for k, v in r.items() if k and (x := _number(v)) is not None}
                for r in csv.DictReader(fh)]
    return [r for r in rows if r]


def read_tensorboard(path: Path) -> list[dict]:
    """Rows of TensorBoard scalar events (every ``events.out.tfevents.*`` under ``path``), one per
    step: ``{"_step": step, tag: value, ...}`` (the last value when a tag repeats a step)."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator
    except ImportError:
        raise UserError(f"{path}: reading TensorBoard events needs tensorboard (pip install 'rlvr[import]')") \
            from None
    files = sorted(path.rglob("events.out.tfevents.*")) if path.is_dir() else [path]
    if not files:
        raise UserError(f"{path}: no events.out.tfevents.* file under it; pass a TensorBoard log folder")
    by_step: dict[int, dict] = {}
    for f in files:
        acc = EventAccumulator(str(f), size_guidance={SCALARS: 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            for ev in acc.Scalars(tag):
                by_step.setdefault(int(ev.step), {"_step": float(ev.step)})[tag] = float(ev.value)
    return [by_step[s] for s in sorted(by_step)]


def is_history(path: Path) -> bool:
    """Whether ``path`` is a TensorBoard log (folder or events file) or a W&B history CSV (``_step``)."""
    if path.is_dir():
        return not (path / "metrics.jsonl").exists() and any(path.rglob("events.out.tfevents.*"))
    if path.name.startswith("events.out.tfevents."):
        return True
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
        return "_step" in [h.strip() for h in header]
    return False


def _find(keys: list[str], patterns: tuple[str, ...]) -> str | None:
    for pat in patterns:
        hits = sorted(k for k in keys if re.fullmatch(pat, k))
        if hits:
            return hits[0]
    return None


def detect_framework(rows: list[dict]) -> str:
    """trl | verl | prime-rl | nemo-rl | rlvr, from the keys present."""
    keys = {k for r in rows for k in r}
    if any(k.startswith("rlvr/") for k in keys):
        return "rlvr"
    if any(k.startswith("progress/") for k in keys):
        return "prime-rl"
    if any(k.startswith("validation/") for k in keys):
        return "nemo-rl"
    if any(k.startswith(("val-core/", "training/", "critic/", "perf/")) for k in keys):
        return "verl"
    if any(k.startswith(("train/", "eval/")) for k in keys):
        return "trl"
    return "rlvr"


def to_metrics(rows: list[dict], path: Path, framework: str = "auto", y_key: str | None = None) -> list[dict]:
    """rlvr metrics lines (``step``, ``tokens``, ``heldout_pass_rate`` where measured) from a peer's
    history rows, through :data:`KEY_MAPS` (``y_key``: the held-out key, overriding the map)."""
    if not rows:
        raise UserError(f"{path}: the history has no rows")
    fw = detect_framework(rows) if framework == "auto" else framework
    if fw == "rlvr" and not y_key:  # rlvr's own sinks: namespaced names back to rlvr's keys
        return [dict(flat(r), step=r.get("_step")) for r in rows]
    keys = sorted({k for r in rows for k in r})
    m = KEY_MAPS.get(fw, {})
    y = y_key or _find(keys, m.get("heldout_pass_rate", ()))
    if y is None or y not in keys:
        raise UserError(f"{path}: no held-out pass-rate key for {fw} (looked for "
                        f"{y_key or ', '.join(m.get('heldout_pass_rate', ()))}); pass --y KEY "
                        f"(keys: {', '.join(keys[:20])}{' ...' if len(keys) > 20 else ''})")
    tok = _find(keys, m.get("tokens", ()))
    per_step = _find(keys, m.get("tokens_per_step", ()))
    step_key = _find(keys, m.get("step", ())) or "_step"
    out, total = [], 0.0
    last_tokens: float | None = None
    for r in sorted(rows, key=lambda r: r.get(step_key, r.get("_step", 0.0))):
        if per_step and per_step in r:
            total += r[per_step]
            last_tokens = total
        elif tok and tok in r:
            last_tokens = r[tok]
        line = {"step": r.get(step_key, r.get("_step")), "tokens": last_tokens or 0.0}  # 0 before training
        if y in r:
            line["heldout_pass_rate"] = r[y]
        out.append(line)
    return out


def load_history(path: Path, framework: str = "auto", y_key: str | None = None) -> list[dict]:
    """Metrics lines of a W&B history CSV or a TensorBoard log (see :func:`to_metrics`)."""
    rows = read_tensorboard(path) if path.is_dir() or path.name.startswith("events.out.tfevents.") \
        else read_wandb_csv(path)
    return to_metrics(rows, path, framework, y_key)
