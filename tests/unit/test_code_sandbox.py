"""The code sandbox itself (:func:`run_sandboxed`): escapes run on every isolation backend this
machine has, each contained, reported with a reason, and leaving the host unchanged; and the
unit-test reward's API. The reward-hack suite is tests/unit/test_code_attacks.py."""

from __future__ import annotations

import os
import sys
import warnings

import pytest

from rlvr.errors import UserError
from rlvr.rewards import sandbox as sbx
from rlvr.rewards.code import code_reward, extract_code, score_code
from rlvr.rewards.sandbox import run_sandboxed
from tests.unit.sandbox_host import BACKENDS, ISOLATED, SECRET, TOKEN, Host

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


def _attack(name: str, host: Host) -> tuple[str, dict]:
    """(program, limits) of attack ``name``; paths and ports of the host are baked in."""
    secret, victim, port, pid = str(host.secret), str(host.victim_dir), host.port, host.victim_pid
    programs = {
        "read_secret": (f"print(open({secret!r}).read())", {}),
        "read_secret_ctypes": (
            "import ctypes\nlibc = ctypes.CDLL(None)\n"
            f"fd = libc.open({secret.encode()!r}, 0)\nassert fd >= 0, 'open failed'\n"
            "buf = ctypes.create_string_buffer(4096)\nn = libc.read(fd, buf, 4096)\n"
            "print(buf.raw[:n].decode())", {}),
        "write_outside": (f"open({str(host.root / 'pwned.txt')!r}, 'w').write('x')", {}),
        "socket": (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
                   "s.sendall(b'pwned')", {}),
        "fork_bomb": ("import os\nwhile True:\n    os.fork()", {"max_procs": 8, "timeout_s": 3}),
        "alloc_10gb": ("x = bytearray(10 * 1024**3)", {}),
        "infinite_loop": ("while True:\n    pass", {"cpu_s": 1, "timeout_s": 10}),
        "sleep": ("import time\ntime.sleep(60)", {"timeout_s": 0.7}),
        "print_1gb": ("import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n"
                      "    sys.stdout.write(chunk)", {"max_output": 64_000, "timeout_s": 10}),
        "subprocess": ("import subprocess\n"
                       f"r = subprocess.run(['/bin/sh', '-c', 'cat {secret}; echo x > {victim}/sub.txt'], "
                       "capture_output=True, text=True)\nprint(r.stdout)\n"
                       "assert r.returncode == 0, r.stderr", {}),
        "chdir_up_write": ("import os\nwrote = 0\nfor _ in range(8):\n    os.chdir('..')\n    try:\n"
                           "        open('pwned_up.txt', 'w').write('x'); wrote += 1\n"
                           "    except OSError as e:\n        print('denied', e)\nprint('wrote', wrote)", {}),
        "segfault": ("import ctypes\nctypes.string_at(0)", {}),
        "delete_files": (f"import os, shutil\nos.remove({victim + '/keep.txt'!r})\n"
                         f"shutil.rmtree({victim!r})", {}),
        "kill_host_process": (f"import os, signal\nos.kill({pid}, signal.SIGKILL)", {}),
        "kill_host_process_ctypes": (f"import ctypes\nassert ctypes.CDLL(None).kill({pid}, 9) == 0, 'refused'", {}),
        "daemonize": ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(30)\n"
                      "time.sleep(30)", {"timeout_s": 0.7}),
    }
    return programs[name]


# Expected reasons: (isolated backends, fallback). The fallback guard exits with "blocked".
EXPECT = {
    "read_secret": ({"error"}, {"blocked"}),
    # fallback: ctypes bypasses the audit hook (documented); with a uid drop the file's mode still stops it
    "read_secret_ctypes": ({"error"}, {"ok", "error"}),
    "write_outside": ({"error"}, {"blocked"}),
    "socket": ({"error"}, {"blocked"}),
    "fork_bomb": ({"error", "timeout"}, {"blocked"}),
    "alloc_10gb": ({"memory"}, {"memory"}),
    "infinite_loop": ({"cpu_limit"}, {"cpu_limit"}),
    "sleep": ({"timeout"}, {"timeout"}),
    "print_1gb": ({"output_limit"}, {"output_limit"}),
    "subprocess": ({"error"}, {"blocked"}),
    "chdir_up_write": ({"ok", "error"}, {"blocked"}),  # isolated: writes land in the sandbox's own root
    "segfault": ({"crashed"}, {"crashed"}),
    "delete_files": ({"error"}, {"blocked"}),
    "kill_host_process": ({"error"}, {"blocked"}),
    # fallback: the seccomp filter refuses a signal to another process (b87d620: ok, the host process died)
    "kill_host_process_ctypes": ({"error"}, {"error"}),
    "daemonize": ({"timeout"}, {"blocked"}),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(EXPECT))
