"""One record per tensor of a base -> tuned pair, at two storage precisions at once, for the
declared ``weights`` experiment (docs/methods/weight_updates.md gives the measures).

A record holds the tensor's name, kind (:func:`rlvr.analysis.weight_io.tensor_kind`), part
(:func:`tensor_part`: attention q/k/v/o are told apart), ``numel``, ``changed_bf16`` /
``changed_fp32`` (entries that differ after rounding to that precision), ``dw_sq`` / ``w0_sq``
(squared Frobenius norms of dW and W0) and, for 2-D matrices, the fields of
:func:`rlvr.analysis.matrix_compare.compare_matrix` computed with the bf16 mask.
"""

from __future__ import annotations

import re

import numpy as np
import torch

from rlvr.analysis import updates
from rlvr.analysis.matrix_compare import compare_matrix
from rlvr.analysis.weight_io import WeightSource, iter_matched, tensor_kind

_PART = re.compile(r"^(?:w|c_)?(q|k|v|o)(?:_proj)?$")


def tensor_part(name: str) -> str:
    """The kind, with attention split into ``attention_q`` / ``_k`` / ``_v`` / ``_o`` when the name says
    which (``blocks.0.attn.wq.weight`` -> attention_q; a fused ``qkv`` stays ``attention``)."""
    kind = tensor_kind(name)
    if kind != "attention":
        return kind
    for part in reversed(name.lower().split(".")):
        m = _PART.match(part)
        if m:
            return f"attention_{m.group(1)}"
    return kind


def tensor_record(name: str, w0: torch.Tensor, w1: torch.Tensor, k: int | float,
                  method: str = "gram", spec0: updates.Spectrum | None = None) -> tuple[dict, torch.Tensor]:
    """(record, bf16 update mask (same shape as w0)) of one tensor; see the module docstring."""
    mask = updates.update_mask(w0, w1, "bf16")
    w0f, w1f = w0.double(), w1.double()
    rec = {"name": name, "kind": tensor_kind(name), "part": tensor_part(name), "numel": w0.numel(),
           "changed_bf16": int(mask.sum()), "changed_fp32": int(updates.update_mask(w0, w1, "fp32").sum()),
           "dw_sq": float(((w1f - w0f) ** 2).sum()), "w0_sq": float((w0f**2).sum())}
    rec["changed"] = rec["changed_bf16"]
    if w0.ndim == 2 and min(w0.shape) > 1:
        kk = updates.resolve_k(k, *w0.shape)
        rec.update(compare_matrix(w0, w1, kk, "bf16", spec0=spec0, method=method))
    return rec, mask


def compare_models(base: str, tuned: str, k: int | float, method: str = "gram") -> tuple[list[dict], dict]:
    """Records of every floating tensor of ``tuned`` against ``base`` (same architecture), and
    {name: packed bf16 mask (uint8 bytes of np.packbits over the flattened mask)}."""
    records, masks = [], {}
    with WeightSource(base, "base") as b, WeightSource(tuned, "tuned") as t:
        for name, w0, (w1,) in iter_matched(b, [t]):
            if not (w0.is_floating_point() and w1.is_floating_point()):
                continue
            rec, mask = tensor_record(name, w0, w1, k, method)
            records.append(rec)
            masks[name] = np.packbits(mask.reshape(-1).numpy())
    return records, masks


def update_rel_norm(records: list[dict]) -> float:
    """||dW||_F / ||W0||_F over all the records' tensors together (the whole model's update size)."""
    w0 = sum(r["w0_sq"] for r in records)
    return float(np.sqrt(sum(r["dw_sq"] for r in records) / w0)) if w0 > 0 else float("nan")


def exponent_strata(w0: torch.Tensor, mask: np.ndarray) -> dict[str, list[int]]:
    """The bf16 mask of one tensor counted by the binary exponent of its base entries: entries with
    the same exponent of |W0| share one bf16 step, so an update of a given size changes them alike.
    -> {"exponent": [e...], "size": [entries with that exponent], "changed": [changed among them]}
    (zeros get their own stratum, exponent -1000). ``mask``: (numel,) bool, the flattened mask."""
    _, exp = np.frexp(w0.detach().double().reshape(-1).numpy())
    exp = np.where(w0.detach().reshape(-1).numpy() == 0, -1000, exp)
    values, index = np.unique(exp, return_inverse=True)
    return {"exponent": [int(v) for v in values], "size": np.bincount(index, minlength=values.size).tolist(),
            "changed": np.bincount(index, weights=mask.astype(np.float64), minlength=values.size).astype(int).tolist()}


def mask_strata(base: str, masks: dict[str, np.ndarray]) -> dict[str, dict[str, list[int]]]:
    """:func:`exponent_strata` of every tensor in ``masks`` ({name: packed bf16 mask}) against the base
    weights at ``base``."""
    out = {}
    with WeightSource(base, "base") as b:
        for name, packed in masks.items():
            w0 = b.get(name)
            out[name] = exponent_strata(w0, np.unpackbits(packed, count=w0.numel()).astype(bool))
    return out
