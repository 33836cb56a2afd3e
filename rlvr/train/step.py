"""One RL step, written once, top to bottom:

    begin     learning rate of this step
    collect   a :class:`BatchSource` hands over scored prompt groups (:class:`Collected`)
    record    rollout diagnostics; No-Positive-Resampling pass rates
    train_on  advantages -> zero-variance filter -> loss mask -> epochs x mini-batches x
              micro-batches of loss and backward -> optimiser
    finish    token / FLOP / sample counters, the metrics line, loud warnings

The synchronous step (:class:`SyncSource`: sample and score here), the async pipeline
(:class:`rlvr.train.pipeline.Pipeline`: take groups from generator workers) and data parallel
(:class:`rlvr.train.distributed.DataParallelSource`: sample a share, all-gather) differ only in
their source, and data parallel also in its :class:`Sharding` (each rank back-propagates its
share of rows; gradients and statistics are summed over ranks).

Shapes: P prompts, G samples per prompt, B = P*G rows (row p*G + g is sample g of prompt p),
T completion tokens.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Protocol

import torch

from rlvr.algo import losses as L
from rlvr.algo import mismatch as MM
from rlvr.algo.advantages import group_advantages, mixed_outcome_groups, zero_variance_groups
from rlvr.algo.diagnostics import entropy_cell_sums, entropy_dynamics_from_sums, token_stats_from_logits
from rlvr.log import warn
from rlvr.model.hf import model_source
from rlvr.model.io import model_device
from rlvr.model.logprobs import completion_logits, score, sequences, token_logprobs
from rlvr.rewards.scoring import reward_metrics, score_rollouts
from rlvr.rollout import vllm as V
from rlvr.rollout.engine import sample
from rlvr.train.schedule import lr_at
from rlvr.train.state import TrainState, completion_budget, flops_per_token, sampling_generator
from rlvr.types import ScoredBatch, task_equivalence

SUMMED = ("loss", "policy_loss")  # micro-batch stats that add up (weights are mini-batch-normalised)


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

    def after_update(self, st: TrainState, got: Collected) -> dict:
        """Called after the optimiser: publish the weights; more metrics."""
        ...

    def close(self) -> None: ...


class Sharding:
    """How one process takes part in an update: the identity for a single process. Data parallel
    overrides all three (its rows of each mini-batch; all-reduce of gradients and statistics)."""

    def rows(self, rows: torch.Tensor) -> slice:
        """The part of a mini-batch's (sorted) rows this process back-propagates."""
        return slice(None)

    def reduce_grads(self, params: list[torch.Tensor]) -> None:
        """Sum the gradients over processes (before clipping)."""

    def reduce_stats(self, stats: dict[str, float]) -> dict[str, float]:
        """Sum additive statistics over processes."""
        return stats


LOCAL = Sharding()


# ----------------------------------------------------------------------------- the step
def rl_step(st: TrainState, total_steps: int, source: BatchSource | None = None,
            sharding: Sharding = LOCAL) -> dict:
    """One RL step; returns the metrics line for this step (floats, no tensors)."""
    source = source or SyncSource()
    t0 = time.time()
    begin(st, total_steps)
    got = source.collect(st)
    m = record(st, got)
    t_gen = time.time()
    m.update(train_on(st, got.kept, sharding))
    m.update(source.after_update(st, got))
    t_end = time.time()
    m.update(gen_s=t_gen - t0, train_s=t_end - t_gen)
    return finish(st, m, got, t_end - t0)


def begin(st: TrainState, total_steps: int) -> None:
    """Set this step's learning rate (warm-up, then constant or cosine)."""
    o = st.cfg.optim
    for g in st.opt.param_groups:
        g["lr"] = lr_at(st.step, o.lr, o.warmup_steps, total_steps, o.schedule)


