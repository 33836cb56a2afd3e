"""Typed, frozen configuration. Defaults live only here; YAML and ``key=value``
overrides are validated against these dataclasses (unknown keys, wrong types and
broken invariants fail at load time with the fix in the message).

Each field's docstring is the attribute docstring under it. The package, by job:

- :mod:`~rlvr.config.checks`: ConfigError, ``check``, the numeric ranges (``Range``, ``RANGES``);
- :mod:`~rlvr.config.model`: the ``model`` and ``pretrain`` sections;
- :mod:`~rlvr.config.task`: the ``task`` and ``reward`` sections;
- :mod:`~rlvr.config.recipe`: the ``sampling``, ``loss``, ``algo`` and ``optim`` sections;
- :mod:`~rlvr.config.execution`: the ``train``, ``pipeline`` and ``log`` sections;
- :mod:`~rlvr.config.excursions`: the ``excursions`` section (how the excursions pipelines train) and
  the grid of ``rlvr excursions``, whose keys share that section (``ExcursionsGrid``);
- :mod:`~rlvr.config.run`: ``RunConfig`` and the invariants across sections;
- :mod:`~rlvr.config.loader`: the one strict loader (run configs and experiment declarations),
  ``load_excursions`` (a run config and the grid of ``rlvr excursions``), ``to_dict``, ``dump_yaml``,
  ``config_hash``.
"""

from rlvr.config.checks import (
    FINITE,
    FRACTION,
    NON_NEGATIVE,
    OPEN_UNIT,
    POSITIVE,
    RANGES,
    UNIT,
    UNIT_HALF_OPEN,
    ConfigError,
    Range,
    above,
    at_least,
    check,
    check_ranges,
)
from rlvr.config.excursions import EXCURSION_PIPELINES, GRID_KEYS, ExcursionsConfig, ExcursionsGrid
from rlvr.config.execution import DEVICE_PATTERN, PROGRESS_MODES, WANDB_MODES, LogConfig, PipelineConfig, TrainConfig
from rlvr.config.loader import (
    SET_BY_CODE,
    builtin_config_path,
    config_hash,
    dump_yaml,
    from_dict,
    load_config,
    load_declaration,
    load_excursions,
    parse_overrides,
    parse_yaml,
    read_mapping,
    read_yaml,
    set_dotted,
    to_dict,
)
from rlvr.config.model import DTYPES, ModelConfig, PretrainConfig
from rlvr.config.recipe import (
    AGGREGATIONS,
    IS_CORRECTIONS,
    KL_ESTIMATORS,
    STD_NORMS,
    AlgoConfig,
    LossConfig,
    OptimConfig,
    SamplingConfig,
)
from rlvr.config.run import RunConfig
from rlvr.config.task import RewardConfig, TaskConfig

__all__ = [
    "AGGREGATIONS", "DEVICE_PATTERN", "DTYPES", "EXCURSION_PIPELINES", "FINITE", "FRACTION", "GRID_KEYS",
    "IS_CORRECTIONS", "KL_ESTIMATORS", "NON_NEGATIVE", "OPEN_UNIT", "POSITIVE", "PROGRESS_MODES", "RANGES",
    "SET_BY_CODE", "STD_NORMS", "UNIT", "UNIT_HALF_OPEN", "WANDB_MODES", "AlgoConfig", "ConfigError",
    "ExcursionsConfig", "ExcursionsGrid", "LogConfig", "LossConfig", "ModelConfig", "OptimConfig", "PipelineConfig",
    "PretrainConfig", "Range", "RewardConfig", "RunConfig", "SamplingConfig", "TaskConfig", "TrainConfig", "above",
    "at_least", "builtin_config_path", "check", "check_ranges", "config_hash", "dump_yaml", "from_dict",
    "load_config", "load_declaration", "load_excursions", "parse_overrides", "parse_yaml", "read_mapping",
    "read_yaml", "set_dotted", "to_dict",
]
