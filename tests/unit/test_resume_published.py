"""`rlvr reproduce scalerl --resume-published` on scalerl's committed records: every published model
and cell is found whatever the local cache holds (no base, or a base with other weights), a page
re-rendered from them is complete, a republication writes every record back byte for byte, and
computing anything more on a base with other weights than the records' stops naming both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr.errors import UserError
from rlvr.experiments import spec
from rlvr.experiments.archive import restore_archive, save_archive
from rlvr.experiments.base_weights import check_same_base, recorded_base_weights
from rlvr.experiments.models import model_config, weights_digest
from rlvr.experiments.runner import run_experiment
from rlvr.model.precision import ENV_PIN
from rlvr.train.pretrain import base_path

CELLS = Path(__file__).resolve().parents[2] / "docs" / "reproductions" / "scalerl" / "cells"
PUBLISHED_BASE = "77ee1218908b"  # the base weights every committed scalerl model records


@pytest.fixture
def restored(tmp_path, monkeypatch):
    """(experiment, output folder holding scalerl's published records, nothing else); the cache empty."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(ENV_PIN, "float32")  # the bf16 arms' speed check measures nothing
    out = tmp_path / "out"
    assert restore_archive(CELLS, out) == {"models": 60, "evals": 60}
    return spec.load("scalerl"), out


def _local_base(exp, content: bytes) -> str:
    """A base in the (temporary) cache under scalerl's key, with other weights -> their digest."""
    cfg = model_config(exp, exp.models["base"], None)
    final = base_path(cfg.model, cfg.pretrain)
    final.mkdir(parents=True)
    (final / "model.safetensors").write_bytes(content)
    (final.parent / "pretrain.json").write_text("{}")
    return weights_digest(final)


def test_an_empty_cache_finds_every_published_cell_and_the_page_is_complete(restored):
    """--page-only takes the base by its declared identity (its key; no weights read or pretrained):
    every published evaluation key matches, nothing is missing."""
    exp, out = restored
    run = run_experiment(exp, out, 3, "none", cached_only=True)
    assert run["complete"] and not run["failed"]
    assert len([k for k in run["timings"] if k.startswith("eval ")]) == 60
    base = run["built"]["base"]
    assert base["key"] == "59aff57a76b385e1" and base["weights"] == PUBLISHED_BASE and base["path"].endswith("final")


def test_a_cached_base_with_other_weights_still_finds_the_published_cells(restored):
    """The defect: with a base in the cache, a restored model (no weights here) stopped on its first
    evaluation although the cell was restored under its key."""
    exp, out = restored
    local = _local_base(exp, b"weights pretrained on another CPU")
    assert local != PUBLISHED_BASE
    for cached_only in (True, False):
        run = run_experiment(exp, out, 3, "none", cached_only=cached_only)
        assert run["complete"] and len([k for k in run["timings"] if k.startswith("eval ")]) == 60


def test_computing_more_on_a_base_with_other_weights_stops_naming_both(restored):
    exp, out = restored
    local = _local_base(exp, b"weights pretrained on another CPU")
    cell = out / "evals" / "dynamics" / "grpo-s1"
    for f in cell.iterdir():
        f.unlink()
    cell.rmdir()  # a cell to compute again, from a model trained on the published base
    with pytest.raises(UserError, match=rf"eval c_grpo grpo-s1: the base `base` here .* has weights {local}, "
                                        rf"but 60 finished record\(s\) .* base with weights {PUBLISHED_BASE} "
                                        r"\(restored from the published records\)"):
        run_experiment(exp, out, 3, "none")
    assert not cell.exists()  # nothing was computed


def test_republishing_restored_records_writes_them_back_byte_for_byte(restored, tmp_path):
    """Their computed_at (absent from these records) and their done.json (without the restore mark)
    are the provenance: never rewritten. A cell computed again is written afresh."""
    exp, out = restored
    dest = tmp_path / "again"
    assert save_archive(out, dest, exp.archive.series) == {"models": 60, "evals": 60}
    before = {p.relative_to(CELLS): p.read_bytes() for p in CELLS.rglob("*") if p.is_file()}
    assert {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before

    stats = out / "evals" / "dynamics" / "grpo-s1" / "stats.json"
    changed = json.loads(stats.read_text())
    changed["series"]["step"][0] = -1
    stats.write_text(json.dumps(changed))
    save_archive(out, dest, exp.archive.series)
    for name, same in (("grpo-s1", False), ("grpo-s0", True)):
        cell = Path("evals") / "dynamics" / f"{name}.json.gz"
        assert ((dest / cell).read_bytes() == before[cell]) is same


def test_a_republication_that_changes_no_verdict_keeps_the_index_table_of_changes(tmp_path):
    """Re-rendering a page (its verdicts unchanged) kept emptying the index's table of the verdicts the
    last republication changed; it now keeps those of the last one that changed any."""
    from rlvr.experiments.page import publish

    row = {"id": "c1", "claim": "RL wins.", "verdict": "reproduced", "measure": "m", "args": {}, "expect": "positive",
           "estimates": [{"seed": 0, "label": "s0", "value": 0.1, "lo": 0.05, "hi": 0.15}], "spread": {"seeds": 1}}
    earlier = [{"id": "c1", "before": "inconclusive", "after": "reproduced", "why": "the seed-level interval"}]
    docs, out = tmp_path / "docs", tmp_path / "run"
    (docs / "demo").mkdir(parents=True)
    (docs / "demo" / "table.json").write_text(json.dumps({"experiment": "demo", "claims": [row], "changes": earlier}))
    out.mkdir()
    (out / "README.md").write_text("# page")
    table = {"experiment": "demo", "quick": False, "status": "complete", "claims": [row]}
    (out / "table.json").write_text(json.dumps(table))
    index = publish(out, docs).read_text()
    assert json.loads((docs / "demo" / "table.json").read_text())["changes"] == earlier
    assert "| demo | c1 | inconclusive | reproduced | the seed-level interval |" in index
    (out / "table.json").write_text(json.dumps({**table, "claims": [{**row, "verdict": "inconclusive"}]}))
    publish(out, docs)
    assert [c["after"] for c in json.loads((docs / "demo" / "table.json").read_text())["changes"]] == ["inconclusive"]


def test_a_base_cell_sampled_from_other_weights_stops_the_first_model_trained(tmp_path):
    """An experiment's first part may publish only its bases' evaluations (boundary_powered's did): a base
    pretrained again on another CPU has their key, not their weights, so the cells they recorded count as
    the models' records do."""
    exp = spec.load("scalerl")
    out = tmp_path / "out"
    cell = out / "evals" / "T1-p1-n8-P64" / "base"
    cell.mkdir(parents=True)
    (cell / "stats.json").write_text(json.dumps({"correct": [1], "n": 8, "weights": PUBLISHED_BASE}))
    old = out / "evals" / "T0.6-older" / "base"  # written before cells recorded their weights: not compared
    old.mkdir(parents=True)
    (old / "stats.json").write_text(json.dumps({"correct": [1], "n": 8}))
    found = recorded_base_weights(exp, out, lambda m: [0],
                                  lambda b: [out / "evals" / p / b for p in ("T1-p1-n8-P64", "T0.6-older", "none")])
    assert found == {"base": {PUBLISHED_BASE: ["evals/T1-p1-n8-P64/base"]}}
    check_same_base(found, "base", {"weights": PUBLISHED_BASE, "path": "here"}, "model grpo-s0", out)  # same: fine
    check_same_base(found, "base", {"weights": "", "path": "here"}, "model grpo-s0", out)  # unknown: not compared
    with pytest.raises(UserError, match=rf"model grpo-s0: the base `base` here \(here\) has weights 0123456789ab, "
                                        rf"but 1 finished record\(s\) .*evals/T1-p1-n8-P64/base.* {PUBLISHED_BASE}"):
        check_same_base(found, "base", {"weights": "0123456789ab", "path": "here"}, "model grpo-s0", out)
