"""benchmarks/studies/entropy_collapse_pick.py (wapo_v2's pilot rule) on hand-made entropy series: the
start, the collapse step, and the pick of lr and length."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "studies" / "entropy_collapse_pick.py"


def run_dir(tmp: Path, name: str, entropy: list[float]) -> Path:
    folder = tmp / name
    folder.mkdir()
    (folder / "metrics.jsonl").write_text("".join(json.dumps({"step": s + 1, "entropy": e}) + "\n"
                                                  for s, e in enumerate(entropy)))
    return folder


def pick(tmp: Path, *pilots: str) -> dict:
    out = tmp / "pick.json"
    subprocess.run([sys.executable, str(SCRIPT), *pilots, "--json", str(out)], capture_output=True, text=True,
                   check=True)
    return json.loads(out.read_text())


def test_collapse_step_and_length(tmp_path: Path) -> None:
    series = [1.0] * 100 + [0.4] * 500  # start 1.0; 0.4 from step 101
    # trailing mean at c: (n x 0.4 + (20 - n) x 1.0) / 20 with n = c - 100 -> <= 0.5 from n = 17: c = 117
    report = pick(tmp_path, f"{run_dir(tmp_path, 'a', series)}=6e-5")
    assert report["pilots"][0]["start"] == 1.0
    assert report["pilots"][0]["collapse_step"] == 117
    assert (report["lr"], report["steps"]) == ("6e-5", 200)  # smallest L >= 117 + 50


def test_second_pilot_used_when_the_first_does_not_collapse(tmp_path: Path) -> None:
    flat = run_dir(tmp_path, "flat", [1.0] * 600)
    late = [1.0] * 400 + [0.1] * 200  # collapses at 400 + 12 = 412 (n >= 11.1 -> 12)
    report = pick(tmp_path, f"{flat}=6e-5", f"{run_dir(tmp_path, 'late', late)}=1.2e-4")
    assert report["pilots"][0]["collapse_step"] is None
    assert report["pilots"][1]["collapse_step"] == 412
    assert (report["lr"], report["steps"]) == ("1.2e-4", 500)


def test_none_collapses_or_too_late(tmp_path: Path) -> None:
    too_late = [1.0] * 560 + [0.0] * 40  # collapses at 570 > 550
    report = pick(tmp_path, f"{run_dir(tmp_path, 'x', [1.0] * 600)}=6e-5", f"{run_dir(tmp_path, 'y', too_late)}=1.2e-4")
    assert (report["lr"], report["steps"]) == ("6e-5", 600)


def test_bad_inputs_exit_with_one_line(tmp_path: Path) -> None:
    short = run_dir(tmp_path, "short", [1.0] * 5)  # fewer steps than the start's 10
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in ([f"{short}=6e-5"], [f"{empty}=6e-5"], [str(short)]):
        done = subprocess.run([sys.executable, str(SCRIPT), *args, "--json", str(tmp_path / "out.json")],
                              capture_output=True, text=True)
        assert done.returncode != 0
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert not (tmp_path / "out.json").exists()
