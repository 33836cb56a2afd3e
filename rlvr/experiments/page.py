"""The results page of an experiment: ``OUT/README.md`` (verdict table first), ``OUT/table.json``
and ``OUT/plots/*.png``. Every number on it is read from the cells; every verdict is computed
(:mod:`rlvr.experiments.verdict`)."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

from rlvr.errors import UserError
from rlvr.experiments.archive import read_json, save_archive
from rlvr.experiments.claims import counts, status_of, verdict_changes
from rlvr.experiments.legs import LEGS, part_lines, read_legs
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.page_plots import new_axes, page_colours, save_axes
from rlvr.experiments.registry import rounded
from rlvr.experiments.spec import EvalSpec, Experiment, load, names
from rlvr.experiments.verdict import NOT_MEASURED, VERDICTS, Estimate, seed_interval
from rlvr.machine import machine_line
from rlvr.paths import atomic_write


def _num(x, fmt: str = "{:+.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def _finite(*xs) -> bool:
    return all(isinstance(x, int | float) and x == x and abs(x) != float("inf") for x in xs)


def ours(row: dict) -> str:
    """``+0.120 [+0.070, +0.170] (seeds +0.100..+0.140); s0 +0.100 [+0.060, +0.140], s1 ...``: the
    seed-level estimate and interval (:func:`~rlvr.experiments.verdict.seed_interval`), the seeds'
    range, then each seed's value and interval."""
    if "estimates" not in row:
        return f"no estimate (missing {Path(row.get('missing', '')).parent.name or 'cells'})"
    sp = row["spread"]
    per = ", ".join(f"{e['label']} {e['value']:+.3f} " + _interval(e['lo'], e['hi']) + _outside(e)
                    for e in row["estimates"])
    if sp["seeds"] > 1:
        level = row.get("seed_level") or seed_interval([Estimate(e["seed"], e["value"], e["lo"], e["hi"],
                                                                 e.get("pretrain")) for e in row["estimates"]]).__dict__
        return (f"{sp['mean']:+.3f} {_interval(level['lo'], level['hi'])} (seeds {sp['min']:+.3f}..{sp['max']:+.3f}); "
                f"{per}")
    return per


def _outside(e: dict) -> str:
    """A warning for a seed whose estimate lies outside its own 95% interval (a resampling interval of
    a biased statistic can: e.g. a parametric bootstrap whose redraws move censored runs), so that the
    reader does not trust that interval; the verdict rule itself is unchanged."""
    value, lo, hi = e["value"], e["lo"], e["hi"]
    return " (estimate outside its own interval)" if _finite(value, lo, hi) and not lo <= value <= hi else ""


def _interval(lo, hi) -> str:
    return f"[{lo:+.3f}, {hi:+.3f}]" if _finite(lo, hi) else "[no interval]"


def eval_line(e: EvalSpec) -> str:
    """One protocol line for an evaluation ``e``, saying what it measured."""
    models = ", ".join(e.models)
    if e.kind == "dynamics":
        return f"evaluation `{e.name}`: the training runs' own logged series (nothing sampled); models {models}"
    sampled = f"{e.problems} held-out problems x n = {e.n} samples at T = {e.temperature}, top-p {e.top_p}"
    if e.kind == "weights":
        return (f"evaluation `{e.name}`: weight-space measures at every kept checkpoint, the KL to the base on "
                f"{sampled}; models {models}")
    return f"evaluation `{e.name}`: {sampled}; models {models}"


def interval_text(exp: Experiment) -> str:
    return "; ".join(dict.fromkeys(MEASURES[c.measure].interval for c in exp.claims))


def verdict_cell(r: dict) -> str:
    """``**status**`` with its reason (what is missing, what does not exist here) and, for a post hoc
    claim, why it does not count."""
    why = f"<br>*{r['why']}*" if r.get("why") else ""
    late = f"<br>*post hoc, not counted: {r['post_hoc']}*" if r.get("post_hoc") else ""
    return f"**{status_of(r)}**{why}{late}"


def expected(row: dict) -> str:
    """``positive``, or with a bound ``above -0.05 (non-inferiority, margin 0.05)`` / ``below -0.5``."""
    bound = row.get("bound")
    if not bound:
        return row["expect"]
    side = "above" if row["expect"] == "positive" else "below"
    margin = f" (non-inferiority, margin {-bound:g})" if side == "above" and bound < 0 else ""
    return f"{side} {bound:+g}{margin}"


