"""One RL step, three ways to feed it: the sync step, the async pipeline at max_lag=0 and data
parallel with one rank must give the same parameters and the same value for every metric key
(wall times aside) over several steps, from the same config and seed. Both for a single-turn task
and for a tool task (multi-turn episodes with environment tokens, docs/tools.md)."""

from __future__ import annotations

import datetime
import math

import pytest
import torch
import torch.distributed as dist

from rlvr.config import load_config
from rlvr.model.io import save_policy
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.train.distributed import DataParallelSharding, DataParallelSource
from rlvr.train.pipeline import LocalBackend, Pipeline
from rlvr.train.state import build_policy, build_state
from rlvr.train.step import LOCAL, SyncSource, rl_step

STEPS = 4
WALL = {"wall_s", "gen_s", "train_s", "score_s", "scored_per_s", "gen_busy_s", "gen_idle_s", "trainer_busy_s",
        "trainer_idle_s", "samples_per_s", "tokens_per_s"}
# keys only one way of feeding has: the async pipeline's queue, data parallel's world size
OWN = {"lag_hist", "queue_depth", "worker_restarts", "world_size"}


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    d = tmp_path_factory.mktemp("steppers")
    tok = CharTokenizer()
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2"])
    torch.manual_seed(0)
    save_policy(TinyGPT(cfg.model, tok.vocab_size), tok, d / "init")
    return d


def _over(d, extra=()):
    # batch-level std, 2 mini-batches x 2 micro-batches, a KL anchor, a mixed reward and NPR: every part
    # of the step
    return ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"model.init_from={d / 'init'}",
            "task.train_size=48", "algo.prompts_per_step=4", "algo.group_size=4", "algo.minibatches=2",
            "algo.micro_batch_size=4", "algo.npr_threshold=0.5", "sampling.max_new_tokens=12",
            "sampling.interruption_budget=0", "loss.kl_coef=0.01", "reward.kind=mix",
            "reward.weights={verifier: 1.0, neg_entropy: 0.1}", "optim.lr=3e-3", "optim.warmup_steps=2",
            "pipeline.max_lag=0", "pipeline.workers=1", "pipeline.timeout_s=60", *extra]


ECHO_TASK = '''
import string

from rlvr.tasks.calculator import CalculatorTask
from rlvr.tasks.environment import Observation


class Echo:
    """Every lowercase letter closes a call (a random tiny model calls often); the answer is <letter>."""

    stop_strings = tuple(string.ascii_lowercase)

    def reset(self, problem):
        return ""

    def respond(self, turn):
        return Observation("<" + turn[-1] + ">", failed=turn[-1] == "e")


class EchoTask(CalculatorTask):
    def environment(self, problem, limits):
        return Echo()
'''


@pytest.fixture(scope="module")
def tool_task(init):
    path = init / "echo_task.py"
    path.write_text(ECHO_TASK)
    return [f"task.name={path}:EchoTask", "sampling.max_new_tokens=20", "sampling.max_turns=3"]


def _run(d, how: str, extra=()) -> tuple[list[torch.Tensor], list[dict]]:
    cfg = load_config("quickstart", _over(d, [*extra, *(["pipeline.mode=async"] if how == "async" else [])]))
    st = build_state(cfg, *build_policy(cfg, "none"))
    if how == "sync":
        source, sharding = SyncSource(), LOCAL
    elif how == "async":
        source, sharding = Pipeline(st, LocalBackend(st)), LOCAL
    else:
        source, sharding = DataParallelSource(st), DataParallelSharding(cfg.pipeline.bucket_mb)
    try:
        rows = [rl_step(st, STEPS, source, sharding) for _ in range(STEPS)]
    finally:
        source.close()
    return [p.detach().clone() for p in st.model.parameters()], rows


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@pytest.mark.parametrize("kind", ["single_turn", "tool"])
def test_sync_async_at_lag_zero_and_one_rank_data_parallel_agree(init, tool_task, tmp_path, kind):
    extra = tool_task if kind == "tool" else []
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # the async backend's threads; float results depend on the thread count
    try:
        sync = _run(init, "sync", extra)
        async_ = _run(init, "async", extra)
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=60))
        try:
            dp = _run(init, "dp", extra)
        finally:
            dist.destroy_process_group()
    finally:
        torch.set_num_threads(n)
    ref_params, ref_rows = sync
    assert ref_rows[-1]["step"] == STEPS and "grad_norm" in ref_rows[-1] and "kl_ref" in ref_rows[-1]
    assert any(r.get("retired_prompts", 0) for r in ref_rows) or "retired_prompts" in ref_rows[0]
    changed = sum(float((p - q).abs().max()) for p, q in zip(ref_params, _run_init_params(init)))
    assert changed > 0  # the steps moved the weights: the comparison below is not vacuous
    if kind == "tool":  # episodes with environment tokens were trained on
        assert all(r["tool_calls"] > 0 and r["env_tokens"] > 0 for r in ref_rows)
    for name, (params, rows) in {"async": async_, "data parallel": dp}.items():
        for p, q in zip(ref_params, params):
            assert torch.equal(p, q), f"{name}: parameters differ from the sync step"
        for s, (a, b) in enumerate(zip(ref_rows, rows)):
            keys = set(a) - WALL
            assert keys <= set(b), f"{name} step {s + 1} lacks {sorted(keys - set(b))}"
            assert set(b) - set(a) <= OWN | WALL, f"{name} step {s + 1} has extra keys {set(b) - set(a)}"
            diff = {k: (a[k], b[k]) for k in keys if not _same(a[k], b[k])}
            assert not diff, f"{name} step {s + 1}: {diff}"


def _run_init_params(d) -> list[torch.Tensor]:
    from rlvr.model.io import load_policy

    return [p.detach() for p in load_policy(d / "init")[0].parameters()]
