"""One RL step, written once, top to bottom:

    begin     learning rate of this step
    collect   a :class:`BatchSource` hands over scored prompt groups (:class:`Collected`)
    record    rollout diagnostics; No-Positive-Resampling pass rates
    train_on  advantages -> zero-variance filter -> loss mask -> policy_update: epochs x
              mini-batches x micro-batches of forward, objective and backward -> optimiser
    finish    token / FLOP / sample counters, the metrics line, loud warnings

The synchronous step (:class:`SyncSource`: sample and score here), the async pipeline
(:class:`rlvr.train.pipeline.Pipeline`: take groups from generator workers) and data parallel
(:class:`rlvr.train.distributed.DataParallelSource`: sample a share, all-gather) differ only in
their source, and data parallel also in its :class:`Sharding` (each rank back-propagates its
share of rows; gradients and statistics are summed over ranks). The loss is
:func:`rlvr.algo.losses.objective`; the per-step metrics are :mod:`rlvr.train.step_metrics`; how an
update splits its batch is :mod:`rlvr.train.micro_batches`; what it measures on the way,
:mod:`rlvr.train.update_diagnostics`.

Shapes: P prompts, G samples per prompt, B = P*G rows (row p*G + g is sample g of prompt p),
T completion tokens.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Protocol

import torch

from rlvr.algo.advantages import group_advantages, mixed_outcome_groups, zero_variance_groups
from rlvr.algo.losses import objective
from rlvr.algo.mismatch import correct
from rlvr.errors import UserError
from rlvr.log import warn
from rlvr.model.hf import model_source
from rlvr.model.io import model_device
from rlvr.model.logprobs import completion_logits, score, sequences, token_logprobs
from rlvr.rewards.scoring import reward_metrics, score_rollouts
from rlvr.rollout.engine import sample
from rlvr.rollout.vllm import VLLMEngine
from rlvr.rollout.vllm import sample as vllm_sample
from rlvr.tasks.environment import environments_for
from rlvr.train.micro_batches import LOCAL, MicroBatch, Sharding, UpdateBatch
from rlvr.train.schedule import lr_at
from rlvr.train.state import TrainState, completion_budget, flops_per_token, sampling_generator
from rlvr.train.step_metrics import lag_metrics, rollout_metrics, warn_silent_failures
from rlvr.train.update_diagnostics import UpdateDiagnostics
from rlvr.types import ScoredBatch, task_equivalence


@dataclass
class Collected:
    """What a source hands to the step. ``kept``: the groups to train on (None: nothing usable);
    ``seen``: every group sampled for this step (diagnostics, pass-rate tracker); ``gen_rows`` /
    ``gen_tokens``: rows and tokens generated for it (discarded ones included)."""

    kept: ScoredBatch | None
    seen: ScoredBatch
    gen_rows: int
    gen_tokens: int
    metrics: dict = field(default_factory=dict)  # the source's own diagnostics


class BatchSource(Protocol):
    """Where the step's batch comes from."""

    def collect(self, st: TrainState) -> Collected: ...

    def after_update(self, st: TrainState, collected: Collected) -> dict:
        """Called after the optimiser: publish the weights; more metrics."""
        ...

    def close(self) -> None: ...


# ----------------------------------------------------------------------------- the step
def rl_step(st: TrainState, total_steps: int, source: BatchSource | None = None,
            sharding: Sharding = LOCAL) -> dict:
    """One RL step; returns the metrics line for this step (floats, no tensors)."""
    source = source or SyncSource()
    t0 = time.time()
    begin(st, total_steps)
    collected = source.collect(st)
    metrics = record(st, collected)
    t_gen = time.time()
    metrics.update(train_on(st, collected.kept, sharding))
    metrics.update(source.after_update(st, collected))
    t_end = time.time()
    metrics.update(gen_s=t_gen - t0, train_s=t_end - t_gen)
    return finish(st, metrics, collected, t_end - t0)


def begin(st: TrainState, total_steps: int) -> None:
    """Set this step's learning rate (warm-up, then constant or cosine)."""
    optim = st.cfg.optim
    for group in st.opt.param_groups:
        group["lr"] = lr_at(st.step, optim.lr, optim.warmup_steps, total_steps, optim.schedule)


