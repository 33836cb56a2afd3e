"""Unit tests the solution cannot fool: two processes, and only plain data between them.

``run_tests(solution, tests)`` starts two processes joined by two pipes:

- the **solution server**, inside the sandbox (:func:`rlvr.rewards.sandbox.run_program`, every
  isolation backend and limit applies): it runs the solution's code, reports the names of the
  callables it defined, then answers call requests ``(name, args, kwargs)`` with the return value
  reduced to plain data (:mod:`rlvr.rewards.plaindata`: exact built-in types only), or with the
  name of the exception raised. It never sees a test, an expected value or a verdict.
- the **test runner**, a separate resource-limited interpreter outside the sandbox, started before
  the server and never running solution code: it runs the (trusted) problem context and the
  tests, in which each solution function is a proxy that sends the call to the server and
  decodes the answer into fresh built-in values. ``assert``, ``==``, ``AssertionError``, the
  builtins, the frames and the pass count all live here; it reports ``{passed, total}`` on a pipe
  only the caller holds. It is made non-dumpable (no ptrace, no ``/proc/<pid>/mem``).

The caller believes a report only from a runner that exited 0 and wrote exactly one line, carrying
this run's secret nonce and a pass count in ``0..len(tests)``; anything else is ``tampered`` (the
fallback's only way to reach the runner: docs/sandbox.md). Every line the solution writes is decoded
in bounded time and depth (:mod:`rlvr.rewards.plaindata`), a StopIteration it raises is a solution
error (not the end of an ``all(map(...))``), and a NaN or infinite float it returns fails the test
unless some test names ``inf``, ``nan``, ``isinf``, ``isnan`` or ``isfinite``.

So an object whose ``__eq__`` is always true, an ``int`` subclass, a patched builtin or
``AssertionError``, an early ``sys.exit``/``os._exit``, a forged report on any descriptor, or a
look at the harness's frames cannot turn a failing test into a pass: the first two cannot be sent,
the rest act on a process that holds no verdict. What is and is not defended: docs/sandbox.md.

Only calls are proxied: tests call solution functions with plain-data arguments and compare
plain-data results (the form of HumanEval, MBPP and programming-by-example tests). A solution's
classes, generators, in-place mutation of arguments and module constants are not visible to tests.
Names that shadow a builtin (``len``, ``abs``, ...) are never proxied: the tests' builtins are
their own.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rlvr.rewards import plaindata
from rlvr.rewards.sandbox import (
    SandboxResult,
    _interpreter,
    _killpg,
    check_limits,
    program_text,
    resolve_isolation,
    run_program,
)

MAX_LINE = 1 << 20  # longest message (bytes) the runner reads from the server
REQ_FD, RSP_FD = 4, 3  # the server's ends: requests in, answers out
_STOP_REASONS = {"timeout", "cpu_limit", "memory", "output_limit", "crashed", "killed", "blocked"}
_NON_FINITE = re.compile(r"\b(?:inf|infinity|nan|isinf|isnan|isfinite)\b", re.IGNORECASE)
_CODEC = inspect.getsource(plaindata).split("from __future__ import annotations\n", 1)[1]

# The two programs (sandbox_programs/): the solution server runs inside the sandbox after the lines
# ``_SOLUTION = <source>`` and ``_REQ_FD, _RSP_FD = 4, 3`` and the plain-data codec; the test runner
# runs outside it after the codec (``python -I -S -c <codec + runner> CONFIG_JSON``).
_SERVER = program_text("server")
_RUNNER = program_text("runner")


def _runner_env(cwd: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": cwd, "TMPDIR": cwd, "LANG": "C.UTF-8"}


def _stop(proc: subprocess.Popen) -> None:
    """SIGKILL the runner's process group (:func:`rlvr.rewards.sandbox._killpg`) and reap it."""
    _killpg(proc.pid)
    proc.wait()


def _read_report(raw: bytes, returncode: int | None, nonce: str, total: int) -> tuple[dict | None, bool]:
    """``(report, tampered)`` from the runner's output and exit status (None: we stopped it at the
    deadline). A report counts only from a runner that exited 0 and wrote exactly one JSON line
    with this run's ``nonce``, ``total`` tests and ``0 <= passed <= total``. No report, not tampered:
    stopped by us, or exited > 0 (the runner's own error). Tampered: killed by a signal we did not
    send, or any other output (a second line, a forged or out-of-range count, a wrong nonce)."""
    if returncode is None or returncode > 0:
        return None, False
    try:
        report = json.loads(raw) if returncode == 0 and raw.count(b"\n") == 1 and raw.endswith(b"\n") else None
    except ValueError:
        report = None
    good = (type(report) is dict and report.get("nonce") == nonce and report.get("total") == total
            and type(report.get("passed")) is int and 0 <= report["passed"] <= total
            and type(report.get("errors")) is list)
    return (report, False) if good else (None, True)


def _reason(server: SandboxResult, report: dict | None, tampered: bool) -> str:
    if tampered:
        return "tampered"
    if report is None:
        return server.reason if server.reason in _STOP_REASONS else "sandbox_error"
    if not report.get("context_ok", True):
        return "sandbox_error"
    if report["passed"] == report["total"]:
        return "ok"
    if server.reason in _STOP_REASONS:
        return server.reason
    return "incomplete" if report.get("gone") else "failed"


