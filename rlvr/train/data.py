"""Which problems RL trains on, and the order in which they are visited: seeded epochs,
resumable, with No-Positive-Resampling (retired prompts are skipped in later epochs).

Test-time training (``task.test_time``, TTRL 2504.16084): the training set is the first
``task.heldout_size`` held-out problems, the same ones the evaluation scores, so the reward
must not use their labels (:func:`check_test_time`)."""

from __future__ import annotations

import random

from rlvr.config import ConfigError, RunConfig, TaskConfig
from rlvr.log import warn
from rlvr.types import Problem


def training_problems(task, tc: TaskConfig) -> list[Problem]:
    """The problems RL trains on: the first ``tc.train_size`` of the train split (0 = all), or in
    test-time mode the first ``tc.heldout_size`` held-out problems (the evaluation set)."""
    if tc.test_time:
        return task.problems("heldout", tc.heldout_size)
    return task.problems("train", tc.train_size or None)


def reward_uses_labels(rc) -> bool:
    """Whether the reward of RewardConfig ``rc`` reads ground truth: the verifier, reward functions (they
    get the ``answer`` column), or a mix that weights the verifier."""
    return rc.kind in ("verifier", "funcs") or (rc.kind == "mix" and bool(rc.weights.get("verifier", 0)))


def check_test_time(cfg: RunConfig) -> None:
    """Refuse the test-time settings that would train on held-out labels (ConfigError), and an
    evaluation set that differs from the training set. No-op unless ``task.test_time``."""
    if not cfg.task.test_time:
        return
    leak = "task.test_time=true trains on the held-out problems, so their labels must not reach the loss"
    if reward_uses_labels(cfg.reward):
        if cfg.reward.kind == "verifier":
            raise ConfigError(f"reward.kind: verifier with {leak}; use an unsupervised reward "
                              "(reward.kind=majority_vote, self_certainty, ...)")
        raise ConfigError(f"reward.weights: a verifier weight with {leak}; drop the verifier from the mix")
    if cfg.algo.npr_threshold > 0:
        raise ConfigError(f"algo.npr_threshold: No-Positive-Resampling retires prompts by their ground-truth "
                          f"pass rate, and {leak}; set algo.npr_threshold=0")
    if cfg.algo.dynamic_sampling:
        raise ConfigError(f"algo.dynamic_sampling: DAPO dynamic sampling keeps the groups whose ground-truth "
                          f"answers are mixed (some right, some wrong), and {leak}; set algo.dynamic_sampling=false")
    if cfg.train.eval_problems != cfg.task.heldout_size:
        raise ConfigError(f"train.eval_problems={cfg.train.eval_problems} but task.heldout_size="
                          f"{cfg.task.heldout_size}: with task.test_time=true the evaluation set is the "
                          f"training set; set train.eval_problems={cfg.task.heldout_size}")


class PromptSampler:
    """Yields problems epoch by epoch in a seeded shuffled order; ``state_dict`` resumes exactly."""

    def __init__(self, problems: list[Problem], seed: int):
        if not problems:
            raise ValueError("no training problems")
        self.problems, self.seed = problems, seed
        self.epoch, self.pos = 0, 0
        self._order = self._shuffle(0)
        self._warned_exhausted = False  # the all-retired warning is said once, not every step
        self._warned_short = False  # so is the fewer-active-than-a-batch one

    def _shuffle(self, epoch: int) -> list[int]:
        order = list(range(len(self.problems)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def next(self, n: int, retired: frozenset[str] = frozenset()) -> list[Problem]:
        """The next ``n`` problems not in ``retired``, read off the seeded epoch orders in turn.

        Retirement leaving fewer than ``n`` active prompts: the walk crosses epochs to fill the batch (each
        active prompt once an epoch) and a warning says so once; none active: every prompt is reused, with
        its own warning once (the run's ``retired_prompts`` metric shows the pool after). A short pool is
        walked by the active prompts' places in each epoch's order, not position by position: the same
        batches, without a Python step per pool entry per epoch (one active prompt of 34,000 took 2.26 s a
        batch of 64, measured in docs/methods/advantages.md)."""
        active, few = len(self.problems) - len(retired), None
        if active < n:  # the cheap bound says short: list them (ids outside the pool only lower the bound)
            few = [i for i, p in enumerate(self.problems) if p.id not in retired]
            active = len(few)
        if active <= 0:
            if not self._warned_exhausted:
                warn(f"every training prompt ({len(self.problems):,}) is retired (No-Positive-Resampling); reusing "
                     "all prompts from now on (said once; the metric retired_prompts shows the pool)")
                self._warned_exhausted = True
            retired, active = frozenset(), len(self.problems)
        if active >= min(n, len(self.problems)):
            return self._walk(n, retired)  # enough active, or a small pool none retired (the walk repeats it)
        if not self._warned_short:
            warn(f"only {active:,} of {len(self.problems):,} training prompts are not retired "
                 f"(No-Positive-Resampling), fewer than the {n} a step draws: each batch repeats them (said "
                 "once; the metric retired_prompts shows the pool)")
            self._warned_short = True
        return self._walk_few(n, few)

    def _next_epoch_if_done(self) -> None:
        if self.pos >= len(self._order):
            self.epoch, self.pos = self.epoch + 1, 0
            self._order = self._shuffle(self.epoch)

    def _walk(self, n: int, retired: frozenset[str]) -> list[Problem]:
        """The next ``n`` problems not in ``retired``, position by position along the epoch orders."""
        out: list[Problem] = []
        while len(out) < n:
            self._next_epoch_if_done()
            p = self.problems[self._order[self.pos]]
            self.pos += 1
            if p.id not in retired:
                out.append(p)
        return out

    def _walk_few(self, n: int, few: list[int]) -> list[Problem]:
        """What ``_walk`` returns (and where it leaves ``pos``) when only the pool indices ``few`` are active,
        jumping between their places in each epoch's order."""
        out: list[Problem] = []
        while len(out) < n:
            self._next_epoch_if_done()
            ahead = sorted(w for w in map(self._order.index, few) if w >= self.pos)[: n - len(out)]
            if not ahead:
                self.pos = len(self._order)
                continue
            out += [self.problems[self._order[w]] for w in ahead]
            self.pos = ahead[-1] + 1
        return out

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos, "seed": self.seed}

    def load_state_dict(self, d: dict) -> None:
        self.seed, self.epoch, self.pos = d["seed"], d["epoch"], d["pos"]
        self._order = self._shuffle(self.epoch)
