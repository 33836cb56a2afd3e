
import json as _json, os as _os, sys as _sys, traceback as _tb
def _send(obj):
    data = (_json.dumps(obj, separators=(",", ":")) + "\n").encode()
    while data:
        data = data[_os.write(_RSP_FD, data):]
_g = {"__name__": "solution", "__builtins__": __builtins__}
_err = None
try:
    exec(compile(_SOLUTION, "solution.py", "exec"), _g)
except BaseException as _e:
    _err = f"{type(_e).__name__}: {_e}"[:300]
    _tb.print_exc()
_send({"names": sorted(k for k, v in list(_g.items()) if type(k) is str and callable(v)), "error": _err})
_rf = _os.fdopen(_REQ_FD, "rb")
while True:
    _line = _rf.readline()
    if not _line:
        break
    try:
        _req = _json.loads(_line)
        _value = _g[_req["fn"]](*from_wire(_req["args"]), **from_wire(_req["kwargs"]))
    except BaseException as _e:
        _send({"raised": type(_e).__name__, "msg": str(_e)[:200]})
        continue
    try:
        _send({"ok": to_wire(_value)})
    except BaseException as _e:
        _send({"bad": f"{type(_e).__name__}: {_e}"[:200]})
_sys.stdout.flush()
_os._exit(0)