def verdict_table(rows: list[dict]) -> list[str]:
    lines = ["| claim | the paper | ours: mean [seed-level 95% CI] (seed range); per seed value [95% CI] | verdict |",
             "|---|---|---|---|"]
    for r in rows:
        claim = f"{r['claim']} <br>*measured: {r['quantity']}, expected {expected(r)}*"
        lines.append(f"| {claim} | {r['paper']} | {ours(r)} | {verdict_cell(r)} |")
    return lines


def count_line(rows: list[dict]) -> str:
    """``Findings: 3 reproduced, 1 inconclusive; post hoc (not counted): 1 reproduced; premises: ...``"""
    tally = counts(rows)

    def one(group: str) -> str:
        return ", ".join(f"{n} {v}" for v, n in tally[group].items() if n) or "none"

    return (f"Findings: {one('findings')}; post hoc (declared after their cells, not counted): {one('post hoc')}; "
            f"premises (manipulation checks, not counted): {one('premises')}.")


def claim_tables(rows: list[dict]) -> list[str]:
    """The counts, the findings' verdict table and, when there are premises or exploratory claims, theirs."""
    findings = [r for r in rows if r.get("kind", "finding") == "finding"]
    premises = [r for r in rows if r.get("kind", "finding") == "premise"]
    exploratory = [r for r in rows if r.get("kind", "finding") == "exploratory"]
    lines = [count_line(rows), "", *verdict_table(findings), ""]
    if premises:
        lines += ["Premises: manipulation checks (the regime the findings need); never counted among the findings.",
                  "", *verdict_table(premises), ""]
    if exploratory:
        lines += ["Exploratory: declared after their runs were seen, to say what those runs can answer; counted "
                  "with the post hoc claims, never among the findings.", "", *verdict_table(exploratory), ""]
    return lines


def detail_lines(rows: list[dict]) -> list[str]:
    """One readable line per measured claim (its measure's registered details line; with several
    pretraining seeds, one per pretraining seed)."""
    out = []
    for r in rows:
        d = r.get("details")
        if not d:
            continue
        measure = MEASURES[r["measure"]]
        args = measure.typed(r["args"])
        if any(e.get("pretrain") is not None for e in r.get("estimates", [])):
            moved = r.get("detail_args", {})  # pretraining seed p's details name its copies NAME@pP
            text = "; ".join(f"{p}: {measure.detail(x, measure.typed(moved[p]) if p in moved else args)}"
                             for p, x in d.items())
        else:
            text = measure.detail(d, args)
        out.append(f"- **{r['id']}**: {text}")
    return out


def declaration_lines(rows: list[dict]) -> list[str]:
    """"## Declarations": when each claim was declared and its first cell computed, and whether it is
    post hoc (docs/commands/reproduce.md, "Declaration provenance"); [] when no row carries them."""
    if not any("declared" in r for r in rows):
        return []
    lines = ["## Declarations", "", "When each claim was declared (the commit that added it or last changed its "
             "measure, arguments, direction or kind) and when its first cell was computed; a claim declared after "
             "its cells is post hoc and not counted.", "",
             "| claim | declared | first cell computed | post hoc |", "|---|---|---|---|"]
    for r in rows:
        declared, cells = r.get("declared", "provenance unknown"), r.get("cells_computed") or "not recorded"
        lines.append(f"| {r['id']} | {declared} | {cells} | {r.get('post_hoc') or 'no'} |")
    return lines + [""]


def _trajectory_lines(traj: dict) -> list[str]:
    out = []
    for ev, table in traj.items():
        out += [f"Evaluation `{ev}`: mean over problems at each kept checkpoint (step 0 = the base).", "",
                "| model | step | pass@1 | token entropy | answer entropy |", "|---|---|---|---|---|"]
        for name, points in table.items():
            for p in points:
                out.append(f"| {name} | {p['step'] if p['step'] >= 0 else 'final'} | {_num(p['pass1'], '{:.3f}')} | "
                           f"{_num(p['token_entropy'], '{:.3f}')} | {_num(p['answer_entropy'], '{:.3f}')} |")
        out.append("")
    return out


def plot_passk(exp: Experiment, curves: dict, out: Path) -> list[Path]:
    """One PNG per evaluation: pass@k of each model (mean over seeds) against k, each model in its
    colour of the page (:func:`page_colours`)."""
    paths, colours = [], page_colours(exp)
    for ev, models in curves.items():
        fig, ax = new_axes((5.5, 3.8))
        for name, pts in models.items():
            ks = sorted(int(k) for k in pts)
            ax.plot(ks, [pts[str(k)] for k in ks], marker="o", ms=3, label=name, color=colours.get(name))
        ax.set_xscale("log", base=2)
        e = exp.evaluations[ev]
        ax.set_title(f"{exp.name}: {ev} (T={e.temperature}, top-p {e.top_p}, n={e.n})")
        paths.append(save_axes(fig, ax, "k", "pass@k (mean over seeds)", out / "plots" / f"passk_{ev}.png",
                               legend_size=None))
    return paths


