"""Unbiased maj@k (rlvr.eval.majority) against brute-force enumeration of every k-subset, exact sums
over vote-count vectors at larger n, and values known by symmetry at n = 1024."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from rlvr.errors import UserError
from rlvr.eval import majority
from rlvr.eval.majority import maj_at_k
from rlvr.eval.summary import summarize


def brute(sizes, correct, unparsable, k) -> float:
    """Mean over all k-subsets of the majority vote's accuracy, ties shared equally."""
    labels = [j for j, m in enumerate(sizes) for _ in range(m)] + [None] * unparsable
    total, count = 0.0, 0
    for subset in itertools.combinations(range(len(labels)), k):
        votes: dict[int, int] = {}
        for i in subset:
            if labels[i] is not None:
                votes[labels[i]] = votes.get(labels[i], 0) + 1
        count += 1
        if votes:
            top = max(votes.values())
            winners = [j for j, v in votes.items() if v == top]
            total += sum(correct[j] for j in winners) / len(winners)
    return total / count


@pytest.fixture(params=["windowed DFT", "enumerated"])
def path(request, monkeypatch):
    """Each test twice: every k by the windowed DFT (no enumeration), and every k by the sum over vote-count
    vectors (:func:`majority._enumerated_maj`) wherever it is allowed; the profile cache cleared around."""
    monkeypatch.setattr(majority, "ENUMERATED", 0 if request.param == "windowed DFT" else 10**9)
    majority._profile_maj_at_k.cache_clear()
    yield request.param
    majority._profile_maj_at_k.cache_clear()


def test_equals_brute_force_enumeration_to_1e_12(path):
    rng = random.Random(0)
    cases = 0
    while cases < 120:
        sizes = [rng.randint(1, 4) for _ in range(rng.randint(1, 5))]
        correct = [rng.random() < 0.4 for _ in sizes]
        unparsable = rng.randint(0, 3)
        n = sum(sizes) + unparsable
        if n > 12:
            continue
        cases += 1
        ks = list(range(1, n + 1))
        want = [brute(sizes, correct, unparsable, k) for k in ks]
        np.testing.assert_allclose(maj_at_k(sizes, correct, unparsable, ks), want, rtol=0, atol=1e-12)


def by_count_vectors(sizes, correct, unparsable, k) -> Fraction:
    """maj@k exactly: the sum over vote-count vectors (x_1..x_J, x_u) of C(m_j, x_j)... / C(n, k) x score."""
    n = sum(sizes) + unparsable
    total = Fraction(0)
    for votes in itertools.product(*(range(min(m, k) + 1) for m in sizes)):
        left = k - sum(votes)
        if not 0 <= left <= unparsable or not any(votes):
            continue
        weight = math.comb(unparsable, left)
        for m, x in zip(sizes, votes):
            weight *= math.comb(m, x)
        top = max(votes)
        winners = [ok for x, ok in zip(votes, correct) if x == top]
        total += Fraction(weight * sum(winners), len(winners))
    return total / math.comb(n, k)


