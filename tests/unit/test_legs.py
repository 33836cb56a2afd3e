"""The parts' wall times (rlvr/experiments/legs.py): legs recorded, killed legs, groups, merging,
the page's rows against hand sums, and a leg recorded around each way a run can end."""

import json

import pytest

from rlvr.experiments import legs, reproduction
from rlvr.experiments.spec import load


def _leg(i, parts, start, minutes=None, outcome=None, machine="M"):
    lines = [json.dumps({"event": "start", "id": i, "parts": parts, "start": start, "machine": machine})]
    if minutes is not None:
        lines.append(json.dumps({"event": "end", "id": i, "end": "x", "minutes": minutes, "outcome": outcome}))
    return lines


def test_start_and_end_make_one_leg_with_its_minutes(tmp_path):
    leg = legs.start_leg(tmp_path, (3,), "cpu line", 40.0)
    [one] = legs.read_legs(tmp_path / legs.LEGS)
    assert one["outcome"] == "running" and one["minutes"] is None  # no end yet, and this process runs
    leg["t"] -= 90  # it started 1.5 min ago
    legs.end_leg(tmp_path, leg, "paused")
    [one] = legs.read_legs(tmp_path / legs.LEGS)
    assert one["parts"] == [3] and one["outcome"] == "paused" and one["machine"] == "cpu line"
    assert one["minutes"] == pytest.approx(1.5, abs=0.02) and one["max_minutes"] == 40.0


def test_a_leg_without_an_end_whose_process_is_gone_reads_killed(tmp_path):
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leg = legs.start_leg(tmp_path, (1,), "cpu")
    lines = (tmp_path / legs.LEGS).read_text().replace(f'"pid": {leg["pid"]}', f'"pid": {int(gone.stdout)}')
    (tmp_path / legs.LEGS).write_text(lines)
    assert [x["outcome"] for x in legs.read_legs(tmp_path / legs.LEGS)] == ["killed"]
    (tmp_path / legs.LEGS).write_text(lines.replace('"host": "', '"host": "elsewhere-'))
    assert [x["outcome"] for x in legs.read_legs(tmp_path / legs.LEGS)] == ["killed"]  # another machine's


def test_part_rows_sum_legs_per_part_and_count_killed_ones(tmp_path):
    f = tmp_path / legs.LEGS
    lines = [*_leg("a", [1], "2026-01-01T00:00", 18.9, "complete"),
             *_leg("b", [2], "2026-01-01T01:00"),  # killed: no end
             *_leg("c", [2], "2026-01-01T02:00", 30.0, "paused", machine="N"),
             *_leg("d", [2], "2026-01-01T03:00", 12.5, "complete"),
             *_leg("e", [3, 4], "2026-01-01T04:00", 20.0, "incomplete"),
             "{not json", '{"event": "end", "id": "zz", "minutes": 9}']  # a cut line; an end without a start
    f.write_text("\n".join(lines) + "\n")
    rows = {r["parts"]: r for r in legs.part_rows(legs.read_legs(f), [20, 30, 10, 10, 5])}
    assert list(rows) == ["1", "2", "3+4", "5"]
    assert rows["1"] == {"parts": "1", "declared": 20, "minutes": 18.9, "legs": 1, "killed": 0, "last": "complete",
                         "machines": ["M"]}
    assert rows["2"]["minutes"] == 42.5 and rows["2"]["legs"] == 3 and rows["2"]["killed"] == 1
    assert rows["2"]["last"] == "complete" and rows["2"]["machines"] == ["M", "N"]
    assert rows["3+4"]["declared"] == 20 and rows["3+4"]["last"] == "incomplete" and rows["5"]["last"] is None
    assert rows["5"]["legs"] == 0 and rows["5"]["minutes"] is None
    page = legs.part_lines(legs.read_legs(f), [20, 30, 10, 10, 5], estimated=True)
    assert "| 2 | ~30 | 42.5 | 3 (1 killed) | complete | L1, L2 |" in page
    assert "| 5 | ~5 | - | 0 | not run | - |" in page and "- L2: N" in page
    assert not any("imported" in line for line in page)
    assert legs.part_lines([], [20], False) == []


