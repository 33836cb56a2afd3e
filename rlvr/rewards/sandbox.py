"""Sandboxed execution of model-written Python.

What the sandbox does. Every program runs in a fresh ``python -I`` interpreter (the base
interpreter of ``sys.executable``, so the caller's site-packages are not on the path) in
its own session/process group, with a minimal environment (no caller variables), a
private temporary directory as cwd and HOME (deleted afterwards), stdin closed or fed,
inherited file descriptors closed, a wall-clock timeout (the whole process group is
SIGKILLed), stdout+stderr read incrementally and cut at ``max_output`` bytes, and, set by
the sandboxed interpreter itself before any user code runs, ``setrlimit`` limits on
address space (``memory_mb``), CPU seconds (``cpu_s``), processes (``max_procs``), file
size (``max_file_mb``), open files, and core dumps (0). (They are set there rather than in
a ``preexec_fn`` because CPython documents preexec_fn as unsafe in threaded callers such as
a TRL trainer or a Ray worker; the effect is the same: no user code runs unlimited.) When
started as root, it drops to a fresh unprivileged uid/gid (random in [2^30, 2^30 + 2^24))
before user code runs, because Linux never applies RLIMIT_NPROC to root, and so that the
process limit counts only this run's processes. ``cpu_s`` is per process.
Isolation backends, chosen at run time (``isolation="auto"``: first that works):

- ``bwrap`` (bubblewrap) and ``unshare`` (util-linux + mount + chroot): new network
  namespace (at most its own loopback: the network and the host's 127.0.0.1 services
  are unreachable), pid namespace
  (the program sees only its own processes; when it ends all of them die), mount
  namespace with a fresh root holding only read-only binds of the system (/usr, /etc,
  /lib*, the interpreter's prefix), a private tmpfs as /sandbox (cwd) and /tmp, and a
  new /proc. Host files outside those binds (home directories, the caller's data,
  secrets in temp dirs) are invisible; nothing the program writes reaches the host.
- ``none`` (fallback, with a one-time RuntimeWarning): resource limits only, plus a
  ``sys.addaudithook`` guard inside the child that exits with reason ``blocked`` on
  network calls, process creation, ``os.kill`` of other processes, reads outside the
  sandbox dir / interpreter / system libraries, and writes/deletes/chdir outside the
  sandbox dir; and a kernel-side guard that ``ctypes`` cannot skip (``boot.py``): a seccomp
  filter under which signals reach only the program itself or its group and ptrace-like calls
  fail, and, as root without the uid drop, no capabilities (the test runner's ``/proc`` entries
  stay shut).

What it does NOT protect against. It is not a security boundary against a determined
attacker: kernel exploits, side channels and namespace escapes are out of scope; in the
fallback, ``ctypes`` calls libc directly and bypasses the audit hook (the filesystem is then
readable and writable wherever the process's uid may, the network is reachable, and as root
without a privilege drop (interpreter in a directory only root can enter, e.g. /root/.pyenv)
the process limit does not apply and a ctypes-forked process that calls setsid() outlives the
run (with the drop, every process of the run's uid is killed at the end); for a non-root caller
the fallback's process limit counts every process of the caller's uid, and the setsid escape
applies too. docs/sandbox.md lists these holes with what closes each. tmpfs usage (at most
``4 * max_file_mb`` MB each for /sandbox and the root) is memory not counted by
``memory_mb``. The unit-test harness built on it (:mod:`rlvr.rewards.harness`) keeps the tests
and their verdicts out of the sandbox altogether.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import selectors
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.errors import UserError

REASONS = ("ok", "failed", "error", "incomplete", "timeout", "cpu_limit", "memory", "output_limit",
           "crashed", "killed", "blocked", "tampered", "sandbox_error")
ISOLATIONS = ("auto", "bwrap", "unshare", "none")
BLOCKED_EXIT = 113  # exit status of the fallback audit guard
UID_BASE = 1 << 30  # sandboxed programs started by root run as UID_BASE + randbelow(2**24)
_INNER_DIR = "/sandbox"
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE}
LIMIT_KEYS = ("timeout_s", "memory_mb", "cpu_s", "max_output", "max_procs", "max_file_mb", "isolation")


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one sandboxed run. ``reason`` is one of :data:`REASONS`."""

    ok: bool
    returncode: int | None  # negative: killed by that signal
    stdout: str
    stderr: str
    reason: str
    wall_s: float
    isolation: str = "none"
    cpu_s: float = 0.0
    tests_passed: int | None = None  # the test harness only (rlvr.rewards.harness)
    tests_total: int | None = None