def record(st: TrainState, collected: Collected) -> dict:
    """Rollout diagnostics of everything sampled, and the No-Positive-Resampling pass rates."""
    seen = collected.seen
    metrics = rollout_metrics(seen)
    metrics.update(reward_metrics(seen, st.cfg.reward.kind, task_equivalence(st.task)))
    metrics.update(collected.metrics)
    metrics.update(lag_metrics(st.step, seen))
    if st.tracker is not None:
        correct_P = seen.correct_P_G().sum(-1)
        with st.lock:
            st.tracker.update([p.id for p in seen.problems], correct_P.tolist(), [seen.group_size] * seen.n_groups)
            metrics["retired_prompts"] = len(st.tracker.retired)
    return metrics


def finish(st: TrainState, metrics: dict, collected: Collected, elapsed_s: float) -> dict:
    """Generation counters and the shared keys of the metrics line; loud warnings."""
    st.step += 1
    st.samples += collected.gen_rows
    st.tokens += collected.gen_tokens
    st.flops += flops_per_token(st.model) * collected.gen_tokens
    st.wall_s += elapsed_s
    metrics.update(step=st.step, samples=st.samples, tokens=st.tokens, flops=st.flops, wall_s=st.wall_s,
                   version=st.version, lr=st.opt.param_groups[0]["lr"])
    warn_silent_failures(st, metrics)
    return metrics


# ----------------------------------------------------------------------------- collect (sync)
class SyncSource:
    """Sample and score P groups here, with the current policy (DAPO dynamic sampling: keep
    sampling until P groups have mixed outcomes, at most ``algo.dynamic_max_rounds`` rounds)."""

    def collect(self, st: TrainState) -> Collected:
        algo, P = st.cfg.algo, st.cfg.algo.prompts_per_step
        gen = sampling_generator(st.cfg.train.seed, st.step)
        kept, seen, timing = [], [], {"score_s": 0.0}
        for _ in range(algo.dynamic_max_rounds if algo.dynamic_sampling else 1):
            batch = rollout(st, st.next_problems(P), gen, f"step {st.step + 1}", timing)
            seen.append(batch)
            kept.append(batch.select(mixed_outcome_groups(batch.correct_P_G())) if algo.dynamic_sampling else batch)
            if sum(b.n_groups for b in kept) >= P:
                break
        else:
            n_kept = sum(b.n_groups for b in kept)
            if algo.dynamic_sampling and n_kept < P:
                st.count("dynamic_sampling_short")
                warn(f"dynamic sampling found {n_kept}/{P} groups with mixed outcomes in {algo.dynamic_max_rounds} "
                     "rounds; training on a smaller batch")
        kept = [b for b in kept if b.n_groups]
        all_seen = ScoredBatch.concat(seen, st.tok.pad_id)
        train = ScoredBatch.concat(kept, st.tok.pad_id).head(P) if kept else None
        score_s = timing["score_s"]
        return Collected(train, all_seen, all_seen.size, all_seen.rollouts.n_tokens,
                         {"score_s": score_s, "scored_per_s": all_seen.size / score_s if score_s > 0 else 0.0})

    def after_update(self, st: TrainState, collected: Collected) -> dict:
        return {}

    def close(self) -> None:
        pass


def rollout(st: TrainState, problems: list, gen: torch.Generator, where: str,
            timing: dict | None = None) -> ScoredBatch:
    """G completions of each problem from the current policy, scored (the reward phase);
    ``timing["score_s"]`` (when given) accumulates the seconds spent scoring."""
    G = st.cfg.algo.group_size
    rows = [p for p in problems for _ in range(G)]
    rb = sample_policy(st, [p.prompt for p in rows], gen, rows)
    t0 = time.time()
    scored = score_rollouts(st.cfg, st.task, rb, problems, st.params.max_new_tokens, where, st.count)
    if timing is not None:
        timing["score_s"] += time.time() - t0
    return scored


