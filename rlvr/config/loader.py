"""The one strict loader: a YAML mapping (plus dotted ``key=value`` overrides) -> frozen dataclasses.

It reads run configs (:func:`load_config` -> :class:`~rlvr.config.run.RunConfig`) and experiment
declarations (:mod:`rlvr.experiments.spec`) alike. Against the dataclass's annotations: unknown keys
fail with a did-you-mean, missing required keys and wrong types fail, lists become tuples and ints
become floats; then each dataclass's ``__post_init__`` checks ranges and invariants. Every error
names the full key (``loss.eps_hihg``, ``claims[3].args.eval``); an error raised inside a nested
object with a key relative to it is re-keyed under the object's path.

Beyond plain fields it understands ``tuple[X, ...]`` and ``tuple[X, Y]``, ``X | None``, nested
dataclasses, and ``dict[str, X]``: where X is a dataclass with a ``name`` field, each mapping key is
that item's name (the YAML does not repeat it). A field whose metadata is :data:`SET_BY_CODE` is not a
YAML key (an experiment's quick-form state).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import hashlib
import json
import types
import typing
from pathlib import Path

import yaml

from rlvr.config.checks import ConfigError, check, join_key
from rlvr.config.excursions import GRID_KEYS, ExcursionsConfig, ExcursionsGrid
from rlvr.config.run import RunConfig

SET_BY_CODE = {"declared": False}
"""Field metadata of a dataclass field that code sets and a YAML file may not."""

CONFIGS_DIR = Path(__file__).resolve().parents[1] / "configs"
"""The configs shipped with the package (``rlvr/configs``; ``configs/`` at the repository root links here)."""


# ---------------------------------------------------------------- mapping -> dataclass


def _coerce(value, tp, key: str):
    """Check ``value`` against the annotation ``tp``; convert lists to tuples and ints to floats."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key)
            except ConfigError:
                pass
        raise ConfigError.at(key, f"expected {tp}, got {value!r}")
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, key)
    if origin is tuple:
        check(isinstance(value, list | tuple), key, f"expected a list, got {value!r}")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value))
        check(len(value) == len(args), key, f"expected {len(args)} items, got {len(value)}")
        return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if tp is dict or origin is dict:
        check(isinstance(value, dict), key, f"expected a mapping, got {value!r}")
        return _mapping(value, typing.get_args(tp), key)
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-4" as a string
            try:
                value = float(value)
            except ValueError:
                pass
        check(isinstance(value, int | float) and not isinstance(value, bool), key,
              f"expected a number, got {value!r}")
        return float(value)
    if tp is int:
        check(isinstance(value, int) and not isinstance(value, bool), key, f"expected an integer, got {value!r}")
        return value
    if tp is bool:
        check(isinstance(value, bool), key, f"expected true or false, got {value!r}")
        return value
    if tp is str:
        check(isinstance(value, str), key, f"expected a string, got {value!r}")
        return value
    return value


def _mapping(value: dict, args: tuple, key: str) -> dict:
    """A plain ``dict`` as given; ``dict[K, V]`` item by item (named dataclass items: the key is the name)."""
    if not args:
        return dict(value)
    key_type, value_type = args
    out = {}
    for k, v in value.items():
        item_key = join_key(key, str(k))
        out[_coerce(k, key_type, item_key)] = _coerce(_named(v, value_type, k, item_key), value_type, item_key)
    return out


def _named(value, tp, name, key: str):
    """``value`` with ``name`` filled in where ``tp`` is a dataclass with a name field."""
    if not (dataclasses.is_dataclass(tp) and "name" in {f.name for f in dataclasses.fields(tp)}):
        return value
    check(isinstance(value, dict), key, f"expected a mapping, got {value!r}")
    check("name" not in value, join_key(key, "name"), f"unknown key; the mapping's key ({name!r}) is the name")
    return {"name": name, **value}


@functools.cache
def _type_hints(cls) -> dict:
    """``typing.get_type_hints(cls)``, resolved once per class (the slowest part of reading a config;
    an experiment reads hundreds). Shared: read it, never change it."""
    return typing.get_type_hints(cls)


