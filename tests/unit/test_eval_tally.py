"""The one-pass tallies (:mod:`rlvr.eval.tally`) give the eval.json blocks of the row-based code.

``tests/fixtures/eval_tally/golden.json`` holds ``summarize`` / ``compare`` / ``summarize_steps`` of
:func:`random_rows` as computed by the row-based code of commit 3640ffe (before the tallies), made by
running this module's :func:`golden` with that commit's ``rlvr`` on the path. The rows mix everything
a statistic reads: missing and unparsable answers, answers differing in whitespace only, repeated and
whitespace-variant completions, reward-only rows, rows without lengths or entropies, ragged and
interleaved problems; the comparison is exact (every float bit for bit) but for maj@k, whose faster
computation (after 3640ffe) rounds differently (within 1e-12).
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from pathlib import Path

import pytest

from rlvr.eval.samples import is_correct, normalise_whitespace
from rlvr.eval.steps import summarize_steps
from rlvr.eval.summary import compare, summarize, tool_stats_of_tallies
from rlvr.eval.tally import ExactSum, exact_parts, merge_tallies, tally_rows
from rlvr.eval.trace_hash import normalised, trace_hash, trace_hashes

GOLDEN = Path(__file__).parents[1] / "fixtures" / "eval_tally" / "golden.json"


def loose_equal(a: str, b: str) -> bool:
    """An answer equivalence coarser than string identity (case and spaces ignored)."""
    return a.replace(" ", "").lower() == b.replace(" ", "").lower()


def random_rows(seed: int, problems: int = 12, with_answers: bool = True) -> list[dict]:
    """Rows of ``problems`` problems with 3..9 samples each, in shuffled (interleaved) order."""
    rng = random.Random(seed)
    answers = ["4", " 4", "4 ", "x", "X", "1 2", "1  2", "", None]
    traces = ["so 4", "so  4", "so 4\n", "then x", "1 2 done"]
    rows = []
    for p in range(problems):
        for _ in range(rng.randint(3, 9)):
            row: dict = {"problem_id": f"q{p}"}
            if rng.random() < 0.85:
                row["correct"] = rng.random() < 0.02 + 0.05 * p
            if "correct" not in row or rng.random() < 0.6:
                row["reward"] = rng.choice([0, 0, 0.0, -0.5, 1.0, 0.01 * p])
            if with_answers and rng.random() < 0.9:
                row["answer"] = rng.choice(answers)
            if rng.random() < 0.8:
                row["completion"] = rng.choice(traces) if rng.random() < 0.7 else f"trace {rng.random()}"
            if rng.random() < 0.8:
                row["num_tokens"] = rng.randint(0, 300)
                if rng.random() < 0.8:
                    row["mean_entropy"] = rng.random() * 3
            if rng.random() < 0.7:
                row["finish_reason"] = rng.choice(["eos", "length", "stop"])
            rows.append(row)
    rng.shuffle(rows)
    return rows


def _split_steps(rows: list[dict]) -> dict[int, list[dict]]:
    return {10: rows[: len(rows) // 3], 20: rows[len(rows) // 3:], 5: rows[:5]}


def golden() -> dict:
    """The blocks the golden file holds, computed by whatever ``rlvr`` is importable."""
    base, trained = random_rows(1), random_rows(2, problems=10)
    trained += [r for r in random_rows(3, problems=14) if r["problem_id"] in ("q10", "q11", "q12", "q13")]
    no_answers = random_rows(4, with_answers=False)
    return {
        "summarize": summarize(base, seed=3),
        "summarize_equal": summarize(base, ks=[1, 2, 3], equal=loose_equal),
        "summarize_no_answers": summarize(no_answers),
        "compare": compare(base, trained, seed=1),
        "compare_equal": compare(base, trained, ks=[1, 3], equal=loose_equal),
        "steps": summarize_steps(_split_steps(random_rows(5)), seed=2),
    }


def _maj_blocks(block: object, path: str = "") -> dict[str, dict]:
    """Every ``maj_at_k`` block nested in ``block``, removed from it, by its path."""
    found: dict[str, dict] = {}
    if isinstance(block, dict):
        if isinstance(block.get("maj_at_k"), dict):
            found[path] = block.pop("maj_at_k")
        for key, value in block.items():
            found.update(_maj_blocks(value, f"{path}/{key}"))
    elif isinstance(block, list):
        for i, value in enumerate(block):
            found.update(_maj_blocks(value, f"{path}/{i}"))
    return found


def test_tallies_give_the_row_based_blocks_exactly() -> None:
    """Every number bit for bit, but maj@k: its faster computation (rlvr.eval.majority, after 3640ffe)
    rounds differently, within 1e-12 (here 6e-17)."""
    want = json.loads(GOLDEN.read_text())
    got = json.loads(json.dumps(golden()))  # the JSON round trip a written eval.json makes
    want_maj, got_maj = _maj_blocks(want), _maj_blocks(got)
    assert list(got_maj) == list(want_maj) and want_maj
    for where, block in want_maj.items():
        assert list(got_maj[where]) == list(block), where
        for k, value in block.items():
            assert got_maj[where][k] == pytest.approx(value, abs=1e-12, rel=0), (where, k)
    for key in want:
        assert got[key] == want[key], key


def test_exact_sum_equals_fsum_in_any_order() -> None:
    rng = random.Random(0)
    values = [rng.uniform(-1, 1) * 10 ** rng.randint(-300, 300) for _ in range(2000)] + [5e-324, -0.0, 1e308]
    for _ in range(3):
        rng.shuffle(values)
        total = ExactSum()
        for v in values:
            total.add(v)
        assert total.value() == math.fsum(values)


def test_exact_parts_keep_the_exact_sum() -> None:
    rng = random.Random(1)
    values = [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(5000)] + [1e16, 1.0, -1e16]
    parts = exact_parts(values)
    assert len(parts) <= 8 and sum(map(Fraction, parts)) == sum(map(Fraction, values))
    assert exact_parts([0.5, -0.5]) == []


def test_normalised_is_normalise_whitespace() -> None:
    texts = ["a\u3000 b\n\n\t c ", "  x  ", "", " ", "\x1c\x1dq\u2028r", "a" + " " * 7 + "b", "\xa0a\x85b\xa0",
             "one two", "é  ü\r\nß"]
    for text in texts:
        assert normalised(text) == normalise_whitespace(text), repr(text)
    from rlvr.eval.trace_hash import ASCII_WHITESPACE_TO_SPACE, WHITESPACE_TO_SPACE

    assert [c for c in range(0x110000) if chr(c).isspace()] == sorted(WHITESPACE_TO_SPACE)
    assert [c for c in range(256) if ASCII_WHITESPACE_TO_SPACE[c] != c] == [c for c in range(128) if chr(c).isspace()
                                                                              and c != 0x20]
    rng = random.Random(0)  # ASCII text goes by its bytes, the rest by str.translate: both as str.split() says
    alphabet = ["a", "b", "\\", '"', " ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0",
                "\u3000"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert normalised(text) == normalise_whitespace(text), repr(text)


def test_trace_hashes_hash_each_text_normalised() -> None:
    """The batched hashes (ASCII texts in one numpy pass) equal one text's hash, which is that of
    ``normalise_whitespace`` of it: runs across the texts' joins, ends, \\x00 and non-ASCII texts."""
    rng = random.Random(3)
    alphabet = ["a", "b", " ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x00", "\xa0", "é",
                "\u3000"]
    for size in (1, 2, 3, 7, 64, 65):
        texts = ["".join(rng.choice(alphabet[:11] if rng.random() < 0.8 else alphabet)
                         for _ in range(rng.randint(0, 12))) for _ in range(size)]
        texts[0] = rng.choice(["", " ", "\n\t", "x", texts[0]])
        assert trace_hashes(texts) == [trace_hash(text) for text in texts] == [
            hash(normalise_whitespace(text)) for text in texts], texts


