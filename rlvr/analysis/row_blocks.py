"""A matrix read a block of rows at a time, and the exact order statistics a weight analysis needs
over it, so that memory is bounded by a block of rows, never by a whole matrix in float32 or float64.

:class:`TensorRows` wraps a tensor in memory; :class:`rlvr.analysis.safetensors_file.TensorFileRows`
reads the rows from disk. :func:`rank_value` finds the value of a given rank among all m*n entries
of a score computed block by block (a radix select on the float bits: two passes for float32, four
for float64), and :class:`TopMask` marks the ``count`` largest (or smallest) entries block by block
exactly as :func:`rlvr.analysis.updates.top_mask` marks them in the whole matrix: ties at the
threshold taken in row-major index order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import torch

BLOCK_BYTES = 64 << 20  # a float64 block of rows is at most this (or one row)


class Rows(Protocol):
    """A 2-D matrix (m, n) whose rows are read in blocks, in the dtype it is stored in."""

    shape: tuple[int, int]
    dtype: torch.dtype

    def block(self, start: int, stop: int) -> torch.Tensor:
        """(stop - start, n) rows start..stop-1."""
        ...


class TensorRows:
    """:class:`Rows` of a tensor in memory."""

    def __init__(self, tensor: torch.Tensor):
        if tensor.ndim != 2:
            raise ValueError(f"row blocks need a 2-D matrix, got shape {tuple(tensor.shape)}")
        self.tensor, self.shape, self.dtype = tensor, (int(tensor.shape[0]), int(tensor.shape[1])), tensor.dtype

    def block(self, start: int, stop: int) -> torch.Tensor:
        return self.tensor[start:stop]


def as_rows(w: torch.Tensor | Rows) -> Rows:
    return TensorRows(w) if isinstance(w, torch.Tensor) else w


def whole(w: torch.Tensor | Rows) -> torch.Tensor:
    """The matrix as one tensor in its stored dtype."""
    return w if isinstance(w, torch.Tensor) else w.block(0, w.shape[0])


def block_rows(cols: int, budget: int = BLOCK_BYTES) -> int:
    """Rows per block: a float64 block of ``cols`` columns within ``budget`` bytes (at least one row)."""
    return max(1, budget // (8 * max(1, cols)))


def blocks(m: int, rows: int) -> Iterator[tuple[int, int]]:
    """(start, stop) of consecutive row blocks of ``rows`` rows covering 0..m."""
    for start in range(0, m, rows):
        yield start, min(m, start + rows)


Scores = Callable[[], Iterator[torch.Tensor]]
"""A fresh iterator over the blocks of a non-negative float32 or float64 score, in row order."""

_DIGIT = 16


def _bits(block: torch.Tensor) -> torch.Tensor:
    """Non-negative floats as integers of the same order (their IEEE bits; -0.0 read as 0.0)."""
    block = block.reshape(-1)
    block = torch.where(block == 0, torch.zeros_like(block), block)  # -0.0 (sign bit set) compares equal to 0.0
    return block.view(torch.int32 if block.dtype == torch.float32 else torch.int64)


def rank_value(scores: Scores, rank: int) -> tuple[float, int, int]:
    """(value, entries below it, entries equal to it) for the value at ascending position ``rank``
    (0-based) of all entries of ``scores``, which must be non-negative and not NaN: the value is what
    ``np.partition(flat, rank)[rank]`` gives on the whole matrix. A radix select over the float bits,
    16 at a time from the top: one pass over the blocks per digit."""
    first = next(scores(), None)
    if first is None:
        raise ValueError("rank_value needs at least one block")
    width = 32 if first.dtype == torch.float32 else 64
    prefix, left = 0, rank  # bits fixed so far (above shift), rank among the entries with that prefix
    for shift in range(width - _DIGIT, -1, -_DIGIT):
        counts = torch.zeros(1 << _DIGIT, dtype=torch.int64)
        for block in scores():
            bits = _bits(block)
            if shift + _DIGIT < width:
                bits = bits[(bits >> (shift + _DIGIT)) == prefix]
            counts += torch.bincount(((bits >> shift) & ((1 << _DIGIT) - 1)).to(torch.int64),
                                     minlength=1 << _DIGIT)
        cumulative = torch.cumsum(counts, 0)
        digit = int(torch.searchsorted(cumulative, torch.tensor(left), right=True))
        left -= int(cumulative[digit - 1]) if digit else 0
        prefix = (prefix << _DIGIT) | digit
    dtype = torch.float32 if width == 32 else torch.float64
    value = float(torch.tensor([prefix], dtype=torch.int32 if width == 32 else torch.int64).view(dtype))
    return value, rank - left, int(counts[digit])


class TopMask:
    """The mask of the ``count`` largest (``largest``) or smallest entries of a score of ``total``
    entries, made block by block in row order with ``mark(block)``: the same entries as
    :func:`rlvr.analysis.updates.top_mask` on the whole matrix (ties at the threshold in index order)."""

    def __init__(self, scores: Scores, total: int, count: int, largest: bool = True):
        self.largest, self.everything = largest, count >= total and total > 0
        self.nothing = count <= 0 or (count >= total and not self.everything)
        if self.nothing or self.everything:
            return
        self.threshold, below, equal = rank_value(scores, total - count if largest else count - 1)
        beyond = total - below - equal if largest else below  # strictly beyond the threshold
        self.ties_left = count - beyond  # the ties to mark, the first ones in index order

    def mark(self, block: torch.Tensor) -> torch.Tensor:
        """The mask of the next block of the score (blocks must come in row order, each once)."""
        if self.nothing or self.everything:
            return torch.full(block.shape, self.everything, dtype=torch.bool)
        mask = block > self.threshold if self.largest else block < self.threshold
        if self.ties_left > 0:
            flat = mask.view(-1)
            ties = torch.nonzero(block.reshape(-1) == self.threshold).squeeze(1)[: self.ties_left]
            flat[ties] = True
            self.ties_left -= int(ties.numel())
        return mask
