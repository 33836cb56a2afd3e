"""Which base weights the finished models of an output folder were built from, and the check that
keeps one folder from mixing two pretraining runs under one key.

A base's key is its declared identity (its config), so a base pretrained again on another machine
(another CPU's rounding), or after the cache was cleared, has the key of the first one and not always
its weights. Every model records the SHA-256 of the base weights it started from (``base_weights`` in
its ``done.json``, :func:`rlvr.model.io.weights_digest`); a record restored from the
published cells (``--resume-published``) keeps that of the machine that trained it. Reading cells back
needs no weights (``--page-only`` never opens the base); training or evaluating anything more in a
folder whose models started from other weights than the local base would mix the two in one
comparison: :func:`check_same_base` stops it, naming both digests. A base's own sampling cells record
the weights they sampled (``weights`` in their ``stats.json``, since 2026-12-07) and count the same way:
a folder whose only records are the base's evaluations (an experiment's first part) is checked too. A
cell or model written before it recorded its weights is not compared (its digest is unknown).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rlvr.errors import UserError
from rlvr.experiments.archive import RECORD, read_json
from rlvr.experiments.models import model_id
from rlvr.experiments.spec import Experiment

Recorded = dict[str, dict[str, list[str]]]
"""{base model name: {weights digest: [ids of the finished models that record it]}}."""


def recorded_base_weights(exp: Experiment, out: Path, seeds_of: Callable[[str], list[int | None]],
                          base_cells: Callable[[str], list[Path]] | None = None) -> Recorded:
    """The base weights recorded by every finished model of ``out`` (``models/<id>/done.json``; a
    record that names none, written before models recorded it, is left out), by the base each
    model is declared to start from; with ``base_cells`` (a base's name -> its sampling cells'
    folders under ``out``) also the weights each base's finished cells sampled, under the cell's
    folder relative to ``out``."""
    found: Recorded = {}
    for name, spec in exp.models.items():
        if spec.kind == "base":
            for d in base_cells(name) if base_cells else []:
                weights = (read_json(d / "stats.json") or {}).get("weights")
                if weights:
                    found.setdefault(name, {}).setdefault(weights, []).append(str(d.relative_to(out)))
            continue
        for seed in seeds_of(name):
            info = read_json(out / "models" / model_id(name, seed) / "done.json") or {}
            if info.get("base_weights"):
                found.setdefault(spec.base, {}).setdefault(info["base_weights"], []).append(model_id(name, seed))
    return found


def agreed_weights(found: Recorded, base: str) -> str:
    """The weights every finished model built from ``base`` records, when they agree ("" otherwise):
    the base the cells on disk came from."""
    digests = list(found.get(base, {}))
    return digests[0] if len(digests) == 1 else ""


def check_same_base(found: Recorded, base: str, local: dict, what: str, out: Path) -> None:
    """Stop before ``what`` (a cell to train or evaluate) when a finished model of ``out`` built from
    ``base``, or a finished sampling cell of ``base`` itself, records other weights than the local
    base ``local`` (its ``build_model`` info: ``path``, ``weights``); a digest unknown on either side
    is not compared."""
    here = local.get("weights", "")
    other = {w: ids for w, ids in found.get(base, {}).items() if here and w != here}
    if not other:
        return
    weights, ids = next(iter(other.items()))
    restored = any((read_json(out / "models" / i / "done.json") or {}).get("restored")
                   or (out / i / RECORD).exists() for i in ids)
    raise UserError(
        f"{what}: the base `{base}` here ({local.get('path')}) has weights {here}, but {len(ids)} finished "
        f"record(s) in {out} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}: models started from it, or "
        f"its own evaluations sampled it) came from a "
        f"base with weights {weights}{' (restored from the published records)' if restored else ''}: the same "
        "key, another pretraining run (another machine's rounding, or a cache pretrained again). Training or "
        "evaluating more here would compare models from two bases as if from one. Continue where the base "
        f"has weights {weights}, or run the experiment afresh into a new --out (every model from this base); "
        "--page-only still writes the page from the cells on disk")
