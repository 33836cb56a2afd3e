"""The ``jsonl`` task over local HF ``datasets`` data (``save_to_disk`` directories, Parquet, JSON) with a
column mapping: prompt (text or chat messages), answer, and extra columns kept in ``Problem.meta``."""

from __future__ import annotations

import json

import pytest

from rlvr.errors import UserError
from rlvr.tasks.jsonl import JsonlTask, to_messages
from rlvr.tasks.registry import get_task

datasets = pytest.importorskip("datasets")

ROWS = [
    {"question": "1+1?", "solution": 2, "level": 1, "tags": ["easy"], "uid": "a"},
    {"question": "2*3?", "solution": 6, "level": 3, "tags": ["mul", "easy"], "uid": "b"},
    {"question": "", "solution": 0, "level": 2, "tags": [], "uid": "c"},  # empty prompt: a bad row
]
COLS = {"prompt": "question", "answer": "solution", "id": "uid"}


def test_saved_dataset_dict_with_mapping_and_extra_columns(tmp_path):
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS),
                               "test": datasets.Dataset.from_list(ROWS[:1])})
    dd.save_to_disk(str(tmp_path / "ds"))
    task = JsonlTask(train=str(tmp_path / "ds"), heldout=str(tmp_path / "ds"), columns=COLS,
                     template="Q: {question}", verifier="exact", extra_columns=["level", "tags"])
    train = task.problems("train")
    assert [p.id for p in train] == ["a", "b"] and task.skipped["train"] == 1
    assert [p.prompt for p in train] == ["Q: 1+1?", "Q: 2*3?"] and [p.answer for p in train] == ["2", "6"]
    assert train[1].meta == {"level": 3, "tags": ["mul", "easy"], "split": "train", "row": 1}
    assert [p.id for p in task.problems("heldout")] == ["a"]  # hub_splits: heldout -> "test"
    assert task.verify("so \\boxed{6}", train[1]).correct and not task.verify("\\boxed{5}", train[1]).correct
    renamed = JsonlTask(train=str(tmp_path / "ds"), columns=COLS, hub_splits={"train": "test"})
    assert len(renamed.problems("train")) == 1
    with pytest.raises(UserError, match=r"holds the splits \['test', 'train'\]; no 'validation'"):
        JsonlTask(train=str(tmp_path / "ds"), columns=COLS, hub_splits={"train": "validation"}).problems("train")


def test_single_saved_dataset_and_all_extra_columns(tmp_path):
    datasets.Dataset.from_list(ROWS[:2]).save_to_disk(str(tmp_path / "one"))
    task = JsonlTask(train=str(tmp_path / "one"), columns=COLS, extra_columns="all")
    assert task.problems("train")[0].meta == {"level": 1, "tags": ["easy"], "split": "train", "row": 0}
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="is not a dataset saved with save_to_disk"):
        JsonlTask(train=str(tmp_path / "empty")).problems("train")


def test_chat_message_prompts_from_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    rows = [{"prompt": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "1+1?"}],
             "answer": "2", "difficulty": "easy"},
            {"prompt": [{"role": "user"}], "answer": "3", "difficulty": "hard"}]  # no content: a bad row
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "chat.parquet"))
    task = get_task("jsonl", train=str(tmp_path / "chat.parquet"), verifier="exact", extra_columns=["difficulty"])
    (p,) = task.problems("train")
    assert p.prompt == rows[0]["prompt"] and p.meta["difficulty"] == "easy" and task.skipped["train"] == 1
    assert task.messages(p, system="ignored: it has one") == rows[0]["prompt"]
    assert to_messages([{"role": "user", "content": "x"}], "sys")[0] == {"role": "system", "content": "sys"}
    with pytest.raises(UserError, match="bad row 1"):
        JsonlTask(train=str(tmp_path / "chat.parquet"), bad_rows="error").problems("train")


def test_extra_column_errors(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [{"prompt": "p", "answer": "1", "split": "x"},
                                                          {"prompt": "q", "answer": "2"}]) + "\n")
    with pytest.raises(UserError, match=r"extra_columns \['row'\]: names must be strings other than split, row"):
        JsonlTask(train=str(path), extra_columns=["row"])
    with pytest.raises(UserError, match="use a list of column names or 'all'"):
        JsonlTask(train=str(path), extra_columns="every")
    with pytest.raises(UserError, match="would copy column 'split' over rlvr's meta key"):
        JsonlTask(train=str(path), extra_columns="all").problems("train")
    task = JsonlTask(train=str(path), extra_columns=["split_not_there"])
    assert task.problems("train") == [] and task.skipped["train"] == 2  # a missing extra column: bad row
