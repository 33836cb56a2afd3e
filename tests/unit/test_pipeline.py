"""Async pipeline: lag bound and accounting under random speeds (fake generators and trainer),
bucketed weight sync, in-flight weight updates in the real sampler, crashed/stuck workers,
and a short async run with resume."""

from __future__ import annotations

import copy
import json
import random
import threading
import time
from collections import defaultdict

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st_

from rlvr.config import ModelConfig, load_config
from rlvr.errors import PipelineError, PipelineTimeout
from rlvr.model.io import save_policy
from rlvr.model.logprobs import score
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.rollout.sample import SampleParams, generate
from rlvr.train.lag_queue import LagQueue, ScoredGroup
from rlvr.train.pipeline import GeneratorWorker
from rlvr.train.step import rl_step
from rlvr.train.step_metrics import staleness
from rlvr.train.weights import WeightStore, bucket_layout, pack, unpack_into
from rlvr.types import Problem, RolloutBatch, ScoredBatch, Verdict


def _rb(rows: int, version: int) -> RolloutBatch:
    z, one = torch.zeros(rows, 1), torch.ones(rows, 1, dtype=torch.bool)
    return RolloutBatch(prompt_ids=z.long(), prompt_mask=z.bool(), completion_ids=z.long(),
                        completion_mask=one, loss_mask=one, behaviour_logp=z, entropy=z,
                        versions=torch.full((rows, 1), version), finish_reason=["eos"] * rows)


def _group(uid, worker: int, chunk: int, oldest: int) -> ScoredGroup:
    batch = ScoredBatch(_rb(2, oldest), [Verdict(0.0, "wrong")] * 2, torch.zeros(2), torch.zeros(2),
                        [Problem(uid, "", "")], 2)
    return ScoredGroup(batch, worker, chunk, oldest)


def _uid(g: ScoredGroup):
    return g.batch.problems[0].id


