"""Reward functions named in the config (``reward.kind=funcs``, ``reward.funcs``), TRL's way.

Each entry of ``reward.funcs`` names a function with TRL's reward signature::

    fn(prompts: list, completions: list, **columns) -> list[float | None]

by its registry name (:func:`rlvr.rewards.registry.available_rewards`: ``math``, ``numeric``,
``exact``, ``format``, ``code``) or as ``path/to/file.py:name`` or ``package.module:name``, with a
weight (``{name: ..., weight: ...}``; a bare string has weight 1). ``async def`` functions are run
to completion. The columns are ``answer`` and every key of ``Problem.meta`` that all rows share
(e.g. ``tests`` of the code tasks). The reward of a completion is the weighted sum over functions;
a function that returns ``None`` for a completion is left out of that completion's sum (TRL's
rule); a completion that every function leaves out scores 0 and is counted. A call that raises,
times out or returns anything but one finite number or None per completion (a list, tuple, NumPy
array or tensor) scores ``failure_value`` (counted by :func:`rlvr.rewards.registry.score_batch`);
past ``train.max_reward_failure_rate`` of a round the caller stops the run. Reward code is trusted
code: it runs with the user's permissions (docs/rewards.md).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import inspect
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from rlvr.errors import UserError
from rlvr.rewards.registry import RewardFn, allowed_failures, available_rewards, get_reward, score_batch
from rlvr.types import Problem

BASE_COLUMNS = ("answer",)
IMPORT_TIMEOUT_S = float(os.environ.get("RLVR_REWARD_IMPORT_TIMEOUT_S", "60"))
"""The longest a reward file or module may take to import (``RLVR_REWARD_IMPORT_TIMEOUT_S``):
one that sleeps or loops at import is refused instead of hanging ``rlvr train`` before it starts."""


class _ImportTimeout(Exception):
    pass


@contextmanager
def _bounded(seconds: float, what: str):
    """Raise UserError if the block runs past ``seconds`` (SIGALRM: main thread only; elsewhere the
    block runs unbounded, as it does where the validation already imported the file)."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expired(signum, frame):
        raise _ImportTimeout

    old = signal.signal(signal.SIGALRM, _expired)
    old_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.monotonic()
    try:
        yield
    except _ImportTimeout:
        raise UserError(f"{what} took more than {seconds:g} s to import (does it loop or wait at import?); "
                        "move slow set-up into the function or raise RLVR_REWARD_IMPORT_TIMEOUT_S") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if old_timer[0]:  # someone else's alarm: give back what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(old_timer[0] - (time.monotonic() - t0), 1e-3), old_timer[1])


def entries(funcs: Sequence[Any]) -> list[tuple[str, float]]:
    """``reward.funcs`` as (spec, weight) pairs: a string is weight 1, a dict has ``name`` and ``weight``."""
    out = []
    for i, e in enumerate(funcs):
        if isinstance(e, str):
            out.append((e, 1.0))
        elif isinstance(e, dict) and isinstance(e.get("name"), str) and set(e) <= {"name", "weight"}:
            out.append((e["name"], float(e.get("weight", 1.0))))
        else:
            raise UserError(f"reward.funcs[{i}]: expected a name or {{name: ..., weight: ...}}, got {e!r}")
    return out


@functools.lru_cache(maxsize=64)
def load(spec: str) -> RewardFn:
    """The reward function ``spec`` names: a registry name, ``file.py:name`` or ``module:name``."""
    if ":" not in spec:
        return get_reward(spec)
    where, _, name = spec.rpartition(":")
    if where.endswith(".py") or "/" in where:
        path = Path(where).expanduser()
        if not path.is_file():
            raise UserError(f"reward function file {where} does not exist; give a path to a .py file")
        mod_name = f"rlvr_user_rewards_{abs(hash(str(path.resolve())))}"
        mod_spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[mod_name] = module  # so that the scoring pool's workers can find its functions
        try:
            with _bounded(IMPORT_TIMEOUT_S, f"reward function file {where}"):
                mod_spec.loader.exec_module(module)
        except UserError:
            sys.modules.pop(mod_name, None)
            raise
        except Exception as exc:
            sys.modules.pop(mod_name, None)
            raise UserError(f"reward function file {where} failed to import: {type(exc).__name__}: {exc}") from exc
    else:
        try:
            with _bounded(IMPORT_TIMEOUT_S, f"reward function module {where}"):
                module = importlib.import_module(where)
        except ImportError as exc:
            raise UserError(f"cannot import module {where!r} for reward function {spec!r}: {exc}") from exc
    fn = getattr(module, name, None)
    if not callable(fn):
        known = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        raise UserError(f"{where} has no function {name!r}; known names: {', '.join(known)}")
    if inspect.iscoroutinefunction(fn):
        return _synchronous(fn)
    return fn


