"""The ``rlvr compare`` page: groups of runs (one recipe over seeds) side by side, self-contained HTML.

Sections: the runs and their groups; the paired differences of every group against the first
(pass@k, entropies, retention, support; :mod:`rlvr.report.differences`) as tables and a pass@k
difference plot; the training curves with seed bands; pass@k of each group; the completions of
each group's first run. One colour per group on every figure.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlvr.analysis.smoothing import Smoothing
from rlvr.eval.support import CATEGORIES
from rlvr.report import figures
from rlvr.report.colours import colour_map
from rlvr.report.curves_section import curves_section
from rlvr.report.html import page
from rlvr.report.html_parts import ci_text, colour_key, esc, figure, missing, sample_cards, table
from rlvr.report.run_data import RunData, eval_block

SECTIONS = ("runs", "differences", "training", "passk", "samples")


def _signed(value: Any, ci: Sequence[float] | None) -> str:
    """B - A with a sign; bold when the interval excludes 0."""
    if value is None:
        return "–"
    text = f"{value:+.3f}"
    if ci and (ci[0] > 0 or ci[1] < 0):
        return f"<b class='{'pos' if ci[0] > 0 else 'neg'}'>{text}</b>"
    return text


def runs_section(groups: Mapping[str, Sequence[RunData]]) -> str:
    rows = [[label, ", ".join(r.name for r in runs), ", ".join("–" if r.seed is None else str(r.seed) for r in runs),
             max((r.rows[-1].get("step", 0) for r in runs if r.rows), default=None)] for label, runs in groups.items()]
    return ('<section id="runs"><h2>Runs</h2>' + table(["group", "runs", "seeds", "last step"], rows, "runs-table")
            + "<p class='meta'>A group is the runs whose folder names differ only in their seed and time suffixes "
            "(<code>cispo-s1-20250101-120000</code> is in <code>cispo</code>), or those given one label with "
            "<code>--group</code>.</p></section>")


def _difference_table(label: str, diff: Mapping[str, Any], index: int) -> str:
    head = ["metric", "reference", label, "difference", "95% CI", "problems"]
    body = "".join(
        f"<tr><td>{esc(r['metric'])}</td><td>{_num(r['reference'])}</td><td>{_num(r['other'])}</td>"
        f"<td>{_signed(r['difference'], r['ci'])}</td><td>{ci_text(r['ci'], signed=True)}</td>"
        f"<td>{_num(r['problems'])}</td></tr>" for r in diff["rows"])
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f'<table id="differences-table-{index}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _num(v: Any) -> str:
    if v is None:
        return "–"
    return f"{v:,}" if isinstance(v, int) else f"{v:.3f}"


def _support_lines(label: str, support: Mapping[str, Any] | None, index: int) -> str:
    if not support:
        return ""
    counts = support["counts"]
    row = [[f"{label} against the reference", *[counts[c] for c in CATEGORIES],
            *[support["rates"][x] for x in ("SRR", "NDR", "SDS", "NSCR")]]]
    return (table(["support (problems x pairs)", *CATEGORIES, "SRR", "NDR", "SDS", "NSCR"], row,
                  f"support-table-{index}")
            + "<p class='meta'>The reference in the place of the base: <i>expanded</i> = solved at least once by "
            f"{esc(label)} only, <i>shrunk</i> = by the reference only; the row <i>solved at least once</i> above "
            "is the same split per problem, with its paired interval.</p>")


def differences_section(reference: str, differences: Mapping[str, Mapping[str, Any]],
                        colours: Mapping[str, str]) -> str:
    parts = ['<section id="differences"><h2>Paired differences</h2>',
             f"<p class='meta'>Every group against <b>{esc(reference)}</b>: difference = group - reference; "
             "bold where the 95% interval excludes 0. Per problem, the difference of the two runs of a pair "
             "(same held-out problems), averaged over the pairs; interval: percentile bootstrap over problems "
             "(1000 draws, seed 0), the paired bootstrap of <code>rlvr eval</code>'s crossover.</p>"]
    for i, (label, diff) in enumerate(differences.items()):
        parts.append(f"<h3>{esc(label)} vs {esc(reference)}</h3><p class='meta'>paired {esc(diff['pairing'])}; "
                     f"from {esc(diff['source'])}</p>")
        parts.append(_difference_table(label, diff, i))
        parts.append(_support_lines(label, diff.get("support"), i))
    parts.append(figure("fig-passk-difference", "paired pass@k difference against k with 95% intervals",
                        figures.difference_figure(differences, reference, colours), what="pass@k difference"))
    return "".join(parts) + "</section>"


def _group_passk(runs: Sequence[RunData]) -> dict[str, Any]:
    """{"pass_at_k": mean over the group's runs of the trained model's pass@k} (ks every run has)."""
    blocks = [eval_block(r.eval, "trained").get("pass_at_k") or {} for r in runs]
    ks = set.intersection(*(set(b) for b in blocks)) if blocks else set()
    return {"pass_at_k": {k: float(np.mean([b[k] for b in blocks])) for k in ks}} if ks else {}


def passk_section(groups: Mapping[str, Sequence[RunData]], colours: Mapping[str, str]) -> str:
    evals = {label: p for label, runs in groups.items() if (p := _group_passk(runs))}
    uri = figures.passk_figure(evals, colours, title="pass@k of the trained models, mean over each group's runs")
    return ('<section id="passk"><h2>pass@k</h2>'
            + figure("fig-passk", "pass@k of each group against k", uri, what="pass@k (eval.json)") + "</section>")


def samples_section(groups: Mapping[str, Sequence[RunData]]) -> str:
    parts = ['<section id="samples"><h2>Sample completions</h2>',
             "<p class='meta'>The held-out samples of each group's first run.</p>"]
    parts += [sample_cards(f"{label}: {runs[0].name}", runs[0].samples()) for label, runs in groups.items()]
    return "".join(parts) + "</section>"


def render_compare(groups: Mapping[str, Sequence[RunData]], differences: Mapping[str, Mapping[str, Any]],
                   smoothing: Smoothing) -> str:
    """The whole HTML document; ``differences``: {label: paired differences against the first group}."""
    reference = next(iter(groups))
    colours = colour_map(groups)
    when = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    body = "".join([
        runs_section(groups), colour_key(colours),
        differences_section(reference, differences, colours) if differences else missing("one group: nothing to pair"),
        curves_section({label: [r.rows for r in runs] for label, runs in groups.items()}, colours, smoothing,
                       bands=True),
        passk_section(groups, colours), samples_section(groups)])
    names = " vs ".join(groups)
    return page(f"rlvr compare: {names}", f"groups: {names} · reference {reference} · generated {when}",
                SECTIONS, body)
