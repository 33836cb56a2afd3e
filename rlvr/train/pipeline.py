"""Asynchronous PipelineRL-style training with bounded lag (``pipeline.mode=async``).

Generator workers sample continuously into a bounded queue of scored prompt groups
(:class:`rlvr.train.lag_queue.LagQueue`); the trainer's step (:func:`rlvr.train.step.rl_step`,
with a :class:`Pipeline` as its source) takes P groups of G, learns, and publishes its new
weights; generators pick them up between decoding chunks through the sampler's ``weight_sync``
hook (in-flight update: sequences keep their KV cache; every token keeps the behaviour log-prob
and the policy version that produced it). Rewards are computed in the generator worker (local)
or a verifier actor (Ray), by the same reward phase as the sync step
(:func:`rlvr.rewards.scoring.score_rollouts`), off the trainer's critical path.

Policy version: the number of trainer steps whose weights have been published (``st.step``).
With k = ``pipeline.max_lag`` no consumed sample is more than k versions old (see lag_queue);
k = 0 is the synchronous schedule, and gives the same batches as the sync step (each worker
samples with :func:`rlvr.train.state.sampling_generator` keyed by its version).
The queue is not checkpointed: a resumed run starts generating from the checkpoint's weights
(staleness 0) and whatever was queued when the run stopped is counted as ``drained_at_stop``.
"""

from __future__ import annotations

import copy
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable

import torch

from rlvr.algo.advantages import mixed_outcome_groups
from rlvr.errors import PipelineError
from rlvr.log import warn
from rlvr.rewards.scoring import score_rollouts
from rlvr.rollout.engine import sample
from rlvr.tasks.environment import environments_for
from rlvr.train.lag_queue import LagQueue, ScoredGroup
from rlvr.train.state import TrainState, sampling_generator
from rlvr.train.step import Collected
from rlvr.train.step_metrics import oldest_versions, staleness
from rlvr.train.weights import WeightStore
from rlvr.types import ScoredBatch


# ----------------------------------------------------------------------------- producing groups
def make_groups(cfg, batch: ScoredBatch, worker: int, chunk: int) -> tuple[list, list]:
    """Split a scored chunk into one-group ScoredGroups -> (kept, filtered [(reason, group)]).
    With DAPO dynamic sampling, groups that are all right or all wrong are filtered
    (reason ``zero_variance``: no learning signal)."""
    G, rb = batch.group_size, batch.rollouts
    oldest_B = oldest_versions(rb.versions, rb.completion_mask)
    mixed_P = mixed_outcome_groups(batch.correct_P_G())
    kept, filtered = [], []
    for i in range(batch.n_groups):
        g = ScoredGroup(batch.select(torch.tensor([i])), worker, chunk, int(oldest_B[i * G : (i + 1) * G].min()))
        if cfg.algo.dynamic_sampling and not bool(mixed_P[i]):
            filtered.append(("zero_variance", g))
        else:
            kept.append(g)
    return kept, filtered


class SamplingStreams:
    """Per-version sampling RNG of one generator: the ``part``-th call at a version gets its own stream."""

    def __init__(self, seed: int, worker: int):
        self.seed, self.worker, self.version, self.part = seed, worker, None, 0

    def next(self, version: int) -> torch.Generator:
        self.part = self.part + 1 if version == self.version else 0
        self.version = version
        return sampling_generator(self.seed, version, self.worker, self.part)


class LocalProducer:
    """Sampling + rewards for one generator thread, on its own model copy synced from a WeightStore."""

    def __init__(self, st: TrainState, template: torch.nn.Module, store: WeightStore, idx: int):
        self.st, self.store, self.idx = st, store, idx
        self.model = copy.deepcopy(template)
        self.version = -1
        self.streams = SamplingStreams(st.cfg.train.seed, idx)
        self.sync()

    def sync(self) -> int | None:
        """The sampler's weight_sync hook: new version if the store had newer weights."""
        new = self.store.pull(self.model, self.version)
        if new is not None:
            self.version = new
        return new

    def __call__(self, problems: list, chunk: int) -> tuple:
        st, cfg = self.st, self.st.cfg
        torch.set_num_threads(threads_per_worker(cfg))
        self.sync()
        G = cfg.algo.group_size
        rows = [p for p in problems for _ in range(G)]
        rb = sample(self.model, st.tok, [p.prompt for p in rows], st.params,
                    version=self.version, generator=self.streams.next(self.version), weight_sync=self.sync,
                    sync_every=cfg.pipeline.sync_every,
                    environments=environments_for(st.task, rows, st.params), problems=rows)
        batch = score_rollouts(cfg, st.task, rb, problems, st.params.max_new_tokens, f"generator {self.idx}",
                               st.count)
        return make_groups(cfg, batch, self.idx, chunk)


