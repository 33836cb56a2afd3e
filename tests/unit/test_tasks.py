"""Synthetic tasks: determinism, splits, gold/wrong traces, robust verification, registry errors."""

from __future__ import annotations

import random
import time

import pytest

from rlvr.errors import UserError
from rlvr.tasks.arithmetic import ArithmeticTask, extract_answer, traces
from rlvr.tasks.base import Problem
from rlvr.tasks.countdown import CountdownTask, evaluate, solve
from rlvr.tasks.registry import TASKS, get_task, list_tasks, register_task
from rlvr.tasks.strings import StringsTask

NAMES = ["arithmetic", "countdown", "strings"]
ALPHABET = {chr(c) for c in range(32, 127)} | {"\n"}


@pytest.fixture(scope="module", params=NAMES)
def task(request):
    return get_task(request.param)


def test_determinism_per_seed(task):
    a = task.problems("train", 50)
    b = get_task(task.name).problems("train", 50)
    assert a == b and task.problems("train", 50) == a
    assert task.problems("train", 20) == a[:20]  # prefix-stable
    other = get_task(task.name, seed=1).problems("train", 50)
    assert [p.prompt for p in other] != [p.prompt for p in a]


def test_splits_disjoint_and_sized(task):
    tr, he = task.problems("train"), task.problems("heldout")
    assert not {p.prompt for p in tr} & {p.prompt for p in he}
    assert len({p.prompt for p in tr}) == len(tr) and len({p.id for p in tr + he}) == len(tr + he)
    frac = len(he) / (len(tr) + len(he))
    assert 0.10 <= frac <= 0.20, frac
    # the split is a function of the text only: another seed never moves a heldout prompt to train
    tr1 = {p.prompt for p in get_task(task.name, seed=7, pool_size=1000).problems("train")}
    assert not tr1 & {p.prompt for p in he}
    assert all(p.meta["split"] == "heldout" for p in he)


def test_gold_right_wrong_wrong_and_ascii(task):
    rng = random.Random(0)
    probs = task.problems("train", 150) + task.problems("heldout", 50)
    for p in probs:
        assert p.solutions and all(s.endswith(p.answer) or task.name == "countdown" for s in p.solutions)
        for s in p.solutions:
            v = task.verify(s, p)
            assert (v.status, v.reward) == ("right", 1.0), (p, s)
            assert not s.endswith("\n") and s.rsplit("\n", 1)[-1].startswith("A:")
            assert set(p.prompt + s) <= ALPHABET
        w = task.wrong_solution(p, rng)
        assert set(w) <= ALPHABET and task.verify(w, p).status == "wrong", (p, w)
        assert w not in p.solutions
    assert max(len(p.prompt) for p in probs) <= 20
    assert max(len(s) for p in probs for s in p.solutions) <= 40


def test_extract_answer():
    assert extract_answer("4*2=8\nA: 12 \nmore") == "12"
    assert extract_answer("A:1\nA:2") == "2"
    assert extract_answer("A:3 then A:4") == "4"
    assert extract_answer("no answer here") is None
    assert extract_answer("A:") == ""
    assert extract_answer(None) is None  # type: ignore[arg-type]


JUNK = ["", "A:", "A:   ", "\u00e9\u4e2d\U0001f600 A:\u0663", "A:\x00\x7f", "A:" + "(" * 5000, "\ud800A:1"]


@pytest.mark.parametrize("name", NAMES)
def test_verify_never_raises_and_is_fast(name):
    task = get_task(name)
    p = task.problems("train", 1)[0]
    big = ["x" * 100_000, "A:" + "7" * 100_000, "A:" + "(" * 50_000 + "1" + ")" * 50_000, "A:1\n" * 25_000]
    for s in JUNK + big:
        t0 = time.perf_counter()
        v = task.verify(s, p)
        assert time.perf_counter() - t0 < 0.1
        assert v.reward == (1.0 if v.status == "right" else 0.0) and v.status != "right"
    assert task.verify("no final line", p).status == "no_answer"
    assert task.verify("A:1+", p).status == "malformed"


