"""How one policy update takes its batch apart: mini-batches of whole prompt groups (one optimiser
step each), this process's share of each (:class:`Sharding`: all of it, or a data-parallel rank's),
and micro-batches (one forward and backward each, :class:`MicroBatch`).

The loss weights are computed per mini-batch on the WHOLE mini-batch before it is shared out and
split, so that the micro-batch gradients (summed over processes) are exactly the mini-batch
gradient.

Shapes: P groups of G samples, B = P*G rows (row p*G + g is sample g of prompt p), b rows of a
micro-batch, T completion tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rlvr.algo.losses import LossInputs, token_weights
from rlvr.types import RolloutBatch


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


@dataclass(frozen=True)
class MicroBatch:
    """The rows of one forward and backward pass, with what the objective needs of them.

    rows: (b,) indices into ``rollouts`` (CPU); tokens: (b, T) their completion tokens; adv: (b,);
    mask: (b, T) loss mask; weights: (b, T) the policy term's aggregation weights and kl_weights:
    (b, T) the KL anchor's (None without a reference model), both normalised over the whole
    mini-batch; old_logp: (b, T) the PPO ratio's reference (the behaviour log-probs, or the
    trainer's recomputed ones under a mismatch correction); is_weight: (b, T) the mismatch
    correction's weights (None when off); minibatch_rows: rows of its whole mini-batch, every
    process's (a micro-batch's statistics count len(rows) / minibatch_rows of the update's)."""

    rollouts: RolloutBatch
    rows: Tensor
    tokens: Tensor
    adv: Tensor
    mask: Tensor
    weights: Tensor
    kl_weights: Tensor | None
    old_logp: Tensor
    is_weight: Tensor | None
    minibatch_rows: int

    def loss_inputs(self, logp: Tensor, logits: Tensor | None = None,
                    teacher_logits: Tensor | None = None) -> LossInputs:
        """The policy term's inputs, with ``logp`` (b, T) the current policy's log-probs; ``logits`` and
        ``teacher_logits`` (b, T, V): the policy's and the distillation teacher's (on-policy distillation only)."""
        return LossInputs(logp=logp, old_logp=self.old_logp, adv=self.adv, mask=self.mask, weights=self.weights,
                          is_weight=self.is_weight, logits=logits, teacher_logits=teacher_logits)


@dataclass(frozen=True)
class UpdateBatch:
    """The batch of one policy update, every tensor indexed by row, ready to split.

    adv_B: (B,); mask: (B, T) the loss mask (tokens a masked mismatch correction rejects removed);
    old_logp, is_weight: (B, T) as in :class:`MicroBatch`; aggregation / max_len: the policy term's
    weights (:func:`rlvr.algo.losses.token_weights`); with_kl: a KL anchor is on; micro_size: rows per
    micro-batch; mismatch_sums: the correction's mismatch statistics (None: no correction)."""

    rollouts: RolloutBatch
    group_size: int
    adv_B: Tensor
    mask: Tensor
    old_logp: Tensor
    is_weight: Tensor | None
    aggregation: str
    max_len: int
    with_kl: bool
    micro_size: int
    mismatch_sums: dict | None = None

    def minibatches(self, n: int, gen: torch.Generator) -> list[Tensor]:
        """The sorted rows of each of min(n, P) mini-batches of whole groups, the groups in a fresh
        random order drawn from ``gen`` (a CPU generator: the same stream on every process)."""
        G = self.group_size
        n_groups = self.rollouts.size // G
        perm = torch.randperm(n_groups, generator=gen)
        return [(groups[:, None] * G + torch.arange(G)).reshape(-1).sort().values  # cpu: row index
                for groups in perm.chunk(min(n, n_groups))]

    def micro_batches(self, rows: Tensor, sharding: Sharding) -> list[MicroBatch]:
        """The micro-batches this process runs for the mini-batch ``rows``: weights on the whole
        mini-batch, then this process's share of its rows (weights stay global), in chunks of
        ``micro_size`` rows."""
        n_rows = len(rows)
        weights = token_weights(self.mask[rows], self.group_size, self.aggregation, max_len=self.max_len,
                                adv_B=self.adv_B[rows])
        kl_weights = token_weights(self.mask[rows], self.group_size, "token_mean") if self.with_kl else None
        mine = sharding.rows(rows)
        rows, weights = rows[mine], weights[mine]
        chunks = rows.split(self.micro_size)
        kl_parts = [None] * len(chunks) if kl_weights is None else kl_weights[mine].split(self.micro_size)
        return [self._micro(part, w, kl_w, n_rows)
                for part, w, kl_w in zip(chunks, weights.split(self.micro_size), kl_parts)]

    def _micro(self, rows: Tensor, weights: Tensor, kl_weights: Tensor | None, n_rows: int) -> MicroBatch:
        return MicroBatch(self.rollouts, rows, self.rollouts.completion_ids[rows], self.adv_B[rows], self.mask[rows],
                          weights, kl_weights, self.old_logp[rows],
                          None if self.is_weight is None else self.is_weight[rows], n_rows)
