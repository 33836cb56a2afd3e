"""What machine a run ran on: CPU, the SIMD flags that decide bf16 speed, threads, versions.

:func:`machine_info` is the record every run directory (``machine.json``), ``eval.json`` and
``pretrain.json`` carry; :func:`machine_line` is its one-line form (the HTML report, ``rlvr eval``).
:func:`cpu_info` reads ``/proc/cpuinfo`` (Linux), else falls back to :mod:`platform`.
Imports only the standard library and torch (a bottom-layer module).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni")
"""The CPU flags that matter for matmul speed in fp32 and bf16 (present or not)."""

_CPUINFO = Path("/proc/cpuinfo")

KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")
"""Environment variables that hold torch's, oneDNN's or MKL's kernels below what the CPU's flags
allow (``ATEN_CPU_CAPABILITY=avx2`` on an AVX-512 CPU: bf16 without its native units)."""


def cpu_info(path: Path = _CPUINFO) -> dict:
    """{"model_name", "family", "model", "flags"} of the first processor: the name from "model name"
    (fallback ``platform.processor()``), family/model numbers (None when unknown), every flag (sorted)."""
    fields: dict[str, str] = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        if not line.strip():
            if fields:  # the end of the first processor's block
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = fields.get("flags") or fields.get("Features") or ""  # x86 | arm64

    def number(key: str) -> int | None:
        try:
            return int(fields[key], 0)
        except (KeyError, ValueError):
            return None

    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown"
    return {"model_name": name, "family": number("cpu family"), "model": number("model"),
            "flags": sorted(set(flags.split()))}


def kernel_limits() -> dict[str, str]:
    """{name: value} of the :data:`KERNEL_ENV` variables set in this process (empty: nothing held)."""
    return {k: os.environ[k] for k in KERNEL_ENV if os.environ.get(k)}


def kernels() -> str:
    """torch's CPU kernel level in this process: "AVX512", "AVX2", "DEFAULT" ("" where torch cannot say)."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return ""


def machine_info(precision: str | None = None, device: str | torch.device | None = None) -> dict:
    """The machine record: CPU model name, family/model numbers, the :data:`FLAGS` (True/False),
    logical cores, torch threads, torch and python versions, the CUDA device's name when ``device``
    is a CUDA device (else None), the compute ``precision`` used ("float32" | "bfloat16"), torch's
    kernel level (:func:`kernels`) and the variables holding kernels down (:func:`kernel_limits`)."""
    cpu = cpu_info()
    have = set(cpu["flags"])
    cuda = None
    if device is not None and torch.device(device).type == "cuda" and torch.cuda.is_available():
        cuda = torch.cuda.get_device_name(torch.device(device))
    return {"cpu": cpu["model_name"], "cpu_family": cpu["family"], "cpu_model": cpu["model"],
            "flags": {f: f in have for f in FLAGS}, "logical_cores": os.cpu_count() or 1,
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version(), "cuda_device": cuda, "precision": precision,
            "kernels": kernels(), "kernel_limits": kernel_limits()}


def machine_line(info: dict | None) -> str:
    """One line of a :func:`machine_info` record, e.g. ``AMD EPYC (family 25 model 17; avx2 avx512f
    avx512_bf16), 2 cores, 2 torch threads, torch 2.5.1, python 3.12.3, precision float32``; where
    kernels were held down, ``..., kernels AVX2 (held: ATEN_CPU_CAPABILITY=avx2)`` after the flags'
    part (the flags say what the CPU has, not what ran)."""
    if not info:
        return "machine not recorded"
    flags = " ".join(f for f, on in (info.get("flags") or {}).items() if on) or "none of " + " ".join(FLAGS)
    ident = f"family {info.get('cpu_family')} model {info.get('cpu_model')}; " \
        if info.get("cpu_family") is not None else ""
    parts = [f"{info.get('cpu', 'unknown CPU')} ({ident}{flags})",
             f"{info.get('logical_cores')} cores", f"{info.get('torch_threads')} torch threads",
             *_held(info),
             f"torch {info.get('torch')}", f"python {info.get('python')}"]
    if info.get("cuda_device"):
        parts.append(f"CUDA {info['cuda_device']}")
    if info.get("precision"):
        parts.append(f"precision {info['precision']}")
    return ", ".join(parts)


def held_note(level: str, held: dict[str, str]) -> str:
    """``"kernels AVX2 (held: ATEN_CPU_CAPABILITY=avx2)"`` where variables held kernels down (``held``:
    :func:`kernel_limits`), else ""."""
    if not held:
        return ""
    settings = ", ".join(f"{k}={v}" for k, v in held.items())
    return " ".join(["kernels", *([level] if level else []), f"(held: {settings})"])


def _held(info: dict) -> list[str]:
    """The line's kernel part: only where variables held kernels down (an ordinary run's line, and
    records older than the field, are unchanged)."""
    note = held_note(info.get("kernels") or "", info.get("kernel_limits") or {})
    return [note] if note else []
