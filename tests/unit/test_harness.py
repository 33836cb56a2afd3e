"""The two-process test harness: what a test can express and how results are classified."""

from __future__ import annotations

import sys

import pytest

from rlvr.rewards.code import score_code, score_io
from rlvr.rewards.harness import normalise_output, run_tests

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


def test_plain_values_of_every_kind_cross_and_compare_with_builtin_semantics() -> None:
    sol = ("def f(x, *, scale=1):\n    return {'n': x * scale, 't': (x, 'a'), 's': {1, 2}, 'b': b'z', 'f': 0.5}\n"
           "def g(xs):\n    return sorted(xs)\n")
    tests = ["assert f(2, scale=3) == {'n': 6, 't': (2, 'a'), 's': {2, 1}, 'b': b'z', 'f': 0.5}",
             "assert g([3, 1, 2]) == [1, 2, 3] and type(g([1])) is list",
             "assert f(1)['t'] != [1, 'a']"]  # a tuple stays a tuple
    r = run_tests(sol, tests, timeout_s=10)
    assert (r.reason, r.tests_passed, r.tests_total) == ("ok", 3, 3), r.stderr


def test_builtin_exceptions_cross_as_themselves_others_as_failures() -> None:
    sol = "def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n"
    tests = ["try:\n    f(-1)\n    raise AssertionError('no raise')\nexcept ValueError:\n    pass",
             "assert f(2) == 2"]
    assert run_tests(sol, tests, timeout_s=10).reason == "ok"
    sol2 = "class Oops(Exception):\n    pass\ndef f(x):\n    raise Oops()\n"
    r = run_tests(sol2, ["try:\n    f(1)\nexcept Exception as e:\n    assert 'Oops' in str(e)"], timeout_s=10)
    assert r.reason == "ok", r.stderr  # a foreign exception arrives as SolutionError naming it


def test_context_helpers_are_trusted_and_entry_points_override_stubs() -> None:
    context = "def poly(xs, x):\n    return sum(c * x ** i for i, c in enumerate(xs))\ndef root(xs):\n    '''stub'''\n"
    sol = "def poly(xs, x):\n    return 0\ndef root(xs):\n    return 1.0\n"  # a cheating poly is ignored
    tests = ["assert abs(poly([-1, 1], root([-1, 1]))) < 1e-9", "assert abs(poly([-2, 1], root([-2, 1]))) < 1e-9"]
    r = run_tests(sol, tests, context=context, entry_points=["root"], timeout_s=10)
    assert (r.reason, r.tests_passed) == ("failed", 1), r.stderr  # root is right only for the first


def test_solution_names_shadowing_builtins_are_not_proxied() -> None:
    r = run_tests("def len(x):\n    return 99\ndef f():\n    return [1]\n", ["assert len(f()) == 1"], timeout_s=10)
    assert r.reason == "ok", r.stderr


def test_a_bad_context_is_a_harness_error_not_a_failure() -> None:
    r = run_tests("def f():\n    return 1\n", ["assert f() == 1"], context="raise RuntimeError('x')", timeout_s=10)
    assert r.reason == "sandbox_error" and r.tests_passed == 0 and "context" in r.stderr


def test_the_server_stops_once_the_runner_is_done() -> None:
    sol = "import threading, time\nthreading.Thread(target=time.sleep, args=(30,)).start()\ndef f():\n    return 1\n"
    r = run_tests(sol, ["assert f() == 1"], timeout_s=8)
    assert r.reason == "ok" and r.wall_s < 4, (r.reason, r.wall_s)


def test_partial_credit_counts_tests() -> None:
    got, res = score_code("def f(x):\n    return x if x < 3 else 0\n", [f"assert f({i}) == {i}" for i in range(5)],
                          partial=True, timeout_s=10)
    assert got == pytest.approx(3 / 5) and res.reason == "failed"


def test_io_cases_compare_normalised_output_outside_the_sandbox() -> None:
    sol = "n = int(input())\nprint(*range(n))   \nprint()\n"
    reward, res = score_io(sol, [("3", "0 1 2"), ("1", "0\n\n\n")], timeout_s=10)
    assert (reward, res.reason, res.tests_passed) == (1.0, "ok", 2), res.stderr
    reward, res = score_io(sol, [("3", "0 1 2"), ("2", "0 1 2")], partial=True, timeout_s=10)
    assert (reward, res.reason, res.tests_passed) == (0.5, "failed", 1)
    reward, res = score_io("print('YES')\nimport sys\nsys.exit(1)", [("", "YES")], timeout_s=10)
    assert (reward, res.reason) == (0.0, "error")  # the output is right but the program failed


def test_normalise_output() -> None:
    assert normalise_output("a  b \r\n c\n\n") == ["a b", "c"]
    assert normalise_output("") == []