# ----------------------------------------------------------------------------- definitions
def test_staleness_is_trainer_version_minus_oldest_real_token():
    versions = torch.tensor([[3, 4, 5, 0], [5, 5, 5, 5], [2, 7, 7, 7]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)  # padding ignored
    assert staleness(7, versions, mask).tolist() == [4, 2, 5]


def test_claims_stop_at_the_lag_bound_and_split_at_batch_boundaries():
    q = LagQueue(P=4, max_lag=0, version=0)
    assert q.claim(3, 0.0) == 3
    assert q.claim(3, 0.0) == 1  # only one position left in batch 0 (k = 0: nothing beyond it)
    assert q.claim(1, 0.0) is None
    q.put([_group(i, 0, 0, 0) for i in range(3)], 3)
    q.put([_group(3, 0, 1, 0)], 1)
    assert len(q.take(4, 1.0)) == 4
    assert q.claim(1, 0.0) is None  # batch 0 taken, version 0: batch 1 would be 1 step stale
    q.publish(1)
    assert q.claim(8, 0.0) == 4


def test_stale_groups_are_discarded_with_a_reason():
    q = LagQueue(P=2, max_lag=1, version=0)
    q.claim(4, 0.0)
    q.put([_group(i, 0, 0, oldest=0) for i in range(2)] + [_group(i, 0, 0, oldest=2) for i in (2, 3)], 4)
    q.publish(2)  # the first two are now 2 versions old
    got = q.take(2, 1.0)
    assert [_uid(g) for g in got] == [2, 3]
    assert q.discarded == {"stale": 2} and q.discarded_rows == 4


def test_take_times_out_instead_of_hanging():
    q = LagQueue(P=1, max_lag=0, version=0)
    t = time.monotonic()
    with pytest.raises(PipelineTimeout, match="pipeline.timeout_s"):
        q.take(1, 0.3)
    assert time.monotonic() - t < 3


# ----------------------------------------------------------------------------- property test
class _FakeSource:
    def __init__(self):
        self.n, self.lock = 0, threading.Lock()

    def next(self, n):
        with self.lock:
            ids = list(range(self.n, self.n + n))
            self.n += n
            return ids


class _FakeProducer:
    """Reads the published version at start (and later: in-flight), sleeps, may filter or crash."""

    def __init__(self, idx, box, log, rng, gen_ms, crash_p, filter_p):
        self.idx, self.box, self.log, self.rng = idx, box, log, rng
        self.gen_ms, self.crash_p, self.filter_p = gen_ms, crash_p, filter_p

    def __call__(self, problems, chunk):
        start = self.box[0]
        time.sleep(self.rng.choice(self.gen_ms) / 1000)
        if self.rng.random() < self.crash_p:
            raise RuntimeError("injected crash")
        self.log[self.idx].append(start)
        kept, filtered = [], []
        for p in problems:
            g = _group(p, self.idx, chunk, start)
            (filtered.append(("zero_variance", g)) if self.rng.random() < self.filter_p else kept.append(g))
        self.log["produced"].extend(problems)
        return kept, filtered


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(P=st_.integers(1, 4), k=st_.integers(0, 3), workers=st_.integers(1, 3), chunk=st_.integers(1, 5),
       gen_ms=st_.lists(st_.sampled_from([0, 1, 4]), min_size=1, max_size=3),
       train_ms=st_.lists(st_.sampled_from([0, 1, 4]), min_size=1, max_size=3),
       steps=st_.integers(2, 6), crash_p=st_.sampled_from([0.0, 0.2]), filter_p=st_.sampled_from([0.0, 0.3]),
       seed=st_.integers(0, 1000))
def test_lag_bound_and_accounting_under_random_speeds(P, k, workers, chunk, gen_ms, train_ms, steps, crash_p,
                                                      filter_p, seed):
    q = LagQueue(P, k, version=0)
    box, log, src = [0], defaultdict(list), _FakeSource()
    rngs = [random.Random(seed * 10 + i) for i in range(workers)]
    make = lambda i: _FakeProducer(i, box, log, rngs[i], gen_ms, crash_p, filter_p)
    ws = [GeneratorWorker(i, make, q, src.next, min(chunk, P * (k + 1)), max_restarts=1000, poll_s=0.01).start()
          for i in range(workers)]
    rng, consumed = random.Random(seed), []
    try:
        for s in range(steps):
            got = q.take(P, 10.0)
            assert len(got) == P
            assert all(q.version - g.oldest <= k for g in got)  # the bound
            assert q.taken + q.live <= (q.version - q.v0 + k + 1) * P  # generators never ran ahead
            consumed += [_uid(g) for g in got]
            time.sleep(rng.choice(train_ms) / 1000)
            box[0] = s + 1  # "publish weights" before the version the gate reads
            q.publish(s + 1)
    finally:
        for w in ws:
            w.stop.set()
        q.close()
        for w in ws:
            w.thread.join(5)
    assert not any(w.thread.is_alive() for w in ws)
    assert len(consumed) == len(set(consumed)) == steps * P  # nothing duplicated
    produced = log["produced"]
    assert len(produced) == len(set(produced)) == q.produced
    assert set(consumed) <= set(produced)
    assert q.produced == len(consumed) + sum(q.discarded.values())  # nothing dropped silently
    assert set(q.discarded) <= {"stale", "zero_variance", "drained_at_stop"}
    for i in range(workers):
        assert log[i] == sorted(log[i])  # versions monotone per generator


# ----------------------------------------------------------------------------- weight sync
def test_buckets_round_trip_and_respect_size_and_dtype():
    ts = [torch.randn(10), torch.randn(3, 4), torch.randn(100), torch.ones(5, dtype=torch.bfloat16),
          torch.randn(2)]
    layout = bucket_layout(ts, bucket_bytes=60 * 4)
    assert layout == [[0, 1], [2], [3], [4]]  # 22 floats fit, 100 floats alone, dtype change splits
    out = [torch.zeros_like(t) for t in ts]
    unpack_into(out, layout, pack(ts, layout))
    assert all(torch.equal(a, b) for a, b in zip(ts, out))


def test_weight_store_pull_copies_only_newer_and_times_out_when_stuck():
    torch.manual_seed(0)
    a, b = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    store = WeightStore(a, version=0, bucket_mb=1, timeout_s=0.3)
    assert store.pull(b, have=0) is None and not torch.equal(a.weight, b.weight)
    with torch.no_grad():
        a.weight.mul_(2)
    store.publish(a, 1)
    assert store.pull(b, have=0) == 1 and torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    store.publish(a, 2)
    store._lock.acquire()  # a publisher stuck mid-copy
    try:
        with pytest.raises(PipelineTimeout, match="weight lock"):
            store.pull(b, have=1)
    finally:
        store._lock.release()


# ----------------------------------------------------------------------------- in-flight update
def _tiny(tie: bool = True) -> TinyGPT:
    torch.manual_seed(0)
    cfg = ModelConfig(n_layer=1, d_model=32, n_head=2, context=64, tie_weights=tie)
    return TinyGPT(cfg, CharTokenizer().vocab_size)


class _SwitchOnFirstSync:
    """weight_sync hook: on its first call the 'trainer' publishes version 1, then the generator pulls."""

    def __init__(self, store, gen_model, new_model):
        self.store, self.model, self.new, self.calls, self.version = store, gen_model, new_model, 0, 0

    def __call__(self):
        self.calls += 1
        if self.calls == 1:
            self.store.publish(self.new, 1)
        v = self.store.pull(self.model, self.version)
        self.version = v if v is not None else self.version
        return v


def _generate_with_switch(a, b, sync_every=5):
    tok = CharTokenizer()
    ids, mask = tok.batch_encode_left(["12+3=", "7*8="])
    g = copy.deepcopy(a)
    hook = _SwitchOnFirstSync(WeightStore(a, 0), g, b)
    rb = generate(g, ids, mask, SampleParams(max_new_tokens=14), eos_id=10_000, pad_id=tok.pad_id, version=0,
                  generator=torch.Generator().manual_seed(1), weight_sync=hook, sync_every=sync_every)
    return rb, ids, mask


def test_in_flight_update_keeps_versions_and_behaviour_logp_of_each_weight_set():
    a = _tiny(tie=False)
    b = copy.deepcopy(a)
    with torch.no_grad():  # head + final norm only: the KV cache is the same under a and b
        b.lm_head.weight.add_(0.5 * torch.randn_like(b.lm_head.weight))
        b.norm.weight.mul_(1.5)
    rb, _, _ = _generate_with_switch(a, b)
    assert rb.completion_mask.all()
    assert (rb.versions[:, :5] == 0).all() and (rb.versions[:, 5:] == 1).all()
    logp_a, logp_b = score(a, rb), score(b, rb)
    assert torch.allclose(rb.behaviour_logp[:, :5], logp_a[:, :5], atol=1e-5)
    assert torch.allclose(rb.behaviour_logp[:, 5:], logp_b[:, 5:], atol=1e-5)
    assert (rb.behaviour_logp[:, 5:] - logp_a[:, 5:]).abs().max() > 1e-2  # the switch did change them


@torch.no_grad()
def test_in_flight_update_continues_on_the_old_kv_cache():
    a = _tiny()
    b = copy.deepcopy(a)
    for p in b.parameters():
        p.add_(0.05 * torch.randn_like(p))
    rb, ids, mask = _generate_with_switch(a, b)
    assert (rb.versions[:, :5] == 0).all() and (rb.versions[:, 5:] == 1).all()
    # by hand: tokens 0..3 are fed through a (their keys/values stay cached), tokens 4.. through b
    T, Tp = rb.completion_ids.shape[1], ids.shape[1]
    cache = a.new_cache(2, Tp + T)
    cache.key_mask[:, :Tp] = mask
    logits = [a(ids, cache.key_mask[:, :Tp], cache)[:, -1]]
    for t in range(T - 1):
        s = cache.length
        cache.key_mask[:, s] = True
        model = a if t < 4 else b
        logits.append(model(rb.completion_ids[:, t : t + 1], cache.key_mask[:, : s + 1], cache)[:, -1])
    logp = torch.log_softmax(torch.stack(logits, 1), -1).gather(-1, rb.completion_ids[..., None]).squeeze(-1)
    assert torch.allclose(rb.behaviour_logp, logp, atol=1e-5)
    assert (rb.behaviour_logp[:, 5:] - score(b, rb)[:, 5:]).abs().max() > 1e-4  # not a recompute under b


# ----------------------------------------------------------------------------- the real pipeline
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("pipe")
    tok = CharTokenizer()
    save_policy(_tiny(), tok, d / "init")
    over = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"model.init_from={d / 'init'}",
            "task.train_size=64", "train.eval_problems=4", "train.eval_every=0", "algo.prompts_per_step=4",
            "algo.group_size=4", "algo.minibatches=2", "algo.npr_threshold=0", "sampling.max_new_tokens=12",
            "sampling.interruption_budget=0", "reward.kind=neg_entropy", f"train.out_dir={d}",
            "log.progress=none", "pipeline.mode=async", "pipeline.workers=2", "pipeline.max_lag=1",
            "pipeline.timeout_s=60"]
    return d, over


