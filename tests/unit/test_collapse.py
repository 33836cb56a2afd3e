"""Model-collapse step on synthetic curves with known answers, and the `rlvr collapse` command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlvr.analysis.collapse import CollapseResult, analyse_run, collapse_step, rank_runs, trailing_mean
from rlvr.cli import main

RISE_FALL = [0.6, 0.7, 0.8, 0.5, 0.2, 0.005, 0.0, 0.0, 0.0]  # steps 1..9


def test_trailing_mean():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    out = trailing_mean(x, 2)
    assert np.isnan(out[0]) and np.allclose(out[1:], [1.5, 2.5, 3.5])
    assert np.allclose(trailing_mean(x, 3, partial=True), [1.0, 1.5, 2.0, 3.0])
    with pytest.raises(ValueError):
        trailing_mean(x, 0)


def test_collapse_step_rise_then_fall():
    steps = list(range(1, 10))
    # window 3: step 7 averages (0.2, 0.005, 0) = 0.068; step 8 averages (0.005, 0, 0) = 0.0017
    assert collapse_step(steps, RISE_FALL, window=3, threshold=0.01) == 8
    assert collapse_step(steps, RISE_FALL, window=1, threshold=0.01) == 6  # the unsmoothed rule
    assert collapse_step(steps, RISE_FALL, window=3, threshold=0.1) == 7


def test_no_collapse_monotone_flat_and_short():
    steps = list(range(1, 11))
    assert collapse_step(steps, np.linspace(0.3, 0.9, 10)) is None
    assert collapse_step(steps, [0.5] * 10) is None
    assert collapse_step([1, 2], [0.0, 0.0], window=3) is None  # no full window yet
    assert collapse_step(steps, [0.0] * 10, window=3) == 3  # flat at zero: first full window


def test_noisy_curves():
    # single dips do not trigger a window-3 collapse, but do trigger the raw rule
    spiky = [0.5, 0.0, 0.5, 0.0, 0.5, 0.0]
    assert collapse_step(range(1, 7), spiky, window=3) is None
    assert collapse_step(range(1, 7), spiky, window=1) == 2
    # a tail oscillating around the threshold: (0.02, 0, 0.02) = 0.0133 no; (0, 0.02, 0) = 0.0067 yes
    tail = [0.4, 0.3, 0.02, 0.0, 0.02, 0.0, 0.0]
    assert collapse_step(range(1, 8), tail, window=3) == 6
    # seeded noise that cannot move the answer: >= 0.25 until step 19, <= 0.004 from step 20
    rng = np.random.default_rng(0)
    ra = np.concatenate([0.3 + rng.uniform(-0.05, 0.05, 19), rng.uniform(0.0, 0.004, 21)])
    assert collapse_step(range(1, 41), ra, window=3) == 22
    assert collapse_step(range(1, 41), ra, window=1) == 20


def test_collapse_step_reports_logged_step_numbers():
    assert collapse_step([10, 20, 30, 40], [0.5, 0.0, 0.0, 0.0], window=2) == 30
    with pytest.raises(ValueError):
        collapse_step([1, 2], [0.1])


def _metrics_rows(ra: list[float], acc_every: int = 2, acc=None) -> list[dict]:
    rows = []
    for i, v in enumerate(ra, start=1):
        row = {"step": i, "reward": 1.0 - v, "reward_accuracy": v, "gt_accuracy": 0.1}
        if acc is not None and i % acc_every == 0:
            row["heldout_pass_rate"] = acc[i // acc_every - 1]
        rows.append(row)
    return rows


def test_analyse_run_rise_and_fall():
    acc = [0.30, 0.45, 0.50, 0.35]  # held-out at steps 2, 4, 6, 8
    r = analyse_run(_metrics_rows(RISE_FALL, 2, acc), window=3, threshold=0.01)
    assert r.collapse_step == 8 and r.collapsed
    assert (r.peak_step, r.peak_accuracy) == (6, 0.50)
    assert r.final_accuracy == 0.35 and r.final_step == 9
    assert r.proxy_at_collapse == pytest.approx(1.0)
    assert r.accuracy_key == "heldout_pass_rate"
    assert r.rise_then_fall is True  # 0.50 - 0.30 and 0.50 - 0.35 both >= margin 0.05
    assert not analyse_run(_metrics_rows(RISE_FALL, 2, acc), margin=0.2).rise_then_fall
    r2 = analyse_run(_metrics_rows(RISE_FALL, 1, [0.3, 0.4, 0.5, 0.6, 0.6, 0.5, 0.4, 0.3, 0.2]))
    assert r2.rise_then_fall is True and (r2.peak_step, r2.peak_accuracy) == (4, 0.6)
    rng = np.random.default_rng(1)
    noisy_flat = list(0.5 + rng.uniform(-0.01, 0.01, 9))  # noise below the margin is no rise and fall
    assert analyse_run(_metrics_rows(RISE_FALL, 1, noisy_flat)).rise_then_fall is False


def test_analyse_run_monotone_fallbacks_duplicates_and_order():
    rows = [{"step": s, "reward_accuracy": 0.9, "accuracy": 0.1 * s} for s in (3, 1, 2, 4)]
    rows.append({"step": 2, "reward_accuracy": 0.9, "accuracy": 0.95})  # step 2 logged again (resume)
    r = analyse_run(rows)
    assert not r.collapsed and r.collapse_step is None and r.proxy_at_collapse is None
    assert (r.peak_step, r.peak_accuracy, r.final_accuracy, r.final_step) == (2, 0.95, 0.4, 4)
    assert r.accuracy_key == "accuracy"
    gt = analyse_run(_metrics_rows([0.5, 0.5, 0.5]))
    assert gt.accuracy_key == "gt_accuracy" and gt.peak_accuracy == 0.1
    bare = analyse_run([{"step": 1, "reward_accuracy": 0.0}, {"step": 2, "reward_accuracy": 0.0}], window=1)
    assert bare.collapse_step == 1 and bare.peak_accuracy is None and bare.accuracy_key is None
    with pytest.raises(ValueError, match="reward_accuracy"):
        analyse_run([{"step": 1, "accuracy": 0.5}])


def _result(cstep, final_step=200, peak=0.5) -> CollapseResult:
    return CollapseResult(cstep, cstep is not None, 1, peak, peak, final_step, None, False, "accuracy")


def test_rank_runs_later_collapse_first_never_collapsed_on_top():
    results = {"a": _result(50), "b": _result(100), "c": _result(None), "d": _result(None, peak=0.7),
               "e": _result(100, peak=0.6), "f": _result(None, final_step=100)}
    assert rank_runs(results) == ["d", "c", "f", "e", "b", "a"]


# ------------------------------------------------------------------ command


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def runs(tmp_path):
    run_dir = tmp_path / "sc_small"
    run_dir.mkdir()
    _write_jsonl(run_dir / "metrics.jsonl", _metrics_rows(RISE_FALL, 2, [0.30, 0.45, 0.50, 0.35]))
    late = [{"step": s, "reward_accuracy": 0.8 if s < 15 else 0.0, "accuracy": 0.2} for s in range(1, 21)]
    never = [{"step": s, "reward_accuracy": 0.7, "accuracy": 0.3 + 0.01 * s} for s in range(1, 21)]
    return run_dir, _write_jsonl(tmp_path / "late.jsonl", late), _write_jsonl(tmp_path / "never.jsonl", never)


def test_command_table_ranking_and_json(runs, tmp_path, capsys):
    run_dir, late, never = runs
    out_json = tmp_path / "out.json"
    assert main(["collapse", str(run_dir), str(late), str(never), "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    assert "no collapse within 20 steps" in text and "collapses at step 8" in text
    assert text.index("1. never") < text.index("2. late") < text.index("3. sc_small")
    data = json.loads(out_json.read_text())
    by_name = {r["name"]: r for r in data["runs"]}
    assert [r["name"] for r in data["runs"]] == ["sc_small", "late", "never"]
    required = {"name", "collapse_step", "peak_step", "peak_accuracy", "final_accuracy", "collapsed"}
    assert all(required <= r.keys() for r in data["runs"])
    assert by_name["late"]["collapse_step"] == 17 and by_name["late"]["collapsed"] is True
    assert by_name["never"]["collapse_step"] is None and by_name["never"]["collapsed"] is False
    assert by_name["never"]["peak_step"] == 20 and by_name["never"]["final_accuracy"] == pytest.approx(0.5)
    assert by_name["sc_small"]["peak_accuracy"] == 0.5 and by_name["sc_small"]["rank"] == 3
    assert data["ranking"] == ["never", "late", "sc_small"]


def test_command_window_changes_answer(runs, tmp_path):
    _, late, _ = runs
    out_json = tmp_path / "w1.json"
    assert main(["collapse", str(late), "--window", "1", "--json", str(out_json)]) == 0
    assert json.loads(out_json.read_text())["runs"][0]["collapse_step"] == 15


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "does not exist"),
        ("dir", "no metrics.jsonl"),
        ("", "is empty"),
        ('{"step": 1, "accuracy": 0.5}\n', "no reward_accuracy column"),
        ('{"step": 1, "reward_accuracy": "high"}\n', "non-numeric reward_accuracy"),
        ('{"step": 1, "reward_accuracy": 0.5}\n{oops\n', ":2 is not valid JSON"),
        ('[1, 2]\n', "not a JSON object"),
        ('{"reward_accuracy": 0.5}\n', "integer 'step'"),
    ],
)
def test_command_bad_inputs(tmp_path, capsys, content, message):
    path = tmp_path / "run"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    assert main(["collapse", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_command_bad_window(runs, capsys):
    _, late, _ = runs
    assert main(["collapse", str(late), "--window", "0"]) == 2
    assert "--window" in capsys.readouterr().err
    assert main(["collapse", str(late), str(late)]) == 2


def test_cli_output_into_a_closed_pipe_stops_quietly(tmp_path):
    import subprocess
    import sys

    runs = []
    for i in range(40):  # many runs: the table is longer than the pipe takes before it closes
        f = tmp_path / f"run{i}.jsonl"
        f.write_text("\n".join(f'{{"step": {s}, "reward_accuracy": {max(0.0, 0.9 - 0.1 * s)}, "accuracy": 0.1}}'
                               for s in range(1, 12)))
        runs.append(str(f))
    cmd = f"{sys.executable} -m rlvr.cli collapse {' '.join(runs)} | head -c 10"
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr
