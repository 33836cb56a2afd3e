"""The self-contained HTML run report: one file, viewable offline (inline CSS, PNGs as data URIs).

Sections: summary table, training curves against steps and compute, base-vs-trained
evaluation (pass@k with CI bands, support analysis), the ScaleRL scaling fit, and the
resolved config of every run. Several runs overlay on the same axes (legend = run name);
anything a run did not log is reported as "not logged" instead of failing.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.analysis.curve_plots import CurveSeries
from rlvr.analysis.curves import fit_sigmoid
from rlvr.errors import UserError
from rlvr.eval.support import CATEGORIES, CROSSOVER_LABEL
from rlvr.log import read_metrics
from rlvr.machine import machine_line
from rlvr.paths import atomic_write
from rlvr.report import figures

MIN_FIT_POINTS = 5
# (id, title, keys) of the training-curve figures, in report order
METRIC_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("reward", "reward", ("reward",)),
    ("heldout", "held-out pass rate", ("heldout_pass_rate",)),
    ("entropy", "entropy (nats)", ("entropy",)),
    ("response_len", "response length (tokens)", ("response_len",)),
    ("clip", "clip fraction", ("clip_frac_low", "clip_frac_high")),
    ("kl", "KL", ("approx_kl", "kl_ref")),
    ("zero_var", "zero-variance group fraction", ("zero_var_frac",)),
    ("lag", "policy lag (versions)", ("lag_max", "lag_mean")),
)
# shown only when some run logged them (intrinsic-reward runs)
OPTIONAL_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("intrinsic", "intrinsic reward vs ground truth",
     ("gt_accuracy", "reward_accuracy", "label_accuracy", "proxy_truth_corr")),
)

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1100px;
color:#222;background:#fff;padding:0 16px}
h1{font-size:1.6em;margin-bottom:4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:32px}
h3{font-size:1.05em;margin:18px 0 6px}
table{border-collapse:collapse;margin:8px 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f2f2f2}
td:first-child,th:first-child{text-align:left}
figure{margin:8px 0}img{max-width:100%;border:1px solid #eee}
.missing{color:#999;font-style:italic}.meta{color:#666;font-size:.9em}
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:.85em;max-height:600px}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
nav a{margin-right:12px}
"""


@dataclass
class RunData:
    """What the report reads from one run directory."""

    name: str
    path: Path
    config_text: str | None
    rows: list[dict] = field(default_factory=list)
    eval: dict | None = None
    machine: dict | None = None  # machine.json of the run, else eval.json's "machine"


def load_run(path: Path, name: str | None = None) -> RunData:
    """Read config.yaml, metrics.jsonl and eval.json (each optional) of a run directory."""
    path = Path(path)
    if not path.is_dir():
        raise UserError(f"{path}: not a directory; pass a run directory (it holds metrics.jsonl)")
    files = [path / f for f in ("config.yaml", "metrics.jsonl", "eval.json")]
    if not any(f.is_file() for f in files):
        raise UserError(f"{path}: no config.yaml, metrics.jsonl or eval.json; pass an rlvr run directory")
    cfg = path / "config.yaml"
    result = None
    if (path / "eval.json").is_file():
        try:
            result = json.loads((path / "eval.json").read_text())
        except json.JSONDecodeError as e:
            raise UserError(f"{path / 'eval.json'}: not valid JSON ({e.msg}); re-run rlvr eval") from None
    return RunData(name or path.resolve().name, path, cfg.read_text() if cfg.is_file() else None,
                   read_metrics(path), result, _machine(path, result))


def _machine(path: Path, result: dict | None) -> dict | None:
    """The run's machine record: ``machine.json`` (written when training starts), else the one in
    eval.json; None when neither has one (older runs) or machine.json is unreadable."""
    try:
        info = json.loads((path / "machine.json").read_text())
        if isinstance(info, dict):
            return info
    except (OSError, ValueError):
        pass
    info = (result or {}).get("machine")
    return info if isinstance(info, dict) else None


def _unique_names(paths: Sequence[Path]) -> list[str]:
    """Directory names, prefixed by the parent (then numbered) where two runs share a name."""
    base = [Path(p).resolve().name for p in paths]
    names = [f"{Path(p).resolve().parent.name}/{n}" if base.count(n) > 1 else n for p, n in zip(paths, base)]
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} #{seen[n]}")
    return out