def record(st: TrainState, got: Collected) -> dict:
    """Rollout diagnostics of everything sampled, and the No-Positive-Resampling pass rates."""
    seen = got.seen
    m = rollout_metrics(seen)
    m.update(reward_metrics(seen, st.cfg.reward.kind, task_equivalence(st.task)))
    m.update(got.metrics)
    lag_B = staleness(st.step, seen.rollouts.versions, seen.rollouts.completion_mask)
    m.update(lag_max=int(lag_B.max()) if lag_B.numel() else 0,
             lag_mean=float(lag_B.float().mean()) if lag_B.numel() else 0.0)
    if st.tracker is not None:
        correct_P = seen.correct_P_G().sum(-1)
        with st.lock:
            st.tracker.update([p.id for p in seen.problems], correct_P.tolist(), [seen.group_size] * seen.n_groups)
            m["retired_prompts"] = len(st.tracker.retired)
    return m


def finish(st: TrainState, m: dict, got: Collected, elapsed_s: float) -> dict:
    """Generation counters and the shared keys of the metrics line; loud warnings."""
    st.step += 1
    st.samples += got.gen_rows
    st.tokens += got.gen_tokens
    st.flops += flops_per_token(st.model) * got.gen_tokens
    st.wall_s += elapsed_s
    m.update(step=st.step, samples=st.samples, tokens=st.tokens, flops=st.flops, wall_s=st.wall_s,
             version=st.version, lr=st.opt.param_groups[0]["lr"])
    warn_silent_failures(st, m)
    return m


