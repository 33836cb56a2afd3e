"""SFT+RL update averaging, the "parallel" excursion pipeline (docs/methods/excursions.md): a name from the
paper, not parallel execution.

Snapshot theta; compute the RL gradient and the SFT gradient at the same theta; pass each
through its own AdamW (its own moment estimates) to get the updates d_RL and d_SFT; set

    theta <- theta + w * d_RL + (1 - w) * d_SFT          (w = excursions.parallel_weight, 1/2)

The *updates* are averaged, not the raw gradients (with Adam the two differ). An update is
measured as (parameters after the optimiser step) - (parameters before), so weight decay,
clipping and bias correction are part of it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.train.sft import sft_update
from rlvr.train.step import rl_step


def snapshot(model) -> list[torch.Tensor]:
    """Detached copies of the trainable parameters (in ``model.parameters()`` order)."""
    return [p.detach().clone() for p in model.parameters() if p.requires_grad]


def restore(model, theta: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for p, t in zip((p for p in model.parameters() if p.requires_grad), theta):
            p.copy_(t)


def averaged_update(model, updates: list[tuple[float, Callable[[], dict]]]) -> list[dict]:
    """Run each ``fn`` from the same theta, then set theta <- theta + sum_i w_i * d_i.

    ``updates``: (w_i, fn_i) pairs; fn_i computes its gradient at the current parameters and
    steps its *own* optimiser (it may do anything that moves the parameters), returning metrics.
    d_i = parameters after fn_i - theta. Returns the metrics of each fn.
    """
    theta = snapshot(model)
    total = [torch.zeros_like(t) for t in theta]
    out = []
    for w, fn in updates:
        restore(model, theta)
        out.append(fn())
        with torch.no_grad():
            for acc, p, t in zip(total, (p for p in model.parameters() if p.requires_grad), theta):
                acc.add_(p.detach() - t, alpha=w)
    restore(model, [t + d for t, d in zip(theta, total)])
    return out


def parallel_step(st, sft_opt: torch.optim.Optimizer, sft_batch: list, total_steps: int,
                  w: float = 0.5) -> dict:
    """One parallel step: an RL step (:func:`rlvr.train.step.rl_step` with ``st.opt``, the RL AdamW)
    and an SFT step (``sft_opt``, its own AdamW) from the same theta, updates averaged with
    weights (w, 1 - w). Returns the RL metrics line plus ``sft_loss`` and ``sft_grad_norm``."""
    m_rl, m_sft = averaged_update(st.model, [
        (w, lambda: rl_step(st, total_steps)),
        (1.0 - w, lambda: sft_update(st.model, st.tok, sft_batch, sft_opt, st.cfg.optim.grad_clip)),
    ])
    return {**m_rl, "sft_loss": m_sft["sft_loss"], "sft_grad_norm": m_sft["grad_norm"]}
