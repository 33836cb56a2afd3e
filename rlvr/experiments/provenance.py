"""When each claim was declared, from the git history of its declaration file, and whether its cells
were computed before that (a *post hoc* claim: shown as such, never counted; docs/commands/reproduce.md).

A claim is declared by the commit that added it or last changed what decides its verdict: its
``measure``, ``args`` (an evaluation named by its protocol, so renaming it changes nothing),
``expect``, ``bound`` and ``kind`` (:func:`fingerprint`; rewording the sentence or the paper's reference
changes nothing either). A declaration file that differs from the last commit declares
its changed claims now ("uncommitted"). Without git, or in a shallow clone whose oldest commit
already holds the claim, the declaration time is unknown: "provenance unknown", never an error.

A cell's time is recorded when it is computed (``computed_at`` beside its ``stats.json``,
:func:`rlvr.experiments.cells.cell_time`); published records older than that carry none, and then the
first commit whose published page shows the cell (an evaluation's pass@k curve of the model, or the
model among those built) bounds it from above (:func:`first_seen`).
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it (the same data and the same errors as SafeLoader on
every past version of the declarations; several times faster), else the pure-Python one."""

EXPLORATORY = "declared exploratory (its data were seen before it was declared)"
"""The post hoc reason of a claim of kind ``exploratory``, whatever its history shows."""

DECIDING = ("measure", "args", "expect", "kind", "bound")
"""The keys of a claim that decide its verdict: a change to any of them declares it again (``bound``
only where it is set: a claim without one keeps the fingerprint it had before bounds existed)."""


@dataclass(frozen=True)
class Declared:
    """When a claim was declared: ``time`` (ISO 8601, '' unknown), ``commit`` (short hash, '' when
    uncommitted or unknown) and ``how``: added | changed | uncommitted | unknown (with why)."""

    time: str
    commit: str
    how: str

    def text(self) -> str:
        """``declared 2026-12-04 18:53 UTC (ac63c10, added)`` or ``provenance unknown: why``."""
        if not self.time:
            return f"provenance {self.how}"
        at = utc(self.time).strftime("%Y-%m-%d %H:%M UTC")
        return f"declared {at} ({self.commit + ', ' if self.commit else ''}{self.how})"


UNKNOWN = Declared("", "", "unknown: no git history of the declaration here")


def utc(iso: str) -> datetime:
    """An ISO 8601 time (with or without an offset; naive = UTC) as an aware UTC datetime."""
    t = datetime.fromisoformat(iso)
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC)


def now() -> str:
    """The current time, ISO 8601 UTC to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def fingerprint(claim: dict, evaluations: dict | None = None) -> str:
    """What decides a claim's verdict, as canonical JSON (``kind`` defaults to finding); with the
    declaration's ``evaluations``, the evaluations its args name are replaced by their protocols."""
    decided = {k: claim.get(k, "finding" if k == "kind" else None) for k in DECIDING}
    if not decided["bound"]:
        del decided["bound"]
    args = dict(decided["args"] or {})
    for key in ("eval", "dynamics"):
        ev = (evaluations or {}).get(args.get(key))
        if isinstance(ev, dict):
            args[key] = {k: v for k, v in ev.items() if k != "models"}
    return json.dumps({**decided, "args": args}, sort_keys=True, default=str)


def _git(repo: Path, *args: str) -> str | None:
    """``git -C repo args`` -> stdout, or None when git is missing or the command fails."""
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _history(path: Path) -> tuple[Path, list[tuple[str, str, str]]] | None:
    """(repository root, [(commit, time, path then)] oldest first) of ``path``'s history; None
    without git or history."""
    top = _git(path.parent, "rev-parse", "--show-toplevel")
    if not top:
        return None
    root = Path(top.strip())
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    log = _git(root, "log", "--follow", "--format=@@%H %cI", "--name-only", "--", str(rel))
    if not log:
        return None
    entries, head = [], None
    for line in log.splitlines():
        if line.startswith("@@"):
            head = line[2:].split(" ")
        elif line.strip() and head:
            entries.append((head[0], head[1], line.strip()))
            head = None
    return root, entries[::-1]


