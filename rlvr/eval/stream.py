"""Sampling n completions per problem to disk, in chunk files that a killed run resumes from.

Chunk i holds the samples of about :data:`ROWS_PER_CHUNK` rows' worth of whole problems and is
sampled with its own generator (seed + i), so a resumed evaluation writes exactly the rows an
uninterrupted one would. A chunk file is written atomically (whole or absent). Within a chunk the
sampler takes as many rows at once as memory allows (:func:`rlvr.rollout.budget.rows_for`) and
prefills each problem once for all its samples.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rlvr.config import SamplingConfig
from rlvr.eval.generate import samples_for
from rlvr.eval.samples import load_samples, write_samples
from rlvr.model.fingerprint import model_fingerprint
from rlvr.model.io import load_policy
from rlvr.paths import atomic_write
from rlvr.tasks.registry import get_task

ROWS_PER_CHUNK = 8192  # samples per chunk file: a kill loses at most one chunk


def chunk_problems(n: int) -> int:
    """Problems per chunk: about :data:`ROWS_PER_CHUNK` samples, at least one problem."""
    return max(1, ROWS_PER_CHUNK // n)


def sample_chunks(load: Callable[[], tuple], task, problems: list, n: int, sampling: SamplingConfig, seed: int,
                  out: Path, on_chunk: Callable[[int, int, list[dict]], None] | None = None) -> list[Path]:
    """n samples per problem in chunk files ``out/chunk_XXXX.jsonl``; existing chunks are kept
    (resume), and the model is loaded (``load() -> (model, tok)``) only when a chunk is missing.
    ``on_chunk(done, total, rows)`` after each chunk (rows: the new chunk's, [] when it existed).
    -> the chunk paths, in problem order."""
    per = chunk_problems(n)
    out.mkdir(parents=True, exist_ok=True)
    paths, model, tok = [], None, None
    total = math.ceil(len(problems) / per)
    for i in range(total):
        path = out / f"chunk_{i:04d}.jsonl"
        paths.append(path)
        rows: list[dict] = []
        if not path.exists():
            if model is None:
                model, tok = load()
            rows = samples_for(model, tok, task, problems[i * per:(i + 1) * per], n, sampling, seed + i,
                               batch_size=None)
            write_samples(path, rows)
        if on_chunk:
            on_chunk(i + 1, total, rows)
    return paths


class ChunkProgress:
    """``on_chunk`` that prints one line per chunk to stderr: samples, tokens/s, time left."""

    def __init__(self, label: str, stream=None):
        self.label, self.t0, self.sampled, self.tokens = label, time.perf_counter(), 0, 0
        self._stream = stream

    @property
    def stream(self):
        return self._stream or sys.stderr  # looked up when printing (sys.stderr may be replaced meanwhile)

    def __call__(self, done: int, total: int, rows: list[dict]) -> None:
        if not rows:
            print(f"[{self.label}] chunk {done}/{total}: on disk (resumed)", file=self.stream, flush=True)
            self.t0 = time.perf_counter()
            return
        self.sampled += 1
        self.tokens += sum(r.get("num_tokens", 0) for r in rows)
        dt = time.perf_counter() - self.t0
        left = dt / self.sampled * (total - done)
        print(f"[{self.label}] chunk {done}/{total}: {len(rows)} samples, {self.tokens / max(dt, 1e-9):.0f} tokens/s, "
              f"{left / 60:.1f} min left", file=self.stream, flush=True)


def sample_to_file(load: Callable[[], tuple], task, problems: list, n: int, sampling: SamplingConfig, seed: int,
                   path: Path, key: dict, label: str = "eval") -> list[dict]:
    """All samples in ``path`` (samples.jsonl), through the resumable chunk folder ``path.chunks``
    (kept while sampling, removed once ``path`` is written). ``key`` (JSON) names what decides the
    samples: chunks of another key are cleared first, never mixed in. -> the rows."""
    chunks = path.with_name(path.name + ".chunks")
    key_file, key_text = chunks / "key.json", json.dumps(key, sort_keys=True)
    if chunks.exists() and (not key_file.exists() or key_file.read_text() != key_text):
        shutil.rmtree(chunks)
    chunks.mkdir(parents=True, exist_ok=True)
    atomic_write(key_file, key_text)
    paths = sample_chunks(load, task, problems, n, sampling, seed, chunks, ChunkProgress(label))
    rows = [r for p in paths for r in load_samples(p)]
    write_samples(path, rows)
    shutil.rmtree(chunks)
    return rows


def generate_samples(checkpoint: str, task: str, split: str, n: int, num_problems: int,
                     temperature: float, top_p: float, seed: int, out: str | Path | None = None) -> list[dict]:
    """Load ``checkpoint``, sample n completions for the first ``num_problems`` of ``task``/``split``.
    With ``out`` (a samples.jsonl path) the samples stream to disk in chunks as they are made, a
    killed call resumes where it stopped (only if the checkpoint still holds the same weights:
    :func:`rlvr.model.fingerprint.model_fingerprint`), and ``out`` is written at the end."""
    t = get_task(task)
    problems = t.problems(split, num_problems)
    sampling = SamplingConfig(temperature=temperature, top_p=top_p)
    if out is None:
        model, tok = load_policy(checkpoint, device="auto")
        return samples_for(model, tok, t, problems, n, sampling, seed)
    # the chunks are keyed by what the checkpoint holds, not where it is: weights overwritten in place
    # since a killed run are another model, whose samples must not be mixed with the old ones
    model = model_fingerprint(checkpoint) if Path(checkpoint).is_dir() else checkpoint
    key = {"model": model, "task": task, "split": split, "n": n, "problems": num_problems,
           "temperature": temperature, "top_p": top_p, "seed": seed}
    return sample_to_file(lambda: load_policy(checkpoint, device="auto"), t, problems, n, sampling, seed, Path(out),
                          key, label=Path(out).stem)
