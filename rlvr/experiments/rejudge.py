"""Judge a published page again under the current rules (statuses, identification, the seed-level
interval, premises, provenance) from what it committed (``rlvr reproduce NAME --rejudge-published``):
its cell records (``cells/evals``) when it published them, every claim measured again from them (no
model, base or key needed: the records are the page's own); else its ``table.json``: a claim whose
declaration still matches its published row (same measure, arguments and direction) keeps that row's
estimates and details, any other (new, re-declared) is *not measured*: its cells are not in the
record. The page's README keeps everything measured (plots, sections, protocol, models) and gets a
new verdict header, verdict tables, notes, details and declarations; ``table.json`` gets the new
rows, status and the verdicts that changed; the index is rebuilt.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from rlvr.errors import UserError
from rlvr.experiments.claims import claim_head, judge_all, verdict_changes
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.models import model_id
from rlvr.experiments.page import (
    STATUS_TEXT,
    claim_tables,
    declaration_lines,
    detail_lines,
    interval_text,
    page_status,
    write_index,
)
from rlvr.experiments.provenance import fingerprint, ledger
from rlvr.experiments.registry import rounded
from rlvr.experiments.runner import protocol_name, seeds_of
from rlvr.experiments.spec import EXPERIMENTS_DIR, ClaimSpec, Experiment
from rlvr.experiments.verdict import NOT_MEASURED, Estimate, seed_interval, spread, verdict


def rejudge_row(cl: ClaimSpec, old: dict | None) -> dict:
    """The row of claim ``cl`` from its published row ``old`` (None: it had none)."""
    head = claim_head(cl)
    decided = {k: head[k] for k in ("measure", "args", "expect", "bound") if k in head}
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
            "verdict": verdict(est, cl.expect, why, cl.bound), "details": old["details"], "why": why,
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
    records = page_dir / "cells" / "evals"
    if records.is_dir():
        cells = PublishedCells(exp, records)
        book = ledger(EXPERIMENTS_DIR / f"{exp.name}.yaml", table_path, cells.times)
        rows = judge_all(exp, cells.get, lambda m: seeds_of(exp, m, exp.seeds), None, book)
        source = "measured again from its committed cell records"
    else:
        book = ledger(EXPERIMENTS_DIR / f"{exp.name}.yaml", table_path, lambda ev, m: [None])
        rows = [book.mark(rejudge_row(cl, old.get(cl.id)), cl) for cl in exp.claims]
        source = ("from its published table (its cells were not published): the estimates and their intervals are "
                  "the published ones, made by the code of that publication")
    # the cells its run lacked (table.json's "missing"; older tables: read from their status line)
    missing = table.get("missing", _missing_of(table.get("status", "")))
    status = page_status(rows, True, missing, table.get("stale", 0))
    readme = page_dir / "README.md"
    readme.write_text(_rewrite(readme.read_text(), exp, rows, status, source))
    changed = verdict_changes(table["claims"], rows)
    table.update(claims=rows, status=status, changes=changed, missing=missing,
                 rejudged=f"judged again under the current rules, {source}")
    table_path.write_text(json.dumps(rounded(table), indent=1, default=str))
    return write_index(docs)


def _missing_of(status: str) -> int:
    """The count of "N declared cell(s) not on disk" in a page's status line (0 when it has none)."""
    m = re.search(r"(\d+) declared cell\(s\) not on disk", status)
    return int(m.group(1)) if m else 0


class PublishedCells:
    """The evaluation cells a page published (``cells/evals/<protocol>/<model-id>.json.gz``, written by
    :func:`rlvr.experiments.archive.save_archive`), read as the measures read cells on disk."""

    def __init__(self, exp: Experiment, records: Path):
        self.exp, self.records = exp, records

    def _path(self, ev: str, model: str, seed: int | None, milestone: str = "") -> Path:
        cell = model_id(model, seed) + (f"@{milestone}" if milestone else "")
        return self.records / protocol_name(self.exp.evaluations[ev]) / f"{cell}.json.gz"

    def get(self, ev: str, model: str, seed: int | None, milestone: str = "") -> dict:
        path = self._path(ev, model, seed, milestone)
        if not path.exists():
            raise FileNotFoundError(str(path))
        return json.loads(gzip.decompress(path.read_bytes()))["stats"]

    def times(self, ev: str, model: str) -> list[str | None]:
        """When each seed's published cell was computed (None: the record does not say)."""
        if ev not in self.exp.evaluations or model not in self.exp.models:
            return []
        paths = [self._path(ev, model, s) for s in seeds_of(self.exp, model, self.exp.seeds)]
        return [json.loads(gzip.decompress(p.read_bytes())).get("computed_at") for p in paths if p.exists()]


def _rewrite(text: str, exp: Experiment, rows: list[dict], status: str, source: str) -> str:
    """The README ``text`` with its verdict header and tables, notes, details and declarations
    rewritten; every other line kept."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"Experiment `{exp.name}`"))
    end = next(i for i in range(start + 1, len(lines))
               if lines[i].strip() and not lines[i].startswith(("|", "Findings:", "Premises:")))
    head = [f"Experiment `{exp.name}`; {status}. {STATUS_TEXT} (intervals: {interval_text(exp)}). Judged again "
            f"under the current rules, {source}.", "", *claim_tables(rows)]
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