def test_attack_is_contained(name: str, backend: str, host: Host) -> None:
    code, limits = _attack(name, host)
    r = run_sandboxed(code, isolation=backend, **limits)
    expected = EXPECT[name][0 if backend != "none" else 1]
    assert r.reason in expected, (r.reason, r.returncode, r.stderr[-800:])
    assert r.isolation == backend
    assert r.ok == (r.reason == "ok")
    if name == "read_secret_ctypes" and backend == "none" and r.reason == "ok":
        assert SECRET in r.stdout  # what the fallback cannot stop without a uid drop (documented)
    else:
        assert SECRET not in r.stdout + r.stderr
    if name in ("chdir_up_write",):
        for parent in [host.root, *host.root.parents]:
            assert not (parent / "pwned_up.txt").exists()
    if name == "sleep":
        assert r.wall_s < 3
    if name == "infinite_loop":
        assert 0.5 <= r.cpu_s <= 2.5 and r.wall_s < 8, (r.cpu_s, r.wall_s, r.returncode)
    if name == "print_1gb":
        assert len(r.stdout) <= 64_000 and r.wall_s < 5
    if name == "segfault":
        assert r.returncode == -11


@pytest.mark.parametrize("backend", ISOLATED)
def test_isolated_view_of_the_machine(backend: str, host: Host) -> None:
    code = ("import os, json\nprint(json.dumps({'cwd': os.getcwd(), 'home': os.environ['HOME'], "
            "'env': sorted(os.environ), 'root': sorted(os.listdir('/')), 'pids': sorted(p for p in "
            "os.listdir('/proc') if p.isdigit()), 'uid': os.getuid()}))")
    r = run_sandboxed(code, isolation=backend)
    assert r.reason == "ok", r.stderr
    import json

    seen = json.loads(r.stdout)
    assert seen["cwd"] == seen["home"] == "/sandbox"
    assert "RLVR_HOST_TOKEN" not in seen["env"] and TOKEN not in r.stdout
    assert "home" not in seen["root"] and "work" not in seen["root"]
    assert len(seen["pids"]) <= 3  # its own pid namespace: bwrap init, supervisor, program
    if os.geteuid() == 0:
        assert sbx.UID_BASE <= seen["uid"] < sbx.UID_BASE + (1 << 24)


def test_fallback_environment_is_minimal(host: Host) -> None:
    code = "import os\nprint(sorted(os.environ), os.getcwd() == os.environ['HOME'])"
    r = run_sandboxed(code, isolation="none")
    assert r.reason == "ok" and "RLVR_HOST_TOKEN" not in r.stdout and r.stdout.strip().endswith("True")


def test_stdin_and_exit_codes() -> None:
    r = run_sandboxed("import sys\nprint(sys.stdin.read().upper())\nraise SystemExit(3)", stdin="abc")
    assert (r.stdout.strip(), r.returncode, r.reason, r.ok) == ("ABC", 3, "error", False)


# ----------------------------------------------------------------------------- rewards
ADD_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]


@pytest.mark.parametrize(("completion", "reward", "partial", "reason"), [
    ("Here:\n```python\ndef add(a, b):\n    return a + b\n```\nDone.", 1.0, 1.0, "ok"),
    ("```python\ndef add(a, b):\n    return a - b\n```", 0.0, 0.0, "failed"),
    ("```python\ndef add(a, b):\n    return abs(a) + b\n```", 0.0, 2 / 3, "failed"),  # fails add(-1, 1)
    ("def add(a, b):\n    return a + b\n", 1.0, 1.0, "ok"),  # no fence: the whole text is code
    ("```python\ndef add(a, b) return\n```", 0.0, 0.0, "failed"),  # syntax error
    ("```python\nimport os\ndef add(a, b):\n    return 0\nos._exit(0)\n```", 0.0, 0.0, "incomplete"),
    # a forged report on the answer channel (the runner stops listening: a broken protocol) and a
    # fake success message
    ("```python\nimport os\nos.write(3, b'{\"nonce\": \"x\", \"passed\": 3, \"total\": 3}')\n"
     "print('3/3 passed')\ndef add(a, b):\n    return 7\n```", 0.0, 0.0, "incomplete"),
    ("```python\nimport sys\ndef add(a, b):\n    return a + b\nsys.exit(0)\n```", 1.0, 1.0, "ok"),
    ("```python\ndef add(a, b):\n    while True:\n        pass\n```", 0.0, 0.0, "cpu_limit"),
])
def test_score_code(completion: str, reward: float, partial: float, reason: str) -> None:
    got, res = score_code(completion, ADD_TESTS, cpu_s=1, timeout_s=5)
    assert (got, res.reason) == (reward, reason), res.stderr[-500:]
    assert (res.tests_passed or 0) == round(partial * 3)
    if 0 < partial < 1:  # the partial-credit path itself
        got_partial, _ = score_code(completion, ADD_TESTS, partial=True, cpu_s=1, timeout_s=5)
        assert got_partial == pytest.approx(partial, abs=1e-12)


