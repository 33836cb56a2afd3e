"""Support classification, Invisible Leash rates, distinct answers, crossover k, histogram."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr.errors import UserError
from rlvr.eval.passk import pass_at_k_difference_ci
from rlvr.eval.summary import support_block
from rlvr.eval.support import (
    HISTOGRAM_BINS,
    accuracy_bin,
    accuracy_histogram,
    classify,
    crossover_k,
    crossover_text,
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


def _solved(n_problems: int, solved: range | list[int]) -> np.ndarray:
    """(P,) per-problem pass@k of 0/1: 1 for the problems in ``solved``."""
    out = np.zeros(n_problems)
    out[list(solved)] = 1.0
    return out


def test_crossover_k_tie_inside_the_interval_is_none() -> None:
    # 200 problems; k=1: trained leads clearly; k=16: base 0.905 vs trained 0.895, the paired
    # difference +1 on 10 problems and -1 on 8 (noise): its 95% interval includes 0.
    ks = [1, 16]
    base = np.stack([_solved(200, range(0, 20)), _solved(200, range(0, 181))], axis=1)  # (P, K)
    trained = np.stack([_solved(200, range(0, 150)), _solved(200, range(10, 189))], axis=1)
    assert base.mean(0)[1] == pytest.approx(0.905) and trained.mean(0)[1] == pytest.approx(0.895)
    # the old rule (trained led at k=1, base >= trained at 16) said 16
    assert trained.mean(0)[0] > base.mean(0)[0] and base.mean(0)[1] >= trained.mean(0)[1]
    lo, hi = pass_at_k_difference_ci(base, trained)
    assert lo[1] < 0 < hi[1]
    assert crossover_k(ks, base, trained) is None
    assert crossover_text(None, 16) == "none up to k=16"


def test_crossover_k_clear_crossover() -> None:
    ks = [1, 4, 16]
    P = 200
    trained = np.stack([_solved(P, range(100)), _solved(P, range(110)), _solved(P, range(115))], axis=1)
    base = np.stack([_solved(P, range(40)), _solved(P, range(112)), _solved(P, range(190))], axis=1)
    assert crossover_k(ks, base, trained) == 16  # at k=4 base is ahead by 2 problems: inside the interval
    assert crossover_k(ks, base, trained, seed=3) == 16  # not an accident of the seed
    assert crossover_k(ks[::-1], base[:, ::-1], trained[:, ::-1]) == 16  # order of ks does not matter
    assert crossover_k(ks, trained, trained) is None  # identical: the difference is 0, not above 0
    assert crossover_k(ks, np.zeros((P, 3)), trained) is None  # base below everywhere
    early = base.copy()
    early[:, 1] = _solved(P, range(160))
    assert crossover_k(ks, early, trained) == 4
    # base above at k=1 already: the smallest such k is 1 (no "trained led first" condition)
    assert crossover_k(ks, np.ones((P, 3)), trained) == 1
    assert crossover_text(4, 16) == "k=4"


def test_crossover_k_checks_shapes() -> None:
    with pytest.raises(UserError, match="crossover"):
        crossover_k([1, 2], np.zeros((3, 2)), np.zeros((4, 2)))
    with pytest.raises(UserError, match="crossover"):
        crossover_k([1, 2, 4], np.zeros((3, 2)), np.zeros((3, 2)))
    with pytest.raises(UserError, match="crossover"):
        crossover_k([1, 2], np.full((3, 2), np.nan), np.zeros((3, 2)))


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