# ----------------------------------------------------------------------------- child side
PROGRAMS = Path(__file__).parent / "sandbox_programs"
"""The programs the child interpreters run, kept as real files (so linters and readers see them) and
sent as text: ``boot.py`` here, ``server.py`` and ``runner.py`` in :mod:`rlvr.rewards.harness`."""


def program_text(name: str) -> str:
    """The source of ``sandbox_programs/<name>.py``, exactly as it is sent to a child interpreter."""
    return (PROGRAMS / f"{name}.py").read_text(encoding="utf-8")


# The bootstrap of every sandboxed run (``python -I -S -c _BOOT CONFIG_JSON``): builds the new root
# (unshare as root), moves the descriptors, drops privileges, forks a supervisor that reports the
# exact wait status, sets the rlimits, installs the fallback's audit guard, then runs main.py.
_BOOT = program_text("boot")

# Readable in the fallback besides the sandbox dir and sys.path (system libraries, zoneinfo, devices).
_READABLE = ["/usr/lib", "/usr/lib64", "/usr/share", "/lib", "/lib64", "/etc/localtime", "/dev/null",
             "/dev/zero", "/dev/urandom", "/proc/self/fd"]


# ----------------------------------------------------------------------------- backends
def _interpreter() -> str:
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _tool(name: str) -> str | None:
    """Absolute path of a system tool (the caller's PATH, then the sbin directories)."""
    path = os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin"
    return shutil.which(name, path=path)


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``['/a/b', '/a', '/']``."""
    out = []
    while path not in ("/", ""):
        path = os.path.dirname(path)
        out.append(path)
    return out


def _world_traversable(path: str) -> bool:
    """True when every ancestor of ``path`` can be entered by any user (o+x)."""
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in _ancestors(path))


def _system_binds(python: str) -> tuple[list[str], list[tuple[str, str]]]:
    """Read-only directories to bind and top-level symlinks to recreate in the new root."""
    prefix = os.path.dirname(os.path.dirname(python))
    dirs = [d for d in ("/usr", "/etc") if os.path.isdir(d)]
    links = []
    for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(top):
            links.append((os.readlink(top), top))
        elif os.path.isdir(top):
            dirs.append(top)
    if not any(prefix == d or prefix.startswith(d + "/") for d in dirs):
        dirs.append(prefix)
    return dirs, links


def _unshare_cmd(base: str, python: str, disk_mb: int, uid: int) -> list[str]:
    dirs, links = _system_binds(python)
    root, q = os.path.join(base, "root"), shlex.quote
    mount, chroot, setpriv = _tool("mount") or "mount", _tool("chroot") or "chroot", _tool("setpriv")
    lines = ["set -e", f"R={q(root)}", f"mount() {{ {q(mount)} \"$@\"; }}",
             f"mount -t tmpfs -o size={disk_mb}m,mode=755 rlvr-root \"$R\""]
    for d in dirs:
        lines.append(f"mkdir -p \"$R\"{q(d)}; mount --bind {q(d)} \"$R\"{q(d)}; "
                     f"mount -o remount,bind,ro \"$R\"{q(d)}")
    lines += [f"ln -s {q(t)} \"$R\"{q(top)}" for t, top in links]
    lines += ["mkdir -p \"$R/sandbox\" \"$R/tmp\" \"$R/proc\" \"$R/dev\"", "chmod 1777 \"$R/tmp\"",
              f"mount -t tmpfs -o size={disk_mb}m,mode=700,uid={uid},gid={uid} rlvr-work \"$R/sandbox\"",
              f"touch \"$R/sandbox/main.py\"; mount --bind {q(os.path.join(base, 'main.py'))} "
              "\"$R/sandbox/main.py\"; mount -o remount,bind,ro \"$R/sandbox/main.py\"",
              "mount -t proc proc \"$R/proc\"", "ln -s /proc/self/fd \"$R/dev/fd\""]
    for dev in ("null", "zero", "urandom", "random"):
        lines.append(f"touch \"$R/dev/{dev}\"; mount --bind /dev/{dev} \"$R/dev/{dev}\"")
    caps = "" if os.geteuid() == 0 or not setpriv else (
        f"{q(setpriv)} --bounding-set=-all --inh-caps=-all --no-new-privs -- ")
    lines.append(f"exec {q(chroot)} \"$R\" {caps}\"$@\"")
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return [_tool("unshare") or "unshare", *user, *_UNSHARE_FLAGS, "sh", "-c", "\n".join(lines), "sh"]


# New mount, network, pid, ipc and uts namespaces; the child is pid 1 of the new pid namespace and
# dies with unshare; mounts do not propagate back to the host.
_UNSHARE_FLAGS = ("--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--propagation", "private")


def _bwrap_cmd(base: str, python: str, disk_mb: int, uid: int) -> list[str]:
    dirs, links = _system_binds(python)
    cmd = [_tool("bwrap") or "bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if os.geteuid() == 0:  # no user namespace: keep just what the privilege drop needs
        cmd += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        cmd += ["--unshare-user"]
    for d in dirs:  # parents bwrap would create 0700, which nobody cannot enter
        parents = [p for p in _ancestors(d) if p != "/"]
        cmd += [x for p in reversed(parents) for x in ("--perms", "0755", "--dir", p)]
        cmd += ["--ro-bind", d, d]
    for target, top in links:
        cmd += ["--symlink", target, top]
    size = str(disk_mb << 20)
    cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
            "--perms", "0777", "--size", size, "--tmpfs", _INNER_DIR,
            "--ro-bind", os.path.join(base, "main.py"), f"{_INNER_DIR}/main.py", "--chdir", _INNER_DIR, "--"]
    return cmd


_probe_lock = threading.Lock()
_probe_cache: dict[str, str | None] = {}  # backend -> None if it works, else why not
_warned = False


def _probe(backend: str) -> str | None:
    """Why ``backend`` cannot run a trivial program here (None when it can); cached."""
    with _probe_lock:
        if backend not in _probe_cache:
            tool = {"bwrap": "bwrap", "unshare": "unshare"}[backend]
            if sys.platform != "linux" or not _tool(tool) or not _tool("sh"):
                _probe_cache[backend] = f"{tool} not found"
            else:
                r = run_program(f"print({backend!r})", backend, **check_limits(timeout_s=20.0, memory_mb=256,
                                                                          max_output=4096, max_file_mb=4))
                good = r.reason == "ok" and r.stdout.strip() == backend
                _probe_cache[backend] = None if good else f"{tool} failed: {r.stderr.strip()[-300:]}"
        return _probe_cache[backend]


def resolve_isolation(isolation: str = "auto") -> str:
    """The backend a run with ``isolation`` uses here: 'bwrap', 'unshare' or 'none'."""
    global _warned
    if isolation not in ISOLATIONS:
        raise UserError(f"unknown sandbox isolation {isolation!r}; choose one of {', '.join(ISOLATIONS)}")
    if isolation == "none":
        return "none"
    if isolation != "auto":
        why = _probe(isolation)
        if why:
            raise UserError(f"sandbox isolation {isolation!r} is unavailable ({why}); "
                            "install it (apt-get install bubblewrap / util-linux) or use isolation='auto'")
        return isolation
    for backend in ("bwrap", "unshare"):
        if _probe(backend) is None:
            return backend
    if not _warned:
        _warned = True
        warnings.warn("rlvr sandbox: neither bwrap nor unshare works here; running code with resource "
                      "limits and an audit hook only, which is NOT a security boundary "
                      "(install bubblewrap for filesystem and network isolation)", RuntimeWarning,
                      stacklevel=3)
    return "none"


# ----------------------------------------------------------------------------- parent side
def _peek_exited(pid: int) -> bool:
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _pump(proc: subprocess.Popen, side: dict[str, int], timeout_s: float, cap: int,
          done: Callable[[], bool] | None = None) -> tuple[dict[str, Any], str | None]:
    """Read stdout/stderr and the ``side`` pipes until exit, timeout or the output cap, kill the
    process group, reap. stdout+stderr together keep at most ``cap`` bytes, side pipes their last 4 KB."""
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs = {fd: bytearray() for fd in (out_fd, err_fd, *side.values())}
    sel = selectors.DefaultSelector()
    for fd in bufs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    deadline, killed = time.monotonic() + timeout_s, None

    def read_ready(wait: float) -> None:
        nonlocal killed
        for key, _ in sel.select(timeout=wait):
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                sel.unregister(key.fd)
                continue
            bufs[key.fd] += data
            if key.fd not in (out_fd, err_fd):
                del bufs[key.fd][:-4096]
            elif len(bufs[out_fd]) + len(bufs[err_fd]) > cap:
                killed = killed or "output_limit"

    while killed is None and not _peek_exited(proc.pid):
        left = deadline - time.monotonic()
        if left <= 0:
            killed = "timeout"
        elif done is not None and done():
            killed = "done"
        elif sel.get_map():
            read_ready(min(left, 0.05))
        else:
            time.sleep(min(left, 0.01))
    _killpg(proc.pid)
    drain_until = time.monotonic() + 1.0
    while sel.get_map() and time.monotonic() < drain_until and killed != "output_limit":
        read_ready(0.05)
    sel.close()
    try:
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode, cpu = os.waitstatus_to_exitcode(status), rusage.ru_utime + rusage.ru_stime
    except ChildProcessError:  # reaped elsewhere (a blanket os.wait() in the caller)
        proc.returncode, cpu = -signal.SIGKILL, 0.0
    out, err = bytes(bufs[out_fd][:cap]), bytes(bufs[err_fd][: max(0, cap - len(bufs[out_fd]))])
    io = {"stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace"),
          "cpu_s": cpu}
    io.update({name: bytes(bufs[fd]) for name, fd in side.items()})
    return io, killed


def _classify(rc: int, killed: str | None, io: dict, cpu_limit: float) -> str:
    if killed:
        return killed
    if rc < 0:
        sig = -rc
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and io["cpu_s"] >= 0.8 * cpu_limit):
            return "cpu_limit"
        return "crashed" if sig in _CRASH_SIGNALS else "killed"
    if rc == BLOCKED_EXIT and "sandbox: blocked" in io["stderr"]:
        return "blocked"
    if "MemoryError" in io["stderr"] and rc != 0:
        return "memory"
    return "ok" if rc == 0 else "error"


def _command(base: str, isolation: str, limits: dict[str, Any], status_fd: int, fds: dict[int, int]
             ) -> tuple[list, dict, int]:
    """argv, environment and the uid the program will run as (0: no drop) for ``base``/main.py."""
    python, root_user = _interpreter(), os.geteuid() == 0
    disk_mb, cpu = 4 * limits["max_file_mb"], math.ceil(limits["cpu_s"])
    setup: dict[str, Any] = {}
    uid = UID_BASE + secrets.randbelow(1 << 24) if root_user else 0
    if isolation == "none":  # the interpreter must stay readable after the drop
        inner = os.path.join(base, "work")
        os.mkdir(inner, 0o700)
        shutil.move(os.path.join(base, "main.py"), os.path.join(inner, "main.py"))
        wrap, drop = [], uid if _world_traversable(python) else 0
    else:
        inner, drop = _INNER_DIR, uid
        os.mkdir(os.path.join(base, "root"), 0o755)
        if isolation == "unshare" and root_user:  # the new root is built by the bootstrap itself
            wrap = [_tool("unshare") or "unshare", *_UNSHARE_FLAGS]
            dirs, links = _system_binds(python)
            setup = {"root": os.path.join(base, "root"), "root_spec": {
                "disk_mb": disk_mb, "dirs": dirs, "links": links, "uid": uid, "main": os.path.join(base, "main.py")}}
        else:
            wrap = (_bwrap_cmd if isolation == "bwrap" else _unshare_cmd)(base, python, disk_mb, uid)
    rlimits = {"RLIMIT_AS": [limits["memory_mb"] << 20] * 2, "RLIMIT_CPU": [cpu, cpu + 1],
               "RLIMIT_NPROC": [limits["max_procs"]] * 2, "RLIMIT_FSIZE": [limits["max_file_mb"] << 20] * 2,
               "RLIMIT_CORE": [0, 0], "RLIMIT_NOFILE": [256, 256]}
    # "run" is unused by the child; it lets ps (and the tests) tell runs apart
    cfg = {**setup, "run": base, "dir": inner, "limits": rlimits, "drop": drop, "guard": isolation == "none",
           "status_fd": status_fd, "fds": {str(t): src for t, src in fds.items()},
           "readable": [*_READABLE, sys.base_prefix, sys.base_exec_prefix]}
    child = [python, "-I", "-S", "-X", "utf8", "-X", "faulthandler", "-c", _BOOT, json.dumps(cfg)]
    argv = [_tool("sh") or "/bin/sh", "-c", 'ulimit -c 0; umask 022; exec "$@"', "sh", *wrap, *child]
    env = {"PATH": "/usr/bin:/bin", "HOME": inner, "TMPDIR": "/tmp" if wrap else inner, "LANG": "C.UTF-8",
           "USER": "sandbox", "LOGNAME": "sandbox"}
    return argv, env, drop


def run_program(program: str, isolation: str, *, stdin: bytes = b"", fds: dict[int, int] | None = None,
                done: Callable[[], bool] | None = None, **limits: Any) -> SandboxResult:
    """Run ``program`` as main.py under backend ``isolation`` (already resolved) and ``limits``
    (the keywords of :func:`check_limits`).

    ``fds`` maps a descriptor number the program sees (3 and up) to a descriptor of this process
    (a pipe end the caller made); this process's copies are closed once the program has started.
    ``done()``, polled while the program runs, ends it early (SIGKILL to its group, reason as if it
    had exited on its own) once true: the harness of :mod:`rlvr.rewards.harness` uses it to stop a
    solution server whose tests have all run."""
    fds = dict(fds or {})
    t0, base = time.monotonic(), tempfile.mkdtemp(prefix="rlvr-sbx-")
    st_r, st_w = os.pipe()  # the supervisor's report: exact wait status and CPU seconds
    open_fds = [st_r, st_w, *fds.values()]
    try:
        if any(t < 3 for t in fds):
            raise ValueError("fds targets must be 3 or more")
        os.chmod(base, 0o755)
        with open(os.path.join(base, "main.py"), "w", encoding="utf-8") as f:
            f.write(program)
        os.chmod(os.path.join(base, "main.py"), 0o644)
        argv, env, uid = _command(base, isolation, limits, st_w, fds)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=base, env=env, start_new_session=True,
                                    close_fds=True, pass_fds=(st_w, *fds.values()))
        except OSError as exc:
            return SandboxResult(False, None, "", str(exc), "sandbox_error", time.monotonic() - t0, isolation)
        for fd in (st_w, *fds.values()):
            os.close(fd)
            open_fds.remove(fd)
        threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
        try:
            io, killed = _pump(proc, {"status": st_r}, limits["timeout_s"], limits["max_output"], done)
        except BaseException:  # KeyboardInterrupt while waiting: leave nothing running
            _killpg(proc.pid)
            proc.wait()
            raise
        finally:
            proc.stdout.close()
            proc.stderr.close()
        if isolation == "none" and uid:
            _kill_uid(uid)
        rc, report = proc.returncode, io["status"].decode("ascii", "replace").split()
        if len(report) == 2:  # the supervisor's exact wait status and CPU seconds of the program
            rc, io["cpu_s"] = os.waitstatus_to_exitcode(int(report[0])), float(report[1])
        if killed == "done":  # stopped by the caller: judged by its exit, if it had exited
            killed, rc = None, rc if len(report) == 2 else 0
        reason = _classify(rc, killed, io, limits["cpu_s"])
        return SandboxResult(reason == "ok", rc, io["stdout"], io["stderr"], reason, time.monotonic() - t0,
                             isolation, io["cpu_s"])
    finally:
        for fd in open_fds:
            os.close(fd)
        shutil.rmtree(base, ignore_errors=True)


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of the run's private ``uid``: in the fallback, a process that left
    the process group (setsid through ctypes) would otherwise outlive the run."""
    try:
        subprocess.run([_tool("sh") or "/bin/sh", "-c", "kill -9 -1"], user=uid, group=uid, extra_groups=[],
                       env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        pass


def _feed(pipe: Any, data: bytes) -> None:
    try:
        if data:
            pipe.write(data)
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def run_sandboxed(code: str, *, timeout_s: float = 5.0, memory_mb: int = 512, cpu_s: float | None = None,
                  max_output: int = 64_000, max_procs: int = 32, max_file_mb: int = 16,
                  isolation: str = "auto", stdin: str = "") -> SandboxResult:
    """Run Python source ``code`` in the sandbox; ``ok`` iff it exits 0 within every limit.

    ``cpu_s`` defaults to ``timeout_s`` (rounded up to whole seconds by the kernel limit);
    ``max_output`` caps stdout+stderr together, in bytes; ``max_procs`` counts processes
    and threads; ``isolation`` is 'auto' | 'bwrap' | 'unshare' | 'none'.
    """
    limits = check_limits(timeout_s=timeout_s, memory_mb=memory_mb, cpu_s=cpu_s, max_output=max_output,
                           max_procs=max_procs, max_file_mb=max_file_mb)
    return run_program(code, resolve_isolation(isolation), stdin=stdin.encode("utf-8"), **limits)


def check_limits(*, timeout_s: float = 5.0, memory_mb: int = 512, cpu_s: float | None = None,
                  max_output: int = 64_000, max_procs: int = 32, max_file_mb: int = 16) -> dict[str, Any]:
    """Validated limits, with ``cpu_s`` defaulting to ``timeout_s``."""
    if sys.platform != "linux":
        raise UserError(f"the code sandbox needs Linux (this is {sys.platform}); run code rewards on Linux")
    if timeout_s <= 0 or memory_mb < 32 or max_procs < 1 or max_file_mb < 1 or max_output < 0:
        raise UserError("sandbox limits out of range (need timeout_s > 0, memory_mb >= 32, max_procs >= 1, "
                        "max_file_mb >= 1, max_output >= 0); fix the arguments")
    cpu_s = timeout_s if cpu_s is None else cpu_s
    if cpu_s <= 0:
        raise UserError(f"sandbox cpu_s must be > 0, got {cpu_s}; fix the argument")
    return {"timeout_s": float(timeout_s), "memory_mb": int(memory_mb), "cpu_s": float(cpu_s),
            "max_output": int(max_output), "max_procs": int(max_procs), "max_file_mb": int(max_file_mb)}