def _curve_lines(curves: dict) -> list[str]:
    out = []
    for ev, models in curves.items():
        ks = sorted({int(k) for pts in models.values() for k in pts})
        shown = [k for k in ks if k in (1, 4, 16, 64, 256) or k == ks[-1]]
        head = "| model | " + " | ".join(f"pass@{k}" for k in shown) + " |"
        out += [f"Evaluation `{ev}` (mean over seeds):", "", head, "|---|" + "---|" * len(shown)]
        out += [f"| {m} | " + " | ".join(f"{pts[str(k)]:.3f}" for k in shown) + " |" for m, pts in models.items()]
        out.append("")
    return out


def provenance(command: str, machine: str) -> list[str]:
    """The results pages' provenance block: command, CPU, threads, precision, date (today)."""
    threads = re.search(r"(\d+) torch threads?", machine)
    precision = re.search(r"precision (\w+)", machine)
    cpu = re.sub(r", \d+ torch threads?", "", machine).split(", torch")[0]
    return ["**Provenance** (where these numbers came from; \"not recorded\" where the page's run did not record it)",
            "", "| command | CPU (model, flags) | threads | precision | date |", "| --- | --- | --- | --- | --- |",
            f"| `{command}` | {cpu or 'not recorded'} | "
            f"{threads.group(1) + ' torch threads' if threads else 'not recorded'} | "
            f"{precision.group(1) if precision else 'not recorded'} | {time.strftime('%Y-%m-%d')} |"]


def page_status(rows: list[dict], complete: bool, missing: int = 0, stale: int = 0) -> str:
    """A page's status line: "complete", or "partial: D of N claims measured", saying how many
    declared cells are not on disk when every claim is measured but some cell is missing (a tuning
    cell no claim reads, say), and how many of those are stale (on disk under another key: an older
    declaration or code); ``complete``: the run had every cell it looked for."""
    done = sum(status_of(r) != NOT_MEASURED for r in rows)
    if complete and not missing and done == len(rows):
        return "complete"
    status = f"partial: {done} of {len(rows)} claims measured"
    if done == len(rows) and missing:  # why "partial" when every claim is measured
        status += f"; {missing} declared cell(s) not on disk"
        if stale:
            status += f" ({stale} of them stale: on disk under another key)"
    return status


def write_page(exp: Experiment, out: Path, rows: list[dict], traj: dict, curves: dict, run: dict, machine: str,
               command: str, quick: bool, sections: dict[str, list[str]] | None = None) -> Path:
    """Write README.md, table.json and the plots; -> README.md. ``sections``: {title: markdown
    lines} of extra sections before the details (weights, training dynamics), empty ones skipped.
    The rows are shown as table.json keeps them (floats to 4 places), so the page and the index built
    from table.json print the same digits (unrounded, a value like 0.64051 read 0.641 here and 0.640
    there)."""
    rows = rounded(rows)
    plots = plot_passk(exp, curves, out)
    status = page_status(rows, run["complete"], run.get("missing", 0), run.get("stale", 0))
    form = " (quick form: a miniature that checks the machinery, not the claims)" if quick else ""
    lines = [f"# {exp.title}", "", *provenance(command, machine), "",
             f"Experiment `{exp.name}`{form}; "
             f"{status}. {STATUS_TEXT} (intervals: {interval_text(exp)}).", "",
             *claim_tables(rows)]
    if plots:
        lines += [f"![{p.stem}](plots/{p.name})" for p in plots] + [""]
    if curves:
        lines += ["## pass@k", "", *_curve_lines(curves)]
    for title, body in (sections or {}).items():
        if body:
            lines += [f"## {title}", "", *body]
    if exp.notes and not quick:
        lines += ["## What the run showed", "", *[f"- {n}" for n in exp.notes], ""]
    lines += ["## Details", "", *detail_lines(rows), "", *declaration_lines(rows)]
    tl = _trajectory_lines(traj)
    if tl:
        lines += ["## Through training", "", *tl]
    lines += ["## Protocol", "", *[f"- {p}" for p in exp.protocol],
              *[f"- {eval_line(e)}" for e in exp.evaluations.values()], "",
              "## Deviations from the papers' protocol", "", *[f"- {d}" for d in exp.deviations], "",
              "## Papers", "", *[f"- {k}: {v}" for k, v in exp.papers.items()], "",
              "## Machine and command", "", f"- machine: {machine}", f"- command: `{command}`",
              f"- wall time of this invocation: {run['wall_s'] / 60:.1f} min (reused cells cost 0)", "",
              *_wall_lines(exp, out), *model_lines(out),
              "## Cells of this invocation", "", *_cell_lines(run)]
    atomic_write(out / "README.md", "\n".join(lines))
    table = {"experiment": exp.name, "title": exp.title, "quick": quick, "status": status, "claims": rows,
             "trajectories": traj, "passk": curves, "machine": machine, "command": command,
             "timings": {} if run.get("read_only") else run["timings"],
             "models": run["built"], "missing": run.get("missing", 0), "stale": run.get("stale", 0)}
    atomic_write(out / "table.json", json.dumps(rounded(table), indent=1, default=str))
    return out / "README.md"


