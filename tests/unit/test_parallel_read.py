"""Reading one samples file over byte ranges in several processes (:mod:`rlvr.eval.parallel_read`)
gives the serial read's eval.json byte for byte, and its errors with the same line numbers."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.errors import UserError
from rlvr.eval.parallel_read import byte_ranges, tally_samples_file
from rlvr.eval.samples import iter_samples
from rlvr.eval.tally import tally_rows


def mixed_lines(seed: int, rows: int = 600) -> list[str]:
    """Lines of interleaved problems (each in both halves of the file), whitespace-variant and non-ASCII
    completions, reward-only and tool rows, blank lines and CRLF endings."""
    rng = random.Random(seed)
    lines = []
    for i in range(rows):
        row: dict = {"problem_id": f"q{rng.randrange(9)}", "correct": rng.random() < 0.4}
        if rng.random() < 0.2:
            row = {"problem_id": row["problem_id"], "reward": rng.choice([0.0, 0.3, 1.0, 1e-17])}
        row["answer"] = rng.choice(["4", " 4", "x", None])
        row["completion"] = rng.choice(["so 4", "so  4\n", "é  4", f"trace {i % 37}", "\u2028 so 4"])
        row["num_tokens"] = rng.randrange(100)
        row["mean_entropy"] = rng.random()
        row["finish_reason"] = rng.choice(["eos", "length", "stop"])
        if rng.random() < 0.1:
            row.update(tool_calls=rng.randrange(3), env_spans=[[0, 1]])
        lines.append(json.dumps(row, ensure_ascii=rng.random() < 0.5))
        if rng.random() < 0.05:
            lines.append("")
    return lines


def write(path: Path, lines: list[str], crlf: bool = False) -> Path:
    path.write_bytes((("\r\n" if crlf else "\n").join(lines) + "\n").encode("utf-8"))
    return path


@pytest.mark.parametrize("crlf", [False, True])
def test_two_and_three_workers_write_the_serial_eval_json(tmp_path: Path, crlf: bool) -> None:
    samples = write(tmp_path / "samples.jsonl", mixed_lines(1), crlf)
    outputs = []
    for workers in (1, 2, 3):
        out = tmp_path / f"eval_{workers}.json"
        assert main(["eval", "--samples", str(samples), "--json", str(out), "--read-workers", str(workers),
                     "--quiet"]) == 0
        outputs.append(out.read_bytes())
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]
    assert json.loads(outputs[0])["samples"] == 600


def test_byte_ranges_end_after_a_newline_and_cover_the_file(tmp_path: Path) -> None:
    samples = write(tmp_path / "samples.jsonl", mixed_lines(2, rows=50))
    data = samples.read_bytes()
    for parts in (1, 2, 3, 7, 500):
        ranges = byte_ranges(samples, parts)
        assert ranges[0][0] == 0 and ranges[-1][1] == len(data) and len(ranges) <= parts
        assert all(end == start for (_, end), (start, _) in zip(ranges, ranges[1:]))
        assert all(data[end - 1:end] == b"\n" for _, end in ranges)


def serial_error(path: Path) -> str:
    with pytest.raises(UserError) as raised:
        tally_rows(iter_samples(path))
    return str(raised.value)


def parallel_error(path: Path, workers: int = 2) -> str:
    with pytest.raises(UserError) as raised:
        tally_samples_file(path, workers)
    return str(raised.value)


@pytest.mark.parametrize("bad", ['{"problem_id": "q1", "correct": true, "num_tokens": -3}', '{"problem_id": "q1",',
                                 '{"problem_id": "q1", "correct": "yes"}'])
def test_a_bad_line_in_the_second_range_is_the_serial_error(tmp_path: Path, bad: str) -> None:
    lines = mixed_lines(3)
    lines[500] = bad  # past the middle of the file: the second of two ranges
    samples = write(tmp_path / "samples.jsonl", lines)
    assert byte_ranges(samples, 2)[1][0] < len("\n".join(lines[:500]).encode())
    message = serial_error(samples)
    assert "line 501:" in message
    assert parallel_error(samples) == parallel_error(samples, 3) == message
    lines[560] = '{"oops": 1}'  # a second bad line after it: the first still wins
    lines[40] = bad  # and one in the first range before both: that one wins
    samples = write(samples, lines)
    assert parallel_error(samples) == serial_error(samples)
    assert "line 41:" in parallel_error(samples)


def test_bytes_that_are_not_utf8_in_the_second_range_are_the_serial_error(tmp_path: Path, capsys) -> None:
    samples = write(tmp_path / "samples.jsonl", mixed_lines(4))
    data = samples.read_bytes()
    cut = data.index(b"\n", len(data) * 3 // 4)
    samples.write_bytes(data[:cut] + b"\xff\xfe" + data[cut:])
    with pytest.raises(UnicodeDecodeError) as serial:
        tally_rows(iter_samples(samples))
    with pytest.raises(UnicodeDecodeError) as parallel:
        tally_samples_file(samples, 2)
    assert str(parallel.value) == str(serial.value)
    said = []
    for workers in ("1", "2"):  # the command's one-line error, not a traceback
        assert main(["eval", "--samples", str(samples), "--read-workers", workers, "--quiet"]) == 2
        said.append(capsys.readouterr().err)
    assert said[0] == said[1] and "not UTF-8 text" in said[0] and len(said[0].strip().splitlines()) == 1


def test_a_file_of_blank_lines_is_the_serial_empty_file_error(tmp_path: Path) -> None:
    samples = write(tmp_path / "samples.jsonl", [""] * 5000)
    assert parallel_error(samples) == serial_error(samples)


def test_the_importers_checks_still_apply_to_an_rlvr_file(tmp_path: Path, capsys) -> None:
    """The command reads an rlvr file without the importers' layers; --reverify without --task is
    still refused, and --read-workers below 1 is one line."""
    samples = write(tmp_path / "samples.jsonl", mixed_lines(5, rows=20))
    assert main(["eval", "--samples", str(samples), "--reverify", "--quiet"]) == 2
    assert "--reverify re-scores completions" in capsys.readouterr().err
    assert main(["eval", "--samples", str(samples), "--read-workers", "0", "--quiet"]) == 2
    assert "--read-workers must be >= 1" in capsys.readouterr().err
