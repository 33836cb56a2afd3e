"""The bounded hand-off between generators and the trainer of the async pipeline.

Staleness (the one definition): a sample consumed by the trainer at version V has
    staleness = V - min_t versions[t]
the trainer's current version minus the OLDEST version of any of its tokens, so the time it
spent in the queue counts. With k = ``pipeline.max_lag``, no sample with staleness > k reaches
the loss: generators block rather than start work that could exceed k (:meth:`LagQueue.claim`),
and the trainer discards (and counts, reason ``stale``) any sample that still would.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from rlvr.errors import PipelineError, PipelineTimeout
from rlvr.types import ScoredBatch


@dataclass
class ScoredGroup:
    """G scored completions of one prompt, as they travel through the queue."""

    batch: ScoredBatch  # one group: G rows
    worker: int
    chunk: int  # the worker's generation-call counter (monotone)
    oldest: int  # min policy version over the group's tokens

    @property
    def tokens(self) -> int:
        return self.batch.rollouts.n_tokens


class LagQueue:
    """Bounded hand-off from generators to the trainer that enforces max lag k (thread-safe).

    Positions count groups since the pipeline started: ``taken`` went into batches, ``live`` are
    claimed and not yet resolved (being generated or queued). A group at position ``pos`` lands
    in batch ``pos // P``, which the trainer consumes at version ``v0 + pos // P``; so a claim
    made at version v may extend up to position ``(v - v0 + k + 1) * P - 1`` and no further
    (FIFO consumption keeps it within k; out-of-order arrival from several workers is caught by
    the staleness check in :meth:`take`).
    """

    def __init__(self, P: int, max_lag: int, version: int):
        self.P, self.k, self.v0, self.version = P, max_lag, version, version
        self._cv = threading.Condition()
        self._items: deque[ScoredGroup] = deque()
        self.taken = self.live = self.produced = 0
        self.discarded: Counter[str] = Counter()  # reason -> groups
        self.discarded_rows = self.discarded_tokens = 0
        self.closed = False

    def room(self) -> int:
        """Groups a generator may claim now without risking staleness > k."""
        return (self.version - self.v0 + self.k + 1) * self.P - self.taken - self.live

    def claim(self, n: int, timeout: float) -> int | None:
        """Block until at least one group may start; claim up to ``n``. None if closed or timed out."""
        with self._cv:
            self._cv.wait_for(lambda: self.closed or self.room() > 0, timeout)
            if self.closed or self.room() <= 0:
                return None
            m = min(n, self.room())
            self.live += m
            return m

    def put(self, groups: list[ScoredGroup], claimed: int, filtered: list[tuple[str, ScoredGroup]] = ()):
        """Deliver the groups of a claim; ``filtered`` were produced but dropped (with a reason)."""
        with self._cv:
            self.live -= claimed - len(groups)
            self.produced += len(groups) + len(filtered)
            for reason, g in filtered:
                self._discard(reason, g)
            if self.closed:  # produced after the stop: counted, never silently lost
                self.live -= len(groups)
                for g in groups:
                    self._discard("drained_at_stop", g)
            else:
                self._items.extend(groups)
            self._cv.notify_all()

    def release(self, claimed: int) -> None:
        """A claim that produced nothing (the worker crashed): free its positions."""
        with self._cv:
            self.live -= claimed
            self._cv.notify_all()

    def _discard(self, reason: str, g: ScoredGroup) -> None:
        self.discarded[reason] += 1
        self.discarded_rows += g.batch.size
        self.discarded_tokens += g.tokens

    def take(self, P: int, timeout: float, check: Callable[[], None] = lambda: None) -> list[ScoredGroup]:
        """Trainer: the next P groups in arrival order with staleness <= k; stale ones are discarded
        (reason ``stale``). ``check`` runs while waiting (raise there if workers died)."""
        deadline = time.monotonic() + timeout
        out: list[ScoredGroup] = []
        with self._cv:
            while len(out) < P:
                if not self._items:
                    check()
                    left = deadline - time.monotonic()
                    if self.closed:
                        raise PipelineError("the pipeline was closed while the trainer waited for samples")
                    if left <= 0:
                        raise PipelineTimeout(
                            f"the trainer waited {timeout:.0f}s for {P - len(out)} more prompt groups; "
                            "generators are stuck or too slow: raise pipeline.timeout_s or lower the batch")
                    self._cv.wait(min(left, 0.2))
                    continue
                g = self._items.popleft()
                self.live -= 1
                if self.version - g.oldest > self.k:
                    self._discard("stale", g)
                    self._cv.notify_all()
                    continue
                out.append(g)
                self.taken += 1
            self._cv.notify_all()
        return out

    def publish(self, version: int) -> None:
        with self._cv:
            self.version = version
            self._cv.notify_all()

    def wake(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def depth(self) -> int:
        return len(self._items)

    def close(self) -> int:
        """Stop: wake everyone, count what is still queued as ``drained_at_stop``; returns that count."""
        with self._cv:
            self.closed = True
            n = len(self._items)
            for g in self._items:
                self._discard("drained_at_stop", g)
            self._items.clear()
            self._cv.notify_all()
            return n
