"""The state of an RL run (:class:`TrainState`: what a checkpoint holds, plus handles) and how it is
built from a config: policy, task, training problems, optimiser, reference model, distillation teacher,
curriculum."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import threading
from dataclasses import dataclass, field, fields

import torch

from rlvr.algo.curriculum import PassRateTracker
from rlvr.algo.losses import resolve_loss
from rlvr.config import LossConfig, RunConfig
from rlvr.errors import UserError
from rlvr.log import warn
from rlvr.model.hf import load_hf_policy
from rlvr.model.io import load_policy_as, resolve_device
from rlvr.model.precision import Precision, config_spec, resolve_dtype, step_shape
from rlvr.rollout.engine import sample_params
from rlvr.rollout.sample import SampleParams
from rlvr.tasks.registry import get_task as registry_get
from rlvr.train.data import PromptSampler, training_problems
from rlvr.train.entropy_observer import ProbeBatch, draw_probe
from rlvr.train.pretrain import base_model
from rlvr.train.teacher import load_teacher
from rlvr.train.tiny_hf import build_if_tiny


@dataclass
class TrainState:
    """The mutable state of a run (what a checkpoint holds, plus handles).

    ``gen`` drives the training-side randomness (mini-batch order; checkpointed); sampling draws
    from a fresh stream per step (:func:`sampling_generator`), so every way of producing a batch
    (sync step, async generator, data-parallel rank) samples the same thing from the same seed.
    """

    cfg: RunConfig
    model: torch.nn.Module
    tok: object
    task: object
    opt: torch.optim.Optimizer
    data: PromptSampler
    params: SampleParams
    gen: torch.Generator
    loss: LossConfig  # cfg.loss with the variant's defaults resolved once, by build_state (resolve_loss)
    ref_model: torch.nn.Module | None = None
    teacher_model: torch.nn.Module | None = None  # on-policy distillation's frozen teacher (loss.name=opd)
    tracker: PassRateTracker | None = None
    step: int = 0  # RL steps done = policy version generators sample with
    version: int = 0  # optimiser updates applied (several per step with algo.minibatches > 1)
    samples: int = 0
    tokens: int = 0
    flops: float = 0.0
    wall_s: float = 0.0
    nan_steps: int = 0
    last_entropy: float | None = None
    probe: ProbeBatch | None = None  # train.entropy_probe > 0: the fixed probe batch (not checkpointed: redrawn)
    counters: dict = field(default_factory=dict)
    last_nan_step: int = -1  # st.step when nan_steps was last raised (not checkpointed)
    engine: object | None = None  # sampling.engine=vllm: the VLLMEngine, built on first use
    engine_version: int = -1  # optimiser version whose weights the engine holds
    lock: threading.Lock = field(default_factory=threading.Lock)  # data order + tracker (generator threads)

    def __deepcopy__(self, memo: dict) -> TrainState:
        """A deep copy with a lock of its own (locks cannot be copied)."""
        new = copy.copy(self)
        memo[id(self)] = new
        for f in fields(self):
            if f.name != "lock":
                setattr(new, f.name, copy.deepcopy(getattr(self, f.name), memo))
        new.lock = threading.Lock()
        return new

    def count(self, key: str, n: int = 1) -> None:
        with _COUNT_LOCK:
            self.counters[key] = self.counters.get(key, 0) + n

    def next_problems(self, n: int) -> list:
        """The next ``n`` training problems, retired ones (No-Positive-Resampling) skipped; thread-safe."""
        with self.lock:
            return self.data.next(n, self.tracker.retired if self.tracker else frozenset())


_COUNT_LOCK = threading.Lock()


def sampling_generator(seed: int, version: int, stream: int = 0, part: int = 0) -> torch.Generator:
    """The sampling RNG of one batch: seeded by (run seed, policy version, stream, part).

    ``stream`` is the data-parallel rank or the async generator worker; ``part`` counts the
    generation calls of that stream at that version. A resumed run needs no sampler state.
    """
    digest = hashlib.blake2b(f"{seed}/{version}/{stream}/{part}".encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") >> 1)


def get_task(cfg: RunConfig):
    """The task object of ``cfg.task`` (name and constructor knobs)."""
    return registry_get(cfg.task.name, **cfg.task.knobs)


def resolve_precision(cfg: RunConfig) -> tuple[RunConfig, Precision]:
    """``cfg`` with ``model.dtype`` resolved ("auto" -> "float32" | "bfloat16" for ``train.device`` and
    the model's shapes: see :mod:`rlvr.model.precision`), and the :class:`Precision` saying why. The
    one place a run's precision is decided: the loop calls it before it saves config.yaml. A
    ``tiny-hf:<arch>`` model is built first (its shapes are what is measured)."""
    build_if_tiny(cfg.model.init_from, cfg.model.path)
    shape = step_shape(cfg.algo.prompts_per_step, cfg.algo.group_size, cfg.sampling.max_new_tokens)
    prec = resolve_dtype(cfg.model.dtype, resolve_device(cfg.train.device), lambda: config_spec(cfg.model), shape)
    if prec.dtype != cfg.model.dtype:
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, dtype=prec.dtype))
    return cfg, prec


def build_policy(cfg: RunConfig, progress: str = "auto"):
    """(model, tokenizer) on ``train.device``: ``model.init_from`` if set, else the cached pretrained
    tiny base (or the HF model of ``model.path``), computing in ``model.dtype`` (resolved here if it
    is still "auto"), whatever dtype the checkpoint was saved with."""
    build_if_tiny(cfg.model.init_from, cfg.model.path)
    if cfg.model.dtype == "auto":
        cfg, _ = resolve_precision(cfg)
    if cfg.model.kind == "hf" and not cfg.model.init_from:  # built with the run's model config
        model, tok = load_hf_policy(cfg.model.path, cfg.model)
        return model.to(resolve_device(cfg.train.device)), tok
    start = cfg.model.init_from or base_model(cfg.model, cfg.pretrain, progress)
    return load_policy_as(start, cfg.model, cfg.train.device)


def build_state(cfg: RunConfig, model, tok) -> TrainState:
    """A fresh TrainState at step 0 around ``model`` (on its device)."""
    if cfg.train.deterministic:
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(1)
    torch.manual_seed(cfg.train.seed)
    task = get_task(cfg)
    params = sample_params(cfg.sampling, tok, self_certainty=cfg.reward.kind not in ("verifier", "funcs"))
    counters: dict = {}
    problems = training_problems(task, cfg.task)  # test-time mode: the held-out (evaluation) problems
    split = "heldout" if cfg.task.test_time else "train"
    skipped = getattr(task, "skipped", None)  # malformed dataset rows dropped by the loader
    if isinstance(skipped, dict) and skipped.get(split):
        counters["bad_rows_skipped"] = skipped[split]
        warn(f"task {cfg.task.name}: skipped {skipped[split]} malformed {split} rows "
             "(missing, empty or wrong-type fields)")
    problems = fitting_problems(problems, model, tok, params, counters, split)
    ref = copy.deepcopy(model).eval().requires_grad_(False) if cfg.loss.kl_coef > 0 else None
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.optim.lr,
                            betas=cfg.optim.betas, weight_decay=cfg.optim.weight_decay)
    tracker = PassRateTracker(cfg.algo.npr_threshold) if cfg.algo.npr_threshold > 0 else None
    probe = None
    if cfg.train.entropy_probe:  # drawn by the starting policy, from its own stream
        held = fitting_problems(task.problems("heldout", cfg.train.entropy_probe), model, tok, params, None, "heldout")
        probe = draw_probe(model, tok, task, params, held, cfg.train.seed)
    return TrainState(cfg=cfg, model=model, tok=tok, task=task, opt=opt, loss=resolve_loss(cfg.loss),
                      data=PromptSampler(problems, cfg.train.seed), params=params, counters=counters,
                      gen=torch.Generator().manual_seed(cfg.train.seed), ref_model=ref,
                      teacher_model=load_teacher(cfg, model, tok), tracker=tracker, probe=probe)


def context_limit(model) -> int | None:
    """Maximum sequence length of the policy (tiny: model.cfg.context; HF: max_position_embeddings)."""
    if getattr(getattr(model, "cfg", None), "kind", "tiny") == "hf":
        return getattr(getattr(getattr(model, "lm", None), "config", None), "max_position_embeddings", None)
    return getattr(getattr(model, "cfg", None), "context", None)


def completion_budget(params: SampleParams) -> int:
    """Most completion tokens a sample can have: max_new_tokens, plus the forced interruption's
    text and extra answer tokens when forced interruption is on (L_max of the constant normalisers)."""
    forced = len(params.interruption_ids) + params.interruption_extra if params.interruption_budget else 0
    return params.max_new_tokens + forced


def fitting_problems(problems: list, model, tok, params, counters: dict | None = None, split: str = "train"):
    """The problems whose prompt (with BOS) plus the completion budget fits the policy's context;
    the others are skipped, counted in ``counters["long_prompts_skipped"]`` and warned about.
    None fit -> UserError."""
    limit = context_limit(model)
    if limit is None or not problems:
        return problems
    budget = completion_budget(params)
    lengths = tok.batch_encode_left([p.prompt for p in problems])[1].sum(1).tolist()
    kept = [p for p, n in zip(problems, lengths) if n + budget <= limit]
    skipped = len(problems) - len(kept)
    if skipped and counters is not None:
        counters["long_prompts_skipped"] = counters.get("long_prompts_skipped", 0) + skipped
    if skipped:
        warn(f"{split}: skipped {skipped}/{len(problems)} prompts longer than the context allows "
             f"({limit} tokens - {budget} for the completion); longest is {max(lengths)} tokens")
    if not kept:
        raise UserError(f"every {split} prompt is longer than model context {limit} minus the completion "
                        f"budget {budget}; lower sampling.max_new_tokens or use a longer-context model")
    return kept


def flops_per_token(model) -> int:
    """Forward FLOPs per token of the policy (the model's own count, else 2 x parameters)."""
    return model.flops_per_token() if hasattr(model, "flops_per_token") else 2 * sum(
        p.numel() for p in model.parameters())