# ----------------------------------------------------------------------------- small HTML helpers
def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt(v: Any, digits: int = 3) -> str:
    """A table cell: ints with thousands separators, floats to ``digits`` places (3 significant
    digits when very large or small), None/NaN as a dash, anything else escaped."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) >= 1e5 or (v != 0 and abs(v) < 1e-3) else f"{v:.{digits}f}"
    return _e(v)


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], table_id: str) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table id="{table_id}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _figure(fig_id: str, alt: str, uri: str | None, caption: str = "", what: str | None = None) -> str:
    """An ``<img>`` with id and alt text; ``"<what>: not logged"`` when there is no figure."""
    if uri is None:
        return f'<p class="missing" id="{fig_id}-missing">{_e(what or alt)}: not logged</p>'
    cap = f"<figcaption class='meta'>{_e(caption)}</figcaption>" if caption else ""
    return f'<figure id="{fig_id}"><img id="{fig_id}-img" alt="{_e(alt)}" src="{uri}">{cap}</figure>'


def _missing(text: str) -> str:
    return f'<p class="missing">{_e(text)}</p>'


# ----------------------------------------------------------------------------- sections
def _last(rows: Sequence[Mapping], key: str, first: bool = False) -> Any:
    vals = [r[key] for r in rows if isinstance(r.get(key), int | float)]
    return (vals[0] if first else vals[-1]) if vals else None


def _block(result: Mapping | None, model: str) -> Mapping:
    """The eval.json block of ``model`` ("base" | "trained"); a one-model eval.json counts as trained."""
    if not result:
        return {}
    if "trained" in result or "base" in result:
        return result.get(model) or {}
    return result if model == "trained" and "pass_at_k" in result else {}


def _pk(block: Mapping, k: str) -> Any:
    """pass@k of a block; ``k="max"`` is the largest k it has."""
    pk = block.get("pass_at_k") or {}
    if not pk:
        return None
    return pk.get(max(pk, key=int) if k == "max" else k)


def summary_section(runs: Sequence[RunData]) -> str:
    """One row per run: final reward, held-out pass@1 first/last, pass@k from eval.json, cost."""
    head = ["run", "steps", "final reward", "held-out pass@1 first", "held-out pass@1 last",
            "base pass@1", "trained pass@1", "base pass@k_max", "trained pass@k_max", "k_max",
            "wall time (s)", "samples", "FLOPs"]
    rows = []
    for r in runs:
        base, trained = _block(r.eval, "base"), _block(r.eval, "trained")
        pk = trained.get("pass_at_k") or base.get("pass_at_k") or {}
        rows.append([
            r.name, _last(r.rows, "step"), _last(r.rows, "reward"),
            _last(r.rows, "heldout_pass_rate", first=True), _last(r.rows, "heldout_pass_rate"),
            _pk(base, "1"), _pk(trained, "1"), _pk(base, "max"), _pk(trained, "max"),
            max(pk, key=int) if pk else None, _last(r.rows, "wall_s"), _last(r.rows, "samples"),
            _last(r.rows, "flops"),
        ])
    note = "" if all(r.eval for r in runs) else _missing("eval.json missing for some runs: pass@k not logged")
    machines = "".join(f"<li><b>{_e(r.name)}</b>: {_e(machine_line(r.machine))}</li>" for r in runs)
    return ('<section id="summary"><h2>Summary</h2>' + _table(head, rows, "summary-table") + note
            + "<p class='meta'>machine (CPU, flags, threads, versions, precision):</p>"
            + f"<ul class='machine meta'>{machines}</ul></section>")


def training_section(runs: Sequence[RunData]) -> str:
    """One two-panel figure (step | FLOPs) per metric group; "not logged" for absent ones."""
    metrics = {r.name: r.rows for r in runs}
    parts = ['<section id="training"><h2>Training curves</h2>',
             "<p class='meta'>left: against RL step; right: against cumulative compute (FLOPs)</p>"]
    optional = [g for g in OPTIONAL_GROUPS if figures.logged_keys(metrics, g[2])]
    for gid, title, keys in METRIC_GROUPS + tuple(optional):
        logged = figures.logged_keys(metrics, keys)
        absent = [k for k in keys if k not in logged]
        parts.append(f'<div class="metric" id="metric-{gid}"><h3>{_e(title)}</h3>')
        parts.append(_figure(f"fig-{gid}", f"{title} against step and compute",
                             figures.metric_figure(metrics, keys, title), what=title))
        if logged and absent:
            parts.append(_missing(f"{', '.join(absent)}: not logged"))
        parts.append("</div>")
    return "".join(parts) + "</section>"


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
    return _table(["run", "n", *CATEGORIES, *rates], rows, "support-table")


def evaluation_section(runs: Sequence[RunData]) -> str:
    """pass@k curves (CI bands) and tables, crossover k, support analysis, retention, from each eval.json.

    The crossover line is shown only for an eval.json with a ``crossover`` block (the rule that
    needs base above trained beyond the 95% interval); older files' ``crossover_k`` is not shown."""
    evals = {r.name: r.eval for r in runs if r.eval}
    parts = ['<section id="evaluation"><h2>Evaluation (eval.json)</h2>']
    if not evals:
        return parts[0] + _missing("no eval.json in any run: evaluation not logged") + "</section>"
    parts.append('<div id="passk"><h3>pass@k</h3>')
    parts.append(_figure("fig-passk", "pass@k curves, base vs trained, with CI bands",
                         figures.passk_figure(evals)))
    for i, (name, result) in enumerate(evals.items()):
        rows, ks = _eval_rows(name, result)
        head = ["model", "problems", "n", *[f"pass@{k}" for k in ks], "token entropy", "answer entropy",
                "mean tokens", "perplexity under base"]
        parts.append(_table(head, rows, f"passk-table-{i}"))
        cross = result.get("crossover") or {}
        if cross.get("text"):
            parts.append(f"<p class='meta' id='crossover-{i}'>{_e(name)}: {_e(CROSSOVER_LABEL)}: "
                         f"{_e(cross['text'])}</p>")
    parts.append("</div><div id='support'><h3>Support (base vs trained)</h3>")
    supports = {n: e["support"] for n, e in evals.items() if e.get("support")}
    if supports:
        parts.append(_support_table(supports))
        parts.append("<p class='meta'>SRR = P/(P+S) support retention, NDR = E/(P+E) discovery, "
                     "SDS their harmonic mean, NSCR = (E-S)/(P+E+S) net change</p>")
    parts.append(_figure("fig-support", "support categories", figures.support_figure(supports, CATEGORIES)))
    parts.append("</div>" + _retention(evals))
    return "".join(parts) + "</section>"


