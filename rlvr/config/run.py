"""The whole run config: one field per section, and the invariants that span sections."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlvr.config.checks import check
from rlvr.config.excursions import ExcursionsConfig
from rlvr.config.execution import LogConfig, PipelineConfig, TrainConfig
from rlvr.config.model import ModelConfig, PretrainConfig
from rlvr.config.recipe import DISTILL_LOSS, AlgoConfig, LossConfig, OptimConfig, SamplingConfig
from rlvr.config.task import RewardConfig, TaskConfig


@dataclass(frozen=True)
class RunConfig:
    name: str = "quickstart"
    """Run name (prefix of the run directory)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    log: LogConfig = field(default_factory=LogConfig)
    excursions: ExcursionsConfig = field(default_factory=ExcursionsConfig)

    def __post_init__(self):
        if self.sampling.engine == "vllm":
            check(self.model.kind == "hf", "sampling.engine",
                  "vllm generates for Hugging Face models only; set model.kind=hf or use engine native")
            check(self.pipeline.mode == "sync", "sampling.engine",
                  "vllm is wired into the synchronous step; set pipeline.mode=sync or use engine native")
            check(not self.sampling.interruption_budget and self.reward.kind == "verifier", "sampling.engine",
                  "vllm does no forced interruption or self-certainty; set sampling.interruption_budget=0 "
                  "and reward.kind=verifier, or use engine native")
            # vLLM's processed log-probs are renormalised over the kept tokens; the trainer's are not
            check(self.sampling.top_p >= 1.0, "sampling.top_p",
                  "must be 1 with sampling.engine=vllm (vLLM renormalises its log-probs over the nucleus, "
                  "the trainer does not: biased ratio); set sampling.top_p=1 or use engine native")
            check(self.sampling.top_k == 0, "sampling.top_k",
                  "must be 0 with sampling.engine=vllm (vLLM renormalises its log-probs over the top k, "
                  "the trainer does not: biased ratio); set sampling.top_k=0 or use engine native")
        check(not (self.pipeline.mode == "async" and self.pipeline.backend == "ray"
                   and self.train.device.startswith("cuda")), "pipeline.backend",
              f"ray actors reserve only CPUs, so train.device={self.train.device} is not visible in them; "
              "use pipeline.backend=local or train.device=cpu")
        total = self.sampling.max_new_tokens + self.sampling.interruption_extra + 24
        check(
           total <= self.model.context or self.model.kind == "hf",
           "sampling.max_new_tokens",
           f"prompt + completion may exceed model.context={self.model.context}; lower it",
       )
        check(self.algo.overlong_cache <= self.sampling.max_new_tokens, "algo.overlong_cache",
              f"must be <= sampling.max_new_tokens={self.sampling.max_new_tokens} (got {self.algo.overlong_cache})")
        if self.loss.name == DISTILL_LOSS:
            check(bool(self.loss.teacher), "loss.teacher",
                  f"loss.name={DISTILL_LOSS} (on-policy distillation) needs a teacher: set loss.teacher to a "
                  "checkpoint directory or a Hugging Face model with the student's tokenizer")
            check(not self.algo.zero_var_filter, "algo.zero_var_filter",
                  f"must be false with loss.name={DISTILL_LOSS}: the filter drops the groups whose rewards are all "
                  "equal, but the teacher's signal is in every sample; set algo.zero_var_filter=false")

