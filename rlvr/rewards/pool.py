"""A process pool that bounds every scoring call by a wall-clock timeout.

Verifiers such as math-verify can hang on pathological model output (sympy simplifying
``9^{9^{9^9}}``), and math-verify's own SIGALRM timeout works only in the main thread.
:class:`ScoringPool` runs each call in a worker process; a call that runs past
``timeout_s`` has its worker killed and replaced, and gets a failed :class:`CallResult`.
Every call gets exactly one result, in order, whatever fails (exception, timeout, worker
crash, unpicklable argument). It never hangs and works when called from any thread.

Why not ``concurrent.futures.ProcessPoolExecutor``: it cannot kill one stuck worker (only
the whole pool, losing the other workers' in-flight calls) and it pickles the function on
every call. Here workers are forked holding a table of functions, so closures, lambdas and
bound methods such as ``task.verify`` work and are sent once; only arguments and results
travel through the pipes. Where ``fork`` is unavailable, ``spawn`` is used and the
functions must be picklable. ``workers=0`` runs calls in-process with no timeout
(debugging only).
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any

Call = tuple[tuple, dict]  # (args, kwargs) of one call
_MAX_FNS = 16


@dataclass
class CallResult:
    """Outcome of one call: ``value`` if ``ok``, else ``error`` (and ``timed_out``)."""

    ok: bool
    value: Any = None
    error: str | None = None
    timed_out: bool = False
    skipped: bool = False  # not run: the map gave up after too many failures


@dataclass
class PoolStats:
    """Counters over one :meth:`ScoringPool.map`."""

    calls: int = 0
    timeouts: int = 0
    exceptions: int = 0
    errors: list[str] = field(default_factory=list)  # first few distinct messages
    wall_s: float = 0.0
    skipped: int = 0  # calls never run because more than ``max_failures`` had already failed

    def add_error(self, msg: str, timed_out: bool, skipped: bool = False) -> None:
        if skipped:
            self.skipped += 1
            return
        if timed_out:
            self.timeouts += 1
        else:
            self.exceptions += 1
        if msg not in self.errors and len(self.errors) < 5:
            self.errors.append(msg)


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:300]


def _run_call(fn: Callable, args: tuple, kwargs: dict) -> CallResult:
    try:
        return CallResult(True, fn(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 - isolate every failure to its call
        return CallResult(False, error=_error_text(e))


def _worker_main(conn, fns: dict[tuple, Callable], parent_pid: int) -> None:
    """Worker loop: receive (key, args, kwargs), answer with a CallResult; exit with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    while True:
        try:
            if not conn.poll(1.0):
                if os.getppid() != parent_pid:  # parent gone (even by SIGKILL): do not linger
                    return
                continue
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        key, args, kwargs = msg
        res = _run_call(fns[key], args, kwargs)
        try:
            conn.send(res)
        except Exception as e:  # noqa: BLE001 - e.g. an unpicklable return value
            conn.send(CallResult(False, error=f"result not sendable: {_error_text(e)}"))


class _Worker:
    def __init__(self, ctx, fns: dict[tuple, Callable]):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, fns, os.getpid()), daemon=True)
        self.proc.start()
        child.close()

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except Exception:  # noqa: BLE001
            pass
        self.proc.join(timeout=1)
        self.kill()


def _fn_key(fn: Callable) -> tuple:
    """Stable identity of a function; bound methods are re-created on each attribute access."""
    owner, func = getattr(fn, "__self__", None), getattr(fn, "__func__", None)
    if owner is not None and func is not None:
        return ("method", id(owner), id(func))
    return ("function", id(fn))


