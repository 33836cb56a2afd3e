"""rlvr.paths: what makes a folder a run directory, and the atomic writer every result goes through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlvr.errors import UserError
from rlvr.paths import atomic_write, is_run_dir, metrics_file, require_run_dir


def test_a_run_directory_is_a_folder_with_a_config_file(tmp_path: Path) -> None:
    assert not is_run_dir(tmp_path)
    (tmp_path / "config.yaml").mkdir()  # a folder of that name is not the run's config
    assert not is_run_dir(tmp_path)
    with pytest.raises(UserError, match=r"^--resume .*: not a run directory \(no config.yaml\)"):
        require_run_dir(tmp_path, "--resume")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("name: x\n")
    assert is_run_dir(run) and require_run_dir(run) == run / "config.yaml"


def test_metrics_file_names_the_folder_without_one(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=f"{tmp_path}: no metrics.jsonl"):
        metrics_file(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    assert metrics_file(tmp_path) == tmp_path / "metrics.jsonl"


def test_atomic_write_replaces_whole_and_leaves_no_temp_file(tmp_path: Path, monkeypatch) -> None:
    target = atomic_write(tmp_path / "sub" / "r.json", "old")
    assert target.read_text() == "old"

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, "new")
    assert target.read_text() == "old" and sorted(p.name for p in target.parent.iterdir()) == ["r.json"]
