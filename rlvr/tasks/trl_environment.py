"""A TRL-style environment class as an rlvr tool task, unchanged.

TRL's ``GRPOTrainer(environment_factory=Class)`` takes a class built with no arguments per
rollout, whose ``reset(**kwargs)`` gets the dataset row's columns (and may return text appended to
the prompt) and whose other public methods are the tools. ``task.name=path/to/env.py:Class``
loads such a class (:func:`rlvr.tasks.registry.load_ref` tells it from a task: it has ``reset`` and
no ``problems`` / ``verify``) and wraps it here: the problems and the verifier come from a source
task (``task.knobs.source``, default ``jsonl``, with ``task.knobs.source_knobs``), tool calls are
read in ``task.knobs.calls`` format (``json``: Hermes ``<tool_call>``, TRL's and the chat
templates'; ``tag``: ``<name>argument</name>``). See docs/tools.md for what maps across from TRL,
verl and verifiers.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from rlvr.errors import UserError
from rlvr.tasks.environment import DEFAULT_LIMITS, EpisodeLimits, ToolEnvironment
from rlvr.tasks.tool_calls import CALL_FORMATS, JsonCalls, TagCalls
from rlvr.types import Problem, Verdict, default_equivalent


def is_environment_class(obj: Any) -> bool:
    """Whether ``obj`` is a TRL-style environment class: ``reset`` and no ``problems`` / ``verify``."""
    return inspect.isclass(obj) and callable(getattr(obj, "reset", None)) and \
        not (callable(getattr(obj, "problems", None)) and callable(getattr(obj, "verify", None)))


def public_tools(instance: Any) -> dict[str, Callable]:
    """The tools of an environment instance: its public methods other than ``reset`` (TRL's rule)."""
    tools = {}
    for name, member in inspect.getmembers(type(instance)):
        if name.startswith("_") or name == "reset" or not inspect.isfunction(member):
            continue
        tools[name] = getattr(instance, name)
    return tools


def reset_arguments(reset: Callable, problem: Problem) -> dict:
    """The keyword arguments ``reset`` takes out of the problem's columns (``prompt``, ``answer`` and
    ``meta``: a dataset row's columns), all of them when it takes ``**kwargs``."""
    columns = {"prompt": problem.prompt, "answer": problem.answer, **problem.meta}
    params = inspect.signature(reset).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return columns
    return {p.name: columns[p.name] for p in params if p.name in columns}


class EnvironmentTask:
    """A tool task made of a TRL-style environment class and a source task (problems, verifier)."""

    def __init__(self, env_class: type, source: Any, calls: str = "json", name: str = ""):
        if calls not in CALL_FORMATS:
            raise UserError(f"bad calls={calls!r}; use one of {', '.join(CALL_FORMATS)}")
        self.env_class, self.source, self.calls = env_class, source, calls
        self.name = name or env_class.__name__
        if not public_tools(self._new()):
            raise UserError(f"environment class {env_class.__name__} has no tools: give it public methods "
                            "besides reset (TRL's environment_factory convention)")

    def _new(self) -> Any:
        try:
            return self.env_class()
        except Exception as e:  # noqa: BLE001 - the user's class
            raise UserError(f"environment class {self.env_class.__name__}() failed ({type(e).__name__}: {e}); "
                            "TRL builds it with no arguments, so must rlvr") from e

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        return self.source.problems(split, n)

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """The source task's verdict on the whole episode's text."""
        return self.source.verify(completion, problem)

    def equivalent(self, a: str, b: str) -> bool:
        return getattr(self.source, "equivalent", default_equivalent)(a, b)

    def environment(self, problem: Problem, limits: EpisodeLimits = DEFAULT_LIMITS) -> ToolEnvironment:
        """A fresh instance of the class for one episode, its tools read in the ``calls`` format."""
        instance = self._new()
        tools = public_tools(instance)
        calls = TagCalls(tuple(tools)) if self.calls == "tag" else JsonCalls()
        return ToolEnvironment(tools, calls, limits,
                               reset=lambda p: instance.reset(**reset_arguments(instance.reset, p)))
