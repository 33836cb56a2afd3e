"""Progress display and metric sinks.

``MetricsLog`` appends one JSON line per step to ``metrics.jsonl`` (flushed and
fsynced per line, so a crash loses at most the line being written) and mirrors
the line to TensorBoard / Weights & Biases when enabled. ``Progress`` shows a
live bar on a terminal and plain lines otherwise (CI logs); ``quiet`` silences it.
This module is where tensors become Python numbers (``scalars``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

from rlvr.paths import atomic_write

SHOWN = ("reward", "pass_rate", "heldout_pass_rate", "entropy", "response_len", "loss")


def scalars(d: dict) -> dict:
    """Tensors and numpy scalars -> floats/ints; drops None."""
    out = {}
    for k, v in d.items():
        if v is None:
            continue
        if hasattr(v, "item") and getattr(v, "numel", lambda: 1)() == 1:
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None if math.isnan(v) else v
        out[k] = v
    return out


def warn(msg: str) -> None:
    """A loud warning: on stderr and through the warnings module (so tests can catch it)."""
    print(f"WARNING: {msg}", file=sys.stderr, flush=True)
    warnings.warn(msg, RuntimeWarning, stacklevel=2)


class MetricsLog:
    """Durable per-step metrics: ``metrics.jsonl`` + optional TensorBoard and W&B sinks."""

    def __init__(self, run_dir: str | Path, tensorboard: bool = False, wandb: bool = False,
                 config: dict | None = None, truncate_after: int | None = None):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if truncate_after is not None:
            self._truncate(truncate_after)
        self._fh = open(self.path, "a")
        self._tb = self._wb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(Path(run_dir) / "tb"))
            except ImportError:
                warn("log.tensorboard=true but tensorboard is not installed (pip install 'rlvr[tensorboard]')")
        if wandb:
            try:
                import wandb as wb

                self._wb = wb.init(project="rlvr", dir=str(run_dir), config=config or {},
                                   mode=os.environ.get("WANDB_MODE", "online"))
            except ImportError:
                warn("log.wandb=true but wandb is not installed (pip install 'rlvr[wandb]')")

    def _truncate(self, step: int) -> None:
        """Keep only lines with step <= ``step`` (resume: no duplicated steps)."""
        if not self.path.exists():
            return
        keep = []
        for line in self.path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line)
            except json.JSONDecodeError:
                break  # a torn last line from a crash
        atomic_write(self.path, "".join(x + "\n" for x in keep))

    def write(self, row: dict) -> dict:
        row = scalars(row)
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        step = row.get("step", 0)
        if self._tb is not None:
            for k, v in row.items():
                if isinstance(v, int | float) and k != "step":
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()
        if self._wb is not None:
            self._wb.log({k: v for k, v in row.items() if isinstance(v, int | float)}, step=step)
        return row

    def close(self) -> None:
        self._fh.close()
        if self._tb is not None:
            self._tb.close()
        if self._wb is not None:
            self._wb.finish()


def read_metrics(run_dir: str | Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return rows


class Progress:
    """steps done / total, ETA and the latest metrics; a rich bar on a TTY, lines otherwise."""

    def __init__(self, total: int, desc: str, mode: str = "auto", every: int = 1, start: int = 0):
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "plain"
        self.mode, self.total, self.desc, self.every = mode, total, desc, max(1, every)
        self.done, self.t0, self.start = start, time.time(), start
        self._bar = None
        if mode == "bar":
            try:
                from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
                from rich.progress import Progress as RP

                self._bar = RP(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                               "{task.total}"), TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                               transient=False)
                self._task = self._bar.add_task(desc, total=total, completed=start, info="")
                self._bar.start()
            except ImportError:
                self.mode = "plain"

    def eta(self) -> float:
        rate = (self.done - self.start) / max(1e-9, time.time() - self.t0)
        return (self.total - self.done) / rate if rate > 0 else float("nan")

    def update(self, n: int = 1, **metrics) -> None:
        self.done += n
        info = " ".join(f"{k}={v:.3g}" for k, v in metrics.items() if k in SHOWN and isinstance(v, float | int))
        if self._bar is not None:
            self._bar.update(self._task, advance=n, info=info)
        elif self.mode == "plain" and (self.done % self.every == 0 or self.done == self.total):
            eta = self.eta()
            eta_s = f"{eta:.0f}s" if math.isfinite(eta) else "?"
            print(f"[{self.desc}] {self.done}/{self.total} eta {eta_s} {info}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
