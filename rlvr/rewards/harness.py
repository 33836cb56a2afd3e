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
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rlvr.rewards import plaindata
from rlvr.rewards.sandbox import SandboxResult, _interpreter, _killpg, check_limits, resolve_isolation, run_program

MAX_LINE = 1 << 20  # longest message (bytes) the runner reads from the server
REQ_FD, RSP_FD = 4, 3  # the server's ends: requests in, answers out
_STOP_REASONS = {"timeout", "cpu_limit", "memory", "output_limit", "crashed", "killed", "blocked"}
_CODEC = inspect.getsource(plaindata).split("from __future__ import annotations\n", 1)[1]

_SERVER = r'''
import json as _json, os as _os, sys as _sys, traceback as _tb
def _send(obj):
    data = (_json.dumps(obj, separators=(",", ":")) + "\n").encode()
    while data:
        data = data[_os.write(%(rsp)d, data):]
_g = {"__name__": "solution", "__builtins__": __builtins__}
_err = None
try:
    exec(compile(_SOLUTION, "solution.py", "exec"), _g)
except BaseException as _e:
    _err = f"{type(_e).__name__}: {_e}"[:300]
    _tb.print_exc()
_send({"names": sorted(k for k, v in list(_g.items()) if type(k) is str and callable(v)), "error": _err})
_rf = _os.fdopen(%(req)d, "rb")
while True:
    _line = _rf.readline()
    if not _line:
        break
    try:
        _req = _json.loads(_line)
        _value = _g[_req["fn"]](*from_wire(_req["args"]), **from_wire(_req["kwargs"]))
    except BaseException as _e:
        _send({"raised": type(_e).__name__, "msg": str(_e)[:200]})
        continue
    try:
        _send({"ok": to_wire(_value)})
    except BaseException as _e:
        _send({"bad": f"{type(_e).__name__}: {_e}"[:200]})
_sys.stdout.flush()
_os._exit(0)
'''

_RUNNER = r'''
import builtins, json, keyword, os, resource, sys
cfg = json.loads(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (cfg["memory"], cfg["memory"]))
resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu"], cfg["cpu"] + 1))
try:  # PR_SET_DUMPABLE = 4: no ptrace or /proc/<pid>/mem for processes of the same uid
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
except Exception:
    pass
payload = json.loads(sys.stdin.buffer.read().decode("utf-8"))
report_fd = os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
rsp = os.fdopen(cfg["rsp"], "rb")

class SolutionGone(Exception):
    """The solution server ended (or broke the protocol) before answering."""

class SolutionError(Exception):
    """The solution raised an exception that is not a builtin one."""

state = {"gone": None, "calls": 0}

def receive():
    if state["gone"]:
        raise SolutionGone(state["gone"])
    line = rsp.readline(cfg["max_line"] + 1)
    if not line or len(line) > cfg["max_line"] or not line.endswith(b"\n"):
        state["gone"] = "ended" if not line else "message too long"
        raise SolutionGone(state["gone"])
    try:
        msg = json.loads(line)
    except ValueError:
        msg = None
    if type(msg) is not dict or len(msg) not in (1, 2):
        state["gone"] = "broke the protocol"
        raise SolutionGone(state["gone"])
    return msg

def proxy(name):
    def call(*args, **kwargs):
        data = json.dumps({"fn": name, "args": to_wire(list(args)), "kwargs": to_wire(dict(kwargs))}) + "\n"
        state["calls"] += 1
        try:
            os.write(cfg["req"], data.encode())
        except OSError:
            state["gone"] = state["gone"] or "ended"
        msg = receive()
        if "ok" in msg:
            try:
                return from_wire(msg["ok"])
            except NotPlain as exc:
                raise SolutionError(f"{name} returned a malformed value: {exc}") from None
        if "bad" in msg:
            raise SolutionError(f"{name} returned a value that is not plain data: {str(msg['bad'])[:200]}")
        kind = msg.get("raised")
        exc = getattr(builtins, kind, None) if type(kind) is str else None
        text = f"{name} raised {str(kind)[:80]}: {str(msg.get('msg', ''))[:200]}"
        if isinstance(exc, type) and issubclass(exc, Exception) and not issubclass(exc, AssertionError):
            raise exc(text)
        raise SolutionError(text)
    call.__name__ = name
    return call

errors, passed = [], 0
try:
    hello = receive()
    names = hello.get("names") if type(hello.get("names")) is list else []
    if hello.get("error") is not None:
        errors.append(f"solution: {str(hello['error'])[:300]}")
except SolutionGone:
    names = []
ns = {"__name__": "__rlvr_tests__", "__builtins__": builtins}
try:
    exec(compile(payload["context"], "context.py", "exec"), ns)
    context_ok = True
except BaseException as exc:
    errors.append(f"context: {type(exc).__name__}: {exc}"[:300])
    context_ok = False
explicit = payload["entry_points"] is not None
for name in (payload["entry_points"] if explicit else names):
    if (type(name) is str and name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")
            and not hasattr(builtins, name) and (explicit or name not in ns)):
        ns[name] = proxy(name)
for i, test in enumerate(payload["tests"]):
    if not context_ok:
        break
    try:
        exec(compile(test, f"test_{i}.py", "exec"), ns)
        passed += 1
    except BaseException as exc:
        if len(errors) < 5:
            errors.append(f"test {i}: {type(exc).__name__}: {exc}"[:300])
report = {"passed": passed, "total": len(payload["tests"]), "errors": errors, "gone": state["gone"],
          "calls": state["calls"], "context_ok": context_ok}
os.write(report_fd, (json.dumps(report) + "\n").encode())
os._exit(0)
'''


def _runner_env(cwd: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": cwd, "TMPDIR": cwd, "LANG": "C.UTF-8"}


def _stop(proc: subprocess.Popen) -> None:
    """SIGKILL the runner's process group (:func:`rlvr.rewards.sandbox._killpg`) and reap it."""
    _killpg(proc.pid)
    proc.wait()


def _parse_report(raw: bytes) -> dict | None:
    try:
        got = json.loads(raw.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    ok = isinstance(got, dict) and isinstance(got.get("passed"), int) and isinstance(got.get("total"), int)
    return got if ok else None


def _reason(server: SandboxResult, report: dict | None) -> str:
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
    ``blocked``) or ``sandbox_error``; ``tests_passed``/``tests_total`` count the tests.
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
    payload = json.dumps({"context": context, "tests": tests,
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
        program = f"_SOLUTION = {solution!r}\n{_CODEC}{_SERVER % {'req': REQ_FD, 'rsp': RSP_FD}}"
        fds, req_r, rsp_w = {REQ_FD: req_r, RSP_FD: rsp_w}, None, None  # run_program closes them
        server = run_program(program, iso, fds=fds, done=lambda: runner.poll() is not None, **lim)
        left = max(0.5, lim["timeout_s"] + 1.0 - (time.monotonic() - t0))
        try:
            raw = runner.communicate(timeout=left)[0]
        except subprocess.TimeoutExpired:
            _stop(runner)
            raw = b""
        report = _parse_report(raw)
    except BaseException:
        if runner is not None:
            _stop(runner)
        raise
    finally:
        for fd in (req_r, rsp_w):
            if fd is not None:
                os.close(fd)
        shutil.rmtree(work, ignore_errors=True)
    reason = _reason(server, report)
    errors = "\n".join(report.get("errors", [])) if report else "the test runner did not report"
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

