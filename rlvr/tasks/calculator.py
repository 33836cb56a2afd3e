"""The ``calculator`` task: arithmetic too long to do in the head, with a calculator tool.

Prompt ``T:37*48+91\\n`` (two-digit operands: products the tiny model cannot work out in its
head); gold episode ``<calc>37*48+91</calc><out>1867</out>\\nA:1867``: the policy writes the call,
the environment answers (the ``<out>...</out>`` part is environment tokens, never trained on),
the policy copies the result. Verified like :mod:`rlvr.tasks.arithmetic` (the last ``A:`` line).

``tool=False`` is the same task with the tool switched off (a control for "what does the tool add",
``rlvr reproduce tools``): the same problems and verifier, but no environment, so an episode is one
policy turn and whatever the policy writes after ``</calc>`` (its own ``<out>...</out>``) is its own
tokens, trained on and scored like the rest.

For the pretraining corpus the task's solutions are whole episodes (call, tool output, answer),
and :meth:`CalculatorTask.wrong_solution` writes the mistakes RL has to fix: a mistyped call
(the tool answers the wrong expression faithfully), a miscopied result, or no call and a guess.
"""

from __future__ import annotations

import random
import re

from rlvr.errors import UserError
from rlvr.tasks.arithmetic import (
    PooledTask,
    ProblemPool,
    check_frac,
    check_range,
    evaluate,
    int_verdict,
    numeric_equivalent,
)
from rlvr.tasks.base import Problem, Verdict
from rlvr.tasks.environment import DEFAULT_LIMITS, EpisodeLimits, ToolEnvironment
from rlvr.tasks.tool_calls import TagCalls

EXPRESSION = re.compile(r"[0-9]{1,6}(?:[+*-][0-9]{1,6}){0,7}")
"""What the calculator accepts: up to 8 non-negative integers of up to 6 digits joined by + - *."""


def calculate(expression: str) -> str:
    """The value of ``expression`` (integers, + - *, the usual precedence) as text; ValueError otherwise."""
    expression = expression.strip()
    if not EXPRESSION.fullmatch(expression):
        raise ValueError(f"not an expression of integers and + - *: {expression[:40]!r}")
    parts = re.split(r"([+*-])", expression)
    return str(evaluate([int(x) if i % 2 == 0 else x for i, x in enumerate(parts)]))


def episode_text(expression: str, answer: str) -> str:
    """The gold episode (policy and environment text) for ``expression`` with final ``answer``."""
    return f"<calc>{expression}</calc><out>{calculate(expression)}</out>\nA:{answer}"


def _change_digit(text: str, rng: random.Random) -> str:
    """``text`` with one digit replaced by another digit (never the same; a leading digit never by 0)."""
    spots = [i for i, ch in enumerate(text) if ch.isdigit()]
    i = rng.choice(spots)
    first = i == 0 or not text[i - 1].isdigit()
    choices = [d for d in "0123456789" if d != text[i] and not (first and d == "0")]
    return text[:i] + rng.choice(choices) + text[i + 1 :]


class CalculatorTask(PooledTask):
    """Expressions of ``min_operands..max_operands`` integers of ``digits`` digits with ``ops``, to be
    answered with the calculator tool (``<calc>expression</calc>``).

    Knobs: ``min_operands`` / ``max_operands`` (2..4, default 2..3), ``digits`` (1..3, default 2),
    ``ops`` (subset of "+*-", default "+*"), ``heldout_frac`` (default 0.15), ``pool_size`` (default
    5000), ``seed`` (default 0), ``tool`` (default true; false: the calculator is switched off and an
    episode is one policy turn, :attr:`uses_tools`).
    """

    name = "calculator"

    def __init__(self, min_operands: int = 2, max_operands: int = 3, digits: int = 2, ops: str = "+*",
                 heldout_frac: float = 0.15, pool_size: int = 5000, seed: int = 0, tool: bool = True) -> None:
        check_range("operands", min_operands, max_operands, 2, 4)
        check_range("digits", 1, digits, 1, 3)
        if not ops or set(ops) - set("+*-") or len(set(ops)) != len(ops):
            raise UserError(f"bad ops={ops!r}; use a non-empty subset of '+*-', e.g. '+*'")
        check_frac("heldout_frac", heldout_frac)
        if pool_size < 1:
            raise UserError(f"bad pool_size={pool_size!r}; use an integer >= 1")
        if not isinstance(tool, bool):
            raise UserError(f"bad tool={tool!r}; use true (the calculator answers calls) or false (no tool)")
        self.uses_tools = tool
        self.min_operands, self.max_operands, self.digits, self.ops = min_operands, max_operands, digits, ops
        self._pool = ProblemPool(self.name, seed, self._sample, heldout_frac, pool_size)

    def _sample(self, rng: random.Random) -> Problem | None:
        n = rng.randint(self.min_operands, self.max_operands)
        low, high = 10 ** (self.digits - 1), 10**self.digits - 1
        expression = str(rng.randint(low, high))
        for _ in range(n - 1):
            expression += rng.choice(self.ops) + str(rng.randint(low, high))
        answer = calculate(expression)
        if answer.startswith("-"):
            return None
        return Problem("", f"T:{expression}\n", answer, (episode_text(expression, answer),), {"operands": n})

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """right iff the last ``A:`` line is the value (tool output included in ``completion``: it
        holds no ``A:``); never raises."""
        return int_verdict(completion, int(problem.answer))

    def equivalent(self, a: str, b: str) -> bool:
        return numeric_equivalent(a, b)

    def environment(self, problem: Problem, limits: EpisodeLimits = DEFAULT_LIMITS) -> ToolEnvironment:
        """A fresh calculator for one episode."""
        return ToolEnvironment({"calc": calculate}, TagCalls(("calc",)), limits)

    def wrong_solution(self, problem: Problem, rng: random.Random) -> str:
        """A plausible wrong episode: a mistyped call (answered faithfully), a miscopied result, or
        no call and a guess near the value."""
        expression = problem.prompt.strip()[2:]
        r = rng.random()
        if r < 0.4:
            typo = _change_digit(expression, rng)
            value = calculate(typo)
            return episode_text(typo, value) if value != problem.answer else episode_text(typo, value + "1")
        if r < 0.8:
            return episode_text(expression, _change_digit(problem.answer, rng))
        return f"A:{_change_digit(problem.answer, rng)}"
