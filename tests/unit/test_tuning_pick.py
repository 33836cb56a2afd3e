"""benchmarks/studies/tuning_pick.py, run as a user runs it on hand-made validation cells: each
candidate's peak gain over the base and the declared rule's pick (largest peak gain; within the tie
margin the candidate listed first; none above 0: the first)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "studies" / "tuning_pick.py"


def cell(out: Path, name: str, correct: list[int], n: int = 4) -> None:
    folder = out / "evals" / "T1-p1-n4-P2-o256" / name
    folder.mkdir(parents=True)
    (folder / "stats.json").write_text(json.dumps({"n": n, "correct": correct}))


def run(out: Path, *groups: str) -> dict:
    report = out / "picks.json"
    subprocess.run([sys.executable, str(SCRIPT), str(out), *[a for g in groups for a in ("--group", g)],
                    "--json", str(report)], capture_output=True, text=True, check=True)
    return json.loads(report.read_text())


def test_peak_gain_and_the_rule(tmp_path: Path) -> None:
    cell(tmp_path, "base", [1, 1])                     # pass@1 0.25
    cell(tmp_path, "a_1@step_000020", [2, 1])          # 0.375
    cell(tmp_path, "a_1", [1, 1])                      # final 0.25
    cell(tmp_path, "a_2@step_000020", [2, 2])          # 0.5: peak gain +0.25, the largest
    cell(tmp_path, "a_2", [1, 0])
    cell(tmp_path, "b_1@step_000020", [0, 0])          # every candidate of b below the base
    cell(tmp_path, "b_1", [1, 0])
    cell(tmp_path, "b_2@step_000020", [1, 0])
    cell(tmp_path, "b_2", [0, 0])
    report = run(tmp_path, "a=a_1,a_2", "b=b_2,b_1")
    rows = report["groups"]["a"]["rows"]
    assert [round(r["peak_gain"], 4) for r in rows] == [0.125, 0.25]
    assert [r["peak_step"] for r in rows] == [20, 20]
    assert report["groups"]["a"]["pick"] == "a_2"
    assert report["groups"]["b"]["pick"] == "b_2"      # no gain above 0: the first listed


def test_gains_within_the_tie_margin_go_to_the_first(tmp_path: Path) -> None:
    cell(tmp_path, "base", [0, 0], n=1000)
    cell(tmp_path, "a_1", [200, 0], n=1000)            # 0.100
    cell(tmp_path, "a_2", [208, 0], n=1000)            # 0.104: within 0.005 of the best
    report = run(tmp_path, "a=a_1,a_2")
    assert report["groups"]["a"]["pick"] == "a_1"
    cell(tmp_path, "c_1", [200, 0], n=1000)
    cell(tmp_path, "c_2", [212, 0], n=1000)            # 0.106: beyond the margin
    assert run(tmp_path, "c=c_1,c_2")["groups"]["c"]["pick"] == "c_2"


def test_bad_inputs_exit_with_one_line(tmp_path: Path) -> None:
    cell(tmp_path, "a_1", [1, 1])  # no base cell
    for groups in (["a=a_1"], ["a=nosuch"]):
        done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), *[x for g in groups for x in ("--group", g)],
                               "--json", str(tmp_path / "out.json")], capture_output=True, text=True)
        assert done.returncode != 0
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert not (tmp_path / "out.json").exists()
    cell(tmp_path, "base", [1, 1])
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--group", "a=nosuch"], capture_output=True,
                          text=True)
    assert done.returncode != 0 and "no cells of 'nosuch'" in done.stderr
