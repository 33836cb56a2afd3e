"""reward.kind=funcs: TRL-signature reward functions named in the config, weighted, TRL's None rule."""

from __future__ import annotations

import math

import pytest

from rlvr.config import ConfigError, load_config
from rlvr.errors import UserError
from rlvr.rewards import funcs as rf
from rlvr.train.validate import validate
from rlvr.types import Problem

USER_REWARDS = '''
import asyncio

def length(prompts, completions, **kwargs):
    return [float(len(c)) for c in completions]

def picky(prompts, completions, answer, **kwargs):
    return [None if a == "skip" else float(c.strip() == a) for c, a in zip(completions, answer)]

async def slow_one(prompts, completions, **kwargs):
    await asyncio.sleep(0)
    return [1.0 for _ in completions]

def broken(prompts, completions, **kwargs):
    raise RuntimeError("boom")

def no_kwargs(x):
    return [0.0]
'''


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "my_rewards.py"
    path.write_text(USER_REWARDS)
    return str(path)


def _problems(answers):
    return [Problem(f"p{i}", f"q{i}", a, (), {"tests": [f"t{i}"], "only_first": 1} if i == 0 else {"tests": [f"t{i}"]})
            for i, a in enumerate(answers)]


def test_entries_and_columns() -> None:
    assert rf.entries(["math", {"name": "format", "weight": 0.5}]) == [("math", 1.0), ("format", 0.5)]
    with pytest.raises(UserError, match="reward.funcs\\[0\\]"):
        rf.entries([{"fn": "math"}])
    cols = rf.columns_of(_problems(["1", "2"]))
    assert cols == {"answer": ["1", "2"], "tests": [["t0"], ["t1"]]}  # meta keys shared by all rows only


def test_weighted_sum_with_trls_none_rule(user_file) -> None:
    probs = _problems(["ab", "skip", "x"])
    completions = ["ab", "zz", "y"]
    funcs = [f"{user_file}:picky", {"name": f"{user_file}:length", "weight": 0.5}]
    reward, st = rf.funcs_reward(funcs, ["q"] * 3, completions, probs, workers=0)
    # row 0: picky 1 + 0.5*2; row 1: picky None (left out) + 0.5*2; row 2: 0 + 0.5*1
    assert reward.tolist() == [2.0, 1.0, 0.5]
    assert st["by_func"][f"{user_file}:picky"] == pytest.approx(0.5) and st["none_all"] == 0
    reward, st = rf.funcs_reward([f"{user_file}:picky"], ["q"], ["zz"], _problems(["skip"]), workers=0)
    assert reward.tolist() == [0.0] and st["none_all"] == 1 and math.isnan(st["by_func"][f"{user_file}:picky"])


def test_async_functions_registry_names_and_modules(user_file) -> None:
    probs = _problems(["1", "2"])
    reward, _ = rf.funcs_reward([f"{user_file}:slow_one", "exact", "rlvr.rewards.registry:format_reward"],
                                ["q", "q"], ["#### 1", "no answer here"], probs, workers=0)
    assert reward.tolist() == [1.0 + 1.0 + 1.0, 1.0 + 0.0 + 0.0]  # async + exact + format


def test_failures_score_the_failure_value_and_are_counted(user_file) -> None:
    reward, st = rf.funcs_reward([f"{user_file}:broken", f"{user_file}:slow_one"], ["q"], ["c"], _problems(["a"]),
                                 failure_value=-1.0, workers=0)
    assert reward.tolist() == [0.0] and st["failures"] == 1 and "boom" in st["errors"][0]


@pytest.mark.parametrize(("spec", "match"), [
    ("nope.py:length", "does not exist"),
    ("{f}:missing", "has no function 'missing'"),
    ("{f}:no_kwargs", "does not fit TRL's signature"),
    ("no_such_module_xyz:f", "cannot import module"),
    ("maths", "did you mean 'math'"),
])
def test_bad_functions_are_refused_at_load(user_file, spec, match) -> None:
    with pytest.raises(UserError, match=match):
        rf.check_funcs([spec.replace("{f}", user_file)], ["answer"])


def test_config_keys_are_validated(user_file) -> None:
    with pytest.raises(ConfigError, match="reward.kind=funcs needs functions"):
        load_config("quickstart", ["reward.kind=funcs"])
    with pytest.raises(ConfigError, match="set reward.kind=funcs"):
        load_config("quickstart", ["reward.funcs=[math]"])
    with pytest.raises(ConfigError, match="reward.funcs\\[0\\]"):
        load_config("quickstart", ["reward.kind=funcs", "reward.funcs=[{name: math, weight: x}]"])
    cfg = load_config("quickstart", ["reward.kind=funcs", f"reward.funcs=[exact, {{name: '{user_file}:length', "
                                     "weight: 0.01}]"])
    validate(cfg)
    bad = load_config("quickstart", ["reward.kind=funcs", f"reward.funcs=['{user_file}:no_kwargs']"])
    with pytest.raises(ConfigError, match="reward.funcs: .*TRL's signature"):
        validate(bad)


