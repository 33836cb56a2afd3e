"""Samples importers (rlvr.eval.importers) on files written by the peers' own code: verl's dumps (gsm8k and
DAPO scorers, partial credit), TRL's completions folders (standard and conversational), SkyRL, NeMo-RL and
prime-rl dump folders, per-problem counts, a plain table. Every number is checked against a hand computation
from the fixtures' completions. Fixtures and how each was produced: tests/fixtures/importers/README.md."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.errors import UserError
from rlvr.eval.chat_text import completion_text
from rlvr.eval.importers import load_any, load_steps, parse_columns
from rlvr.eval.samples import load_samples
from rlvr.eval.steps import summarize_steps
from rlvr.eval.summary import compare, summarize
from rlvr.eval.tables import read_table
from rlvr.tasks.registry import get_task

FIX = Path(__file__).parent.parent / "fixtures" / "importers"
KS = [1, 2, 4]
REAL_GET_TASK = get_task

# The fixtures' 4 problems x 4 completions (README): answers the model gave, per problem, at step 10
ANSWERS_10 = [["12", "12", "13", None], ["3", "2", "1", "3"], ["21", "20", None, "21"], ["25", "25", "25", "24"]]
GOLD = ["12", "2", "22", "25"]


class OfflineGsm8k:
    """rlvr's gsm8k task with its dataset unreachable (as offline): rows are verified against their gold."""

    name = "gsm8k"

    def __init__(self):
        self.task = REAL_GET_TASK("gsm8k")

    def problems(self, split):
        raise UserError("offline")

    def verify(self, completion, problem):
        return self.task.verify(completion, problem)


def _passk(counts: list[tuple[int, int]], k: int) -> float:
    """Hand pass@k: mean over problems of 1 - C(n-c, k) / C(n, k)."""
    return sum(1 - math.comb(n - c, k) / math.comb(n, k) for n, c in counts) / len(counts)


def _entropy(answers: list[list[str | None]]) -> float:
    """Hand answer entropy: mean over problems of the Shannon entropy (nats) of the answers, None one class."""
    def h(a):
        return -sum(m / len(a) * math.log(m / len(a)) for m in Counter(a).values())
    return sum(h(a) for a in answers) / len(answers)


def _majority(answers: list[list[str | None]]) -> float:
    """Hand maj@n: the problem is solved when its most frequent parsed answer is the gold."""
    return sum(Counter(x for x in a if x is not None).most_common(1)[0][0] == g
               for a, g in zip(answers, GOLD)) / len(answers)


def _correct_counts(answers) -> list[tuple[int, int]]:
    return [(len(a), sum(x == g for x in a)) for a, g in zip(answers, GOLD)]


COUNTS_10 = _correct_counts(ANSWERS_10)  # [(4, 2), (4, 1), (4, 0), (4, 3)]
ANSWERS_20 = [ANSWERS_10[0], ["2", "2", "1", "3"], *ANSWERS_10[2:]]  # step 20: problem 2 gets a second right answer
COUNTS_20 = _correct_counts(ANSWERS_20)


def _check_passk(block: dict, counts) -> None:
    assert {k: block["pass_at_k"][str(k)] for k in KS} == pytest.approx({k: _passk(counts, k) for k in KS}, abs=1e-12)


def test_hand_numbers_are_what_they_say() -> None:
    assert COUNTS_10 == [(4, 2), (4, 1), (4, 0), (4, 3)] and _passk(COUNTS_10, 1) == 0.375
    assert _majority(ANSWERS_10) == 0.5 and _entropy(ANSWERS_10) == pytest.approx(0.9204, abs=1e-4)


# ----------------------------------------------------------------------------- verl
def test_verl_dapo_dump_answer_statistics_are_the_models_not_the_gold() -> None:
    rows = load_any(FIX / "verl" / "dapo" / "10.jsonl")
    assert {r["source"] for r in rows} == {"verl"} and [r["gold"] for r in rows[:4]] == ["12"] * 4
    assert [r["answer"] for r in rows] == [a for p in ANSWERS_10 for a in p]  # pred; "[INVALID]" -> None
    block = summarize(rows, KS)
    _check_passk(block, COUNTS_10)
    assert block["parsable"] == 14 / 16  # the gold as answer gave 1.00
    assert block["majority_accuracy"] == _majority(ANSWERS_10)  # 0.5 (the gold gave 0.75)
    assert block["answer_entropy"] == pytest.approx(_entropy(ANSWERS_10), abs=1e-12)  # the gold gave 0.0


