"""A matrix read a block of rows at a time, and the exact order statistics a weight analysis needs
over it, so that memory is bounded by a block of rows, never by a whole matrix in float32 or float64.

:class:`TensorRows` wraps a tensor in memory; :class:`rlvr.analysis.safetensors_file.TensorFileRows`
reads the rows from disk. :class:`TopCount` counts a mask's entries among the ``count`` largest (or
smallest) of all m*n entries of a score computed block by block, exactly as
:func:`rlvr.analysis.updates.top_mask` selects them in the whole matrix (ties at the threshold taken
in row-major index order): a radix select on the float bits, its first histogram taken while the
blocks are read for other measures, then one more pass.
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
"""A fresh iterator over the blocks of a float32 or float64 score with the sign bit clear (an ``abs()``),
in row order."""

_DIGIT = 16
CANDIDATE_BUDGET = 1 << 24  # entries of the threshold's bin kept (value and flag) for the last step


def _bits(block: torch.Tensor) -> torch.Tensor:
    """Floats with the sign bit clear (what ``abs()`` returns, -0.0 included) as integers of the same
    order: their IEEE bits."""
    return block.reshape(-1).view(torch.int32 if block.dtype == torch.float32 else torch.int64)


class TopCount:
    """How many flagged entries are among the ``count`` largest (``largest``) or smallest entries of a
    score of ``total`` entries seen block by block in row order: ``|flags & top_mask(score, count)|``
    for :func:`rlvr.analysis.updates.top_mask` on the whole matrix (ties at the threshold in index order),
    without the whole score or mask.

    Use: ``observe(block)`` on every block (a histogram of the top 16 bits), ``settle(count, scores)``
    (picks the threshold's bin, refining it 16 bits at a time with passes over ``scores`` while it holds more
    than :data:`CANDIDATE_BUDGET` entries), ``collect(block, flags)`` on every block again, ``hits()``.
    In the bin, values and flags are kept in index order and the last ones are ranked by a stable sort;
    a bin of one value (all bits fixed) keeps nothing: its first ties in index order are counted."""

    def __init__(self, total: int, largest: bool = True):
        self.total, self.largest = total, largest
        self.count, self.everything, self.nothing = 0, False, False
        self.prefix, self.shift, self.width, self.take = 0, 0, None, 0
        self.counts = torch.zeros(1 << _DIGIT, dtype=torch.int64)
        self.found = 0  # flagged entries certainly among the selected
        self.values: list[torch.Tensor] = []
        self.flags: list[torch.Tensor] = []

    def observe(self, block: torch.Tensor) -> None:
        if self.width is None:
            self.width = 32 if block.dtype == torch.float32 else 64
        bits = _bits(block)
        self.counts += torch.bincount(bits >> (self.width - _DIGIT), minlength=1 << _DIGIT)

    def settle(self, count: int, scores: Scores) -> None:
        """Fix ``count`` (known once every block was observed) and find the threshold's bin."""
        self.count, self.everything, self.nothing = count, count >= self.total, count <= 0
        if self.everything or self.nothing or self.width is None:
            return
        # the selected entries: rank >= total - count ascending (largest), or rank < count (smallest)
        want = self.total - self.count if self.largest else self.count - 1  # rank of the threshold
        shift, counts, left, prefix = self.width - _DIGIT, self.counts, want, 0
        while True:
            cumulative = torch.cumsum(counts, 0)
            digit = int(torch.searchsorted(cumulative, torch.tensor(left), right=True))
            left -= int(cumulative[digit - 1]) if digit else 0
            prefix = (prefix << _DIGIT) | digit
            in_bin = int(counts[digit])
            if shift == 0 or in_bin <= CANDIDATE_BUDGET:
                break
            shift -= _DIGIT
            counts = torch.zeros(1 << _DIGIT, dtype=torch.int64)
            for block in scores():
                bits = _bits(block)
                bits = bits[(bits >> (shift + _DIGIT)) == prefix]
                counts += torch.bincount((bits >> shift) & ((1 << _DIGIT) - 1), minlength=1 << _DIGIT)
        self.prefix, self.shift = prefix, shift
        below_bin = want - left  # entries before the bin (ascending)
        beyond_bin = self.total - below_bin - in_bin if self.largest else below_bin
        self.take = self.count - beyond_bin  # selected entries inside the bin

    def collect(self, block: torch.Tensor, flags: torch.Tensor) -> None:
        flags = flags.reshape(-1)
        if self.nothing:
            return
        if self.everything:
            self.found += int(torch.count_nonzero(flags))
            return
        top = _bits(block) >> self.shift
        beyond = top > self.prefix if self.largest else top < self.prefix
        self.found += int(torch.count_nonzero(flags & beyond))
        inside = top == self.prefix
        if self.shift == 0:  # one value: its first `take` entries in index order
            ties = flags[inside][: self.take]
            self.found += int(torch.count_nonzero(ties))
            self.take -= int(ties.numel())
        else:
            self.values.append(block.reshape(-1)[inside])
            self.flags.append(flags[inside])

    def hits(self) -> int:
        if self.values:
            values, flags = torch.cat(self.values), torch.cat(self.flags)
            order = torch.sort(values, descending=self.largest, stable=True).indices[: self.take]
            self.found += int(torch.count_nonzero(flags[order]))
            self.values, self.flags = [], []
        return self.found