def _declared(cls) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("declared", True)]


def from_dict(cls, data, prefix: str = ""):
    """``data`` (a mapping, e.g. loaded YAML) as a ``cls`` dataclass; ConfigError naming the full key
    (``prefix`` is where ``data`` sits, "" at the top)."""
    if isinstance(data, cls):
        return data
    check(isinstance(data, dict), prefix or "config", f"expected a mapping, got {type(data).__name__}")
    hints = _type_hints(cls)
    fields = _declared(cls)
    names = [f.name for f in fields]
    kwargs = {}
    for key, value in data.items():
        full = join_key(prefix, str(key))
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(names)}"
            raise ConfigError.at(full, f"unknown key; {hint}")
        kwargs[key] = _coerce(value, hints[key], full)
    for f in fields:
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        check(not required or f.name in kwargs, join_key(prefix, f.name), "missing (a required key)")
    try:
        return cls(**kwargs)
    except ConfigError as e:
        raise _under(prefix, e) from None


def _under(prefix: str, error: ConfigError) -> ConfigError:
    """``error`` raised by an object at ``prefix``, its key re-written under ``prefix`` when relative."""
    key = error.key
    if key is None or not prefix or key == prefix or key.startswith((f"{prefix}.", f"{prefix}[")):
        return error
    return ConfigError.at(join_key(prefix, key), error.reason)


class StrictYamlLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (PyYAML keeps the last one,
    so a second ``train:`` block silently drops the first)."""


def _construct_mapping(loader: StrictYamlLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    first_line: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            seen = key in first_line
        except TypeError:  # a list or mapping as a key
            raise yaml.constructor.ConstructorError(None, None, "a key must be a plain value (a name)",
                                                    key_node.start_mark) from None
        if seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first given on line {first_line[key]}); keep one",
                key_node.start_mark)
        first_line[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


StrictYamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def yaml_error(source, error: yaml.YAMLError) -> str:
    """``source:LINE: not valid YAML (problem)``: the line of the problem where PyYAML knows it."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    where = f"{source}:{mark.line + 1}" if mark is not None else str(source)
    return f"{where}: not valid YAML ({problem})"


def parse_yaml(text: str, source="<text>"):
    """The YAML document ``text`` read strictly (:class:`StrictYamlLoader`); ConfigError
    ``source:LINE: ...`` when it is not valid YAML or repeats a key. A fresh copy each call (the
    caller may change it) of a document parsed once per process (:func:`_parsed`)."""
    try:
        return copy.deepcopy(_parsed(text))
    except yaml.YAMLError as e:
        raise ConfigError(yaml_error(source, e)) from None


@functools.lru_cache(maxsize=1024)
def _parsed(text: str):
    """``text`` as YAML (:class:`StrictYamlLoader`), cached: an experiment builds hundreds of run
    configs from the same file and override strings (errors are raised again, never cached). Shared:
    callers copy it."""
    return yaml.load(text, Loader=StrictYamlLoader)  # noqa: S506 (a SafeLoader subclass)


