"""The self-contained HTML run report: one file, viewable offline (inline CSS, PNGs as data URIs).

Sections: summary table, training curves against steps and compute (smoothed, raw faint
behind; panels with no signal hidden), base-vs-trained evaluation (pass@k with CI bands,
support analysis), sample completions (best, worst, a few at random), the ScaleRL scaling
fit, and the resolved config of every run. Several runs overlay on the same axes, each run in
one colour on every figure (legend = run name); anything a run did not log is reported as
"not logged" instead of failing.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.analysis.curve_plots import CurveSeries
from rlvr.analysis.curves import fit_sigmoid
from rlvr.analysis.smoothing import DEFAULT, Smoothing
from rlvr.errors import UserError
from rlvr.eval.support import CATEGORIES, CROSSOVER_LABEL
from rlvr.machine import machine_line
from rlvr.paths import atomic_write
from rlvr.report import figures
from rlvr.report.colours import colour_map
from rlvr.report.curves_section import curves_section
from rlvr.report.html_parts import CSS, ci_text, colour_key, esc, figure, missing, sample_cards, table
from rlvr.report.run_data import RunData, eval_block, load_runs, passk_of

MIN_FIT_POINTS = 5


# ----------------------------------------------------------------------------- sections
def _last(rows: Sequence[Mapping], key: str, first: bool = False) -> Any:
    vals = [r[key] for r in rows if isinstance(r.get(key), int | float)]
    return (vals[0] if first else vals[-1]) if vals else None


def summary_section(runs: Sequence[RunData]) -> str:
    """One row per run: final reward, held-out pass@1 first/last, pass@k from eval.json, cost."""
    head = ["run", "steps", "final reward", "held-out pass@1 first", "held-out pass@1 last",
            "base pass@1", "trained pass@1", "base pass@k_max", "trained pass@k_max", "k_max",
            "wall time (s)", "samples", "FLOPs"]
    rows = []
    for r in runs:
        base, trained = eval_block(r.eval, "base"), eval_block(r.eval, "trained")
        pk = trained.get("pass_at_k") or base.get("pass_at_k") or {}
        rows.append([
            r.name, _last(r.rows, "step"), _last(r.rows, "reward"),
            _last(r.rows, "heldout_pass_rate", first=True), _last(r.rows, "heldout_pass_rate"),
            passk_of(base, "1"), passk_of(trained, "1"), passk_of(base, "max"), passk_of(trained, "max"),
            max(pk, key=int) if pk else None, _last(r.rows, "wall_s"), _last(r.rows, "samples"),
            _last(r.rows, "flops"),
        ])
    note = "" if all(r.eval for r in runs) else missing("eval.json missing for some runs: pass@k not logged")
    machines = "".join(f"<li><b>{esc(r.name)}</b>: {esc(machine_line(r.machine))}</li>" for r in runs)
    return ('<section id="summary"><h2>Summary</h2>' + table(head, rows, "summary-table") + note
            + "<p class='meta'>machine (CPU, flags, threads, versions, precision):</p>"
            + f"<ul class='machine meta'>{machines}</ul></section>")


def _eval_rows(name: str, result: Mapping) -> tuple[list[list[Any]], list[str]]:
    models = figures.pair_models(result)
    ks = sorted({k for b in models.values() for k in (b.get("pass_at_k") or {})}, key=int)
    rows = []
    for model, b in models.items():
        ppl = ((result.get("perplexity_under_base") or {}).get(model) or {}).get("mean")
        rows.append([f"{name}: {model}", b.get("problems"), b.get("n"),
                     *[(b.get("pass_at_k") or {}).get(k) for k in ks], b.get("token_entropy"),
                     b.get("answer_entropy"), b.get("mean_num_tokens"), ppl])
    return rows, ks


def _support_table(supports: Mapping[str, Mapping]) -> str:
    rates = ("SRR", "NDR", "SDS", "NSCR")
    rows = [[n, s.get("n"), *[(s.get("counts") or {}).get(c) for c in CATEGORIES],
             *[(s.get("rates") or {}).get(x) for x in rates]] for n, s in supports.items()]
    return table(["run", "n", *CATEGORIES, *rates], rows, "support-table")


def evaluation_section(runs: Sequence[RunData], colours: Mapping[str, str]) -> str:
    """pass@k curves (CI bands) and tables, crossover k, support analysis, retention, from each eval.json.

    The crossover line is shown only for an eval.json with a ``crossover`` block (the rule that
    needs base above trained beyond the 95% interval); older files' ``crossover_k`` is not shown."""
    evals = {r.name: r.eval for r in runs if r.eval}
    parts = ['<section id="evaluation"><h2>Evaluation (eval.json)</h2>']
    if not evals:
        return parts[0] + missing("no eval.json in any run: evaluation not logged") + "</section>"
    parts.append('<div id="passk"><h3>pass@k</h3>')
    parts.append(figure("fig-passk", "pass@k curves, base vs trained, with CI bands",
                        figures.passk_figure(evals, colours)))
    for i, (name, result) in enumerate(evals.items()):
        rows, ks = _eval_rows(name, result)
        head = ["model", "problems", "n", *[f"pass@{k}" for k in ks], "token entropy", "answer entropy",
                "mean tokens", "perplexity under base"]
        parts.append(table(head, rows, f"passk-table-{i}"))
        cross = result.get("crossover") or {}
        if cross.get("text"):
            parts.append(f"<p class='meta' id='crossover-{i}'>{esc(name)}: {esc(CROSSOVER_LABEL)}: "
                         f"{esc(cross['text'])}</p>")
    parts.append("</div><div id='support'><h3>Support (base vs trained)</h3>")
    supports = {n: e["support"] for n, e in evals.items() if e.get("support")}
    if supports:
        parts.append(_support_table(supports))
        parts.append("<p class='meta'>SRR = P/(P+S) support retention, NDR = E/(P+E) discovery, "
                     "SDS their harmonic mean, NSCR = (E-S)/(P+E+S) net change</p>")
    parts.append(figure("fig-support", "support categories", figures.support_figure(supports, CATEGORIES, colours)))
    parts.append("</div>" + _retention(evals))
    return "".join(parts) + "</section>"


