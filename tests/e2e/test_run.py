"""The README's first command: `rlvr run` parses and a tiny configuration of it runs end to end."""

import json
import subprocess
import sys
from pathlib import Path

from rlvr.cli import build_parser, main


def test_main_job_command_parses():
    args = build_parser().parse_args(["run"])
    assert args.command == "run" and args.config == "quickstart"


def test_makefile_run_target_calls_rlvr_run():
    text = (Path(__file__).parents[2] / "Makefile").read_text()
    assert "$(VENV)/bin/rlvr run" in text and "pytest tests" in text


def test_cli_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "rlvr.cli", "--help"], capture_output=True, text=True).stdout
    for name in ("run", "pretrain", "train", "eval", "fit", "weights", "collapse", "report", "config"):
        assert name in out


RUN_ARGS = ["algo.prompts_per_step=4", "algo.group_size=4", "train.steps=2", "train.eval_problems=6",
            "train.final_eval_samples=4", "task.retention_problems=6", "sampling.max_new_tokens=24",
            "sampling.interruption_budget=16", "--quiet"]


def _without_times(obj):
    """A metrics line or eval.json with its wall-clock fields dropped (they differ run to run)."""
    if isinstance(obj, dict):
        return {k: _without_times(v) for k, v in obj.items() if not k.endswith("_s") and k != "wall_s"}
    if isinstance(obj, list):
        return [_without_times(v) for v in obj]
    return obj


def _check_main_job_outputs(run_dir: Path, out: str) -> None:
    """What a tiny `rlvr run` (RUN_ARGS) writes and prints: pass@k of base and trained, support, perplexity,
    samples, config, report, one metrics line per step, and the machine and precision it resolved."""
    assert "pass@1" in out and "pass@4" in out
    ev = json.loads((run_dir / "eval.json").read_text())
    assert set(ev["base"]["pass_at_k"]) == {"1", "2", "4"} and set(ev["trained"]["pass_at_k"]) == {"1", "2", "4"}
    assert ev["base"]["problems"] == 6 and "support" in ev and "perplexity_under_base" in ev
    assert (run_dir / "samples.jsonl").exists() and (run_dir / "config.yaml").exists()
    assert (run_dir / "report.html").exists()
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2]
    # model.dtype=auto (pinned to float32 in tests): the run records what it resolved to, and where
    assert "dtype: float32" in (run_dir / "config.yaml").read_text()
    machine = json.loads((run_dir / "machine.json").read_text())
    assert machine["precision"] == "float32" and machine["cpu"] and "avx2" in machine["flags"]
    assert ev["machine"]["precision"] == "float32" and ev["machine"]["torch"] == machine["torch"]
    assert "machine: " in out and "precision float32" in (run_dir / "report.html").read_text()


def test_same_machine_seed_and_config_give_identical_numbers(tiny_overrides, tmp_path, capsys):
    """Determinism: two `rlvr run`s of one config on one machine (the base pretrained once for each,
    in separate caches) give bit-identical base weights, metrics, trained weights and eval.json. The first
    is also the tiny main job's end-to-end check (:func:`_check_main_job_outputs`): one run serves both."""
    import os

    from safetensors.torch import load_file

    from rlvr.log import read_metrics
    from rlvr.train.checkpoint import latest_good_checkpoint

    runs, outs = [], []
    for i in range(2):
        os.environ["RLVR_CACHE"], old = str(tmp_path / f"cache{i}"), os.environ["RLVR_CACHE"]
        try:
            assert main(["run", *tiny_overrides, *RUN_ARGS, "--run-dir", str(tmp_path / f"run{i}")]) == 0
        finally:
            os.environ["RLVR_CACHE"] = old
        runs.append(tmp_path / f"run{i}")
        outs.append(capsys.readouterr().out)
    _check_main_job_outputs(runs[0], outs[0])
    out = "".join(outs)
    assert "retention strings greedy accuracy" in out and "delta" in out
    bases = sorted((tmp_path / "cache0" / "base").glob("*/final/model.safetensors")) + \
        sorted((tmp_path / "cache1" / "base").glob("*/final/model.safetensors"))
    assert len(bases) == 2 and bases[0].read_bytes() == bases[1].read_bytes()
    a, b = ([_without_times(r) for r in read_metrics(r)] for r in runs)
    assert a == b and len(a) == 2
    wa, wb = (load_file(str(latest_good_checkpoint(r) / "model.safetensors")) for r in runs)
    assert wa.keys() == wb.keys() and all(wa[k].equal(wb[k]) for k in wa)
    ea, eb = (_without_times(json.loads((r / "eval.json").read_text())) for r in runs)
    assert ea == eb
    ret = ea["retention"]
    assert ret["base"]["strings"]["problems"] == 6 and len(ret["delta"]["strings"]["ci"]) == 2


CLI = [sys.executable, "-c", "import sys; from rlvr.cli import main; sys.exit(main(sys.argv[1:]))"]


def test_run_resume_finishes_a_run_stopped_during_evaluation(tiny_overrides, tmp_path):
    """b87d620 had no `rlvr run --resume`; a run killed while evaluating could only start over. Here the
    training is done (and not redone), a torn samples file is replaced, and eval.json and the report
    are written; `--run-dir` onto the finished run is refused (a second run would merge into it)."""
    run_dir = tmp_path / "run"
    first = main(["train", "quickstart", *tiny_overrides, *RUN_ARGS, "--run-dir", str(run_dir)])
    assert first == 0
    metrics = (run_dir / "metrics.jsonl").read_bytes()
    (run_dir / "samples.jsonl").write_text('{"problem_id": "torn"')  # killed while writing the evaluation
    proc = subprocess.run([*CLI, "run", "--resume", str(run_dir), "--quiet"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"--resume: training of {run_dir} is done (step 2); evaluating" in proc.stderr
    assert (run_dir / "metrics.jsonl").read_bytes() == metrics
    ev = json.loads((run_dir / "eval.json").read_text())
    assert ev["base"]["problems"] == 6 and (run_dir / "report.html").exists() and "pass@1" in proc.stdout
    assert all("problem_id" in json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines())
    again = subprocess.run([*CLI, "run", *tiny_overrides, *RUN_ARGS, "--run-dir", str(run_dir)],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert again.stderr.strip().splitlines()[-1].startswith(f"error: --run-dir {run_dir} is not empty (a run:")
    refused = subprocess.run([*CLI, "run", "--resume", str(run_dir), "dapo"], capture_output=True, text=True,
                             timeout=600)
    assert refused.returncode == 2 and "dapo would change the run midway" in refused.stderr
