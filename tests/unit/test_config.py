import pytest

from rlvr.cli import main
from rlvr.config import ConfigError, RunConfig, dump_yaml, load_config, parse_overrides, parse_yaml


def test_defaults_and_builtin_recipes_load():
    for name in ("quickstart", "grpo", "dapo", "scalerl"):
        cfg = load_config(name)
        assert isinstance(cfg, RunConfig)
    assert load_config("dapo").loss.eps_high == 0.28 and load_config("scalerl").loss.name == "cispo"


def test_unknown_key_suggests_fix(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("loss:\n  eps_hihg: 0.3\n")
    with pytest.raises(ConfigError, match="loss.eps_hihg: unknown key; did you mean 'eps_high'"):
        load_config(p)


def test_wrong_type_and_invariant():
    with pytest.raises(ConfigError, match="train.steps: expected an integer"):
        load_config(None, ["train.steps=ten"])
    with pytest.raises(ConfigError, match="model.d_model: must be divisible"):
        load_config(None, ["model.d_model=30", "model.n_head=4"])
    with pytest.raises(ConfigError, match="algo.group_size"):
        load_config(None, ["algo.group_size=1"])


def test_nested_override_and_round_trip(tmp_path):
    over = ["loss.eps_high=0.31", "task.knobs={max_value: 5}", "pretrain.milestones=[0.5,1.0]"]
    cfg = load_config("quickstart", over)
    assert cfg.loss.eps_high == 0.31 and cfg.task.knobs == {"max_value": 5} and cfg.pretrain.milestones == (0.5, 1.0)
    p = tmp_path / "resolved.yaml"
    p.write_text(dump_yaml(cfg))
    assert load_config(p) == cfg


def test_a_parsed_document_is_shared_but_each_caller_gets_its_own_copy():
    """YAML text and override values are parsed once per process (an experiment builds hundreds of run
    configs): a caller that changes what it got changes nothing for the next one; an error is raised
    every time."""
    text = "task:\n  knobs: {max_value: 5, ops: [add]}\n"
    first = parse_yaml(text)
    first["task"]["knobs"]["ops"].append("mul")
    assert parse_yaml(text) == {"task": {"knobs": {"max_value": 5, "ops": ["add"]}}}
    over = parse_overrides(["task.knobs={ops: [add]}"])
    over["task"]["knobs"]["ops"].append("mul")
    assert parse_overrides(["task.knobs={ops: [add]}"]) == {"task": {"knobs": {"ops": ["add"]}}}
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"x.yaml:2: not valid YAML \(duplicate key .a."):
            parse_yaml("a: 1\na: 2\n", "x.yaml")


def test_bad_override_and_missing_file():
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(None, ["loss.eps_high"])
    with pytest.raises(ConfigError, match="no such config file"):
        load_config("does/not/exist.yaml")


