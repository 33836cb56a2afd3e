"""A model directory's content fingerprint: which weights (and tokenizer and config) it holds.

Caches of what a model produced (an evaluation's sample chunks) are keyed by this, never by the
directory's path: a checkpoint overwritten in place is another model, a copied one is the same.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

MODEL_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".json", ".model", ".txt", ".jinja", ".tiktoken", ".py"})
"""Suffixes of the files that can decide a model's outputs: weights (rlvr's and HF's), model and
generation configs, tokenizer files, chat templates, remote code."""
NOT_MODEL = frozenset({"optimizer.pt", "state.json", "manifest.json", "scheduler.pt", "trainer_state.json",
                       "training_args.bin", "rng_state.pth", "eval.json"})
"""Files beside the model that do not change what it samples: the optimiser and loop state of a
checkpoint, an evaluation's own output (``rlvr eval --out`` may point into the checkpoint)."""


def model_fingerprint(directory: str | Path) -> str:
    """SHA-256 (hex) over the files directly in ``directory`` that decide the model's outputs
    (:data:`MODEL_SUFFIXES`, less :data:`NOT_MODEL` and hidden files), each as its name and bytes,
    in sorted order. Reads every byte: about a second per GB of weights."""
    files = sorted(p for p in Path(directory).iterdir() if p.is_file() and p.suffix in MODEL_SUFFIXES
                   and p.name not in NOT_MODEL and not p.name.startswith("."))
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0")
        with p.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()