def test_arithmetic_known_answers_and_statuses():
    t = ArithmeticTask()
    p = Problem("x", "Q:3+4*2+1\n", "12")
    assert t.verify("4*2=8;3+8=11;11+1=12\nA:12", p).status == "right"
    assert t.verify("A:13", p).status == "wrong"
    assert t.verify("A:-12", p).status == "wrong"
    assert t.verify("A:12.0", p).status == "malformed"
    assert t.verify("A:twelve", p).status == "malformed"
    assert t.verify("A:\u0661\u0662", p).status == "malformed"  # Arabic-Indic digits are not ASCII ints
    assert t.verify("4*2=8", p).status == "no_answer"


def test_arithmetic_all_reduction_orders():
    # 3+4*2+1: * must go first, then the two + in either order -> exactly 2 traces
    got = {";".join(s) for s in traces([3, "+", 4, "*", 2, "+", 1], 99, 100)}
    assert got == {"4*2=8;3+8=11;11+1=12", "4*2=8;8+1=9;3+9=12"}
    # 1+2+3+4: 3 * 2 * 1 = 6 orders
    assert len(traces([1, "+", 2, "+", 3, "+", 4], 99, 100)) == 6
    # with '-': 9-2+3 may not reduce 2+3 first (that would give 4, not 10)
    assert [";".join(s) for s in traces([9, "-", 2, "+", 3], 99, 100)] == ["9-2=7;7+3=10"]
    probs = ArithmeticTask().problems("train", 200)
    assert sum(len(p.solutions) >= 2 for p in probs) >= 50
    assert all(len(set(p.solutions)) == len(p.solutions) for p in probs)


def test_arithmetic_knobs_change_difficulty():
    hard = ArithmeticTask(min_operands=5, max_operands=5, ops="+*-", max_result=999)
    probs = hard.problems("train", 30)
    assert all(p.meta["operands"] == 5 for p in probs)
    assert all(hard.verify(s, p).correct for p in probs for s in p.solutions)
    with pytest.raises(UserError, match="operands"):
        ArithmeticTask(min_operands=4, max_operands=3)
    with pytest.raises(UserError, match="ops"):
        ArithmeticTask(ops="+/")


def test_arithmetic_default_knobs_hold_fewer_problems_than_the_pool_size():
    """The docstring's count: 3 operands of 1..9 with + and * (intermediates <= 99) are 2,605 distinct
    problems, below pool_size 5000, so RL's training pool is the whole train split (what
    No-Positive-Resampling exhausted in scalerl_bend); a 4th operand gives many more."""
    task = ArithmeticTask()
    assert (len(task.problems("train")), len(task.problems("heldout"))) == (2247, 358)
    wider = ArithmeticTask(max_operands=4, pool_size=40000)
    assert len(wider.problems("train")) + len(wider.problems("heldout")) == 40000


def test_countdown_parser_and_rules():
    assert evaluate("(7+4)*8") == (88, [7, 4, 8])
    assert evaluate(" 8 / 2 - (3) ")[0] == 1
    with pytest.raises(ArithmeticError):
        evaluate("7/2")
    for bad in ["8/0", "7+", "(7", "7)", "-7", "7**2", "2^3", "7 8", "", "(" * 21 + "1" + ")" * 21]:
        with pytest.raises(ValueError):
            evaluate(bad)
    assert evaluate("(" * 20 + "1" + ")" * 20)[0] == 1
    t = CountdownTask()
    p = Problem("x", "N:3 5 7 T:22\n", "22", meta={"numbers": [3, 5, 7]})
    assert t.verify("5*3=15;15+7=22\nA:5*3+7", p).status == "right"
    assert t.verify("A:7*3+5-3", p).status == "wrong"  # 3 used twice
    assert t.verify("A:22", p).status == "wrong"  # 22 is not a given number
    assert t.verify("A:7*3+1", p).status == "wrong"  # 1 not given
    assert t.verify("A:5*3+7-0", p).status == "wrong"  # 0 not given
    assert t.verify("A:7/3*3+15", p).status == "wrong"  # inexact division
    assert t.verify("A:5*3+import os", p).status == "malformed"
    assert t.verify("A:__import__('os')", p).status == "malformed"
    q = Problem("y", "N:3 5 7 T:22\n", "22")  # no meta: numbers come from the prompt
    assert t.verify("A:(7*3)+(5-3)*0+1", q).status == "wrong"
    assert t.verify("A:3*5+7", q).status == "right"


