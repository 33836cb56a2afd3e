"""Unit-test reward for model-written Python, run in the sandbox of :mod:`rlvr.rewards.sandbox`.

The test harness of :func:`score_code` runs tests in the same interpreter
as the solution, so a solution that introspects the harness's frames, or returns objects
whose ``__eq__`` is always true, can fake a pass; it does defend against exiting early
(``sys.exit``/``os._exit`` before the tests), swallowing test failures, and printing fake
success (results travel on a private pipe with a per-run nonce).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.sandbox import LIMIT_KEYS, SandboxResult, check_limits, resolve_isolation, run_program

# Runs the solution, then each test in its namespace; reports on fd 3 with the nonce read from stdin.
_HARNESS = r'''
import json as _json, os as _os, sys as _sys, traceback as _tb
def _rlvr_harness(solution, tests):
    nonce = _os.read(0, 64).decode()
    null = _os.open(_os.devnull, _os.O_RDONLY)
    _os.dup2(null, 0)
    g = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        exec(compile(solution, "solution.py", "exec"), g)
    except BaseException:
        _tb.print_exc()
    passed = 0
    for i, test in enumerate(tests):
        try:
            exec(compile(test, f"test_{i}.py", "exec"), g)
            passed += 1
        except BaseException:
            _tb.print_exc()
    _sys.stdout.flush(); _sys.stderr.flush()
    report = _json.dumps({"nonce": nonce, "passed": passed, "total": len(tests)})
    _os.write(3, ("\n" + report + "\n").encode())
    _os._exit(0 if passed == len(tests) else 1)
'''

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(completion: str) -> str:
    """The code in a completion: the last ```python (or ```py) block, else the last fenced
    block of any language, else the whole text. An unclosed final fence runs to the end."""
    blocks = _FENCE_RE.findall(completion)
    tagged = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    if tagged:
        return tagged[-1]
    return blocks[-1][1] if blocks else completion


def score_code(completion: str, tests: str | Sequence[str], *, partial: bool = False,
               **limits: Any) -> tuple[float, SandboxResult]:
    """Reward of ``completion`` against ``tests`` and the sandbox result.

    The solution (:func:`extract_code`) runs with ``__name__ == "solution"`` (its
    ``if __name__ == "__main__"`` block is skipped; stdin is empty); then each test (a
    string of statements, typically asserts; a single string is one test) runs in the
    solution's namespace. Reward 1.0 if every test passes, else 0.0; with
    ``partial=True`` the fraction of tests that passed. A run that times out, crashes or
    ends before reporting scores 0.0. ``limits`` are :func:`run_sandboxed`'s keywords.
    """
    tests = [tests] if isinstance(tests, str) else list(tests)
    if not tests:
        raise UserError("score_code got no tests; pass at least one assert statement")
    unknown = set(limits) - set(LIMIT_KEYS)
    if unknown:
        raise UserError(f"unknown sandbox limit(s) {sorted(unknown)}; use {', '.join(LIMIT_KEYS)}")
    nonce = secrets.token_hex(16)
    program = f"{_HARNESS}\n_rlvr_harness({extract_code(completion)!r}, {tests!r})\n"
    kw = check_limits(**{k: v for k, v in limits.items() if k != "isolation"})
    result = run_program(program, resolve_isolation(limits.get("isolation", "auto")), stdin=nonce.encode(),
                  nonce=nonce, **kw)
    if result.tests_total is None:
        return 0.0, result
    if partial:
        return result.tests_passed / result.tests_total, result
    return float(result.tests_passed == result.tests_total), result


def _text(completion: Any) -> str:
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return completion if isinstance(completion, str) else str(completion)


def code_reward(prompts: list, completions: list, tests: list, **kwargs: Any) -> list[float]:
    """TRL-signature reward: ``score_code`` of each completion against its ``tests`` column.

    Extra columns are ignored, except sandbox limits (:data:`LIMIT_KEYS`), ``partial``
    and ``max_workers`` (parallel sandboxes, default 4), which are passed through.
    """
    if len(tests) != len(completions):
        raise UserError(f"code_reward got {len(completions)} completions but {len(tests)} tests; "
                        "give one tests entry per completion")
    limits = {k: kwargs[k] for k in LIMIT_KEYS if k in kwargs}
    partial = bool(kwargs.get("partial", False))
    with ThreadPoolExecutor(max_workers=int(kwargs.get("max_workers", 4))) as pool:
        futures = [pool.submit(score_code, _text(c), t, partial=partial, **limits)
                   for c, t in zip(completions, tests)]
        return [f.result()[0] for f in futures]
