"""The "## Models" section of a results page: what trained each finished model, from its folder."""

from __future__ import annotations

import json

from rlvr.experiments.page import eval_line, model_lines, verdict_table
from rlvr.experiments.spec import EvalSpec

ZEN2 = {"cpu": "AMD EPYC", "cpu_family": 23, "cpu_model": 49, "flags": {"avx2": True, "avx512f": False},
        "logical_cores": 2, "torch_threads": 1, "torch": "2.13.0+cpu", "python": "3.11.7", "precision": "float32"}


def _model(out, name, build_s, machine=None, steps_s=None, base_weights=None):
    d = out / "models" / name
    (d / "run").mkdir(parents=True)
    (d / "done.json").write_text(json.dumps({"path": "p", "wall_s": build_s,
                                             **({"base_weights": base_weights} if base_weights else {})}))
    if machine is not None:
        (d / "run" / "machine.json").write_text(json.dumps(machine))
    if steps_s is not None:
        (d / "run" / "train_summary.json").write_text(json.dumps({"steps": 10, "wall_s": steps_s}))


def test_each_finished_model_has_its_recorded_minutes_and_machine(tmp_path):
    assert model_lines(tmp_path) == []
    _model(tmp_path, "rl-s0", 1500, ZEN2, 1200, "0123456789ab")
    _model(tmp_path, "rl-s1", 90, {**ZEN2, "cpu_model": 17, "cpu_family": 25, "flags": {"avx512f": True}}, 60)
    _model(tmp_path, "sft-s0", 30)  # not an RL run: no summary, no machine record
    (tmp_path / "models" / "rl-s2" / "run").mkdir(parents=True)  # unfinished: not listed
    lines = model_lines(tmp_path)
    rows = [ln for ln in lines if ln.startswith("| ") and "model |" not in ln]
    assert rows == ["| rl-s0 | 25.0 | 20.0 | M1 | 0123456789ab |", "| rl-s1 | 1.5 | 1.0 | M2 | - |",
                    "| sft-s0 | 0.5 | - | M3 | - |"]
    legend = [ln for ln in lines if ln.startswith("- M")]
    assert legend[0].startswith("- M1: AMD EPYC (family 23 model 49; avx2), 2 cores, 1 torch threads")
    assert "family 25 model 17; avx512f" in legend[1] and legend[2] == "- M3: not recorded"


def test_protocol_line_says_what_each_evaluation_kind_measured():
    """A dynamics evaluation samples nothing (its problems / n are unused): the page must not claim
    "1 held-out problems x n = 1 samples" for it."""
    dyn = eval_line(EvalSpec(name="c", temperature=1.0, n=1, problems=1, models=("scalerl",), kind="dynamics"))
    assert "nothing sampled" in dyn and "held-out problems" not in dyn and dyn.endswith("models scalerl")
    smp = eval_line(EvalSpec(name="e", temperature=0.6, top_p=0.95, n=16, problems=200, models=("base", "rl")))
    assert smp == "evaluation `e`: 200 held-out problems x n = 16 samples at T = 0.6, top-p 0.95; models base, rl"
    w = eval_line(EvalSpec(name="w", temperature=1.0, n=2, problems=3, models=("x",), kind="weights"))
    assert "weight-space" in w and "3 held-out problems x n = 2 samples" in w


def test_the_reason_of_a_status_is_shown_beside_it():
    row = {"claim": "c", "quantity": "q", "expect": "positive", "paper": "p", "verdict": "inconclusive",
           "estimates": [{"label": "shared", "value": 0.2, "lo": 0.1, "hi": 0.3}],
           "spread": {"seeds": 1, "mean": 0.2, "min": 0.2, "max": 0.2}}
    plain = verdict_table([row])[-1]
    assert plain.endswith("| **inconclusive** |")
    shown = verdict_table([{**row, "verdict": "not identifiable here",
                             "why": "not every fit has bent (a 0 of 3, b 3 of 3)"}])[-1]
    assert shown.endswith("| **not identifiable here**<br>*not every fit has bent (a 0 of 3, b 3 of 3)* |")
