"""GSM8K, MATH-500 and generic JSONL/JSON/Parquet tasks: loading, bad rows, prompts, verification."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from rlvr.errors import UserError
from rlvr.tasks import jsonl
from rlvr.tasks.gsm8k import GSM8KTask, final_answer, gold_solution
from rlvr.tasks.jsonl import (
    BOXED_INSTRUCTION,
    JsonlTask,
    data_file,
    default_data_dir,
    packaged_data_dir,
    read_rows,
)
from rlvr.tasks.math500 import Math500Task

# The GSM8K train split is not packaged (only test and MATH-500 are): it needs $RLVR_DATA_DIR.
needs_train = pytest.mark.skipif(
    not data_file("gsm8k_train.jsonl").is_file(), reason="gsm8k_train.jsonl not in $RLVR_DATA_DIR"
)


def _write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_packaged_data_is_found_without_a_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLVR_DATA_DIR", raising=False)
    assert default_data_dir() == packaged_data_dir()
    for name in ("gsm8k_test.jsonl", "math500_test.jsonl"):
        p = data_file(name)
        assert p == packaged_data_dir() / f"{name}.gz" and p.is_file()
    assert (packaged_data_dir() / "DATA_LICENSES.md").is_file()
    assert GSM8KTask().paths["heldout"].name == "gsm8k_test.jsonl.gz"


def test_data_dir_files_take_precedence_over_packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLVR_DATA_DIR", str(tmp_path))
    assert data_file("gsm8k_test.jsonl") == packaged_data_dir() / "gsm8k_test.jsonl.gz"  # fallback
    _write_jsonl(tmp_path / "gsm8k_test.jsonl", [{"question": "q", "answer": "#### 7"}])
    assert data_file("gsm8k_test.jsonl") == tmp_path / "gsm8k_test.jsonl"
    assert [p.answer for p in GSM8KTask(use_hub=False).problems("heldout")] == ["7"]
    assert data_file("nothing.jsonl") == tmp_path / "nothing.jsonl"  # missing: the first directory's path


def test_gzip_rows_read_like_plain(tmp_path: Path) -> None:
    import gzip

    rows = [{"prompt": "p", "answer": "1"}, {"prompt": "q", "answer": "2"}]
    with gzip.open(tmp_path / "d.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    assert read_rows(tmp_path / "d.jsonl.gz") == [*rows, None]
    with gzip.open(tmp_path / "d.json.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps(rows))
    assert read_rows(tmp_path / "d.json.gz") == rows


def test_gsm8k_splits_answers_and_gold_solutions() -> None:
    task = GSM8KTask(use_hub=False)
    test = task.problems("heldout")
    assert len(test) == 1319
    assert task.skipped == {"heldout": 0}
    p = test[0]
    assert p.id == "gsm8k/test/0" and p.answer == "18"
    assert p.prompt.startswith("Janet") and p.prompt.endswith(BOXED_INSTRUCTION)
    assert "<<" not in p.solutions[0] and p.solutions[0].endswith("\\boxed{18}.")
    assert task.problems("heldout", 5) == test[:5]
    # answers with thousands commas are canonicalised
    assert {q.answer for q in test if "," in q.answer} == set()
    assert task.verify(p.solutions[0], p).correct and task.verify("\\boxed{19}", p).status == "wrong"
    assert task.messages(p, system="be brief") == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": p.prompt},
    ]


@needs_train
def test_gsm8k_train_split() -> None:
    task = GSM8KTask(use_hub=False)
    assert len(task.problems("train")) == 7473 and task.skipped == {"train": 0}


def test_all_gsm8k_boxed_gold_solutions_verify() -> None:
    task = GSM8KTask(use_hub=False)
    probs = task.problems("heldout")
    assert all(task.verify(p.solutions[0], p).correct for p in probs)


def test_math500_heldout_only_with_meta() -> None:
    task = Math500Task(use_hub=False)
    probs = task.problems("heldout")
    assert len(probs) == 500 and task.skipped == {"heldout": 0}
    p = probs[0]
    assert p.id == "test/precalculus/807.json"
    assert p.meta["subject"] == "Precalculus" and p.meta["level"] == 2
    assert p.answer == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert task.verify("so \\boxed{(3, \\pi/2)}", p).correct
    assert not task.verify("so \\boxed{(3, \\pi)}", p).correct
    with pytest.raises(UserError, match="only a test split"):
        task.problems("train")


def test_gsm8k_helpers_and_bad_rows(tmp_path: Path) -> None:
    assert final_answer("a\nb #### 1,450,000") == "1450000"
    with pytest.raises(ValueError):
        final_answer("no hashes")
    assert gold_solution("3*4=<<3*4=12>>12\n#### 12") == "3*4=12\nThe final answer is \\boxed{12}."
    rows = [
        {"question": "q0", "answer": "x #### 3"},
        {"question": "", "answer": "#### 4"},  # empty prompt
        {"question": "q2"},  # missing answer
        {"question": ["q"], "answer": "#### 5"},  # wrong type
        {"question": "q4", "answer": "#### five"},  # not a number
        "{not json",
        {"question": "q6", "answer": "y\n#### -2"},
    ]
    path = _write_jsonl(tmp_path / "t.jsonl", rows)
    task = GSM8KTask(test_path=str(path), use_hub=False)
    probs = task.problems("heldout")
    assert [p.answer for p in probs] == ["3", "-2"] and task.skipped["heldout"] == 5
    with pytest.raises(UserError, match="bad row 1"):
        GSM8KTask(test_path=str(path), bad_rows="error", use_hub=False).problems("heldout")
    with pytest.raises(UserError, match="not found"):
        GSM8KTask(train_path=str(tmp_path / "missing.jsonl"), use_hub=False).problems("train")
    with pytest.raises(UserError, match="unknown split"):
        task.problems("test")


def test_data_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_jsonl(
        tmp_path / "math500_test.jsonl", [{"problem": "1+1?", "solution": "\\boxed{2}", "answer": "2"}]
    )
    monkeypatch.setenv("RLVR_DATA_DIR", str(tmp_path))
    assert default_data_dir() == tmp_path
    task = Math500Task(use_hub=False)
    (p,) = task.problems("heldout")
    assert p.id == "math500/test/0" and task.verify("\\boxed{2.0}", p).correct


def test_jsonl_task_column_map_and_verifiers(tmp_path: Path) -> None:
    rows = [
        {"q": "What is 1/2?", "a": "\\frac12", "sol": ["half: \\boxed{1/2}"], "uid": "a"},
        {"q": "Capital of France?", "a": "Paris", "sol": "\\boxed{Paris}", "uid": "b"},
        {"q": "Count", "a": 3, "uid": "c"},  # numeric answer is stringified
        {"q": "  ", "a": "x", "uid": "d"},  # blank prompt: skipped
    ]
    path = _write_jsonl(tmp_path / "d.jsonl", rows)
    cols = {"prompt": "q", "answer": "a", "solutions": "sol", "id": "uid"}
    task = JsonlTask(train=str(path), columns=cols, template="Q: {question}\nA:")
    probs = task.problems("train")
    assert [p.id for p in probs] == ["a", "b", "c"] and task.skipped["train"] == 1
    assert probs[0].prompt == "Q: What is 1/2?\nA:" and probs[0].solutions == ("half: \\boxed{1/2}",)
    assert probs[2].answer == "3" and probs[2].solutions == ()
    assert task.verify("\\boxed{0.5}", probs[0]).correct
    exact = JsonlTask(train=str(path), columns=cols, verifier="exact")
    pe = exact.problems("train")
    assert exact.verify("\\boxed{Paris}", pe[1]).correct and not exact.verify("\\boxed{0.5}", pe[0]).correct
    numeric = JsonlTask(train=str(path), columns=cols, verifier="numeric")
    assert numeric.verify("#### 3.0", numeric.problems("train")[2]).correct
    with pytest.raises(UserError, match="no data for this split"):
        task.problems("heldout")
    with pytest.raises(UserError, match="unknown verifier"):
        JsonlTask(train=str(path), verifier="fuzzy")
    with pytest.raises(UserError, match="unknown column roles"):
        JsonlTask(train=str(path), columns={"question": "q"})
    with pytest.raises(UserError, match="placeholder"):
        JsonlTask(train=str(path), template="no slot")


def test_json_and_parquet_readers(tmp_path: Path) -> None:
    rows = [{"prompt": "p1", "answer": "1"}, {"prompt": "p2", "answer": "2"}]
    (tmp_path / "d.json").write_text(json.dumps(rows))
    assert read_rows(tmp_path / "d.json") == rows
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    task = JsonlTask(train=str(tmp_path / "d.parquet"), heldout=str(tmp_path / "d.json"))
    assert [p.answer for p in task.problems("train")] == ["1", "2"]
    assert [p.prompt.split("\n")[0] for p in task.problems("heldout")] == ["p1", "p2"]
    (tmp_path / "bad.json").write_text('{"a": 1}')
    with pytest.raises(UserError, match="not a JSON list"):
        read_rows(tmp_path / "bad.json")


def test_unreachable_hub_fails_at_once_without_calling_datasets(tmp_path, monkeypatch):
    probes: list[tuple] = []

    def refuse(address, timeout):
        probes.append((address, timeout))
        raise OSError("Name or service not known")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.example:8080")
    monkeypatch.setattr(jsonl.socket, "create_connection", refuse)
    monkeypatch.setitem(sys.modules, "datasets", None)  # an import would raise: it must not happen
    start = time.monotonic()
    with pytest.raises(UserError, match="hub is unreachable.*RLVR_DATA_DIR"):
        GSM8KTask(train_path=str(tmp_path / "missing.jsonl")).problems("train")
    assert time.monotonic() - start < 2
    assert probes == [(("hub.example", 8080), jsonl.HUB_PROBE_TIMEOUT_S)]


def test_offline_mode_skips_the_probe_and_asks_datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(jsonl.socket, "create_connection",
                        lambda *a, **k: pytest.fail("probed in offline mode"))
    calls = []
    monkeypatch.setattr(jsonl, "hub_reachable", lambda *a, **k: calls.append("probe") or True)

    class FakeDatasets:
        @staticmethod
        def load_dataset(name, config, split):
            calls.append((name, config, split))
            return [{"question": "1+1?", "answer": "2 #### 2"}]

    monkeypatch.setitem(sys.modules, "datasets", FakeDatasets)
    rows = GSM8KTask(train_path=str(tmp_path / "missing.jsonl")).problems("train")
    assert calls == [("openai/gsm8k", "main", "train")]
    assert [p.answer for p in rows] == ["2"]