def test_countdown_solver_finds_all_small_solutions():
    sols = {e for _, e in solve([2, 3, 4], 10, "+-*/")}
    assert {"4*2+3", "3*2+4", "4+3*2"} & sols
    for e in sols:
        v, used = evaluate(e)
        assert v == 10 and sorted(used) <= [2, 3, 4] and len(used) == len(set(used))
    probs = CountdownTask().problems("train", 200)
    assert all(int(p.answer) not in p.meta["numbers"] for p in probs)
    assert sum(len(p.solutions) >= 2 for p in probs) >= 20


def test_strings_ops():
    t = StringsTask()
    for prompt, ans in [("R:abcde\n", "edcba"), ("S:dbca\n", "abcd"), ("U:abc\n", "ABC")]:
        p = Problem("x", prompt, ans)
        assert t.verify(f"A:{ans}", p).correct and not t.verify(f"A:{ans}x", p).correct
        assert t.verify("A:ab1", p).status == "malformed"
    probs = StringsTask(min_len=8, max_len=8, ops="R").problems("train", 20)
    assert all(p.prompt.startswith("R:") and len(p.answer) == 8 for p in probs)


def test_registry_errors_and_lazy_factories():
    assert {"arithmetic", "countdown", "strings"} <= set(list_tasks())
    with pytest.raises(UserError, match="did you mean 'arithmetic'"):
        get_task("arithmetc")
    with pytest.raises(UserError, match="did you mean 'max_operands'"):
        get_task("arithmetic", max_operand=3)
    with pytest.raises(UserError, match="split"):
        get_task("strings").problems("test")
    with pytest.raises(UserError, match="only"):
        get_task("strings", min_len=1, max_len=1, ops="U").problems("train", 1000)
    register_task("_lazy_strings", "rlvr.tasks.strings:StringsTask")
    try:
        assert isinstance(get_task("_lazy_strings", max_len=4), StringsTask)
        with pytest.raises(UserError, match="already registered"):
            register_task("_lazy_strings", ArithmeticTask)
        with pytest.raises(UserError, match="module:attr"):
            register_task("_bad", "no_colon")
    finally:
        TASKS.pop("_lazy_strings", None)


# ----------------------------------------------------------------------------- answer equivalence
def test_every_registered_task_has_an_answer_equivalence():
    from rlvr.tasks.registry import resolve

    for name in list_tasks():
        assert callable(getattr(resolve(name), "equivalent", None)), name


def test_default_equivalence_for_tasks_without_one():
    from rlvr.tasks.base import answers_equivalent, default_equivalent, task_equivalence

    class Bare:
        name = "bare"

    assert answers_equivalent(Bare(), " x ", "x") and not answers_equivalent(Bare(), "0.5", "1/2")
    assert task_equivalence(Bare()) is default_equivalent
    assert answers_equivalent(get_task("arithmetic"), "4", "4.0")  # a task's own equivalence wins


def test_arithmetic_and_countdown_compare_numbers():
    ar = get_task("arithmetic")
    assert ar.equivalent("4", "4.0") and ar.equivalent("4", " 04 ") and ar.equivalent("-3", "-3.00")
    assert not ar.equivalent("4", "5") and not ar.equivalent("4", "four") and not ar.equivalent("4", "")
    assert ar.equivalent("four", "four")  # not numbers: exact strings
    assert not ar.equivalent("1" * 300, "1" * 299 + "2")  # long answers are bounded, never raise
    cd = get_task("countdown")
    assert cd.equivalent("5*3+7", "22") and cd.equivalent("7+5*3", "3*5+7") and cd.equivalent("22", "22.0")
    assert not cd.equivalent("5*3", "22") and not cd.equivalent("1/0", "0")  # 1/0 is malformed
    assert not cd.equivalent("(1", "1") and not cd.equivalent("5/2", "2")


def test_strings_compare_exactly():
    st = get_task("strings")
    assert st.equivalent("abc", "abc") and not st.equivalent("abc", "ABC") and not st.equivalent("abc", "cba")


