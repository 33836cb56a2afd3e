"""The registry of measures: each measure is one registered :class:`Measure`: its typed arguments,
its computation, its description, its identification rule, the line its claims add to the page's
Details, how its interval is made and the page section its claims read. Nothing else branches on a
measure's name.

The measure modules register their measures when imported; :mod:`rlvr.experiments.measures` imports
them all, so ``from rlvr.experiments.measures import MEASURES`` sees every one.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from rlvr.config import ConfigError, check, from_dict
from rlvr.experiments.verdict import Estimate

Get = Callable[..., dict]
"""``get(eval, model, seed, milestone="") -> stats``: an evaluation cell's per-problem statistics (a
model's kept checkpoint with ``milestone``, e.g. ``step_000025``; FileNotFoundError when it is missing)."""


@dataclass(frozen=True, kw_only=True)
class Args:
    """The arguments every measure takes."""

    eval: str
    """The evaluation whose cells it reads."""


@dataclass(frozen=True, kw_only=True)
class ModelArgs(Args):
    model: str
    """The model (or run) it measures."""


@dataclass(frozen=True, kw_only=True)
class PairArgs(ModelArgs):
    against: str
    """The model it is compared with."""


def one_of(value: str, allowed: tuple[str, ...], key: str) -> None:
    """ConfigError at ``key`` unless ``value`` is one of ``allowed``."""
    check(value in allowed, key, f"{value!r}; use one of {', '.join(allowed)}")


def identified(args: dict, estimates: list[Estimate], details: dict) -> str:
    """The identification rule of a measure whose quantity always exists: no reason."""
    return ""


def as_json(details: dict, args: dict) -> str:
    """The details line of a measure that registers none: its details as JSON (floats to 4 places)."""
    return json.dumps(rounded(details), sort_keys=True)


def rounded(x):
    """``x`` with every float rounded to 4 places (lists and dicts walked)."""
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [rounded(v) for v in x]
    return x


@dataclass(frozen=True)
class Measure:
    """A registered measure."""

    name: str
    compute: Callable[[Get, dict, list[int | None], list[int | None]], tuple[list[Estimate], dict]]
    """(get, args, seeds of the model, seeds of ``against``) -> (per-seed estimates, details)."""
    args: type
    """Its typed arguments (a frozen dataclass: an unknown or misspelt key is an error)."""
    describe: Callable[[dict], str]
    """args -> the measured quantity in words (the verdict table's "measured: ...")."""
    interval: str
    """How its estimates' intervals are made (the page's header says it)."""
    detail: Callable[[dict, dict], str] = as_json
    """(details, args) -> the claim's line under the page's Details."""
    identify: Callable[[dict, list[Estimate], dict], str] = identified
    """(args, estimates, details) -> why the quantity is not identifiable here ('' when it is),
    computed from the data (:data:`rlvr.experiments.verdict.NOT_IDENTIFIABLE`)."""
    section: str = ""
    """The page section its claims read ("Curves", "Weights", "Training dynamics"; '' none)."""
    models: tuple[str, ...] = field(default=("model", "against", "reference", "control"))
    """Its arguments that name models."""

    def typed(self, args: dict, where: str = "args") -> dict:
        """``args`` parsed by :attr:`args` (ConfigError at ``where.KEY`` for an unknown key, a wrong
        type or value) -> a plain dict with every default filled (None: not given)."""
        parsed = from_dict(self.args, args, where)
        return {k: v for k, v in dataclasses.asdict(parsed).items() if v is not None}

    def run(self, get: Get, args: dict, seeds: list[int | None], against_seeds: list[int | None]):
        """:attr:`compute` on the :meth:`typed` ``args`` -> (estimates, details)."""
        return self.compute(get, self.typed(args), seeds, against_seeds)

    def why(self, args: dict, estimates: list[Estimate], details: dict) -> str:
        """:attr:`identify` on the :meth:`typed` ``args``."""
        return self.identify(self.typed(args), estimates, details)

    def check(self, args: dict, evals: dict, models: dict, where: str) -> None:
        """Declaration-time check: typed arguments that name declared evaluations and models
        (ConfigError naming the key under ``where``, e.g. ``claims[3].args.eval``)."""
        typed = self.typed(args, f"{where}.args")
        ev = evals.get(typed["eval"])
        if ev is None:
            raise ConfigError(f"{where}.args.eval: unknown evaluation {typed['eval']!r}")
        # evaluations with the same protocol share their cells (every dynamics evaluation reads the same
        # runs): a claim may compare models that different evaluations (different parts) list
        pool = {m for e in evals.values() if ev.same_cells(e) for m in e.models}
        for key in self.models:
            if typed.get(key) and typed[key] not in pool:
                raise ConfigError(f"{where}.args.{key}: {typed[key]!r} is not evaluated by {typed['eval']} "
                                  "or an evaluation with its protocol")
        if "retain" in typed:  # a second evaluation read at the same models
            other = evals.get(typed["retain"])
            if other is None:
                raise ConfigError(f"{where}.args.retain: unknown evaluation {typed['retain']!r}")
            for key in ("model", "against"):
                if typed[key] not in other.models:
                    raise ConfigError(f"{where}.args.{key}: {typed[key]!r} is not evaluated by {typed['retain']}")
        if "arms" in typed:  # a scan over runs
            if not typed["arms"]:
                raise ConfigError(f"{where}.args.arms: a non-empty list of models")
            for m in typed["arms"]:
                if m not in pool:
                    raise ConfigError(f"{where}.args.arms: {m!r} is not evaluated by {typed['eval']} or an "
                                      "evaluation with its protocol")
        named_runs = [*typed.get("runs", ()), *(m for row in typed.get("grid", ()) for m in row)]
        for m in named_runs:  # measures over many runs of one evaluation
            if m not in pool:
                raise ConfigError(f"{where}.args: {m!r} is not evaluated by {typed['eval']} or an evaluation with "
                                  "its protocol")
        if "pairs" in typed:  # association measures: per checkpoint [model, ..., its start model]
            if not typed["pairs"] or not all(len(p) >= 2 for p in typed["pairs"]):
                raise ConfigError(f"{where}.args.pairs: a list of [model, ..., start model] lists, one per checkpoint")
            dyn = evals.get(typed.get("dynamics", ""))
            for p in typed["pairs"]:
                named = p[1:] if dyn is not None else p  # an intrinsic run (first) is read by `dynamics`
                for m in named:
                    if m not in pool:
                        raise ConfigError(f"{where}.args.pairs: {m!r} is not evaluated by {typed['eval']} or an "
                                          "evaluation with its protocol")
                if dyn is not None and p[0] not in dyn.models:
                    raise ConfigError(f"{where}.args.pairs: {p[0]!r} is not evaluated by {typed['dynamics']}")


MEASURES: dict[str, Measure] = {}
"""Every registered measure by name (filled by the measure modules; import
:mod:`rlvr.experiments.measures` to see them all)."""


def register(*measures: Measure) -> None:
    """Add ``measures`` to :data:`MEASURES` (a name registered twice is an error)."""
    for m in measures:
        if m.name in MEASURES:
            raise ValueError(f"measure {m.name!r} registered twice")
        MEASURES[m.name] = m
