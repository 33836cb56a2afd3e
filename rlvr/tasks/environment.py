"""Environments for multi-turn episodes: the policy writes, calls a tool, reads its output, continues.

An episode of problem p: ``reset(p)`` gives the first observation (text appended to the prompt,
"" for none); then turns: the policy writes until a tool call closes (one of ``stop_strings``),
an end of sequence or a limit; ``respond(turn_text)`` turns the call into an :class:`Observation`
(the tool's output, written back in the call format) or None (no call: the episode is over).
The sampler (:mod:`rlvr.rollout.episodes`) runs the loop; the task's verifier scores the whole
episode's text.

A task is a tool task when it has ``environment(problem, limits) -> environment`` and does not set
``uses_tools = False`` (a tool task with its tools switched off, e.g. ``calculator`` with
``tool: false``, runs single-turn); any object with
``reset``, ``stop_strings`` and ``respond`` is an environment. :class:`ToolEnvironment` is the one
every built-in and TRL-style task uses: a dict of tool functions and a call format
(:mod:`rlvr.tasks.tool_calls`). Tool failures are observations, never crashes: a tool that raises
gives ``error: <Type>: <message>``, one that runs past ``tool_timeout_s`` gives ``error: timed
out`` (the call runs in a daemon thread, left behind: Python cannot kill a thread, so a tool that
hangs keeps its thread until the process ends), and an output longer than
``max_observation_chars`` is cut (``...[N more chars]``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlvr.tasks.tool_calls import BadCall, ToolCall
from rlvr.types import Problem


@dataclass(frozen=True)
class EpisodeLimits:
    """The bounds of one episode (``sampling.*`` fields of the same names). The total token budget is
    ``sampling.max_new_tokens``: policy and environment tokens together."""

    max_turns: int = 4  # policy turns per episode
    max_turn_tokens: int = 0  # tokens of one policy turn (0 = the total budget)
    tool_timeout_s: float = 5.0  # seconds one tool call may run
    max_observation_chars: int = 256  # longer tool outputs are cut


DEFAULT_LIMITS = EpisodeLimits()


@dataclass(frozen=True)
class Observation:
    """What the environment answers one turn: ``text`` (appended to the episode as environment
    tokens), whether the call ``failed`` (raised, timed out, unknown tool, unreadable call) and
    whether the environment ends the episode (``done``). ``content`` is the tool's output before the
    call format wrapped it into ``text`` and ``tool`` the tool's name: a tokenizer with a chat
    template renders them as a ``tool`` message of its own (None: write ``text`` as it is)."""

    text: str
    failed: bool = False
    done: bool = False
    content: str | None = field(default=None, compare=False)  # a rendering hint: equal observations, equal text
    tool: str = field(default="", compare=False)


def truncate(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, saying how many were dropped."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"...[{len(text) - max_chars} more chars]"


def call_tool(fn: Callable, arguments: dict | str, timeout_s: float, max_chars: int) -> tuple[str, bool]:
    """Run ``fn`` on ``arguments`` (keyword arguments, or one positional string) -> (output text,
    failed). Bounded: at most ``timeout_s`` seconds (in a daemon thread), at most ``max_chars``
    characters of output; an exception becomes ``error: <Type>: <message>``."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(**arguments) if isinstance(arguments, dict) else fn(arguments)
        except BaseException as e:  # noqa: BLE001 - any failure of the user's tool is an observation
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True, name="rlvr-tool")
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return f"error: timed out after {timeout_s:g}s", True
    if "error" in box:
        e = box["error"]
        return truncate(f"error: {type(e).__name__}: {e}", max_chars), True
    value = box.get("value")
    try:
        text = value if isinstance(value, str) else "" if value is None else str(value)
    except Exception as e:  # noqa: BLE001 - a result whose __str__ raises
        return f"error: the result cannot be shown ({type(e).__name__})", True
    return truncate(text, max_chars), False


class ToolEnvironment:
    """An environment of named tool functions read through a call format.

    tools: name -> callable; calls: a call format (:mod:`rlvr.tasks.tool_calls`); reset: called
    with the problem at :meth:`reset`, returns the first observation (str or None); limits: the
    tool timeout and output cap."""

    def __init__(self, tools: dict[str, Callable], calls, limits: EpisodeLimits = DEFAULT_LIMITS,
                 reset: Callable[[Problem], str | None] | None = None):
        self.tools, self.calls, self.limits, self._reset = dict(tools), calls, limits, reset
        self.stop_strings: tuple[str, ...] = tuple(calls.stop_strings)

    def reset(self, problem: Problem) -> str:
        if self._reset is None:
            return ""
        first = self._reset(problem)
        return "" if first is None else str(first)

    def respond(self, turn: str) -> Observation | None:
        """The observation for a turn that ends with a tool call; None when it ends with none."""
        try:
            call = self.calls.parse(turn)
        except BadCall as e:
            return Observation(self.calls.result(f"error: {e}"), failed=True, content=f"error: {e}")
        if call is None:
            return None
        return self.step(call)

    def observation_spans(self, text: str) -> list[list[int]]:
        """[start, end) character spans of this environment's results in a written episode ``text``."""
        return self.calls.observation_spans(text)

    def step(self, call: ToolCall) -> Observation:
        """Run one parsed call; an unknown tool or a failing tool is a failed observation."""
        fn = self.tools.get(call.name)
        if fn is None:
            text, failed = f"error: unknown tool {call.name!r}; tools: {', '.join(sorted(self.tools))}", True
        else:
            text, failed = call_tool(fn, call.arguments, self.limits.tool_timeout_s, self.limits.max_observation_chars)
        return Observation(self.calls.result(text), failed=failed, content=text, tool=call.name)


def is_tool_task(task: Any) -> bool:
    """Whether ``task`` runs multi-turn episodes (it has ``environment(problem, limits)`` and has not
    switched its tools off: ``uses_tools`` False)."""
    return callable(getattr(task, "environment", None)) and getattr(task, "uses_tools", True)


def environments_for(task: Any, problems: list[Problem], params: Any) -> list | None:
    """One fresh environment per row of ``problems`` for a tool task, bounded by ``params.episode``
    (:class:`rlvr.rollout.sample.SampleParams`) or ``params`` itself (EpisodeLimits); None for a
    single-turn task."""
    if not is_tool_task(task):
        return None
    limits = params if isinstance(params, EpisodeLimits) else params.episode
    return [task.environment(problem, limits) for problem in problems]


def written_env_spans(task: Any, problem: Problem, text: str) -> list[list[int]]:
    """The environment's [start, end) character spans in ``text``, an episode written out whole (a gold
    solution of a tool task): found by the environment's ``observation_spans`` when it has one; []
    for a single-turn task or an environment that cannot find them. Sampled episodes need none of
    this: the sampler records their spans (``env_spans`` of a samples row)."""
    if not is_tool_task(task):
        return []
    find = getattr(task.environment(problem, DEFAULT_LIMITS), "observation_spans", None)
    return find(text) if callable(find) else []
