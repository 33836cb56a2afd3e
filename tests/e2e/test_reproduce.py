"""`rlvr reproduce`: the list, and the quick form of every declared experiment end to end (the
machinery and the page, not the verdicts), with resume from cached cells."""

from __future__ import annotations

import json
import re

import pytest

from rlvr.cli import main
from rlvr.experiments.legs import LEGS, read_legs
from rlvr.experiments.spec import load, names
from rlvr.experiments.verdict import VERDICTS


def test_list_shows_each_experiment_with_its_cost(capsys):
    assert main(["reproduce"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in names()) and "full min" in out


def test_unknown_experiment_and_bad_flags_exit_2(capsys, tmp_path):
    assert main(["reproduce", "boundry", "--out", str(tmp_path)]) == 2
    assert "did you mean 'boundary'" in capsys.readouterr().err
    assert main(["reproduce", "boundary", "--seeds", "0", "--out", str(tmp_path)]) == 2
    assert main(["reproduce", "boundary", "--page-only", "--out", str(tmp_path / "none")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["reproduce", "boundary", "--page-only", "--part", "1", "--out", str(tmp_path)]) == 2
    assert "drop --part" in capsys.readouterr().err
    assert main(["reproduce", "boundary", "--quick", "--resume-published", "--out", str(tmp_path)]) == 2
    assert "drop --quick" in capsys.readouterr().err
    assert main(["reproduce", "boundary", "--status", "--part", "2", "--out", str(tmp_path)]) == 2
    assert "--status reads the cached cells of every part: drop --part" in capsys.readouterr().err
    assert main(["reproduce", "boundary", "--status", "--out", str(tmp_path / "none")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_resume_published_needs_published_records(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no docs/reproductions/boundary/cells here
    assert main(["reproduce", "boundary", "--resume-published", "--page-only", "--out", str(tmp_path / "o")]) == 2
    assert "no published records at docs/reproductions/boundary/cells" in capsys.readouterr().err


@pytest.mark.parametrize("name", names())
def test_quick_form_runs_writes_its_page_and_resumes(name, tmp_path, capsys):
    out = tmp_path / name
    jobs = ["--jobs", "2"] if name == "scalerl" else []  # its 20 RL arms: trained two at a time
    assert main(["reproduce", name, "--quick", "--out", str(out), "--quiet", *jobs]) == 0
    built = json.loads((out / "table.json").read_text())["models"]
    bases = {m for m, spec in load(name).models.items() if spec.kind == "base"}  # cached pretrained, no folder
    assert all((out / "models" / m / "done.json").exists() for m in built if m.rsplit("-s", 1)[0] not in bases)
    table = json.loads((out / "table.json").read_text())
    assert table["quick"] and table["claims"]
    sampled = [json.loads(p.read_text()) for p in out.glob("evals/*/*/stats.json")]
    assert all(re.fullmatch(r"[0-9a-f]{12}", s["weights"]) for s in sampled if "correct" in s)  # what it sampled
    for row in table["claims"]:
        assert row["verdict"] in VERDICTS and (row["verdict"] != "not measured" or row["why"])
    page = (out / "README.md").read_text()
    assert page.index("| claim | the paper |") < page.index("## Protocol") < page.index("## Deviations")
    [leg] = read_legs(out / LEGS)  # the invocation's wall time, on the page
    assert leg["outcome"] == "complete" and leg["minutes"] > 0 and "## Wall time per part" in page
    assert "machine: " in page and "command: `rlvr reproduce" in page
    lines = page.splitlines()  # the provenance block every results page carries (tests/unit/test_standalone.py)
    assert lines[2].startswith("**Provenance**")
    assert lines[4] == "| command | CPU (model, flags) | threads | precision | date |"
    assert lines[6].startswith("| `rlvr reproduce") and lines[6].split("|")[-2].strip().startswith("20")  # a date
    # a killed evaluation: one model's statistics and one chunk (samples) or checkpoint (weights) gone
    # -> only that cell runs again
    victim = sorted(out.glob("evals/*/*/stats.json"))[0]
    victim.unlink()
    for part in [*victim.parent.glob("samples/chunk_*.jsonl"), *victim.parent.glob("ckpt_*.json")][:1]:
        part.unlink()  # (a dynamics cell has only its stats)
    trained = {p: p.stat().st_mtime_ns for p in out.glob("models/*/done.json")}
    before = {p: p.stat().st_mtime_ns for p in out.glob("evals/*/*/stats.json")}
    assert main(["reproduce", name, "--quick", "--out", str(out), "--quiet"]) == 0
    assert victim.exists() and all(p.stat().st_mtime_ns == t for p, t in before.items())
    assert all(p.stat().st_mtime_ns == t for p, t in trained.items())  # no model trained again
    again = json.loads((out / "table.json").read_text())
    assert [r["verdict"] for r in again["claims"]] == [r["verdict"] for r in table["claims"]]
    # a time budget stops only before a cell with work to do: everything cached -> the same page
    assert main(["reproduce", name, "--quick", "--out", str(out), "--quiet", "--max-minutes", "0.0001"]) == 0
    assert json.loads((out / "table.json").read_text())["status"] == table["status"]
    # --page-only: a missing cell stays missing (its claims "not run yet"), nothing trains or samples
    victim.unlink()
    before = {p: p.stat().st_mtime_ns for p in out.glob("evals/*/*/stats.json")}
    assert main(["reproduce", name, "--quick", "--out", str(out), "--quiet", "--page-only"]) == 0
    assert not victim.exists() and all(p.stat().st_mtime_ns == t for p, t in before.items())
    assert all(p.stat().st_mtime_ns == t for p, t in trained.items())
    assert len(read_legs(out / LEGS)) == 3  # the runs (first, resumed, on a budget); --page-only is no leg
    assert json.loads((out / "table.json").read_text())["timings"] == {}  # it computed nothing
    assert "None: this invocation read the cells on disk (--page-only)" in (out / "README.md").read_text()
    status = json.loads((out / "table.json").read_text())["status"]
    n = len(table["claims"])
    assert status.startswith("partial")
    # where every claim is still measured (the cell was one no claim reads), the status says why it is partial
    assert (not status.startswith(f"partial: {n} of {n} claims measured")
            or status.endswith("; 1 declared cell(s) not on disk"))


def test_publish_copies_a_full_page_and_indexes_every_claim(tmp_path):
    from rlvr.errors import UserError
    from rlvr.experiments.page import publish

    out = tmp_path / "run"
    (out / "plots").mkdir(parents=True)
    (out / "plots" / "passk_t06.png").write_bytes(b"png")
    (out / "README.md").write_text("# page")
    claims = [{"claim": "RL wins at k=1.", "verdict": "reproduced", "estimates": [
        {"seed": 0, "label": "s0", "value": 0.1, "lo": 0.05, "hi": 0.15}], "spread": {"seeds": 1}},
        {"claim": "Base overtakes.", "verdict": "not run yet", "missing": "x/evals/a/rl-s0/stats.json"}]
    table = {"experiment": "demo", "quick": False, "status": "complete", "claims": claims}
    (out / "table.json").write_text(json.dumps(table))
    (out / LEGS).write_text('{"event": "start", "id": "a", "parts": [1], "start": "t"}\n')
    index = publish(out, tmp_path / "docs").read_text()
    assert (tmp_path / "docs" / "demo" / "cells" / LEGS).read_text() == (out / LEGS).read_text()
    assert (tmp_path / "docs" / "demo" / "plots" / "passk_t06.png").exists()
    row = "| [demo](demo/README.md) | RL wins at k=1. | finding | **reproduced** | s0 +0.100 [+0.050, +0.150] |"
    assert row in index
    assert "**not measured**" in index  # an older page's "not run yet" reads as its status
    (out / "table.json").write_text(json.dumps({**table, "quick": True}))
    with pytest.raises(UserError, match="quick form"):
        publish(out, tmp_path / "docs")


def test_a_run_training_at_the_deadline_pauses_and_the_next_invocation_resumes_it(tmp_path, monkeypatch, capsys):
    """--max-minutes reaching an RL run mid-training: it checkpoints and pauses (no done.json, no
    evaluation runs, the run is not complete); the next invocation resumes it and completes."""
    import time

    from rlvr.experiments import models, runner

    exp = load("boundary").quick_form()
    real = models.build_model

    def deadline_now(exp_, spec, seed, out_, built, progress="none", stop_at=None):
        return real(exp_, spec, seed, out_, built, progress, time.time() if spec.kind == "rl" else None)

    monkeypatch.setattr(runner, "build_model", deadline_now)
    with pytest.warns(RuntimeWarning) as said:
        first = runner.run_experiment(exp, tmp_path, 1, "none", max_minutes=60.0)
    said = [str(w.message) for w in said]  # the pause said once by the training loop, then the stop
    assert len([w for w in said if re.search(r"paused at step 1 of \d+ \(its time budget\)", w)]) == 1, said
    assert len([w for w in said if "stopped after 60.0 minutes (--max-minutes)" in w]) == 1, said
    assert not first["complete"] and not list(tmp_path.glob("evals/*/*/stats.json"))
    before = runner.part_status(exp, tmp_path, 1)  # the paused model and every evaluation still to run
    assert [r["part"] for r in before] == list(range(1, len(exp.parts) + 1))
    assert sum(r["missing"] for r in before) >= len(runner.part_cells(exp, 1, None)[1])
    paused = [d for d in tmp_path.glob("models/*") if (d / "run").is_dir()]
    assert len(paused) == 1 and not (paused[0] / "done.json").exists()
    monkeypatch.setattr(runner, "build_model", real)
    second = runner.run_experiment(exp, tmp_path, 1, "none", max_minutes=60.0)
    assert second["complete"] and (paused[0] / "done.json").exists()
    after = runner.part_status(exp, tmp_path, 1)
    assert sum(r["missing"] for r in after) < sum(r["missing"] for r in before)
    failed = set(second["failed"])  # (the quick form's distillation teacher may get nothing right)
    for r in after:  # a part still missing cells evaluates a model that failed to build
        assert not r["missing"] or failed & {m for ev in exp.part_evaluations(r["part"])
                                             for m in exp.evaluations[ev].models}
    assert main(["reproduce", "boundary", "--quick", "--seeds", "1", "--status", "--out", str(tmp_path),
                 "--plain"]) == 0
    done = sum(not r["missing"] for r in after)
    assert f"{done} of {len(exp.parts)} parts done" in capsys.readouterr().out
    steps = [json.loads(line)["step"] for line in (paused[0] / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, steps[-1] + 1))  # resumed after step 1: every step once


def test_status_tells_a_cell_under_another_key_from_a_missing_one(tmp_path, capsys):
    """A cell computed under an older declaration (its key changed) is 'stale', not just missing, and
    the next part to run skips a part whose missing cells are all stale."""
    from rlvr.experiments import runner

    exp = load("boundary").quick_form()
    assert main(["reproduce", "boundary", "--quick", "--seeds", "1", "--out", str(tmp_path), "--quiet"]) == 0
    before = {r["part"]: r for r in runner.part_status(exp, tmp_path, 1)}
    cell = sorted(tmp_path.glob("evals/*/*/key"))[0]
    cell.write_text("an older declaration's key")
    after = {r["part"]: r for r in runner.part_status(exp, tmp_path, 1)}
    changed = [p for p in after if after[p]["missing"] != before[p]["missing"]]
    assert changed  # (a cell parts share counts in each)
    assert all(after[p]["stale"] - before[p]["stale"] == after[p]["missing"] - before[p]["missing"] == 1
               for p in changed)
    model = next(tmp_path.glob("models/*/done.json"))  # a model's key changed: it and its evaluations are stale
    model.write_text(json.dumps({**json.loads(model.read_text()), "key": "older"}))
    again = runner.part_status(exp, tmp_path, 1)
    assert sum(r["stale"] for r in again) >= 2 and all(r["stale"] <= r["missing"] for r in again)
    capsys.readouterr()
    assert main(["reproduce", "boundary", "--quick", "--seeds", "1", "--status", "--out", str(tmp_path),
                 "--plain"]) == 0
    shown = capsys.readouterr().out
    assert "stale)" in shown and "on disk under another key" in shown
