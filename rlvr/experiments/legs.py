"""The wall time of each part of an experiment, as measured: one record per *leg*, an invocation of
``rlvr reproduce NAME`` that may train or evaluate (``--part N``, ``--max-minutes`` legs, a whole
run; never ``--page-only`` or ``--status``).

A leg appends two lines to ``OUT/legs.jsonl``: ``{"event": "start", "id", "parts", "start",
"machine", "load", "max_minutes", "host", "pid"}`` when it begins and ``{"event": "end", "id", "end", "minutes",
"outcome", "load"}`` when it ends (``outcome``: "complete", "paused" on the time budget, "incomplete"
(a model failed or a cell is missing), or the exception's name). A leg killed outright writes no end:
it reads "killed", its minutes unknown ("running" while its process still runs on this host).
``parts`` is the list of 1-based parts the leg ran, or ``null`` for a whole run; ``load`` the 1-, 5-
and 15-minute load averages (other work on the cores slows a part); ``host`` and ``pid`` tell a
running leg from a killed one. ``--publish`` copies the file beside the cells and ``--resume-published`` merges it
back (:func:`merge_legs`), so a part's legs on several machines stay together.

The page's section "Wall time per part" (:func:`part_lines`) sums each part's legs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
from pathlib import Path

LEGS = "legs.jsonl"
"""The file of legs in an output folder (and beside the published cells)."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _append(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:  # one short line per write: appends do not interleave
        f.write(json.dumps(record) + "\n")


def start_leg(out: Path, parts: tuple[int, ...] | None, machine: str, max_minutes: float | None = None) -> dict:
    """Record that a leg running ``parts`` (None: the whole experiment) starts now -> the start
    record (pass it to :func:`end_leg`)."""
    rec = {"event": "start", "id": uuid.uuid4().hex[:12], "parts": None if parts is None else list(parts),
           "start": _now(), "t": time.time(), "machine": machine, "load": _load(), "max_minutes": max_minutes,
           "host": socket.gethostname(), "pid": os.getpid()}
    _append(out / LEGS, rec)
    return rec


def end_leg(out: Path, leg: dict, outcome: str) -> None:
    """Record the end of ``leg`` (its :func:`start_leg` record) with ``outcome``."""
    _append(out / LEGS, {"event": "end", "id": leg["id"], "end": _now(),
                         "minutes": round((time.time() - leg["t"]) / 60, 2), "outcome": outcome, "load": _load()})


def _alive(leg: dict) -> bool:
    """Whether the process that started ``leg`` still runs (on this host)."""
    if leg.get("host") != socket.gethostname() or not isinstance(leg.get("pid"), int):
        return False
    try:
        os.kill(leg["pid"], 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, not ours to signal
        return True
    return True


def read_legs(path: Path) -> list[dict]:
    """The legs of a legs file, in start order: each start record with ``end``, ``minutes``,
    ``outcome`` and ``load_end`` from its end record (when there is none, ``outcome`` is "running"
    while the process that started it runs on this host, else "killed", and the rest None).
    Unreadable lines are skipped; [] when the file is absent."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    starts: dict[str, dict] = {}
    ends: dict[str, dict] = {}
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill mid-write
        if not isinstance(rec, dict) or "id" not in rec:
            continue
        (starts if rec.get("event") == "start" else ends if rec.get("event") == "end" else {})[rec["id"]] = rec
    legs = []
    for i, s in starts.items():
        e = ends.get(i, {})
        outcome = e.get("outcome") or ("running" if _alive(s) else "killed")
        legs.append({**s, "end": e.get("end"), "minutes": e.get("minutes"), "outcome": outcome,
                     "load_end": e.get("load")})
    return sorted(legs, key=lambda leg: leg["start"])


def merge_legs(src: Path, dest: Path) -> int:
    """Append the lines of legs file ``src`` whose (event, id) ``dest`` lacks -> how many were added."""
    try:
        new = src.read_text().splitlines()
    except OSError:
        return 0
    try:
        have = dest.read_text().splitlines()
    except OSError:
        have = []

    def key(line: str):
        try:
            rec = json.loads(line)
            return rec.get("event"), rec.get("id")
        except (ValueError, AttributeError):
            return None

    seen = {key(line) for line in have}
    add = [line for line in new if (k := key(line)) is not None and k not in seen]
    if add:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with dest.open("a") as f:
            f.write("".join(line + "\n" for line in add))
    return len(add)


def cpu_name(machine: str) -> str:
    """The CPU of a machine line, e.g. "AMD EPYC family 26 model 2" from "AMD EPYC (family 26 model 2;
    avx2 ...), 2 cores, ..."; the text before the first comma when the line has no family."""
    m = re.match(r"(.*?) \(family (\S+) model ([^;)]+)", machine)
    return f"{m[1]} family {m[2]} model {m[3]}" if m else machine.split(",")[0]


