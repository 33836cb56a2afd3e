"""Asynchronous PipelineRL-style training with bounded lag (``pipeline.mode=async``).

Generator workers sample continuously into a bounded queue of scored prompt groups; the
trainer takes P groups of G, steps (advantages -> loss -> optimiser, the pieces of
:mod:`rlvr.train.step`) and publishes its new weights; generators pick them up between decoding
chunks through the sampler's ``weight_sync`` hook (in-flight update: sequences keep their KV
cache; every token keeps the behaviour log-prob and the policy version that produced it).
Rewards are computed in the generator worker (local) or a verifier actor (Ray), off the
trainer's critical path.

Policy version: the number of trainer steps whose weights have been published (``st.step`` at
publication; one publication per step, whatever the number of optimiser updates in it).

Staleness (the one definition): a sample consumed by the trainer at version V has
    staleness = V - min_t versions[t]
the trainer's current version minus the OLDEST version of any of its tokens, so the time it
spent in the queue counts. With k = ``pipeline.max_lag``, no sample with staleness > k reaches
the loss: generators block rather than start work that could exceed k (:class:`LagQueue`), and
the trainer discards (and counts, reason ``stale``) any sample that still would. k = 0 is the
synchronous schedule; ``pipeline.mode=sync`` keeps :func:`rlvr.train.step.rl_step` itself.
The queue is not checkpointed: a resumed run starts generating from the checkpoint's weights
(staleness 0) and whatever was queued when the run stopped is counted as ``drained_at_stop``.
"""

from __future__ import annotations

import copy
import math
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlvr.errors import UserError
from rlvr.log import warn
from rlvr.rollout.engine import concat_batches, sample, select_rows, verify_checked
from rlvr.train.distributed import PipelineError, PipelineTimeout, WeightStore
from rlvr.types import RolloutBatch

__all__ = ["LagQueue", "Pipeline", "PipelineError", "PipelineTimeout", "WeightStore", "staleness"]