def run_tests(solution: str, tests: Sequence[str], *, context: str = "",
              entry_points: Sequence[str] | None = None, isolation: str = "auto",
              **limits: Any) -> SandboxResult:
    """Run ``tests`` (Python statements, e.g. ``assert add(2, 3) == 5``) against ``solution``.

    ``context`` is trusted problem code run before the tests in the runner (helpers the tests
    use, e.g. HumanEval's prompt). ``entry_points`` names the solution functions the tests call
    (default: every callable the solution defines that neither a builtin nor the context
    defines). ``limits`` are :func:`rlvr.rewards.sandbox.check_limits`' keywords; ``timeout_s``
    bounds the whole run. The result's ``reason``: ``ok`` (every test passed), ``failed``,
    ``incomplete`` (the solution's process ended before the tests did), a stop reason of the
    sandbox (``timeout``, ``cpu_limit``, ``memory``, ``output_limit``, ``crashed``, ``killed``,
    ``blocked``), ``tampered`` (the runner was killed or its report forged: the fallback only) or
    ``sandbox_error``; ``tests_passed``/``tests_total`` count the tests (``0 <= passed <= total``).
    """
    tests = list(tests)
    lim = check_limits(**limits)
    iso = resolve_isolation(isolation)
    t0 = time.monotonic()
    req_r, req_w = os.pipe()
    rsp_r, rsp_w = os.pipe()
    work = tempfile.mkdtemp(prefix="rlvr-tests-")
    cfg = {"req": req_w, "rsp": rsp_r, "max_line": MAX_LINE, "cpu": math.ceil(lim["timeout_s"]) + 1,
           "memory": max(lim["memory_mb"], 1024) << 20}
    nonce = secrets.token_hex(16)  # the runner's report must carry it; the solution never sees it
    payload = json.dumps({"context": context, "tests": tests, "nonce": nonce,
                          "finite_only": not any(_NON_FINITE.search(test) for test in tests),
                          "entry_points": None if entry_points is None else list(entry_points)}).encode()
    runner = None
    try:
        try:
            argv = [_interpreter(), "-I", "-S", "-X", "utf8", "-c", _CODEC + _RUNNER, json.dumps(cfg)]
            runner = subprocess.Popen(argv,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      cwd=work, env=_runner_env(work), close_fds=True, start_new_session=True,
                                      pass_fds=(req_w, rsp_r))
        finally:
            os.close(req_w)
            os.close(rsp_r)
        runner.stdin.write(payload)  # the runner reads all of it before anything else
        runner.stdin.close()
        runner.stdin = None  # communicate() below must not flush it
        program = f"_SOLUTION = {solution!r}\n_REQ_FD, _RSP_FD = {REQ_FD}, {RSP_FD}\n{_CODEC}{_SERVER}"
        fds, req_r, rsp_w = {REQ_FD: req_r, RSP_FD: rsp_w}, None, None  # run_program closes them
        server = run_program(program, iso, fds=fds, done=lambda: runner.poll() is not None, **lim)
        left = max(0.5, lim["timeout_s"] + 1.0 - (time.monotonic() - t0))
        try:
            raw, returncode = runner.communicate(timeout=left)[0], runner.returncode
        except subprocess.TimeoutExpired:
            _stop(runner)
            raw, returncode = b"", None
        report, tampered = _read_report(raw, returncode, nonce, len(tests))
    except BaseException:
        if runner is not None:
            _stop(runner)
        raise
    finally:
        for fd in (req_r, rsp_w):
            if fd is not None:
                os.close(fd)
        shutil.rmtree(work, ignore_errors=True)
    reason = _reason(server, report, tampered)
    errors = ("\n".join(map(str, report["errors"])) if report else
              "the test runner was killed or its report forged" if tampered else "the test runner did not report")
    stderr = (server.stderr + ("\n" if server.stderr else "") + errors)[-8000:]
    return replace(server, ok=reason == "ok", reason=reason, stderr=stderr, wall_s=time.monotonic() - t0,
                   tests_passed=report["passed"] if report else 0, tests_total=len(tests))


def normalise_output(text: str) -> list[str]:
    """Whitespace-normalised output: lines stripped, runs of blanks collapsed, trailing empty lines dropped."""
    lines = [" ".join(line.split()) for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def run_io(solution: str, cases: Sequence[tuple[str, str]], *, isolation: str = "auto",
           **limits: Any) -> SandboxResult:
    """Run ``solution`` as a program once per ``(stdin, expected_stdout)`` case (the competitive
    programming form); a case passes when its stdout equals the expected output after
    :func:`normalise_output`. The expected outputs never enter the sandbox: the comparison runs here.
    Stops at the first case that does not pass; ``tests_passed`` counts the cases passed before it.
    """
    lim = check_limits(**limits)
    iso = resolve_isolation(isolation)
    t0, passed, last = time.monotonic(), 0, None
    for stdin, expected in cases:
        last = run_program(solution, iso, stdin=stdin.encode("utf-8"), **lim)
        if last.reason != "ok" or normalise_output(last.stdout) != normalise_output(expected):
            reason = last.reason if last.reason != "ok" else "failed"
            return replace(last, ok=False, reason=reason, wall_s=time.monotonic() - t0, tests_passed=passed,
                           tests_total=len(cases))
        passed += 1
    if last is None:
        raise ValueError("run_io needs at least one case")
    return replace(last, ok=True, reason="ok", wall_s=time.monotonic() - t0, tests_passed=passed,
                   tests_total=len(cases))

