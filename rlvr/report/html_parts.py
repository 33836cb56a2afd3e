"""The pieces the HTML pages (run report, ``rlvr compare``) are built from: the inline stylesheet,
escaped cells, tables, figures, "not logged" notes, the colour key and the sample-completion
cards. Everything inline: no script, no external stylesheet, font or image.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.eval.samples import is_correct
from rlvr.report.sample_picks import pick_samples

CSS = """
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
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;margin:0 4px 0 10px;vertical-align:middle}
.sample{border:1px solid #ddd;border-left:6px solid #999;margin:8px 0;padding:4px 10px}
.sample.right{border-left-color:#2ca02c}.sample.wrong{border-left-color:#d62728}
.sample pre{max-height:220px;white-space:pre-wrap;margin:4px 0}
.pos{color:#1a7f37}.neg{color:#c0392b}
"""
COMPLETION_CHARS = 1200  # a longer completion is cut, saying how much was left out


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def fmt(v: Any, digits: int = 3) -> str:
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
    return esc(v)


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], table_id: str) -> str:
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table id="{table_id}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def figure(fig_id: str, alt: str, uri: str | None, caption: str = "", what: str | None = None) -> str:
    """An ``<img>`` with id and alt text; ``"<what>: not logged"`` when there is no figure."""
    if uri is None:
        return f'<p class="missing" id="{fig_id}-missing">{esc(what or alt)}: not logged</p>'
    cap = f"<figcaption class='meta'>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure id="{fig_id}"><img id="{fig_id}-img" alt="{esc(alt)}" src="{uri}">{cap}</figure>'


def missing(text: str) -> str:
    return f'<p class="missing">{esc(text)}</p>'


def ci_text(ci: Sequence[float] | None, signed: bool = False) -> str:
    if not ci:
        return "–"
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if signed else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def colour_key(colours: Mapping[str, str]) -> str:
    """One swatch per name: the colour it has in every figure of the page."""
    items = "".join(f"<span class='swatch' style='background:{c}'></span>{esc(n)}" for n, c in colours.items())
    return f"<p class='meta' id='colour-key'>colours (the same in every figure):{items}</p>"


def _completion(text: str) -> str:
    if len(text) <= COMPLETION_CHARS:
        return esc(text)
    return esc(text[:COMPLETION_CHARS]) + esc(f"\n[... {len(text) - COMPLETION_CHARS} more characters]")


def sample_cards(name: str, rows: Sequence[Mapping[str, Any]] | None, n_random: int = 3) -> str:
    """The best, the worst and ``n_random`` random completions of one run (:func:`pick_samples`), each
    with its problem, answer, gold, reward and length; a note when the run kept no samples."""
    if rows is None:
        return missing(f"{name}: no samples.jsonl (evaluate the run to see completions)")
    cards = []
    for label, row in pick_samples(rows, n_random):
        right = "right" if is_correct(row) else "wrong"
        answer = row.get("answer")
        facts = [f"<b>{esc(label)}</b>", f"problem {esc(row.get('problem_id'))}",
                 "no answer parsed" if answer is None else f"answer {esc(answer)}",
                 *([f"gold {esc(row['gold'])}"] if row.get("gold") is not None else []),
                 f"reward {fmt(row.get('reward'))}", f"{fmt(row.get('num_tokens'))} tokens",
                 f"finish {esc(row.get('finish_reason', '–'))}", f"mean logp {fmt(row.get('mean_logp'))}"]
        prompt = f"<pre class='prompt'>{_completion(row['prompt'])}</pre>" if row.get("prompt") else ""
        cards.append(f"<div class='sample {right}'><p class='meta'>{' · '.join(facts)}</p>{prompt}"
                     f"<pre>{_completion(str(row.get('completion', '')))}</pre></div>")
    return (f"<h3>{esc(name)}</h3><p class='meta'>{len(rows):,} completions; best = highest reward, worst = "
            "lowest reward (of equals, the one the model was surest of), and a few at random</p>" + "".join(cards))