def sample_policy(st: TrainState, prompts: list[str], gen: torch.Generator, problems: list | None = None):
    """One completion per prompt from the current policy: the native sampler, or (``sampling.engine
    vllm``) a vLLM engine whose weights are synced from the trainer whenever they are behind. For a
    tool task, ``problems`` (one per prompt) and one multi-turn episode per row (native sampler only)."""
    environments = None if problems is None else environments_for(st.task, problems, st.params)
    if st.cfg.sampling.engine == "native":
        return sample(st.model, st.tok, prompts, st.params, version=st.step, generator=gen,
                      environments=environments, problems=problems)
    if environments is not None:
        raise UserError("tool tasks (multi-turn episodes) run on sampling.engine=native; the vLLM engine "
                        "samples single turns (docs/tools.md, 'vLLM')")

    if st.engine is None:
        st.engine = VLLMEngine(model_source(st.cfg.model.init_from or st.cfg.model.path),
                               dtype=st.cfg.model.dtype, seed=st.cfg.train.seed,
                               gpu_memory_utilization=st.cfg.sampling.vllm_gpu_memory)
        st.engine_version = st.version if st.step == 0 else -1  # a resumed policy differs from the files
    if st.engine_version != st.version:  # weight sync after the optimiser steps
        st.engine.load_weights(st.model)
        st.engine_version = st.version
    rb = vllm_sample(st.engine, st.tok, prompts, st.params, version=st.step, generator=gen)
    return rb.to(model_device(st.model))


# ----------------------------------------------------------------------------- train_on
def train_on(st: TrainState, batch: ScoredBatch | None, sharding: Sharding = LOCAL) -> dict:
    """Advantages -> zero-variance filter -> loss mask -> policy update; training token/FLOP counts.
    ``zero_var_frac_trained``: the zero-variance share of the groups handed over to train on
    (``zero_var_frac``, over every group sampled, comes from :func:`rlvr.train.step_metrics.rollout_metrics`)."""
    cfg = st.cfg
    metrics: dict = {}
    if batch is not None:
        batch, adv_B, metrics["zero_var_frac_trained"] = advantages(batch, st.loss.std_norm, cfg.algo.zero_var_filter)
    if batch is not None and batch.size:
        rb = batch.rollouts
        device = model_device(st.model)
        mask = rb.loss_mask.clone()
        if cfg.algo.mask_truncated:
            mask &= torch.tensor([r != "length" for r in rb.finish_reason], device=mask.device)[:, None]
        if mask.any():
            metrics.update(policy_update(st, batch, adv_B.to(device), mask.to(device), sharding))
            n_train = rb.n_tokens * cfg.algo.ppo_epochs
            fpt = flops_per_token(st.model)
            st.tokens += n_train
            st.flops += 3 * fpt * n_train + (fpt * n_train if st.ref_model is not None else 0)
    if "grad_norm" not in metrics:
        st.count("steps_without_gradient")
        warn(f"step {st.step + 1}: no gradient (every group had equal rewards or no loss tokens)")
    return metrics


def advantages(batch: ScoredBatch, std_norm: str, zero_var_filter: bool) -> tuple[ScoredBatch, torch.Tensor, float]:
    """-> (the groups trained on, their adv_B (B',), the zero-variance share of the input groups).

    With ``zero_var_filter`` the groups whose rewards are all equal are dropped BEFORE the
    advantages are normalised, so a batch-level std (ScaleRL) is the std of the rows trained on,
    not diluted by the dropped groups' zeros.
    """
    zero_P = zero_variance_groups(batch.reward_B.view(-1, batch.group_size))
    if zero_var_filter and zero_P.any():
        batch = batch.select(~zero_P)
    adv_B = group_advantages(batch.reward_B.view(-1, batch.group_size), std_norm).reshape(-1) if batch.size \
        else batch.reward_B
    return batch, adv_B, float(zero_P.float().mean())


def policy_update(st: TrainState, batch: ScoredBatch, adv_B: torch.Tensor, mask: torch.Tensor,
                  sharding: Sharding = LOCAL) -> dict:
    """PPO-style epochs x mini-batches (split by prompt group) x micro-batches over one batch.

    adv_B: (B,), mask: (B, T) on the policy's device. Loss weights are computed per mini-batch on
    the whole mini-batch (:mod:`rlvr.train.micro_batches`), so accumulating micro-batch gradients
    (and, in data parallel, summing them over ranks) gives exactly the mini-batch gradient. Returns
    stats averaged over updates, the entropy-dynamics cells of every row of the first epoch and the
    ``mismatch_*`` metrics (:class:`rlvr.train.update_diagnostics.UpdateDiagnostics`).
    """
    update = prepare_update(st, batch, adv_B, mask)
    diagnostics = UpdateDiagnostics(sharding, st.opt.param_groups[0]["lr"], st.loss.is_cap, update.mismatch_sums)
    for epoch in range(st.cfg.algo.ppo_epochs):
        for rows in update.minibatches(st.cfg.algo.minibatches, st.gen):
            st.opt.zero_grad(set_to_none=True)
            diagnostics.begin_update(epoch)
            for micro in update.micro_batches(rows, sharding):
                micro_step(st, micro, diagnostics)
            apply_update(st, sharding, diagnostics)
    return diagnostics.summary()


