"""What the policy is asked and how it is scored: the ``task`` and ``reward`` sections."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rlvr.config.checks import NON_NEGATIVE, RANGES, UNIT, at_least, check, check_section_ranges


@dataclass(frozen=True)
class TaskConfig:
    name: str = "arithmetic"
    """Task name from the task registry (`rlvr.tasks.registry`)."""
    knobs: dict = field(default_factory=dict)
    """Keyword arguments of the task's constructor (difficulty, seed, data paths)."""
    train_size: int = 0
    """Number of training problems (0 = all the task offers)."""
    heldout_size: int = 200
    """Number of held-out problems used for evaluation."""
    test_time: bool = False
    """Test-time training (TTRL): train on the first heldout_size held-out problems and evaluate on
    the same ones (set train.eval_problems to heldout_size). Use with an unsupervised reward such as
    majority_vote; the verifier reward, a mix with a verifier weight and No-Positive-Resampling would
    use the held-out labels, so they are refused (ConfigError)."""
    retention_tasks: tuple[str, ...] = ("strings",)
    """Non-target tasks evaluated for general-ability retention (greedy accuracy; each built with the
    corpus's knobs for it, ``pretrain.task_knobs``: see docs/methods/testbed.md)."""
    retention_problems: int = 200
    """Held-out problems of each retention task in ``rlvr run``'s evaluation."""

    def __post_init__(self):
        check_section_ranges(self, "task")
        check(not self.test_time or self.heldout_size >= 1, "task.heldout_size",
              "must be >= 1 with task.test_time=true (it is the training set)")


RANGES["task"] = {"train_size": NON_NEGATIVE, "heldout_size": NON_NEGATIVE, "retention_problems": at_least(1)}


@dataclass(frozen=True)
class RewardConfig:
    kind: str = "verifier"
    """verifier (the task's) | an intrinsic reward name | mix | funcs (``reward.funcs``)."""
    weights: dict = field(default_factory=dict)
    """For kind=mix: {"verifier": w, "self_certainty": w, ...}."""
    timeout_s: float = 10.0
    """Per-sample verifier timeout in seconds, in a worker process (0 = no timeout: verify in this process)."""
    vote_threshold: float = 0.0
    """majority_vote (TTRL's voting threshold): a group whose majority answer has less than this
    share of its parsable answers gets all-zero rewards. 0 = always reward the majority."""
    funcs: tuple[str | dict, ...] = ()
    """For kind=funcs: TRL-signature reward functions ``fn(prompts, completions, **columns)``, each a
    registry name (math, numeric, exact, format, code), ``path/to/file.py:name`` or ``module:name``,
    as a string (weight 1) or ``{name: ..., weight: ...}``; the reward is their weighted sum, a
    ``None`` score leaving that function out for that completion (docs/rewards.md)."""

    def __post_init__(self):
        check_section_ranges(self, "reward")
        for i, e in enumerate(self.funcs):
            good = isinstance(e, str) and bool(e) or (
                isinstance(e, dict) and isinstance(e.get("name"), str) and bool(e["name"])
                and set(e) <= {"name", "weight"} and isinstance(e.get("weight", 1.0), int | float)
                and not isinstance(e.get("weight", 1.0), bool) and math.isfinite(e.get("weight", 1.0)))
            check(good, f"reward.funcs[{i}]", f"expected a name or {{name: ..., weight: <number>}}, got {e!r}")
        check(self.kind != "funcs" or bool(self.funcs), "reward.funcs",
              "reward.kind=funcs needs functions, e.g. reward.funcs=[math, {name: format, weight: 0.1}]")
        check(not self.funcs or self.kind == "funcs", "reward.kind",
              "reward.funcs is set; set reward.kind=funcs to use them")
        for name, w in self.weights.items():
            check(isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w),
                  f"reward.weights.{name}", f"weight must be a finite number (got {w!r})")
        check(self.kind != "mix" or bool(self.weights), "reward.weights",
              "reward.kind=mix needs weights, e.g. reward.weights={verifier: 1.0, self_certainty: 0.1}")
        check(self.vote_threshold == 0 or self.kind == "majority_vote" or "majority_vote" in self.weights,
              "reward.vote_threshold", "only applies to reward.kind=majority_vote (or a mix with it)")


RANGES["reward"] = {"timeout_s": NON_NEGATIVE, "vote_threshold": UNIT}

