"""Shared by the go-rule tests (tests/unit/test_scalerl_bend_*_go.py): load a go script as a module,
make a sigmoid curve with a deterministic wiggle, write it where the script reads a dynamics evaluation,
and run the script as a user does."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

STUDIES = Path(__file__).resolve().parents[2] / "benchmarks" / "studies"


def load(script: Path) -> ModuleType:
    """The script imported as a module named for its file (so its functions can be tested directly)."""
    spec = importlib.util.spec_from_file_location(script.stem, script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sigmoid(C: np.ndarray, c_mid: float, A: float, R0: float, B: float) -> np.ndarray:
    """R (n,) on compute C (n,): R0 + (A - R0) / (1 + (c_mid / C)^B), plus a 0.004 wiggle (a fit needs
    residuals)."""
    R = R0 + (A - R0) / (1 + (c_mid / C) ** B)
    return R + 0.004 * np.sin(np.arange(C.size) * 1.7)


def write_curve(out: Path, model: str, C: np.ndarray, R: np.ndarray) -> None:
    """The dynamics evaluation of `model` under `out` (evals/dynamics/<model>/stats.json)."""
    d = out / "evals" / "dynamics" / model
    d.mkdir(parents=True)
    (d / "stats.json").write_text(json.dumps({"kind": "dynamics", "series": {
        "samples": C.tolist(), "heldout_pass_rate": R.tolist()}}))


def run_script(script: Path, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run `script out --json out/go.json *extra`; the report read back where it exited 0, else {}."""
    done = subprocess.run([sys.executable, str(script), str(out), "--json", str(out / "go.json"), *extra],
                          capture_output=True, text=True)
    return done, (json.loads((out / "go.json").read_text()) if done.returncode == 0 else {})
