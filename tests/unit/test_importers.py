"""Samples importers (rlvr.eval.importers): TRL's completions table, verl's dumps, a plain table with a
column mapping. Fixtures: tests/fixtures/importers/README.md (where each format was taken from)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.errors import UserError
from rlvr.eval.importers import load_any, parse_columns, read_table
from rlvr.eval.samples import load_samples
from rlvr.eval.summary import summarize
from rlvr.tasks.registry import get_task

FIX = Path(__file__).parent.parent / "fixtures" / "importers"
KS = [1, 2, 4]


def _passk(rows) -> dict:
    return summarize(rows, KS, seed=0)["pass_at_k"]


@pytest.fixture(scope="module")
def reference() -> dict:
    ref = _passk(load_samples(FIX / "rlvr_samples.jsonl"))
    assert ref["1"] == pytest.approx(3 / 12) and ref["4"] == pytest.approx(2 / 3)  # 2 of 3 problems solved
    return ref


def _trl_parquet(tmp_path: Path) -> Path:
    """The fixture table written as TRL writes it: pandas DataFrame -> completions/completions_00002.parquet."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rows = read_table(FIX / "trl_completions_table.json")
    out = tmp_path / "completions" / "completions_00002.parquet"
    out.parent.mkdir()
    pd.DataFrame(rows).to_parquet(out)
    return out


def test_trl_parquet_pass_at_k_equals_rlvr_format(tmp_path, reference) -> None:
    path = _trl_parquet(tmp_path)
    by_reward = load_any(path, columns="reward=accuracy_reward")
    assert {s["source"] for s in by_reward} == {"trl"} and len({s["problem_id"] for s in by_reward}) == 3
    assert _passk(by_reward) == reference
    by_task = load_any(path, task=get_task("arithmetic"))  # the verifier decides; the rewards are ignored
    assert _passk(by_task) == reference
    assert [s["correct"] for s in by_task] == [s["reward"] > 0 for s in by_reward]


def test_trl_wandb_table_json(reference) -> None:
    assert _passk(load_any(FIX / "trl_completions_table.json", columns="reward=accuracy_reward")) == reference


def test_trl_with_several_reward_columns_asks_which(tmp_path) -> None:
    with pytest.raises(UserError, match=r"reward columns \['accuracy_reward', 'format_reward'\]"):
        load_any(FIX / "trl_completions_table.json")
    # format_reward is > 0 on well-formed wrong answers: a different (wrong) notion of correct
    fmt = load_any(FIX / "trl_completions_table.json", columns="reward=format_reward")
    assert sum(s["reward"] > 0 for s in fmt) == 10  # all but "I think 12" and "no idea"


def test_verl_dump_uses_acc_then_the_task(tmp_path, reference) -> None:
    rows = load_any(FIX / "verl_100.jsonl")
    assert {s["source"] for s in rows} == {"verl"} and rows[0]["answer"] == "12"
    assert _passk(rows) == reference
    plain = tmp_path / "42.jsonl"  # a dump whose reward function has no 'acc': score > 0 (1 / -1 here)
    plain.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "acc"}) + "\n"
                             for line in (FIX / "verl_100.jsonl").read_text().splitlines()))
    assert _passk(load_any(plain)) == reference
    lying = tmp_path / "43.jsonl"  # scores all 1: only the verifier (against gts) sees which are right
    lying.write_text("".join(json.dumps({**{k: v for k, v in json.loads(line).items() if k != "acc"}, "score": 1})
                             + "\n" for line in (FIX / "verl_100.jsonl").read_text().splitlines()))
    assert _passk(load_any(lying))["1"] == 1.0
    assert _passk(load_any(lying, task=get_task("arithmetic"))) == reference


def test_plain_csv_with_a_column_mapping(reference) -> None:
    rows = load_any(FIX / "plain.csv", "table", "prompt=question,completion=response,correct=is_right")
    assert _passk(rows) == reference
    with pytest.raises(UserError, match="cannot tell the format"):
        load_any(FIX / "plain.csv")
    with pytest.raises(UserError, match=r"no column\(s\) \['answer_text'\]"):
        load_any(FIX / "plain.csv", "table", "prompt=question,completion=response,correct=answer_text")
    with pytest.raises(UserError, match="unknown field 'score'"):
        parse_columns("score=x")
    with pytest.raises(UserError, match="map a completion column"):
        load_any(FIX / "plain.csv", "table", "prompt=question,completion=response")


def test_unknown_prompt_without_an_answer_column_is_a_clear_error(tmp_path) -> None:
    table = json.loads((FIX / "trl_completions_table.json").read_text())
    table["data"][0][1] = "Q:not a problem\n"
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps(table))
    with pytest.raises(UserError, match="is not a problem of task 'arithmetic'"):
        load_any(bad, task=get_task("arithmetic"))


def test_rlvr_eval_command_reads_peer_formats(tmp_path, capsys, reference) -> None:
    src = tmp_path / "100.jsonl"
    shutil.copy(FIX / "verl_100.jsonl", src)
    out = tmp_path / "eval.json"
    assert main(["eval", "--samples", str(src), "--ks", "1,2,4", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["pass_at_k"] == reference
    out2 = tmp_path / "eval2.json"
    assert main(["eval", "--samples", str(FIX / "trl_completions_table.json"), "--task", "arithmetic",
                 "--ks", "1,2,4", "--json", str(out2)]) == 0
    assert json.loads(out2.read_text())["pass_at_k"] == reference
