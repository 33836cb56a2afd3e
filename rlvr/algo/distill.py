"""Per-token divergences between a student's and a teacher's next-token distributions, over the
whole vocabulary: the maths of on-policy distillation (docs/methods/on_policy_distillation.md).

With s = softmax(student logits) and t = softmax(teacher logits) at one position, the generalized
Jensen-Shannon divergence of GKD (Agarwal et al. 2024, arXiv 2306.13649, eq. 1) as TRL's GKDTrainer
(``generalized_jsd_loss``) defines it::

    beta = 1:       KL(s || t) = sum_v s_v (log s_v - log t_v)          reverse KL (mode-seeking)
    beta = 0:       KL(t || s) = sum_v t_v (log t_v - log s_v)          forward KL (mass-covering)
    0 < beta < 1:   JSD(beta) = beta KL(t || m) + (1 - beta) KL(s || m),  m = (1 - beta) s + beta t

(JSD(beta) itself tends to 0 at both ends; divided by beta it tends to the forward KL, divided by
1 - beta to the reverse KL, which is why the ends are the two KLs, as in TRL.)

Pure functions over tensors. Shapes: B rows, T completion tokens, V vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def generalized_jsd(student_logits: Tensor, teacher_logits: Tensor, beta: float) -> Tensor:
    """(B, T) the divergence of the module docstring at every position.

    student_logits: (B, T, V), with gradient; teacher_logits: (B, T, V), the frozen teacher's (no
    gradient flows to it). beta in [0, 1]: 1 = reverse KL, 0 = forward KL. Computed in float32."""
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(f"student logits {tuple(student_logits.shape)} and teacher logits "
                         f"{tuple(teacher_logits.shape)} differ: the teacher must share the student's vocabulary")
    log_s = torch.log_softmax(student_logits.float(), dim=-1)
    log_t = torch.log_softmax(teacher_logits.detach().float(), dim=-1)
    if beta == 1.0:
        return kl(log_s, log_t)
    if beta == 0.0:
        return kl(log_t, log_s)
    log_m = torch.logsumexp(torch.stack([log_s + math.log(1.0 - beta), log_t + math.log(beta)]), dim=0)
    return beta * kl(log_t, log_m) + (1.0 - beta) * kl(log_s, log_m)


def kl(log_p: Tensor, log_q: Tensor) -> Tensor:
    """(..., ) KL(p || q) = sum_v p_v (log p_v - log q_v) over the last axis, from log-probabilities."""
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def reverse_kl(student_logits: Tensor, teacher_logits: Tensor) -> Tensor:
    """(B, T) KL(student || teacher) per position, without gradient: what on-policy distillation
    drives down, logged whatever the divergence trained on."""
    with torch.no_grad():
        return generalized_jsd(student_logits.detach(), teacher_logits, 1.0)
