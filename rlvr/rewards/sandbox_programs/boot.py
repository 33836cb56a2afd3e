
import fcntl, json, os, resource, sys
cfg = json.loads(sys.argv[1])
if cfg.get("root"):  # unshare as root: build the new root here (mount(2) calls, no shell), then chroot
    import ctypes
    _libc = ctypes.CDLL(None, use_errno=True)
    def _mount(src, tgt, fstype, flags, data=None):
        if _libc.mount(src and src.encode(), tgt.encode(), fstype and fstype.encode(), flags,
                       data and data.encode()) != 0:
            raise OSError(ctypes.get_errno(), f"mount {tgt}: {os.strerror(ctypes.get_errno())}")
    _BIND, _REMOUNT, _RDONLY, _NOSUID, _NODEV = 4096, 32, 1, 2, 4
    _r, _spec = cfg["root"], cfg["root_spec"]
    _mount("rlvr-root", _r, "tmpfs", 0, f"size={_spec['disk_mb']}m,mode=755")
    for _d in _spec["dirs"]:
        os.makedirs(_r + _d, exist_ok=True)
        _mount(_d, _r + _d, None, _BIND)
        _mount(None, _r + _d, None, _BIND | _REMOUNT | _RDONLY)
    for _target, _top in _spec["links"]:
        os.symlink(_target, _r + _top)
    for _d in ("/sandbox", "/tmp", "/proc", "/dev"):
        os.makedirs(_r + _d, exist_ok=True)
    os.chmod(_r + "/tmp", 0o1777)
    _uid = _spec["uid"]
    _mount("rlvr-work", _r + "/sandbox", "tmpfs", 0, f"size={_spec['disk_mb']}m,mode=700,uid={_uid},gid={_uid}")
    open(_r + "/sandbox/main.py", "w").close()
    _mount(_spec["main"], _r + "/sandbox/main.py", None, _BIND)
    _mount(None, _r + "/sandbox/main.py", None, _BIND | _REMOUNT | _RDONLY)
    _mount("proc", _r + "/proc", "proc", _NOSUID | _NODEV)
    os.symlink("/proc/self/fd", _r + "/dev/fd")
    for _dev in ("null", "zero", "urandom", "random"):
        open(_r + "/dev/" + _dev, "w").close()
        _mount("/dev/" + _dev, _r + "/dev/" + _dev, None, _BIND)
    os.chroot(_r)
    del _libc, _mount
os.chdir(cfg["dir"])
st_fd, fd_map = cfg["status_fd"], cfg["fds"]
status_fd = fcntl.fcntl(st_fd, fcntl.F_DUPFD, 20)
os.close(st_fd)
moved = {int(t): fcntl.fcntl(src, fcntl.F_DUPFD, 20) for t, src in fd_map.items()}
for src in fd_map.values():
    os.close(src)
for t, fd in moved.items():
    os.dup2(fd, t); os.close(fd)
if cfg["drop"]:
    try:
        os.chown(".", cfg["drop"], cfg["drop"])
    except OSError:
        pass
    os.setgroups([]); os.setgid(cfg["drop"]); os.setuid(cfg["drop"])
pid = os.fork()
if pid:  # supervisor: report the exact wait status of the program, then leave
    for t in moved:
        os.close(t)
    _, status, usage = os.wait4(pid, 0)
    os.write(status_fd, f"{status} {usage.ru_utime + usage.ru_stime}".encode())
    os._exit(0)
os.close(status_fd)
for name, (soft, hard) in cfg["limits"].items():
    resource.setrlimit(getattr(resource, name), (soft, hard))
