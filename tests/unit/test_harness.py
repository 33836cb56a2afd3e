"""The two-process test harness: what a test can express and how results are classified."""

from __future__ import annotations

import json
import sys

import pytest

from rlvr.rewards import sandbox as sbx
from rlvr.rewards.code import score_code, score_io
from rlvr.rewards.harness import _read_report, normalise_output, run_tests
from tests.unit.sandbox_host import forge_report

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")
TESTS3 = ["assert add(2, 3) == 5", "assert add(10, -4) == 6", "assert add(7, 7) == 14"]


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


def test_a_report_counts_only_from_a_clean_runner_with_one_line_and_the_nonce() -> None:
    good = b'{"passed": 2, "total": 3, "errors": [], "nonce": "n1"}\n'
    assert _read_report(good, 0, "n1", 3) == (json.loads(good), False)
    assert _read_report(b"", None, "n1", 3) == (None, False)  # stopped by us at the deadline
    assert _read_report(b"Traceback", 1, "n1", 3) == (None, False)  # the runner's own error
    passed = [good.replace(b'"passed": 2', b'"passed": ' + n) for n in (b"333333", b"-1", b"2.5", b"true")]
    tampered = [(good, -9), (good.replace(b"n1", b"n2"), 0), (good + good, 0), (b"{}\n" + good, 0),
                *((raw, 0) for raw in passed), (good.replace(b'"total": 3', b'"total": 1'), 0), (good.rstrip(), 0),
                (b"not json\n", 0)]
    for raw, returncode in tampered:  # b87d620 read the last line of any of these as the verdict
        assert _read_report(raw, returncode, "n1", 3) == (None, True), raw


def test_with_the_kernel_guard_off_a_forged_report_is_still_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without seccomp: the fallback's solution can then reach the runner (as root without
    the uid drop, as here) or kill it (same uid); the report check alone must refuse the verdict."""
    unguarded = sbx._BOOT.replace("    _harden(os.getpid())\n", "")
    assert unguarded != sbx._BOOT
    monkeypatch.setattr(sbx, "_BOOT", unguarded)
    for passed in (3, 333333):
        reward, res = score_code(forge_report("add", passed=passed, total=3), TESTS3, isolation="none",
                                 partial=True, timeout_s=5)
        assert reward == 0.0 and res.reason in ("tampered", "failed"), (res.reason, res.stderr[-300:])
        assert res.tests_passed == 0


def test_stop_iteration_from_the_solution_is_a_solution_error() -> None:
    sol = "def nxt(xs):\n    raise StopIteration\n"
    r = run_tests(sol, ["assert all(map(nxt, [[1], [2]]))", "assert [nxt(x) for x in [[1]]] == [1]"], timeout_s=10)
    assert (r.reason, r.tests_passed) == ("failed", 0), r.stderr
    assert "SolutionError: nxt raised StopIteration" in r.stderr


def test_non_finite_floats_fail_unless_a_test_names_them() -> None:
    sol = "def f(x):\n    return [x / 2, float(x) * 1e308 * 10]\n"
    assert run_tests(sol, ["assert f(2)[0] == 1.0"], timeout_s=10).reason == "failed"  # the inf anywhere fails
    named = ["assert f(2) == [1.0, float('inf')]", "import math\nassert math.isinf(f(1)[1])"]
    assert run_tests(sol, named, timeout_s=10).reason == "ok"
    nan = "def g():\n    return float('nan')\n"
    assert run_tests(nan, ["import math\nassert math.isnan(g())"], timeout_s=10).reason == "ok"
    assert run_tests(nan, ["assert not g() > 0"], timeout_s=10).reason == "failed"


def test_every_line_the_solution_writes_is_decoded_in_bounded_time() -> None:
    """Deep, huge-int and colliding-hash answers are protocol breaks or malformed values, at once."""
    answers = {"b'[' * 200000": "incomplete", "b'{\"ok\": ' + b'[' * 900 + b']' * 900 + b'}'": "incomplete",
               "b'{\"ok\": ' + b'9' * 5000 + b'}'": "incomplete",
               "('{\"ok\": {\"d\": [' + ','.join(f'[{7 + i * ((1 << 61) - 1)}, 0]' for i in range(30000)) + ']}}')"
               ".encode()": "failed"}
    for answer, reason in answers.items():
        sol = (f"import os\nos.write(3, b'{{\"names\": [\"f\"], \"error\": null}}\\n')\n_r = os.fdopen(4, 'rb')\n"
               f"while _r.readline():\n    os.write(3, {answer} + b'\\n')\n")
        r = run_tests(sol, ["assert f(1) == 1", "assert f(2) == 2"], timeout_s=10)
        assert r.reason == reason and r.wall_s < 3, (answer[:40], r.reason, r.wall_s, r.stderr[-300:])
