"""The objective of one policy update and the policy losses of the GRPO family, as one registry
(docs/methods/losses.md).

:func:`objective` is the loss one backward pass minimises, written once::

    loss = sum_{i,t} weights[i,t] * is_weight[i,t] * per_token_loss[i,t]     (policy term)
         + kl_coef      * sum_{i,t} kl_weights[i,t] * kl[i,t]                (KL anchor)
         - entropy_coef * sum_{i,t} weights[i,t] * entropy[i,t]              (entropy bonus)

``per_token_loss`` comes from the registered variant (:func:`policy_loss`), ``is_weight`` is the
train/inference mismatch correction of :mod:`rlvr.algo.mismatch` (1 when off), ``kl`` the estimate of
:func:`kl_penalty`. The normalisers live in the weights: ``weights`` (B, T) are the variant's
aggregation (:func:`token_weights`) and ``kl_weights`` a token mean over every loss token, both
computed ONCE on the whole (mini-)batch and zero on padding, so that splitting the rows into
micro-batches and summing their losses gives exactly the full-batch loss and gradient.

A variant = ratio (token | sequence) x surrogate (clipped | truncated-IS weight |
positive-only) x aggregation; each registered variant composes these parts. On-policy distillation
(``opd``) is a variant too: its per-token loss is the divergence to a frozen teacher's next-token
distribution (:mod:`rlvr.algo.distill`), read from ``LossInputs.logits`` / ``teacher_logits``. The KL anchor and
the entropy bonus are added once, in :func:`objective`, outside the variants.

Shapes: P prompts, G samples per prompt, B = P*G rows (row p*G + g is sample g of
prompt p), T completion tokens (right-padded).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from rlvr.algo.distill import generalized_jsd, reverse_kl
from rlvr.config import AGGREGATIONS, DISTILL_LOSS, KL_ESTIMATORS, STD_NORMS, LossConfig


# ----------------------------------------------------------------------------- aggregation
def token_weights(
    mask_B_T: Tensor,
    group_size: int,
    mode: str,
    max_len: int | None = None,
    adv_B: Tensor | None = None,
    dtype: torch.dtype | None = None,
) -> Tensor:
    """(B, T) aggregation weights, zero on padding and on zero-length rows.

    mask_B_T: (B, T) loss mask (bool or float; nonzero = loss token). Modes:
      - ``token_mean`` (DAPO): 1 / sum M over the batch;
      - ``seq_mean_token_mean`` (GRPO): (1/B) (1/|y_i|);
      - ``prompt_mean`` (ScaleRL): (1/P) / sum_{i in p} |y_i|;
      - ``constant`` (Dr.GRPO): 1 / (B * L_max), L_max = max_len (required);
      - ``wapo``: 1 / (G * L_max) on completions with adv_B > 0, divided by the
        number of groups with at least one winner (needs adv_B and max_len).
    B and P count only rows / prompts with at least one loss token, so masking a
    whole group out (zero-variance filtering) also removes it from the normaliser.
    dtype: weight dtype; default the mask's float dtype, else float32.
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {mode!r}; use one of {', '.join(AGGREGATIONS)}")
    m = _float_mask(mask_B_T, dtype)
    B = m.shape[0]
    if group_size < 1 or B % group_size:
        raise ValueError(f"batch of {B} rows is not a whole number of groups of {group_size}")
    length_B = m.sum(-1)
    row_live = (length_B > 0).to(m.dtype)
    if mode == "token_mean":
        return m / m.sum().clamp(min=1.0)
    if mode == "seq_mean_token_mean":
        return m / (row_live.sum().clamp(min=1.0) * length_B.clamp(min=1.0))[:, None]
    if mode == "prompt_mean":
        length_P = length_B.view(-1, group_size).sum(-1)
        n_prompts = (length_P > 0).sum().clamp(min=1)
        return m / (n_prompts * length_P.clamp(min=1.0)).repeat_interleave(group_size)[:, None]
    L_max = _check_max_len(max_len, length_B, mode)
    if mode == "constant":
        return m / (row_live.sum().clamp(min=1.0) * L_max)
    if adv_B is None or adv_B.shape != (B,):
        raise ValueError(f"wapo aggregation needs adv_B of shape ({B},); pass the advantages")
    winner_B = (adv_B > 0) & (length_B > 0)
    n_groups = winner_B.view(-1, group_size).any(-1).sum().clamp(min=1)
    return m * winner_B.to(m.dtype)[:, None] / (group_size * L_max * n_groups)


