"""A user's own task by reference: ``task.name=path/to/task.py:ClassName`` or ``package.module:ClassName``."""

from __future__ import annotations

import sys

import pytest

from rlvr.config import ConfigError, load_config
from rlvr.errors import UserError
from rlvr.tasks.registry import get_task, is_task_ref, list_tasks, load_ref
from rlvr.train.validate import validate

TASK_FILE = '''
from rlvr.types import Problem, Verdict

class EchoTask:
    """Repeat a word: the smallest task a user could write."""

    name = "echo"

    def __init__(self, words=("ab", "cd", "ef", "gh"), seed=0):
        self.words = list(words)

    def problems(self, split, n=None):
        ws = self.words[:3] if split == "train" else self.words[3:]
        out = [Problem(id=f"echo/{w}", prompt=f"say {w}:", answer=w) for w in ws]
        return out[:n] if n is not None else out

    def verify(self, completion, problem):
        right = completion.strip() == problem.answer
        return Verdict(1.0 if right else 0.0, "right" if right else "wrong", completion.strip())

class NotATask:
    def problems(self, split, n=None):
        return []

def make_echo(**knobs):
    return EchoTask(**knobs)

def make_nothing():
    return object()

CONSTANT = 3
'''


@pytest.fixture
def task_file(tmp_path, monkeypatch):
    path = tmp_path / "my_tasks.py"
    path.write_text(TASK_FILE)
    monkeypatch.chdir(tmp_path)
    return path


def test_file_reference_builds_the_task_with_knobs(task_file):
    for ref in (f"{task_file}:EchoTask", "my_tasks.py:EchoTask", "./my_tasks.py:make_echo"):
        assert is_task_ref(ref)
        task = get_task(ref, words=["xy", "zw", "uv", "st"])
        train = task.problems("train")
        assert [p.answer for p in train] == ["xy", "zw", "uv"]
        assert task.verify(" xy\n", train[0]).correct and not task.verify("zz", train[0]).correct
    assert load_ref("my_tasks.py:EchoTask") is load_ref("my_tasks.py:EchoTask")  # imported once
    assert "my_tasks.py:EchoTask" not in list_tasks()  # references are not registered
    with pytest.raises(UserError, match="unknown knob 'wordz'.*did you mean 'words'"):
        get_task("my_tasks.py:EchoTask", wordz=[])


def test_module_reference(task_file, monkeypatch):
    monkeypatch.syspath_prepend(str(task_file.parent))
    monkeypatch.delitem(sys.modules, "my_tasks", raising=False)
    task = get_task("my_tasks:EchoTask")
    assert task.problems("heldout")[0].answer == "gh"


@pytest.mark.parametrize("ref, pattern", [
    ("missing.py:EchoTask", r"task file 'missing.py' not found"),
    ("sub/missing.py:EchoTask", r"task file 'sub/missing.py' not found"),
    ("no_such_module_xyz:EchoTask", r"task module 'no_such_module_xyz' cannot be imported"),
    ("my_tasks.py:EchoTsk", r"'my_tasks.py' has no 'EchoTsk'; did you mean 'EchoTask'\?"),
    ("my_tasks.py:NotATask", r"NotATask is not a task, it lacks verify;"),
    ("my_tasks.py:CONSTANT", r"is not callable \(int\); name a task class"),
    ("my_tasks.py:make_nothing", r"object is not a task, it lacks problems and verify"),
    ("my_tasks.py:", r"bad task reference"),
])
def test_reference_errors(task_file, ref, pattern):
    with pytest.raises(UserError, match=pattern) as e:
        get_task(ref)
    assert "\n" not in str(e.value)


def test_a_file_that_fails_to_import(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.py").write_text("import no_such_dependency_xyz\n")
    with pytest.raises(UserError, match=r"task file 'broken.py' failed to import \(ModuleNotFoundError"):
        get_task("broken.py:Task")


def test_validated_at_config_load(task_file):
    cfg = load_config("quickstart", ["task.name=my_tasks.py:EchoTask", "task.knobs={seed: 1}"])
    validate(cfg)
    with pytest.raises(ConfigError, match=r"^task.name: task file 'nope.py' not found"):
        validate(load_config("quickstart", ["task.name=nope.py:EchoTask"]))
    with pytest.raises(ConfigError, match=r"^task.knobs.sed: unknown knob .*did you mean 'seed'"):
        validate(load_config("quickstart", ["task.name=my_tasks.py:EchoTask", "task.knobs={sed: 1}"]))
    with pytest.raises(ConfigError, match=r"^task.name: .*object is not a task"):
        validate(load_config("quickstart", ["task.name=my_tasks.py:make_nothing"]))
    with pytest.raises(ConfigError, match=r"^task.retention_tasks\[0\]: .*has no 'Nope'"):
        validate(load_config("quickstart", ["task.retention_tasks=[my_tasks.py:Nope]"]))


def test_cli_reports_a_bad_reference_in_one_line(task_file, capsys):
    from rlvr.cli import main

    assert main(["config", "show", "quickstart", "task.name=my_tasks.py:NotATask"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: task.name: ") and err.count("\n") == 1


def test_registered_tasks_are_checked_too():
    from rlvr.tasks.registry import TASKS, register_task

    register_task("_not_a_task_test", lambda: object())
    try:
        with pytest.raises(UserError, match="is not a task"):
            get_task("_not_a_task_test")
    finally:
        TASKS.pop("_not_a_task_test")