def test_equals_exact_sums_over_vote_counts_at_larger_n(path):
    """n = 40..70: the windows, the closed form where c surely leads and the skipped vote counts act here
    (their tails are far below 1e-20 of a term), unlike at the brute force's n <= 12."""
    cases = [([30, 5, 3], [True, False, False], 2), ([12, 14, 13], [False, True, False], 1),
             ([3, 25, 20], [True, False, True], 10), ([20, 20], [True, False], 0),
             ([1] * 5 + [30], [True] * 5 + [False], 5),
             ([50, 2, 1, 1], [False, True, True, False], 16)]
    for sizes, correct, unparsable in cases:
        n = sum(sizes) + unparsable
        ks = sorted({1, 2, 3, 5, 8, 13, 21, n // 2, n - 3, n - 1, n})
        want = [float(by_count_vectors(sizes, correct, unparsable, k)) for k in ks]
        np.testing.assert_allclose(maj_at_k(sizes, correct, unparsable, ks), want, rtol=0, atol=1e-12)


def test_symmetric_classes_at_n_1024_share_the_vote_equally():
    """J equal classes and no unparsable sample: by symmetry maj@k = (correct classes) / J at every k,
    ties everywhere. Within 5e-12: the binomial terms come from log-factorials near 6,000, whose
    rounding (an ulp is 9e-13) is a relative error of about 1e-12 in every term (3640ffe's code is off
    by the same 3e-12 at [512, 512])."""
    ks = [1, 2, 3, 4, 8, 16, 31, 64, 100, 128, 256, 511, 512, 700, 1000, 1023, 1024]
    for sizes, correct in [([256] * 4, [True, False, False, False]), ([256] * 4, [True, True, False, False]),
                           ([2] * 512, [True] + [False] * 511), ([512, 512], [False, True])]:
        want = sum(correct) / len(correct)
        np.testing.assert_allclose(maj_at_k(sizes, correct, 0, ks), want, rtol=0, atol=5e-12)


def test_enumerated_small_k_at_n_1024_is_exact_to_1e_13():
    """A profile of the large-samples benchmark at k = 16 (4,845 vote-count vectors: enumerated by default):
    within 1e-13 of the exact sum (the windowed DFT's log-factorials near 6,000 leave it 2e-12 off)."""
    sizes, correct, unparsable = [920, 28, 32, 22], [True, False, False, False], 22
    want = float(by_count_vectors(sizes, correct, unparsable, 16))
    majority._profile_maj_at_k.cache_clear()
    assert math.comb(16 + 4, 4) <= majority.ENUMERATED
    assert maj_at_k(sizes, correct, unparsable, [16])[0] == pytest.approx(want, abs=1e-13)


@pytest.mark.parametrize(("sizes", "correct", "unparsable"), [
    ([3, 2, 1], [False, False, False], 2),  # no correct class: 0 at every k
    ([3, 2, 1], [True, True, True], 0),  # every class correct, every sample parsed: 1 at every k
    ([3, 2, 1], [True, True, True], 2),  # every class correct but some unparsable: below 1 where k < 3
    ([4], [True], 3),  # a single class
])
def test_trivial_profiles_equal_brute_force(sizes, correct, unparsable):
    n = sum(sizes) + unparsable
    ks = list(range(1, n + 1))
    want = [brute(sizes, correct, unparsable, k) for k in ks]
    np.testing.assert_allclose(maj_at_k(sizes, correct, unparsable, ks), want, rtol=0, atol=1e-12)


def test_a_profile_is_computed_once_in_any_class_order():
    majority._profile_maj_at_k.cache_clear()
    first = maj_at_k([300, 200, 100], [False, True, False], 24, [1, 16, 256])
    second = maj_at_k([100, 300, 200], [False, False, True], 24, [1, 16, 256])
    assert first.tolist() == second.tolist()
    assert majority._profile_maj_at_k.cache_info().hits == 1


def test_hand_computed_cases():
    # k = 1: one random sample votes alone: the share of samples in correct classes
    assert maj_at_k([3, 5, 2], [False, True, True], 2, [1])[0] == pytest.approx(7 / 12, abs=1e-15)
    # n = 3, classes {a: 2 correct, b: 1}: of the 3 pairs, (a, a) wins, (a, b) twice ties -> 1/2 each
    assert maj_at_k([2, 1], [True, False], 0, [2])[0] == pytest.approx((1 + 0.5 + 0.5) / 3, abs=1e-15)
    # k = n: the vote of all samples, ties shared; nothing parsable -> 0
    assert maj_at_k([2, 2, 1], [True, False, True], 1, [6])[0] == 0.5
    assert maj_at_k([], [], 4, [1, 4]).tolist() == [0.0, 0.0]


def test_large_n_stays_in_range_and_matches_the_vote_at_n():
    sizes = [400, 300, 200, 24]
    got = maj_at_k(sizes, [False, True, False, False], 100, [1, 64, 1024])
    assert got[0] == pytest.approx(300 / 1024, abs=1e-12)
    assert 0.0 <= got[1] < 0.5 and got[2] == 0.0  # the 400-class wins the full vote


@pytest.mark.parametrize(("sizes", "correct", "unparsable", "ks"), [
    ([2, 0], [True, False], 0, [1]),
    ([2], [True, False], 0, [1]),
    ([2], [True], 0, [3]),
    ([2], [True], 0, [0]),
])
def test_bad_input_is_refused(sizes, correct, unparsable, ks):
    with pytest.raises(UserError):
        maj_at_k(sizes, correct, unparsable, ks)


def test_summary_reports_maj_at_k_for_every_k():
    rows = []
    for p, answers in enumerate((["1", "1", "2", None], ["3", "4", "4", "4"])):
        gold = ("1", "3")[p]
        rows += [{"problem_id": f"p{p}", "completion": str(a), "answer": a, "correct": a == gold,
                  "reward": float(a == gold)} for a in answers]
    out = summarize(rows)
    assert set(out["maj_at_k"]) == {"1", "2", "4"}
    want = [np.mean([brute([2, 1], [True, False], 1, k), brute([1, 3], [True, False], 0, k)]) for k in (1, 2, 4)]
    np.testing.assert_allclose([out["maj_at_k"][k] for k in ("1", "2", "4")], want, atol=1e-12)
    assert out["maj_at_k"]["4"] == out["majority_accuracy"] == 0.5  # no ties at n: the two agree


def test_fft_length_is_the_least_5_smooth_length_covering_the_window():
    """The FFT length: at least the window, only factors 2, 3 and 5, and no such length between."""
    def smooth(length: int) -> bool:
        for prime in (2, 3, 5):
            while length % prime == 0:
                length //= prime
        return length == 1

    for span in range(1, 400):
        length = majority._fft_length(span)
        assert length >= span and smooth(length)
        assert not any(smooth(shorter) for shorter in range(span, length))
    assert majority._fft_length(97) == 100  # a prime window goes to a fast length, not Bluestein


def test_fold_adds_degrees_beyond_the_length_onto_their_residue():
    """Rows longer than the FFT length wrap circularly (degree d lands on d mod N); shorter rows pass."""
    rows = np.arange(2 * 11, dtype=float).reshape(2, 11)
    folded = majority._fold(rows, 4)
    expected = np.zeros((2, 4))
    for degree in range(11):
        expected[:, degree % 4] += rows[:, degree]
    np.testing.assert_array_equal(folded, expected)
    assert majority._fold(rows, 11) is rows


def test_compositions_are_every_count_vector_in_stars_and_bars_order():
    """_compositions (the enumerated path's vote-count vectors) row for row as stars and bars lists them:
    the bars' positions in itertools.combinations order, the counts between them."""
    for k, parts in [(0, 2), (1, 2), (5, 3), (7, 4), (13, 6), (4, 9)]:
        rows = [np.diff([-1, *bars, k + parts - 1]) - 1
                for bars in itertools.combinations(range(k + parts - 1), parts - 1)]
        counts = majority._compositions(k, parts)
        assert counts.dtype == np.int64 and not counts.flags.writeable
        np.testing.assert_array_equal(counts, np.array(rows, dtype=np.int64))