def test_invalid_yaml(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("loss: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)


def test_cli_config_show(capsys):
    assert main(["config", "show", "dapo", "loss.eps_high=0.3"]) == 0
    assert "eps_high: 0.3" in capsys.readouterr().out
    assert main(["config", "show", "loss.nope=1"]) == 2
    assert "loss.nope: unknown key" in capsys.readouterr().err


def test_overrides_after_options_are_accepted(capsys):
    from rlvr.cli import build_parser

    assert main(["config", "show", "dapo", "loss.eps_high=0.3"]) == 0
    args, extra = build_parser().parse_known_args(["train", "quickstart", "--seeds", "0", "train.steps=3"])
    assert extra == ["train.steps=3"]


def test_periodic_eval_averages_eval_samples_per_problem(monkeypatch):
    from types import SimpleNamespace

    from rlvr.tasks.arithmetic import ArithmeticTask
    from rlvr.train import loop

    task = ArithmeticTask()
    seen = {}

    def fake_sample(model, tok, prompts, params, **kw):
        seen["prompts"] = prompts
        return SimpleNamespace(texts=[f"A:{task.problems('heldout', 3)[i // 4].answer}" if i % 4 == 0 else "A:x"
                                      for i in range(len(prompts))])

    monkeypatch.setattr(loop, "sample", fake_sample)
    monkeypatch.setattr(loop, "fitting_problems", lambda probs, *a: probs)
    st = SimpleNamespace(task=task, model=None, tok=None, params=None, version=0,
                         cfg=load_config("quickstart", ["train.eval_samples=4"]))
    assert loop.heldout_pass_rate(st, 3, seed=0, samples=4) == 0.25
    assert len(seen["prompts"]) == 12 and seen["prompts"][:4] == [task.problems("heldout", 3)[0].prompt] * 4
    with pytest.raises(ConfigError, match="eval_samples"):
        load_config("quickstart", ["train.eval_samples=0"])


def test_the_excursions_section_splits_into_training_settings_and_the_grid(tmp_path):
    """How the pipelines train stays in RunConfig; the grid of `rlvr excursions` leaves it but is still
    checked wherever a config loads (a run directory written before keeps loading)."""
    from rlvr.config import ExcursionsGrid, load_excursions, to_dict

    cfg, grid = load_excursions("excursions", ["excursions.milestones=[0.5, 1.0]", "excursions.steps=8"])
    assert cfg.excursions.steps == 8 and cfg.excursions.sft_lr == 0.0005
    assert grid == ExcursionsGrid(milestones=(0.5, 1.0), eval_problems=48)  # 48: the built-in file's
    assert set(to_dict(cfg)["excursions"]) == {"steps", "sft_lr", "sft_batch_size", "sft_data", "parallel_weight",
                                               "teacher"}
    assert load_config("excursions", ["excursions.out_dir=/x"]) == load_config("excursions")
    old_run = tmp_path / "config.yaml"  # as dump_yaml wrote every run's config before the split
    old_run.write_text("excursions: {milestones: [0.25, 0.5, 1.0], eval_problems: 64, steps: 24}\n")
    assert load_config(old_run) == RunConfig()
    for override, message in {"excursions.milestone=[1.0]": "excursions.milestone: unknown key; did you mean "
                                                            "'milestones'?",
                              "excursions.eval_samples=0": "excursions.eval_samples: must be >= 1 (got 0)",
                              "excursions.pipelines=[rlhf]": "excursions.pipelines: unknown ['rlhf']",
                              "excursions.steps=1": "excursions.steps: must be >= 2 (got 1)"}.items():
        with pytest.raises(ConfigError) as e:
            load_config(None, [override])
        assert str(e.value).startswith(message)
def test_a_key_given_twice_is_an_error_naming_both_lines(tmp_path):
    """PyYAML keeps the last of two ``train:`` blocks, silently dropping the first."""
    p = tmp_path / "c.yaml"
    p.write_text("train:\n  steps: 3\noptim:\n  lr: 0.1\ntrain:\n  seed: 1\n")
    with pytest.raises(ConfigError, match=r"c.yaml:5: not valid YAML \(duplicate key 'train' \(first given on "
                                          r"line 1\); keep one\)"):
        load_config(p)
    p.write_text("optim:\n  lr: 0.1\n  lr: 0.2\n")
    with pytest.raises(ConfigError, match=r"c.yaml:3: .*duplicate key 'lr' \(first given on line 2\)"):
        load_config(p)
    with pytest.raises(ConfigError, match="duplicate key 'a'"):
        load_config(None, ["reward.weights={a: 1, a: 2}"])


def test_syntax_errors_name_the_line(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("train:\n  steps: 3\n\tseed: 1\n")
    with pytest.raises(ConfigError, match=r"c.yaml:3: not valid YAML"):
        load_config(p)


@pytest.mark.parametrize("text, match", [("", r"empty; a config is a mapping"),
                                         ("# only a comment\n", r"empty; a config is a mapping"),
                                         ("- a\n- b\n", r"the top level is a list, not a mapping"),
                                         ("hello\n", r"the top level is a str, not a mapping")])
def test_an_empty_or_non_mapping_config_is_refused(tmp_path, text, match):
    """An empty YAML ran the built-in defaults with no word; a list was a message with no file name."""
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=f"c.yaml: {match}"):
        load_config(p)


def test_unreadable_configs_are_one_line_errors(tmp_path):
    binary = tmp_path / "b.yaml"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ConfigError, match=r"b.yaml: not a text file"):
        load_config(binary)
    with pytest.raises(ConfigError, match=r"is a folder, not a YAML file"):
        load_config(tmp_path)


def test_experiment_declarations_get_the_strict_loader(tmp_path):
    from rlvr.config import read_mapping

    p = tmp_path / "e.yaml"
    p.write_text("name: e\nmodels: {}\nname: f\n")
    with pytest.raises(ConfigError, match=r"e.yaml:3: .*duplicate key 'name'"):
        read_mapping(p, "declaration")
    import rlvr.experiments.spec as spec

    assert spec.read_mapping is read_mapping  # spec.load reads every declaration through it
