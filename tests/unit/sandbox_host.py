"""A host for sandbox attacks: a tree with a secret and victim files, a listening socket, a victim
process and an environment token. After each test: no sandboxed process is left, the private temp
dirs are gone, the tree is unchanged, nobody connected to the socket and the victim is alive."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlvr.rewards import sandbox as sbx

BACKENDS = ["none"] + [b for b in ("bwrap", "unshare") if sys.platform == "linux" and sbx._probe(b) is None]
ISOLATED = [b for b in BACKENDS if b != "none"]
SECRET = "s3cr3t-" + "7f1c2a"  # not spelled out in any attack program
TOKEN = "tok-" + "91ab"  # an environment secret of the host
_BOOT_MARK = "cfg = json.loads(sys.argv[1])"  # in the cmdline of every sandboxed process


# Source an attack uses to find the test runner (outside the sandbox) through /proc, with ctypes
# past the fallback's audit hook: ``_runners()`` lists the pids whose command line holds the runner.
FIND_RUNNER = '''
import ctypes as _ct, os as _os
_libc = _ct.CDLL(None)
def _runners():
    buf, found = _ct.create_string_buffer(1 << 16), []
    for pid in range(max(2, _os.getpid() - 400), _os.getpid() + 50):
        fd = _libc.open(f"/proc/{pid}/cmdline".encode(), 0)
        if fd >= 0:
            n = _libc.read(fd, buf, 1 << 16)
            _libc.close(fd)
            if b"report_fd" in buf.raw[:max(n, 0)]:
                found.append(pid)
    return found
'''


def forge_report(name: str, *, passed: int, total: int) -> str:
    """A solution whose function ``name`` forges the verdict: it stops each test runner it finds,
    writes a report of ``passed``/``total`` into every descriptor of it (its stdout, which the
    caller reads, among them) and kills it. Under ``none``, b87d620 believed it."""
    line = f'{{"passed": {passed}, "total": {total}, "errors": [], "gone": null, "context_ok": true}}\n'.encode()
    return FIND_RUNNER + f'''
def {name}(*args):
    for pid in _runners():
        _libc.kill(pid, 19)
        for fd in range(3, 32):
            w = _libc.open(f"/proc/{{pid}}/fd/{{fd}}".encode(), 1)
            if w >= 0:
                _libc.write(w, {line!r}, {len(line)})
        _libc.kill(pid, 9)
    return 0
'''


def sandbox_pids(run_root: Path) -> list[int]:
    """Sandboxed processes of runs created under ``run_root`` (their cmdline names the run dir)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path("/proc", entry, "cmdline").read_bytes()
            except OSError:
                continue
            if _BOOT_MARK.encode() in cmdline and str(run_root).encode() in cmdline:
                pids.append(int(entry))
    return pids


def snapshot(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.join(dirpath, d)] = None
        for f in filenames:
            out[os.path.join(dirpath, f)] = Path(dirpath, f).read_bytes()
    return out


@dataclass
class Host:
    root: Path
    secret: Path
    victim_dir: Path
    port: int
    victim_pid: int

    def fill(self, code: str) -> str:
        """``code`` with the host's paths, port and victim pid substituted."""
        return (code.replace("{SECRET}", str(self.secret)).replace("{VICTIM}", str(self.victim_dir))
                .replace("{HOST}", str(self.root)).replace("{PORT}", str(self.port))
                .replace("{PID}", str(self.victim_pid)))


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("keep me")
    sandboxes = tmp_path / "sandboxes"
    sandboxes.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(sandboxes))
    monkeypatch.setenv("RLVR_HOST_TOKEN", TOKEN)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    victim = subprocess.Popen(["sleep", "60"])
    before = snapshot(tmp_path)
    try:
        yield Host(tmp_path, tmp_path / "secret.txt", tmp_path / "victim", listener.getsockname()[1], victim.pid)
        deadline = time.monotonic() + 3
        while sandbox_pids(sandboxes) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sandbox_pids(sandboxes) == [], "a sandboxed process outlived its run"
        assert list(sandboxes.iterdir()) == [], "a private temp dir was not deleted"
        assert snapshot(tmp_path) == before, "the host tree changed"
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected to the host's port
        assert victim.poll() is None, "the host process was killed"
    finally:
        victim.kill()
        victim.wait()
        listener.close()
