"""A run's dump folder as its frameworks leave it -> its sample files by logged step.

| framework | files (under the folder given) | step |
| --- | --- | --- |
| TRL | ``completions/completions_<step:05d>.parquet`` (one file per logged step, the latest batch) | in the name |
| verl | ``<global_step>.jsonl`` (``trainer.rollout_data_dir`` / ``trainer.validation_data_dir``) | the name |
| SkyRL | ``dumped_evals/global_step_<N>_evals/<data_source>.jsonl`` (``aggregated_results.jsonl`` skipped) | folder |
| NeMo-RL | ``val_data_step<N>.jsonl`` (else ``train_data_step<N>.jsonl``) | the name |
| prime-rl | ``rollouts/step_<N>/<eval or train>/<all or effective>/traces.jsonl`` (eval and all preferred) | folder |

A folder may hold one framework's files only; a step may have several files (SkyRL's data sources).
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvr.errors import UserError

# (kind, pattern on the path relative to the folder); the first kind with any file wins
PATTERNS: tuple[tuple[str, str], ...] = (
    ("trl", r"(?:.*/)?completions_(\d+)\.parquet"),
    ("prime-rl eval", r"(?:.*/)?step_(\d+)/eval/all/traces\.jsonl"),
    ("prime-rl eval", r"(?:.*/)?step_(\d+)/eval/effective/traces\.jsonl"),
    ("prime-rl train", r"(?:.*/)?step_(\d+)/train/all/traces\.jsonl"),
    ("prime-rl train", r"(?:.*/)?step_(\d+)/train/effective/traces\.jsonl"),
    ("skyrl", r"(?:.*/)?global_step_(\d+)_evals/(?!aggregated_results\.jsonl$)[^/]+\.jsonl"),
    ("nemo-rl val", r"(?:.*/)?val_data_step(\d+)\.jsonl"),
    ("nemo-rl train", r"(?:.*/)?train_data_step(\d+)\.jsonl"),
    ("verl", r"(\d+)\.jsonl"),
)


def step_files(folder: str | Path) -> dict[int, list[Path]]:
    """step -> its sample files (sorted), for the first kind of :data:`PATTERNS` found under ``folder``;
    a UserError naming the layouts when none is."""
    root = Path(folder)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    rel = [(p, p.relative_to(root).as_posix()) for p in files]
    for _kind, pattern in PATTERNS:  # prime-rl: eval/all before the other subsets
        found: dict[int, list[Path]] = {}
        for path, name in rel:
            match = re.fullmatch(pattern, name)
            if match:
                found.setdefault(int(match.group(1)), []).append(path)
        if found:
            return dict(sorted(found.items()))
    raise UserError(f"{root}: no dump files of a known run folder (TRL completions/completions_N.parquet, verl "
                    "N.jsonl, SkyRL global_step_N_evals/*.jsonl, NeMo-RL val_data_stepN.jsonl, prime-rl "
                    "rollouts/step_N/eval/all/traces.jsonl); pass one file with --samples FILE")
