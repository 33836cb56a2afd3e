"""benchmarks/studies/excursions_recipe_pick.py, run as a user runs it on hand-made tuning cells:
excursions_v2's rule (the first RL candidate reaching the target gain, else the largest; the SFT rate
with the highest pass@1, equal values to the lower rate; SFT rows at equal tokens) and its bad inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "studies" / "excursions_recipe_pick.py"
SFT = "s_1=2e-4,s_2=5e-4,s_3=1e-3"


def cell(out: Path, name: str, correct: list[int], n: int = 10) -> None:
    folder = out / "evals" / "T0.6-p1-n10-P2-o256" / name
    folder.mkdir(parents=True)
    (folder / "stats.json").write_text(json.dumps({"n": n, "correct": correct}))


def run_log(out: Path, name: str, lengths: list[float]) -> None:
    folder = out / "models" / name
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps({"step": i + 1, "response_len": v}) + "\n"
                                                  for i, v in enumerate(lengths)))


def run(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(out), "--base", "b", *extra, "--json",
                           str(out / "pick.json")], capture_output=True, text=True)


def sft_cells(out: Path, values: tuple[list[int], list[int], list[int]]) -> None:
    for name, correct in zip(("s_1", "s_2", "s_3"), values, strict=True):
        cell(out, name, correct)


def test_first_candidate_reaching_the_target_and_equal_tokens(tmp_path: Path) -> None:
    cell(tmp_path, "b", [2, 2])            # 0.20
    cell(tmp_path, "r_1", [3, 2])          # +0.05
    cell(tmp_path, "r_2", [4, 3])          # +0.15: the first reaching 0.10
    cell(tmp_path, "r_3", [6, 6])          # +0.40: larger, but listed later
    run_log(tmp_path, "r_2", [20.0, 22.0, 24.0])   # mean 22.0 -> t_RL = 9.2 + 22.0 = 31.2
    sft_cells(tmp_path, ([5, 5], [7, 7], [7, 7]))  # s_2 and s_3 equal: the lower rate
    cell(tmp_path, "q", [1, 1])
    cell(tmp_path, "q_1", [1, 2])
    done = run(tmp_path, "--rl", "r_1,r_2,r_3", "--sft", SFT, "--early", "q=q_1")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "pick.json").read_text())
    assert [round(row["gain"], 4) for row in report["rl"]] == [0.05, 0.15, 0.4]
    assert report["rl_pick"] == "r_2" and report["rl_reached_target"]
    assert report["sft_pick"] == "s_2" and report["sft_lr"] == 5e-4
    assert abs(report["t_rl"] - 31.2) < 1e-9
    assert report["sft_batch_size"] == {"sft": round(128 * 31.2 / 33.0), "sft_gold": round(128 * 31.2 / 35.4)}
    assert report["sft_batch_size"] == {"sft": 121, "sft_gold": 113}
    assert round(report["early"]["q"]["rows"][0]["gain"], 4) == 0.05
    assert "the first with gain >= 0.10" in done.stdout


def test_no_candidate_reaching_the_target_takes_the_largest_and_says_so(tmp_path: Path) -> None:
    cell(tmp_path, "b", [2, 2])
    cell(tmp_path, "r_1", [3, 2])          # +0.05
    cell(tmp_path, "r_2", [3, 3])          # +0.10 - not reached at --target 0.15
    cell(tmp_path, "r_3", [2, 2])          # 0
    run_log(tmp_path, "r_2", [10.0])
    sft_cells(tmp_path, ([5, 5], [5, 5], [4, 4]))
    done = run(tmp_path, "--rl", "r_1,r_2,r_3", "--sft", SFT, "--target", "0.15")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "pick.json").read_text())
    assert report["rl_pick"] == "r_2" and not report["rl_reached_target"]
    assert report["sft_pick"] == "s_1"
    assert "no measured setting reached the 0.15 target; RL gains +0.1000 here" in done.stdout


def test_bad_inputs_exit_with_one_line(tmp_path: Path) -> None:
    cell(tmp_path, "b", [2, 2])
    cell(tmp_path, "r_1", [3, 2])
    sft_cells(tmp_path, ([5, 5], [5, 5], [4, 4]))
    cases = [
        (["--rl", "r_1,nosuch", "--sft", SFT], "'nosuch'"),                 # a candidate with no cell
        (["--rl", "r_1", "--sft", SFT], "no metrics.jsonl"),                 # the pick's run is missing
        (["--rl", "r_1", "--sft", "s_1=fast"], "not NAME=NUMBER"),          # a rate that is not a number
        (["--rl", "r_1", "--sft", SFT, "--early", "q"], "not START=m1,m2"),  # an early group without models
    ]
    for extra, message in cases:
        done = run(tmp_path, *extra)
        assert done.returncode == 2 and message in done.stderr, (extra, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert not (tmp_path / "pick.json").exists()
    run_log(tmp_path, "r_1", [])
    done = run(tmp_path, "--rl", "r_1", "--sft", SFT)
    assert done.returncode == 2 and "no response_len" in done.stderr