def prepare_update(st: TrainState, batch: ScoredBatch, adv_B: torch.Tensor, mask: torch.Tensor) -> UpdateBatch:
    """The batch of one update, with the train/inference mismatch correction applied.

    Mismatch (``loss.is_correction``, :mod:`rlvr.algo.mismatch`): when a correction is on, the
    trainer first recomputes the whole batch's log-probs (no gradient, before any update); the PPO
    ratio is taken against them and each token's loss is weighted by the corrected ratio train /
    behaviour; the tokens a masked mode rejects leave the loss mask, and so the aggregation's
    normaliser.
    """
    rb = batch.rollouts
    micro_size = st.cfg.algo.micro_batch_size or rb.size
    train_logp = correction = None
    if st.loss.is_correction != "none":
        train_logp = score(st.model, rb, st.cfg.sampling.temperature, batch_size=micro_size)
        correction = correct(train_logp, rb.behaviour_logp, mask, st.loss.is_correction, st.loss.is_cap)
    return UpdateBatch(
        rollouts=rb, group_size=batch.group_size, adv_B=adv_B,
        mask=mask if correction is None else correction.keep,
        old_logp=rb.behaviour_logp if train_logp is None else train_logp,
        is_weight=None if correction is None else correction.weights,
        aggregation=st.loss.aggregation, max_len=max(completion_budget(st.params), rb.completion_ids.shape[1]),
        with_kl=st.ref_model is not None, micro_size=micro_size,
        mismatch_sums=None if correction is None else correction.sums)


def micro_step(st: TrainState, micro: MicroBatch, diagnostics: UpdateDiagnostics) -> None:
    """Forward + backward of one micro-batch: the policy's log-probs and entropies, the reference's
    log-probs (KL anchor), the objective (:func:`rlvr.algo.losses.objective`); its statistics to
    ``diagnostics``. A non-finite loss is counted (``nan_loss``) and not back-propagated."""
    temperature = st.cfg.sampling.temperature
    ids, key_mask, tp = sequences(micro.rollouts, micro.rows)
    logits = completion_logits(st.model, ids, key_mask, tp, temperature)
    logp, entropy = token_logprobs(logits, micro.tokens)
    ref_logp = None
    if micro.kl_weights is not None:
        ref_logp = score(st.ref_model, micro.rollouts.select(micro.rows), temperature)
    loss, stats = objective(micro.loss_inputs(logp), st.loss, entropy, ref_logp, micro.kl_weights)
    diagnostics.micro_batch(micro, logits, logp, stats)
    if not torch.isfinite(loss):
        st.count("nan_loss")
        return
    loss.backward()


def apply_update(st: TrainState, sharding: Sharding, diagnostics: UpdateDiagnostics) -> None:
    """One optimiser update from the accumulated gradient: summed over processes, then
    :func:`clip_and_step`; the update's statistics (with ``grad_norm``) to ``diagnostics``."""
    sharding.reduce_grads([p for p in st.model.parameters() if p.requires_grad])
    stats = diagnostics.update_stats()
    stats["grad_norm"] = clip_and_step(st, finite_loss=math.isfinite(stats.get("loss", 0.0)))
    diagnostics.add_update(stats)


def clip_and_step(st: TrainState, finite_loss: bool = True) -> float:
    """Clip and apply the accumulated gradient; skipped (and counted once per step in
    ``nan_steps``) when the loss of any micro-batch or the gradient norm is NaN/Inf."""
    params = [p for p in st.model.parameters() if p.requires_grad]
    clip = st.cfg.optim.grad_clip or float("inf")
    norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
    if not finite_loss or not math.isfinite(norm):
        if st.last_nan_step != st.step:  # several mini-batches of one step count once
            st.nan_steps, st.last_nan_step = st.nan_steps + 1, st.step
        st.count("nonfinite_grad_steps" if finite_loss else "nonfinite_loss_updates")
        warn(f"step {st.step + 1}: non-finite {'gradient' if finite_loss else 'loss'}; optimiser step skipped "
             f"({st.nan_steps}/{st.cfg.train.max_nan_steps})")
        st.opt.zero_grad(set_to_none=True)
        return norm
    st.opt.step()
    st.version += 1
    return norm