def test_a_whole_run_covers_every_part():
    run = [{"parts": None, "start": "t", "minutes": 7.0, "outcome": "complete", "machine": "M"}]
    assert [r["parts"] for r in legs.part_rows(run, [3, 4])] == ["all"]
    assert legs.part_rows(run, [3, 4])[0]["declared"] == 7


def test_merge_adds_only_the_lines_dest_lacks(tmp_path):
    src, dest = tmp_path / "src.jsonl", tmp_path / "out" / legs.LEGS
    src.write_text("\n".join([*_leg("a", [1], "t1", 5.0, "complete"), *_leg("b", [2], "t2")]) + "\n")
    dest.parent.mkdir()
    dest.write_text(_leg("a", [1], "t1")[0] + "\n")  # a's start is here already, its end is not
    assert legs.merge_legs(src, dest) == 2 and legs.merge_legs(src, dest) == 0
    assert [(leg["id"], leg["outcome"]) for leg in legs.read_legs(dest)] == [("a", "complete"), ("b", "killed")]
    assert legs.merge_legs(tmp_path / "absent", dest) == 0


@pytest.mark.parametrize("ending, outcome", [({"complete": True, "stopped": False}, "complete"),
                                              ({"complete": False, "stopped": True}, "paused"),
                                              ({"complete": False, "stopped": False}, "incomplete"),
                                              (KeyboardInterrupt, "KeyboardInterrupt")])
def test_each_invocation_is_one_leg_ended_with_how_it_ended(tmp_path, monkeypatch, ending, outcome):
    def fake(*args, **kw):
        if isinstance(ending, type):
            raise ending
        return ending

    monkeypatch.setattr(reproduction, "run_experiment", fake)
    exp = load("boundary")
    if isinstance(ending, type):
        with pytest.raises(ending):
            reproduction._run_leg(exp, tmp_path, 1, "none", 40.0, (2,), 1, "cpu")
    else:
        reproduction._run_leg(exp, tmp_path, 1, "none", 40.0, 2, 1, "cpu")
    [leg] = legs.read_legs(tmp_path / legs.LEGS)
    assert leg["outcome"] == outcome and leg["parts"] == [2] and leg["minutes"] is not None


def test_an_unknown_part_records_no_leg(tmp_path):
    from rlvr.errors import UserError

    with pytest.raises(UserError, match="--part must be"):
        reproduction._run_leg(load("boundary"), tmp_path, 1, "none", None, 99, 1, "cpu")
    assert not (tmp_path / legs.LEGS).exists()


def test_resume_published_merges_the_published_legs(tmp_path):
    cells = tmp_path / "docs" / "boundary" / "cells"
    cells.mkdir(parents=True)
    (cells / legs.LEGS).write_text("\n".join(_leg("a", [1], "t1", 5.0, "complete")) + "\n")
    out = tmp_path / "out"
    reproduction.restore(load("boundary"), out, tmp_path / "docs", lambda _: None)
    assert [leg["minutes"] for leg in legs.read_legs(out / legs.LEGS)] == [5.0]


def test_status_shows_each_parts_measured_minutes_and_killed_legs(tmp_path, monkeypatch, capsys):
    from rlvr.commands.reproduce import print_status
    from rlvr.experiments import runner

    (tmp_path / legs.LEGS).write_text("\n".join([*_leg("a", [1], "t1"), *_leg("b", [1], "t2", 10.4, "complete"),
                                                 *_leg("c", [2], "t3", 3.0, "paused")]) + "\n")
    monkeypatch.setattr(runner, "part_status", lambda exp, out, seeds: [
        {"part": 1, "missing": 0, "stale": 0, "minutes": 30}, {"part": 2, "missing": 4, "stale": 0, "minutes": 20},
        {"part": 3, "missing": 2, "stale": 2, "minutes": 20}])
    print_status(load("boundary"), tmp_path, 1, plain=True)
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:5]]
    assert rows[0][-5:] == ["10.4", "(2", "legs,", "1", "killed)"] and rows[0][2] == "done"
    assert rows[1][-3:] == ["3.0", "(1", "leg)"] and rows[2][-1] == "-"
    assert rows[2][1:4] == ["2", "(2", "stale)"] and rows[2][4] == "stale"  # every missing cell stale


