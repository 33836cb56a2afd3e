"""samples.jsonl loading, validation errors, atomic writing, correctness rule, summarize/compare."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rlvr.errors import UserError
from rlvr.eval.samples import group_by_problem, is_correct, load_samples, write_samples
from rlvr.eval.summary import compare, summarize
from rlvr.eval.tables import read_table


def row(pid: str = "p0", correct: bool = True, **kw: object) -> dict:
    out = {
        "problem_id": pid,
        "completion": "so the answer is 4",
        "answer": "4",
        "reward": 1.0 if correct else 0.0,
        "correct": correct,
        "num_tokens": 6,
        "mean_logp": -0.5,
        "finish_reason": "eos",
    }
    out.update(kw)
    return out


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_round_trip_and_atomic_write(tmp_path: Path) -> None:
    rows = [row("a"), row("a", False, answer=None), row("b", mean_entropy=0.7, task="gsm8k")]
    path = write_samples(tmp_path / "sub" / "samples.jsonl", rows)
    assert load_samples(path) == rows
    assert [p.name for p in path.parent.iterdir()] == ["samples.jsonl"]  # no temp file left
    with pytest.raises(UserError, match="sample 1: field 'reward'"):
        write_samples(path, [row(), row(reward="high")])
    assert load_samples(path) == rows  # a failed write leaves the old file intact


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ('{"problem_id": "a", "correct": true', "line 2: invalid JSON"),
        ('["a", true]', "line 2: expected a JSON object"),
        ('{"correct": true}', "line 2: missing field 'problem_id'"),
        ('{"problem_id": "a", "answer": "4"}', "line 2: missing field 'correct'"),
        ('{"problem_id": "a", "reward": "1.0"}', "line 2: field 'reward' must be a number"),
        ('{"problem_id": "a", "reward": NaN}', "line 2: field 'reward' must be a finite number"),
        ('{"problem_id": "a", "reward": true}', "line 2: field 'reward' must be a number"),
        ('{"problem_id": "a", "correct": true, "mean_logp": -1e400}',  # orjson rejects it; json.loads: -inf
         "line 2: field 'mean_logp' must be a finite number, got -inf"),
        ('{"problem_id": 7, "correct": true}', "line 2: field 'problem_id' must be a string"),
        ('{"problem_id": "a", "correct": "yes"}', "line 2: field 'correct' must be true or false"),
        ('{"problem_id": "a", "correct": 1}', "line 2: field 'correct' must be true or false"),
        ('{"problem_id": "a", "correct": true, "num_tokens": 3.5}', "line 2: field 'num_tokens'"),
        ('{"problem_id": "a", "correct": true, "num_tokens": -1}', "line 2: field 'num_tokens'"),
        ('{"problem_id": "a", "correct": true, "completion": null}', "line 2: field 'completion' is null"),
    ],
)
def test_bad_lines_name_line_and_field(tmp_path: Path, line: str, match: str) -> None:
    path = write_lines(tmp_path / "s.jsonl", [json.dumps(row()), line])
    with pytest.raises(UserError, match=match):
        load_samples(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is empty"):
        load_samples(write_lines(tmp_path / "e.jsonl", ["", "  "]))
    with pytest.raises(UserError, match="does not exist"):
        load_samples(tmp_path / "nope.jsonl")


def test_correctness_rule() -> None:
    assert is_correct({"correct": True, "reward": 0.0})
    assert not is_correct({"correct": False, "reward": 1.0})
    assert is_correct({"reward": 0.5}) and not is_correct({"reward": 0.0}) and not is_correct({"reward": -1})
    assert is_correct({"correct": None, "reward": 2.0})


def test_summarize_known_values() -> None:
    # problem a: 2/4 correct, b: 0/4, c: 4/4 -> pass@1 = (0.5 + 0 + 1) / 3; pass@2 = (5/6 + 0 + 1) / 3
    rows = [row("a", i < 2, mean_entropy=1.0, num_tokens=10) for i in range(4)]
    rows += [row("b", False, answer=str(i), finish_reason="length") for i in range(4)]
    rows += [row("c", True) for _ in range(4)]
    out = summarize(rows)
    assert out["n"] == 4 and out["problems"] == 3 and out["notes"] == []
    assert list(out["pass_at_k"]) == ["1", "2", "4"]
    assert out["pass_at_k"]["1"] == pytest.approx(0.5)
    assert out["pass_at_k"]["2"] == pytest.approx((5 / 6 + 1) / 3)
    assert out["pass_at_k"]["4"] == pytest.approx(2 / 3)
    lo, hi = out["pass_at_k_ci"]["1"]
    assert lo <= 0.5 <= hi
    assert out["token_entropy"] == pytest.approx(1.0)
    assert out["answer_entropy"] == pytest.approx(math.log(4) / 3)  # b has 4 distinct answers
    assert out["finish_reasons"] == {"eos": 8, "length": 4}
    assert out["mean_reward"] == pytest.approx(6 / 12)
    assert out["accuracy_histogram"]["(0.4,0.5]"] == 1 and out["accuracy_histogram"]["1"] == 1
    assert out["distinct_correct_answers"] == pytest.approx((1 + 0 + 1) / 3)
    assert out["majority_accuracy"] == pytest.approx(2 / 3)  # a: "4" agreed by all, 2 correct; b: wrong; c: right
    assert out["parsable"] == 1.0


def test_majority_accuracy_and_parsable_share() -> None:
    # a: "5" x2 (wrong) beats "4" x1 (right) -> unsolved; b: tie "7" (right, first) vs "8" -> solved;
    # c: nothing parses -> unsolved; d: None ignored, "3" (right) wins 1 vote to 0 -> solved
    rows = [row("a", False, answer="5"), row("a", False, answer="5"), row("a", True, answer="4"),
            row("b", True, answer="7"), row("b", False, answer="8"),
            row("c", False, answer=None), row("c", False, answer=None),
            row("d", False, answer=None), row("d", True, answer="3")]
    out = summarize(rows)
    assert out["majority_accuracy"] == pytest.approx(2 / 4)
    assert out["parsable"] == pytest.approx(6 / 9)
    assert out["pass_at_k"]["1"] == pytest.approx((1 / 3 + 1 / 2 + 0 + 1 / 2) / 4)
    no_answers = [{k: v for k, v in r.items() if k != "answer"} for r in rows]
    assert summarize(no_answers)["majority_accuracy"] is None


def test_majority_accuracy_pools_answers_by_the_task_equivalence() -> None:
    from rlvr.tasks.base import task_equivalence
    from rlvr.tasks.math500 import Math500Task

    # strings: "3" x2 beats "1/2" and "0.5" (1 each) -> unsolved; math: {1/2, 0.5} ties {3, 3}, first wins
    rows = [row("a", True, answer="1/2"), row("a", False, answer="3"), row("a", True, answer="0.5"),
            row("a", False, answer="3")]
    assert summarize(rows)["majority_accuracy"] == 0.0
    assert summarize(rows, equal=task_equivalence(Math500Task()))["majority_accuracy"] == 1.0


def test_summarize_unequal_n_uses_minimum_and_says_so() -> None:
    rows = [row("a", True)] * 2 + [row("b", False)] * 5
    out = summarize(rows)
    assert out["n"] == 2 and out["samples_per_problem"] == {"min": 2, "max": 5}
    assert out["notes"] and "2..5" in out["notes"][0]
    assert list(out["pass_at_k"]) == ["1", "2"]
    with pytest.raises(UserError, match="ks must lie in 1..2"):
        summarize(rows, ks=[4])


def test_compare_uses_common_problems_only() -> None:
    base = [row("a", i == 0) for i in range(4)] + [row("b", False)] * 4 + [row("x", True)] * 4
    trained = [row("a", True)] * 4 + [row("b", i == 3) for i in range(4)] + [row("y", True)] * 4
    out = compare(base, trained, perplexity_under_base={"trained": {"mean": 1.5}})
    assert out["problems"] == {"common": 2, "base_only": 1, "trained_only": 1}
    assert out["base"]["problems"] == 2 and out["trained"]["problems"] == 2
    assert out["support"]["counts"] == {"preserved": 1, "shrunk": 0, "expanded": 1, "out_of_support": 0}
    assert out["perplexity_under_base"] == {"trained": {"mean": 1.5}}
    # trained: a 1.0, b 0.25 -> pass@1 0.625; base: a 0.25, b 0 -> 0.125; at k=4 trained 1.0 vs base 0.5
    assert out["trained"]["pass_at_k"]["1"] == pytest.approx(0.625)
    assert out["crossover_k"] is None
    with pytest.raises(UserError, match="no problem_id appears in both"):
        compare([row("x")], [row("y")])


def _pair_rows(base_solved: range, trained_solved: range, n_problems: int = 200, n: int = 16):
    """Base solves its problems once in n samples, trained every time (so trained leads at k=1)."""
    base = [row(f"p{i}", i in base_solved and j == 0) for i in range(n_problems) for j in range(n)]
    trained = [row(f"p{i}", i in trained_solved) for i in range(n_problems) for j in range(n)]
    return base, trained


def test_compare_crossover_needs_the_difference_beyond_its_interval() -> None:
    # pass@16: base 0.905 vs trained 0.895, the difference inside its 95% interval: no crossover
    # (the old tie-inclusive rule said 16, as `rlvr run` printed)
    base, trained = _pair_rows(range(0, 181), range(10, 189))
    out = compare(base, trained, ks=[1, 16])
    assert out["base"]["pass_at_k"]["16"] == pytest.approx(0.905)
    assert out["trained"]["pass_at_k"]["16"] == pytest.approx(0.895)
    assert out["trained"]["pass_at_k"]["1"] > out["base"]["pass_at_k"]["1"]
    assert out["crossover_k"] is None
    cross = out["crossover"]
    assert cross["k"] is None and cross["k_max"] == 16 and cross["text"] == "none up to k=16"
    lo, hi = cross["base_minus_trained_ci"]["16"]
    assert lo < 0 < hi
    assert json.loads(json.dumps(out)) == out
    # a clear crossover: base 0.905 vs trained 0.455 at k=16
    out = compare(*_pair_rows(range(0, 181), range(10, 101)), ks=[1, 16])
    assert out["crossover_k"] == 16 and out["crossover"]["text"] == "k=16"


def test_group_by_problem_keeps_order() -> None:
    groups = group_by_problem([row("b"), row("a"), row("b", False)])
    assert list(groups) == ["b", "a"] and [r["correct"] for r in groups["b"]] == [True, False]


# Lines the fast parser (orjson, rlvr.paths.parse_json_line) rejects or would read differently: the
# readers must give json.loads's rows and json.loads's error messages for them.
ORJSON_FALLBACK_LINES = [
    '{"problem_id": "a", "correct": true, "num_tokens": 123456789012345678901234567890}',  # > 64 bits
    '{"problem_id": "a", "correct": false, "reward": 0.0, "logp_sum": -1e400}',  # -inf in json.loads
    '{"problem_id": "a", "correct": true, "completion": "\\ud800 lone surrogate"}',
    '{"problem_id": "a", "correct": true, "extra": NaN, "more": [Infinity, -Infinity]}',
    '{"problem_id": "a", "correct": true, "num_tokens": 18446744073709551616, "id": -9223372036854775809}',
]


def test_lines_orjson_rejects_read_as_json_loads_reads_them(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", [json.dumps(row()), *ORJSON_FALLBACK_LINES])
    expected = [row(), *(json.loads(line) for line in ORJSON_FALLBACK_LINES)]
    for read in (load_samples, read_table):
        rows = read(path)
        assert repr(rows) == repr(expected)  # repr: nan != nan, and 1 == 1.0 would hide a rounded int
        assert rows[1]["num_tokens"] == 123456789012345678901234567890


@pytest.mark.parametrize("line", ['{"problem_id": "a", "correct": true', '{"problem_id": "a",}', "{oops",
                                  '{"problem_id": "a"} trailing', '{"problem_id": "\x01"}', "[01]"])
def test_invalid_json_messages_are_json_loads_messages(tmp_path: Path, line: str) -> None:
    path = write_lines(tmp_path / "s.jsonl", [json.dumps(row()), line])
    try:
        json.loads(line + "\n")  # the line as the file holds it (what the readers parsed before orjson)
    except json.JSONDecodeError as e:
        error = e
    with pytest.raises(UserError) as raised:
        load_samples(path)
    assert str(raised.value) == f"{path} line 2: invalid JSON ({error.msg} at column {error.colno}); fix that line"
    with pytest.raises(UserError) as raised:
        read_table(path)
    assert str(raised.value) == f"{path}:2 is not valid JSON ({error.msg}); fix or delete that line"


@pytest.mark.parametrize(("later", "match"), [
    (row(num_tokens=-1), "line 2: field 'num_tokens' must be a non-negative integer"),
    (row(pid="q", mean_logp=float("nan")), "line 2: field 'mean_logp' must be a finite number"),
])
def test_a_row_shaped_like_a_valid_one_is_still_checked(tmp_path: Path, later: dict, match: str) -> None:
    """The fast check goes by a row's keys and value types (rlvr.eval.samples._plain_row); a row of the
    same shape as a valid one before it is still refused for its values."""
    path = write_lines(tmp_path / "s.jsonl", [json.dumps(row()), json.dumps(later)])
    with pytest.raises(UserError, match=match):
        load_samples(path)


def test_rows_read_fast_equal_the_rows_json_loads_gives(tmp_path: Path) -> None:
    """Floats at or beyond 9.2e18 (orjson's reading of a huge integer literal) and every other row the
    fast check passes on read as json.loads reads them, the shape seen valid before or not."""
    values = [0.5, -2, 0, 1e300, -9.3e18, 9.1e18, "7", None, True, False]
    lines = [json.dumps(row())]
    for i, value in enumerate(values):
        lines.append(json.dumps(row(reward=value, num_tokens=i, extra=value)))
    lines += ['{"problem_id": "a", "correct": true, "reward": 12345678901234567890123}',
              '{"problem_id": "a", "correct": true, "extra": -9223372036854775809, "reward": 0.5}']
    expected = [json.loads(line) for line in lines]
    valid = [i for i, line in enumerate(lines) if not isinstance(expected[i]["reward"], (str, bool))]
    path = write_lines(tmp_path / "s.jsonl", [lines[i] for i in valid])
    assert repr(load_samples(path)) == repr([expected[i] for i in valid])
    assert isinstance(load_samples(path)[-2]["reward"], int)
