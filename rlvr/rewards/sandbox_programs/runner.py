
import builtins, json, keyword, math, os, resource, sys
cfg = json.loads(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (cfg["memory"], cfg["memory"]))
resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu"], cfg["cpu"] + 1))
try:  # PR_SET_DUMPABLE = 4: no ptrace or /proc/<pid>/mem for processes of the same uid
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
except Exception:
    pass
payload = json.loads(sys.stdin.buffer.read().decode("utf-8"))
report_fd = os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
rsp = os.fdopen(cfg["rsp"], "rb")

class SolutionGone(Exception):
    """The solution server ended (or broke the protocol) before answering."""

class SolutionError(Exception):
    """The solution raised an exception that is not a builtin one, or one that steers control flow
    (StopIteration would end an ``all(map(f, xs))`` early, as a pass), or returned a bad value."""

CONTROL_FLOW = (AssertionError, StopIteration, StopAsyncIteration)  # never re-raised as themselves

state = {"gone": None, "calls": 0}

def receive():
    if state["gone"]:
        raise SolutionGone(state["gone"])
    line = rsp.readline(cfg["max_line"] + 1)
    if not line or len(line) > cfg["max_line"] or not line.endswith(b"\n"):
        state["gone"] = "ended" if not line else "message too long"
        raise SolutionGone(state["gone"])
    try:  # bounded: the nesting is measured before json.loads could recurse
        msg = json.loads(line) if json_depth_ok(line) else None
    except Exception:  # any line the solution writes: malformed, huge ints, out of memory
        msg = None
    if type(msg) is not dict or len(msg) not in (1, 2):
        state["gone"] = "broke the protocol"
        raise SolutionGone(state["gone"])
    return msg

def finite(value):
    """False when a float anywhere in the decoded plain ``value`` is NaN or infinite."""
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is dict:
        return all(map(finite, value)) and all(map(finite, value.values()))
    return all(map(finite, value)) if type(value) in (list, tuple, set, frozenset) else True

def proxy(name):
    def call(*args, **kwargs):
        data = json.dumps({"fn": name, "args": to_wire(list(args)), "kwargs": to_wire(dict(kwargs))}) + "\n"
        state["calls"] += 1
        try:
            os.write(cfg["req"], data.encode())
        except OSError:
            state["gone"] = state["gone"] or "ended"
        msg = receive()
        if "ok" in msg:
            try:
                value = from_wire(msg["ok"])
            except NotPlain as exc:
                raise SolutionError(f"{name} returned a malformed value: {exc}") from None
            if payload["finite_only"] and not finite(value):  # NaN passes `not abs(x - y) > tol`
                raise SolutionError(f"{name} returned a NaN or infinite float (no test names inf or nan)")
            return value
        if "bad" in msg:
            raise SolutionError(f"{name} returned a value that is not plain data: {str(msg['bad'])[:200]}")
        kind = msg.get("raised")
        exc = getattr(builtins, kind, None) if type(kind) is str else None
        text = f"{name} raised {str(kind)[:80]}: {str(msg.get('msg', ''))[:200]}"
        if isinstance(exc, type) and issubclass(exc, Exception) and not issubclass(exc, CONTROL_FLOW):
            raise exc(text)
        raise SolutionError(text)
    call.__name__ = name
    return call

errors, passed = [], 0
try:
    hello = receive()
    names = hello.get("names") if type(hello.get("names")) is list else []
    if hello.get("error") is not None:
        errors.append(f"solution: {str(hello['error'])[:300]}")
except SolutionGone:
    names = []
ns = {"__name__": "__rlvr_tests__", "__builtins__": builtins}
try:
    exec(compile(payload["context"], "context.py", "exec"), ns)
    context_ok = True
except BaseException as exc:
    errors.append(f"context: {type(exc).__name__}: {exc}"[:300])
    context_ok = False
explicit = payload["entry_points"] is not None
for name in (payload["entry_points"] if explicit else names):
    if (type(name) is str and name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")
            and not hasattr(builtins, name) and (explicit or name not in ns)):
        ns[name] = proxy(name)
for i, test in enumerate(payload["tests"]):
    if not context_ok:
        break
    try:
        exec(compile(test, f"test_{i}.py", "exec"), ns)
        passed += 1
    except BaseException as exc:
        if len(errors) < 5:
            errors.append(f"test {i}: {type(exc).__name__}: {exc}"[:300])
report = {"passed": passed, "total": len(payload["tests"]), "errors": errors, "gone": state["gone"],
          "calls": state["calls"], "context_ok": context_ok, "nonce": payload["nonce"]}
os.write(report_fd, (json.dumps(report) + "\n").encode())
os._exit(0)