def _retention(evals: Mapping[str, Mapping]) -> str:
    rows = []
    for name, e in evals.items():
        ret = e.get("retention") or {}
        for task, t in (ret.get("trained") or {}).items():
            b = (ret.get("base") or {}).get(task) or {}
            d = (ret.get("delta") or {}).get(task) or {}
            rows.append([name, task, b.get("accuracy"), ci_text(b.get("ci")), t.get("accuracy"), ci_text(t.get("ci")),
                         d.get("delta"), ci_text(d.get("ci")), b.get("gold_perplexity"), t.get("gold_perplexity")])
    if not rows:
        return ""
    head = ["run", "task", "base accuracy", "95% CI", "trained accuracy", "95% CI", "delta", "95% CI (paired)",
            "base gold ppl", "trained gold ppl"]
    retention = table(head, rows, "retention-table")
    return (f"<div id='retention'><h3>Retention (non-target tasks, greedy accuracy)</h3>{retention}"
            "<p class='meta'>Intervals: 95% bootstrap over problems; the delta's is paired over the same "
            "problems.</p></div>")


def _fit_run(run: RunData, colour: str | None = None) -> tuple[Any, list[Any]]:
    """(CurveSeries or None, table row) of the sigmoid fit of one run's held-out curve."""
    import numpy as np

    xs, ys = figures.series(run.rows, "flops", "heldout_pass_rate")
    pts = [(c, r) for c, r in zip(xs, ys) if c > 0]
    if len(pts) < MIN_FIT_POINTS:
        return None, [run.name, len(pts), None, None, None, None, None, None,
                      f"not enough points ({len(pts)} held-out evaluations, need {MIN_FIT_POINTS})"]
    C, R = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    try:
        fit = fit_sigmoid(C, R, R0=float(R[0]))
    except (UserError, ValueError, ArithmeticError, np.linalg.LinAlgError) as e:  # a report never fails on a fit
        return None, [run.name, len(pts), None, None, None, None, None, None, str(e)]
    row = [run.name, fit.n_points, fit.A, fit.B, fit.C_mid, fit.R0, fit.rmse, fit.bent, fit.message or "ok"]
    return CurveSeries(run.name, C, R, np.ones_like(C, dtype=bool), fit, color=colour), row