def _synchronous(fn: Any) -> RewardFn:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return run


def check_signature(spec: str, fn: RewardFn, columns: Sequence[str]) -> None:
    """UserError unless ``fn(prompts=..., completions=..., **columns)`` binds (TRL calls it that way)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or C function: cannot be checked, called as is
    kwargs = {"prompts": [], "completions": [], **{c: [] for c in columns}}
    has_var_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    if not has_var_kw:
        kwargs = {k: v for k, v in kwargs.items() if k in sig.parameters}
    try:
        sig.bind(**kwargs)
    except TypeError as exc:
        raise UserError(f"reward function {spec!r} does not fit TRL's signature fn(prompts, completions, "
                        f"**columns) with columns {', '.join(columns)}: {exc}; add **kwargs") from exc


def columns_of(problems: Sequence[Problem]) -> dict[str, list]:
    """Per-row columns for reward functions: ``answer`` and the ``meta`` keys every row has."""
    shared = set(problems[0].meta) if problems else set()
    for p in problems[1:]:
        shared &= set(p.meta)
    cols: dict[str, list] = {"answer": [p.answer for p in problems]}
    for k in sorted(shared - set(cols)):
        cols[k] = [p.meta[k] for p in problems]
    return cols


def funcs_reward(funcs: Sequence[Any], prompts: Sequence[Any], completions: Sequence[str],
                 problems: Sequence[Problem], *, failure_value: float = 0.0, timeout_s: float | None = 10.0,
                 workers: int = 2, max_failure_rate: float | None = None) -> tuple[torch.Tensor, dict]:
    """(B,) weighted reward of B completions and stats (``by_func`` means, ``none_all``, failures,
    ``failures_by_func``).

    ``max_failure_rate``: a function whose calls have failed for more than this share of the B
    completions is not called for the rest (they score ``failure_value`` and count as failures), so
    a function that always hangs costs about ``max_failure_rate * B`` timeouts, not B; the caller
    stops the run (:func:`rlvr.rewards.scoring.compute_rewards`)."""
    cols = columns_of(problems)
    b = len(completions)
    total, counted = torch.zeros(b), torch.zeros(b, dtype=torch.bool)
    stats: dict[str, Any] = {"by_func": {}, "failures": 0, "timeouts": 0, "errors": [], "failures_by_func": {}}
    max_failures = None if max_failure_rate is None else allowed_failures(b, max_failure_rate)
    for spec, weight in entries(funcs):
        fn = load(spec)
        scores, st = score_batch(fn, list(prompts), list(completions), cols, failure_value=failure_value,
                                 none_value=math.nan, timeout_s=timeout_s or None, workers=workers,
                                 max_failures=max_failures)
        s = torch.tensor(scores, dtype=torch.float32)
        ok = ~torch.isnan(s)
        total += torch.where(ok, weight * s, torch.zeros(()))
        counted |= ok
        stats["by_func"][spec] = float(s[ok].mean()) if ok.any() else math.nan
        failed = st["timeouts"] + st["exceptions"] + st["skipped"]
        stats["failures"] += failed
        stats["failures_by_func"][spec] = failed
        stats["timeouts"] += st["timeouts"]
        stats["errors"] += st["errors"]
    stats["none_all"] = int((~counted).sum())
    return total, stats


def check_funcs(funcs: Sequence[Any], columns: Sequence[str]) -> None:
    """Load every entry and check its signature (ConfigError-worthy UserError naming the entry)."""
    if not funcs:
        return
    for spec, weight in entries(funcs):
        if not math.isfinite(weight):
            raise UserError(f"reward.funcs: weight of {spec!r} must be finite, got {weight}")
        if ":" not in spec and spec not in available_rewards():
            get_reward(spec)  # raises with a suggestion
        check_signature(spec, load(spec), columns)
