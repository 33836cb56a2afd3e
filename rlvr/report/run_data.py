"""What the report and ``rlvr compare`` read from a run folder: config, metrics, eval.json, machine,
the seed, the group the run belongs to, and (on demand) its held-out samples.

A run folder is what ``rlvr train`` / ``rlvr run`` write: ``config.yaml``, ``metrics.jsonl``,
``eval.json`` and, after an evaluation, ``samples.jsonl`` (the trained model's completions). Each
file is optional; a folder with none of the first three is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlvr.errors import UserError
from rlvr.eval.samples import load_samples
from rlvr.log import read_metrics

SAMPLES_FILE = "samples.jsonl"
# "<name>-20250101-120000" and "<name>-20250101-120000-2" (new_run_dir's stamp and its collision suffix)
_TIME_SUFFIX = re.compile(r"[-_]\d{8}[-_]\d{6}(?:[-_]\d+)?$")
# "-s0", "_seed1", "-seed=2" at the end of a name
_SEED_SUFFIX = re.compile(r"[-_](?:s|seed)[-_=]?(\d+)$", re.I)


@dataclass
class RunData:
    """What the report reads from one run directory."""

    name: str
    path: Path
    config_text: str | None
    rows: list[dict] = field(default_factory=list)
    eval: dict | None = None
    machine: dict | None = None  # machine.json of the run, else eval.json's "machine"
    seed: int | None = None  # train.seed of config.yaml, else the name's seed suffix
    group: str = ""  # the name without its time and seed suffixes (runs of one recipe over seeds)

    def samples(self) -> list[dict] | None:
        """The rows of ``samples.jsonl`` (the trained model's held-out samples); None without one."""
        path = self.path / SAMPLES_FILE
        return load_samples(path) if path.is_file() else None


def group_label(name: str) -> str:
    """``name`` without its time stamp and seed suffix: ``cispo-s1-20250101-120000`` -> ``cispo``."""
    stem = _TIME_SUFFIX.sub("", name)
    return _SEED_SUFFIX.sub("", stem) or stem or name


def run_seed(config_text: str | None, name: str) -> int | None:
    """``train.seed`` of the run's config.yaml; else the seed in the name's suffix; else None."""
    try:
        config = yaml.safe_load(config_text) if config_text else None
    except yaml.YAMLError:
        config = None
    seed = ((config or {}).get("train") or {}).get("seed") if isinstance(config, dict) else None
    if isinstance(seed, int) and not isinstance(seed, bool):
        return seed
    match = _SEED_SUFFIX.search(_TIME_SUFFIX.sub("", name))
    return int(match.group(1)) if match else None


def load_run(path: Path, name: str | None = None) -> RunData:
    """Read config.yaml, metrics.jsonl and eval.json (each optional) of a run directory."""
    path = Path(path)
    if not path.is_dir():
        raise UserError(f"{path}: not a directory; pass a run directory (it holds metrics.jsonl)")
    files = [path / f for f in ("config.yaml", "metrics.jsonl", "eval.json")]
    if not any(f.is_file() for f in files):
        raise UserError(f"{path}: no config.yaml, metrics.jsonl or eval.json; pass an rlvr run directory")
    cfg = path / "config.yaml"
    result = None
    if (path / "eval.json").is_file():
        try:
            result = json.loads((path / "eval.json").read_text())
        except json.JSONDecodeError as e:
            raise UserError(f"{path / 'eval.json'}: not valid JSON ({e.msg}); re-run rlvr eval") from None
    config_text = cfg.read_text() if cfg.is_file() else None
    name = name or path.resolve().name
    return RunData(name, path, config_text, read_metrics(path), result, _machine(path, result),
                   run_seed(config_text, path.resolve().name), group_label(path.resolve().name))


def _machine(path: Path, result: dict | None) -> dict | None:
    """The run's machine record: ``machine.json`` (written when training starts), else the one in
    eval.json; None when neither has one (older runs) or machine.json is unreadable."""
    try:
        info = json.loads((path / "machine.json").read_text())
        if isinstance(info, dict):
            return info
    except (OSError, ValueError):
        pass
    info = (result or {}).get("machine")
    return info if isinstance(info, dict) else None


def unique_names(paths: Sequence[Path]) -> list[str]:
    """Directory names, prefixed by the parent (then numbered) where two runs share a name."""
    base = [Path(p).resolve().name for p in paths]
    names = [f"{Path(p).resolve().parent.name}/{n}" if base.count(n) > 1 else n for p, n in zip(paths, base)]
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} #{seen[n]}")
    return out


def load_runs(run_dirs: Sequence[Path], groups: Sequence[str] | None = None) -> list[RunData]:
    """Every run of ``run_dirs`` under a distinct name; ``groups``: one label per run replacing the
    label read from its name (``rlvr compare --group``)."""
    if not run_dirs:
        raise UserError("no run directory given; pass at least one run directory")
    if groups is not None and len(groups) != len(run_dirs):
        raise UserError(f"--group needs one label per run directory: {len(run_dirs)} runs, {len(groups)} labels")
    runs = [load_run(Path(p), n) for p, n in zip(run_dirs, unique_names([Path(p) for p in run_dirs]))]
    for run, label in zip(runs, groups or []):
        run.group = label
    return runs


def runs_by_group(runs: Sequence[RunData]) -> dict[str, list[RunData]]:
    """group label -> its runs, groups in order of first appearance, runs sorted by seed (None last)."""
    out: dict[str, list[RunData]] = {}
    for run in runs:
        out.setdefault(run.group, []).append(run)
    return {g: sorted(rs, key=lambda r: (r.seed is None, r.seed or 0)) for g, rs in out.items()}


def eval_block(result: dict | None, model: str) -> dict:
    """The eval.json block of ``model`` ("base" | "trained"); a one-model eval.json counts as trained."""
    if not result:
        return {}
    if "trained" in result or "base" in result:
        return result.get(model) or {}
    return result if model == "trained" and "pass_at_k" in result else {}


def passk_of(block: dict, k: str) -> Any:
    """pass@k of an eval.json block; ``k="max"`` is the largest k it has."""
    pk = block.get("pass_at_k") or {}
    if not pk:
        return None
    return pk.get(max(pk, key=int) if k == "max" else k)