def _float_mask(mask: Tensor, dtype: torch.dtype | None) -> Tensor:
    if mask.dim() != 2:
        raise ValueError(f"mask must have shape (B, T), got {tuple(mask.shape)}")
    if dtype is None:
        dtype = mask.dtype if mask.is_floating_point() else torch.float32
    return (mask != 0).to(dtype)


def _check_max_len(max_len: int | None, length_B: Tensor, mode: str) -> int:
    if max_len is None or max_len <= 0:
        raise ValueError(f"{mode} aggregation needs max_len > 0 (the generation budget L_max)")
    if length_B.numel() and int(length_B.max()) > max_len:
        raise ValueError(
            f"{mode} aggregation: a completion has {int(length_B.max())} loss tokens > max_len={max_len}; "
            "pass the generation budget as max_len"
        )
    return max_len


# ----------------------------------------------------------------------------- inputs, config
@dataclass(frozen=True)
class LossInputs:
    """Tensors one loss call needs. B rows, T tokens.

    logp: (B, T) log-prob of the sampled tokens under the current policy (requires grad).
    old_logp: (B, T) log-prob under the behaviour policy that sampled them.
    adv: (B,) advantage of each completion (broadcast to its tokens).
    mask: (B, T) loss mask, bool or float (nonzero = loss token).
    weights: (B, T) aggregation weights from :func:`token_weights` (full batch).
    is_weight: (B, T) detached mismatch-correction weights (:func:`rlvr.algo.mismatch.is_weights`)
        multiplying each token's loss; None = 1.
    logits: (B, T, V) the current policy's next-token logits (with gradient) and teacher_logits:
        (B, T, V) the frozen teacher's, at the same positions; only on-policy distillation (``opd``)
        reads them (None for every other variant).
    """

    logp: Tensor
    old_logp: Tensor
    adv: Tensor
    mask: Tensor
    weights: Tensor
    is_weight: Tensor | None = None
    logits: Tensor | None = None
    teacher_logits: Tensor | None = None

    def __post_init__(self) -> None:
        shape = self.logp.shape
        if len(shape) != 2:
            raise ValueError(f"logp must have shape (B, T), got {tuple(shape)}")
        for name in ("old_logp", "mask", "weights", "is_weight"):
            if getattr(self, name) is not None and getattr(self, name).shape != shape:
                raise ValueError(f"{name} has shape {tuple(getattr(self, name).shape)}, logp {tuple(shape)}")
        if self.adv.shape != (shape[0],):
            raise ValueError(f"adv must have shape ({shape[0]},), got {tuple(self.adv.shape)}")
        for name in ("logits", "teacher_logits"):
            value = getattr(self, name)
            if value is not None and value.shape[:2] != shape:
                raise ValueError(f"{name} has shape {tuple(value.shape)}, expected ({shape[0]}, {shape[1]}, V)")


LOSS_DEFAULTS: dict[str, float | None] = {
    "eps_low": 0.2, "eps_high": 0.2, "eps_max": 4.0, "wapo_eps": 9.0, "cispo_eps_low": None,
}
"""Global defaults of the optional (None = "the variant's own") fields of
:class:`rlvr.config.LossConfig`; a variant's ``defaults`` override them, explicit values override both.
``cispo_eps_low`` stays None (no floor) unless set."""

OPTIONAL_FIELDS = tuple(LOSS_DEFAULTS)  # the LossConfig fields a variant's ``defaults`` may set

LossFn = Callable[[LossInputs, LossConfig], tuple[Tensor, dict[str, Tensor]]]


@dataclass(frozen=True)
class LossSpec:
    """A registered variant: its per-token loss and the aggregation / std_norm it expects."""

    fn: LossFn
    aggregation: str
    std_norm: str
    defaults: dict[str, Any] = field(default_factory=dict)
    paper: str = ""


LOSSES: dict[str, LossSpec] = {}


