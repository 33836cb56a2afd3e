"""Saving, loading and placing policies (model + tokenizer): by directory, on a device.

A tiny-model directory holds ``model.safetensors``, ``model_config.json`` and
``tokenizer.json``; a Hugging Face directory holds ``config.json`` (loaded by
:mod:`rlvr.model.hf`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch

from rlvr.config import ModelConfig
from rlvr.errors import UserError
from rlvr.model.hf import load_hf_policy, load_hf_vocabulary
from rlvr.model.precision import apply_compute, resolve_model
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.paths import replace_dir, temp_dir_beside


def save_policy(model, tokenizer, directory: str | Path) -> None:
    """Write model + tokenizer atomically: into a temporary sibling, then rename."""
    d = Path(directory)
    tmp = temp_dir_beside(d)
    try:
        if hasattr(model, "save"):
            model.save(tmp)
        else:  # HF adapter
            model.save_pretrained(tmp)
        tokenizer.save(tmp / "tokenizer.json") if hasattr(tokenizer, "chars") else tokenizer.save_pretrained(tmp)
        replace_dir(tmp, d)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def looks_like_hf_name(name: str) -> bool:
    """True for ``tiny-hf:<arch>`` and hub names like ``Qwen/Qwen2.5-0.5B`` (one slash, no path prefix)."""
    if name.startswith("tiny-hf:"):
        return True
    return name.count("/") == 1 and not name.startswith(("/", ".", "~")) and all(name.split("/"))


def load_policy(directory: str | Path, device: str | None = None):
    """-> (model, tokenizer) from an rlvr checkpoint or HF model directory; the model is moved to
    ``device`` (a ``train.device`` value, see :func:`resolve_device`) when given. A checkpoint saved
    with ``dtype: auto`` (or an HF model without rlvr's sidecar) computes in what
    :func:`rlvr.model.precision.resolve_dtype` picks for that device; an explicit dtype is kept."""
    model, tok, dev = _load_on(directory, device)
    resolve_model(model, dev)
    return model, tok


def load_policy_as(directory: str | Path, cfg: ModelConfig, device: str | None = None):
    """:func:`load_policy`, computing as a run's model config ``cfg`` says (its ``dtype`` and
    ``fp32_logits``), not as the checkpoint was saved. A ``cfg.dtype`` of ``auto`` is resolved here;
    the checkpoint's own ``auto`` is never measured (it would be overridden)."""
    model, tok, dev = _load_on(directory, device)
    apply_compute(model, cfg)
    resolve_model(model, dev)
    return model, tok


def _load_on(directory: str | Path, device: str | None):
    """-> (model, tokenizer, device): the policy loaded and moved to ``device`` (default: the CPU)."""
    dev = resolve_device(device) if device is not None else torch.device("cpu")
    model, tok = _load(directory)
    return model.to(dev), tok, dev


def _load(directory: str | Path):
    d = Path(directory)
    if not d.exists() and looks_like_hf_name(str(directory)):  # hub name or tiny-hf:<arch>
        return load_hf_policy(str(directory))
    if not d.exists():
        raise UserError(f"{d}: checkpoint not found; pass a directory written by `rlvr pretrain`/`rlvr train`")
    if (d / "model_config.json").exists():
        try:
            return TinyGPT.load(d), CharTokenizer.load(d / "tokenizer.json")
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            raise UserError(f"{d}: unreadable checkpoint ({e}); use an earlier checkpoint") from None
    if (d / "config.json").exists():
        return load_hf_policy(str(d))
    raise UserError(f"{d}: no model_config.json or config.json inside; is this a checkpoint directory?")


def saved_vocabulary(directory: str | Path) -> tuple[object, int]:
    """-> (tokenizer, V) of a checkpoint or HF model, read from its files without loading the weights:
    its tokenizer and how many logits its output layer gives (the checks made before a run starts)."""
    d = Path(directory)
    if not d.exists() and looks_like_hf_name(str(directory)):  # hub name or tiny-hf:<arch>
        return load_hf_vocabulary(str(directory))
    if (d / "model_config.json").exists():
        try:
            width = json.loads((d / "model_config.json").read_text())["vocab_size"]
            return CharTokenizer.load(d / "tokenizer.json"), int(width)
        except (OSError, ValueError, KeyError) as e:
            raise UserError(f"{d}: unreadable checkpoint ({e}); use an earlier checkpoint") from None
    if (d / "config.json").exists():
        return load_hf_vocabulary(str(d))
    raise UserError(f"{d}: no model_config.json or config.json inside; is this a checkpoint directory?")


def model_device(model) -> torch.device:
    """The device of the policy's parameters (CPU for a model without parameters)."""
    p = next(iter(model.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


def resolve_device(name: str) -> torch.device:
    """``train.device``: auto (the first CUDA GPU if there is one, else the CPU) | cpu | cuda[:N]."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise UserError(f"train.device: {name!r} is not a device; use auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"train.device={name}: no CUDA GPU is visible to torch (torch {torch.__version__}); "
                        "use train.device=cpu, or install a CUDA build of torch")
    return dev


def weights_digest(checkpoint: str | Path) -> str:
    """The first 12 hex digits of the SHA-256 of a checkpoint's ``model.safetensors`` ("" when it has
    none): which weights a model started from, since a base pretrained on another machine (another
    CPU's rounding) is not bit-identical though its key is the same."""
    f = Path(checkpoint) / "model.safetensors"
    if not f.exists():
        return ""
    h = hashlib.sha256()
    with f.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]
