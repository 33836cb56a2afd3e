
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
if cfg["guard"]:
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