def test_score_code_single_string_is_one_test_and_main_block_skipped() -> None:
    sol = ("```python\ndef f(x):\n    return 2 * x\n"
           "if __name__ == '__main__':\n    print(f(int(input())))\n```")
    reward, res = score_code(sol, "assert f(2) == 4\nassert f(3) == 6")
    assert (reward, res.tests_passed, res.tests_total) == (1.0, 1, 1)
    reward, res = score_code(sol, "assert f(2) == 4\nassert f(3) == 7", partial=True)
    assert (reward, res.tests_passed, res.tests_total) == (0.0, 0, 1)


def test_extract_code() -> None:
    text = "```\nplain\n```\n```python\nfirst = 1\n```\n```py\nsecond = 2\n```\n```bash\nls\n```"
    assert extract_code(text) == "second = 2\n"
    assert extract_code("```\nx = 1\n```") == "x = 1\n"
    assert extract_code("Sure.\n```python\ny = 2\n") == "y = 2\n"  # unclosed fence runs to the end
    assert extract_code("z = 3") == "z = 3"


def test_code_reward_trl_signature() -> None:
    good = "```python\ndef add(a, b):\n    return a + b\n```"
    bad = [{"role": "assistant", "content": "```python\ndef add(a, b):\n    return a * b\n```"}]
    tests = [ADD_TESTS, ADD_TESTS, ["assert add(0, 0) == 1"]]
    out = code_reward(["p1", "p2", "p3"], [good, bad, good], tests=tests, answer=["unused"] * 3)
    assert out == [1.0, 0.0, 0.0]
    with pytest.raises(UserError, match="one tests entry per completion"):
        code_reward(["p"], [good], tests=[])


def test_bad_arguments_are_user_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match="unknown sandbox isolation"):
        run_sandboxed("pass", isolation="docker")
    with pytest.raises(UserError, match="out of range"):
        run_sandboxed("pass", memory_mb=1)
    with pytest.raises(UserError, match="unknown sandbox limit"):
        score_code("pass", "assert True", memory=5)
    with pytest.raises(UserError, match="no tests"):
        score_code("pass", [])
    monkeypatch.setattr(sbx, "_probe_cache", {"bwrap": "bwrap not found", "unshare": "unshare failed"})
    with pytest.raises(UserError, match="unavailable"):
        run_sandboxed("pass", isolation="bwrap")


def test_fallback_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sbx, "_probe_cache", {"bwrap": "bwrap not found", "unshare": "unshare failed"})
    monkeypatch.setattr(sbx, "_warned", False)
    with pytest.warns(RuntimeWarning, match="NOT a security boundary"):
        assert sbx.resolve_isolation("auto") == "none"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sbx.resolve_isolation("auto") == "none"
        r = run_sandboxed("print(6 * 7)")
    assert (r.reason, r.stdout, r.isolation) == ("ok", "42\n", "none")


def test_the_child_programs_are_package_files_that_ship() -> None:
    """The programs sent to child interpreters (the bootstrap, the harness's server and runner) are
    files in the package, read at run time: every one must match pyproject's package-data, or an
    installed rlvr could not start a single sandboxed run."""
    import fnmatch
    import tomllib
    from pathlib import Path

    package = Path(sbx.__file__).resolve().parents[1]
    setuptools = tomllib.loads((package.parent / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["rlvr"]
    files = sorted(sbx.PROGRAMS.glob("*.py"))
    assert [f.name for f in files] == ["boot.py", "runner.py", "server.py"]
    for f in files:
        assert any(fnmatch.fnmatch(f.relative_to(package).as_posix(), p) for p in patterns), f
        compile(f.read_text(), f.name, "exec")  # the text sent parses as Python
    assert sbx._BOOT == sbx.program_text("boot") and sbx._BOOT.startswith("\nimport fcntl")