def test_verl_gsm8k_dump_without_a_model_answer_column_gives_na_then_the_task_parser() -> None:
    rows = load_any(FIX / "verl" / "gsm8k" / "10.jsonl")  # acc = score, 0/1: binary
    block = summarize(rows, KS)
    _check_passk(block, COUNTS_10)
    assert block["parsable"] is None and block["majority_accuracy"] is None and block["answer_entropy"] is None
    parsed = load_any(FIX / "verl" / "gsm8k" / "10.jsonl", task=OfflineGsm8k())  # offline: against gts
    assert [r["answer"] for r in parsed] == [a for p in ANSWERS_10 for a in p]
    block = summarize(parsed, KS)
    _check_passk(block, COUNTS_10)
    assert (block["parsable"], block["majority_accuracy"]) == (14 / 16, 0.5)


def test_partial_credit_is_never_counted_as_solved() -> None:
    path = FIX / "verl" / "gsm8k_format_score" / "10.jsonl"  # format_score=0.1: acc in {0, 0.1, 1}
    assert sorted({json.loads(line)["acc"] for line in path.read_text().splitlines()}) == [0, 0.1, 1.0]
    with pytest.raises(UserError, match=r"column 'acc' holds partial scores \(0, 0.1, 1\).*--correct-threshold"):
        load_any(path)
    for rule in (1.0, "max"):  # score >= 1, score == the largest
        _check_passk(summarize(load_any(path, rule=rule), KS), COUNTS_10)
    lenient = summarize(load_any(path, rule=0.05), KS)  # the old reward > 0: every parsed answer counted
    assert lenient["pass_at_k"]["1"] == 14 / 16
    with pytest.raises(UserError, match="partial scores"):  # the reward-column rule too
        load_any(path, "table", "prompt=input,completion=output,reward=score")


def test_reverify_overrides_the_files_correctness(tmp_path) -> None:
    lying = tmp_path / "30.jsonl"  # a dump whose acc says every sample is right
    lying.write_text("".join(json.dumps({**json.loads(line), "acc": True}) + "\n"
                             for line in (FIX / "verl" / "dapo" / "10.jsonl").read_text().splitlines()))
    assert summarize(load_any(lying), KS)["pass_at_k"]["1"] == 1.0
    assert summarize(load_any(lying, task=OfflineGsm8k()), KS)["pass_at_k"]["1"] == 1.0  # fills gaps only
    with pytest.raises(UserError, match="--reverify re-scores completions with a task"):
        load_any(lying, reverify=True)
    rescored = load_any(FIX / "verl" / "gsm8k_format_score" / "10.jsonl", task=OfflineGsm8k(), reverify=True)
    _check_passk(summarize(rescored, KS), COUNTS_10)  # the partial acc column is not even read


def test_verl_run_folder_per_step_and_pooled(tmp_path) -> None:
    by_step = load_steps(FIX / "verl" / "val_dir")
    assert list(by_step) == [10, 20]
    result = summarize_steps(by_step, KS)
    _check_passk(result["per_step"]["10"], COUNTS_10)
    _check_passk(result["per_step"]["20"], COUNTS_20)
    pooled = [(8, a[1] + b[1]) for a, b in zip(COUNTS_10, COUNTS_20)]
    _check_passk(result["pooled"], pooled)
    assert result["per_step"]["20"]["majority_accuracy"] == _majority(ANSWERS_20) == 0.75
    out = tmp_path / "eval.json"
    assert main(["eval", "--samples", str(FIX / "verl" / "val_dir"), "--ks", "1,2,4", "--json", str(out),
                 "--plots", str(tmp_path / "plots")]) == 0
    assert json.loads(out.read_text())["per_step"]["20"]["pass_at_k"] == result["per_step"]["20"]["pass_at_k"]
    assert (tmp_path / "plots" / "pass_at_k_by_step.png").stat().st_size > 1000
    assert (tmp_path / "plots" / "pass_at_k.png").exists()


# ----------------------------------------------------------------------------- TRL
@pytest.mark.parametrize("layout", ["standard", "conversational"])
def test_trl_completions_folder_per_step(layout) -> None:
    pytest.importorskip("pyarrow")
    folder = FIX / "trl" / layout
    by_step = load_steps(folder)  # the run's output dir: completions/ found under it
    assert list(by_step) == [2, 4] and by_step == load_steps(folder / "completions")
    result = summarize_steps(by_step, KS)
    _check_passk(result["per_step"]["2"], COUNTS_10[:2])  # step 2 logged problems 1-2, step 4 problems 3-4
    _check_passk(result["per_step"]["4"], COUNTS_10[2:])
    _check_passk(result["pooled"], COUNTS_10)
    rows = by_step[2]
    assert rows[0]["completion"] == "9*1=9, 3+9=12\nThe answer is \\boxed{12}"  # the assistant message's text
    assert result["pooled"]["parsable"] is None  # the table logs no answers and no gold: n/a