@functools.lru_cache(maxsize=4096)
def _claims_at(root: Path, commit: str, rel: str) -> dict[str, str]:
    """{claim id: fingerprint} of the declaration ``rel`` at ``commit`` ({} when unreadable). Cached per
    process: a commit's file never changes, and every page of a run (a resume, ``--page-only``) reads
    the same history again. Callers must not change the returned dict."""
    text = _git(root, "show", f"{commit}:{rel}")
    return claims_of(text) if text is not None else {}


def claims_of(text: str) -> dict[str, str]:
    """{claim id: fingerprint} of a declaration's YAML text ({} when it does not parse)."""
    try:
        data = yaml.load(text, Loader=_LOADER) or {}
    except yaml.YAMLError:
        return {}
    evaluations = data.get("evaluations") if isinstance(data.get("evaluations"), dict) else {}
    return {c["id"]: fingerprint(c, evaluations) for c in data.get("claims") or [] if isinstance(c, dict) and "id" in c}


def declarations(path: Path) -> dict[str, Declared]:
    """{claim id: :class:`Declared`} of every claim in the declaration file ``path`` (a claim missing
    from the result: provenance unknown)."""
    found = _history(path)
    current = claims_of(path.read_text())
    if found is None:
        return dict.fromkeys(current, UNKNOWN)
    root, entries = found
    out: dict[str, Declared] = {}
    before: dict[str, str] = {}
    for commit, time, rel in entries:
        claims = _claims_at(root, commit, rel)
        for cid, fp in claims.items():
            if before.get(cid) != fp:
                out[cid] = Declared(time, commit[:7], "added" if cid not in before else "changed")
        before = claims
    if (_git(root, "rev-parse", "--is-shallow-repository") or "").strip() == "true" and entries:
        oldest = entries[0][0][:7]
        shallow = Declared("", "", "unknown: a shallow clone (its oldest commit already declares the claim)")
        out = {cid: shallow if d.commit == oldest else d for cid, d in out.items()}
    for cid, fp in current.items():  # the working file against the last commit
        if before.get(cid) != fp:
            out[cid] = Declared(now(), "", "uncommitted")
    return {cid: out.get(cid, UNKNOWN) for cid in current}


def cells_read(args: dict) -> list[tuple[str, str]]:
    """The (evaluation, model) cells a claim's measure reads, from its args (``pairs`` of an
    association: with ``dynamics``, each pair's first run is read there)."""
    ev = args.get("eval", "")
    named = [args[k] for k in ("model", "against", "reference") if k in args] + list(args.get("arms", [])) \
        + list(args.get("runs", [])) + [m for row in args.get("grid", []) for m in row]
    out = [(ev, m) for m in named]
    for pair in args.get("pairs", []):
        out += [(args["dynamics"], pair[0])] if "dynamics" in args else [(ev, pair[0])]
        out += [(ev, m) for m in pair[1:]]
    return list(dict.fromkeys(out))


def first_seen(table: Path) -> dict[tuple[str, str], str]:
    """{(evaluation, model): time of the first commit whose ``table`` (a published table.json) shows
    that cell}: the evaluation's pass@k curve of the model (a sampling evaluation), or ("", model) for
    the model among those built (a weights or dynamics cell reads the model's run). An upper bound on
    when a cell without a recorded time was computed; {} without git history."""
    found = _history(table) if table.exists() else None
    if found is None:
        return {}
    root, entries = found
    out: dict[tuple[str, str], str] = {}
    for commit, time, rel in entries:
        for cell in _cells_shown_at(root, commit, rel):
            out.setdefault(cell, time)
    return out