def test_merged_tallies_equal_the_tallies_of_the_concatenated_rows() -> None:
    first, second = _with_tool_fields(random_rows(6), 3, 0.5), _with_tool_fields(random_rows(7, problems=15), 4, 0.5)
    pooled = merge_tallies([tally_rows(first), tally_rows(second)])
    whole = tally_rows(first + second)
    assert list(pooled) == list(whole)
    for problem, tally in whole.items():
        other = pooled[problem]
        for name in tally.__slots__:
            mine, theirs = getattr(tally, name), getattr(other, name)
            if name in ("reward_sum", "entropy_sum"):
                mine, theirs = sum(map(Fraction, mine.parts)), sum(map(Fraction, theirs.parts))
            if name == "tools" and mine is not None and theirs is not None:
                mine, theirs = ([getattr(t, slot) for slot in t.__slots__] for t in (mine, theirs))
            assert mine == theirs, (problem, name)
            if name == "answers":
                assert list(mine) == list(theirs)  # first-appearance order kept


def rows_based_tool_call_stats(rows: list[dict]) -> dict:
    """The row-based ``tool_call_stats`` of issue 54 (rlvr/eval/summary.py at 47833e0, with the
    ``turns_per_episode`` that i54-toolscode added), as the reference."""
    episodes = [r for r in rows if r.get("tool_calls") is not None]
    if not episodes:
        return {}

    def mean(values: list) -> float | None:
        return math.fsum(values) / len(values) if values else None

    calls = sum(r["tool_calls"] for r in episodes)
    with_call = [is_correct(r) for r in episodes if r["tool_calls"]]
    without = [is_correct(r) for r in episodes if not r["tool_calls"]]
    return {"tool_calls": {
        "turns_per_episode": mean([r["turns"] for r in episodes if r.get("turns") is not None]),
        "calls_per_episode": calls / len(episodes),
        "failed_call_share": sum(r.get("failed_calls") or 0 for r in episodes) / calls if calls else None,
        "episodes_with_call": len(with_call) / len(episodes),
        "accuracy_with_call": mean(with_call),
        "accuracy_without_call": mean(without),
        "env_tokens_per_episode": mean([r.get("env_tokens") or 0 for r in episodes]),
    }}


