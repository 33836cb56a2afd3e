"""Which weights does this CPU pretrain the default tiny base to? The digest that keeps a long experiment
from mixing two pretraining runs under one key (docs/commands/reproduce.md, "Model keys").

A base's key is its config; its weights depend on the CPU's rounding as well. Measured so far (one run
each, 2026-12-07; `rlvr pretrain` then the first 12 hex digits of the SHA-256 of
``final/model.safetensors``): AMD EPYC family 25 model 17 (Zen 4) and family 26 model 2 (Zen 5)
``77ee1218908b`` (1 and 2 threads alike), Intel Xeon family 6 model 207 ``dea2d95dbec7``; with
ATen's kernels held to AVX2 and MKL's conditional numerical reproducibility (``ATEN_CPU_CAPABILITY=avx2
MKL_CBWR=AVX2``) the Zen 5 gave ``d7ec22f9b620``. Whether that mode gives one digest on every x86 CPU
(and so bases that travel between machines) is what running this on each CPU answers.

Each mode pretrains the default base (``rlvr pretrain``, the quickstart config) in a fresh process
with its own empty cache under a temporary folder (the user's cache is neither read nor written), one
torch thread, and prints the CPU, the mode, the digest and the minutes; the last line is JSON.

    python benchmarks/checks/base_digest.py [--modes default,avx2] [--overrides pretrain.tokens=20000]

About a minute a mode on a 2-core machine at the default size. ``--overrides`` (for a quick look, and
the test) passes ``key=value`` overrides to ``rlvr pretrain``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # rlvr from this checkout, for the CPU line and the digest
MODES = {
    "default": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"},
}
"""Environment of each mode: ``avx2`` holds ATen's vectorised kernels to AVX2 and asks MKL for
conditional numerical reproducibility at AVX2."""


def cpu_line() -> str:
    """The CPU as docs/performance.md records it: model name, family/model, the flags that matter."""
    from rlvr.machine import machine_info, machine_line

    return machine_line(machine_info())


def pretrain_digest(mode: str, overrides: list[str]) -> dict:
    """Pretrain the default base in a fresh process under ``mode``'s environment -> {mode, digest,
    minutes}; a failed pretraining raises with its output's tail."""
    with tempfile.TemporaryDirectory(prefix="rlvr-base-digest-") as cache:
        env = {**os.environ, **MODES[mode], "RLVR_CACHE": cache, "OMP_NUM_THREADS": "1",
               "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        t0 = time.time()
        run = subprocess.run([sys.executable, "-m", "rlvr.cli", "pretrain", *overrides], env=env,
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"{mode}: rlvr pretrain exited {run.returncode}: {run.stderr[-2000:]}")
        finals = sorted(Path(cache).glob("base/*/final/model.safetensors"))
        if len(finals) != 1:
            raise RuntimeError(f"{mode}: expected one pretrained base under {cache}, found {len(finals)}")
        from rlvr.model.io import weights_digest  # the digest the experiments record

        return {"mode": mode, "digest": weights_digest(finals[0].parent), "minutes": round((time.time() - t0) / 60, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="default,avx2", help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--overrides", nargs="*", default=[], help="key=value overrides for rlvr pretrain")
    a = ap.parse_args(argv)
    modes = [m for m in a.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        ap.error(f"--modes: unknown {unknown or 'none given'}; choose from {', '.join(MODES)}")
    cpu = cpu_line()
    print(f"cpu: {cpu}")
    rows = []
    for m in modes:
        row = pretrain_digest(m, a.overrides)
        print(f"{m:8s} {row['digest']}  ({row['minutes']} min)", flush=True)
        rows.append(row)
    print(json.dumps({"check": "base_digest", "cpu": cpu, "overrides": a.overrides, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
