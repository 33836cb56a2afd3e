"""Observed entropy changes of the policy updates (``train.entropy_probe`` > 0; docs/methods/losses.md,
"Observed entropy change"): what the entropy-dynamics view predicts, measured.

- The update's own batch: each optimiser update of a step's first epoch, its mini-batch's rows are
  scored before and after it; the change of every loss token's next-token entropy, summed as the
  prediction ``dH_total`` sums (``dH_obs_total``, ``dH_obs_<cell>``).
- A fixed probe batch (:class:`ProbeBatch`): ``train.entropy_probe`` held-out problems, one sample
  each, drawn once by the starting policy from its own RNG stream; its mean token entropy before the
  step's first update and after its last (``probe_entropy_before`` / ``_after`` / ``_change``).

Every measurement is a forward pass without gradient, in eval mode, that draws no random number:
the training numerics are unchanged. ``probe_s``: the seconds they took.

Shapes: B rows, T completion tokens, V vocabulary; N probe rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import Tensor

from rlvr.algo.diagnostics import CELLS, observed_cell_sums, token_stats_from_logits
from rlvr.model.logprobs import completion_logits, sequences
from rlvr.rollout.engine import sample
from rlvr.tasks.environment import environments_for
from rlvr.train.micro_batches import UpdateBatch

PROBE_STREAM = 11
"""The probe's sampling seed is ``train.seed + PROBE_STREAM`` (the held-out evaluation's is + 7)."""


@dataclass(frozen=True)
class ProbeBatch:
    """The fixed probe batch: the fields :func:`rlvr.model.logprobs.sequences` reads, and ``mask``
    (N, T) its sampled tokens (loss tokens that are the policy's own)."""

    prompt_ids: Tensor
    prompt_mask: Tensor
    completion_ids: Tensor
    completion_mask: Tensor
    mask: Tensor


def draw_probe(model, tok, task, params, problems: list, seed: int) -> ProbeBatch:
    """One completion of each of ``problems`` (held-out ones that fit the context) sampled by
    ``model`` with a generator of its own, seeded ``seed + PROBE_STREAM``: no other stream moves.
    Deterministic: a resumed run, whose state is built from the same starting policy before its
    checkpoint is restored, draws the same batch."""
    gen = torch.Generator().manual_seed(seed + PROBE_STREAM)
    rb = sample(model, tok, [p.prompt for p in problems], params, version=0, generator=gen,
                environments=environments_for(task, problems, params), problems=problems)
    return ProbeBatch(rb.prompt_ids, rb.prompt_mask, rb.completion_ids, rb.completion_mask,
                      rb.loss_mask & rb.policy_mask)


@torch.no_grad()
def scored(model, batch, rows: Tensor, temperature: float, chunk: int) -> dict[str, Tensor]:
    """:func:`rlvr.algo.diagnostics.token_stats_from_logits` of ``batch``'s ``rows`` under ``model``
    ((b, T) each, float64: a change of one update is small beside H), in eval mode, without gradient,
    ``chunk`` rows per forward pass."""
    was_training = model.training
    model.eval()
    try:
        parts = []
        for part in rows.split(chunk):
            ids, key_mask, tp = sequences(batch, part)
            logits = completion_logits(model, ids, key_mask, tp, temperature)
            parts.append(token_stats_from_logits(logits.double(), batch.completion_ids[part]))
        return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}
    finally:
        model.train(was_training)


def mean_entropy(model, probe: ProbeBatch, temperature: float, chunk: int) -> float:
    """The probe's mean next-token entropy over its sampled tokens (nats)."""
    entropy = scored(model, probe, torch.arange(probe.mask.shape[0]), temperature, chunk)["entropy"]
    mask = probe.mask.to(entropy.device)
    return float((entropy * mask).sum() / mask.sum().clamp(min=1))


class EntropyObserver:
    """The observer of one step's policy update (:class:`rlvr.train.update_diagnostics.UpdateDiagnostics`
    calls it around each optimiser update).

    model: the policy; update: the step's batch; probe: the fixed probe batch; temperature: the
    sampling temperature (logits are divided by it, as the training forward does)."""

    def __init__(self, model, update: UpdateBatch, probe: ProbeBatch, temperature: float):
        self.model, self.update, self.probe, self.temperature = model, update, probe, temperature
        self.chunk = update.micro_size
        self.sums = {f"dH_obs_{c}": 0.0 for c in ("total", *CELLS)}
        self.rows: Tensor | None = None
        self.before: dict[str, Tensor] = {}
        self.probe_before: float | None = None
        self.seconds = 0.0

    def before_update(self, rows: Tensor, epoch: int) -> None:
        """Before the optimiser update of mini-batch ``rows`` (sorted row indices) in ``epoch``."""
        t0 = time.time()
        if self.probe_before is None:
            self.probe_before = mean_entropy(self.model, self.probe, self.temperature, self.chunk)
        self.rows = rows if epoch == 0 else None  # the prediction covers the first epoch
        if self.rows is not None:
            self.before = scored(self.model, self.update.rollouts, rows, self.temperature, self.chunk)
        self.seconds += time.time() - t0

    def after_update(self) -> None:
        """After that update: its rows' observed change, added to the step's sums."""
        if self.rows is None:
            return
        t0 = time.time()
        after = scored(self.model, self.update.rollouts, self.rows, self.temperature, self.chunk)["entropy"]
        sums = observed_cell_sums(self.before, after, self.update.adv_B[self.rows], self.update.mask[self.rows])
        for key, value in sums.items():
            self.sums[key] += float(value)
        self.rows, self.before = None, {}
        self.seconds += time.time() - t0

    def summary(self) -> dict[str, float]:
        """The step's metrics: the observed sums, the probe's mean entropy before the first update and
        after the last, and ``probe_s``."""
        t0 = time.time()
        after = mean_entropy(self.model, self.probe, self.temperature, self.chunk)
        self.seconds += time.time() - t0
        out = dict(self.sums)
        if self.probe_before is not None:
            out.update(probe_entropy_before=self.probe_before, probe_entropy_after=after,
                       probe_entropy_change=after - self.probe_before)
        out["probe_s"] = self.seconds
        return out
