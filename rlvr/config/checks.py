"""How a config value is checked: :class:`ConfigError` (its message names the key), :func:`check`, and
the numeric ranges (:class:`Range`, the ``RANGES`` table of the run config's sections).

Keys: a run-config section's checks name the full key (``model.d_model``); the checks of a
dataclass that can sit anywhere (an experiment's ``models.rl``) name the key relative to it
(``start``), and the loader (:mod:`rlvr.config.loader`) puts the path in front.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlvr.errors import UserError


class ConfigError(UserError):
    """A config that cannot be used; the message names the key and the fix.

    ``key`` (None when the message names no single key) and ``reason`` let the loader re-key an
    error raised inside a nested object under the object's path."""

    def __init__(self, message: str, key: str | None = None, reason: str = ""):
        super().__init__(message)
        self.key, self.reason = key, reason or message

    @classmethod
    def at(cls, key: str, reason: str) -> ConfigError:
        """``key: reason`` (just ``reason`` where ``key`` is "", the object itself)."""
        return cls(f"{key}: {reason}" if key else reason, key, reason)


def check(cond: bool, key: str, msg: str) -> None:
    """ConfigError ``key: msg`` unless ``cond``."""
    if not cond:
        raise ConfigError.at(key, msg)


def join_key(prefix: str, key: str) -> str:
    """``models.rl`` + ``start`` -> ``models.rl.start``; ``claims`` + ``[3]`` -> ``claims[3]``."""
    if not prefix or not key:
        return prefix or key
    return f"{prefix}{key}" if key.startswith("[") else f"{prefix}.{key}"


# ---------------------------------------------------------------- numeric ranges


@dataclass(frozen=True)
class Range:
    """The valid values of a numeric field: finite, and between ``low`` and ``high`` (None =
    unbounded), each bound included unless ``low_open`` / ``high_open``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, x: float) -> bool:
        if not math.isfinite(x):
            return False
        if self.low is not None and (x <= self.low if self.low_open else x < self.low):
            return False
        return self.high is None or (x < self.high if self.high_open else x <= self.high)

    def describe(self) -> str:
        """``>= 1``, ``> 0``, ``in [0, 1)`` or ``a finite number``."""
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        return "a finite number"


def at_least(x: float) -> Range:
    return Range(low=x)


def above(x: float) -> Range:
    return Range(low=x, low_open=True)


FINITE = Range()
NON_NEGATIVE = at_least(0)
POSITIVE = above(0)
UNIT = Range(0, 1)  # [0, 1]
UNIT_HALF_OPEN = Range(0, 1, high_open=True)  # [0, 1)
FRACTION = Range(0, 1, low_open=True)  # (0, 1]
OPEN_UNIT = Range(0, 1, low_open=True, high_open=True)  # (0, 1)

RANGES: dict[str, dict[str, Range]] = {}
"""Section name -> field -> valid range, for EVERY int/float field (and numeric tuple: each item)
of the config sections; checked first in each section's ``__post_init__``. A None value of an
optional field (``loss.eps_low: null``) means "the default" and is not checked."""


def check_ranges(obj, ranges: dict[str, Range], where: str = "") -> None:
    """ConfigError ``where.field: must be >= 1 (got -3)`` for the first field of ``obj`` out of its range
    in ``ranges`` (field -> Range); ``where`` "" names the field alone (the loader adds the path)."""
    for name, rng in ranges.items():
        value = getattr(obj, name)
        key = join_key(where, name)
        items = [(f"{key}[{i}]", v) for i, v in enumerate(value)] if isinstance(value, tuple) else [(key, value)]
        for item_key, v in items:
            if v is None:
                continue
            if not isinstance(v, int | float) or isinstance(v, bool):
                raise ConfigError.at(item_key, f"expected a number, got {v!r}")
            if not math.isfinite(v):
                raise ConfigError.at(item_key, f"must be a finite number (got {v!r})")
            if not rng.contains(v):
                raise ConfigError.at(item_key, f"must be {rng.describe()} (got {v!r})")


def check_section_ranges(obj, section: str) -> None:
    """:func:`check_ranges` of a run-config section against ``RANGES[section]``, keys ``section.field``."""
    check_ranges(obj, RANGES[section], section)
