"""What one policy update measures, collected beside its loop (:func:`rlvr.train.step.policy_update`)
rather than threaded through it: the per-update statistics, the entropy-dynamics cells and the
train/inference mismatch sums.

Shapes: b rows of a micro-batch, T completion tokens, V vocabulary.
"""

from __future__ import annotations

from torch import Tensor

from rlvr.algo.diagnostics import entropy_cell_sums, entropy_dynamics_from_sums, token_stats_from_logits
from rlvr.algo.mismatch import merge, mismatch_stats, summarise
from rlvr.train.entropy_observer import EntropyObserver
from rlvr.train.micro_batches import MicroBatch, Sharding

SUMMED = ("loss", "policy_loss")  # micro-batch stats that add up (weights are mini-batch-normalised)


class UpdateDiagnostics:
    """The collector of one policy update.

    - Statistics of each optimiser update: a micro-batch's losses are partial sums and add up, its
      other statistics are means over its rows and count by its share of the mini-batch; summed over
      processes; the update's result is their mean over optimiser updates.
    - Entropy-dynamics cells (:mod:`rlvr.algo.diagnostics`): additive sums over every row of the
      first epoch, summed over processes.
    - Mismatch sums (:mod:`rlvr.algo.mismatch`): the correction's over the whole batch when one is
      on (``mismatch_sums``); otherwise measured at no extra cost on the first update's forward
      passes (the rows scored before this batch's first optimiser step; in data parallel, this
      process's share).
    - Observed entropy changes (``observer``, :class:`rlvr.train.entropy_observer.EntropyObserver`,
      ``train.entropy_probe`` > 0): around each optimiser update; not summed over processes (each
      scores the whole mini-batch).

    lr: the logit step of the entropy-dynamics view; is_cap: the mismatch cap C.
    """

    def __init__(self, sharding: Sharding, lr: float, is_cap: float, mismatch_sums: dict | None = None,
                 observer: EntropyObserver | None = None):
        self.sharding, self.lr, self.is_cap, self.observer = sharding, lr, is_cap, observer
        self.measure_mismatch = mismatch_sums is None
        self.mismatch: dict = {} if mismatch_sums is None else mismatch_sums
        self.cells: dict[str, float] = {}
        self.totals: dict[str, float] = {}
        self.n_updates = 0
        self.update: dict[str, float] = {}
        self.first_epoch = True

    def begin_update(self, epoch: int, rows) -> None:
        """A new optimiser update of mini-batch ``rows`` ((b,) sorted row indices) starts, in epoch ``epoch``."""
        self.first_epoch = epoch == 0
        self.update = {}
        if self.observer is not None:
            self.observer.before_update(rows, epoch)

    def micro_batch(self, micro: MicroBatch, logits: Tensor, logp: Tensor, stats: dict[str, Tensor]) -> None:
        """One forward pass: logits (b, T, V) and logp (b, T) of ``micro``'s tokens under the
        policy; stats: the objective's scalar statistics."""
        if self.measure_mismatch and self.n_updates == 0:
            behaviour_logp = micro.rollouts.behaviour_logp[micro.rows]
            self.mismatch = merge(self.mismatch, mismatch_stats(logp, behaviour_logp, micro.mask, "none", self.is_cap))
        for key, value in stats.items():
            value = float(value)
            share = value if key in SUMMED else value * len(micro.rows) / micro.minibatch_rows
            self.update[key] = self.update.get(key, 0.0) + share
        if self.first_epoch:  # entropy-dynamics cells (cheap at small V)
            token_stats = token_stats_from_logits(logits.detach(), micro.tokens)
            for key, value in entropy_cell_sums(token_stats, micro.adv, micro.mask, micro.weights, self.lr).items():
                self.cells[key] = self.cells.get(key, 0.0) + float(value)

    def update_stats(self) -> dict[str, float]:
        """This update's statistics, summed over processes."""
        return self.sharding.reduce_stats(self.update)

    def add_update(self, stats: dict[str, float]) -> None:
        """Count one optimiser update with its (reduced) statistics."""
        self.n_updates += 1
        for key, value in stats.items():
            self.totals[key] = self.totals.get(key, 0.0) + value
        if self.observer is not None:
            self.observer.after_update()

    def summary(self) -> dict[str, float]:
        """The update's metrics: statistics averaged over optimiser updates, the ``mismatch_*`` keys,
        when any row was seen the entropy-dynamics shares, and the observer's metrics."""
        out = {key: value / max(1, self.n_updates) for key, value in self.totals.items()}
        out.update(summarise(self.mismatch))
        if self.cells:
            out.update(entropy_dynamics_from_sums(self.sharding.reduce_stats(self.cells)))
        if self.observer is not None:
            out.update(self.observer.summary())
        return out
