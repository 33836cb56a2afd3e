"""rlvr.paths: what makes a folder a run directory, and the atomic writer every result goes through."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from rlvr.errors import UserError
from rlvr.paths import atomic_write, is_run_dir, metrics_file, parse_json_line, require_run_dir


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


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_atomic_writers_respect_the_umask(tmp_path: Path, umask: int) -> None:
    """mkstemp/mkdtemp create 0600 files and 0700 folders whatever the umask; the writers give what
    ``open``/``mkdir`` would (collaborators on a shared cluster can read a run)."""
    from rlvr.paths import temp_dir_beside

    old = os.umask(umask)
    try:
        f = atomic_write(tmp_path / "r.json", "{}")
        d = temp_dir_beside(tmp_path / "model")
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
    finally:
        os.umask(old)
    assert f.stat().st_mode & 0o777 == 0o666 & ~umask == plain.stat().st_mode & 0o777
    assert d.stat().st_mode & 0o777 == 0o777 & ~umask


def test_a_new_run_folder_must_be_new_or_empty(tmp_path: Path, capsys) -> None:
    from rlvr.paths import claim_new_dir

    assert claim_new_dir(tmp_path / "new").is_dir()  # missing: created
    assert claim_new_dir(tmp_path / "new") == tmp_path / "new"  # empty: fine
    run = tmp_path / "run"
    (run / "checkpoints" / "step_000002").mkdir(parents=True)
    (run / "config.yaml").write_text("name: x\n")
    (run / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    with pytest.raises(UserError, match=r"--run-dir .*run is not empty \(a run: config.yaml, metrics.jsonl "
                                        r"\(2 lines\), 1 checkpoint\); continue it with --resume.*--overwrite"):
        claim_new_dir(run)
    assert (run / "config.yaml").read_text() == "name: x\n"  # refused: untouched
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match=r"not empty \(1 entry: notes.txt\); give another folder"):
        claim_new_dir(other)
    claim_new_dir(run, overwrite=True)
    assert run.is_dir() and not any(run.iterdir())
    said = capsys.readouterr().err
    assert "--overwrite: removing a run: config.yaml, metrics.jsonl (2 lines), 1 checkpoint from" in said
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UserError, match="is a file, not a folder"):
        claim_new_dir(tmp_path / "afile", overwrite=True)
    assert (tmp_path / "afile").read_text() == "x"


def test_a_folder_holding_only_an_interrupted_atomic_write_counts_as_empty(tmp_path: Path) -> None:
    """A run SIGKILLed while writing its config.yaml leaves ``.config.yaml.XXXX.tmp``; it starts again."""
    from rlvr.paths import claim_new_dir

    (tmp_path / ".config.yaml.abc123.tmp").write_text("name: x")
    assert claim_new_dir(tmp_path) == tmp_path
    (tmp_path / "config.yaml").write_text("name: x\n")
    with pytest.raises(UserError, match="not empty"):
        claim_new_dir(tmp_path)


# Lines orjson reads differently from json.loads (rejects, or rounds to a float), and ordinary ones.
FALLBACK_LINES = [
    '{"reward": NaN, "x": Infinity, "y": -Infinity}',  # literals json.loads accepts, orjson rejects
    '{"reward": 1e400, "y": -1e999}',  # overflows to inf in json.loads, rejected by orjson
    '{"id": 123456789012345678901234567890}',  # beyond 64 bits: orjson returns a rounded float
    '{"id": 18446744073709551616, "low": -9223372036854775809, "ok": 18446744073709551615}',
    '{"nested": [{"deep": [340282366920938463463374607431768211457]}]}',
    '{"text": "\\ud800 lone high", "t2": "\\udc00"}',  # lone surrogates: kept by json.loads
    '{"big_float": 1e19, "small": -9.3e18}',  # genuine floats past the bound: parsed again, same value
    '{"problem_id": "p1", "completion": "a \\"b\\"\\n\\u00e9\\ud83d\\ude00", "reward": 0.30000000000000004, '
    '"correct": false, "num_tokens": 9223372036854775807, "mean_logp": -0.0, "answer": null}\n',
    '{"a": 1, "a": 2}',  # a repeated key: the last wins in both
]
BAD_LINES = ['{"problem_id": "a", "correct": true', "{oops", '{"a": 1,}', "[01]", '{"a": "\x01"}',
             "\ufeff{}", '{"a": 1} x', '"\\ud800" 1', "", "   "]


def _same(a: object, b: object) -> bool:
    """Equal values of equal types at every depth (1 != 1.0 here; NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        same_value = a == b or (math.isnan(a) and math.isnan(b))
        return same_value and math.copysign(1, a) == math.copysign(1, b)
    return a == b


@pytest.mark.parametrize("line", FALLBACK_LINES)
def test_parse_json_line_gives_what_json_loads_gives(line: str) -> None:
    assert _same(parse_json_line(line), json.loads(line))


def test_parse_json_line_keeps_integers_beyond_64_bits_exact() -> None:
    assert parse_json_line('{"id": 123456789012345678901234567890}')["id"] == 123456789012345678901234567890
    assert parse_json_line('[-9223372036854775809]') == [-9223372036854775809]


@pytest.mark.parametrize("line", BAD_LINES)
def test_parse_json_line_raises_json_loads_error(line: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(line)
    with pytest.raises(json.JSONDecodeError) as raised:
        parse_json_line(line)
    assert type(raised.value) is json.JSONDecodeError  # json's own, not orjson's subclass
    assert (raised.value.msg, raised.value.lineno, raised.value.colno, raised.value.pos) == (
        expected.value.msg, expected.value.lineno, expected.value.colno, expected.value.pos)


def _outcome(parse, line: str) -> tuple[str, object]:
    try:
        return "value", parse(line)
    except ValueError as e:
        return "error", (type(e), str(e))
    except RecursionError:  # its message names the frame the stack ran out in
        return "error", RecursionError


@pytest.mark.parametrize("depth", [900, 1000, 1100, 5000])
def test_parse_json_line_nesting_beyond_orjsons_limit_ends_as_json_loads_ends(depth: int) -> None:
    line = "[" * depth + "]" * depth  # orjson stops at 1024 levels; json.loads at the recursion limit
    assert _outcome(parse_json_line, line) == _outcome(json.loads, line)

