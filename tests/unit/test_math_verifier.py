"""Math verifier: extraction, numeric normalisation, MATH-500 and GSM8K reference answers, timeouts."""

from __future__ import annotations

import re
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest

from rlvr.rewards.math import (
    extract_answer,
    last_boxed,
    math_equal,
    normalize_number,
    numbers_equal,
    verify_exact,
    verify_math,
    verify_numeric,
)
from rlvr.rewards.pool import ScoringPool
from rlvr.rewards.registry import get_reward, score_batch
from rlvr.tasks.jsonl import data_file, read_rows

MATH500 = data_file("math500_test.jsonl")  # $RLVR_DATA_DIR, else the copy packaged with rlvr
GSM8K = data_file("gsm8k_test.jsonl")


def _rows(path: Path) -> list[dict]:
    return read_rows(path)


# ----------------------------------------------------------------------------- extraction
@pytest.mark.parametrize(
    "text, expected",
    [
        ("so $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
        ("\\boxed{1} then \\boxed{\\left(3, \\frac{\\pi}{2}\\right)}", "\\left(3, \\frac{\\pi}{2}\\right)"),
        ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"),  # escaped braces do not close the box
        ("\\boxed{2} and a truncated \\boxed{3", "2"),  # unclosed last box: fall back to the earlier one
        ("\\fbox{7}", "7"),
        ("x = \\boxed 5 $", "5"),
        ("work\n#### 1,000", "1,000"),
        ("The answer is $\\frac12$.", "\\frac12"),
        ("So the final answer is 3.5.", "3.5"),
        ("no answer here", None),
        ("\\boxed{}", None),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


def test_boxed_beats_hashes_and_last_box_wins() -> None:
    assert extract_answer("#### 4\n\\boxed{5}") == "5"
    assert last_boxed("\\boxed{a}\\boxed{b}") == "b"
    assert extract_answer(None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "s, canon",
    [
        ("$18.00", "18"),
        ("1,234", "1234"),
        ("50\\%", "50"),
        ("\\text{18}", "18"),
        ("-3.0", "-3"),
        ("0.50", "0.5"),
        ("\\$1,450,000", "1450000"),
        ("12.", "12"),
        ("1/2", None),
        ("x", None),
        ("1,23", None),
    ],
)
def test_normalize_number(s: str, canon: str | None) -> None:
    assert normalize_number(s) == canon


def test_numbers_equal_and_verifiers() -> None:
    assert numbers_equal("18.0", "18") is True
    assert numbers_equal("19", "18") is False
    assert numbers_equal("x", "18") is None
    assert verify_numeric("I get \\boxed{\\$18.00}", "18").status == "right"
    assert verify_numeric("\\boxed{\\frac{36}{2}}", "18").status == "right"  # math-verify fallback
    assert verify_numeric("\\boxed{19}", "18").status == "wrong"
    assert verify_numeric("nothing", "18").status == "no_answer"
    assert verify_numeric("\\boxed{banana}", "18", fallback_math=False).status == "malformed"
    assert verify_exact("\\boxed{ Paris }", "Paris").reward == 1.0
    assert verify_exact("\\boxed{paris}", "Paris").reward == 0.0


def test_math_equal_known_pitfalls() -> None:
    assert math_equal("0.5", "\\frac{1}{2}")
    assert math_equal("\\dfrac12", "\\frac{1}{2}")
    assert not math_equal(".0000673", ".0000672")  # math-verify alone rounds these together
    assert not math_equal("52_9", "52_8")  # and drops the base subscript
    assert math_equal("52_{8}", "52_8")
    assert verify_math("\\boxed{\\frac{1}{3}}", "\\frac12").status == "wrong"
    assert verify_math("\\boxed{}", "1").status == "no_answer"


# ----------------------------------------------------------------------------- MATH-500
def equivalent_form(a: str) -> str:
    """An equivalent rewriting of a MATH answer (dfrac, \\left/\\right, spacing, ...)."""
    s = re.sub(r"\\frac(?=[{\d])", r"\\dfrac", a)
    s = re.sub(r"(?<!\\left)\(", r"\\left(", s)
    s = re.sub(r"(?<!\\right)\)", r"\\right)", s)
    s = re.sub(r",(?!\\!|\s|\d{3}(?!\d))", ", ", s)
    s = re.sub(r"(?<=[0-9a-z}])([+=-])(?=[0-9a-z\\])", r" \1 ", s)
    s = s.replace("^\\circ", "^{\\circ}").replace("\\mbox{", "\\text{").replace("\\$", "\\$ ")
    s = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", s)
    s = re.sub(r"\\sqrt\{(\w+)\}", r"\\sqrt{ \1 }", s)
    s = re.sub(r"_(\d+)$", r"_{\1}", s)
    s = re.sub(r"(\d\.\d+)(?![\d.])", r"\g<1>0", s)
    s = re.sub(r"^\.(\d)", r"0.\1", s)
    s = re.sub(r"\\text\{\s*(\w+)\s*\}", r"\\text{ \1}", s)
    s = s.replace("\\begin{pmatrix} ", "\\begin{pmatrix}")
    if re.fullmatch(r"\d{1,3}(,(\\!)? ?\d{3})+", a):
        s = re.sub(r",(\\!)? ?", "", a)  # 10,\!080 -> 10080
    if re.fullmatch(r"-?\d+", a):
        s = a + ".0"
    if s == a:
        t = re.sub(r"\s*([+=-]|\\pm)\s*", r"\1", a)
        s = t if t != a else "{" + a + "}"
    return s


def perturbed_form(a: str) -> str:
    """A non-equivalent answer: first digit +1 (mod 10), else a letter shifted, else ``+1``."""
    m = re.search(r"\d", a)
    if m:
        i = m.start()
        return a[:i] + str((int(a[i]) + 1) % 10) + a[i + 1 :]
    m = re.search(r"\\text\{\(?([A-Za-z])", a)
    if m:
        i = m.start(1)
        return a[:i] + chr(ord(a[i]) + 1) + a[i + 1 :]
    return a + "+1"


def _completion(ans: str) -> str:
    return f"Some reasoning.\nThe final answer is $\\boxed{{{ans}}}$."


def test_math500_all_references_equivalent_and_perturbed() -> None:
    rows = _rows(MATH500)
    assert len(rows) == 500
    assert all(equivalent_form(r["answer"]) != r["answer"] for r in rows)  # every rewrite is real
    calls = [((_completion(equivalent_form(r["answer"])), r["answer"]), {}) for r in rows]
    calls += [((_completion(perturbed_form(r["answer"])), r["answer"]), {}) for r in rows]
    pool = ScoringPool(2)
    t0 = time.perf_counter()
    try:
        res, stats = pool.map_with_stats(verify_math, calls, timeout_s=20.0)
    finally:
        pool.close()
    wall = time.perf_counter() - t0
    eq_miss = [(r["answer"], res[i]) for i, r in enumerate(rows) if not (res[i].ok and res[i].value.correct)]
    pert_hit = [
        (r["answer"], res[500 + i])
        for i, r in enumerate(rows)
        if not res[500 + i].ok or res[500 + i].value.correct
    ]
    print(
        f"MATH-500 equivalent forms verified: {500 - len(eq_miss)}/500; perturbed rejected: "
        f"{500 - len(pert_hit)}/500; 1000 verifications in {wall:.1f}s on 2 workers; {stats}"
    )
    assert eq_miss == [] and pert_hit == []
    assert stats.timeouts == 0 and stats.exceptions == 0


def test_math500_gold_solutions_verify() -> None:
    rows = _rows(MATH500)
    boxed_match = sum(last_boxed(r["solution"]) == r["answer"] for r in rows)
    verified = [verify_math(r["solution"], r["answer"]).correct for r in rows]
    misses = [r["unique_id"] for r, ok in zip(rows, verified) if not ok]
    print(
        f"MATH-500 gold solutions: boxed == answer {boxed_match}/500; "
        f"verified {sum(verified)}/500; misses {misses}"
    )
    assert boxed_match == 500 and misses == []


# ----------------------------------------------------------------------------- GSM8K
def test_gsm8k_gold_solutions_verify_and_off_by_one_fails() -> None:
    rows = _rows(GSM8K)
    assert len(rows) == 1319
    bad = []
    for r in rows:
        ans = r["answer"].rsplit("####", 1)[1].strip()
        if not verify_numeric(r["answer"], ans).correct:
            bad.append(("gold", ans))
        for d in (1, -1):
            off = str(Decimal(ans.replace(",", "")) + d)
            if verify_numeric(r["answer"], off).correct:
                bad.append(("off", ans, off))
    assert bad == []


# ----------------------------------------------------------------------------- timeouts
def test_pathological_input_times_out_from_a_thread() -> None:
    """``9^{9^{9^9}}`` makes sympy run for minutes; the pool returns the failure value instead."""
    out: dict = {}

    def job() -> None:
        t0 = time.perf_counter()
        out["res"] = score_batch(
            get_reward("math"),
            ["p", "p"],
            ["\\boxed{9^{9^{9^{9}}}}", "\\boxed{1/2}"],
            {"answer": ["1", "0.5"]},
            failure_value=-1.0,
            timeout_s=1.5,
            workers=2,
        )
        out["wall"] = time.perf_counter() - t0

    th = threading.Thread(target=job)
    th.start()
    th.join(30)
    assert not th.is_alive(), "scoring hung"
    rewards, stats = out["res"]
    assert rewards == [-1.0, 1.0]
    assert stats["timeouts"] == 1 and stats["exceptions"] == 0
    assert out["wall"] < 10


def test_huge_outputs_are_fast_and_never_raise() -> None:
    cases = [
        "\\boxed{" * 20_000,
        "x" * 100_000 + "\\boxed{1}",
        "\\boxed{" + "1+" * 50_000 + "1}",
        "#### " * 20_000,
    ]
    t0 = time.perf_counter()
    statuses = [verify_math(c, "1").status for c in cases]
    assert statuses == ["no_answer", "right", "malformed", "malformed"]
    assert time.perf_counter() - t0 < 1.0


# ----------------------------------------------------------------------------- answer equivalence
def test_math_equivalent_answers() -> None:
    from rlvr.rewards.math import math_equivalent

    assert math_equivalent("0.5", "1/2") and math_equivalent("\\frac{1}{2}", "0.5")
    assert math_equivalent("1/2", "\\frac{1}{2}") and math_equivalent(" 18.0", "18")
    assert not math_equivalent("3", "0.5") and not math_equivalent("52_8", "52_9")
    assert not math_equivalent("x" * 5000, "x" * 4999 + "y")  # over MAX_ANSWER_CHARS: strings only
    assert math_equivalent("1E+999999999", "1E+999999999") and not math_equivalent("1E+999999999", "1")


def test_math_equivalent_is_bounded_from_a_thread() -> None:
    from rlvr.rewards.math import math_equivalent

    out: dict = {}

    def job() -> None:
        t0 = time.perf_counter()
        out["same"] = math_equivalent("9^{9^{9^{9}}}", "1", timeout_s=1.5)
        out["wall"] = time.perf_counter() - t0

    th = threading.Thread(target=job)
    th.start()
    th.join(30)
    assert not th.is_alive(), "equivalence hung"
    assert out["same"] is False and out["wall"] < 10


def test_long_and_huge_numbers_never_raise() -> None:
    big = "1" * 40
    assert normalize_number(big) == big and numbers_equal(big, big + ".0") is True
    assert numbers_equal("0." + "1" * 40, "0." + "1" * 39 + "2") is False  # no rounding at 28 digits
    assert normalize_number("1e999999999") is None and normalize_number("1e-999999999") is None
    assert verify_numeric(f"\\boxed{{{big}}}", "5").status == "wrong"
    assert verify_numeric(f"\\boxed{{{big}}}", big).status == "right"
