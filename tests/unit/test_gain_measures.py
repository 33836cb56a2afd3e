"""gain_contrast and matched_gain_retention, by hand on cells of a few problems."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from rlvr.experiments import spec
from rlvr.experiments.claims import judge
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.rejudge import PublishedCells
from rlvr.experiments.runner import protocol_name
from rlvr.experiments.verdict import bootstrap_ci


def cell(correct: list[int], n: int, ids: list[str] | None = None) -> dict:
    return {"ids": ids or [f"p{i}" for i in range(len(correct))], "n": n, "correct": correct}


def lookup(cells: dict):
    """A ``get`` over {(eval, model, seed, milestone): stats}; a missing cell raises FileNotFoundError."""
    def get(ev, model, seed, milestone=""):
        if (ev, model, seed, milestone) not in cells:
            raise FileNotFoundError(f"{ev} {model} {seed} {milestone}")
        return cells[(ev, model, seed, milestone)]

    return get


def test_gain_contrast_by_hand():
    """pass@1 = c/n per problem. Seed 0: big gains [1, 0, 0] over base_big, small [0, .5, 0] over base:
    per problem [1, -.5, 0], mean 1/6."""
    cells = {("e", "base_big", None, ""): cell([0, 1, 0], 2), ("e", "base", None, ""): cell([1, 1, 1], 2),
             ("e", "rl_big", 0, ""): cell([2, 1, 0], 2), ("e", "rl", 0, ""): cell([1, 2, 1], 2),
             ("e", "rl_big", 1, ""): cell([0, 1, 0], 2), ("e", "rl", 1, ""): cell([1, 1, 1], 2)}
    args = {"eval": "e", "model": "rl_big", "reference": "base_big", "against": "rl", "control": "base"}
    est, det = MEASURES["gain_contrast"].run(lookup(cells), args, [0, 1], [0, 1])
    assert est[0].value == pytest.approx(1 / 6)
    assert (est[0].lo, est[0].hi) == pytest.approx(bootstrap_ci(np.array([1.0, -0.5, 0.0])))
    assert est[1].value == pytest.approx(0.0) and est[1].lo == est[1].hi == 0.0  # no gain on either side
    assert det["s0"] == {"gain_model": pytest.approx(1 / 3), "gain_against": pytest.approx(1 / 6)}
    assert MEASURES["gain_contrast"].detail(det, MEASURES["gain_contrast"].typed(args)) == \
        "gain in pass@1 of rl_big over base_big against rl over base: s0 +0.333 vs +0.167, s1 +0.000 vs +0.000"


def matched_cells() -> dict:
    """base's pass@1 on `track` 0.25 -> the level with gain 0.25 is 0.5. Seed 0: rl reaches it at step 2
    (0.375, 0.625), sft at step 1 (0.75). Seed 1: rl never (0.125 everywhere; read at its final model)."""
    c = {("track", "base", None, ""): cell([0, 0, 1, 1], 2)}
    track = {("rl", 0): ([0, 1, 1, 1], [1, 1, 2, 1], [2, 2, 2, 2]), ("sft", 0): ([2, 2, 1, 1], [2, 2, 2, 2], [2] * 4),
             ("rl", 1): ([0, 0, 0, 1],) * 3, ("sft", 1): ([2, 2, 1, 1], [2, 2, 2, 2], [2] * 4)}
    for (model, seed), series in track.items():
        for name, correct in zip(["step_000001", "step_000002", ""], series):
            c[("track", model, seed, name)] = cell(correct, 2)
    keep = {("rl", 0, "step_000002"): [1, 1, 0], ("sft", 0, "step_000001"): [0, 1, 0],
            ("rl", 1, ""): [1, 1, 0], ("sft", 1, "step_000001"): [0, 0, 0]}
    for (model, seed, name), correct in keep.items():
        c[("keep", model, seed, name)] = cell(correct, 1, ["s0", "s1", "s2"])
    for model, seed in [("rl", 0), ("sft", 0), ("sft", 1)]:  # the final models' retention (read only when unmatched)
        c.setdefault(("keep", model, seed, ""), cell([1, 1, 1], 1, ["s0", "s1", "s2"]))
    return c


ARGS = {"eval": "track", "retain": "keep", "model": "rl", "against": "sft", "reference": "base", "gain": 0.25,
        "steps": [1, 2]}


def test_matched_gain_retention_reads_each_pipeline_at_its_first_checkpoint_reaching_the_level():
    measure = MEASURES["matched_gain_retention"]
    est, det = measure.run(lookup(matched_cells()), ARGS, [0, 1], [0, 1])
    assert det["level"] == pytest.approx(0.5) and det["start"] == pytest.approx(0.25)
    assert det["s0"] == {"model": {"step": 2, "pass1": pytest.approx(0.625), "reached": True},
                         "against": {"step": 1, "pass1": pytest.approx(0.75), "reached": True}}
    assert est[0].value == pytest.approx(1 / 3)  # rl@2 [1, 1, 0] - sft@1 [0, 1, 0]
    assert (est[0].lo, est[0].hi) == pytest.approx(bootstrap_ci(np.array([1.0, 0.0, 0.0])))
    assert det["s1"]["model"] == {"step": "final", "pass1": pytest.approx(0.125), "reached": False}
    assert est[1].value == pytest.approx(2 / 3)  # rl's final model [1, 1, 0] - sft@1 [0, 0, 0]
    assert measure.detail(det, measure.typed(ARGS)) == (
        "level pass@1 0.500 (base 0.250 + 0.25); s0: rl at step 2 (pass@1 0.625), sft at step 1 (pass@1 0.750), "
        "s1: rl at step final (pass@1 0.125, never reached), sft at step 1 (pass@1 0.750)")
    why = measure.why(ARGS, est, det)
    assert why == "pass@1 never reaches the matched level 0.500 (base 0.250 + 0.25) for rl s1"
    both = {k: v for k, v in det.items() if k != "s1"}
    assert measure.why(ARGS, est[:1], both) == ""
    # against_steps: sft read at its own kept checkpoints (step 2 only here), rl at steps 1 and 2
    cells = matched_cells()
    cells[("keep", "sft", 0, "step_000002")] = cell([0, 0, 0], 1, ["s0", "s1", "s2"])
    est, det = measure.run(lookup(cells), {**ARGS, "against_steps": [2]}, [0], [0])
    assert det["s0"]["against"] == {"step": 2, "pass1": pytest.approx(1.0), "reached": True}
    assert det["s0"]["model"]["step"] == 2 and est[0].value == pytest.approx(2 / 3)


def test_matched_gain_retention_claim_is_not_identifiable_or_not_measured():
    claim = spec.ClaimSpec(id="c", claim="c", paper="p", measure="matched_gain_retention", args=ARGS,
                           expect="positive")
    row = judge(claim, lookup(matched_cells()), [0, 1], [0, 1])
    assert row["verdict"] == "not identifiable here" and "rl s1" in row["why"]
    cells = matched_cells()
    del cells[("track", "sft", 1, "step_000001")]  # a kept checkpoint's cell not run yet
    assert judge(claim, lookup(cells), [0, 1], [0, 1])["verdict"] == "not measured"


def test_published_cells_read_a_kept_checkpoint(tmp_path):
    exp = spec.parse({"name": "x", "title": "t", "models": {"base": {"kind": "base"},
                                                            "rl": {"kind": "rl", "seeded": True, "milestones": 2}},
                      "evaluations": {"e": {"temperature": 1.0, "n": 2, "problems": 3, "models": ["base", "rl"],
                                            "milestones": True}},
                      "claims": [{"id": "c", "claim": "c", "paper": "p", "measure": "passk_diff",
                                  "args": {"eval": "e", "model": "rl", "against": "base", "k": 1},
                                  "expect": "positive"}]}, "x")
    folder = tmp_path / protocol_name(exp.evaluations["e"])
    folder.mkdir()
    for name, correct in [("rl-s0", [2, 2, 2]), ("rl-s0@step_000001", [0, 1, 0])]:
        (folder / f"{name}.json.gz").write_bytes(gzip.compress(json.dumps({"stats": cell(correct, 2)}).encode()))
    cells = PublishedCells(exp, tmp_path)
    assert cells.get("e", "rl", 0)["correct"] == [2, 2, 2]
    assert cells.get("e", "rl", 0, milestone="step_000001")["correct"] == [0, 1, 0]
    with pytest.raises(FileNotFoundError):
        cells.get("e", "rl", 0, milestone="step_000002")
