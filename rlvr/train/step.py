"""One RL step, top to bottom: prompts -> G samples each -> rewards -> advantages
-> loss -> optimiser. Everything a step needs lives in :class:`TrainState`.

Shapes: P prompts, G samples per prompt, B = P*G rows, T completion tokens.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from rlvr.algo import losses as L
from rlvr.algo.advantages import group_advantages, overlong_penalty, zero_variance_groups
from rlvr.algo.curriculum import PassRateTracker
from rlvr.algo.diagnostics import entropy_dynamics, token_stats_from_logits
from rlvr.config import RunConfig
from rlvr.errors import UserError
from rlvr.log import warn
from rlvr.model.io import model_device
from rlvr.rollout.engine import concat_batches, sample, select_rows, verify_checked
from rlvr.rollout.sample import SampleParams
from rlvr.train.data import PromptSampler
from rlvr.train.logprobs import completion_logits, score, sequences, token_logprobs
from rlvr.train.rewarding import compute_rewards
from rlvr.train.schedule import lr_at

SUMMED = ("loss", "policy_loss")  # micro-batch stats that add up (weights are mini-batch-normalised)


@dataclass
class TrainState:
    """The mutable state of a run (what a checkpoint holds, plus handles)."""

    cfg: RunConfig
    model: torch.nn.Module
    tok: object
    task: object
    opt: torch.optim.Optimizer
    data: PromptSampler
    params: SampleParams
    gen: torch.Generator
    ref_model: torch.nn.Module | None = None
    tracker: PassRateTracker | None = None
    step: int = 0
    version: int = 0
    samples: int = 0
    tokens: int = 0
    flops: float = 0.0
    wall_s: float = 0.0
    nan_steps: int = 0
    last_entropy: float | None = None
    counters: dict = field(default_factory=dict)
    last_nan_step: int = -1  # st.step when nan_steps was last raised (not checkpointed)
    engine: object | None = None  # sampling.engine=vllm: the VLLMEngine, built on first use
    engine_version: int = -1  # policy version whose weights the engine holds

    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n


def resolved_loss(cfg: RunConfig) -> tuple[str, L.LossConfig, str, str]:
    """(name, algo LossConfig, aggregation, std_norm): the variant's defaults under the config's."""
    lc = cfg.loss
    over = {k: getattr(lc, k) for k in ("eps_low", "eps_high", "eps_max", "wapo_eps") if getattr(lc, k) is not None}
    over["gspo_token"] = lc.gspo_token
    spec = L.get_loss(lc.name)
    return lc.name, L.loss_config(lc.name, **over), lc.aggregation or spec.aggregation, lc.std_norm or spec.std_norm


# ----------------------------------------------------------------------------- 1. rollouts
def rollout_round(st: TrainState, problems: list) -> tuple:
    """Sample G completions for each problem and score them -> (rb (B), verdicts, reward_B, metrics)."""
    G = st.cfg.algo.group_size
    rows = [p for p in problems for _ in range(G)]
    rb = sample_rollouts(st, [p.prompt for p in rows])
    verdicts = checked_verdicts(st, rb.texts, rows)
    reward_B, extra = compute_rewards(st.cfg.reward, rb, verdicts, G, [p.answer for p in problems])
    if st.cfg.algo.overlong_cache:
        reward_B = reward_B + overlong_penalty(rb.lengths, st.params.max_new_tokens, st.cfg.algo.overlong_cache)
    return rb, verdicts, reward_B, extra


def sample_rollouts(st: TrainState, prompts: list[str]):
    """One completion per prompt from the current policy: the native sampler, or (``sampling.engine
    vllm``) a vLLM engine whose weights are synced from the trainer whenever its version is behind."""
    if st.cfg.sampling.engine == "native":
        return sample(st.model, st.tok, prompts, st.params, version=st.version, generator=st.gen)
    from rlvr.rollout import vllm as V

    if st.engine is None:
        from rlvr.model.hf import _source

        st.engine = V.VLLMEngine(_source(st.cfg.model.init_from or st.cfg.model.path), dtype=st.cfg.model.dtype,
                                 seed=st.cfg.train.seed, gpu_memory_utilization=st.cfg.sampling.vllm_gpu_memory)
        st.engine_version = st.version if st.step == 0 else -1  # a resumed policy differs from the files
    if st.engine_version != st.version:  # weight sync after the optimiser steps
        st.engine.load_weights(st.model)
        st.engine_version = st.version
    rb = V.sample(st.engine, st.tok, prompts, st.params, version=st.version, generator=st.gen)
    return rb.to(model_device(st.model))


def checked_verdicts(st: TrainState, texts: list[str], rows: list) -> list:
    """B verdicts with reward failures isolated: a verifier that raises or runs past
    ``reward.timeout_s`` scores ``train.reward_failure_value``, is counted (``reward_failures``,
    ``reward_timeouts``) and logged with its exception text. More than
    ``train.max_reward_failure_rate`` failed in one round stops the run with a UserError."""
    rep = verify_checked(st.task, texts, rows, failure_value=st.cfg.train.reward_failure_value,
                         timeout_s=st.cfg.reward.timeout_s)
    handle_reward_failures(rep, st.cfg.train, f"step {st.step + 1}", st.count)
    return rep.verdicts


def handle_reward_failures(rep, tc, where: str, count=None) -> None:
    """Count (``count(key, n)``), warn about and, past ``tc.max_reward_failure_rate``, raise on the
    failed reward calls of one VerifyReport. Shared by the sync step and the async generators."""
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


def collect(st: TrainState) -> tuple:
    """P groups of G scored samples. With DAPO dynamic sampling, keep sampling until P groups
    have non-zero reward variance (at most ``dynamic_max_rounds`` rounds; then a smaller batch)."""
    a, P, G = st.cfg.algo, st.cfg.algo.prompts_per_step, st.cfg.algo.group_size
    retired = st.tracker.retired if st.tracker else frozenset()
    parts, seen = [], []
    for _ in range(a.dynamic_max_rounds if a.dynamic_sampling else 1):
        problems = st.data.next(P, retired)
        rb, verdicts, reward_B, extra = rollout_round(st, problems)
        seen.append((rb, verdicts, reward_B, extra, problems))
        if not a.dynamic_sampling:
            parts.append(seen[-1])
            break
        informative = ~zero_variance_groups(reward_B.view(-1, G))
        parts.append(_keep_groups(seen[-1], informative, G))
        if sum(len(p[4]) for p in parts) >= P:
            break
    else:
        got = sum(len(p[4]) for p in parts)
        if a.dynamic_sampling and got < P:
            st.count("dynamic_sampling_short")
            warn(f"dynamic sampling found {got}/{P} informative groups in {a.dynamic_max_rounds} rounds; "
                 "training on a smaller batch")
    return _merge(parts, P, G, st.tok.pad_id), _merge(seen, None, G, st.tok.pad_id)


def _keep_groups(part, keep_P: torch.Tensor, G: int):
    rb, verdicts, reward_B, extra, problems = part
    rows = (keep_P[:, None].expand(-1, G)).reshape(-1).nonzero().squeeze(-1)
    idx = rows.tolist()
    return (select_rows(rb, rows), [verdicts[i] for i in idx], reward_B[rows], extra,
            [p for p, k in zip(problems, keep_P.tolist()) if k])


def _merge(parts, limit_P: int | None, G: int, pad_id: int):
    parts = [p for p in parts if p[4]]
    if not parts:
        return None
    rb = concat_batches([p[0] for p in parts], pad_id) if len(parts) > 1 else parts[0][0]
    verdicts = [v for p in parts for v in p[1]]
    reward_B = torch.cat([p[2] for p in parts])
    problems = [q for p in parts for q in p[4]]
    if limit_P is not None and len(problems) > limit_P:
        rows = torch.arange(limit_P * G)
        rb, verdicts, reward_B, problems = select_rows(rb, rows), verdicts[: limit_P * G], reward_B[
            : limit_P * G], problems[:limit_P]
    return rb, verdicts, reward_B, parts[0][3], problems


# ----------------------------------------------------------------------------- 3. update
def policy_update(st: TrainState, rb, adv_B: torch.Tensor, mask: torch.Tensor) -> dict:
    """PPO-style epochs x mini-batches (split by prompt group) x micro-batches over one batch.

    Loss weights are computed per mini-batch on the whole mini-batch, so accumulating micro-batch
    gradients gives exactly the mini-batch gradient. Returns averaged stats.
    """
    cfg, G = st.cfg, st.cfg.algo.group_size
    name, lcfg, aggregation, _ = resolved_loss(cfg)
    temp = cfg.sampling.temperature
    n_groups = rb.size // G
    old_logp = rb.behaviour_logp
    ref_logp = score(st.ref_model, rb, temp) if st.ref_model is not None else None
    micro = cfg.algo.micro_batch_size or rb.size
    p = st.params
    budget = p.max_new_tokens + (len(p.interruption_ids) + p.interruption_extra if p.interruption_budget else 0)
    max_len = max(budget, rb.completion_ids.shape[1])
    agg: dict[str, float] = {}
    n_updates = 0
    for epoch in range(cfg.algo.ppo_epochs):
        perm = torch.randperm(n_groups, generator=st.gen)
        for mb_groups in perm.chunk(min(cfg.algo.minibatches, n_groups)):
            rows = (mb_groups[:, None] * G + torch.arange(G)).reshape(-1).sort().values
            w = L.token_weights(mask[rows], G, aggregation, max_len=max_len, adv_B=adv_B[rows])
            st.opt.zero_grad(set_to_none=True)
            stats: dict[str, float] = {}
            for mrows, mw in zip(rows.split(micro), w.split(micro)):
                s = _micro_step(st, rb, mrows, mw, old_logp, ref_logp, adv_B, mask, name, lcfg, temp,
                                diag=epoch == 0 and n_updates == 0 and len(stats) == 0)
                for k, v in s.items():  # losses are partial sums; other stats are means over rows
                    stats[k] = stats.get(k, 0.0) + (v if k in SUMMED else v * len(mrows) / len(rows))
            stats["grad_norm"] = _clip_and_step(st, finite_loss=math.isfinite(stats.get("loss", 0.0)))
            n_updates += 1
            for k, v in stats.items():
                agg[k] = agg.get(k, 0.0) + v
    return {k: v / max(1, n_updates) for k, v in agg.items()}


def _micro_step(st, rb, rows, w, old_logp, ref_logp, adv_B, mask, name, lcfg, temp, diag: bool) -> dict:
    ids, key_mask, tp = sequences(rb, rows)
    logits = completion_logits(st.model, ids, key_mask, tp, temp)
    tokens = rb.completion_ids[rows]
    logp, entropy = token_logprobs(logits, tokens)
    inp = L.LossInputs(logp=logp, old_logp=old_logp[rows], adv=adv_B[rows], mask=mask[rows], weights=w)
    loss, stats = L.policy_loss(name, inp, lcfg)
    out = {k: float(v) for k, v in stats.items()}
    out["policy_loss"] = float(loss.detach())
    if ref_logp is not None:
        kl = L.kl_penalty(logp, ref_logp[rows], st.cfg.loss.kl_estimator)
        kl_term = (w * kl).sum()
        loss = loss + st.cfg.loss.kl_coef * kl_term
        out["kl_ref"] = float((kl * mask[rows]).sum() / mask[rows].sum().clamp(min=1))
    if st.cfg.loss.entropy_coef:
        loss = loss - st.cfg.loss.entropy_coef * (w * entropy).sum()
    if diag:  # entropy-dynamics cells, once per step (cheap at small V)
        ts = token_stats_from_logits(logits.detach(), tokens)
        lr = st.opt.param_groups[0]["lr"]
        out.update({k: float(v) for k, v in entropy_dynamics(ts, adv_B[rows], mask[rows], w, lr).items()})
    out["loss"] = float(loss.detach())
    if not torch.isfinite(loss):
        st.count("nan_loss")
        return out
    loss.backward()
    return out


def _clip_and_step(st: TrainState, finite_loss: bool = True) -> float:
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


# ----------------------------------------------------------------------------- the step
def rl_step(st: TrainState, total_steps: int) -> dict:
    """One RL step; returns the metrics line for this step (floats, no tensors)."""
    cfg, G = st.cfg, st.cfg.algo.group_size
    t0 = time.time()
    for g in st.opt.param_groups:
        g["lr"] = lr_at(st.step, cfg.optim.lr, cfg.optim.warmup_steps, total_steps, cfg.optim.schedule)
    kept, seen = collect(st)  # 1. rollouts + 2. rewards
    rb_all, verdicts_all, reward_all, extra, problems_all = seen
    m = rollout_metrics(rb_all, verdicts_all, reward_all, G)
    m.update({k: v for k, v in extra.items() if v is not None})
    if st.tracker is not None:  # No-Positive-Resampling bookkeeping
        correct = torch.tensor([v.correct for v in verdicts_all], dtype=torch.float32).view(-1, G).sum(1)
        st.tracker.update([p.id for p in problems_all], correct.tolist(), [G] * len(problems_all))
        m["retired_prompts"] = len(st.tracker.retired)
    t_gen = time.time() - t0
    upd = {}
    if kept is not None:
        rb, verdicts, reward_B, _, problems = kept
        reward_P_G = reward_B.view(-1, G)
        _, _, _, std_norm = resolved_loss(cfg)
        adv_P_G = group_advantages(reward_P_G, std_norm)  # 3. advantages
        zero_P = zero_variance_groups(reward_P_G)
        m["zero_var_frac"] = float(zero_P.float().mean())
        if cfg.algo.zero_var_filter and zero_P.any():
            rows = (~zero_P)[:, None].expand(-1, G).reshape(-1).nonzero().squeeze(-1)
            rb, adv_P_G = select_rows(rb, rows), adv_P_G[~zero_P]
        mask = rb.loss_mask.clone()
        if cfg.algo.mask_truncated:
            mask &= torch.tensor([r != "length" for r in rb.finish_reason], device=mask.device)[:, None]
        if rb.size and mask.any():  # 4. loss + optimiser, on the policy's device
            upd = policy_update(st, rb, adv_P_G.reshape(-1).to(mask.device), mask)
            n_train_tokens = int(rb.completion_mask.sum() + rb.prompt_mask.sum()) * cfg.algo.ppo_epochs
            st.tokens += n_train_tokens
            fpt = _flops_per_token(st.model)
            st.flops += 3 * fpt * n_train_tokens + (fpt * n_train_tokens if st.ref_model is not None else 0)
    if not upd:
        st.count("steps_without_gradient")
        warn(f"step {st.step + 1}: no gradient (every group had equal rewards or no loss tokens)")
    st.step += 1
    gen_tokens = int(rb_all.completion_mask.sum() + rb_all.prompt_mask.sum())
    st.samples += rb_all.size
    st.tokens += gen_tokens
    st.flops += _flops_per_token(st.model) * gen_tokens
    st.wall_s += time.time() - t0
    m.update(upd)
    m.update(step=st.step, samples=st.samples, tokens=st.tokens, flops=st.flops, wall_s=st.wall_s,
             version=st.version, lr=st.opt.param_groups[0]["lr"], gen_s=t_gen, train_s=time.time() - t0 - t_gen,
             lag_max=0, lag_mean=0.0)
    _warn_silent_failures(st, m)
    return m


def _flops_per_token(model) -> int:
    return model.flops_per_token() if hasattr(model, "flops_per_token") else 2 * sum(
        p.numel() for p in model.parameters())


def rollout_metrics(rb, verdicts, reward_B, G: int) -> dict:
    """Diagnostics of the sampled batch (all rounds of dynamic sampling)."""
    n = max(1, len(verdicts))
    lengths = rb.lengths.float()
    ent = (rb.entropy * rb.completion_mask).sum() / rb.completion_mask.sum().clamp(min=1)
    status = {s: sum(v.status == s for v in verdicts) / n for s in ("no_answer", "malformed", "wrong", "right")}
    return {
        "reward": float(reward_B.mean()),
        "pass_rate": status["right"],
        "no_answer_rate": status["no_answer"],
        "malformed_rate": status["malformed"],
        "entropy": float(ent),
        "response_len": float(lengths.mean()),
        "truncation_rate": sum(r == "length" for r in rb.finish_reason) / n,
        "interrupted_rate": sum(r == "interrupted" for r in rb.finish_reason) / n,
        "zero_var_frac": float(zero_variance_groups(reward_B.view(-1, G)).float().mean()),
    }


def _warn_silent_failures(st: TrainState, m: dict) -> None:
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