def oldest_versions(versions_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> torch.Tensor:
    """(B,) the OLDEST policy version among each row's real tokens."""
    return versions_B_T.masked_fill(~mask_B_T, torch.iinfo(versions_B_T.dtype).max).min(-1).values


def staleness(version: int, versions_B_T: torch.Tensor, mask_B_T: torch.Tensor) -> torch.Tensor:
    """(B,) trainer version minus the oldest policy version among each row's real tokens."""
    return version - oldest_versions(versions_B_T, mask_B_T)


# ----------------------------------------------------------------------------- collect (sync)
class SyncSource:
    """Sample and score P groups here, with the current policy (DAPO dynamic sampling: keep
    sampling until P groups have mixed outcomes, at most ``algo.dynamic_max_rounds`` rounds)."""

    def collect(self, st: TrainState) -> Collected:
        a, P = st.cfg.algo, st.cfg.algo.prompts_per_step
        gen = sampling_generator(st.cfg.train.seed, st.step)
        kept, seen, timing = [], [], {"score_s": 0.0}
        for _ in range(a.dynamic_max_rounds if a.dynamic_sampling else 1):
            batch = rollout(st, st.next_problems(P), gen, f"step {st.step + 1}", timing)
            seen.append(batch)
            kept.append(batch.select(mixed_outcome_groups(batch.correct_P_G())) if a.dynamic_sampling else batch)
            if sum(b.n_groups for b in kept) >= P:
                break
        else:
            got = sum(b.n_groups for b in kept)
            if a.dynamic_sampling and got < P:
                st.count("dynamic_sampling_short")
                warn(f"dynamic sampling found {got}/{P} groups with mixed outcomes in {a.dynamic_max_rounds} "
                     "rounds; training on a smaller batch")
        kept = [b for b in kept if b.n_groups]
        all_seen = ScoredBatch.concat(seen, st.tok.pad_id)
        train = ScoredBatch.concat(kept, st.tok.pad_id).head(P) if kept else None
        score_s = timing["score_s"]
        return Collected(train, all_seen, all_seen.size, all_seen.rollouts.n_tokens,
                         {"score_s": score_s, "scored_per_s": all_seen.size / score_s if score_s > 0 else 0.0})

    def after_update(self, st: TrainState, got: Collected) -> dict:
        return {}

    def close(self) -> None:
        pass


def rollout(st: TrainState, problems: list, gen: torch.Generator, where: str,
            timing: dict | None = None) -> ScoredBatch:
    """G completions of each problem from the current policy, scored (the reward phase);
    ``timing["score_s"]`` (when given) accumulates the seconds spent scoring."""
    G = st.cfg.algo.group_size
    rb = sample_policy(st, [p.prompt for p in problems for _ in range(G)], gen)
    t0 = time.time()
    scored = score_rollouts(st.cfg, st.task, rb, problems, st.params.max_new_tokens, where, st.count)
    if timing is not None:
        timing["score_s"] += time.time() - t0
    return scored


def sample_policy(st: TrainState, prompts: list[str], gen: torch.Generator):
    """One completion per prompt from the current policy: the native sampler, or (``sampling.engine
    vllm``) a vLLM engine whose weights are synced from the trainer whenever they are behind."""
    if st.cfg.sampling.engine == "native":
        return sample(st.model, st.tok, prompts, st.params, version=st.step, generator=gen)

    if st.engine is None:
        st.engine = V.VLLMEngine(model_source(st.cfg.model.init_from or st.cfg.model.path),
                                 dtype=st.cfg.model.dtype, seed=st.cfg.train.seed,
                                 gpu_memory_utilization=st.cfg.sampling.vllm_gpu_memory)
        st.engine_version = st.version if st.step == 0 else -1  # a resumed policy differs from the files
    if st.engine_version != st.version:  # weight sync after the optimiser steps
        st.engine.load_weights(st.model)
        st.engine_version = st.version
    rb = V.sample(st.engine, st.tok, prompts, st.params, version=st.step, generator=gen)
    return rb.to(model_device(st.model))


# ----------------------------------------------------------------------------- train_on
def train_on(st: TrainState, batch: ScoredBatch | None, sharding: Sharding = LOCAL) -> dict:
    """Advantages -> zero-variance filter -> loss mask -> policy update; training token/FLOP counts."""
    cfg = st.cfg
    upd: dict = {}
    if batch is not None:
        batch, adv_B, upd["zero_var_frac"] = advantages(batch, st.loss.std_norm, cfg.algo.zero_var_filter)
    if batch is not None and batch.size:
        rb = batch.rollouts
        device = model_device(st.model)
        mask = rb.loss_mask.clone()
        if cfg.algo.mask_truncated:
            mask &= torch.tensor([r != "length" for r in rb.finish_reason], device=mask.device)[:, None]
        if mask.any():
            upd.update(policy_update(st, batch, adv_B.to(device), mask.to(device), sharding))
            n_train = rb.n_tokens * cfg.algo.ppo_epochs
            fpt = flops_per_token(st.model)
            st.tokens += n_train
            st.flops += 3 * fpt * n_train + (fpt * n_train if st.ref_model is not None else 0)
    if "grad_norm" not in upd:
        st.count("steps_without_gradient")
        warn(f"step {st.step + 1}: no gradient (every group had equal rewards or no loss tokens)")
    return upd


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
    the whole mini-batch, so accumulating micro-batch gradients (and, in data parallel, summing
    them over ranks) gives exactly the mini-batch gradient. Returns stats averaged over updates;
    the entropy-dynamics cells cover every row of the first epoch.

    Mismatch (``loss.is_correction``, :mod:`rlvr.algo.mismatch`): when a correction is on, the
    trainer first recomputes the whole batch's log-probs (no gradient, before any update); the PPO
    ratio is taken against them and each token's loss is weighted by the corrected ratio train /
    behaviour (the tokens a masked mode rejects leave the loss mask, and so the aggregation's
    normaliser); the ``mismatch_*`` metrics cover every loss token. When it is off, the metrics are
    measured at no extra cost on the first mini-batch of the first epoch (the rows scored before this
    batch's first optimiser step).
    """
    cfg, G, rb = st.cfg, batch.group_size, batch.rollouts
    micro = cfg.algo.micro_batch_size or rb.size
    max_len = max(completion_budget(st.params), rb.completion_ids.shape[1])
    agg: dict[str, float] = {}
    cells: dict[str, float] = {}
    mm: dict[str, float] = {}
    train_logp = is_w = None
    if st.loss.is_correction != "none":
        train_logp = score(st.model, rb, cfg.sampling.temperature, batch_size=micro)
        is_w = MM.is_weights(train_logp, rb.behaviour_logp, mask, st.loss.is_correction, st.loss.is_cap)
        mm = MM.mismatch_stats(train_logp, rb.behaviour_logp, mask, st.loss.is_correction, st.loss.is_cap)
        mask = mask & ~MM.rejected(train_logp, rb.behaviour_logp, mask, st.loss.is_correction, st.loss.is_cap)
    n_updates = 0
    for epoch in range(cfg.algo.ppo_epochs):
        perm = torch.randperm(batch.n_groups, generator=st.gen)  # cpu: CPU generator, same stream on every rank
        for mb_groups in perm.chunk(min(cfg.algo.minibatches, batch.n_groups)):
            rows = (mb_groups[:, None] * G + torch.arange(G)).reshape(-1).sort().values  # cpu: row index
            n_rows = len(rows)
            w = L.token_weights(mask[rows], G, st.loss.aggregation, max_len=max_len, adv_B=adv_B[rows])
            kl_w = L.token_weights(mask[rows], G, "token_mean") if st.ref_model is not None else None
            mine = sharding.rows(rows)  # data parallel: this rank's share; weights stay global
            rows, w, kl_w = rows[mine], w[mine], None if kl_w is None else kl_w[mine]
            st.opt.zero_grad(set_to_none=True)
            stats: dict[str, float] = {}
            measure = mm if train_logp is None and n_updates == 0 else None
            for mrows, mw, mkl in _micro_batches(rows, w, kl_w, micro):
                s = micro_step(st, rb, mrows, mw, mkl, adv_B, mask, cells if epoch == 0 else None,
                               train_logp, is_w, measure)
                for k, v in s.items():  # losses are partial sums; other stats are means over rows
                    stats[k] = stats.get(k, 0.0) + (v if k in SUMMED else v * len(mrows) / n_rows)
            sharding.reduce_grads([p for p in st.model.parameters() if p.requires_grad])
            stats = sharding.reduce_stats(stats)
            stats["grad_norm"] = clip_and_step(st, finite_loss=math.isfinite(stats.get("loss", 0.0)))
            n_updates += 1
            for k, v in stats.items():
                agg[k] = agg.get(k, 0.0) + v
    out = {k: v / max(1, n_updates) for k, v in agg.items()}
    out.update(MM.summarise(mm))
    if cells:
        out.update(entropy_dynamics_from_sums(sharding.reduce_stats(cells)))
    return out


def _micro_batches(rows, w, kl_w, micro: int):
    kl_parts = [None] * len(rows.split(micro)) if kl_w is None else kl_w.split(micro)
    return zip(rows.split(micro), w.split(micro), kl_parts)


def micro_step(st: TrainState, rb, rows: torch.Tensor, w: torch.Tensor, kl_w: torch.Tensor | None,
               adv_B: torch.Tensor, mask: torch.Tensor, cells: dict | None,
               train_logp: torch.Tensor | None = None, is_w: torch.Tensor | None = None,
               measure: dict | None = None) -> dict:
    """Forward + backward of one micro-batch (``rows``); its loss and statistics.

    w: (b, T) policy-loss weights; kl_w: (b, T) KL weights (a token mean over ALL loss tokens of the
    mini-batch, whatever the policy loss's aggregation; None without a reference model). ``cells``
    accumulates the entropy-dynamics sums (first epoch only). train_logp, is_w: (B, T) the
    trainer's recomputed log-probs (the PPO ratio's reference) and the mismatch-correction weights,
    None when no correction is on. ``measure``: mismatch sums to update from this forward's log-probs."""
    temp = st.cfg.sampling.temperature
    ids, key_mask, tp = sequences(rb, rows)
    logits = completion_logits(st.model, ids, key_mask, tp, temp)
    tokens = rb.completion_ids[rows]
    logp, entropy = token_logprobs(logits, tokens)
    m = mask[rows]
    if measure is not None:
        measure.update(MM.merge(measure, MM.mismatch_stats(logp, rb.behaviour_logp[rows], m, "none",
                                                           st.loss.is_cap)))
    old = rb.behaviour_logp[rows] if train_logp is None else train_logp[rows]
    inp = L.LossInputs(logp=logp, old_logp=old, adv=adv_B[rows], mask=m, weights=w,
                       is_weight=None if is_w is None else is_w[rows])
    loss, stats = L.policy_loss(st.loss.name, inp, st.loss)
    out = {k: float(v) for k, v in stats.items()}
    out["policy_loss"] = float(loss.detach())
    if kl_w is not None:
        ref_logp = score(st.ref_model, rb.select(rows), temp)
        kl = L.kl_penalty(logp, ref_logp, st.loss.kl_estimator, mask=m)
        loss = loss + st.loss.kl_coef * (kl_w * kl).sum()
        out["kl_ref"] = float((kl.detach() * m).sum() / m.sum().clamp(min=1))
    if st.loss.entropy_coef:
        loss = loss - st.loss.entropy_coef * (w * entropy).sum()
    if cells is not None:  # entropy-dynamics cells (cheap at small V)
        ts = token_stats_from_logits(logits.detach(), tokens)
        for k, v in entropy_cell_sums(ts, adv_B[rows], m, w, st.opt.param_groups[0]["lr"]).items():
            cells[k] = cells.get(k, 0.0) + float(v)
    out["loss"] = float(loss.detach())
    if not torch.isfinite(loss):
        st.count("nan_loss")
        return out
    loss.backward()
    return out


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


# ----------------------------------------------------------------------------- diagnostics
def rollout_metrics(batch: ScoredBatch) -> dict:
    """Diagnostics of the sampled batch (all rounds of dynamic sampling)."""
    rb, verdicts = batch.rollouts, batch.verdicts
    n = max(1, len(verdicts))
    ent = (rb.entropy * rb.completion_mask).sum() / rb.completion_mask.sum().clamp(min=1)
    status = {s: sum(v.status == s for v in verdicts) / n for s in ("no_answer", "malformed", "wrong", "right")}
    return {
        "reward": float(batch.reward_B.mean()),
        "pass_rate": status["right"],
        "no_answer_rate": status["no_answer"],
        "malformed_rate": status["malformed"],
        "entropy": float(ent),
        "response_len": float(rb.lengths.float().mean()),
        "truncation_rate": sum(r == "length" for r in rb.finish_reason) / n,
        "interrupted_rate": sum(r == "interrupted" for r in rb.finish_reason) / n,
        "zero_var_frac": float(zero_variance_groups(batch.reward_B.view(-1, batch.group_size)).float().mean()),
    }


def warn_silent_failures(st: TrainState, m: dict) -> None:
    """The failures peers suffer silently: loud here, and counted."""
    if m["truncation_rate"] >= 1.0:
        st.count("all_truncated_steps")
        warn(f"step {st.step}: every completion was truncated at {st.params.max_new_tokens} tokens; "
             "raise sampling.max_new_tokens")
    elif m["truncation_rate"] > 0.15:
        st.count("high_truncation_steps")
    if m["zero_var_frac"] >= 1.0:
        st.count("all_zero_variance_steps")
        warn(f"step {st.step}: every group had identical rewards (zero-variance fraction 1): no learning signal")
    if m["no_answer_rate"] + m["malformed_rate"] >= 1.0:
        st.count("no_parseable_answer_steps")
        warn(f"step {st.step}: no completion produced a parseable answer")
    m["warnings"] = dict(st.counters)
