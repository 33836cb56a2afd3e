"""Ray backend of the async pipeline (``pipeline.backend=ray``): generators, the verifier and the
trainer run as Ray actors; the lag logic is the local one (:mod:`rlvr.train.pipeline`).

- The trainer actor (:mod:`rlvr.train.launch`, started by the commands) runs the ordinary
  training loop (:func:`rlvr.train.loop.train`); the driver only starts Ray (or joins
  ``pipeline.ray_address``) and waits (``pipeline.ray_trainer_actor=false`` keeps the trainer in
  the driver process).
- In the trainer, one thin thread per generator claims positions in the :class:`LagQueue` and
  draws prompts exactly as a local worker does, then hands the prompts to its
  :class:`GeneratorActor` and the rollouts (by object reference, not through the trainer) to the
  shared :class:`VerifierActor`.
- Weights: after each step the trainer puts its parameters, in buckets, into the object store and
  posts the reference on a :class:`WeightBoard`; generator actors poll it between decoding chunks
  (in-flight update) and copy a newer version in.
- Every ``ray.get`` has ``pipeline.timeout_s``; a dead or stuck actor raises in its worker thread,
  which replaces the actor (up to ``pipeline.max_restarts`` times) or stops the run with the error.
"""

from __future__ import annotations

import copy
import os
import threading

import torch

from rlvr.errors import UserError
from rlvr.rewards.scoring import score_rollouts
from rlvr.rollout.engine import sample
from rlvr.tasks.environment import is_tool_task
from rlvr.train.pipeline import SamplingStreams, make_groups
from rlvr.train.state import get_task
from rlvr.train.weights import bucket_layout, pack, parameters_of, unpack_into


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError("pipeline.backend=ray needs Ray; pip install 'rlvr[ray]' or set "
                        "pipeline.backend=local") from None
    return ray


def cluster_address(pc) -> str:
    """The Ray cluster to join: ``pipeline.ray_address``, else the ``RAY_ADDRESS`` environment variable
    (Ray's own convention; ``auto`` finds a running cluster), else "" (start a local instance)."""
    return pc.ray_address or os.environ.get("RAY_ADDRESS", "").strip()


def ensure_ray(pc) -> bool:
    """Start a local Ray instance (``ray_num_cpus`` CPUs, no dashboard) or connect to
    :func:`cluster_address`; True if this call started/connected it (and must shut it down)."""
    ray = _ray()
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if cluster_address(pc):
        ray.init(address=cluster_address(pc), include_dashboard=False)
    else:
        ray.init(num_cpus=pc.ray_num_cpus, include_dashboard=False)
    return True


def actor_cpus(pc, role: str) -> float:
    """Ray CPU reservation per actor: on a local instance everything fits in ``ray_num_cpus``
    (trainer 1/4, verifier 1/8, generators share the remaining 5/8); on a cluster one CPU each."""
    if cluster_address(pc):
        return 1.0
    share = {"trainer": 0.25, "verifier": 0.125, "generator": 0.625 / pc.workers}[role]
    return share * pc.ray_num_cpus


class WeightBoard:
    """Actor: the latest published version and the object reference of its weight buckets."""

    def __init__(self):
        self.version, self.ref = -1, None

    def publish(self, version: int, refs: list) -> None:
        self.version, self.ref = version, refs[0]

    def latest(self, have: int):
        """None if ``have`` is current, else (version, [ref]) (wrapped so Ray does not resolve it)."""
        return None if self.version <= have else (self.version, [self.ref])


class GeneratorActor:
    """Actor: one generator's model copy; samples rows, pulling new weights between chunks."""

    def __init__(self, cfg, model, tok, params, board, idx: int):
        torch.set_num_threads(1)
        # requires_grad kept as in the policy (it changes the sampler's kernels by an ulp; see LocalBackend)
        self.cfg, self.model, self.tok, self.params, self.board = cfg, model.eval(), tok, params, board
        self.layout = bucket_layout(parameters_of(self.model), cfg.pipeline.bucket_mb << 20)
        self.version, self.idx = -1, idx
        self.streams = SamplingStreams(cfg.train.seed, idx)
        self.sync()

    def sync(self) -> int | None:
        ray, t = _ray(), self.cfg.pipeline.timeout_s
        news = ray.get(self.board.latest.remote(self.version), timeout=t)
        if news is None:
            return None
        version, (ref,) = news
        unpack_into(parameters_of(self.model), self.layout, ray.get(ref, timeout=t))
        self.version = version
        return version

    def generate(self, prompts: list[str]):
        self.sync()
        return sample(self.model, self.tok, prompts, self.params, version=self.version,
                      generator=self.streams.next(self.version), weight_sync=self.sync,
                      sync_every=self.cfg.pipeline.sync_every)

    def pid(self) -> int:
        return os.getpid()


