"""The published record of an experiment's cells (rlvr.experiments.archive): what --publish keeps and
what --resume-published puts back."""

from __future__ import annotations

import json

import pytest
import yaml

from rlvr.errors import UserError
from rlvr.experiments import spec
from rlvr.experiments.archive import prune, restore_archive, save_archive
from rlvr.experiments.cells import open_cell

SERIES = {"step": [1, 2], "samples": [128, 256], "heldout_pass_rate": [0.2, None], "entropy": [0.31, 0.29]}


def _out(tmp_path):
    out = tmp_path / "out"
    m = out / "models" / "rl-s0"
    (m / "run").mkdir(parents=True)
    (m / "done.json").write_text(json.dumps({"path": str(m / "run/checkpoints/step_000002"), "key": "k1",
                                             "milestones": [], "wall_s": 60.0}))
    (m / "run" / "train_summary.json").write_text(json.dumps({"steps": 2, "wall_s": 50.0}))
    (m / "run" / "machine.json").write_text(json.dumps({"cpu": "AMD EPYC"}))
    (out / "models" / "rl-s1" / "run").mkdir(parents=True)  # unfinished: no done.json, not published
    for name, stats in (("rl-s0", {"kind": "dynamics", "series": SERIES}), ("base", {"n": 2, "correct": [1, 2]})):
        d = out / "evals" / "proto" / name
        assert open_cell(d, f"key-{name}") is None
        (d / "stats.json").write_text(json.dumps(stats))
    (out / "evals" / "proto" / "rl-s1").mkdir()  # a cell with neither key nor stats: skipped
    return out


def test_prune_keeps_the_named_series_of_dynamics_cells_only():
    cell = {"kind": "dynamics", "series": SERIES}
    assert prune(cell, ()) is cell and prune({"n": 2}, ("step",)) == {"n": 2}
    assert prune(cell, ("step", "samples")) == {"kind": "dynamics", "series": {"step": [1, 2], "samples": [128, 256]},
                                                "archived_series": ["step", "samples"]}


def test_publish_then_restore_gives_back_the_records_and_cells(tmp_path):
    out, dest = _out(tmp_path), tmp_path / "cells"
    assert save_archive(out, dest, ("step", "samples", "heldout_pass_rate")) == {"models": 1, "evals": 2}
    first = (dest / "evals" / "proto" / "rl-s0.json.gz").read_bytes()
    save_archive(out, dest, ("step", "samples", "heldout_pass_rate"))  # again: the same bytes (no timestamp)
    assert (dest / "evals" / "proto" / "rl-s0.json.gz").read_bytes() == first
    assert sorted(p.name for p in dest.rglob("*") if p.is_file()) == ["base.json.gz", "rl-s0.json", "rl-s0.json.gz"]

    new = tmp_path / "new"
    assert restore_archive(dest, new) == {"models": 1, "evals": 2}
    done = json.loads((new / "models" / "rl-s0" / "done.json").read_text())
    assert done["key"] == "k1" and done["wall_s"] == 60.0 and done["restored"].endswith("rl-s0.json")
    assert json.loads((new / "models/rl-s0/run/train_summary.json").read_text()) == {"steps": 2, "wall_s": 50.0}
    # the runner's cache check accepts the restored cells under their keys
    assert open_cell(new / "evals" / "proto" / "base", "key-base") == {"n": 2, "correct": [1, 2]}
    dyn = open_cell(new / "evals" / "proto" / "rl-s0", "key-rl-s0")
    assert dyn["series"] == {k: v for k, v in SERIES.items() if k != "entropy"}
    assert open_cell(new / "evals" / "proto" / "rl-s0", "another key") is None  # a changed key still retrains


def test_restore_never_overwrites_what_the_folder_has(tmp_path):
    out, dest = _out(tmp_path), tmp_path / "cells"
    save_archive(out, dest)
    (out / "evals" / "proto" / "base" / "stats.json").write_text(json.dumps({"n": 2, "correct": [0, 0]}))
    assert restore_archive(dest, out) == {"models": 0, "evals": 0}
    assert json.loads((out / "evals/proto/base/stats.json").read_text())["correct"] == [0, 0]
    assert "restored" not in json.loads((out / "models/rl-s0/done.json").read_text())


def test_the_archived_series_are_declared_with_step():
    data = yaml.safe_load((spec.EXPERIMENTS_DIR / "scalerl.yaml").read_text())
    assert "heldout_pass_rate" in spec.parse(data, "scalerl").archive.series
    for bad, key in (({"series": ["samples"]}, "series"), ({"series": "step"}, "series"), ({"keep": ["step"]}, "keep")):
        with pytest.raises(UserError, match=rf"^experiments/scalerl\.yaml: archive\.{key}: "):
            spec.parse({**data, "archive": bad}, "scalerl")