def register(
    name: str, *, aggregation: str, std_norm: str, paper: str, defaults: dict[str, Any] | None = None
) -> Callable[[LossFn], LossFn]:
    """Decorator: add ``fn(inp, cfg) -> (per_token_loss (B,T), stats)`` to LOSSES.

    ``defaults``: the variant's own values of the optional :class:`rlvr.config.LossConfig` fields
    (``eps_low``, ``eps_high``, ``eps_max``, ``wapo_eps``, ``cispo_eps_low``); they must pass the
    config's range checks."""
    if name in LOSSES:
        raise ValueError(f"loss {name!r} is already registered")
    if aggregation not in AGGREGATIONS or std_norm not in STD_NORMS:
        raise ValueError(f"loss {name!r}: bad aggregation {aggregation!r} or std_norm {std_norm!r}")
    fields = [f.name for f in dataclasses.fields(LossConfig)]
    unknown = sorted(set(defaults or {}) - set(fields))
    if unknown:
        raise ValueError(f"loss {name!r}: defaults name unknown LossConfig fields {unknown}; "
                         f"{_did_you_mean(unknown[0], fields)}")
    fixed = sorted(set(defaults or {}) - set(OPTIONAL_FIELDS))
    if fixed:
        raise ValueError(f"loss {name!r}: defaults may set only {', '.join(OPTIONAL_FIELDS)} (the fields a "
                         f"config leaves None), not {fixed}; aggregation and std_norm are arguments of register")
    LossConfig(name=name, **(defaults or {}))  # the config's range checks (ConfigError)

    def wrap(fn: LossFn) -> LossFn:
        LOSSES[name] = LossSpec(fn, aggregation, std_norm, dict(defaults or {}), paper)
        return fn

    return wrap


def _did_you_mean(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f"did you mean {close[0]!r}?" if close else f"known: {', '.join(options)}"


def get_loss(name: str) -> LossSpec:
    """The registered LossSpec; unknown name -> ValueError listing names (with did-you-mean)."""
    if name not in LOSSES:
        close = difflib.get_close_matches(name, list(LOSSES), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"unknown loss {name!r}; {hint}registered: {', '.join(sorted(LOSSES))}")
    return LOSSES[name]


def resolve_loss(lc: LossConfig) -> LossConfig:
    """A copy of ``lc`` with nothing left to the variant: every None optional field filled
    (:data:`LOSS_DEFAULTS` < the variant's ``defaults`` < the value set in ``lc``), and an empty
    ``aggregation`` / ``std_norm`` replaced by the variant's own. Idempotent; unknown ``lc.name`` ->
    ValueError (with did-you-mean)."""
    spec = get_loss(lc.name)
    filled = {k: spec.defaults.get(k, LOSS_DEFAULTS[k]) for k in OPTIONAL_FIELDS if getattr(lc, k) is None}
    return replace(lc, **filled, aggregation=lc.aggregation or spec.aggregation, std_norm=lc.std_norm or spec.std_norm)


def loss_config(name: str, **overrides: Any) -> LossConfig:
    """Convenience: ``resolve_loss(LossConfig(name=name, **overrides))`` (global defaults < the
    variant's defaults < overrides). An unknown setting -> ValueError with did-you-mean."""
    fields = [f.name for f in dataclasses.fields(LossConfig) if f.name != "name"]
    for key in overrides:
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"unknown loss setting {key!r}; {hint}known: {', '.join(fields)}")
    get_loss(name)
    return resolve_loss(LossConfig(name=name, **overrides))


