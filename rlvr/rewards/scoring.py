"""The reward phase, written once: sampled rollouts -> verdicts -> rewards -> a :class:`ScoredBatch`.

Called by the synchronous step, the async pipeline's local generators and the Ray verifier actor.

1. Every completion is verified (:func:`rlvr.rewards.verify.verify_checked`): failures (a raise,
   a timeout) score ``train.reward_failure_value``, are counted and warned about, and past
   ``train.max_reward_failure_rate`` stop the run.
2. The reward the loss sees: the verifier's (``reward.kind=verifier``), an intrinsic reward
   (self-certainty, entropy, majority vote, ...), or a weighted ``mix``; the verifier's reward
   is always kept beside it as ground truth (``truth_B``), never fed to an intrinsic run's loss.
3. DAPO overlong shaping is added to the reward when ``algo.overlong_cache`` is set.

Shapes: P prompts, G samples each, B = P*G rows; row p*G + g is sample g of prompt p.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.algo.advantages import overlong_penalty
from rlvr.config import RewardConfig, RunConfig, TrainConfig
from rlvr.errors import UserError
from rlvr.log import warn
from rlvr.rewards.funcs import funcs_reward
from rlvr.rewards.intrinsic import (
    INTRINSIC_REWARDS,
    REWARD_INPUTS,
    answer_cluster_reward,
    majority_vote_reward,
    proxy_diagnostics,
)
from rlvr.rewards.registry import allowed_failures
from rlvr.rewards.verify import VerifyReport, verify_checked
from rlvr.types import Problem, RolloutBatch, ScoredBatch, Verdict, task_equivalence

Equal = Callable[[str, str], bool]
Count = Callable[..., None]


def score_rollouts(cfg: RunConfig, task, rb: RolloutBatch, problems: list[Problem], max_new_tokens: int,
                   where: str, count: Count | None = None) -> ScoredBatch:
    """Score ``rb`` (B = len(problems) * G rows, G = ``algo.group_size``) -> ScoredBatch.

    ``where`` names the caller in warnings ("step 12", "generator 0"); ``count(key, n)`` receives
    the failure counters (``reward_failures``, ``reward_timeouts``).
    """
    G = cfg.algo.group_size
    rows = [p for p in problems for _ in range(G)]
    rep = verify_checked(task, rb.texts, rows, failure_value=cfg.train.reward_failure_value,
                         timeout_s=cfg.reward.timeout_s,
                         max_failures=allowed_failures(len(rows), cfg.train.max_reward_failure_rate))
    handle_reward_failures(rep, cfg.train, where, count)
    reward_B, truth_B, labels_P = compute_rewards(cfg.reward, rb, rep.verdicts, G, task_equivalence(task), rows,
                                                  failure_value=cfg.train.reward_failure_value, where=where,
                                                  count=count, max_failure_rate=cfg.train.max_reward_failure_rate)
    if cfg.algo.overlong_cache:
        reward_B = reward_B + overlong_penalty(rb.lengths.cpu(), max_new_tokens, cfg.algo.overlong_cache)
    return ScoredBatch(rb, rep.verdicts, reward_B, truth_B, list(problems), G, labels_P)


def handle_reward_failures(rep: VerifyReport, tc: TrainConfig, where: str, count: Count | None = None) -> None:
    """Count (``count(key, n)``), warn about and, past ``tc.max_reward_failure_rate``, raise on the
    failed reward calls of one VerifyReport."""
    if not rep.failures:
        return
    n, B = len(rep.failures), len(rep.verdicts)
    if count is not None:
        count("reward_failures", n)
        if rep.timeouts:
            count("reward_timeouts", rep.timeouts)
    row, msg = rep.failures[0]
    warn(f"{where}: {n}/{B} reward calls failed and were scored {tc.reward_failure_value} "
         f"(first, row {row}: {msg})")
    if n / B > tc.max_reward_failure_rate:
        raise UserError(f"{where}: {n}/{B} reward calls failed (first: {msg}), more than "
                        f"train.max_reward_failure_rate={tc.max_reward_failure_rate}; fix the reward "
                        "function or raise train.max_reward_failure_rate")


def compute_rewards(cfg: RewardConfig, rb: RolloutBatch, verdicts: list[Verdict], G: int,
                    equal: Equal | None = None, rows: list[Problem] | None = None, *,
                    failure_value: float = 0.0, where: str = "", count: Count | None = None,
                    max_failure_rate: float = 1.0,
                    ) -> tuple[torch.Tensor, torch.Tensor, list[str | None] | None]:
    """-> (reward_B used by the loss, truth_B the verifier's reward, majority label per group or None).

    ``equal``: the task's answer equivalence, used to pool votes (majority_vote). ``rows``: the B
    problems, one per completion (needed by ``reward.kind=funcs``, whose failures score
    ``failure_value`` and are counted with ``count`` and warned about as ``where``; a function whose
    calls fail (raise, time out, return something other than B finite numbers or None) for more than
    ``max_failure_rate`` of the B completions stops the run with a UserError, as a verifier does)."""
    truth = torch.tensor([v.reward for v in verdicts], dtype=torch.float32)  # cpu: rewards; step moves adv
    if cfg.kind == "verifier":
        return truth, truth, None
    if cfg.kind == "funcs":
        if rows is None:
            raise ValueError("reward.kind=funcs needs the problem of every row")
        reward, st = funcs_reward(cfg.funcs, [p.prompt for p in rows], rb.texts, rows, failure_value=failure_value,
                                  timeout_s=cfg.timeout_s, max_failure_rate=max_failure_rate)
        if st["failures"]:
            first = st["errors"][0] if st["errors"] else "?"
            if count is not None:
                count("reward_failures", st["failures"])
                if st["timeouts"]:
                    count("reward_timeouts", st["timeouts"])
            warn(f"{where}: {st['failures']}/{len(rows)} reward function calls failed and were scored "
                 f"{failure_value} (first: {first})")
            for spec, n in st["failures_by_func"].items():
                if n / len(rows) > max_failure_rate:
                    raise UserError(f"{where}: reward function {spec!r} failed for {n}/{len(rows)} completions "
                                    f"(first: {first}), more than train.max_reward_failure_rate="
                                    f"{max_failure_rate}; fix the reward function or raise "
                                    "train.max_reward_failure_rate")
        if st["none_all"]:
            warn(f"{where}: every reward function returned None for {st['none_all']}/{len(rows)} completions; "
                 "they score 0")
        return reward, truth, None
    answers = [v.answer if v.status in ("right", "wrong") else None for v in verdicts]
    answers_P_G = [answers[i : i + G] for i in range(0, len(answers), G)]
    labels = None
    if cfg.kind == "mix":
        reward = torch.zeros_like(truth)
        for name, w in cfg.weights.items():
            part = truth if name == "verifier" else intrinsic_reward(name, rb, answers_P_G, cfg.vote_threshold,
                                                                     equal)
            reward = reward + w * part
    else:
        reward = intrinsic_reward(cfg.kind, rb, answers_P_G, cfg.vote_threshold, equal)
    if cfg.kind == "majority_vote":
        labels = majority_vote_reward(answers_P_G, equal=equal)[1]
    return reward, truth, labels


def intrinsic_reward(name: str, rb: RolloutBatch, answers_P_G: list[list[str | None]],
                     vote_threshold: float = 0.0, equal: Equal | None = None) -> torch.Tensor:
    """(B,) intrinsic reward ``name`` (on the CPU, like the verifier's) from what the sampler returned
    (no extra forward pass). ``vote_threshold``: majority vote's minimum label share (TTRL)."""
    if name == "majority_vote":
        return majority_vote_reward(answers_P_G, min_share=vote_threshold, equal=equal)[0].reshape(-1)
    if name == "answer_cluster":
        return answer_cluster_reward(answers_P_G, equal=equal).reshape(-1)
    field = REWARD_INPUTS[name]
    src = getattr(rb, field)
    if src is None:
        raise ValueError(f"reward {name!r} needs RolloutBatch.{field}; sample with self_certainty=True")
    return INTRINSIC_REWARDS[name](src, rb.loss_mask).float().cpu()


def reward_metrics(batch: ScoredBatch, kind: str, equal: Equal | None = None) -> dict:
    """How the reward the loss saw tracks the ground truth (intrinsic rewards only; {} for the verifier):
    gt_accuracy, reward_accuracy, label_accuracy (majority vote), proxy_truth_corr."""
    if kind == "verifier":
        return {}
    G = batch.group_size
    gold = None if batch.labels_P is None else [p.answer for p in batch.problems]
    diag = proxy_diagnostics(batch.reward_B.view(-1, G), batch.truth_B.view(-1, G), batch.labels_P, gold, equal)
    return {k: v for k, v in diag.items() if v is not None}