def _cell_lines(run: dict) -> list[str]:
    """The cells this invocation built or evaluated with their seconds; one line for a --page-only
    invocation (it computed nothing: its reading times would only churn the published table)."""
    if run.get("read_only"):
        return ["None: this invocation read the cells on disk (--page-only) and computed nothing.", ""]
    return ["| cell | seconds |", "|---|---|", *[f"| {k} | {v:.0f} |" for k, v in run["timings"].items()], ""]


def _wall_lines(exp: Experiment, out: Path) -> list[str]:
    """"## Wall time per part" from the legs recorded in ``out`` ([] when none was)."""
    declared = [p.minutes for p in exp.parts] or [exp.minutes]
    if exp.is_quick:  # the parts' minutes are the full form's
        declared = [None] * len(declared)
    body = part_lines(read_legs(out / LEGS), declared, exp.minutes_estimated)
    return ["## Wall time per part", "", *body] if body else []


def model_lines(out: Path) -> list[str]:
    """"## Models" of a page: each finished model under ``out/models`` with its times as recorded
    when it was trained and the machine of its last (re)start (``run/machine.json``), so a page
    written by a later invocation, or on another machine, still says what trained what. [] when no
    model folder has finished."""
    rows, machines = [], {}  # run records may be absent (a pipeline that is not an RL run)
    for done in sorted(out.glob("models/*/done.json")):
        info, summary = read_json(done) or {}, read_json(done.parent / "run" / "train_summary.json")
        rec = read_json(done.parent / "run" / "machine.json")
        label = machines.setdefault(machine_line(rec) if rec else "not recorded", f"M{len(machines) + 1}")
        steps = f"{summary['wall_s'] / 60:.1f}" if summary and "wall_s" in summary else "-"
        rows.append(f"| {done.parent.name} | {info.get('wall_s', 0) / 60:.1f} | {steps} | {label} | "
                    f"{info.get('base_weights') or '-'} |")
    if not rows:
        return []
    return ["## Models", "", "Minutes as recorded when each model was trained: the build (training with its "
            "evaluations; a resumed run: the leg that finished it) and the RL steps alone (every leg); the machine "
            "of its last (re)start; the SHA-256 (first 12 digits) of the base weights it started from (a base "
            "pretrained again on another machine has the same key, not always the same weights).", "",
            "| model | build min | RL step min | machine | base weights |", "|---|---|---|---|---|",
            *rows, "", *[f"- {label}: {line}" for line, label in machines.items()], ""]


STATUS_TEXT = ("Verdicts are computed from the table below: *reproduced* when the claimed direction holds beyond "
               "the 95% interval in every seed, *not reproduced* when the opposite does, *inconclusive* otherwise; "
               "*not identifiable here* when the quantity does not exist on this testbed (the reason, computed "
               "from the data, is in the verdict cell); *not measured* when its cells are missing")

INDEX_HEAD = """# Reproductions

Each paper finding rlvr implements, as a declared experiment (`rlvr reproduce NAME`) whose verdict is
computed from its measured table: *reproduced* when the claimed direction holds beyond the 95%
interval in every seed, *not reproduced* when the opposite direction does, *inconclusive* otherwise;
*not identifiable here* when the quantity does not exist on this testbed (the reason is computed from
the data); *not measured* when its cells are missing. Premises (manipulation checks) and post hoc
claims (declared after their cells were computed) are shown apart and never counted
(docs/commands/reproduce.md). This index is rebuilt from the committed pages (`rlvr reproduce NAME
--publish`); the other results pages of docs/ move here as their experiments are declared.
"""


