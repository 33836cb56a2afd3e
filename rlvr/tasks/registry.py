"""Task registry: name -> factory, with lazy imports and "did you mean" errors.

``TASKS`` maps a task name to either a callable factory (a class or function taking the task's knobs
as keyword arguments) or a lazy ``"module.path:attr"`` string that is imported on first use, so that
importing this module never imports heavy dependencies. Add tasks with :func:`register_task`.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from rlvr.errors import UserError
from rlvr.tasks.base import Task

Factory = Callable[..., Task] | str

TASKS: dict[str, Factory] = {
    "arithmetic": "rlvr.tasks.arithmetic:ArithmeticTask",
    "countdown": "rlvr.tasks.countdown:CountdownTask",
    "strings": "rlvr.tasks.strings:StringsTask",
    "code_synth": "rlvr.tasks.code_synth:CodeSynthTask",
    "humaneval": "rlvr.tasks.humaneval:HumanEvalTask",
    "gsm8k": "rlvr.tasks.gsm8k:GSM8KTask",
    "math500": "rlvr.tasks.math500:Math500Task",
    "jsonl": "rlvr.tasks.jsonl:JsonlTask",
    "docrecon": "rlvr.tasks.docrecon:DocReconTask",
    "reasoning_gym": "rlvr.tasks.reasoning_gym:ReasoningGymTask",
}


def register_task(name: str, factory: Factory, *, replace: bool = False) -> None:
    """Register ``factory`` (callable, or lazy ``"module:attr"`` string) under ``name``."""
    if not isinstance(name, str) or not name:
        raise UserError(f"bad task name {name!r}; use a non-empty string")
    if isinstance(factory, str) and ":" not in factory:
        raise UserError(f"bad lazy factory {factory!r} for task {name!r}; use 'package.module:attr'")
    if not isinstance(factory, str) and not callable(factory):
        raise UserError(f"factory for task {name!r} is not callable; pass a class, function or 'module:attr'")
    if name in TASKS and not replace and TASKS[name] != factory:
        raise UserError(f"task {name!r} is already registered; pick another name or pass replace=True")
    TASKS[name] = factory


def list_tasks() -> list[str]:
    """Sorted names of all registered tasks."""
    return sorted(TASKS)


def _did_you_mean(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f"did you mean {close[0]!r}?" if close else f"choose from {', '.join(options) or '(none)'}"


def resolve(name: str) -> Callable[..., Task]:
    """The factory for ``name`` (importing a lazy one)."""
    if name not in TASKS:
        raise UserError(f"unknown task {name!r}; {_did_you_mean(str(name), list_tasks())}")
    factory = TASKS[name]
    if isinstance(factory, str):
        module, attr = factory.split(":", 1)
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        factory = obj
        TASKS[name] = factory
    return factory


def knob_names(factory: Callable[..., Task]) -> list[str] | None:
    """Keyword knobs the factory accepts; None if it takes ``**kwargs`` (anything goes)."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in params if p.kind in kinds and p.name != "self"]


def get_task(name: str, **knobs: Any) -> Task:
    """Build task ``name`` with its difficulty ``knobs``; unknown names/knobs raise ``UserError``."""
    factory = resolve(name)
    allowed = knob_names(factory)
    if allowed is not None:
        for k in knobs:
            if k not in allowed:
                raise UserError(f"unknown knob {k!r} for task {name!r}; {_did_you_mean(k, allowed)}")
    return factory(**knobs)
