"""Document reconstruction: chunking, gap structure, option permutation, dense and sparse rewards."""

from __future__ import annotations

import random
import re

import pytest

from rlvr.errors import UserError
from rlvr.tasks.docrecon import (
    DocReconTask,
    choose_gaps,
    default_text,
    parse_letters,
    reconstruction_reward,
    split_chunks,
)

TEXT = " ".join(f"Sentence number {i} is here." for i in range(200))


def _options(prompt: str) -> dict[str, str]:
    body = prompt.split("\nSegments:\n", 1)[1].rsplit("\n\nAnswer:", 1)[0]
    return dict(line.split(". ", 1) for line in body.splitlines())


def test_packaged_document_and_chunking() -> None:
    doc = default_text()
    assert 18_000 <= len(doc) <= 30_000
    chunks = split_chunks(doc, 250)
    assert len(chunks) >= 80 and max(map(len, chunks)) <= 300
    assert " ".join(chunks) == " ".join(doc.split())  # nothing lost or reordered
    assert split_chunks("A b. C d. E f.", 5) == ["A b.", "C d.", "E f."]


def test_choose_gaps_never_touch() -> None:
    rng = random.Random(0)
    for _ in range(500):
        w, m = rng.randint(4, 30), rng.randint(1, 8)
        if m > w // 2:
            continue
        gaps = choose_gaps(w, m, rng)
        assert len(gaps) == m and all(0 <= g < w for g in gaps)
        assert all(b - a >= 2 for a, b in zip(gaps, gaps[1:]))


def test_problem_structure_and_truth() -> None:
    task = DocReconTask(text=TEXT, chunk_chars=60, window=18, m_values=(2, 4, 6, 8), seed=1, size=40)
    probs = task.problems("train")
    assert {p.meta["m"] for p in probs} == {2, 4, 6, 8}
    for p in probs:
        m, gaps = p.meta["m"], p.meta["gaps"]
        assert all(b - a >= 2 for a, b in zip(gaps, gaps[1:]))
        passage = p.prompt.split("\nPassage:\n", 1)[1].split("\n\nSegments:\n", 1)[0]
        assert [int(k) for k in re.findall(r"\[GAP (\d+)\]", passage)] == list(range(1, m + 1))
        opts = _options(p.prompt)
        assert sorted(opts) == [chr(65 + j) for j in range(m)]
        removed = [task.chunks[g] for g in gaps]
        assert sorted(opts.values()) == sorted(removed)  # options are a permutation of the removed chunks
        truth = p.answer.split(", ")
        assert [opts[letter] for letter in truth] == removed  # answer letters in gap order
        filled = re.sub(r"\[GAP (\d+)\]", lambda mt, r=removed: r[int(mt.group(1)) - 1], passage)
        start = p.meta["start"]
        assert filled == " ".join(task.chunks[start : start + p.meta["window"]])
        assert task.verify(p.solutions[0], p).reward == 1.0
    assert task.problems("train", 5) == probs[:5]  # deterministic prefix
    held = task.problems("heldout", 20)
    lo, _ = task.regions["heldout"]
    assert all(min(p.meta["gaps"]) >= lo and p.meta["start"] >= lo for p in held)  # unseen text
    assert task.regions["train"][1] == lo


def test_rewards_on_crafted_answers() -> None:
    truth = ["C", "A", "D", "B"]
    assert reconstruction_reward(truth, truth) == 1.0
    assert reconstruction_reward(["C", "A", "B", "D"], truth) == 0.5
    assert reconstruction_reward(["A", "C", "B", "D"], truth) == 0.0
    assert reconstruction_reward(["C", "A", "D"], truth) == 0.0  # letter set differs
    assert reconstruction_reward(["C", "A", "D", "D"], truth) == 0.0  # duplicates: multiset differs
    assert reconstruction_reward(["C", "A", "D", "E"], truth) == 0.0
    assert reconstruction_reward(["C", "A", "B", "D"], truth, dense=False) == 0.0
    assert reconstruction_reward(truth, truth, dense=False) == 1.0
    assert parse_letters("C, A, D, B") == truth
    assert parse_letters("CADB") == truth and parse_letters("(c) (a) (d) (b)") == truth
    assert parse_letters("C and A") == ["C", "A"]
    assert parse_letters("1, 2") is None and parse_letters("CA, B") is None


def test_verify_statuses_dense_and_sparse() -> None:
    kw = dict(text=TEXT, chunk_chars=60, window=16, m_values=(4,), seed=3, size=3)
    dense, sparse = DocReconTask(**kw), DocReconTask(dense=False, **kw)
    p = dense.problems("train", 1)[0]
    truth = p.answer.split(", ")
    swapped = [truth[1], truth[0], *truth[2:]]
    v = dense.verify(f"I think \\boxed{{{', '.join(swapped)}}}", p)
    assert (v.reward, v.status) == (0.5, "wrong")
    assert sparse.verify(f"\\boxed{{{', '.join(swapped)}}}", p).reward == 0.0
    assert sparse.verify(f"\\boxed{{{''.join(truth)}}}", p).status == "right"
    assert dense.verify("no idea", p).status == "no_answer"
    assert dense.verify("\\boxed{1, 2, 3, 4}", p).status == "malformed"


def test_bad_configs() -> None:
    with pytest.raises(UserError, match="window"):
        DocReconTask(text=TEXT, window=10, m_values=(8,))
    with pytest.raises(UserError, match="fewer than window"):
        DocReconTask(text="One. Two. Three.", window=4, m_values=(2,))
    with pytest.raises(UserError, match="not found"):
        DocReconTask(source="/nonexistent/doc.txt")
