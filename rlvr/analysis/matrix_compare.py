"""All section-6 measures of one weight matrix w0 -> w1 (m, n) (docs/methods/weight_updates.md), a
block of rows at a time: memory is bounded by a float64 block of rows
(:data:`rlvr.analysis.row_blocks.BLOCK_BYTES`; the spectra's Gram chunks of 8192 rows) plus the
singular vectors (m + n) x k, never by a whole matrix in float32 or float64.

Each measure is the one of :mod:`rlvr.analysis.updates` on the whole matrix: the update mask, the
changed count and the principal / low-magnitude mask overlaps bit for bit (the rank-k reconstruction
of a block of rows is the same rows of the whole one; the masks' thresholds come from an exact radix
select, :class:`rlvr.analysis.row_blocks.TopCount`); the spectra bit for bit too (the Gram matrix in
the same row chunks); the norms summed over blocks in float64 (to float64 rounding of a whole-matrix
sum) and U0^T dW as a float32 product per block summed in float64 (the whole-matrix product summed all
rows in float32: the energy share moves within float32 rounding, about 1e-7 relative). Passes over the
rows: one for the mask count, norms, U0^T dW V0 and the masks' first histograms, one for the overlaps
(and, rarely, one more per mask while its threshold's bin holds over 16M entries).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from rlvr.analysis.row_blocks import Rows, TopCount, as_rows, block_rows, blocks
from rlvr.analysis.updates import (
    Precision,
    Spectrum,
    as_float,
    principal_angles,
    random_energy_share,
    spectral_drift,
    spectrum,
    topk_relative_change,
    update_mask,
)


def _square_sum(block: torch.Tensor) -> float:
    """Sum of squares of a block in float64."""
    flat = block.reshape(-1).double()
    return float(torch.dot(flat, flat))


def compare_matrix(
    w0: torch.Tensor | Rows,
    w1: torch.Tensor | Rows,
    k: int,
    precision: Precision = "bf16",
    spec0: Spectrum | None = None,
    method: str = "gram",
    rows_per_block: int | None = None,
) -> dict:
    """All section-6 measures for one matrix w0 -> w1 (m, n), tensors or :class:`Rows`, the update mask
    at ``precision`` (:func:`rlvr.analysis.updates.update_mask`).

    Returns JSON-ready numbers; ``changed`` and the ``*_hits`` counts are kept so that aggregates over
    many matrices are exact ratios of sums (see :func:`rlvr.analysis.updates.summarize`).
    """
    w0, w1 = as_rows(w0), as_rows(w1)
    m, n = w0.shape
    k = min(k, m, n)
    spec0 = spec0 if spec0 is not None else spectrum(w0, k, method)
    spec1 = spectrum(w1, k, method)
    step = rows_per_block or block_rows(n)
    u0, v0 = spec0.u[:, :k], spec0.v[:, :k]
    recon_u, recon_v = (u0 * spec0.s[:k]).float(), v0.T.float()  # rank-k reconstruction, as principal_mask

    def pairs() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for start, stop in blocks(m, step):
            yield w0.block(start, stop), w1.block(start, stop)

    def principal() -> Iterator[torch.Tensor]:
        return ((recon_u[start:stop] @ recon_v).abs_() for start, stop in blocks(m, step))

    def magnitude() -> Iterator[torch.Tensor]:
        return (as_float(w0.block(start, stop)).abs() for start, stop in blocks(m, step))

    changed, w0_sq, dw_sq = 0, 0.0, 0.0
    proj = torch.zeros(k, k, dtype=torch.float64)  # U0^T dW V0
    top = TopCount(m * n, largest=True)  # the count is known after this pass, the histograms made in it
    low = TopCount(m * n, largest=False)
    for (start, stop), (b0, b1), score in zip(blocks(m, step), pairs(), principal()):
        changed += int(torch.count_nonzero(update_mask(b0, b1, precision)))
        f0 = as_float(b0)
        dw = as_float(b1) - f0  # exact for nearby float32 values (Sterbenz)
        w0_sq += _square_sum(f0)
        dw_sq += _square_sum(dw)
        proj += (u0[start:stop].T.to(dw.dtype) @ dw).double() @ v0  # as principal_energy_share, per block
        top.observe(score)
        low.observe(f0.abs())
    top.settle(changed, principal)
    low.settle(changed, magnitude)
    for (b0, b1), score in zip(pairs(), principal()):
        mask = update_mask(b0, b1, precision)
        top.collect(score, mask)
        low.collect(as_float(b0).abs(), mask)
    principal_hits, low_magnitude_hits = top.hits(), low.hits()
    left, right = principal_angles(spec0.u, spec1.u), principal_angles(spec0.v, spec1.v)
    both = torch.cat([left, right])
    norm0, norm_dw = math.sqrt(w0_sq), math.sqrt(dw_sq)
    return {
        "k": k,
        "spectral_drift": spectral_drift(spec0.s, spec1.s),
        "topk_rel_change": topk_relative_change(spec0.s, spec1.s, k).tolist(),
        "principal_angles_left_deg": left.tolist(),
        "principal_angles_right_deg": right.tolist(),
        "principal_angle_mean_deg": both.mean().item(),
        "principal_angle_max_deg": both.max().item(),
        "principal_energy_share": float(proj.square().sum()) / dw_sq if dw_sq else math.nan,
        "random_energy_share": random_energy_share(k, m, n),
        "update_rel_norm": norm_dw / norm0 if norm0 else math.nan,
        "changed": changed,
        "principal_hits": principal_hits,
        "low_magnitude_hits": low_magnitude_hits,
        "chance_hits": changed * changed / (m * n),
    }
