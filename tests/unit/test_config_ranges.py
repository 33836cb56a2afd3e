"""Every numeric config field is range-checked at load: the test walks the dataclasses, so a new
int/float field without an entry in ``rlvr.config.RANGES`` fails here."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.config import RANGES, ConfigError, Range, RunConfig, load_config

SECTIONS = {f.name: typing.get_type_hints(RunConfig)[f.name] for f in dataclasses.fields(RunConfig)
            if dataclasses.is_dataclass(typing.get_type_hints(RunConfig)[f.name])}


def _scalar(tp) -> type | None:
    """int or float for a numeric annotation (Optional and tuples unwrapped), else None."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _scalar(inner[0]) if len(inner) == 1 else None
    if origin is tuple:
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        kinds = {_scalar(a) for a in args}
        return kinds.pop() if len(kinds) == 1 else None
    return tp if tp in (int, float) else None


def numeric_fields() -> list[tuple[str, str, object]]:
    out = []
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        out += [(section, f.name, hints[f.name]) for f in dataclasses.fields(cls) if _scalar(hints[f.name])]
    return out


NUMERIC = numeric_fields()


def _bad_values(rng: Range, kind: type) -> list:
    bad = []
    if rng.low is not None:
        bad.append(rng.low if rng.low_open else rng.low - 1)
    if rng.high is not None:
        bad.append(rng.high if rng.high_open else rng.high + 1)
    if kind is float:
        bad += [math.inf, math.nan]
    assert bad, "an int field without bounds cannot be checked; give it a range"
    return [kind(v) if math.isfinite(v) else v for v in bad]


def _yaml(v) -> str:
    if isinstance(v, float) and math.isnan(v):
        return ".nan"
    if isinstance(v, float) and math.isinf(v):
        return ".inf" if v > 0 else "-.inf"
    return repr(v)


def test_the_walk_finds_the_sections_and_fields():
    assert {"model", "task", "pretrain", "sampling", "loss", "algo", "optim", "train", "reward", "pipeline", "log",
            "excursions"} <= set(SECTIONS)
    keys = {f"{s}.{n}" for s, n, _ in NUMERIC}
    assert {"train.steps", "optim.betas", "pretrain.milestones", "loss.eps_low", "loss.cispo_eps_low",
            "pipeline.ray_num_cpus", "log.every"} <= keys


def test_every_numeric_field_has_a_range_and_no_range_is_stale():
    missing = [f"{s}.{n}" for s, n, _ in NUMERIC if n not in RANGES.get(s, {})]
    assert not missing, f"numeric config fields without a range in rlvr.config.RANGES: {missing}"
    known = {(s, n) for s, n, _ in NUMERIC}
    stale = [f"{s}.{n}" for s, table in RANGES.items() for n in table if (s, n) not in known]
    assert not stale, f"RANGES entries for fields that are not numeric fields: {stale}"
    defaults = RunConfig()
    for s, n, _ in NUMERIC:  # the defaults are inside their ranges
        value = getattr(getattr(defaults, s), n)
        for v in value if isinstance(value, tuple) else [value]:
            assert v is None or RANGES[s][n].contains(v), f"{s}.{n} default {v} is outside its range"


@pytest.mark.parametrize(("section", "name", "tp"), NUMERIC, ids=[f"{s}.{n}" for s, n, _ in NUMERIC])
def test_out_of_range_value_is_a_config_error_naming_the_key(section, name, tp):
    key = f"{section}.{name}"
    kind = _scalar(tp)
    is_tuple = typing.get_origin(tp) is tuple
    width = len(typing.get_args(tp)) if is_tuple and Ellipsis not in typing.get_args(tp) else 1
    for bad in _bad_values(RANGES[section][name], kind):
        raw = f"[{', '.join([_yaml(bad)] * width)}]" if is_tuple else _yaml(bad)
        with pytest.raises(ConfigError) as e:
            load_config(None, [f"{key}={raw}"])
        msg = str(e.value)
        assert msg.startswith(key), f"{key}={raw}: message {msg!r} does not start with the key"
        assert "\n" not in msg and "must be" in msg


