"""Entropy-dynamics diagnostic: the token-level gradient view (docs/methods/losses.md, WAPO entry).

For a softmax policy with logits z, one step on sampled token s with
dz = eta * A * (e_s - p) moves the sampled token with the sign of A. Token s is a
*peak* if p_s >= sum_j p_j^2, else a *valley*. The first-order entropy change is

    dH = -eta * A * [ p_s (log p_s + H) - sum_j p_j^2 (log p_j + H) ].

The four cells (sign of A) x (peak | valley) tell which tokens drive an entropy
collapse (negative A on valleys) or explosion (negative A on peaks).

Shapes: B completions, T tokens, V vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor

CELLS = ("pos_peak", "pos_valley", "neg_peak", "neg_valley")
CHUNK_ELEMENTS = 1 << 24  # logits elements per chunk (64 MiB of float32 per temporary)


@torch.no_grad()
def token_stats_from_logits(
    logits: Tensor, tokens: Tensor, chunk_rows: int | None = None
) -> dict[str, Tensor]:
    """Per-token softmax statistics of the sampled tokens, each (B, T).

    logits: (B, T, V) next-token logits at the positions that produced tokens (B, T).
    Returns ``p_s``, ``logp_s`` (sampled token), ``sum_p2`` = sum_j p_j^2, ``entropy`` H
    (nats) and ``sum_p2_logp_plus_H`` = sum_j p_j^2 (log p_j + H). Computed in float32
    (or float64 if the logits are float64), chunk_rows positions at a time, so the extra
    memory is O(B*T) plus one chunk. Detached.
    """
    if logits.dim() != 3 or tokens.shape != logits.shape[:2]:
        raise ValueError(
            f"need logits (B, T, V) and tokens (B, T), got {tuple(logits.shape)}, {tuple(tokens.shape)}"
        )
    B, T, V = logits.shape
    dtype = torch.promote_types(logits.dtype, torch.float32)
    flat_logits, flat_tokens = logits.reshape(B * T, V), tokens.reshape(B * T)
    rows = chunk_rows or max(1, CHUNK_ELEMENTS // max(V, 1))
    keys = ("p_s", "logp_s", "sum_p2", "entropy", "sum_p2_logp_plus_H")
    out = {k: torch.empty(B * T, dtype=dtype, device=logits.device) for k in keys}
    for start in range(0, B * T, rows):
        sl = slice(start, start + rows)
        logp = torch.log_softmax(flat_logits[sl].to(dtype), dim=-1)
        p = logp.exp()
        entropy = -(p * logp).sum(-1)
        p2 = p * p
        out["logp_s"][sl] = logp.gather(-1, flat_tokens[sl, None].long()).squeeze(-1)
        out["entropy"][sl] = entropy
        out["sum_p2"][sl] = p2.sum(-1)
        out["sum_p2_logp_plus_H"][sl] = (p2 * (logp + entropy[:, None])).sum(-1)
    out["p_s"] = out["logp_s"].exp()
    return {k: v.view(B, T) for k, v in out.items()}


def predicted_entropy_change(stats: dict[str, Tensor], adv_B: Tensor, eta: float) -> Tensor:
    """(B, T) first-order entropy change of one logit step dz = eta * A * (e_s - p) per token."""
    p_s, H = stats["p_s"], stats["entropy"]
    bracket = p_s * (stats["logp_s"] + H) - stats["sum_p2_logp_plus_H"]
    return -eta * adv_B[:, None].to(bracket.dtype) * bracket


def cell_masks(stats: dict[str, Tensor], adv: Tensor, mask: Tensor) -> dict[str, Tensor]:
    """{cell: (B, T) bool} for each cell in CELLS: the loss tokens (``mask``, bool (B, T)) by the sign of
    their advantage (``adv``, (B, T)) and whether the sampled token is a peak (p_s >= sum_j p_j^2)."""
    peak = stats["p_s"] >= stats["sum_p2"]
    return {
        "pos_peak": mask & (adv > 0) & peak,
        "pos_valley": mask & (adv > 0) & ~peak,
        "neg_peak": mask & (adv < 0) & peak,
        "neg_valley": mask & (adv < 0) & ~peak,
    }


@torch.no_grad()
def entropy_cell_sums(
    stats: dict[str, Tensor], adv_B: Tensor, mask: Tensor, weights: Tensor, eta: float
) -> dict[str, Tensor]:
    """Additive sums behind :func:`entropy_dynamics`, as 0-dim tensors: they add up over
    micro-batches, mini-batches and data-parallel ranks, so a step's cells cover its whole batch.

    Keys: ``n_tokens``, ``load`` (sum |weights * A|), and for each cell in CELLS
    ``tokens_<cell>``, ``load_<cell>``, ``dH_<cell>``; plus ``tokens_zero_adv`` and ``dH_total``.
    """
    m = mask != 0
    adv = adv_B[:, None].to(stats["p_s"].dtype).expand_as(stats["p_s"])
    cells = cell_masks(stats, adv, m)
    dH = torch.where(m, predicted_entropy_change(stats, adv_B, eta), torch.zeros_like(adv))
    load = torch.where(m, (weights * adv).abs(), torch.zeros_like(adv))
    out: dict[str, Tensor] = {"n_tokens": m.sum().to(adv.dtype), "load": load.sum()}
    for name, cell in cells.items():
        out[f"tokens_{name}"] = cell.sum().to(adv.dtype)
        out[f"load_{name}"] = load[cell].sum()
        out[f"dH_{name}"] = dH[cell].sum()
    out["tokens_zero_adv"] = (m & (adv == 0)).sum().to(adv.dtype)
    out["dH_total"] = dH.sum()
    return out


def entropy_dynamics_from_sums(sums: dict) -> dict:
    """The metrics of :func:`entropy_dynamics` from (possibly accumulated) :func:`entropy_cell_sums`."""
    n_tokens = max(float(sums["n_tokens"]), 1.0)
    total_load = float(sums["load"])
    out = {}
    for name in CELLS:
        out[f"token_share_{name}"] = float(sums[f"tokens_{name}"]) / n_tokens
        out[f"weight_share_{name}"] = float(sums[f"load_{name}"]) / total_load if total_load > 0 else 0.0
        out[f"dH_{name}"] = float(sums[f"dH_{name}"])
    out["token_share_zero_adv"] = float(sums["tokens_zero_adv"]) / n_tokens
    out["dH_total"] = float(sums["dH_total"])
    return out


def entropy_dynamics(
    stats: dict[str, Tensor], adv_B: Tensor, mask: Tensor, weights: Tensor, eta: float
) -> dict[str, float]:
    """Shares of the four cells and the predicted entropy change of one batch.

    stats: token_stats_from_logits output ((B, T) each); adv_B: (B,); mask, weights: (B, T).
    eta: logit step size of the token-level view (dz = eta * A * (e_s - p) for every token).
    Keys, for each cell in CELLS: ``token_share_<cell>`` (share of loss tokens),
    ``weight_share_<cell>`` (share of sum |weights * A|), ``dH_<cell>`` (predicted dH summed
    over the cell's tokens); plus ``token_share_zero_adv`` (tokens with A = 0, in no cell)
    and ``dH_total`` (sum over all loss tokens). Token shares sum to 1.
    """
    return entropy_dynamics_from_sums(entropy_cell_sums(stats, adv_B, mask, weights, eta))


@torch.no_grad()
def observed_cell_sums(before: dict[str, Tensor], entropy_after: Tensor, adv_B: Tensor, mask: Tensor) -> dict:
    """The OBSERVED entropy change of one update on its own rows, summed as :func:`entropy_cell_sums`
    sums the predicted one (docs/methods/losses.md, "Observed entropy change").

    before: :func:`token_stats_from_logits` of the rows under the policy before the update ((B, T)
    each); entropy_after: (B, T) their next-token entropy after it; adv_B: (B,); mask: (B, T) loss
    mask. Each token's change is H_after - H_before; the cells are those of the prediction (the sign
    of A, and peak or valley under the policy before the update). 0-dim tensors, additive over
    updates: ``dH_obs_total`` (every loss token, A = 0 included, as ``dH_total`` covers them) and
    ``dH_obs_<cell>``.
    """
    m = mask != 0
    adv = adv_B[:, None].to(before["p_s"].dtype).expand_as(before["p_s"])
    change = torch.where(m, entropy_after.to(adv.dtype) - before["entropy"], torch.zeros_like(adv))
    out = {"dH_obs_total": change.sum()}
    for name, cell in cell_masks(before, adv, m).items():
        out[f"dH_obs_{name}"] = change[cell].sum()
    return out