@pytest.mark.filterwarnings("ignore:step 1:RuntimeWarning")
def test_a_training_step_uses_the_functions(user_file, tmp_path) -> None:
    from rlvr.log import read_metrics
    from rlvr.train.loop import train

    over = ["model.d_model=32", "model.n_head=2", "model.n_layer=1", "model.context=64", "train.steps=1",
            "algo.prompts_per_step=2", "algo.group_size=2", "sampling.max_new_tokens=8",
            "sampling.interruption_budget=0", "train.eval_problems=2", "train.eval_every=0", "log.progress=none",
            "task.retention_tasks=[]", "pretrain.tokens=2000", "reward.kind=funcs",
            f"reward.funcs=['{user_file}:length']", f"train.out_dir={tmp_path}", "algo.zero_var_filter=false",
            "algo.npr_threshold=0"]
    run = train(load_config("quickstart", over), run_dir=tmp_path / "run", progress="none")
    rows = read_metrics(run)
    step = [r for r in rows if r.get("step") == 1][0]
    mean_len = step.get("completion_len_mean", step.get("response_len"))
    assert step["reward"] == pytest.approx(mean_len, rel=0.5) and step["reward"] > 1  # the length, not 0/1


BAD_RETURNS = '''
import time

import numpy as np
import torch

def as_numpy(prompts, completions, **kwargs):
    return np.array([float(len(c)) for c in completions])

def as_tensor(prompts, completions, **kwargs):
    return torch.tensor([2.0 for _ in completions])

def as_tuple(prompts, completions, **kwargs):
    return tuple(0.5 for _ in completions)

def as_scalar(prompts, completions, **kwargs):
    return 1.0

def as_nan(prompts, completions, **kwargs):
    return [float("nan") for _ in completions]

def hangs(prompts, completions, **kwargs):
    time.sleep(60)
    return [1.0 for _ in completions]

def raises(prompts, completions, **kwargs):
    raise RuntimeError("always")
'''


@pytest.fixture
def bad_file(tmp_path):
    path = tmp_path / "bad_rewards.py"
    path.write_text(BAD_RETURNS)
    return str(path)


def test_any_finite_numeric_sequence_is_a_score(bad_file) -> None:
    probs = _problems(["a", "b"])
    for name, want in (("as_numpy", [3.0, 1.0]), ("as_tensor", [2.0, 2.0]), ("as_tuple", [0.5, 0.5])):
        reward, st = rf.funcs_reward([f"{bad_file}:{name}"], ["q", "q"], ["abc", "d"], probs, workers=0)
        assert reward.tolist() == want and st["failures"] == 0, name  # b87d620: a NumPy array was a failure
    for name in ("as_scalar", "as_nan"):
        reward, st = rf.funcs_reward([f"{bad_file}:{name}"], ["q", "q"], ["abc", "d"], probs, workers=0,
                                     failure_value=-1.0)
        assert reward.tolist() == [-1.0, -1.0] and st["failures_by_func"][f"{bad_file}:{name}"] == 2, name


def _scored(funcs, n=8, rate=0.5):
    from rlvr.config import RewardConfig
    from rlvr.rewards.scoring import compute_rewards
    from rlvr.types import Verdict

    class Rollouts:
        texts = ["c"] * n

    cfg = RewardConfig(kind="funcs", funcs=tuple(funcs), timeout_s=0.5)
    return compute_rewards(cfg, Rollouts(), [Verdict(0.0, "wrong")] * n, 2, rows=_problems(["a"] * n),
                           where="step 1", max_failure_rate=rate)


@pytest.mark.filterwarnings("ignore:step 1:RuntimeWarning")
@pytest.mark.parametrize("name", ["raises", "as_nan", "as_scalar"])
def test_a_function_failing_past_the_rate_stops_the_run(bad_file, name) -> None:
    # b87d620: every sample scored 0, a warning, and the run went on (exit 0)
    with pytest.raises(UserError, match=f"{name}'? failed for 8/8 completions.*max_reward_failure_rate=0.5"):
        _scored([f"{bad_file}:{name}"])
    reward, _, _ = _scored([f"{bad_file}:{name}"], rate=1.0)  # allowed: scored the failure value
    assert reward.tolist() == [0.0] * 8


@pytest.mark.filterwarnings("ignore:step 1:RuntimeWarning")
def test_a_hanging_function_costs_a_few_timeouts_not_one_per_sample(bad_file) -> None:
    spec = f"{bad_file}:hangs"
    reward, st = rf.funcs_reward([spec], ["q"] * 8, ["c"] * 8, _problems(["a"] * 8), timeout_s=0.5,
                                 max_failure_rate=0.25)
    # 2 failures allowed: the pool gives up once 3 have timed out (2 workers: 3 or 4 ran); b87d620: 8 timeouts
    assert st["failures_by_func"][spec] == 8 and 3 <= st["timeouts"] <= 4
    with pytest.raises(UserError, match="hangs'? failed for 8/8"):
        _scored([spec], n=8, rate=0.25)


def test_the_pool_gives_up_after_max_failures() -> None:
    from rlvr.rewards.pool import ScoringPool

    def boom(x):
        raise ValueError(x)

    results, stats = ScoringPool(0).map_with_stats(boom, [((i,), {}) for i in range(6)], max_failures=1)
    assert [r.skipped for r in results] == [False, False, True, True, True, True]
    assert (stats.exceptions, stats.skipped) == (2, 4)


def test_a_file_that_hangs_at_import_is_refused(tmp_path, monkeypatch) -> None:
    import time

    path = tmp_path / "sleepy.py"
    path.write_text("import time\ntime.sleep(30)\n\ndef f(prompts, completions, **kw):\n    return [0.0]\n")
    monkeypatch.setattr(rf, "IMPORT_TIMEOUT_S", 0.5)
    t0 = time.monotonic()
    with pytest.raises(UserError, match="took more than 0.5 s to import"):
        rf.load(f"{path}:f")
    assert time.monotonic() - t0 < 5