class ScoringPool:
    """``workers`` processes running calls of registered functions with a per-call timeout."""

    def __init__(self, workers: int = 2, start_method: str | None = None):
        methods = mp.get_all_start_methods()
        self.ctx = mp.get_context(start_method or ("fork" if "fork" in methods else "spawn"))
        self.n_workers = int(workers)
        self._fns: dict[tuple, Callable] = {}  # key -> fn (strong refs keep ids valid)
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()

    # -- worker management (caller holds the lock)
    def _ensure(self, fn: Callable) -> tuple:
        key = _fn_key(fn)
        if key not in self._fns:
            if len(self._fns) >= _MAX_FNS:
                self._fns.pop(next(iter(self._fns)))
            self._fns[key] = fn
            self._stop_all()  # new workers are forked holding the new table
        while len(self._workers) < self.n_workers:
            self._workers.append(_Worker(self.ctx, self._fns))
        return key

    def _replace(self, w: _Worker) -> _Worker:
        w.kill()
        new = _Worker(self.ctx, self._fns)
        self._workers[self._workers.index(w)] = new
        return new

    def _stop_all(self) -> None:
        for w in self._workers:
            w.stop()
        self._workers = []

    def close(self) -> None:
        """Stop all workers (the pool restarts them if used again)."""
        with self._lock:
            self._stop_all()

    # -- the public call
    def map(self, fn: Callable, calls: Sequence[Call], timeout_s: float | None = 5.0,
            max_failures: int | None = None) -> list[CallResult]:
        """Run ``fn(*args, **kwargs)`` for every (args, kwargs) in ``calls``; one result each, in order.

        ``max_failures``: once more calls than this have failed (raised, timed out), the calls not
        yet started are not run and get a failed result with ``skipped=True``: a function that
        always hangs costs ``max_failures + 1`` timeouts, not one per call."""
        results, _ = self.map_with_stats(fn, calls, timeout_s, max_failures)
        return results

    def map_with_stats(
        self, fn: Callable, calls: Sequence[Call], timeout_s: float | None = 5.0, max_failures: int | None = None
    ) -> tuple[list[CallResult], PoolStats]:
        """Like :meth:`map`, also returning the :class:`PoolStats` counters."""
        t0 = time.perf_counter()
        if self.n_workers <= 0:
            results = []
            for a, k in calls:
                if max_failures is not None and sum(not r.ok for r in results) > max_failures:
                    results.append(_skipped(max_failures))
                else:
                    results.append(_run_call(fn, a, k))
        else:
            with self._lock:
                results = self._dispatch(self._ensure(fn), calls, timeout_s, max_failures)
        stats = PoolStats(calls=len(calls))
        for r in results:
            if not r.ok:
                stats.add_error(r.error or "", r.timed_out, r.skipped)
        stats.wall_s = time.perf_counter() - t0
        return results, stats

    def _dispatch(self, key: tuple, calls: Sequence[Call], timeout_s: float | None,
                  max_failures: int | None = None) -> list[CallResult]:
        results: list[CallResult | None] = [None] * len(calls)
        todo = list(range(len(calls)))[::-1]
        busy: dict[_Worker, tuple[int, float]] = {}  # worker -> (call index, deadline)
        failed = 0
        while todo or busy:
            if max_failures is not None and failed > max_failures:
                while todo:  # give up: the rest are not run
                    results[todo.pop()] = _skipped(max_failures)
            for w in [w for w in self._workers if w not in busy]:
                if not todo:
                    break
                i = todo.pop()
                try:
                    w.conn.send((key, *calls[i]))
                except Exception as e:  # noqa: BLE001 - unpicklable argument or dead worker
                    results[i] = CallResult(False, error=f"could not send call: {_error_text(e)}")
                    failed += 1
                    if not w.proc.is_alive():
                        self._replace(w)
                    continue
                busy[w] = (i, time.monotonic() + timeout_s if timeout_s else float("inf"))
            if not busy:
                continue
            wait_s = max(0.0, min(d for _, d in busy.values()) - time.monotonic())
            ready = wait([w.conn for w in busy], timeout=min(wait_s, 3600.0))
            for w in list(busy):
                i, deadline = busy[w]
                if w.conn in ready:
                    try:
                        results[i] = w.conn.recv()
                    except (EOFError, OSError) as e:
                        results[i] = CallResult(False, error=f"worker died: {_error_text(e)}")
                        self._replace(w)
                    del busy[w]
                    failed += not results[i].ok
                elif time.monotonic() >= deadline:
                    results[i] = CallResult(False, error=f"timeout after {timeout_s}s", timed_out=True)
                    self._replace(w)
                    del busy[w]
                    failed += 1
        return results  # type: ignore[return-value]


def _skipped(max_failures: int) -> CallResult:
    return CallResult(False, error=f"not run: more than {max_failures} calls had already failed", skipped=True)


_POOLS: dict[int, ScoringPool] = {}
_POOLS_LOCK = threading.Lock()


def get_pool(workers: int = 2) -> ScoringPool:
    """The process-wide shared pool with ``workers`` workers (created on first use)."""
    with _POOLS_LOCK:
        if workers not in _POOLS:
            _POOLS[workers] = ScoringPool(workers)
        return _POOLS[workers]


@atexit.register
def _close_pools() -> None:
    for pool in _POOLS.values():
        pool.close()