def publish(out: Path, docs: Path, series: tuple[str, ...] = ()) -> Path:
    """Copy the page of ``out`` (README.md, table.json, plots/) to ``docs/<experiment>/``, with the
    records of its models and cells in ``cells/`` (:func:`~rlvr.experiments.archive.save_archive`,
    dynamics cells cut to ``series`` when given), and rebuild ``docs/README.md``: one row per claim
    of every published experiment, its verdict and a link. ``table.json``'s ``changes``: the verdicts
    this publication changed, or, when it changed none, those the last one that did changed."""
    table = json.loads((out / "table.json").read_text())
    if table.get("quick"):
        raise UserError("a quick form checks the machinery, not the claims: publish a full run")
    dest = docs / table["experiment"]
    before = read_json(dest / "table.json") or {}
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copy2(out / "README.md", dest / "README.md")
    changed = verdict_changes(before.get("claims", []), table["claims"]) if before else []
    table["changes"] = changed or before.get("changes", [])  # a republication that changes no verdict keeps
    # the last that did: the index's table of changed verdicts survives a re-render
    (dest / "table.json").write_text(json.dumps(table, indent=1))
    if (out / "plots").is_dir():
        shutil.copytree(out / "plots", dest / "plots")
    save_archive(out, dest / "cells", series)
    if (out / LEGS).is_file():  # the parts' wall times, merged back by --resume-published
        (dest / "cells").mkdir(parents=True, exist_ok=True)
        shutil.copy2(out / LEGS, dest / "cells" / LEGS)
    return write_index(docs)


def write_index(docs: Path) -> Path:
    """``docs/README.md`` from every ``docs/*/table.json``: the counts per status (findings, post hoc
    and premises apart), every claim's verdict, the declared experiments without a page, and every
    verdict a republication changed."""
    tables = [json.loads(t.read_text()) for t in sorted(docs.glob("*/table.json"))]
    lines = [INDEX_HEAD, *_count_table(tables), "",
             "| experiment | claim | kind | verdict | ours | status |", "|---|---|---|---|---|---|"]
    for table in tables:
        link = f"[{table['experiment']}]({table['experiment']}/README.md)"
        for r in table["claims"]:
            kind = r.get("kind", "finding") + (", post hoc" if r.get("post_hoc") else "")
            lines.append(f"| {link} | {r['claim']} | {kind} | {verdict_cell(r)} | {ours(r)} | {table['status']} |")
    lines += _declared_lines({t["experiment"] for t in tables})
    changed = [(t["experiment"], c) for t in tables for c in t.get("changes", [])]
    if changed:
        lines += ["", "## Verdicts changed by the last republication", "",
                  "| experiment | claim | before | now | why |", "|---|---|---|---|---|"]
        lines += [f"| {name} | {c['id']} | {c['before']} | {c['after']} | {c['why']} |" for name, c in changed]
    atomic_write(docs / "README.md", "\n".join(lines) + "\n")
    return docs / "README.md"


def _declared_lines(published: set[str]) -> list[str]:
    """The declared experiments (``rlvr/configs/experiments/``) without a published page: declared, not
    run (their claims, parts and the minutes the declaration states)."""
    waiting = [load(name) for name in names() if name not in published]
    if not waiting:
        return []
    return ["", "## Declared, not run", "",
            "Declared (claims, thresholds, models, evaluations committed before any cell ran); no page yet. "
            "`rlvr reproduce` lists their parts.", "",
            "| experiment | title | claims | parts | minutes (declared) | status |", "|---|---|---|---|---|---|",
            *[f"| {e.name} | {e.title} | {len(e.claims)} | {len(e.parts) or 1} | {e.minutes:g} | declared, not run |"
              for e in waiting]]


def _count_table(tables: list[dict]) -> list[str]:
    """Counts per status of the findings of every experiment and in all, with the post hoc claims and
    the premises apart (their number and statuses)."""
    per = {t["experiment"]: counts(t["claims"]) for t in tables}
    per["**all**"] = {g: {v: sum(c[g][v] for c in per.values()) for v in VERDICTS}
                      for g in ("findings", "post hoc", "premises")}

    def apart(tally: dict[str, int]) -> str:
        n = sum(tally.values())
        return f"{n} ({', '.join(f'{k} {v}' for v, k in tally.items() if k)})" if n else "0"

    return ["Counts per status of the findings; post hoc claims and premises apart, never counted:", "",
            "| experiment | " + " | ".join(VERDICTS) + " | post hoc | premises |",
            "|---|" + "---|" * (len(VERDICTS) + 2),
            *[f"| {name} | " + " | ".join(str(c["findings"][v]) for v in VERDICTS)
              + f" | {apart(c['post hoc'])} | {apart(c['premises'])} |" for name, c in per.items()]]