def test_math_tasks_compare_with_math_verify():
    from rlvr.tasks.gsm8k import GSM8KTask
    from rlvr.tasks.jsonl import JsonlTask
    from rlvr.tasks.math500 import Math500Task

    for task in (GSM8KTask(), Math500Task(), JsonlTask(verifier="math"), JsonlTask(verifier="numeric")):
        assert task.equivalent("0.5", "1/2") and task.equivalent("\\frac{1}{2}", "0.5"), task.name
        assert task.equivalent("1,000", "1000") and task.equivalent("18.0", "18")
        assert not task.equivalent("3", "0.5") and not task.equivalent("x" * 5000, "y")
    m = Math500Task()
    assert m.equivalent("\\dfrac{1}{2}", "1/2") and m.equivalent("(x+1)^2", "x^2+2x+1")
    exact = JsonlTask(verifier="exact")
    assert exact.equivalent(" 0.5", "0.5") and not exact.equivalent("0.5", "1/2")


def test_docrecon_and_reasoning_gym_equivalence():
    from rlvr.tasks.docrecon import DocReconTask

    d = DocReconTask(size=4, heldout_size=2)
    assert d.equivalent("C, A, B", "CAB") and d.equivalent("(c) (a) (b)", "C, A, B")
    assert not d.equivalent("C, A, B", "A, B, C")
    pytest.importorskip("reasoning_gym")
    from rlvr.tasks.reasoning_gym import ReasoningGymTask

    rg = ReasoningGymTask("basic_arithmetic", size=10, heldout_size=5)
    assert rg.equivalent("30.0", " 30") and rg.equivalent("$7$", "7") and not rg.equivalent("30", "31")


def test_arithmetic_commute_gives_many_valid_gold_traces():
    """commute=True writes each +/* step either way: every trace is a valid reduction with the right
    answer, the first is the default task's, and 4 operands give >= 10 traces on average."""
    import re
    import statistics

    from rlvr.tasks.arithmetic import ArithmeticTask, commuted_traces, step_forms

    assert step_forms("4*2=8") == ["4*2=8", "2*4=8"] and step_forms("3-1=2") == ["3-1=2"]
    assert step_forms("3+3=6") == ["3+3=6"]
    assert commuted_traces([["4*2=8", "3+8=11"]], 10) == [["4*2=8", "3+8=11"], ["4*2=8", "8+3=11"],
                                                          ["2*4=8", "3+8=11"], ["2*4=8", "8+3=11"]]
    plain = ArithmeticTask(min_operands=4, max_operands=4).problems("train", 200)
    task = ArithmeticTask(min_operands=4, max_operands=4, commute=True, max_solutions=64)
    probs = task.problems("train", 200)
    assert [p.prompt for p in probs] == [p.prompt for p in plain]
    assert all(p.solutions[0] == q.solutions[0] for p, q in zip(probs, plain))
    assert statistics.mean(len(p.solutions) for p in probs) >= 10
    for p in probs[:50]:
        assert len(set(p.solutions)) == len(p.solutions)
        for sol in p.solutions:
            assert task.verify(sol, p).correct
            for step in sol.split("\n")[0].split(";"):
                a, op, b, c = re.fullmatch(r"(\d+)([+*-])(\d+)=(\d+)", step).groups()
                assert {"+": int(a) + int(b), "*": int(a) * int(b), "-": int(a) - int(b)}[op] == int(c)


def test_arithmetic_tasks_with_the_same_knobs_share_one_pool_and_its_problems():
    import pickle

    from rlvr.tasks.arithmetic import ProblemPool

    a, b = ArithmeticTask(seed=7), ArithmeticTask(seed=7)
    assert a._pool is b._pool and a._pool is not ArithmeticTask(seed=8)._pool
    assert all(a._pool is not ArithmeticTask(seed=7, **knob)._pool for knob in ({"max_value": 8}, {"commute": True}))
    # the shared stream is the one a private pool draws, whichever task grew it first
    held = b.problems("heldout", 40)
    own = ProblemPool(a.name, 7, ArithmeticTask(seed=7)._sample, 0.15, 5000)
    assert a.problems("train") == own.take("train", None) and held == own.take("heldout", 40)
    copy = pickle.loads(pickle.dumps(a))  # a task still travels to worker processes
    assert copy.problems("heldout", 40) == held