def threads_per_worker(cfg) -> int:
    """Intra-op threads per thread of the local backend: the cores shared by workers + trainer."""
    return max(1, (os.cpu_count() or 1) // (cfg.pipeline.workers + 1))


class LocalBackend:
    """Generators as threads of this process (each with its own model copy); weights by WeightStore."""

    def __init__(self, st: TrainState):
        self.st = st
        # requires_grad kept as in the policy: it changes which kernels the sampler runs (by an ulp), and
        # generators must sample exactly what the trainer would
        self.template = copy.deepcopy(st.model).eval()
        pc = st.cfg.pipeline
        self.store = WeightStore(self.template, st.step, pc.bucket_mb, pc.timeout_s)
        self._threads = torch.get_num_threads()
        torch.set_num_threads(threads_per_worker(st.cfg))

    def producer(self, idx: int) -> LocalProducer:
        return LocalProducer(self.st, self.template, self.store, idx)

    def publish(self, model: torch.nn.Module, version: int) -> None:
        self.store.publish(model, version)

    def close(self) -> None:
        torch.set_num_threads(self._threads)


# ----------------------------------------------------------------------------- workers
class GeneratorWorker:
    """A thread: claim -> prompts -> produce (sample + rewards) -> queue; restarted after a crash,
    up to ``max_restarts`` times, then it stops and records the error for the trainer."""

    def __init__(self, idx: int, make_producer: Callable, q: LagQueue, next_problems: Callable[[int], list],
                 chunk: int, max_restarts: int, poll_s: float = 0.2):
        self.idx, self.make_producer, self.q, self.next_problems = idx, make_producer, q, next_problems
        self.chunk, self.max_restarts, self.poll_s = chunk, max_restarts, poll_s
        self.busy_s = self.idle_s = 0.0
        self.restarts = self.chunks = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"rlvr-generator-{idx}", daemon=True)

    def start(self) -> GeneratorWorker:
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self._loop(self.make_producer(self.idx))
                return
            except Exception as e:  # noqa: BLE001 - reported to the trainer, never swallowed
                self.restarts += 1
                if self.restarts > self.max_restarts or self.stop.is_set():
                    self.error = e
                    self.q.wake()
                    return
                warn(f"generator worker {self.idx} crashed ({type(e).__name__}: {e}); "
                     f"restart {self.restarts}/{self.max_restarts}")

    def _loop(self, produce: Callable) -> None:
        while not self.stop.is_set():
            t = time.monotonic()
            n = self.q.claim(self.chunk, self.poll_s)
            self.idle_s += time.monotonic() - t
            if n is None:
                continue
            t = time.monotonic()
            try:
                kept, filtered = produce(self.next_problems(n), self.chunks)
            except BaseException:
                self.q.release(n)
                raise
            finally:
                self.busy_s += time.monotonic() - t
            self.chunks += 1
            self.q.put(kept, n, filtered)


