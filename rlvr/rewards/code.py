"""Unit-test rewards for model-written Python: :func:`score_code` (assert-style tests),
:func:`score_io` (stdin/stdout cases) and the TRL-signature :func:`code_reward`.

Both run the solution in the sandbox (:mod:`rlvr.rewards.sandbox`) and judge it where the solution
cannot reach (:mod:`rlvr.rewards.harness`): the tests, the comparison and the pass count never
enter the sandbox, and only plain data comes out of it. docs/sandbox.md lists what is defended.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.harness import run_io, run_tests
from rlvr.rewards.sandbox import LIMIT_KEYS, SandboxResult

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(completion: str) -> str:
    """The code in a completion: the last ```python (or ```py) block, else the last fenced
    block of any language, else the whole text. An unclosed final fence runs to the end."""
    blocks = _FENCE_RE.findall(completion)
    tagged = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    if tagged:
        return tagged[-1]
    return blocks[-1][1] if blocks else completion


def _check_limits(limits: dict) -> None:
    unknown = set(limits) - set(LIMIT_KEYS)
    if unknown:
        raise UserError(f"unknown sandbox limit(s) {sorted(unknown)}; use {', '.join(LIMIT_KEYS)}")


def _reward(result: SandboxResult, partial: bool) -> float:
    if not result.tests_total:
        return 0.0
    if partial:  # the harness already refuses a count past the total; clamped here too
        return min(max(result.tests_passed, 0), result.tests_total) / result.tests_total
    return float(result.tests_passed == result.tests_total and result.reason == "ok")


def score_code(completion: str, tests: str | Sequence[str], *, partial: bool = False, prefix: str = "",
               context: str = "", entry_points: Sequence[str] | None = None,
               **limits: Any) -> tuple[float, SandboxResult]:
    """Reward of ``completion`` against assert-style ``tests`` and the harness's result.

    The solution is ``prefix + extract_code(completion)`` (``prefix``: e.g. HumanEval's prompt,
    which the completion continues); it runs with ``__name__ == "solution"`` (an
    ``if __name__ == "__main__"`` block is skipped; stdin is empty). Each test (a string of
    statements; a single string is one test) runs in the trusted runner, after ``context``, with
    the solution's functions as proxies (:func:`rlvr.rewards.harness.run_tests`). Reward 1.0 if
    every test passes, else 0.0; with ``partial=True`` the fraction of tests that passed. A run
    that times out, crashes or ends early scores the tests it passed (0.0 without ``partial``).
    ``limits`` are :func:`rlvr.rewards.sandbox.run_sandboxed`'s keywords.
    """
    tests = [tests] if isinstance(tests, str) else list(tests)
    if not tests:
        raise UserError("score_code got no tests; pass at least one assert statement")
    _check_limits(limits)
    result = run_tests(prefix + extract_code(completion), tests, context=context, entry_points=entry_points,
                       **limits)
    return _reward(result, partial), result


def score_io(completion: str, cases: Sequence[tuple[str, str]], *, partial: bool = False,
             **limits: Any) -> tuple[float, SandboxResult]:
    """Reward of ``completion`` as a stdin/stdout program on ``(input, expected_output)`` cases.

    Each case is a fresh sandboxed run; outputs are compared after whitespace normalisation
    (:func:`rlvr.rewards.harness.normalise_output`) outside the sandbox. Stops at the first failing
    case; reward 1.0 if every case passes (``partial``: the share of cases passed before a failure).
    """
    cases = [(str(i), str(o)) for i, o in cases]
    if not cases:
        raise UserError("score_io got no cases; pass at least one (input, expected_output) pair")
    _check_limits(limits)
    result = run_io(extract_code(completion), cases, **limits)
    return _reward(result, partial), result


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