@functools.lru_cache(maxsize=4096)
def _cells_shown_at(root: Path, commit: str, rel: str) -> tuple[tuple[str, str], ...]:
    """The cells the published table ``rel`` shows at ``commit`` (:func:`first_seen`; () when it does not
    parse). Cached per process, as :func:`_claims_at`."""
    text = _git(root, "show", f"{commit}:{rel}")
    try:
        page = json.loads(text) if text else {}
    except ValueError:
        return ()
    seen = [(ev, m) for ev, models in (page.get("passk") or {}).items() for m in models]
    seen += [("", built.rsplit("-s", 1)[0] if built.rsplit("-s", 1)[-1].isdigit() else built)
             for built in page.get("models") or {}]
    return tuple(seen)


def published_bound(args: dict, seen: dict[tuple[str, str], str]) -> str | None:
    """The earliest first-publication time of any cell the claim reads (:func:`first_seen`)."""
    times = [seen[c] for ev, m in cells_read(args) for c in ((ev, m), ("", m)) if c in seen]
    return min(times, key=utc) if times else None


def post_hoc(declared: Declared, cell_times: list[str | None], published: str | None = None,
             audited: str = "") -> str:
    """Why a claim is post hoc ('' when it is not, or when its declaration time is unknown): an
    ``audited`` reason (from the history, where the records cannot show it), or a declaration later
    than the earliest recorded time of its cells, or, when some cell carries no time, later than the
    first publication of any cell it reads (``published``, :func:`published_bound`)."""
    if audited:
        return f"audited from the history: {audited}"
    if not declared.time:
        return ""
    at = utc(declared.time)
    known = sorted(utc(t) for t in cell_times if t)
    if known and known[0] < at:
        return f"{declared.text()}, after its first cell was computed ({known[0]:%Y-%m-%d %H:%M} UTC)"
    if len(known) < len(cell_times) and published and utc(published) < at:
        return f"{declared.text()}, after a cell it reads was published ({utc(published):%Y-%m-%d %H:%M} UTC)"
    return ""


@dataclass(frozen=True)
class Ledger:
    """The provenance of one experiment's claims: when each was declared (:func:`declarations`), when
    the published pages first showed each cell (:func:`first_seen`), and ``cell_times(eval, model)``
    -> the recorded times of that model's cells on disk (None for a cell without one)."""

    declared: dict[str, Declared]
    seen: dict[tuple[str, str], str]
    cell_times: Callable[[str, str], list[str | None]]

    def mark(self, row: dict, claim) -> dict:
        """``row`` with ``declared`` (text), ``cells_computed`` (the earliest recorded cell time, or
        None) and ``post_hoc`` (why, '' when not) of the declared ``claim`` (an exploratory claim:
        always, :data:`EXPLORATORY`). A claim not measured yet
        is post hoc only by its audited reason: its verdict will come from cells computed later, whose
        recorded times the rule then reads."""
        d = self.declared.get(claim.id, UNKNOWN)
        times = [t for ev, m in cells_read(claim.args) for t in self.cell_times(ev, m)]
        known = sorted((t for t in times if t), key=utc)
        measured = row.get("verdict") != "not measured"  # no verdict yet: nothing read, nothing post hoc
        late = post_hoc(d, times, published_bound(claim.args, self.seen), "") if measured else ""
        why = (post_hoc(d, [], None, claim.post_hoc) if claim.post_hoc
               else EXPLORATORY if claim.kind == "exploratory" else late)
        return {**row, "declared": d.text(), "cells_computed": known[0] if known else None, "post_hoc": why}


def ledger(declaration: Path, published_table: Path, cell_times: Callable[[str, str], list[str | None]]) -> Ledger:
    """The :class:`Ledger` of the experiment declared in ``declaration`` whose page is published at
    ``published_table`` (absent: no publication bound)."""
    return Ledger(declarations(declaration), first_seen(published_table), cell_times)
