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
from typing import Any

from rlvr.metric_names import flat, namespaced
from rlvr.paths import RUN_METRICS, atomic_write, read_text

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


class RlvrWarning(RuntimeWarning):
    """rlvr's own loud warnings (:func:`warn`): shown once each, as one ``WARNING: msg`` line."""


_format_warning = warnings.formatwarning


def _formatwarning(message, category, filename, lineno, line=None):  # noqa: ANN001 - the warnings hook
    if issubclass(category, RlvrWarning):
        return f"WARNING: {message}\n"
    return _format_warning(message, category, filename, lineno, line)


warnings.formatwarning = _formatwarning
warnings.simplefilter("always", RlvrWarning)  # per-step warnings differ in text; show each one


def warn(msg: str) -> None:
    """A loud warning, through the warnings module (so tests can catch it as a RuntimeWarning),
    shown on stderr once, as ``WARNING: msg`` (not a second time with its source line)."""
    warnings.warn(msg, RlvrWarning, stacklevel=2)


class MetricsLog:
    """Durable per-step metrics: ``metrics.jsonl`` (rlvr's keys) + optional TensorBoard, W&B and MLflow
    sinks, which receive the namespaced names of :mod:`rlvr.metric_names` (TRL's where TRL has the
    quantity). A sink that fails (not installed, no network, a write error) warns once and is dropped;
    the run and ``metrics.jsonl`` go on.

    wandb: None (off) or the ``wandb.init`` options: project, name, entity, group, tags, mode.
    mlflow: None (off) or the MLflow experiment name."""

    def __init__(self, run_dir: str | Path, tensorboard: bool = False, wandb: bool | dict | None = None,
                 config: dict | None = None, truncate_after: int | None = None, mlflow: str | None = None):
        self.path = Path(run_dir) / RUN_METRICS
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if truncate_after is not None:
            self._truncate(truncate_after)
        self._fh = open(self.path, "a")
        self._sinks: dict[str, Any] = {}
        if tensorboard:
            self._open("tensorboard", lambda: _TensorBoard(Path(run_dir) / "tb"), "tensorboard")
        if wandb:
            opts = wandb if isinstance(wandb, dict) else {}
            self._open("wandb", lambda: _WandB(run_dir, config or {}, opts), "wandb")
        if mlflow:
            self._open("mlflow", lambda: _MLflow(mlflow, Path(run_dir).name, config or {}), "mlflow")

    def _open(self, name: str, make, extra: str) -> None:
        try:
            self._sinks[name] = make()
        except ImportError:
            warn(f"log.{name}=true but {name} is not installed (pip install 'rlvr[{extra}]'); "
                 "metrics.jsonl is written anyway")
        except Exception as e:  # noqa: BLE001 - a sink must never stop a run
            warn(f"log.{name}: could not start ({type(e).__name__}: {e}); continuing without it")

    def _sink_write(self, name: str, fn) -> None:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - a broken sink warns once and is dropped
            self._sinks.pop(name, None)
            warn(f"log.{name}: writing failed ({type(e).__name__}: {e}); continuing without it")

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
        step = int(row.get("step", 0))
        named = {namespaced(k): v for k, v in row.items()
                 if isinstance(v, int | float) and not isinstance(v, bool) and k != "step"}
        for name, sink in list(self._sinks.items()):
            self._sink_write(name, lambda sink=sink: sink.log(named, step))
        return row

    def close(self) -> None:
        self._fh.close()
        for name, sink in list(self._sinks.items()):
            self._sink_write(name, sink.close)