def policy_loss(inp: LossInputs, cfg: LossConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """The policy term of :func:`objective` for variant ``cfg.name``: the scalar
    sum(weights * is_weight * per_token_loss) (``is_weight``: the mismatch correction, 1 when None)
    and the variant's detached scalar stats.

    cfg: RESOLVED settings (:func:`resolve_loss` / :func:`loss_config`; a run's ``TrainState.loss``);
    an optional field still None -> ValueError (the defaults are resolved once, not per call).
    """
    spec = get_loss(cfg.name)
    unresolved = [k for k in OPTIONAL_FIELDS if LOSS_DEFAULTS[k] is not None and getattr(cfg, k) is None]
    if unresolved:
        raise ValueError(f"loss {cfg.name!r}: {', '.join(unresolved)} unresolved; pass resolve_loss(cfg)")
    per_token, stats = spec.fn(inp, cfg)
    if inp.is_weight is not None:
        per_token = inp.is_weight.detach().to(per_token.dtype) * per_token
    loss = (inp.weights * per_token).sum()
    return loss, {k: v.detach() for k, v in stats.items()}


def objective(inp: LossInputs, cfg: LossConfig, entropy: Tensor, ref_logp: Tensor | None = None,
              kl_weights: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """The loss one backward pass minimises (module docstring) and its detached scalar stats.

    inp: the policy term's tensors (B rows, T tokens); cfg: resolved settings. entropy: (B, T) the
    policy's per-token entropy (with gradient). ref_logp: (B, T) log-probs of the sampled tokens
    under the frozen reference, None without a KL anchor; kl_weights: (B, T) its weights, a token
    mean over every loss token of the mini-batch (:func:`token_weights` ``token_mean``), whatever
    the policy term's aggregation. Stats: the variant's, ``policy_loss`` (the policy term),
    ``kl_ref`` (mean KL over the loss tokens, with a reference only) and ``loss``.
    """
    policy, stats = policy_loss(inp, cfg)
    stats["policy_loss"] = policy.detach()
    kl_anchor = entropy_bonus = 0.0
    if ref_logp is not None:
        kl = kl_penalty(inp.logp, ref_logp, cfg.kl_estimator, mask=inp.mask)
        kl_anchor = (kl_weights * kl).sum()
        stats["kl_ref"] = (kl.detach() * inp.mask).sum() / inp.mask.sum().clamp(min=1)
    if cfg.entropy_coef:
        entropy_bonus = (inp.weights * entropy).sum()
    loss = policy + cfg.kl_coef * kl_anchor - cfg.entropy_coef * entropy_bonus
    stats["loss"] = loss.detach()
    return loss, stats


# ----------------------------------------------------------------------------- parts
def token_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """(B, T) rho = exp(logp - old_logp) on loss tokens, exactly 1 (no gradient) on padding."""
    return torch.exp(_masked_log_ratio(logp, old_logp, mask))


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor, token_form: bool = False) -> Tensor:
    """GSPO ratio (arXiv 2507.18071), (B, T): s_i = exp((1/|y_i|) sum_t (logp - old_logp)).

    token_form=False: s_i broadcast to every token (its gradient reaches all tokens of i).
    token_form=True (GSPO-token): s_it = sg(s_i) * exp(logp_t - sg(logp_t)), same value,
    each token's gradient flows only through its own logp. Padding gets ratio 1.
    """
    m = mask != 0
    log_ratio = _masked_log_ratio(logp, old_logp, mask)
    length_B = m.sum(-1).clamp(min=1).to(log_ratio.dtype)
    s_B = torch.exp(log_ratio.sum(-1) / length_B)
    if not token_form:
        return torch.where(m, s_B[:, None].expand_as(log_ratio), torch.ones_like(log_ratio))
    live_logp = torch.where(m, logp, torch.zeros_like(logp))
    s_BT = s_B.detach()[:, None] * torch.exp(live_logp - live_logp.detach())
    return torch.where(m, s_BT, torch.ones_like(s_BT))


def clipped_surrogate(ratio: Tensor, adv_B: Tensor, eps_low: float, eps_high: float) -> Tensor:
    """PPO clipped loss, (B, T): -min(ratio*A, clip(ratio, 1-eps_low, 1+eps_high)*A).

    Where the clipped branch is active (ratio > 1+eps_high with A > 0, ratio < 1-eps_low
    with A < 0) the gradient is exactly zero.
    """
    adv = adv_B[:, None].to(ratio.dtype)
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    return -torch.minimum(ratio * adv, clipped * adv)


def truncated_is_reinforce(
    logp: Tensor, ratio: Tensor, adv_B: Tensor, mask: Tensor, eps_max: float, eps_low: float | None
) -> Tensor:
    """CISPO loss, (B, T): -sg(clip(rho, 1-eps_low, eps_max)) * A * logp (floor only if eps_low set).

    Truncated tokens keep their gradient, scaled by the truncated weight.
    """
    floor = None if eps_low is None else 1.0 - eps_low
    is_weight = torch.clamp(ratio.detach(), min=floor, max=eps_max)
    live_logp = torch.where(mask != 0, logp, torch.zeros_like(logp))
    return -is_weight * adv_B[:, None].to(logp.dtype) * live_logp


def positive_only(per_token: Tensor, adv_B: Tensor) -> Tensor:
    """Zero the rows whose advantage is <= 0 (WAPO: only winners update)."""
    return torch.where((adv_B > 0)[:, None], per_token, torch.zeros_like(per_token))


def _masked_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    # torch.where (not multiplication) so that inf/NaN in padded positions cannot leak
    diff = logp - old_logp
    return torch.where(mask != 0, diff, torch.zeros_like(diff))


def _masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    m = mask != 0
    return torch.where(m, x, torch.zeros_like(x)).sum() / m.sum().clamp(min=1)


def _stats(
    inp: LossInputs, ratio: Tensor, low: Tensor, high: Tensor, trunc: Tensor | None = None
) -> dict[str, Tensor]:
    """Detached token means over the mask. approx_kl is the k3 estimate of KL(old || new),
    mean of (rho - 1 - log rho) with rho the token ratio (unbiased, >= 0)."""
    with torch.no_grad():
        log_rho = _masked_log_ratio(inp.logp, inp.old_logp, inp.mask)
        zero = torch.zeros((), dtype=ratio.dtype, device=ratio.device)
        return {
            "clip_frac_low": _masked_mean(low.to(ratio.dtype), inp.mask),
            "clip_frac_high": _masked_mean(high.to(ratio.dtype), inp.mask),
            "approx_kl": _masked_mean(torch.expm1(log_rho) - log_rho, inp.mask),
            "ratio_mean": _masked_mean(ratio, inp.mask),
            "trunc_frac": zero if trunc is None else _masked_mean(trunc.to(ratio.dtype), inp.mask),
        }


def _ppo_clip(inp: LossInputs, cfg: LossConfig, ratio: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    per_token = clipped_surrogate(ratio, inp.adv, cfg.eps_low, cfg.eps_high)
    per_token = torch.where(inp.mask != 0, per_token, torch.zeros_like(per_token))
    adv = inp.adv[:, None]
    low = (ratio < 1.0 - cfg.eps_low) & (adv < 0)
    high = (ratio > 1.0 + cfg.eps_high) & (adv > 0)
    return per_token, _stats(inp, ratio.detach(), low, high)


# ----------------------------------------------------------------------------- variants
@register("grpo", aggregation="seq_mean_token_mean", std_norm="group", paper="arXiv 2402.03300")
def grpo(inp: LossInputs, cfg: LossConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """GRPO (DeepSeekMath, arXiv 2402.03300): token-ratio PPO clip, sequence-mean-token-mean."""
    return _ppo_clip(inp, cfg, token_ratio(inp.logp, inp.old_logp, inp.mask))


@register("dr_grpo", aggregation="constant", std_norm="none", paper="arXiv 2503.20783")
def dr_grpo(inp: LossInputs, cfg: LossConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """Dr.GRPO (arXiv 2503.20783): GRPO's surrogate, no std division, constant normaliser."""
    return _ppo_clip(inp, cfg, token_ratio(inp.logp, inp.old_logp, inp.mask))


@register(
    "dapo", aggregation="token_mean", std_norm="group", paper="arXiv 2503.14476", defaults={"eps_high": 0.28}
)
def dapo(inp: LossInputs, cfg: LossConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """DAPO (arXiv 2503.14476): clip-higher (eps_low 0.2, eps_high 0.28), token-mean, no KL."""
    return _ppo_clip(inp, cfg, token_ratio(inp.logp, inp.old_logp, inp.mask))


@register(
    "gspo",
    aggregation="seq_mean_token_mean",
    std_norm="group",
    paper="arXiv 2507.18071",
    defaults={"eps_low": 3e-4, "eps_high": 4e-4},
)
def gspo(inp: LossInputs, cfg: LossConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """GSPO (arXiv 2507.18071): sequence ratio s_i clipped per sequence (eps 3e-4 / 4e-4).

    Each token carries the sequence loss l_i; with seq_mean_token_mean weights this is
    (1/B) sum_i l_i. cfg.gspo_token selects the GSPO-token gradient form.
    """
    return _ppo_clip(inp, cfg, sequence_ratio(inp.logp, inp.old_logp, inp.mask, cfg.gspo_token))


@register("cispo", aggregation="prompt_mean", std_norm="batch", paper="arXiv 2506.13585; arXiv 2510.13786")
def cispo(inp: LossInputs, cfg: LossConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """CISPO (MiniMax-M1 arXiv 2506.13585; ScaleRL arXiv 2510.13786): truncated-IS REINFORCE.

    Stats: trunc_frac = clip_frac_high = share of tokens with rho > eps_max (their weight
    is truncated, their gradient kept); clip_frac_low = share with rho < 1 - cispo_eps_low.
    """
    ratio = token_ratio(inp.logp, inp.old_logp, inp.mask)
    per_token = truncated_is_reinforce(inp.logp, ratio, inp.adv, inp.mask, cfg.eps_max, cfg.cispo_eps_low)
    ratio = ratio.detach()
    trunc = ratio > cfg.eps_max
    low = torch.zeros_like(trunc) if cfg.cispo_eps_low is None else ratio < 1.0 - cfg.cispo_eps_low
    return per_token, _stats(inp, ratio, low, trunc, trunc)


@register("wapo", aggregation="wapo", std_norm="none", paper="WAPO (layer6ai-labs/wapo)")
def wapo(inp: LossInputs, cfg: LossConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """WAPO, Winner Advantage Policy Optimization (reference code layer6ai-labs/wapo; no arXiv id
    known; docs/methods/losses.md): only completions with A > 0 update; per-token loss
    -min(rho, 1 + wapo_eps) * A, zero gradient above the cap; weights 1/(G L_max) per token,
    divided by the number of groups with a winner. clip_frac_high = share of winner tokens
    (over all loss tokens) above the cap; no lower clip.
    """
    ratio = token_ratio(inp.logp, inp.old_logp, inp.mask)
    per_token = -torch.clamp(ratio, max=1.0 + cfg.wapo_eps) * inp.adv[:, None].to(ratio.dtype)
    per_token = positive_only(torch.where(inp.mask != 0, per_token, torch.zeros_like(per_token)), inp.adv)
    ratio = ratio.detach()
    high = (ratio > 1.0 + cfg.wapo_eps) & (inp.adv[:, None] > 0)
    return per_token, _stats(inp, ratio, torch.zeros_like(high), high)


@register(DISTILL_LOSS, aggregation="token_mean", std_norm="group", paper="arXiv 2306.13649 (GKD)")
def opd(inp: LossInputs, cfg: LossConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """On-policy distillation (GKD, arXiv 2306.13649; docs/methods/on_policy_distillation.md): on the
    student's own samples, per token the divergence of :func:`rlvr.algo.distill.generalized_jsd`
    between the student's and the frozen teacher's next-token distributions over the whole vocabulary
    (``distill_beta`` 1 = reverse KL, TRL's convention), plus ``reward_coef`` x GRPO's clipped surrogate
    of the verifier advantages (0 = pure distillation); token-mean, as TRL's ``batchmean``.

    Stats: GRPO's, ``distill_div`` (the divergence trained on) and ``distill_kl`` (the reverse KL to the
    teacher), token means over the loss mask.
    """
    if inp.logits is None or inp.teacher_logits is None:
        raise ValueError(f"loss {DISTILL_LOSS!r} needs the student's and the teacher's logits "
                         "(LossInputs.logits, LossInputs.teacher_logits)")
    divergence = generalized_jsd(inp.logits, inp.teacher_logits, cfg.distill_beta).to(inp.logp.dtype)
    surrogate, stats = _ppo_clip(inp, cfg, token_ratio(inp.logp, inp.old_logp, inp.mask))
    per_token = torch.where(inp.mask != 0, divergence, torch.zeros_like(divergence))
    if cfg.reward_coef:
        per_token = per_token + cfg.reward_coef * surrogate
    stats["distill_div"] = _masked_mean(divergence.detach(), inp.mask)
    stats["distill_kl"] = _masked_mean(reverse_kl(inp.logits, inp.teacher_logits), inp.mask)
    return per_token, stats


# ----------------------------------------------------------------------------- KL anchor
def kl_penalty(logp: Tensor, ref_logp: Tensor, estimator: str = "k3", mask: Tensor | None = None) -> Tensor:
    """(B, T) per-token estimate of KL(pi || pi_ref) on tokens sampled from pi.

    With d = ref_logp - logp: k1 = -d, k2 = 0.5 d^2, k3 = exp(d) - d - 1. :func:`objective` adds
    kl_coef * sum(kl_weights * kl) once, outside the variants. mask: zero (no gradient) on padding.
    """
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"unknown KL estimator {estimator!r}; use one of {', '.join(KL_ESTIMATORS)}")
    d = ref_logp - logp
    if mask is not None:
        d = torch.where(mask != 0, d, torch.zeros_like(d))
    if estimator == "k1":
        return -d
    if estimator == "k2":
        return 0.5 * d * d
    return torch.expm1(d) - d
