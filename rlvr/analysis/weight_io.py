"""Read two or more models' safetensors tensor by tensor, matched by name.

A model path may be (resolved by :func:`resolve_weight_files`, in this order):

1. a ``.safetensors`` file, or a ``model.safetensors.index.json`` file;
2. a directory holding ``model.safetensors.index.json`` (Hugging Face shards) or ``model.safetensors``;
3. an rlvr run directory (``checkpoints/<name>/model.safetensors``) or its ``checkpoints/``
   directory: the checkpoint named ``final`` wins, then ``latest``, then the one whose name holds
   the largest step number (``step_000200`` > ``step_000100``), then the newest by modification time;
4. a directory of ``*.safetensors`` shards without an index (all of them).

Files are read with plain reads, not mapped (:mod:`rlvr.analysis.safetensors_file`), a tensor whole
(:meth:`WeightSource.get`) or a matrix a block of rows at a time (:meth:`WeightSource.matrix`), so
resident memory holds only what is in use.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import torch

from rlvr.analysis.safetensors_file import SafetensorsFile, TensorFileRows
from rlvr.errors import UserError

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
KINDS = ("attention", "mlp", "embedding", "norm", "lm_head", "other")
# Each pattern is searched in every dot-separated part of the lower-cased name.
_NORM = re.compile(r"norm|^ln(_?[a-z0-9]+)?$")
_EMBED = re.compile(r"embed|^(wte|wpe|tok_emb|pos_emb)$")
_ATTN = re.compile(r"attn|attention|^(q|k|v|o|qkv)_proj$|^(wq|wk|wv|wo|wqkv|qkv)$")
_MLP = re.compile(r"mlp|ffn|feed_forward|experts|^(up|down|gate|gate_up)_proj$|^(w[123]|fc\d*|c_fc)$")


def tensor_kind(name: str) -> str:
    """Kind of a tensor from its name: attention, mlp, embedding, norm, lm_head or other.

    Works for Llama/Qwen2 (``model.layers.0.self_attn.q_proj.weight``), GPT-2 (``h.0.attn.c_attn``,
    ``h.0.ln_1``, ``wte``), Meta Llama (``layers.0.attention.wq``, ``feed_forward.w1``) and rlvr's
    tiny model (``blocks.0.attn.wq``, ``tok_emb``). Norms are tested first (``attn_norm`` is a norm).
    """
    low = name.lower()
    parts = low.split(".")
    if "lm_head" in low or low in ("output.weight", "output.bias"):
        return "lm_head"
    for kind, pattern in (("norm", _NORM), ("embedding", _EMBED), ("attention", _ATTN), ("mlp", _MLP)):
        if any(pattern.search(p) for p in parts):
            return kind
    return "other"


def layer_index(name: str) -> int | None:
    """First integer that is a whole dot-separated part of the name (``layers.11.mlp`` -> 11),
    so that ``w1`` or ``fc2`` are not read as layer numbers; None outside the layer stack."""
    match = re.search(r"(?:^|\.)(\d+)(?:\.|$)", name)
    return int(match.group(1)) if match else None


def _step_key(path: Path) -> tuple[int, int, float]:
    name = path.name.lower()
    numbers = [int(x) for x in re.findall(r"\d+", name)]
    rank = 2 if name == "final" else 1 if name == "latest" else 0
    return rank, max(numbers, default=-1), path.stat().st_mtime


def _has_weights(path: Path) -> bool:
    return (path / INDEX).is_file() or (path / SINGLE).is_file()


def pick_checkpoint(checkpoints: Path) -> Path:
    """The checkpoint directory to analyse inside ``checkpoints/`` (rule in the module docstring)."""
    candidates = [p for p in checkpoints.iterdir() if p.is_dir() and _has_weights(p)]
    if not candidates:
        raise UserError(f"{checkpoints} has no checkpoint with {SINGLE}; pass a checkpoint or a .safetensors")
    return max(candidates, key=_step_key)


def _index_files(index: Path) -> list[Path]:
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"cannot read weight_map from {index} ({e}); pass a valid HF index file") from None
    files = [index.parent / f for f in sorted(set(weight_map.values()))]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise UserError(f"{index} lists missing shard(s) {', '.join(missing)}; download all shards")
    return files


def resolve_weight_files(path: str | Path) -> list[Path]:
    """The safetensors file(s) holding one model's weights (rule in the module docstring)."""
    p = Path(path)
    if p.is_file():
        if p.name.endswith(".index.json"):
            return _index_files(p)
        if p.suffix != ".safetensors":
            raise UserError(f"{p} is not a .safetensors file; pass a .safetensors file or a model directory")
        return [p]
    if not p.is_dir():
        raise UserError(f"{p} does not exist; pass a run dir, checkpoint dir, model dir or .safetensors file")
    if (p / INDEX).is_file():
        return _index_files(p / INDEX)
    if (p / SINGLE).is_file():
        return [p / SINGLE]
    if (p / "checkpoints").is_dir():
        return resolve_weight_files(pick_checkpoint(p / "checkpoints"))
    if any(_has_weights(c) for c in p.iterdir() if c.is_dir()):
        return resolve_weight_files(pick_checkpoint(p))
    shards = sorted(p.glob("*.safetensors"))
    if not shards:
        raise UserError(f"{p} holds no safetensors weights; pass a run, checkpoint or model dir, or a file")
    return shards


class WeightSource:
    """Lazy name -> tensor access to one model's safetensors file(s); use as a context manager."""

    def __init__(self, path: str | Path, label: str | None = None):
        self.label = label or str(path)
        self.files = resolve_weight_files(path)
        self._stack = ExitStack()
        self._where: dict[str, SafetensorsFile] = {}

    def __enter__(self) -> WeightSource:
        for f in self.files:
            try:
                handle = self._stack.enter_context(SafetensorsFile(f))
            except UserError:
                self._stack.close()
                raise
            for name in handle.names():
                self._where[name] = handle
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def names(self) -> list[str]:
        return list(self._where)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._where[name].shape(name)

    def dtype(self, name: str) -> torch.dtype:
        return self._where[name].dtype(name)

    def get(self, name: str) -> torch.Tensor:
        return self._where[name].get(name)

    def matrix(self, name: str) -> TensorFileRows:
        """A 2-D tensor read a block of rows at a time (:class:`rlvr.analysis.row_blocks.Rows`)."""
        return TensorFileRows(self._where[name], name)


def _natural_key(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def matched_names(base: WeightSource, tuned: list[WeightSource]) -> list[str]:
    """Tensor names common to all models, in natural order (``layers.2`` before ``layers.10``);
    a tensor missing from one model or with a different shape is a UserError naming it."""
    names = set(base.names())
    for other in tuned:
        for name in sorted(names ^ set(other.names()), key=_natural_key):
            has, lacks = (base, other) if name in names else (other, base)
            raise UserError(f"tensor {name!r} is in {has.label} but missing from {lacks.label}; "
                            "compare checkpoints of the same architecture")
        for name in sorted(names, key=_natural_key):
            if base.shape(name) != other.shape(name):
                raise UserError(f"tensor {name!r} has shape {list(base.shape(name))} in {base.label} but "
                                f"{list(other.shape(name))} in {other.label}; compare the same architecture")
    return sorted(names, key=_natural_key)


def iter_matched(
    base: WeightSource, tuned: list[WeightSource]
) -> Iterator[tuple[str, torch.Tensor, list[torch.Tensor]]]:
    """Yield (name, base tensor, [tuned tensors]) one name at a time, after checking all names."""
    for name in matched_names(base, tuned):
        yield name, base.get(name), [t.get(name) for t in tuned]