# ----------------------------------------------------------------------------- the trainer's source
class Pipeline:
    """The trainer's end of the async pipeline: a :class:`rlvr.train.step.BatchSource`."""

    def __init__(self, st: TrainState, backend):
        pc, P = st.cfg.pipeline, st.cfg.algo.prompts_per_step
        self.st, self.backend, self.timeout_s = st, backend, pc.timeout_s
        self.q = LagQueue(P, pc.max_lag, st.step)
        chunk = min(pc.chunk_groups or math.ceil(P / pc.workers), P * (pc.max_lag + 1))
        self.workers = [GeneratorWorker(i, backend.producer, self.q, st.next_problems, chunk, pc.max_restarts)
                        for i in range(pc.workers)]
        for w in self.workers:
            w.start()
        self._last_end = time.monotonic()
        self._t0 = self._t_wait = 0.0
        self._seen = {"gen_busy_s": 0.0, "gen_idle_s": 0.0, "rows": 0, "tokens": 0, "discarded": Counter()}

    def check(self) -> None:
        """Raise if a generator worker died for good."""
        for w in self.workers:
            if w.error is not None:
                raise PipelineError(
                    f"generator worker {w.idx} crashed {w.restarts} times (pipeline.max_restarts="
                    f"{w.max_restarts}); last error: {type(w.error).__name__}: {w.error}") from w.error
        if not any(w.thread.is_alive() for w in self.workers) and not self.q.closed:
            raise PipelineError("every generator worker has exited; see the warnings above")

    def collect(self, st: TrainState) -> Collected:
        """The next P groups with staleness <= k, in arrival order."""
        self._t0 = time.monotonic()
        groups = self.q.take(st.cfg.algo.prompts_per_step, self.timeout_s, self.check)
        self._t_wait = time.monotonic() - self._t0
        batch = ScoredBatch.concat([g.batch for g in groups], st.tok.pad_id)
        rows, tokens = self._generated(batch)
        lag = Counter(staleness(st.step, batch.rollouts.versions, batch.rollouts.completion_mask).tolist())
        return Collected(batch, batch, rows, tokens, {"lag_hist": {str(k): lag[k] for k in sorted(lag)},
                                                      "queue_depth": self.q.depth()})

    def after_update(self, st: TrainState, got: Collected) -> dict:
        """Publish the new weights (version st.step + 1: this step is done), then the timing metrics."""
        self.backend.publish(st.model, st.step + 1)  # weights first, then the version generators gate on
        self.q.publish(st.step + 1)
        return self._pipeline_metrics(st, got.kept)

    def _generated(self, batch: ScoredBatch) -> tuple[int, int]:
        """Rows/tokens generated since the last step: consumed plus discarded."""
        q, seen = self.q, self._seen
        rows, tokens = q.discarded_rows - seen["rows"], q.discarded_tokens - seen["tokens"]
        seen["rows"], seen["tokens"] = q.discarded_rows, q.discarded_tokens
        return batch.size + rows, batch.rollouts.n_tokens + tokens

    def _pipeline_metrics(self, st: TrainState, batch: ScoredBatch) -> dict:
        now, seen = time.monotonic(), self._seen
        busy, idle = sum(w.busy_s for w in self.workers), sum(w.idle_s for w in self.workers)
        interval = max(1e-9, now - self._last_end)
        self._last_end = now
        for reason, n in (self.q.discarded - seen["discarded"]).items():
            st.count(f"pipeline_discarded_{reason}", n)
        seen["discarded"] = Counter(self.q.discarded)
        m = {
            "gen_busy_s": busy - seen["gen_busy_s"], "gen_idle_s": idle - seen["gen_idle_s"],
            "trainer_busy_s": now - self._t0 - self._t_wait, "trainer_idle_s": self._t_wait,
            "samples_per_s": batch.size / interval, "tokens_per_s": batch.rollouts.n_tokens / interval,
            "worker_restarts": sum(w.restarts for w in self.workers),
        }
        seen["gen_busy_s"], seen["gen_idle_s"] = busy, idle
        return m

    def close(self) -> None:
        """Stop the workers (bounded joins), drain the queue, shut the backend down."""
        for w in self.workers:
            w.stop.set()
        drained = self.q.close()
        deadline = time.monotonic() + min(self.timeout_s, 60.0)
        for w in self.workers:
            w.thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [w.idx for w in self.workers if w.thread.is_alive()]
        if stuck:
            warn(f"generator workers {stuck} did not stop in time; abandoning them (daemon threads)")
        if drained:
            self.st.count("pipeline_discarded_drained_at_stop", drained)
        self.backend.close()
