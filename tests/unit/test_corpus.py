"""Pretraining corpus: determinism, mixing weights, wrong/truncated shares, ASCII text."""

from __future__ import annotations

import random

import pytest

from rlvr.errors import UserError
from rlvr.tasks.arithmetic import ArithmeticTask
from rlvr.tasks.corpus import build_corpus, default_tasks, sentence
from rlvr.tasks.strings import StringsTask

ALPHABET = {chr(c) for c in range(32, 127)} | {"\n"}


@pytest.fixture(scope="module")
def mix():
    return [(ArithmeticTask(pool_size=1000), 3.0), (StringsTask(pool_size=1000), 1.0)]


def _split(doc: str) -> tuple[str, str]:
    prompt, _, completion = doc.partition("\n")
    return prompt + "\n", completion


def test_deterministic_per_seed(mix):
    a = build_corpus(mix, 300, 0.2, 0.1, seed=3)
    assert a == build_corpus(mix, 300, 0.2, 0.1, seed=3)
    assert a != build_corpus(mix, 300, 0.2, 0.1, seed=4)
    assert len(a) == 300 and set("".join(a)) <= ALPHABET


def test_mix_weights_and_text_share(mix):
    docs = build_corpus(mix, 4000, 0.0, 0.0, seed=0, text_frac=0.2)
    n_arith = sum(d.startswith("Q:") for d in docs)
    n_str = sum(d[:2] in ("R:", "S:", "U:") for d in docs)
    n_text = len(docs) - n_arith - n_str
    assert abs(n_text / 4000 - 0.2) < 0.03
    assert abs(n_arith / (n_arith + n_str) - 0.75) < 0.03
    assert all("\n" not in d and d[-1] in ".?" for d in docs if d[:2] not in ("Q:", "R:", "S:", "U:"))


def test_wrong_share_is_well_formed_and_verifies_wrong(mix):
    arith = mix[0][0]
    by_prompt = {p.prompt: p for p in arith.problems("train")}
    docs = [d for d in build_corpus(mix, 3000, 0.3, 0.0, seed=1, text_frac=0.0) if d.startswith("Q:")]
    statuses = [arith.verify(_split(d)[1], by_prompt[_split(d)[0]]).status for d in docs]
    assert set(statuses) <= {"right", "wrong"}  # never malformed or answerless
    assert abs(statuses.count("wrong") / len(docs) - 0.3) < 0.04


def test_truncated_share(mix):
    gold = {p.prompt + s for t, _ in mix for p in t.problems("train") for s in p.solutions}
    docs = build_corpus(mix, 3000, 0.0, 0.4, seed=2, text_frac=0.0)
    cut = [d for d in docs if d not in gold]
    assert abs(len(cut) / len(docs) - 0.4) < 0.04
    # a cut document is a strict prefix of some gold document of its problem
    arith_gold = sorted(g for g in gold if g.startswith("Q:"))
    for d in [c for c in cut if c.startswith("Q:")][:50]:
        assert any(g.startswith(d) and g != d for g in arith_gold)


def test_only_train_problems_by_default(mix):
    held = {p.prompt for t, _ in mix for p in t.problems("heldout")}
    docs = build_corpus(mix, 2000, 0.1, 0.1, seed=5, text_frac=0.0)
    assert not {_split(d)[0] for d in docs} & held
    docs_h = build_corpus(mix, 200, 0.0, 0.0, seed=5, split="heldout", text_frac=0.0)
    assert {_split(d)[0] for d in docs_h} <= held


def test_sentences_short_ascii():
    rng = random.Random(0)
    ss = [sentence(rng) for _ in range(2000)]
    assert max(map(len, ss)) <= 60 and set("".join(ss)) <= ALPHABET and len(set(ss)) > 1000


def test_default_mix_and_errors(mix):
    tasks = default_tasks(seed=0)
    assert [t.name for t, _ in tasks] == ["arithmetic", "countdown", "strings"]
    with pytest.raises(UserError, match="wrong_frac"):
        build_corpus(mix, 10, 1.5, 0.0, seed=0)
    with pytest.raises(UserError, match="weight"):
        build_corpus([(mix[0][0], 0.0)], 10, 0.0, 0.0, seed=0)
    with pytest.raises(UserError, match="no tasks"):
        build_corpus([], 10, 0.0, 0.0, seed=0)
    assert len(build_corpus([], 10, 0.0, 0.0, seed=0, text_frac=1.0)) == 10