def scaling_section(runs: Sequence[RunData], colours: Mapping[str, str]) -> str:
    """ScaleRL sigmoid fit of held-out pass@1 against FLOPs per run (>= MIN_FIT_POINTS evaluations)."""
    fitted = [_fit_run(r, colours.get(r.name)) for r in runs]
    curves = [c for c, _ in fitted if c is not None]
    head = ["run", "points", "A (ceiling)", "B (efficiency)", "C_mid", "R0", "rmse", "bent", "note"]
    parts = ['<section id="scaling"><h2>Scaling fit</h2>',
             "<p class='meta'>R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), C = FLOPs, R = held-out pass@1, "
             "R0 fixed to the first evaluation (ScaleRL). Bootstrap intervals: <code>rlvr fit RUN_DIR</code>."
             "</p>", table(head, [row for _, row in fitted], "scaling-table")]
    if curves:
        parts.append(figure("fig-scaling", "scaling fit of held-out pass rate against compute",
                            figures.scaling_figure(curves)))
    elif all(row[1] < MIN_FIT_POINTS for _, row in fitted):
        parts.append(missing(f"not enough points for a scaling fit (need {MIN_FIT_POINTS} held-out "
                             "evaluations with compute > 0; lower train.eval_every)"))
    else:
        parts.append(missing("no run could be fitted; see the note column"))
    return "".join(parts) + "</section>"


def samples_section(runs: Sequence[RunData]) -> str:
    """Completions of each run's held-out samples (``samples.jsonl``): the best, the worst, a few at random."""
    parts = ['<section id="samples"><h2>Sample completions</h2>']
    parts += [sample_cards(r.name, r.samples()) for r in runs]
    return "".join(parts) + "</section>"


def config_section(runs: Sequence[RunData]) -> str:
    """The resolved config.yaml of each run, collapsed."""
    parts = ['<section id="config"><h2>Config</h2>']
    for r in runs:
        body = f"<pre>{esc(r.config_text)}</pre>" if r.config_text is not None else missing("config.yaml not found")
        parts.append(f"<details class='config'><summary>{esc(r.name)}: config.yaml ({esc(r.path)})</summary>"
                     f"{body}</details>")
    return "".join(parts) + "</section>"


SECTIONS = ("summary", "training", "evaluation", "samples", "scaling", "config")


def page(title: str, subtitle: str, sections: Sequence[str], body: str) -> str:
    """A whole self-contained HTML document: heading, a line under it, links to ``sections``, ``body``."""
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in sections)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{esc(title.split(':')[0])}</h1>"
            f"<p class='meta'>{esc(subtitle)}</p><nav>{nav}</nav>{body}</body></html>\n")


def render(runs: Sequence[RunData], smoothing: Smoothing = DEFAULT) -> str:
    """The whole HTML document of ``runs``: one colour per run on every figure."""
    names = ", ".join(r.name for r in runs)
    when = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    colours = colour_map(r.name for r in runs)
    body = "".join([summary_section(runs), colour_key(colours),
                    curves_section({r.name: [r.rows] for r in runs}, colours, smoothing),
                    evaluation_section(runs, colours), samples_section(runs), scaling_section(runs, colours),
                    config_section(runs)])
    return page(f"rlvr run report: {names}", f"runs: {names} · generated {when}", SECTIONS, body)


def write_report(run_dirs: list[Path], out_path: Path, smoothing: Smoothing = DEFAULT) -> Path:
    """Write ONE self-contained HTML report of ``run_dirs`` (overlaid) to ``out_path``; returns it."""
    return atomic_write(out_path, render(load_runs([Path(p) for p in run_dirs]), smoothing))