def read_yaml(path: Path):
    """The YAML document at ``path`` read strictly (:func:`parse_yaml`); a ConfigError naming the file
    when it cannot be read, is not UTF-8 text, is not valid YAML or repeats a key (with its line)."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p} is a folder, not a YAML file; give the file (a run's config is RUN/config.yaml)")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a text file (not UTF-8); give a YAML config") from None
    except OSError as e:
        raise ConfigError(f"{p}: cannot be read ({e.strerror or e}); check its permissions") from None
    return parse_yaml(text, p)


def read_mapping(path: Path, what: str = "config", empty_fix: str = "give no config to use the defaults") -> dict:
    """:func:`read_yaml` of a file that must hold a non-empty mapping (a run config, a declaration):
    an empty file (``empty_fix`` says what to do) or a list at the top level is a ConfigError naming
    the file."""
    data = read_yaml(path)
    if data is None:
        raise ConfigError(f"{path}: empty; a {what} is a mapping of sections (e.g. `train: {{steps: 20}}`); "
                          f"{empty_fix}")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level is a {type(data).__name__}, not a mapping; a {what} is a "
                          "mapping of sections, e.g. `train: {steps: 20}`")
    return data


def load_declaration(cls, data, source: str):
    """:func:`from_dict` of a whole file's mapping, every error prefixed by ``source`` (e.g.
    ``experiments/scalerl.yaml: claims[3].args.eval: ...``)."""
    try:
        return from_dict(cls, data)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}", e.key, e.reason) from None


# ---------------------------------------------------------------- run configs: YAML + overrides


def set_dotted(data: dict, dotted: str, value) -> None:
    """Set ``a.b.c = value`` in a nested dict, creating levels as needed."""
    parts = dotted.split(".")
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{dotted}: {p} is not a section")
    node[parts[-1]] = value


def parse_overrides(overrides: list[str]) -> dict:
    """``["loss.eps_high=0.28", "train.steps=5"]`` -> nested dict (values parsed as YAML)."""
    out: dict = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected key=value, e.g. loss.eps_high=0.28")
        key, raw = item.split("=", 1)
        try:
            value = copy.deepcopy(_parsed(raw)) if raw != "" else ""
        except yaml.YAMLError as e:
            raise ConfigError(f"{key.strip()}: value {raw!r} is not valid YAML ({str(e).splitlines()[0]}); "
                              "quote the override, e.g. 'reward.weights={verifier: 1.0}'") from None
        set_dotted(out, key.strip(), value)
    return out


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def builtin_config_path(name: str) -> Path | None:
    """Path of a config shipped with the package (``quickstart``, ``grpo``, ...), if any."""
    p = CONFIGS_DIR / f"{name}.yaml"
    return p if p.exists() else None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Load a YAML file (or a built-in config name) with dotted overrides on top. The grid keys of
    ``rlvr excursions`` in the ``excursions:`` section are checked, then left out (:func:`load_excursions`)."""
    return load_excursions(path, overrides)[0]


def load_excursions(path: str | Path | None = None,
                    overrides: list[str] | None = None) -> tuple[RunConfig, ExcursionsGrid]:
    """(run config, grid of ``rlvr excursions``) of a YAML file (or a built-in config name) with dotted
    overrides on top: the ``excursions:`` section's :data:`~rlvr.config.excursions.GRID_KEYS` make the
    grid, the rest the run config."""
    data = _read_config(path, overrides)
    run, grid = _split_grid(data)
    return from_dict(RunConfig, run), from_dict(ExcursionsGrid, grid, "excursions")


def _split_grid(data: dict) -> tuple[dict, dict]:
    """(run config mapping, grid mapping): the grid keys taken out of the ``excursions:`` section; a key
    of neither kind fails with a did-you-mean over both."""
    section = data.get("excursions")
    if not isinstance(section, dict):
        return data, {}
    known = [f.name for f in dataclasses.fields(ExcursionsConfig)] + list(GRID_KEYS)
    for key in section:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
            raise ConfigError.at(f"excursions.{key}", f"unknown key; {hint}")
    run = {k: v for k, v in section.items() if k not in GRID_KEYS}
    return {**data, "excursions": run}, {k: v for k, v in section.items() if k in GRID_KEYS}


def _read_config(path: str | Path | None, overrides: list[str] | None) -> dict:
    """The mapping of a YAML file (or a built-in config name) with dotted overrides merged on top."""
    data: dict = {}
    if path:
        p = Path(path)
        if not p.exists():
            p = builtin_config_path(str(path)) or p
        if not p.exists():
            shipped = sorted(x.stem for x in CONFIGS_DIR.glob("*.yaml"))
            raise ConfigError(f"{path}: no such config file; give a path or one of {', '.join(shipped)}")
        data = read_mapping(p)
    return _merge(data, parse_overrides(overrides or []))


# ---------------------------------------------------------------- dataclass -> dict, YAML, hash


def to_dict(cfg) -> dict:
    """Plain nested dict (tuples as lists) of a config dataclass."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def dump_yaml(cfg) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def config_hash(obj) -> str:
    """Short stable hash of a config (dataclass or dict)."""
    d = to_dict(obj) if dataclasses.is_dataclass(obj) else obj
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]