def _state(over, extra=()):
    from rlvr.train.state import build_policy, build_state

    cfg = load_config("quickstart", [*over, *extra])
    return build_state(cfg, *build_policy(cfg, "none"))


class _Backend:
    """LocalBackend whose producers misbehave: the first ``crashes`` producer builds crash at once."""

    def __init__(self, st, crashes=0, hang=None):
        from rlvr.train.pipeline import LocalBackend

        self.inner, self.crashes, self.hang = LocalBackend(st), crashes, hang

    def producer(self, idx):
        if self.hang is not None:
            def stuck(problems, chunk):
                self.hang.wait(30)
                raise RuntimeError("released")
            return stuck
        if self.crashes > 0:
            self.crashes -= 1
            raise RuntimeError("generator died (injected)")
        return self.inner.producer(idx)

    def publish(self, model, version):
        self.inner.publish(model, version)

    def close(self):
        self.inner.close()


def test_crashed_worker_is_restarted_then_the_run_stops_with_a_clear_error(tiny_run):
    from rlvr.train.pipeline import Pipeline

    _, over = tiny_run
    st = _state(over, ["pipeline.workers=1", "pipeline.max_restarts=1"])
    pipe = Pipeline(st, _Backend(st, crashes=1))
    try:
        m = rl_step(st, 2, pipe)  # one crash, one restart, then it works
        assert m["worker_restarts"] == 1 and m["lag_max"] == 0 and st.step == 1
    finally:
        pipe.close()
    pipe = Pipeline(st, _Backend(st, crashes=5))
    t = time.monotonic()
    with pytest.raises(PipelineError, match=r"worker 0 crashed 2 times .*injected"):
        rl_step(st, 2, pipe)
    pipe.close()
    assert time.monotonic() - t < 20


