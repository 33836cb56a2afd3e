"""A ``kind: weights`` evaluation cell: where one model's training moved the weights, and how far its
policy moved, at each of its kept checkpoints and at the end (docs/methods/weight_updates.md).

Per checkpoint (``OUT/ckpt_<name>.json``, so a killed cell resumes at the first missing one):

- ``records``: one per floating tensor (:func:`rlvr.analysis.update_records.compare_models`,
  k = the evaluation's ``k``): bf16 and fp32 change counts, spectral drift, principal angles,
  principal energy share and its random baseline;
- ``update_rel_norm``: ||dW||_F / ||W0||_F over the whole model;
- ``kl`` / ``kl_per_problem``: per-token KL(model || base) on the first ``problems`` held-out
  prompts, exact over the vocabulary at each position of ``n`` of the model's own samples per
  prompt (temperature and top-p of the evaluation), averaged per problem, then over problems;
- ``masks``: {tensor: base64 of np.packbits of the flattened bf16 update mask} and ``strata``:
  {tensor: the mask counted by the binary exponent of |W0|} (for the mask-overlap measure and its
  |W0|-stratified chance model; at every checkpoint, so that a control run's checkpoint matched by
  update norm has its mask too).

``stats.json`` = {"kind": "weights", "checkpoints": [... in step order, the final one last]}.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import torch

from rlvr.analysis.update_records import compare_models, mask_strata, update_rel_norm
from rlvr.config import RunConfig
from rlvr.eval.generate import mean_kl_under, samples_for
from rlvr.experiments.cells import finish_cell, open_cell
from rlvr.model.io import load_policy
from rlvr.paths import atomic_write


def step_of(name: str) -> int:
    """``step_000080`` -> 80; anything else -> -1 (the final checkpoint sorts last)."""
    tail = name.rsplit("_", 1)[-1]
    return int(tail) if name.startswith("step_") and tail.isdigit() else -1


def policy_kl(model_dir: str, base_dir: str, cfg: RunConfig, task, n_problems: int, n: int, temperature: float,
              top_p: float, seed: int) -> list[float]:
    """(P,) mean per-token KL(model || base) of each held-out problem's n samples (see module doc)."""
    problems = task.problems("heldout", n_problems)
    sampling = dataclasses.replace(cfg.sampling, temperature=temperature, top_p=top_p, top_k=0)
    model, tok = load_policy(model_dir, device="cpu")
    base, _ = load_policy(base_dir, device="cpu")
    with torch.no_grad():
        rows = samples_for(model, tok, task, problems, n, sampling, seed)
    kl = mean_kl_under(model, base, tok, [r["prompt"] for r in rows], [r["completion"] for r in rows])
    return [sum(kl[i * n : (i + 1) * n]) / n for i in range(len(problems))]


def checkpoint_stats(path: str, name: str, base_dir: str, cfg: RunConfig, task, ev, seed: int, final: bool) -> dict:
    """The statistics of one checkpoint (module docstring)."""
    records, masks = compare_models(base_dir, path, ev.directions)
    kl = policy_kl(path, base_dir, cfg, task, ev.problems, ev.n, ev.temperature, ev.top_p, seed)
    return {"name": name, "step": step_of(name), "path": str(path), "update_rel_norm": update_rel_norm(records),
            "kl": sum(kl) / len(kl), "kl_per_problem": kl, "records": records,
            "masks": {k: base64.b64encode(v.tobytes()).decode() for k, v in masks.items()},
            "strata": mask_strata(base_dir, masks)}


def evaluate_weights(final: str, milestones: list[str], base_dir: str, cfg: RunConfig, task, ev, seed: int,
                     out: Path, key: str = "") -> dict:
    """Every checkpoint's statistics (milestones, then ``final``) -> ``out/stats.json``. A folder
    holding another ``key``'s results is cleared first; finished checkpoints are reused."""
    if (cached := open_cell(out, key)) is not None:
        return cached
    ckpts = sorted(milestones, key=lambda p: step_of(Path(p).name)) + [final]
    rows = []
    for i, path in enumerate(ckpts):
        is_final = i == len(ckpts) - 1
        name = "final" if is_final else Path(path).name
        f = out / f"ckpt_{name}.json"
        if f.exists():
            rows.append(json.loads(f.read_text()))
            continue
        row = checkpoint_stats(path, name, base_dir, cfg, task, ev, seed, is_final)
        atomic_write(f, json.dumps(row))
        rows.append(row)
    return finish_cell(out, {"kind": "weights", "k": ev.directions, "checkpoints": rows})