def part_rows(legs: list[dict], declared: list[float | None]) -> list[dict]:
    """Per group of parts that ran together (one part, or ``--part 9,18`` as one group, or "all"):
    {"parts": "3" | "9+18" | "all", "declared": the declared minutes summed (None if any is
    unknown), "minutes": the finished legs' minutes summed (None if none finished), "legs": how
    many, "killed": how many ended without a record (and no longer run), "last": the outcome of
    its last leg (None: no leg), "machines": the machine lines in order of first use}. Groups in part order, each
    declared part listed once (parts no leg ran: minutes None, legs 0)."""
    groups: dict[tuple[int, ...] | None, list[dict]] = {}
    for leg in legs:
        groups.setdefault(None if leg["parts"] is None else tuple(leg["parts"]), []).append(leg)
    ran = set(range(1, len(declared) + 1)) if None in groups else {p for g in groups if g for p in g}
    for p in range(1, len(declared) + 1):  # a whole run (None) covers every part
        if p not in ran:
            groups.setdefault((p,), [])
    rows = []
    for g, gl in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or ())):
        idx = g if g is not None else tuple(range(1, len(declared) + 1))
        dec = [declared[p - 1] if 0 < p <= len(declared) else None for p in idx]
        finished = [leg["minutes"] for leg in gl if leg["minutes"] is not None]
        rows.append({"parts": "all" if g is None else "+".join(map(str, g)),
                     "declared": sum(dec) if dec and None not in dec else None,
                     "minutes": round(sum(finished), 2) if finished else None, "legs": len(gl),
                     "killed": sum(leg["outcome"] == "killed" for leg in gl),
                     "last": gl[-1]["outcome"] if gl else None,
                     "machines": list(dict.fromkeys(leg.get("machine") or "not recorded" for leg in gl))})
    return rows


def rows_by_part(legs: list[dict], declared: list[float | None]) -> dict[str, dict]:
    """:func:`part_rows` keyed by their ``parts`` label ("3", "9+18", "all"): what ``--status`` and the
    list look up one part in."""
    return {g["parts"]: g for g in part_rows(legs, declared)}


def part_lines(legs: list[dict], declared: list[float | None], estimated: bool) -> list[str]:
    """The page's "Wall time per part": one row per :func:`part_rows` group and the machines'
    legend; [] when no leg was recorded."""
    if not legs:
        return []
    rows = part_rows(legs, declared)
    machines: dict[str, str] = {}
    body = []
    for r in rows:
        labels = ", ".join(machines.setdefault(m, f"L{len(machines) + 1}") for m in r["machines"]) or "-"
        dec = "-" if r["declared"] is None else f"{'~' if estimated else ''}{r['declared']:.0f}"
        got = "-" if r["minutes"] is None else f"{r['minutes']:.1f}"
        legs_text = f"{r['legs']}" + (f" ({r['killed']} killed)" if r["killed"] else "")
        body.append(f"| {r['parts']} | {dec} | {got} | {legs_text} | {r['last'] or 'not run'} | {labels} |")
    imported: dict[str, list[str]] = {}  # source -> parts whose legs were imported from it
    for leg in legs:
        if leg.get("source"):
            imported.setdefault(leg["source"], []).append("all" if leg["parts"] is None else
                                                          "+".join(map(str, leg["parts"])))
    return ["Each invocation that trains or evaluates is a leg (`legs.jsonl` beside the cells: start, end, "
            "outcome, machine, load average). A part's minutes are its finished legs' wall time summed, "
            "reused cells costing nothing; a leg killed before its end is counted as killed, its minutes "
            "unknown (one still running reads running). The last leg's outcome: complete (every cell it "
            "looked for is on disk or failed to build), paused (--max-minutes), incomplete, killed, or the "
            f"error that ended it. Declared minutes are the declaration's{' estimates' if estimated else ''}.", "",
            "| part | declared min | measured min | legs | last leg | machine |", "|---|---|---|---|---|---|",
            *body, "", *[f"- {label}: {line}" for line, label in machines.items()],
            *[f"- legs of parts {_spans(ps)} not recorded by rlvr, imported from {s}"
              for s, ps in imported.items()], ""]


def _spans(groups: list[str]) -> str:
    """Part groups as text, runs of single parts as ranges: ["1", "2", "3", "5", "6+7"] -> "1-3, 5, 6+7"."""
    out: list[list] = []
    for g in dict.fromkeys(groups):
        if g.isdigit() and out and isinstance(out[-1][1], int) and int(g) == out[-1][1] + 1:
            out[-1][1] = int(g)
        else:
            out.append([g, int(g)] if g.isdigit() else [g, None])
    return ", ".join(a if b is None or str(b) == a else f"{a}-{b}" for a, b in out)