def test_imported_legs_name_their_parts_as_ranges():
    assert legs._spans(["1", "2", "3", "5", "6+7", "8", "9"]) == "1-3, 5, 6+7, 8-9"
    run = [{"parts": [p], "start": f"t{p}", "minutes": 1.0, "outcome": "complete", "machine": "M", "source": "log"}
           for p in (1, 2, 3)]
    assert "- legs of parts 1-3 not recorded by rlvr, imported from log" in legs.part_lines(run, [1, 1, 1], False)


def test_cpu_name_of_a_machine_line():
    line = "AMD EPYC (family 26 model 2; avx2 avx512f), 2 cores, 2 torch threads, torch 2.13.0+cpu"
    assert legs.cpu_name(line) == "AMD EPYC family 26 model 2"
    assert legs.cpu_name("machine not recorded") == "machine not recorded"


def test_the_list_shows_a_parts_published_measured_minutes(tmp_path, monkeypatch, capsys):
    from rlvr.commands.reproduce import list_experiments

    cells = tmp_path / "docs" / "reproductions" / "boundary" / "cells"
    cells.mkdir(parents=True)
    line = "Zen (family 23 model 49; avx2), 2 cores"
    (cells / legs.LEGS).write_text("\n".join([*_leg("a", [2], "t1", 12.34, "complete", machine=line),
                                              *_leg("b", [3], "t2", 5.0, "paused", machine=line)]) + "\n")
    monkeypatch.chdir(tmp_path)  # the published pages are read from the working directory, as the command does
    list_experiments(plain=True)
    out = capsys.readouterr().out.splitlines()
    start = next(i for i, row in enumerate(out) if row.startswith("boundary "))
    two, three = out[start + 2], out[start + 3]
    assert "--part 2" in two and "(measured 12.3 on Zen family 23 model 49)" in two
    assert "--part 3" in three and "measured" not in three  # its last leg paused: not a part's cost


def test_status_shows_the_runs_begun_and_not_finished(tmp_path):
    """A run with a log and no done.json is listed with its last step of its config's total (a line cut
    mid-write skipped), its last checkpoint and its log's age; a finished one and a folder without a
    log are not; an old log says the run is not running now."""
    import os

    from rlvr.commands.reproduce import progress_lines
    from rlvr.experiments.models import unfinished_runs

    def run(name: str, steps: list[int], done: bool = False, tail: str = "") -> None:
        d = tmp_path / "models" / name / "run"
        d.mkdir(parents=True)
        (d / "config.yaml").write_text("train:\n  steps: 400\n")
        (d / "metrics.jsonl").write_text("".join(f'{{"step": {s}, "loss": 0.1}}\n' for s in steps) + tail)
        if done:
            (d.parent / "done.json").write_text("{}")

    run("a-s0", [1, 2, 3], tail='{"step": 4, "lo')  # its 4th line half written
    run("b-s1", [1, 2], done=True)
    run("c", [1])
    (tmp_path / "models" / "d").mkdir()
    run("e", [7])
    (tmp_path / "models" / "e" / "run" / "config.yaml").write_text("train: [")  # unreadable: no total
    old = (tmp_path / "models" / "c" / "run" / "metrics.jsonl")
    os.utime(old, (old.stat().st_atime, old.stat().st_mtime - 3600))
    rows = unfinished_runs(tmp_path)
    assert [(r["model"], r["step"], r["steps"], r["checkpoint"]) for r in rows] == [("a-s0", 3, 400, None),
                                                                                   ("c", 1, 400, None),
                                                                                   ("e", 7, None, None)]
    assert rows[0]["age_s"] < 60 and 3500 < rows[1]["age_s"] < 3700
    lines = progress_lines(tmp_path)
    assert lines[0] == "runs begun, not finished:"
    assert lines[1].startswith("  a-s0: step 3 of 400 (1%), no checkpoint yet, log written")
    assert "not running" not in lines[1]
    assert lines[2].endswith("log written 60 min ago; not running now: the part's command resumes it")
    assert lines[3].startswith("  e: step 7, no checkpoint yet")
    assert progress_lines(tmp_path / "nothing") == []
