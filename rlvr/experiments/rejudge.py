"""Judge a published page again from its own ``table.json``, for a page published without its cells
(``rlvr reproduce NAME --rejudge-published``): the current rules (statuses, identification, the
seed-level interval, premises, provenance) applied to the estimates and details the page recorded.

A claim whose declaration still matches its published row (same measure, arguments and direction)
keeps that row's estimates and details; any other (new, re-declared) is *not measured*: its cells are
not in the record. The page's README keeps everything measured (plots, sections, protocol, models)
and gets a new verdict header, verdict tables, notes, details and declarations; ``table.json`` gets
the new rows, status and the verdicts that changed; the index is rebuilt.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.errors import UserError
from rlvr.experiments.claims import claim_head, status_of, verdict_changes
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.page import STATUS_TEXT, claim_tables, declaration_lines, detail_lines, interval_text, write_index
from rlvr.experiments.provenance import fingerprint, ledger
from rlvr.experiments.registry import rounded
from rlvr.experiments.spec import EXPERIMENTS_DIR, ClaimSpec, Experiment
from rlvr.experiments.verdict import NOT_MEASURED, Estimate, seed_interval, spread, verdict


def rejudge_row(cl: ClaimSpec, old: dict | None) -> dict:
    """The row of claim ``cl`` from its published row ``old`` (None: it had none)."""
    head = claim_head(cl)
    decided = {k: head[k] for k in ("measure", "args", "expect")}
    if old is None or "estimates" not in old or fingerprint({**old, "kind": "finding"}) != fingerprint(
            {**decided, "kind": "finding"}):
        why = ("its cells are not in the published record (the page was published without them): run the "
               "experiment" if old is None or "estimates" in old or old.get("verdict") == "not run yet"
               else old.get("why") or old["verdict"].removeprefix("not measured: "))
        return {**head, "verdict": NOT_MEASURED, "why": why, "missing": "cells"}
    measure = MEASURES[cl.measure]
    est = [Estimate(e["seed"], e["value"], e["lo"], e["hi"], e.get("pretrain")) for e in old["estimates"]]
    why = measure.identify(measure.typed(cl.args), est, old["details"])
    return {**head, "estimates": [{**e.__dict__, "label": e.label} for e in est], "spread": spread(est),
            "verdict": verdict(est, cl.expect, why), "details": old["details"], "why": why,
            "seed_level": seed_interval(est).__dict__}


def rejudge_published(exp: Experiment, docs: Path) -> Path:
    """Rewrite ``docs/NAME/`` (README.md, table.json) under the current rules from its own table,
    and the index -> the index."""
    page_dir = docs / exp.name
    table_path = page_dir / "table.json"
    if not table_path.exists():
        raise UserError(f"--rejudge-published: no published page at {table_path}")
    table = json.loads(table_path.read_text())
    old = {r["id"]: r for r in table["claims"] if "id" in r}
    book = ledger(EXPERIMENTS_DIR / f"{exp.name}.yaml", table_path, lambda ev, m: [None])
    rows = [book.mark(rejudge_row(cl, old.get(cl.id)), cl) for cl in exp.claims]
    done = sum(status_of(r) != NOT_MEASURED for r in rows)
    status = "complete" if done == len(rows) else f"partial: {done} of {len(rows)} claims measured"
    readme = page_dir / "README.md"
    readme.write_text(_rewrite(readme.read_text(), exp, rows, status))
    changed = verdict_changes(table["claims"], rows)
    table.update(claims=rows, status=status, changes=changed,
                 rejudged="statuses recomputed from this table under the current rules (no cells were published)")
    table_path.write_text(json.dumps(rounded(table), indent=1, default=str))
    return write_index(docs)


def _rewrite(text: str, exp: Experiment, rows: list[dict], status: str) -> str:
    """The README ``text`` with its verdict header and tables, notes, details and declarations
    rewritten; every other line kept."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"Experiment `{exp.name}`"))
    end = next(i for i in range(start + 1, len(lines))
               if lines[i].strip() and not lines[i].startswith(("|", "Findings:", "Premises:")))
    head = [f"Experiment `{exp.name}`; {status}. {STATUS_TEXT} (intervals: {interval_text(exp)}). Rejudged from the "
            "published table under the current rules (its cells were not published): the estimates and their "
            "intervals are the published ones, made by the code of that publication.", "", *claim_tables(rows)]
    body = lines[:start] + head + lines[end:]
    body = _replace_section(body, "## What the run showed", [*[f"- {n}" for n in exp.notes], ""] if exp.notes else None)
    body = _replace_section(body, "## Details", ["", *detail_lines(rows), ""])
    body = _replace_section(body, "## Declarations", None)
    at = body.index("## Details")
    nxt = next((i for i in range(at + 1, len(body)) if body[i].startswith("## ")), len(body))
    body = body[:nxt] + declaration_lines(rows) + body[nxt:]
    return "\n".join(body) + "\n"


def _replace_section(lines: list[str], title: str, content: list[str] | None) -> list[str]:
    """``lines`` with the section ``title`` (up to the next ``## ``) holding ``content`` (None: removed;
    an absent section is left absent)."""
    if title not in lines:
        return lines
    at = lines.index(title)
    nxt = next((i for i in range(at + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[:at] + ([] if content is None else [title, *([""] if content[:1] != [""] else []), *content]) \
        + lines[nxt:]