def _retention(evals: Mapping[str, Mapping]) -> str:
    rows = []
    for name, e in evals.items():
        ret = e.get("retention") or {}
        for task, t in (ret.get("trained") or {}).items():
            b = (ret.get("base") or {}).get(task) or {}
            d = (ret.get("delta") or {}).get(task) or {}
            rows.append([name, task, b.get("accuracy"), _ci(b.get("ci")), t.get("accuracy"), _ci(t.get("ci")),
                         d.get("delta"), _ci(d.get("ci")), b.get("gold_perplexity"), t.get("gold_perplexity")])
    if not rows:
        return ""
    head = ["run", "task", "base accuracy", "95% CI", "trained accuracy", "95% CI", "delta", "95% CI (paired)",
            "base gold ppl", "trained gold ppl"]
    table = _table(head, rows, "retention-table")
    return (f"<div id='retention'><h3>Retention (non-target tasks, greedy accuracy)</h3>{table}"
            "<p class='meta'>Intervals: 95% bootstrap over problems; the delta's is paired over the same "
            "problems.</p></div>")


def _ci(ci) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"


def _fit_run(run: RunData) -> tuple[Any, list[Any]]:
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
    return CurveSeries(run.name, C, R, np.ones_like(C, dtype=bool), fit), row


def scaling_section(runs: Sequence[RunData]) -> str:
    """ScaleRL sigmoid fit of held-out pass@1 against FLOPs per run (>= MIN_FIT_POINTS evaluations)."""
    fitted = [_fit_run(r) for r in runs]
    curves = [c for c, _ in fitted if c is not None]
    head = ["run", "points", "A (ceiling)", "B (efficiency)", "C_mid", "R0", "rmse", "bent", "note"]
    parts = ['<section id="scaling"><h2>Scaling fit</h2>',
             "<p class='meta'>R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), C = FLOPs, R = held-out pass@1, "
             "R0 fixed to the first evaluation (ScaleRL). Bootstrap intervals: <code>rlvr fit RUN_DIR</code>."
             "</p>", _table(head, [row for _, row in fitted], "scaling-table")]
    if curves:
        parts.append(_figure("fig-scaling", "scaling fit of held-out pass rate against compute",
                             figures.scaling_figure(curves)))
    elif all(row[1] < MIN_FIT_POINTS for _, row in fitted):
        parts.append(_missing(f"not enough points for a scaling fit (need {MIN_FIT_POINTS} held-out "
                              "evaluations with compute > 0; lower train.eval_every)"))
    else:
        parts.append(_missing("no run could be fitted; see the note column"))
    return "".join(parts) + "</section>"


def config_section(runs: Sequence[RunData]) -> str:
    """The resolved config.yaml of each run, collapsed."""
    parts = ['<section id="config"><h2>Config</h2>']
    for r in runs:
        body = f"<pre>{_e(r.config_text)}</pre>" if r.config_text is not None else _missing("config.yaml not found")
        parts.append(f"<details class='config'><summary>{_e(r.name)}: config.yaml ({_e(r.path)})</summary>"
                     f"{body}</details>")
    return "".join(parts) + "</section>"


def render(runs: Sequence[RunData]) -> str:
    """The whole HTML document of ``runs``."""
    names = ", ".join(r.name for r in runs)
    when = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in ("summary", "training", "evaluation", "scaling", "config"))
    body = "".join(f(runs) for f in (summary_section, training_section, evaluation_section, scaling_section,
                                     config_section))
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>rlvr report: {_e(names)}"
            f"</title><style>{_CSS}</style></head><body><h1>rlvr run report</h1>"
            f"<p class='meta'>runs: {_e(names)} · generated {when}</p><nav>{nav}</nav>{body}</body></html>\n")


def write_report(run_dirs: list[Path], out_path: Path) -> Path:
    """Write ONE self-contained HTML report of ``run_dirs`` (overlaid) to ``out_path``; returns it."""
    if not run_dirs:
        raise UserError("no run directory given; pass at least one run directory")
    names = _unique_names([Path(p) for p in run_dirs])
    runs = [load_run(Path(p), n) for p, n in zip(run_dirs, names)]
    return atomic_write(out_path, render(runs))