def _with_tool_fields(rows: list[dict], seed: int, share: float) -> list[dict]:
    """``rows`` with a tool task's episode fields on a ``share`` of them (some null or absent)."""
    rng = random.Random(seed)
    out = []
    for row in rows:
        row = dict(row)
        if rng.random() < share:
            row["tool_calls"] = rng.choice([0, 0, 1, 2, 5])
            for key, top in (("failed_calls", 3), ("env_tokens", 400), ("turns", 6)):
                if rng.random() < 0.8:
                    row[key] = rng.randint(0, top)
        out.append(row)
    return out


@pytest.mark.parametrize("share", [0.0, 0.3, 1.0])
def test_tool_call_tallies_give_the_row_based_statistics_exactly(share: float) -> None:
    first = _with_tool_fields(random_rows(8), 1, share)
    second = _with_tool_fields(random_rows(9, problems=15), 2, share)
    want = rows_based_tool_call_stats(first + second)
    assert tool_stats_of_tallies(tally_rows(first + second)) == want
    assert tool_stats_of_tallies(merge_tallies([tally_rows(first), tally_rows(second)])) == want
    assert summarize(first + second).get("tool_calls") == want.get("tool_calls")
    if share == 1.0:  # calls without any call, failed calls without any: the None branches
        zero = [{"problem_id": "a", "correct": True, "tool_calls": 0}]
        assert tool_stats_of_tallies(tally_rows(zero)) == rows_based_tool_call_stats(zero)


def test_tally_memory_does_not_hold_the_completions() -> None:
    rows = [{"problem_id": "a", "correct": True, "completion": "x" * 10_000 + str(i)} for i in range(50)]
    tally = tally_rows(rows)["a"]
    assert len(tally.correct_traces) == 50 and all(isinstance(h, int) for h in tally.correct_traces)


if __name__ == "__main__":  # regenerate the golden file (only with the row-based code on the path)
    pytest.fail("golden.json is the row-based code's output; regenerate it only from commit 3640ffe")


def test_samples_are_read_lazily_one_line_at_a_time(tmp_path: Path) -> None:
    from rlvr.errors import UserError
    from rlvr.eval.samples import iter_samples

    path = tmp_path / "s.jsonl"
    path.write_text('{"problem_id": "a", "correct": true}\n\n{"problem_id": "a", "correct": false}\n{broken\n')
    rows = iter_samples(path)
    assert next(rows)["correct"] is True and next(rows)["correct"] is False  # before the bad line is read
    with pytest.raises(UserError, match="line 4: invalid JSON"):
        next(rows)


def test_partial_scores_are_refused_after_a_streamed_read(tmp_path: Path) -> None:
    from rlvr.errors import UserError
    from rlvr.eval.correctness import ScoreRule, correct_from_scores
    from rlvr.eval.importers import iter_imported

    path = tmp_path / "dump.jsonl"
    scores = [0.0, 1.0, 0.1, 1.0, 0.0, 0.25, 0.5, 0.75, 0.9, -1.0]
    path.write_text("".join(json.dumps({"input": "q", "output": "o", "gts": "4", "score": s}) + "\n" for s in scores))
    with pytest.raises(UserError, match=r"partial scores \(-1, 0, 0.1, 0.25, 0.5, 0.75, \.\.\.\)"):
        list(iter_imported(path))
    assert [r["correct"] for r in iter_imported(path, rule="max")] == [s == 1.0 for s in scores]
    assert [r["correct"] for r in iter_imported(path, rule=0.5)] == [s >= 0.5 for s in scores]
    judge = ScoreRule(None, "score")
    assert [judge.correct(s) for s in (-1.0, 1.0, None)] == [False, True, None]
    judge.finish()  # -1/1 is binary
    with pytest.raises(UserError, match=r"\(-1, 0, 1\)"):
        correct_from_scores([-1.0, 0.0, 1.0], None, "score")


def test_read_progress_only_on_a_terminal() -> None:
    import io

    from rlvr.log import ReadProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, quiet, shown in ((Terminal(), False, True), (Terminal(), True, False), (io.StringIO(), False, False)):
        progress = ReadProgress("big.jsonl", 1 << 30, quiet=quiet, every_s=0.0, stream=stream)
        progress.done(1 << 29)
        progress.close()
        assert ("[big.jsonl] 512/1024 MB (50%)" in stream.getvalue()) is shown
