"""What ``model.dtype: auto`` remembers per machine, and when it refuses to remember.

- The bf16 probe's measurement (:mod:`rlvr.model.bf16_probe`) is cached in
  ``<cache>/machine/bf16-<key>.json``, keyed by a hash of the CPU (model name, family, model, flags),
  the torch version and thread count and the workload (:func:`cache_key`); a corrupt file is
  measured again (:func:`read_cached`).
- A measurement taken on a busy machine is never cached (:func:`busy_reason`): the 1-minute load
  average plus the measuring threads above the core count, or a calibration loop (a fixed float32
  matmul, timed :data:`CALIBRATION_REPEATS` times) whose times spread more than
  :data:`CALIBRATION_SPREAD`. ``auto`` then runs in float32, uncached, and says so.
- Real RL steps re-validate it (:func:`record_steps`): a run times its first steps in the precision it
  runs in and records the median in ``<cache>/machine/steps-<key>.json`` (keyed like the probe plus
  the step's shape). Once both precisions have real steps there, they decide instead of the probe
  (:func:`real_steps`); a bfloat16 choice whose real steps run more than :data:`INVALIDATE` x slower
  than the probe predicted invalidates the probe's choice (it did not see what the step does): float32
  until real steps of both precisions decide.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import statistics
import time
from pathlib import Path

import torch

from rlvr.log import warn
from rlvr.machine import cpu_info, kernel_limits, kernels
from rlvr.paths import atomic_write, cache_root

FORMAT = 3  # bump when the measurement changes: old cache files are then measured again
CALIBRATION_REPEATS = 7
CALIBRATION_SPREAD = 0.25
"""A calibration loop whose (max - min) / median time exceeds this: the machine is busy."""
INVALIDATE = 2.0
"""Real bfloat16 steps this many times slower than the probe's prediction invalidate its cached choice."""


def cache_key(spec: dict) -> dict:
    """What a measurement depends on: the CPU, the kernels torch and its libraries may use there (a
    measurement with native bf16 says nothing of a process held to AVX2), the torch version and
    threads, the workload."""
    cpu = cpu_info()
    key = {"format": FORMAT, "cpu": cpu["model_name"], "family": cpu["family"], "model": cpu["model"],
           "flags": cpu["flags"], "torch": torch.__version__, "threads": torch.get_num_threads(),
           "workload": spec}
    held = kernel_limits()
    if held:  # only then: the keys (and the files) of ordinary processes stay what they were
        key["kernels"] = {"level": kernels(), **held}
    return key


