"""Support classification, Invisible Leash rates, distinct answers, crossover k, histogram."""

from __future__ import annotations

import pytest

from rlvr.errors import UserError
from rlvr.eval.summary import support_block
from rlvr.eval.support import (
    HISTOGRAM_BINS,
    accuracy_bin,
    accuracy_histogram,
    classify,
    crossover_k,
    distinct_correct,
    support_categories,
    support_counts,
    support_rates,
)

T, F = True, False


def crafted() -> tuple[dict[str, list[bool]], dict[str, list[bool]]]:
    """3 preserved, 2 shrunk, 1 expanded, 4 out of support."""
    base = {
        "p1": [T, F, F],
        "p2": [F, F, T],
        "p3": [T, T, T],
        "s1": [F, T, F],
        "s2": [T, F, F],
        "e1": [F, F, F],
        "o1": [F, F, F],
        "o2": [F, F, F],
        "o3": [F, F, F],
        "o4": [F, F, F],
        "base_only": [T, T, T],
    }
    trained = {
        "p1": [T, T, T],
        "p2": [F, T, F],
        "p3": [T, F, F],
        "s1": [F, F, F],
        "s2": [F, F, F],
        "e1": [F, F, T],
        "o1": [F, F, F],
        "o2": [F, F, F],
        "o3": [F, F, F],
        "o4": [F, F, F],
    }
    return base, trained


def test_classify_all_four() -> None:
    assert classify(T, T) == "preserved"
    assert classify(T, F) == "shrunk"
    assert classify(F, T) == "expanded"
    assert classify(F, F) == "out_of_support"


def test_crafted_counts_and_rates() -> None:
    base, trained = crafted()
    cats = support_categories(base, trained)
    assert "base_only" not in cats and len(cats) == 10
    assert cats["s1"] == "shrunk" and cats["e1"] == "expanded" and cats["p2"] == "preserved"
    counts = support_counts(cats)
    assert counts == {"preserved": 3, "shrunk": 2, "expanded": 1, "out_of_support": 4}
    rates = support_rates(counts)
    srr, ndr = 3 / 5, 1 / 4
    assert rates["SRR"] == pytest.approx(srr)
    assert rates["NDR"] == pytest.approx(ndr)
    assert rates["SDS"] == pytest.approx(2 * srr * ndr / (srr + ndr))  # = 6/17
    assert rates["SDS"] == pytest.approx(6 / 17)
    assert rates["NSCR"] == pytest.approx((1 - 2) / 6)


def test_same_n_truncation_and_k() -> None:
    # trained has only 2 samples: base's correct 3rd sample is not seen
    cats = support_categories({"a": [F, F, T]}, {"a": [T, F]})
    assert cats == {"a": "expanded"}
    cats = support_categories({"a": [F, T]}, {"a": [T, F]}, k=1)
    assert cats == {"a": "expanded"}
    with pytest.raises(UserError):
        support_categories({"a": [T]}, {"a": [T]}, k=0)


def test_zero_denominators_give_none() -> None:
    only_out = support_rates({"preserved": 0, "shrunk": 0, "expanded": 0, "out_of_support": 5})
    assert only_out == {"SRR": None, "NDR": None, "SDS": None, "NSCR": None}
    only_shrunk = support_rates({"preserved": 0, "shrunk": 2, "expanded": 0, "out_of_support": 0})
    assert only_shrunk == {"SRR": 0.0, "NDR": None, "SDS": None, "NSCR": -1.0}
    only_exp = support_rates({"preserved": 0, "shrunk": 0, "expanded": 3, "out_of_support": 0})
    assert only_exp == {"SRR": None, "NDR": 1.0, "SDS": None, "NSCR": 1.0}
    disjoint = support_rates({"preserved": 0, "shrunk": 1, "expanded": 1, "out_of_support": 0})
    assert disjoint == {"SRR": 0.0, "NDR": 1.0, "SDS": 0.0, "NSCR": 0.0}


def test_support_block_from_rows() -> None:
    def rows(prefix: str, flags: dict[str, list[bool]]) -> list[dict]:
        return [{"problem_id": p, "correct": ok} for p, oks in flags.items() for ok in oks]

    base, trained = crafted()
    block = support_block(rows("b", base), rows("t", trained))
    assert block["counts"] == {"preserved": 3, "shrunk": 2, "expanded": 1, "out_of_support": 4}
    assert block["problems"] == 10 and block["n"] == 3


def test_distinct_correct_answers_and_traces() -> None:
    answers = ["42", " 42 ", "41", "7", None, "7"]
    correct = [T, T, F, T, T, T]
    assert distinct_correct(answers, correct) == 2  # "42" and "7"; 41 is wrong, None skipped
    traces = ["x = 6*7\nso 42", "x = 6*7 so   42", "x=42", "other"]
    assert distinct_correct(traces, [T, T, T, F]) == 2  # whitespace-equal traces count once
    assert distinct_correct(["a"], [F]) == 0


def test_crossover_k() -> None:
    ks = [1, 2, 4, 8, 16]
    trained = [0.5, 0.6, 0.7, 0.75, 0.8]
    base = [0.3, 0.45, 0.65, 0.75, 0.9]
    assert crossover_k(ks, base, trained) == 8  # tie counts as crossing
    assert crossover_k(ks, [0.3, 0.45, 0.65, 0.7, 0.79], trained) is None  # never catches up
    assert crossover_k(ks, [0.5] * 5, trained) is None  # trained did not lead at k=1
    assert crossover_k(ks[::-1], base[::-1], trained[::-1]) == 8  # order of ks does not matter


def test_accuracy_histogram_bins() -> None:
    assert len(HISTOGRAM_BINS) == 12
    assert HISTOGRAM_BINS[0] == "0" and HISTOGRAM_BINS[1] == "(0,0.1]" and HISTOGRAM_BINS[9] == "(0.8,0.9]"
    assert HISTOGRAM_BINS[-2:] == ("(0.9,1)", "1")
    assert accuracy_bin(10, 1) == "(0,0.1]"  # right edge included
    assert accuracy_bin(10, 3) == "(0.2,0.3]"
    assert accuracy_bin(1000, 301) == "(0.3,0.4]"
    assert accuracy_bin(10, 9) == "(0.8,0.9]"
    assert accuracy_bin(100, 91) == "(0.9,1)"
    assert accuracy_bin(64, 63) == "(0.9,1)"
    hist = accuracy_histogram([4, 4, 4, 10, 10, 20], [0, 4, 2, 1, 10, 19])
    assert hist["0"] == 1 and hist["1"] == 2 and hist["(0.4,0.5]"] == 1
    assert hist["(0,0.1]"] == 1 and hist["(0.9,1)"] == 1 and sum(hist.values()) == 6
    with pytest.raises(UserError):
        accuracy_bin(4, 5)