def test_trl_conversational_repr_text_reads_as_messages(tmp_path) -> None:
    pytest.importorskip("pyarrow")
    rows = read_table(FIX / "trl" / "conversational" / "completions" / "completions_00002.parquet")
    table = {"columns": list(rows[0]), "data": [[str(v) if isinstance(v, list) else v for v in r.values()]
                                                for r in rows]}  # what a W&B table / CSV cell holds: the repr
    assert table["data"][0][2].startswith("[{'role': 'assistant'")
    path = tmp_path / "completions.table.json"
    path.write_text(json.dumps(table))
    samples = load_any(path)
    assert samples[0]["completion"] == "9*1=9, 3+9=12\nThe answer is \\boxed{12}"
    assert json.loads(samples[0]["prompt"]) == [{"content": "What is 3+9*1?", "role": "user"}]
    _check_passk(summarize(samples, KS), COUNTS_10[:2])
    assert completion_text("[{'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': 'a'}]") == "a"


def test_trl_wandb_table_json_hand_written() -> None:  # hand-written (README): W&B needs a live run
    ref = summarize(load_samples(FIX / "rlvr_samples.jsonl"), KS)["pass_at_k"]
    assert summarize(load_any(FIX / "trl_completions_table.json", columns="reward=accuracy_reward"),
                     KS)["pass_at_k"] == ref
    with pytest.raises(UserError, match=r"reward columns \['accuracy_reward', 'format_reward'\]"):
        load_any(FIX / "trl_completions_table.json")
    with pytest.raises(UserError, match="partial scores"):  # format_reward is 0 / 0.5: not a correctness
        load_any(FIX / "trl_completions_table.json", columns="reward=format_reward")


# ----------------------------------------------------------------------------- SkyRL, NeMo-RL, prime-rl
def test_skyrl_dump_folder() -> None:
    by_step = load_steps(FIX / "skyrl")  # aggregated_results.jsonl (metrics) is skipped
    assert list(by_step) == [10, 20]
    rows = by_step[10]
    assert {r["source"] for r in rows} == {"skyrl"} and rows[0]["gold"] == "12" and "answer" not in rows[0]
    result = summarize_steps(by_step, KS)
    _check_passk(result["per_step"]["10"], COUNTS_10)
    _check_passk(result["per_step"]["20"], COUNTS_20)
    assert result["pooled"]["parsable"] is None  # no model-answer column, no task: n/a
    parsed = summarize(load_any(FIX / "skyrl" / "dumped_evals" / "global_step_10_evals" / "openai_gsm8k.jsonl",
                                task=OfflineGsm8k()), KS)
    assert parsed["parsable"] == 14 / 16 and parsed["answer_entropy"] == pytest.approx(_entropy(ANSWERS_10))


def test_nemo_rl_val_data_folder() -> None:
    by_step = load_steps(FIX / "nemo_rl")
    assert list(by_step) == [10, 20]
    rows = by_step[10]
    assert rows[3]["completion"] == "I think 12" and json.loads(rows[3]["prompt"])[0]["role"] == "user"
    # NeMo-RL's hf_math_verify scorer also reads the bare 12 of "I think 12" as the answer: 3 right on problem 1
    nemo_10 = [(4, 3), *COUNTS_10[1:]]
    nemo_20 = [(4, 3), *COUNTS_20[1:]]
    result = summarize_steps(by_step, KS)
    _check_passk(result["per_step"]["10"], nemo_10)
    _check_passk(result["per_step"]["20"], nemo_20)


def test_prime_rl_rollouts_folder() -> None:
    by_step = load_steps(FIX / "prime_rl")
    assert list(by_step) == [10, 20]
    rows = by_step[10]
    assert rows[0]["problem_id"] == "gsm8k/0" and rows[0]["gold"] == "12" and rows[3]["completion"] == "I think 12"
    result = summarize_steps(by_step, KS)
    _check_passk(result["per_step"]["10"], COUNTS_10)
    _check_passk(result["per_step"]["20"], COUNTS_20)
    parsed = summarize(load_any(FIX / "prime_rl" / "rollouts" / "step_10" / "eval" / "all" / "traces.jsonl",
                                task=OfflineGsm8k()), KS)
    assert parsed["majority_accuracy"] == 0.5 and parsed["parsable"] == 14 / 16