class VerifierActor:
    """Actor: the task's verifier and the reward function (off the trainer's critical path)."""

    def __init__(self, cfg, max_new_tokens: int):
        self.cfg, self.task, self.max_new_tokens = cfg, get_task(cfg), max_new_tokens

    def score(self, rb, problems: list):
        """The reward phase of one chunk -> ScoredBatch (failures raise past the allowed rate)."""
        return score_rollouts(self.cfg, self.task, rb, problems, self.max_new_tokens, "verifier")

    def ping(self) -> bool:
        return True


class RayProducer:
    """A worker thread's handle on its generator actor (``__call__`` as LocalProducer's)."""

    def __init__(self, backend: RayBackend, idx: int):
        self.backend, self.idx = backend, idx
        self.actor = backend.new_generator(idx)

    def __call__(self, problems: list, chunk: int) -> tuple:
        ray, cfg = _ray(), self.backend.cfg
        G = cfg.algo.group_size
        rb_ref = self.actor.generate.remote([p.prompt for p in problems for _ in range(G)])
        verifier = self.backend.verifier()
        try:
            batch = ray.get(verifier.score.remote(rb_ref, problems), timeout=cfg.pipeline.timeout_s)
        except BaseException:
            ray.kill(self.actor, no_restart=True)  # a dead or stuck generator is replaced on restart
            self.backend.check_verifier(verifier)
            raise
        return make_groups(cfg, batch, self.idx, chunk)


class RayBackend:
    """Generator and verifier actors for :class:`rlvr.train.pipeline.Pipeline`; weights by object store."""

    def __init__(self, st):
        if is_tool_task(st.task):
            raise UserError("tool tasks (multi-turn episodes) run on pipeline.backend=local or the sync step; "
                            "the Ray generators sample single turns (docs/tools.md)")
        ray = _ray()
        self.cfg, pc = st.cfg, st.cfg.pipeline
        self.started = ensure_ray(pc)
        self._gen_cls = ray.remote(num_cpus=actor_cpus(pc, "generator"))(GeneratorActor)
        self._ver_cls = ray.remote(num_cpus=actor_cpus(pc, "verifier"), max_concurrency=max(2, pc.workers))(
            VerifierActor)
        self.board = ray.remote(num_cpus=0)(WeightBoard).remote()
        self._layout = bucket_layout(parameters_of(st.model), pc.bucket_mb << 20)
        self.publish(st.model, st.step)
        template = copy.deepcopy(st.model).eval()
        self._model_ref, self._tok, self._params = ray.put(template), st.tok, st.params
        self._lock = threading.Lock()
        self._verifier = self._ver_cls.remote(self.cfg, st.params.max_new_tokens)
        self.actors: list = []

    def new_generator(self, idx: int):
        actor = self._gen_cls.remote(self.cfg, self._model_ref, self._tok, self._params, self.board, idx)
        self.actors.append(actor)
        return actor

    def verifier(self):
        with self._lock:
            return self._verifier

    def check_verifier(self, handle) -> None:
        """Replace the verifier actor if it does not answer (after a failed call)."""
        ray = _ray()
        try:
            ray.get(handle.ping.remote(), timeout=min(30.0, self.cfg.pipeline.timeout_s))
        except Exception:  # noqa: BLE001 - dead or stuck: replace it
            with self._lock:
                if self._verifier is handle:
                    ray.kill(handle, no_restart=True)
                    self._verifier = self._ver_cls.remote(self.cfg, self._params.max_new_tokens)

    def producer(self, idx: int) -> RayProducer:
        return RayProducer(self, idx)

    def publish(self, model: torch.nn.Module, version: int) -> None:
        ray = _ray()
        ref = ray.put(pack(parameters_of(model), self._layout))
        ray.get(self.board.publish.remote(version, [ref]), timeout=self.cfg.pipeline.timeout_s)

    def close(self) -> None:
        ray = _ray()
        for a in [*self.actors, self._verifier, self.board]:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if self.started:
            ray.shutdown()
