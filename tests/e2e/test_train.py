"""End-to-end RL on the tiny model: runs, resumes exactly, warns on silent failures."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rlvr.cli import main
from rlvr.config import load_config
from rlvr.log import read_metrics
from rlvr.train.checkpoint import latest_good_checkpoint
from rlvr.train.loop import train
from tests.conftest import tiny_run_overrides

VOLATILE = {"wall_s", "gen_s", "train_s", "score_s", "scored_per_s"}


def _cfg(tiny_overrides, *extra):
    return load_config("quickstart", [*tiny_overrides, "algo.prompts_per_step=4", "algo.group_size=4",
                                      "train.eval_problems=8", "train.eval_every=2", "sampling.max_new_tokens=24",
                                      "sampling.interruption_budget=16", *extra])


def _stable(rows):
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


@pytest.fixture(scope="module")
def _trained_run(tmp_path_factory) -> Path:
    """One finished 2-step run for the module (trained once; each test gets its own copy)."""
    out = tmp_path_factory.mktemp("finished")
    return train(_cfg(tiny_run_overrides(out), "train.steps=2"), run_dir=out / "run", progress="none")


@pytest.fixture
def finished_run(_trained_run, tmp_path) -> Path:
    """A finished 2-step run of this test's own, in ``tmp_path / "run"`` (the tests change it)."""
    return Path(shutil.copytree(_trained_run, tmp_path / "run"))


def test_resume_gives_the_same_metrics_as_an_uninterrupted_run(tiny_overrides, tmp_path):
    cfg = _cfg(tiny_overrides, "train.deterministic=true", "train.checkpoint_every=2", "train.steps=4",
               "algo.npr_threshold=0.5")
    full = train(cfg, run_dir=tmp_path / "full", progress="none")
    half_cfg = _cfg(tiny_overrides, "train.deterministic=true", "train.checkpoint_every=2", "train.steps=2",
                    "algo.npr_threshold=0.5")
    part = train(half_cfg, run_dir=tmp_path / "part", progress="none")
    train(resume=part, extra_steps=4, progress="none")
    a, b = _stable(read_metrics(full)), _stable(read_metrics(part))
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    assert a == b
    state_a = json.loads((latest_good_checkpoint(full) / "state.json").read_text())
    state_b = json.loads((latest_good_checkpoint(part) / "state.json").read_text())
    assert state_a["tracker"] == state_b["tracker"] and state_a["data"] == state_b["data"]


def test_a_run_past_its_deadline_checkpoints_pauses_and_resumes_as_if_never_stopped(tiny_overrides, tmp_path):
    """``stop_at``: the step ending past the deadline is checkpointed (here step 1, between the
    every-2 checkpoints) and the run returns; resuming it gives the uninterrupted run's metrics."""
    over = (*tiny_overrides, "train.deterministic=true", "train.checkpoint_every=2", "train.steps=4")
    full = train(_cfg(over), run_dir=tmp_path / "full", progress="none")
    with pytest.warns(RuntimeWarning, match="paused at step 1 of 4"):
        part = train(_cfg(over), run_dir=tmp_path / "part", progress="none", stop_at=time.time())
    assert latest_good_checkpoint(part).name == "step_000001" and len(read_metrics(part)) == 1
    train(resume=part, progress="none")
    a, b = _stable(read_metrics(full)), _stable(read_metrics(part))
    assert [r["step"] for r in b] == [1, 2, 3, 4] and a == b


def test_resume_with_nothing_to_do_warns(finished_run):
    with pytest.warns(RuntimeWarning, match="zero steps would run"):
        train(resume=finished_run, progress="none")
    assert len(read_metrics(finished_run)) == 2


def test_corrupt_checkpoint_falls_back_to_previous(tiny_overrides, tmp_path):
    run = train(_cfg(tiny_overrides, "train.steps=2", "train.checkpoint_every=1", "train.keep_last=3"),
                run_dir=tmp_path / "r", progress="none")
    newest = latest_good_checkpoint(run)
    (newest / "model.safetensors").write_bytes(b"garbage")
    with pytest.warns(RuntimeWarning, match="corrupt or partial"):
        good = latest_good_checkpoint(run)
    assert good.name == "step_000001"


def test_zero_variance_batches_are_reported(tiny_overrides, tmp_path):
    # a reward that is always 0: every group is constant, no gradient
    cfg = _cfg(tiny_overrides, "train.steps=1", "task.name=strings", "sampling.max_new_tokens=2",
               "sampling.interruption_budget=0", "sampling.temperature=0")  # greedy: no EOS by chance
    with pytest.warns(RuntimeWarning, match="identical rewards"):
        run = train(cfg, run_dir=tmp_path / "z", progress="none")
    m = read_metrics(run)[-1]
    assert m["zero_var_frac"] == 1.0 and m["warnings"]["steps_without_gradient"] == 1
    assert m["truncation_rate"] == 1.0 and m["warnings"]["all_truncated_steps"] == 1


def test_cli_train_bad_inputs(capsys, tmp_path):
    assert main(["train", "no_such_recipe"]) == 2
    assert "no such config file" in capsys.readouterr().err
    t0 = time.time()
    assert main(["train", "quickstart", "task.name=arithmetik"]) == 2  # fails before any pretraining
    assert "did you mean 'arithmetic'" in capsys.readouterr().err and time.time() - t0 < 30
    assert main(["run", "loss.name=cispo2"]) == 2
    assert "did you mean 'cispo'" in capsys.readouterr().err
    assert main(["train", "reward.kind=self_certainity"]) == 2
    assert "reward.kind" in capsys.readouterr().err
    assert main(["train", "--resume", "/nonexistent/run"]) == 2
    assert "--resume /nonexistent/run does not exist" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path)]) == 2  # a folder, but no config.yaml in it
    assert "not a run directory" in capsys.readouterr().err