class _TensorBoard:
    def __init__(self, folder: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.w = SummaryWriter(str(folder))

    def log(self, named: dict, step: int) -> None:
        for k, v in named.items():
            self.w.add_scalar(k, v, step)
        self.w.flush()

    def close(self) -> None:
        self.w.close()


class _WandB:
    def __init__(self, run_dir: str | Path, config: dict, opts: dict):
        import wandb

        mode = opts.get("mode") or os.environ.get("WANDB_MODE", "online")
        self.run = wandb.init(project=opts.get("project") or "rlvr", name=opts.get("name") or Path(run_dir).name,
                              entity=opts.get("entity") or None, group=opts.get("group") or None,
                              tags=list(opts.get("tags") or []) or None, dir=str(run_dir), config=config,
                              mode=mode)

    def log(self, named: dict, step: int) -> None:
        self.run.log(named, step=step)

    def close(self) -> None:
        self.run.finish()


class _MLflow:
    def __init__(self, experiment: str, run_name: str, config: dict):
        import mlflow

        self.mlflow = mlflow
        mlflow.set_experiment(experiment)
        self.run = mlflow.start_run(run_name=run_name)
        flat_config = {k: v for k, v in _flatten(config).items()}
        if flat_config:
            mlflow.log_params({k: str(v)[:500] for k, v in list(flat_config.items())[:100]})

    def log(self, named: dict, step: int) -> None:
        # MLflow metric names allow '/', letters, digits, '_', '-', '.', ' '
        self.mlflow.log_metrics({k.replace("@", "_at_"): float(v) for k, v in named.items()}, step=step)

    def close(self) -> None:
        self.mlflow.end_run()


def _flatten(d: dict, prefix: str = "") -> dict:
    out: dict = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def read_metrics(run_dir: str | Path) -> list[dict]:
    """The lines of ``run_dir/metrics.jsonl`` with rlvr's flat keys (a file written with the
    namespaced names of :mod:`rlvr.metric_names` reads the same); stops at a torn last line."""
    path = Path(run_dir) / RUN_METRICS
    rows = []
    if path.exists():
        for line in read_text(path).splitlines():
            try:
                rows.append(flat(json.loads(line)))
            except json.JSONDecodeError:
                break
    return rows


class Progress:
    """steps done / total, ETA and the latest metrics; a rich bar on a TTY, lines otherwise.

    ``mode``: auto (bar on a TTY, else plain) | bar | plain (a line every ``every`` steps and at the
    end, on stderr) | none. ``unit`` names what is counted in plain lines (``12/46 decoding steps``)."""

    def __init__(self, total: int, desc: str, mode: str = "auto", every: int = 1, start: int = 0, unit: str = ""):
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "plain"
        self.mode, self.total, self.desc, self.every = mode, total, desc, max(1, every)
        self.unit = f" {unit}" if unit else ""
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
            print(f"[{self.desc}] {self.done}/{self.total}{self.unit} eta {eta_s} {info}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


class ReadProgress:
    """How far a long read has got, on one rewritten stderr line: ``[label] 812/1800 MB (45%), 6 s left``.

    Shown only on a terminal and when not ``quiet``, at most every ``every_s`` seconds and only for a
    read of at least ``min_total`` units (bytes by default; ``unit`` names another: rows); ``done(n)``
    says n units are read, ``close()`` ends the line."""

    def __init__(self, label: str, total: int, quiet: bool = False, unit: str = "MB", every_s: float = 0.5,
                 min_total: int = 64 << 20, stream=None):
        self.stream = stream or sys.stderr
        self.shown = not quiet and total >= min_total and self.stream.isatty()
        self.label, self.total, self.unit, self.every_s = label, total, unit, every_s
        self.t0 = self.last = time.perf_counter()
        self._wrote = False

    def _units(self, n: int) -> str:
        return f"{n / 2**20:.0f}" if self.unit == "MB" else str(n)

    def done(self, n: int) -> None:
        if not self.shown:
            return
        now = time.perf_counter()
        if now - self.last < self.every_s:
            return
        self.last = now
        share = n / self.total if self.total else 1.0
        left = (now - self.t0) * (1 - share) / share if share > 0 else float("nan")
        left_s = f", {left:.0f} s left" if math.isfinite(left) else ""
        print(f"\r[{self.label}] {self._units(n)}/{self._units(self.total)} {self.unit} ({100 * share:.0f}%){left_s}",
              end="", file=self.stream, flush=True)
        self._wrote = True

    def close(self) -> None:
        if self._wrote:
            print(file=self.stream, flush=True)
