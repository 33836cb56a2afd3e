"""Task registry: name -> factory, with lazy imports and "did you mean" errors.

``TASKS`` maps a task name to either a callable factory (a class or function taking the task's knobs
as keyword arguments) or a lazy ``"module.path:attr"`` string that is imported on first use, so that
importing this module never imports heavy dependencies. Add tasks with :func:`register_task`.

A name with a colon is a *task reference* to a user's own task, loaded without registering it:
``path/to/task.py:ClassName`` (a file, relative to the working directory) or
``package.module:ClassName`` (an importable module); see :func:`load_ref`. A TRL-style environment
class (``reset`` plus tool methods, no ``problems`` / ``verify``) loads the same way, as a tool task
(:mod:`rlvr.tasks.trl_environment`). Every built task is
checked to have ``problems`` and ``verify`` (:func:`check_task`).
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr.errors import UserError
from rlvr.tasks.base import Task
from rlvr.tasks.trl_environment import EnvironmentTask, is_environment_class

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
    "calculator": "rlvr.tasks.calculator:CalculatorTask",
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


REQUIRED = ("problems", "verify")
"""What an object must have (callables) to be a task; see :class:`rlvr.tasks.base.Task`."""

_REFS: dict[str, Callable[..., Task]] = {}  # task references already loaded, by reference string


def is_task_ref(name: object) -> bool:
    """Whether ``name`` is a task reference (``file.py:Class`` or ``module:Class``), not a registry name."""
    return isinstance(name, str) and ":" in name


def _ref_module(where: str, ref: str):
    """The module of a task reference: a ``.py`` file (a path: ends in .py or has a slash) or a module."""
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise UserError(f"task file {where!r} not found (looked at {path}); task.name={ref!r} needs an "
                            "existing .py file, relative to the working directory or absolute")
        modname = "rlvr_user_task_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
        if modname in sys.modules:
            return sys.modules[modname]
        spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            raise UserError(f"task file {where!r} cannot be imported as Python; use a .py file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module  # dataclasses and pickling look the module up here
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001 - any error in the user's file, reported as one line
            del sys.modules[modname]
            raise UserError(f"task file {where!r} failed to import ({type(e).__name__}: {e})") from e
        return module
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as e:
        raise UserError(f"task module {where!r} cannot be imported ({e}); put it on PYTHONPATH, install "
                        "it, or give a file: path/to/task.py:ClassName") from e
    except Exception as e:  # noqa: BLE001
        raise UserError(f"task module {where!r} failed to import ({type(e).__name__}: {e})") from e


def load_ref(ref: str) -> Callable[..., Task]:
    """The factory named by task reference ``ref`` (``path/to/task.py:ClassName`` or
    ``package.module:ClassName``), imported once per process. A missing file, module or attribute, an
    attribute that is not callable, or a class without ``problems`` / ``verify`` raise ``UserError``."""
    if ref in _REFS:
        return _REFS[ref]
    where, _, attr = ref.rpartition(":")
    if not where or not attr or not all(part.isidentifier() for part in attr.split(".")):
        raise UserError(f"bad task reference {ref!r}; use path/to/task.py:ClassName or package.module:ClassName")
    obj: Any = _ref_module(where, ref)
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n, v in vars(obj).items() if not n.startswith("_") and callable(v)] \
                if hasattr(obj, "__dict__") else []
            raise UserError(f"{where!r} has no {part!r}; {_did_you_mean(part, sorted(names))}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UserError(f"{ref!r} is not callable ({type(obj).__name__}); name a task class or factory function")
    if is_environment_class(obj):
        obj = _environment_factory(obj, ref)
    elif inspect.isclass(obj):
        _check_members(obj, ref)
    _REFS[ref] = obj
    return obj


def _environment_factory(env_class: type, ref: str) -> Callable[..., Task]:
    """The task factory of a TRL-style environment class: knobs ``source`` (the task giving problems
    and the verifier, default ``jsonl``), ``source_knobs`` (its knobs) and ``calls`` (json | tag)."""

    def factory(source: str = "jsonl", source_knobs: dict | None = None, calls: str = "json") -> Task:
        if is_task_ref(source):
            raise UserError(f"task {ref!r}: source={source!r} must be a registered task name")
        return EnvironmentTask(env_class, get_task(source, **(source_knobs or {})), calls, name=ref)

    return factory


def _check_members(obj: Any, name: str) -> None:
    missing = [m for m in REQUIRED if not callable(getattr(obj, m, None))]
    if missing:
        what = obj.__name__ if inspect.isclass(obj) else type(obj).__name__
        raise UserError(f"task {name!r}: {what} is not a task, it lacks {' and '.join(missing)}; a task defines "
                        "problems(split, n=None) -> list[Problem] and verify(completion, problem) -> Verdict "
                        "(docs/tasks.md)")


def check_task(obj: Any, name: str) -> Any:
    """``obj`` if it has the callables of a task (``problems``, ``verify``), else ``UserError``."""
    _check_members(obj, name)
    return obj


def resolve(name: str) -> Callable[..., Task]:
    """The factory for ``name``: a registered name (importing a lazy one) or a task reference
    (:func:`load_ref`)."""
    if is_task_ref(name):
        return load_ref(name)
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
    return check_task(factory(**knobs), name)
