"""The training-curves section of a page: one figure per metric group (step | compute), one colour
per run or group of seeds, smoothed with the raw series faint behind; groups no run logged say
"not logged", groups whose every series is constant are hidden and named in one line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rlvr.analysis.smoothing import Smoothing
from rlvr.report import curve_figures, figures
from rlvr.report.figures import Rows
from rlvr.report.html_parts import esc, figure, missing

# (id, title, keys) of the training-curve figures, in page order
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


def _values(values: Sequence[float]) -> str:
    return " / ".join(f"{v:g}" for v in values)


def curves_section(groups: Mapping[str, Sequence[Rows]], colours: Mapping[str, str], smoothing: Smoothing,
                   bands: bool = False) -> str:
    """``groups``: {label: [metrics rows of each run]}; ``bands``: say in the caption that groups of
    several runs draw their mean and min..max band."""
    every_run = [rows for runs in groups.values() for rows in runs]
    as_runs = {str(i): rows for i, rows in enumerate(every_run)}
    how = f"Curves: {smoothing.describe()}, the raw series faint behind."
    if bands:
        how += " A group of several runs (seeds): the mean over its runs at the steps all of them logged, the " \
               "min..max range of the runs shaded."
    parts = ['<section id="training"><h2>Training curves</h2>',
             f"<p class='meta'>left: against RL step; right: against cumulative compute (FLOPs). {esc(how)}</p>"]
    optional = [g for g in OPTIONAL_GROUPS if figures.logged_keys(as_runs, g[2])]
    hidden = []
    for gid, title, keys in METRIC_GROUPS + tuple(optional):
        logged = figures.logged_keys(as_runs, keys)
        flat = curve_figures.flat_keys(groups, logged)
        if logged and len(flat) == len(logged):  # no signal: every series constant
            hidden.append(f"{title} ({', '.join(f'{k} = {_values(v)}' for k, v in flat.items())})")
            continue
        shown = [k for k in logged if k not in flat] or list(keys)
        parts.append(f'<div class="metric" id="metric-{gid}"><h3>{esc(title)}</h3>')
        fig = curve_figures.curve_axes(groups, shown, title, colours, smoothing)
        parts.append(figure(f"fig-{gid}", f"{title} against step and compute",
                            None if fig is None else figures.fig_uri(fig), what=title))
        absent = [k for k in keys if k not in logged]
        notes = [f"{', '.join(absent)}: not logged"] if logged and absent else []
        notes += [f"{k}: constant {_values(v)} (not drawn)" for k, v in flat.items()]
        parts.extend(missing(n) for n in notes)
        parts.append("</div>")
    if hidden:
        parts.append(f"<p class='meta' id='hidden-panels'>hidden, constant in every run (no signal): "
                     f"{esc('; '.join(hidden))}</p>")
    return "".join(parts) + "</section>"