def test_stuck_worker_times_out_instead_of_hanging(tiny_run):
    from rlvr.train.pipeline import Pipeline

    _, over = tiny_run
    st = _state(over, ["pipeline.timeout_s=1.0"])
    release = threading.Event()
    pipe = Pipeline(st, _Backend(st, hang=release))
    t = time.monotonic()
    try:
        with pytest.raises(PipelineTimeout, match="waited 1s"):
            rl_step(st, 2, pipe)
    finally:
        release.set()
        pipe.close()
    assert time.monotonic() - t < 10


def test_async_run_logs_lag_keys_and_keeps_the_bound_across_resume(tiny_run):
    from rlvr.train.loop import train

    d, over = tiny_run
    run = train(load_config("quickstart", [*over, "train.steps=3", "train.checkpoint_every=2"]),
                run_dir=d / "run")
    run = train(resume=run, extra_steps=5)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]  # 4 and 5 from the resumed run
    for key in ("lag_max", "lag_mean", "lag_hist", "queue_depth", "gen_busy_s", "gen_idle_s",
                "trainer_busy_s", "trainer_idle_s", "samples_per_s", "tokens_per_s", "reward", "loss",
                "samples"):
        assert all(key in r for r in rows), key
    assert all(r["lag_max"] <= 1 and sum(r["lag_hist"].values()) == 16 for r in rows)
    assert rows[0]["lag_max"] == 0 and rows[3]["lag_max"] == 0  # a (re)started pipeline begins fresh
    assert any(r["lag_max"] == 1 for r in rows)  # generation overlapped training
    assert all(b["samples"] - a["samples"] >= 16 for a, b in zip(rows, rows[1:]))
    assert "grad_norm" in rows[-1]
    summary = json.loads((run / "train_summary.json").read_text())
    assert summary["steps"] == 5


def test_generator_scoring_isolates_counts_and_bounds_verifier_failures():
    from rlvr.errors import UserError
    from rlvr.rewards.scoring import score_rollouts
    from rlvr.tasks.arithmetic import ArithmeticTask

    class Flaky(ArithmeticTask):
        def verify(self, text, problem):
            if "boom" in text:
                raise ValueError("verifier bug")
            return super().verify(text, problem)

    task = Flaky()
    probs = task.problems("train", 2)
    cfg = load_config("quickstart", ["algo.group_size=2", "reward.timeout_s=0"])
    rb = RolloutBatch(*(torch.zeros(4, 1),) * 8, finish_reason=["eos"] * 4,
                      texts=["boom", f"A:{probs[0].answer}", "x", "y"])
    counts = defaultdict(int)
    batch = score_rollouts(cfg, task, rb, probs, 8, "generator 0", lambda k, n=1: counts.__setitem__(
        k, counts[k] + n))
    assert len(batch.verdicts) == 4 and batch.reward_B.tolist()[0] == cfg.train.reward_failure_value
    assert batch.reward_B.tolist()[1] == 1.0 and counts["reward_failures"] == 1
    rb.texts = ["boom"] * 4
    with pytest.raises(UserError, match="reward calls failed"):
        score_rollouts(cfg, task, rb, probs, 8, "generator 0")


def test_ray_address_from_the_environment_when_the_config_leaves_it_empty(monkeypatch):
    from rlvr.config import PipelineConfig
    from rlvr.train.ray_backend import actor_cpus, cluster_address

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert cluster_address(PipelineConfig()) == ""
    assert actor_cpus(PipelineConfig(), "trainer") < 1.0  # a local instance: shares of ray_num_cpus
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    assert cluster_address(PipelineConfig()) == "auto"
    assert actor_cpus(PipelineConfig(), "trainer") == 1.0  # a cluster: one CPU per actor
    assert cluster_address(PipelineConfig(ray_address="10.0.0.1:6379")) == "10.0.0.1:6379"  # the config wins