def test_messages_name_key_range_and_value():
    cases = {
        "train.steps=-3": "train.steps: must be >= 1 (got -3)",
        "optim.betas=[0.9, 1.0]": "optim.betas[1]: must be in [0, 1) (got 1.0)",
        "loss.eps_high=0": "loss.eps_high: must be > 0 (got 0.0)",
        "sampling.top_p=0": "sampling.top_p: must be in (0, 1] (got 0.0)",
        "train.max_reward_failure_rate=1.5": "train.max_reward_failure_rate: must be in [0, 1] (got 1.5)",
        "train.reward_failure_value=.inf": "train.reward_failure_value: must be a finite number (got inf)",
    }
    for override, message in cases.items():
        with pytest.raises(ConfigError) as e:
            load_config(None, [override])
        assert str(e.value) == message
    # in range: fine (None = the variant's default for optional loss fields)
    cfg = load_config(None, ["loss.eps_low=null", "loss.cispo_eps_low=0.5", "optim.betas=[0, 0.999]"])
    assert cfg.loss.eps_low is None and cfg.loss.cispo_eps_low == 0.5


def test_cross_field_checks():
    with pytest.raises(ConfigError, match=r"^algo.minibatches: must be between 1 and algo.prompts_per_step=2"):
        load_config(None, ["algo.prompts_per_step=2", "algo.minibatches=3"])
    with pytest.raises(ConfigError, match=r"^algo.overlong_cache: must be <= sampling.max_new_tokens=48"):
        load_config(None, ["algo.overlong_cache=49"])
    with pytest.raises(ConfigError, match=r"^pretrain.mix.strings: weight must be a finite number >= 0"):
        load_config(None, ["pretrain.mix={arithmetic: 1, strings: -1}"])
    with pytest.raises(ConfigError, match=r"^pretrain.mix: weights sum to 0"):
        load_config(None, ["pretrain.mix={arithmetic: 0}"])
    with pytest.raises(ConfigError, match=r"^reward.weights: reward.kind=mix needs weights"):
        load_config(None, ["reward.kind=mix"])
    with pytest.raises(ConfigError, match=r"^reward.weights.verifier: weight must be a finite number"):
        load_config(None, ["reward.kind=mix", "reward.weights={verifier: .inf}"])
    with pytest.raises(ConfigError, match=r"^reward.weights: value '\{verifier:' is not valid YAML"):
        load_config(None, ["reward.weights={verifier:"])


@pytest.mark.parametrize(("key", "good", "bad"), [
    ("loss.aggregation", ["", "token_mean", "seq_mean_token_mean", "prompt_mean", "constant", "wapo"],
     ["token-mean", "mean"]),
    ("loss.std_norm", ["", "group", "batch", "none"], ["std"]),
    ("log.progress", ["auto", "bar", "plain", "none"], ["quiet", "Bar"]),
    ("train.device", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"], ["gpu", "tpu9", "cuda:", "cuda:x", "cpu:0"]),
])
def test_string_enums(key, good, bad):
    for v in good:
        load_config(None, [f"{key}='{v}'"])
    for v in bad:
        with pytest.raises(ConfigError, match=f"^{key}: "):
            load_config(None, [f"{key}='{v}'"])


def test_cli_out_of_range_exits_2_with_one_line_and_no_run_dir(tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["train", "quickstart", "train.steps=-3", f"train.out_dir={out}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: train.steps: must be >= 1 (got -3)"
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_every_shipped_config_loads_and_validates(tmp_path):
    from rlvr.model.io import save_policy
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer
    from rlvr.train.validate import validate

    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "rlvr" / "configs").glob("*.yaml")) + sorted((root / "configs").glob("*.yaml"))
    assert len(files) >= 8
    for f in files:
        cfg = load_config(f)
        if cfg.model.kind == "hf" or cfg.model.init_from:
            cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, path="tiny-hf:llama", init_from=""))
        if cfg.loss.teacher:  # a checkpoint the user trains first: a stand-in with the student's tokenizer
            save_policy(TinyGPT(cfg.model, CharTokenizer().vocab_size), CharTokenizer(), tmp_path / f.stem)
            cfg = dataclasses.replace(cfg, loss=dataclasses.replace(cfg.loss, teacher=str(tmp_path / f.stem)))
        validate(cfg)
