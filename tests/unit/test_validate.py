"""Names in a config are checked at load (:func:`rlvr.train.validate.validate`), and every command
checks its config and its path inputs before it creates a directory or loads a model."""

from __future__ import annotations

import pytest

from rlvr.cli import main
from rlvr.config import ConfigError, load_config
from rlvr.errors import UserError
from rlvr.train.validate import validate


def _fails(overrides: list[str], pattern: str) -> str:
    with pytest.raises(ConfigError, match=pattern) as e:
        validate(load_config("quickstart", overrides))
    assert "\n" not in str(e.value)
    return str(e.value)


def test_validate_is_importable_from_the_loop():
    from rlvr.train import loop

    assert loop.validate is validate


def test_reward_weights_name_registered_rewards():
    msg = _fails(["reward.kind=mix", "reward.weights={verifer: 1.0, self_certainty: 0.1}"],
                 r"^reward.weights.verifer: unknown reward 'verifer'; did you mean 'verifier'\?")
    assert "self_certainty" in msg  # the known names are listed
    _fails(["reward.weights={self_certanty: 1.0}", "reward.kind=mix"], "did you mean 'self_certainty'")
    validate(load_config("quickstart", ["reward.kind=mix", "reward.weights={verifier: 1.0, self_certainty: 0.1}"]))


def test_reward_kind_and_loss_name():
    _fails(["reward.kind=self_certanty"], r"^reward.kind: unknown reward kind 'self_certanty'; did you mean")
    _fails(["loss.name=grpo2"], r"^loss.name: unknown loss 'grpo2'; did you mean 'grpo'\?")


def test_task_names_are_registered():
    _fails(["task.retention_tasks=[strings, countdwn]"],
           r"^task.retention_tasks\[1\]: unknown task 'countdwn'; did you mean 'countdown'\?")
    _fails(["task.name=arithmetc"], r"^task.name: unknown task 'arithmetc'; did you mean 'arithmetic'\?")
    _fails(["task.knobs={max_operand: 2}"], r"^task.knobs.max_operand: unknown knob .*did you mean 'max_operands'")
    _fails(["pretrain.mix={arithmetic: 1.0, strngs: 0.5}"], r"^pretrain.mix.strngs: unknown task 'strngs'")
    _fails(["pretrain.task_knobs={gsm8k: {}}"],
           r"^pretrain.task_knobs.gsm8k: unknown task of pretrain.mix or task.retention_tasks")
    _fails(["pretrain.task_knobs={arithmetic: {max_operand: 2}}"],
           r"^pretrain.task_knobs.arithmetic.max_operand: unknown knob")


def test_model_paths_exist(tmp_path):
    _fails([f"model.init_from={tmp_path / 'nope'}"], r"^model.init_from: .* does not exist")
    _fails(["model.kind=hf", f"model.path={tmp_path / 'nope'}"], r"^model.path: .* does not exist")
    validate(load_config("quickstart", ["model.kind=hf", "model.path=Qwen/Qwen2.5-0.5B-Instruct"]))  # a hub name


@pytest.mark.parametrize("argv", [
    ["train", "quickstart", "task.retention_tasks=[strngs]"],
    ["train", "quickstart", "--variants", "grpo", "reward.kind=mix", "reward.weights={verifer: 1}"],
    ["run", "quickstart", "loss.name=nope"],
    ["config", "show", "quickstart", "reward.kind=nope"],
])
def test_commands_validate_before_creating_anything(argv, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*argv, f"train.out_dir={out}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not out.exists()


def test_pretrain_and_excursions_validate_first(tmp_path, capsys):
    assert main(["pretrain", "quickstart", "pretrain.mix={arithmetc: 1}", "--out", str(tmp_path / "base")]) == 2
    assert "pretrain.mix.arithmetc: unknown task" in capsys.readouterr().err
    assert main(["excursions", "excursions", "task.retention_tasks=[nope]",
                 f"excursions.out_dir={tmp_path / 'exc'}"]) == 2
    assert "task.retention_tasks[0]: unknown task" in capsys.readouterr().err
    assert main(["excursions", "excursions", f"excursions.teacher={tmp_path / 'nope'}",
                 f"excursions.out_dir={tmp_path / 'exc'}"]) == 2
    assert "excursions.teacher:" in capsys.readouterr().err
    assert not (tmp_path / "base").exists() and not (tmp_path / "exc").exists()


def test_eval_of_a_missing_checkpoint_says_so_first(capsys):
    assert main(["eval", "/nonexistent/ckpt", "--task", "arithmetic"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: checkpoint /nonexistent/ckpt does not exist") and "--out" not in err
    assert main(["eval", "--samples", "/nonexistent/s.jsonl"]) == 2
    assert "--samples /nonexistent/s.jsonl does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["weights", "/nonexistent/base", "/nonexistent/tuned"], "BASE /nonexistent/base does not exist"),
    (["fit", "/nonexistent/run"], "/nonexistent/run does not exist"),
    (["collapse", "/nonexistent/run", "--window", "0"], "/nonexistent/run does not exist"),
    (["report", "/nonexistent/run"], "run directory /nonexistent/run does not exist"),
    (["train", "--resume", "/nonexistent/run"], "--resume /nonexistent/run does not exist"),
])
def test_commands_check_their_paths_first(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_resume_checks_the_run_and_its_config(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path)]) == 2
    assert "not a run directory (no config.yaml)" in capsys.readouterr().err
    (tmp_path / "config.yaml").write_text("loss:\n  name: grpoo\n")
    assert main(["train", "--resume", str(tmp_path)]) == 2
    assert "loss.name: unknown loss 'grpoo'" in capsys.readouterr().err
    (tmp_path / "config.yaml").write_text("train:\n  steps: 4\n")
    assert main(["train", "--resume", str(tmp_path), "--steps", "0"]) == 2
    assert "--steps 0: must be >= 1 (the run's new total number of steps)" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]  # nothing written, config untouched


def test_user_error_type():
    assert issubclass(ConfigError, UserError)