def test_micro_batching_does_not_change_the_update(tiny_overrides, tmp_path):
    params = []
    for micro in (0, 3):
        cfg = _cfg(tiny_overrides, "train.steps=1", "train.deterministic=true", f"algo.micro_batch_size={micro}",
                   "algo.minibatches=1")
        run = train(cfg, run_dir=tmp_path / f"m{micro}", progress="none")
        from safetensors.torch import load_file

        params.append(load_file(str(latest_good_checkpoint(run) / "model.safetensors")))
    for k in params[0]:
        assert torch.allclose(params[0][k], params[1][k], atol=1e-6), k


# ---------------------------------------------------------------- run folders and resume (issue 47)
CLI = [sys.executable, "-c", "import sys; from rlvr.cli import main; sys.exit(main(sys.argv[1:]))"]
SMALL = ["algo.prompts_per_step=4", "algo.group_size=4", "train.eval_problems=8", "sampling.max_new_tokens=24",
         "sampling.interruption_budget=16", "train.steps=2"]


def _cli(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, argv)], capture_output=True, text=True, timeout=600)


def _files(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), proc.stderr
    return lines[-1]


def test_a_new_run_into_a_used_run_folder_is_refused_unless_overwrite(finished_run, tiny_overrides):
    """b87d620 merged the two runs: config.yaml overwritten, a second 1..N appended to metrics.jsonl."""
    before = _files(finished_run)
    new = ["train", "quickstart", *tiny_overrides, *SMALL, "optim.lr=0.001", "--run-dir", finished_run, "--quiet"]
    proc = _cli(*new)
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert "is not empty (a run: config.yaml, metrics.jsonl (2 lines), 1 checkpoint" in line
    assert "--resume" in line and "--overwrite" in line
    assert _files(finished_run) == before
    proc = _cli(*new, "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert "--overwrite: removing a run: config.yaml, metrics.jsonl (2 lines), 1 checkpoint" in proc.stderr
    assert [r["step"] for r in read_metrics(finished_run)] == [1, 2]
    assert "lr: 0.001" in (finished_run / "config.yaml").read_text()


def test_resume_refuses_a_config_name_or_overrides(finished_run):
    """b87d620: `rlvr train dapo --resume RUN optim.lr=1` silently dropped dapo and the override."""
    before = _files(finished_run)
    for argv in (["dapo", "--resume", finished_run, "optim.lr=1"], ["--resume", finished_run, "optim.lr=1"]):
        proc = _cli("train", *argv)
        assert proc.returncode == 2
        assert "with its saved config.yaml" in _one_error_line(proc) and "would change the run midway" in proc.stderr
    assert _files(finished_run) == before


@pytest.mark.parametrize("text, said", [("", "config.yaml: empty"), ("- a\n", "the top level is a list"),
                                        ("train:\n  steps: 3\ntrain:\n  seed: 1\n", "duplicate key 'train'")])
def test_resume_refuses_a_saved_config_it_cannot_use(finished_run, text, said):
    """b87d620 resumed an empty config.yaml with the built-in defaults and overwrote the file."""
    (finished_run / "config.yaml").write_text(text)
    before = _files(finished_run)
    proc = _cli("train", "--resume", finished_run, "--steps", "3")
    assert proc.returncode == 2 and said in _one_error_line(proc)
    assert _files(finished_run) == before


def test_resume_steps_is_recorded_beside_the_config_not_in_it(finished_run):
    """b87d620 wrote `steps: 5` into the saved config.yaml."""
    from rlvr.train.resume import saved_config, steps_target

    config = (finished_run / "config.yaml").read_bytes()
    proc = _cli("train", "--resume", finished_run, "--steps", "3", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "--steps 3: the run now trains to step 3 (was 2); recorded in" in proc.stderr
    assert (finished_run / "config.yaml").read_bytes() == config
    record = json.loads((finished_run / "resume.json").read_text())
    assert record["steps"] == 3 and record["config_steps"] == 2 and record["history"][0]["from"] == 2
    assert [r["step"] for r in read_metrics(finished_run)] == [1, 2, 3]
    assert steps_target(finished_run, saved_config(finished_run), None).train.steps == 3  # a plain --resume


def test_resume_with_another_runs_config_is_one_line(finished_run):
    """b87d620: a 31-line size-mismatch traceback, after building the models."""
    cfg = finished_run / "config.yaml"
    cfg.write_text(cfg.read_text().replace("d_model: 32", "d_model: 64"))
    proc = _cli("train", "--resume", finished_run, "--steps", "3")
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert "does not match checkpoint step_000002 (model.d_model: 64 in config.yaml, 32 in the checkpoint)" in line
    assert len(proc.stderr.splitlines()) == 1 and not (finished_run / "resume.json").exists()


def test_a_sweep_cell_of_another_config_is_refused(finished_run, tiny_overrides, tmp_path):
    """b87d620 reused any finished cell whatever its config (a sweep with another lr read the old runs)."""
    cell = tmp_path / "sweep-quickstart" / "grpo-s0"
    cell.parent.mkdir()
    finished_run.rename(cell)
    proc = _cli("train", "quickstart", *tiny_overrides, *SMALL, "--variants", "grpo", "--quiet")
    assert proc.returncode == 2 and "sweep cell" in _one_error_line(proc)
    assert "grpo-s0 is not empty (a run" in proc.stderr