# The fallback's kernel-side guard (ctypes skips the audit hook below, not these). A seccomp filter:
# signals only to this process or its own group (kill, tkill, tgkill, rt_(tg)sigqueueinfo) and no
# ptrace, process_vm_readv/writev or pidfd_open/getfd/send_signal (EPERM). As root without the uid
# drop, every capability is dropped too (no CAP_SYS_PTRACE: the runner's /proc/<pid>/mem and fd/ stay
# shut). Best effort: on another machine, or a kernel without seccomp, the run goes on without it.
_SECCOMP = {  # machine: (AUDIT_ARCH, syscalls allowed on itself only, syscalls refused)
    "x86_64": (0xC000003E, (62, 129, 200, 234, 297), (101, 310, 311, 424, 434, 438)),
    "aarch64": (0xC00000B7, (129, 138, 130, 131, 240), (117, 270, 271, 424, 434, 438)),
}
def _harden(me):
    import ctypes, struct
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: no exec regains what is dropped here
    if os.uname().machine in _SECCOMP:
        audit, own, never = _SECCOMP[os.uname().machine]
        ld, jeq, jge, ret, allow, deny = 0x20, 0x15, 0x35, 0x06, 0x7FFF0000, 0x00050001  # deny: EPERM
        body = [(ld, 0, 0, 4), (jeq, 0, "deny", audit), (ld, 0, 0, 0), (jge, "deny", 0, 0x40000000)]
        body += [(jeq, "own", 0, nr) for nr in own] + [(jeq, "deny", 0, nr) for nr in never]
        body += [(ret, 0, 0, allow), "own", (ld, 0, 0, 16), (jeq, "allow", 0, me), (jeq, "allow", "deny", 0),
                 "deny", (ret, 0, 0, deny), "allow", (ret, 0, 0, allow)]
        at, prog = {}, []
        for ins in body:  # a label names the index of the instruction after it
            if type(ins) is str:
                at[ins] = len(prog)
            else:
                prog.append(ins)
        jump = lambda to, i: at[to] - i - 1 if to else 0
        code = b"".join(struct.pack("HBBI", op, jump(t, i), jump(f, i), k) for i, (op, t, f, k) in enumerate(prog))
        buf = ctypes.create_string_buffer(code, len(code))
        libc.prctl(22, 2, struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(buf)), 0, 0)  # SECCOMP_MODE_FILTER
    if os.geteuid() == 0:  # no uid drop: empty the bounding set, then every capability set
        with open("/proc/sys/kernel/cap_last_cap") as f:
            for cap in range(int(f.read()) + 1):
                libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
        libc.capset(struct.pack("Ii", 0x20080522, 0), bytes(24))  # _LINUX_CAPABILITY_VERSION_3
if cfg["guard"]:
    _harden(os.getpid())
    def _guard(root, readable):
        def inside(p, dirs):
            return any(p == d or p.startswith(d.rstrip("/") + "/") for d in dirs)
        def resolve(p):
            p = os.fsdecode(p)
            if ".." in p.split("/") and not os.path.isabs(p):
                deny("relative path with '..'", p)
            return os.path.realpath(p)
        def deny(what, arg):
            os.write(2, f"sandbox: blocked {what} {arg!r}\n".encode())
            os._exit(113)
        procs = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                 "os.forkpty", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                 "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "os.chroot"}
        writes = {"os.remove": 1, "os.rmdir": 1, "os.rename": 2, "os.replace": 2, "os.link": 2,
                  "os.symlink": 2, "os.truncate": 1, "os.chmod": 1, "os.chown": 1, "os.mkdir": 1,
                  "os.utime": 1, "shutil.rmtree": 1, "os.setxattr": 1, "os.removexattr": 1, "os.chdir": 1}
        wflags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
        def hook(event, args):
            if event in procs:
                deny(event, args[:2])
            elif event in ("os.kill", "os.killpg", "signal.pthread_kill") and args[0] != os.getpid():
                deny(event, args[:2])
            elif event in writes:
                for p in args[: writes[event]]:
                    if isinstance(p, (str, bytes, os.PathLike)) and not inside(resolve(p), [root]):
                        deny(event, p)
            elif event in ("open", "os.listdir", "os.scandir") and isinstance(args[0], (str, bytes)):
                p = resolve(args[0])
                mode, flags = (args[1], args[2]) if event == "open" else ("r", 0)
                write = bool((flags or 0) & wflags) or any(c in (mode or "") for c in "wax+")
                if not inside(p, [root]) and (write or not inside(p, readable) or
                                              (event == "open" and os.path.isdir(p))):
                    deny("write" if write else "read", p)
        sys.addaudithook(hook)
    _guard(os.path.realpath(cfg["dir"]), [os.path.realpath(p) for p in cfg["readable"] + sys.path if p])
del cfg
sys.argv = ["main.py"]
with open("main.py", encoding="utf-8") as _f:
    _src = _f.read()
exec(compile(_src, "main.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