def oldest_versions(versions_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> torch.Tensor:
    """(B,) the oldest policy version among each row's real tokens."""
    big = torch.iinfo(versions_B_T.dtype).max
    return versions_B_T.masked_fill(~mask_B_T, big).min(-1).values


def staleness(version: int, versions_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> torch.Tensor:
    """(B,) trainer version minus the oldest version of each sample's tokens."""
    return version - oldest_versions(versions_B_T, mask_B_T)


@dataclass
class ScoredGroup:
    """G scored completions of one prompt, as they travel through the queue."""

    problem: object
    rb: RolloutBatch  # G rows
    verdicts: list
    reward_G: torch.Tensor  # (G,)
    extra: dict
    worker: int
    chunk: int  # the worker's generation-call counter (monotone)
    oldest: int  # min version over the group's tokens

    @property
    def tokens(self) -> int:
        return int(self.rb.completion_mask.sum() + self.rb.prompt_mask.sum())


class LagQueue:
    """Bounded hand-off from generators to the trainer that enforces max lag k (thread-safe).

    Positions count groups since the pipeline started: ``taken`` went into batches, ``live`` are
    claimed and not yet resolved (being generated or queued). A group at position ``pos`` lands
    in batch ``pos // P``, which the trainer consumes at version ``v0 + pos // P``; so a claim
    made at version v may extend up to position ``(v - v0 + k + 1) * P - 1`` and no further
    (FIFO consumption keeps it within k; out-of-order arrival from several workers is caught by
    the staleness check in :meth:`take`).
    """

    def __init__(self, P: int, max_lag: int, version: int):
        self.P, self.k, self.v0, self.version = P, max_lag, version, version
        self._cv = threading.Condition()
        self._items: deque[ScoredGroup] = deque()
        self.taken = self.live = self.produced = 0
        self.discarded: Counter[str] = Counter()  # reason -> groups
        self.discarded_rows = self.discarded_tokens = 0
        self.closed = False

    def room(self) -> int:
        """Groups a generator may claim now without risking staleness > k."""
        return (self.version - self.v0 + self.k + 1) * self.P - self.taken - self.live

    def claim(self, n: int, timeout: float) -> int | None:
        """Block until at least one group may start; claim up to ``n``. None if closed or timed out."""
        with self._cv:
            self._cv.wait_for(lambda: self.closed or self.room() > 0, timeout)
            if self.closed or self.room() <= 0:
                return None
            m = min(n, self.room())
            self.live += m
            return m

    def put(self, groups: list[ScoredGroup], claimed: int, filtered: list[tuple[str, ScoredGroup]] = ()):
        """Deliver the groups of a claim; ``filtered`` were produced but dropped (with a reason)."""
        with self._cv:
            self.live -= claimed - len(groups)
            self.produced += len(groups) + len(filtered)
            for reason, g in filtered:
                self._discard(reason, g)
            if self.closed:  # produced after the stop: counted, never silently lost
                self.live -= len(groups)
                for g in groups:
                    self._discard("drained_at_stop", g)
            else:
                self._items.extend(groups)
            self._cv.notify_all()

    def release(self, claimed: int) -> None:
        """A claim that produced nothing (the worker crashed): free its positions."""
        with self._cv:
            self.live -= claimed
            self._cv.notify_all()

    def _discard(self, reason: str, g: ScoredGroup) -> None:
        self.discarded[reason] += 1
        self.discarded_rows += g.rb.size
        self.discarded_tokens += g.tokens

    def take(self, P: int, timeout: float, check: Callable[[], None] = lambda: None) -> list[ScoredGroup]:
        """Trainer: the next P groups in arrival order with staleness <= k; stale ones are discarded
        (reason ``stale``). ``check`` runs while waiting (raise there if workers died)."""
        deadline = time.monotonic() + timeout
        out: list[ScoredGroup] = []
        with self._cv:
            while len(out) < P:
                if not self._items:
                    check()
                    left = deadline - time.monotonic()
                    if self.closed:
                        raise PipelineError("the pipeline was closed while the trainer waited for samples")
                    if left <= 0:
                        raise PipelineTimeout(
                            f"the trainer waited {timeout:.0f}s for {P - len(out)} more prompt groups; "
                            "generators are stuck or too slow: raise pipeline.timeout_s or lower the batch")
                    self._cv.wait(min(left, 0.2))
                    continue
                g = self._items.popleft()
                self.live -= 1
                if self.version - g.oldest > self.k:
                    self._discard("stale", g)
                    self._cv.notify_all()
                    continue
                out.append(g)
                self.taken += 1
            self._cv.notify_all()
        return out

    def publish(self, version: int) -> None:
        with self._cv:
            self.version = version
            self._cv.notify_all()

    def wake(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def depth(self) -> int:
        return len(self._items)

    def close(self) -> int:
        """Stop: wake everyone, count what is still queued as ``drained_at_stop``; returns that count."""
        with self._cv:
            self.closed = True
            n = len(self._items)
            for g in self._items:
                self._discard("drained_at_stop", g)
            self._items.clear()
            self._cv.notify_all()
            return n


class PromptSource:
    """Thread-safe supply of training prompts from the run's PromptSampler (retired prompts skipped)."""

    def __init__(self, st):
        self.st, self.lock = st, threading.Lock()

    def next(self, n: int) -> list:
        with self.lock:
            retired = self.st.tracker.retired if self.st.tracker else frozenset()
            return self.st.data.next(n, retired)

    def record(self, problems: list, verdicts: list, G: int) -> int | None:
        """No-Positive-Resampling bookkeeping of a consumed batch; number of retired prompts."""
        if self.st.tracker is None:
            return None
        correct = torch.tensor([v.correct for v in verdicts], dtype=torch.float32).view(-1, G).sum(1)
        with self.lock:
            self.st.tracker.update([p.id for p in problems], correct.tolist(), [G] * len(problems))
            return len(self.st.tracker.retired)


# ----------------------------------------------------------------------------- producing groups
def score_rollouts(cfg, task, rb: RolloutBatch, problems: list, G: int, max_new_tokens: int,
                   count: Callable[[str, int], None] | None = None) -> tuple:
    """Rewards of a chunk, as in :func:`rlvr.train.step.rollout_round` -> (verdicts, reward_B, extra).

    Verifier failures (raised, timed out after ``reward.timeout_s``) score
    ``train.reward_failure_value``, are counted through ``count`` and warned about; past
    ``train.max_reward_failure_rate`` a UserError stops the run (as in the sync step)."""
    from rlvr.algo.advantages import overlong_penalty
    from rlvr.train.rewarding import compute_rewards
    from rlvr.train.step import handle_reward_failures

    rows = [p for p in problems for _ in range(G)]
    rep = verify_checked(task, rb.texts, rows, failure_value=cfg.train.reward_failure_value,
                         timeout_s=cfg.reward.timeout_s)
    handle_reward_failures(rep, cfg.train, "generator", count)
    verdicts = rep.verdicts
    reward_B, extra = compute_rewards(cfg.reward, rb, verdicts, G, [p.answer for p in problems])
    if cfg.algo.overlong_cache:
        reward_B = reward_B + overlong_penalty(rb.lengths, max_new_tokens, cfg.algo.overlong_cache)
    return verdicts, reward_B, {k: float(v) for k, v in extra.items() if v is not None}


def make_groups(cfg, rb, verdicts, reward_B, extra, problems, worker: int, chunk: int) -> tuple:
    """Split a scored chunk into ScoredGroups -> (kept, filtered [(reason, group)]).
    With DAPO dynamic sampling, zero-variance groups are filtered (reason ``zero_variance``)."""
    G = cfg.algo.group_size
    oldest = oldest_versions(rb.versions, rb.completion_mask)
    kept, filtered = [], []
    for i, p in enumerate(problems):
        rows = torch.arange(i * G, (i + 1) * G)
        g = ScoredGroup(p, select_rows(rb, rows), verdicts[i * G : (i + 1) * G], reward_B[rows], extra,
                        worker, chunk, int(oldest[rows].min()))
        if cfg.algo.dynamic_sampling and bool((g.reward_G == g.reward_G[0]).all()):
            filtered.append(("zero_variance", g))
        else:
            kept.append(g)
    return kept, filtered


def merge_groups(groups: list[ScoredGroup], pad_id: int) -> tuple:
    """-> (rb (P*G rows), verdicts, reward_B, extra (mean over groups), problems)."""
    rb = concat_batches([g.rb for g in groups], pad_id)
    extra: dict[str, float] = {}
    for g in groups:
        for k, v in g.extra.items():
            extra[k] = extra.get(k, 0.0) + v / len(groups)
    return (rb, [v for g in groups for v in g.verdicts], torch.cat([g.reward_G for g in groups]), extra,
            [g.problem for g in groups])


class LocalProducer:
    """Sampling + rewards for one generator thread, on its own model copy synced from a WeightStore."""

    def __init__(self, st, template: torch.nn.Module, store: WeightStore, idx: int):
        self.cfg, self.tok, self.task, self.params, self.store = st.cfg, st.tok, st.task, st.params, store
        self.idx, self.model = idx, copy.deepcopy(template)
        self.count = _locked(st.count)  # verifier failures, counted from this generator thread
        self.version = -1
        self.sync()
        seed = st.cfg.train.seed * 1_000_003 + idx * 7919 + self.version * 104_729
        self.gen = torch.Generator().manual_seed(seed)

    def sync(self) -> int | None:
        """The sampler's weight_sync hook: new version if the store had newer weights."""
        new = self.store.pull(self.model, self.version)
        if new is not None:
            self.version = new
        return new

    def __call__(self, problems: list, chunk: int) -> tuple:
        torch.set_num_threads(_threads_per_worker(self.cfg))
        self.sync()
        G = self.cfg.algo.group_size
        rb = sample(self.model, self.tok, [p.prompt for p in problems for _ in range(G)], self.params,
                    version=self.version, generator=self.gen, weight_sync=self.sync,
                    sync_every=self.cfg.pipeline.sync_every)
        scored = score_rollouts(self.cfg, self.task, rb, problems, G, self.params.max_new_tokens, self.count)
        return make_groups(self.cfg, rb, *scored, problems, self.idx, chunk)


_COUNT_LOCK = threading.Lock()


def _locked(count: Callable[[str, int], None]) -> Callable[[str, int], None]:
    def locked(key: str, n: int = 1) -> None:
        with _COUNT_LOCK:
            count(key, n)
    return locked


def _threads_per_worker(cfg) -> int:
    """Intra-op threads per thread of the local backend: the cores shared by workers + trainer."""
    return max(1, (os.cpu_count() or 1) // (cfg.pipeline.workers + 1))


class LocalBackend:
    """Generators as threads of this process (each with its own model copy); weights by WeightStore."""

    def __init__(self, st):
        self.st = st
        self.template = copy.deepcopy(st.model).eval().requires_grad_(False)
        pc = st.cfg.pipeline
        self.store = WeightStore(self.template, st.step, pc.bucket_mb, pc.timeout_s)
        self._threads = torch.get_num_threads()
        torch.set_num_threads(_threads_per_worker(st.cfg))

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

    def __init__(self, idx: int, make_producer: Callable, q: LagQueue, source: PromptSource, chunk: int,
                 max_restarts: int, poll_s: float = 0.2):
        self.idx, self.make_producer, self.q, self.source = idx, make_producer, q, source
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
                kept, filtered = produce(self.source.next(n), self.chunks)
            except BaseException:
                self.q.release(n)
                raise
            finally:
                self.busy_s += time.monotonic() - t
            self.chunks += 1
            self.q.put(kept, n, filtered)


# ----------------------------------------------------------------------------- the trainer side
def learn(st, rb: RolloutBatch, reward_B: torch.Tensor, update: Callable | None = None) -> dict:
    """Advantages -> zero-variance filter -> loss mask -> ``update`` (policy_update), as in
    :func:`rlvr.train.step.rl_step`; counts training tokens/FLOPs and advances ``st.step``."""
    from rlvr.algo.advantages import group_advantages, zero_variance_groups
    from rlvr.train.step import _flops_per_token, policy_update, resolved_loss

    update = update or policy_update
    cfg, G = st.cfg, st.cfg.algo.group_size
    reward_P_G = reward_B.view(-1, G)
    adv_P_G = group_advantages(reward_P_G, resolved_loss(cfg)[3])
    zero_P = zero_variance_groups(reward_P_G)
    m: dict = {"zero_var_frac": float(zero_P.float().mean())}
    if cfg.algo.zero_var_filter and zero_P.any():
        rows = (~zero_P)[:, None].expand(-1, G).reshape(-1).nonzero().squeeze(-1)
        rb, adv_P_G = select_rows(rb, rows), adv_P_G[~zero_P]
    mask = rb.loss_mask.clone()
    if cfg.algo.mask_truncated:
        mask &= torch.tensor([r != "length" for r in rb.finish_reason])[:, None]
    upd = {}
    if rb.size and mask.any():
        upd = update(st, rb, adv_P_G.reshape(-1), mask)
        n_train = int(rb.completion_mask.sum() + rb.prompt_mask.sum()) * cfg.algo.ppo_epochs
        fpt = _flops_per_token(st.model)
        st.tokens += n_train
        st.flops += 3 * fpt * n_train + (fpt * n_train if st.ref_model is not None else 0)
    if not upd:
        st.count("steps_without_gradient")
        warn(f"step {st.step + 1}: no gradient (every group had equal rewards or no loss tokens)")
    st.step += 1
    m.update(upd)
    return m


def finish_step(st, m: dict, gen_rows: int, gen_tokens: int, elapsed_s: float) -> dict:
    """Generation accounting and the shared keys of the metrics line (as rl_step writes them)."""
    from rlvr.train.step import _flops_per_token, _warn_silent_failures

    st.samples += gen_rows
    st.tokens += gen_tokens
    st.flops += _flops_per_token(st.model) * gen_tokens
    st.wall_s += elapsed_s
    m.update(step=st.step, samples=st.samples, tokens=st.tokens, flops=st.flops, wall_s=st.wall_s,
             version=st.version, lr=st.opt.param_groups[0]["lr"])
    _warn_silent_failures(st, m)
    return m


class Pipeline:
    """The trainer's end of the async pipeline: ``step`` is a drop-in for ``rl_step``."""

    def __init__(self, st, backend):
        pc, P = st.cfg.pipeline, st.cfg.algo.prompts_per_step
        self.backend, self.timeout_s = backend, pc.timeout_s
        self.q = LagQueue(P, pc.max_lag, st.step)
        self.source = PromptSource(st)
        chunk = min(pc.chunk_groups or math.ceil(P / pc.workers), P * (pc.max_lag + 1))
        self.workers = [GeneratorWorker(i, backend.producer, self.q, self.source, chunk, pc.max_restarts)
                        for i in range(pc.workers)]
        for w in self.workers:
            w.start()
        self._last_end = time.monotonic()
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

    def step(self, st, total_steps: int) -> dict:
        """Take P fresh groups, learn, publish the new weights; the metrics line of the step."""
        from rlvr.train.schedule import lr_at
        from rlvr.train.step import rollout_metrics

        cfg, G, P = st.cfg, st.cfg.algo.group_size, st.cfg.algo.prompts_per_step
        t0 = time.monotonic()
        for g in st.opt.param_groups:
            g["lr"] = lr_at(st.step, cfg.optim.lr, cfg.optim.warmup_steps, total_steps, cfg.optim.schedule)
        groups = self.q.take(P, self.timeout_s, self.check)
        t_wait = time.monotonic() - t0
        version = st.step
        rb, verdicts, reward_B, extra, problems = merge_groups(groups, st.tok.pad_id)
        m = rollout_metrics(rb, verdicts, reward_B, G)
        m.update(extra)
        retired = self.source.record(problems, verdicts, G)
        if retired is not None:
            m["retired_prompts"] = retired
        m.update(learn(st, rb, reward_B))
        self.backend.publish(st.model, st.step)  # weights first, then the version generators gate on
        self.q.publish(st.step)
        lag_B = staleness(version, rb.versions, rb.completion_mask)
        m.update(self._pipeline_metrics(st, rb, lag_B, t0, t_wait))
        now = time.monotonic()
        rows, tokens = self._generated(rb)
        out = finish_step(st, m, rows, tokens, now - self._last_end)
        self._last_end = now
        return out

    def _generated(self, rb) -> tuple[int, int]:
        """Rows/tokens generated since the last step: consumed plus discarded."""
        q, seen = self.q, self._seen
        rows, tokens = q.discarded_rows - seen["rows"], q.discarded_tokens - seen["tokens"]
        seen["rows"], seen["tokens"] = q.discarded_rows, q.discarded_tokens
        return rb.size + rows, int(rb.completion_mask.sum() + rb.prompt_mask.sum()) + tokens

    def _pipeline_metrics(self, st, rb, lag_B: torch.Tensor, t0: float, t_wait: float) -> dict:
        now, seen = time.monotonic(), self._seen
        busy, idle = sum(w.busy_s for w in self.workers), sum(w.idle_s for w in self.workers)
        interval = max(1e-9, now - self._last_end)
        for reason, n in (self.q.discarded - seen["discarded"]).items():
            st.count(f"pipeline_discarded_{reason}", n)
        seen["discarded"] = Counter(self.q.discarded)
        hist = Counter(int(x) for x in lag_B.tolist())
        m = {
            "lag_max": int(lag_B.max()), "lag_mean": float(lag_B.float().mean()),
            "lag_hist": {str(k): hist[k] for k in sorted(hist)}, "queue_depth": self.q.depth(),
            "gen_busy_s": busy - seen["gen_busy_s"], "gen_idle_s": idle - seen["gen_idle_s"],
            "trainer_busy_s": now - t0 - t_wait, "trainer_idle_s": t_wait,
            "samples_per_s": rb.size / interval,
            "tokens_per_s": float(rb.completion_mask.sum() + rb.prompt_mask.sum()) / interval,
            "worker_restarts": sum(w.restarts for w in self.workers),
        }
        seen["gen_busy_s"], seen["gen_idle_s"] = busy, idle
        return m

    def close(self, st=None) -> None:
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
        if st is not None and drained:
            st.count("pipeline_discarded_drained_at_stop", drained)
        self.backend.close()


def make_stepper(st) -> tuple[Callable, Callable[[], None]]:
    """(step function, close function) for the configured schedule: sync ``rl_step``, data-parallel
    ``dp_rl_step`` (under torchrun), or the async pipeline on the local or Ray backend."""
    from rlvr.train.step import rl_step

    pc = st.cfg.pipeline
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        from rlvr.train.distributed import dp_rl_step, rank_world

        if rank_world()[1] == 1:
            raise UserError("WORLD_SIZE > 1 but no process group; launch data parallel with "
                            "`torchrun --nproc_per_node=N -m rlvr.train.distributed CONFIG [overrides]`")
        if pc.mode == "async":
            raise UserError("data parallel runs the synchronous step; set pipeline.mode=sync")
        return dp_rl_step, lambda: None
    if pc.mode == "sync":
        return rl_step, lambda: None
    if pc.backend == "ray":
        from rlvr.train.ray_backend import RayBackend

        backend = RayBackend(st)
    else:
        backend = LocalBackend(st)
    pipe = Pipeline(st, backend)
    return pipe.step, lambda: pipe.close(st)