def _path(prefix: str, key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "machine" / f"{prefix}-{digest}.json"


def cache_path(key: dict) -> Path:
    """The probe's cache file for ``key`` (:func:`cache_key`)."""
    return _path("bf16", key)


def read_cached(path: Path, key: dict) -> dict | None:
    """The cached measurement at ``path`` if it is whole and for ``key``; None if absent; a corrupt
    file is reported and None returned (so it is measured again)."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        ratio = float(data["ratio"])
        if data.get("key") != key or not math.isfinite(ratio) or ratio <= 0:
            raise ValueError("not a measurement for this machine")
        return data
    except (OSError, ValueError, TypeError, KeyError) as e:
        warn(f"{path}: unreadable precision measurement ({e}); measuring again")
        return None


def write(path: Path, data: dict) -> None:
    """``data`` as JSON at ``path`` (atomically); a read-only cache is reported, nothing else."""
    try:
        atomic_write(path, json.dumps(data, indent=1))
    except OSError as e:  # a read-only cache costs a measurement per run, nothing else
        warn(f"could not cache the precision measurement in {path} ({e.strerror or e})")


def now() -> str:
    return _dt.datetime.now().isoformat(timespec="seconds")


# ----------------------------------------------------------------------------- a busy machine
def load_average() -> float | None:
    """The 1-minute load average (None where the OS does not say)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def calibration_spread() -> float:
    """(max - min) / median of :data:`CALIBRATION_REPEATS` timings of a fixed float32 matmul loop
    (about 10 ms each): near 0 on a quiet core, large when other work takes it away."""
    a = torch.ones(128, 128)
    times = []
    for _ in range(CALIBRATION_REPEATS):
        t0 = time.perf_counter()
        for _ in range(40):
            a @ a
        times.append(time.perf_counter() - t0)
    mid = statistics.median(times)
    return (max(times) - min(times)) / max(mid, 1e-9)


def busy_reason(threads: int) -> str:
    """Why this machine is too busy to measure on ('' when quiet): the load average plus the
    ``threads`` that would measure above the core count, or a calibration loop's spread."""
    load, cores = load_average(), os.cpu_count() or 1
    if load is not None and load + threads > cores + 0.5:
        return f"load {load:.1f} on {cores} cores"
    spread = calibration_spread()
    if spread > CALIBRATION_SPREAD:
        return f"a calibration loop's times spread {spread:.0%} (over {CALIBRATION_SPREAD:.0%})"
    return ""


def busy_note(data: dict) -> str:
    """``" on a busy machine (load 2.3, 2 cores: the ratio may be off)"`` for a measurement cached
    (before this rule) with the machine busy (the load plus the measuring threads above the core
    count), else ``""``."""
    load, cores = data.get("load"), data.get("cores")
    threads = data.get("key", {}).get("threads", 1)
    if not isinstance(load, (int, float)) or not isinstance(cores, int) or load + threads <= cores + 0.5:
        return ""
    return f" on a busy machine (load {load:.1f}, {cores} cores: the ratio may be off)"


# ----------------------------------------------------------------------------- real steps
def steps_path(spec: dict, shape: dict) -> tuple[Path, dict]:
    """(file, key) of the real-step records of the workload ``spec`` at the step ``shape``
    (prompts, group size, new tokens)."""
    key = {**cache_key(spec), "step": shape}
    return _path("steps", key), key


def real_steps(spec: dict, shape: dict) -> dict:
    """{dtype: {"step_s", "steps", "when"}} recorded by real runs at this workload and shape ({} none)."""
    path, key = steps_path(spec, shape)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("key") != key:
        return {}
    return {d: r for d, r in data.items() if d in ("float32", "bfloat16") and isinstance(r, dict)
            and isinstance(r.get("step_s"), (int, float)) and r["step_s"] > 0}


def record_steps(spec: dict, shape: dict, dtype: str, step_s: list[float], probe: dict | None) -> str:
    """Record the median of real steps' seconds ``step_s`` in ``dtype`` (on a quiet machine only) and
    re-validate the probe's cached choice ``probe`` (its record, None when it did not decide): a
    bfloat16 choice whose real steps run :data:`INVALIDATE` x slower than the probe's bf16 repeat,
    scaled to the real rows, is marked invalidated (``invalidated_probe``). Returns what was done, in
    words ('' nothing)."""
    if not step_s:
        return ""
    busy = busy_reason(torch.get_num_threads())
    if busy:
        return f"real-step timings not recorded: this machine is busy ({busy})"
    path, key = steps_path(spec, shape)
    records = real_steps(spec, shape)
    median = statistics.median(step_s)
    records[dtype] = {"step_s": median, "steps": len(step_s), "when": now()}
    write(path, {"key": key, **records})
    said = f"real steps in {dtype}: {median:.3f} s (median of {len(step_s)})"
    if dtype == "bfloat16" and probe and probe.get("bf16_s") and probe.get("decode_rows"):
        rows = shape["prompts"] * shape["group"]
        predicted = float(probe["bf16_s"]) * rows / float(probe["decode_rows"])
        if median > INVALIDATE * predicted:
            said += (f"; {median / predicted:.1f}x slower than the probe predicted ({predicted:.3f} s): its cached "
                     "choice is invalidated (float32 until real steps of both precisions decide)")
            records["bfloat16"]["invalidated_probe"] = True
            write(path, {"key": key, **records})
    return said
