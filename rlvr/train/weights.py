"""Moving parameters between copies of a model, bucket by bucket.

Parameters are copied as a few large flat tensors (one dtype each, at most ``pipeline.bucket_mb``
MiB) instead of one tensor at a time: the async pipeline publishes weights this way
(:class:`WeightStore`, Ray's object store) and data parallel all-reduces gradients this way.
"""

from __future__ import annotations

import threading

import torch

from rlvr.errors import PipelineTimeout


# ----------------------------------------------------------------------------- buckets
def bucket_layout(tensors: list[torch.Tensor], bucket_bytes: int) -> list[list[int]]:
    """Indices of ``tensors`` grouped into buckets: same dtype, at most ``bucket_bytes`` each
    (a single larger tensor gets a bucket of its own). Deterministic given shapes and dtypes."""
    layout: list[list[int]] = []
    size, dtype = 0, None
    for i, t in enumerate(tensors):
        nbytes = t.numel() * t.element_size()
        if not layout or t.dtype != dtype or size + nbytes > bucket_bytes:
            layout.append([])
            size, dtype = 0, t.dtype
        layout[-1].append(i)
        size += nbytes
    return layout


def pack(tensors: list[torch.Tensor], layout: list[list[int]]) -> list[torch.Tensor]:
    """One flat tensor per bucket (copies, detached)."""
    return [torch.cat([tensors[i].detach().reshape(-1) for i in idx]) for idx in layout]


def unpack_into(tensors: list[torch.Tensor], layout: list[list[int]], buckets: list[torch.Tensor]) -> None:
    """Copy the flat ``buckets`` back into ``tensors`` in place (inverse of :func:`pack`)."""
    if len(buckets) != len(layout):
        raise ValueError(f"weight sync: {len(buckets)} buckets for a layout of {len(layout)}")
    with torch.no_grad():
        for idx, flat in zip(layout, buckets):
            off = 0
            for i in idx:
                n = tensors[i].numel()
                tensors[i].copy_(flat[off : off + n].view_as(tensors[i]))
                off += n


def parameters_of(model: torch.nn.Module) -> list[torch.Tensor]:
    """The model's parameters in a fixed order (tied weights once)."""
    return list(model.parameters())


class WeightStore:
    """The latest published weights as flat buckets: the trainer writes, generators copy (threads).

    A lock guards each publish and pull, so a generator never sees half a version; every wait on
    it is bounded by ``timeout_s`` (a stuck sync raises :class:`PipelineTimeout`).
    """

    def __init__(self, model: torch.nn.Module, version: int, bucket_mb: int = 32, timeout_s: float = 300.0):
        params = parameters_of(model)
        self.layout = bucket_layout(params, bucket_mb << 20)
        self.buckets = pack(params, self.layout)
        self.version, self.timeout_s = version, timeout_s
        self._lock = threading.Lock()

    def _acquire(self, what: str) -> None:
        if not self._lock.acquire(timeout=self.timeout_s):
            raise PipelineTimeout(f"weight sync ({what}) waited {self.timeout_s:.0f}s for the weight lock; "
                                  "a publisher or reader is stuck")

    def publish(self, model: torch.nn.Module, version: int) -> None:
        params = parameters_of(model)
        self._acquire("publish")
        try:
            with torch.no_grad():
                for idx, flat in zip(self.layout, self.buckets):  # bucket by bucket
                    flat.copy_(torch.cat([params[i].detach().reshape(-1) for i in idx]))
            self.version = version
        finally:
            self._lock.release()

    def pull(self, model: torch.nn.Module, have: int) -> int | None:
        """Copy the published weights into ``model`` if newer than ``have``; the new version or None."""
        if self.version <= have:
            return None
        self._acquire("pull")
        try:
            unpack_into(parameters_of(model), self.layout, self.buckets)
            return self.version
        finally:
            self._lock.release()