# ----------------------------------------------------------------------------- counts
def test_counts_give_pass_at_k_support_and_crossover(tmp_path) -> None:
    base, trained = tmp_path / "base.csv", tmp_path / "trained.jsonl"
    base.write_text("problem,n,correct\na,8,1\nb,8,2\nc,8,0\nd,8,8\n")
    trained.write_text("".join(json.dumps({"problem": p, "n": 8, "correct": c}) + "\n"
                               for p, c in (("a", 0), ("b", 6), ("c", 0), ("d", 8))))
    base_rows, trained_rows = load_any(base), load_any(trained)  # detected by the columns
    assert len(base_rows) == 32 and {r["source"] for r in base_rows} == {"counts"}
    _check_passk(summarize(base_rows, KS), [(8, 1), (8, 2), (8, 0), (8, 8)])
    pair = compare(base_rows, trained_rows, [1, 2, 4, 8])
    assert pair["support"]["counts"] == {"preserved": 2, "shrunk": 1, "expanded": 0, "out_of_support": 1}
    assert pair["trained"]["pass_at_k"]["1"] == pytest.approx((6 / 8 + 1) / 4)
    assert pair["trained"]["majority_accuracy"] is None and "base_minus_trained_ci" in pair["crossover"]
    renamed = tmp_path / "r.csv"
    renamed.write_text("id,samples,solved\na,4,1\n")
    assert len(load_any(renamed, "counts", "problem_id=id,n=samples,correct=solved")) == 4
    bad = tmp_path / "bad.csv"
    bad.write_text("problem,n,correct\na,4,5\n")
    with pytest.raises(UserError, match="correct <= n"):
        load_any(bad, "counts")


# ----------------------------------------------------------------------------- tables and errors
def test_plain_csv_with_a_column_mapping() -> None:
    ref = summarize(load_samples(FIX / "rlvr_samples.jsonl"), KS)["pass_at_k"]
    rows = load_any(FIX / "plain.csv", "table", "prompt=question,completion=response,correct=is_right")
    assert summarize(rows, KS)["pass_at_k"] == ref
    with pytest.raises(UserError, match="cannot tell the format"):
        load_any(FIX / "plain.csv")
    with pytest.raises(UserError, match=r"no column\(s\) \['answer_text'\]"):
        load_any(FIX / "plain.csv", "table", "prompt=question,completion=response,correct=answer_text")
    with pytest.raises(UserError, match="unknown field 'score'"):
        parse_columns("score=x")
    with pytest.raises(UserError, match="map a completion column"):
        load_any(FIX / "plain.csv", "table", "prompt=question,completion=response")


def test_unknown_prompt_without_a_gold_column_is_a_clear_error(tmp_path) -> None:
    table = json.loads((FIX / "trl_completions_table.json").read_text())
    table["data"][0][1] = "Q:not a problem\n"
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps(table))
    with pytest.raises(UserError, match="is not a problem of task 'arithmetic'.*map gold=COL"):
        load_any(bad, task=get_task("arithmetic"))


def test_rlvr_eval_command_flags(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("rlvr.tasks.registry.get_task", lambda name: OfflineGsm8k())
    src = tmp_path / "10.jsonl"
    shutil.copy(FIX / "verl" / "gsm8k_format_score" / "10.jsonl", src)
    assert main(["eval", "--samples", str(src), "--ks", "1,2,4"]) == 2
    assert "--correct-threshold" in capsys.readouterr().err
    out = tmp_path / "eval.json"
    assert main(["eval", "--samples", str(src), "--ks", "1,2,4", "--correct-threshold", "max",
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text())["pass_at_k"]["1"] == 0.375
    assert main(["eval", "--samples", str(src), "--ks", "1,2,4", "--task", "gsm8k", "--reverify",
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text())["parsable"] == 14 / 16
    assert main(["eval", "--samples", str(src), "--correct-threshold", "most"]) == 2
    capsys.readouterr()
    assert main(["eval", "--samples", str(FIX / "prime_rl"), "--ks", "1,2,4"]) == 0
    printed = capsys.readouterr().out
    assert "pooled over steps 10, 20" in printed and "pass@4" in printed


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".json"])
def test_a_file_that_is_not_text_is_one_line_naming_it_on_the_streamed_read(tmp_path, capsys, suffix):
    """Issue 47's error kept by the one-pass reader (iter_imported): a UserError, not a traceback."""
    path = tmp_path / f"dump{suffix}"
    path.write_bytes(b'{"problem_id": "a"}\n' * 3 + bytes(range(128, 256)) * 4)
    with pytest.raises(UserError, match=r"not UTF-8 text .*give a samples file"):
        load_any(path)
    assert main(["eval", "--samples", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and len(err.strip().splitlines()) == 1
