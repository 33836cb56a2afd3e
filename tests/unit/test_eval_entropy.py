"""Answer-level and token-level entropy on distributions with known entropy (nats)."""

from __future__ import annotations

import math

import pytest

from rlvr.errors import UserError
from rlvr.eval.entropy import answer_entropy, answer_entropy_of, entropy_of_counts, token_entropy


@pytest.mark.parametrize("m", [1, 2, 3, 7, 32])
def test_uniform_over_m_is_ln_m(m: int) -> None:
    assert entropy_of_counts([5] * m) == pytest.approx(math.log(m), abs=1e-12)
    answers = [str(i) for i in range(m)] * 4
    assert answer_entropy_of(answers) == pytest.approx(math.log(m), abs=1e-12)


def test_known_non_uniform_and_zeros() -> None:
    assert entropy_of_counts([2, 1, 1, 0]) == pytest.approx(1.5 * math.log(2))
    assert entropy_of_counts([9, 1]) == pytest.approx(-(0.9 * math.log(0.9) + 0.1 * math.log(0.1)))
    with pytest.raises(UserError):
        entropy_of_counts([])
    with pytest.raises(UserError):
        entropy_of_counts([1, -1])


def test_answers_normalised_and_none_policy() -> None:
    assert answer_entropy_of(["42", " 42", "42 "]) == 0.0  # one answer after whitespace normalisation
    answers = ["1", "2", None, None]
    assert answer_entropy_of(answers) == pytest.approx(1.5 * math.log(2))  # p = {1/4, 1/4, 1/2}
    assert answer_entropy_of(answers, none_policy="drop") == pytest.approx(math.log(2))
    assert answer_entropy_of([None, None], none_policy="drop") is None
    assert answer_entropy_of([None, None]) == 0.0


def test_answer_entropy_averages_over_problems() -> None:
    by_problem = {"a": ["1", "2"], "b": ["3", "3", "3"], "c": [None], "d": ["x", "y", "z", "w"]}
    assert answer_entropy(by_problem) == pytest.approx((math.log(2) + 0 + 0 + math.log(4)) / 4)
    assert answer_entropy(by_problem, none_policy="drop") == pytest.approx((math.log(2) + math.log(4)) / 3)
    assert answer_entropy({"c": [None]}, none_policy="drop") is None


def test_token_entropy_is_token_weighted() -> None:
    # sample 1: 10 tokens at mean 1.0; sample 2: 30 tokens at mean 2.0 -> (10 + 60) / 40
    assert token_entropy([1.0, 2.0], [10, 30]) == pytest.approx(1.75)
    assert token_entropy([1.0, 2.0], [0, 0]) is None
    assert token_entropy([], []) is None
    with pytest.raises(UserError):
        token_entropy([1.0], [1, 2])
