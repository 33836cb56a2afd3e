"""Measures over an RL run's held-out accuracy and reward accuracy through training (a ``kind:
dynamics`` cell's series), for the unsupervised-RLVR claims (docs/methods/unsupervised_rlvr.md).

The held-out points are sampled: a point's sampling variance is taken as p (1 - p) / m, with m =
``samples_per_point`` (held-out problems x samples per problem of the run's evaluation), and a
mean of w points divides it by w. Intervals are +-1.96 sd (normal approximation).

- ``rise_and_fall`` (eval, model, samples_per_point, window = 3): smooth the held-out accuracy with a
  trailing mean of ``window`` points; the estimate is min(peak - first, peak - last) of the smoothed
  curve, the peak taken after the first point (> 0: it rose above where it started and fell back below
  its peak; < 0: it never rose above its start, which refutes the claim), per seed. The peak of a
  noisy curve is biased upward; the smoothing and the interval (the peak's and the other end's
  sampling sd) keep that bias small against the effects claimed.
- ``heldout_change`` (eval, model, samples_per_point, window = 3): mean of the last ``window``
  held-out points minus the first point, per seed (e.g. test-time training raises accuracy).
- ``collapse_order`` (eval, model, against, window = 3, threshold = 0.01, relative = 0,
  units_per_step = 0): the collapse step of ``model``'s run minus ``against``'s, per seed (> 0: model
  collapses later; a run that never collapses counts at its last step + 1). With ``relative`` > 0 the
  threshold is that fraction of each run's own start (the mean reward accuracy of its first
  ``window`` steps), so it is never met at the start. Without ``units_per_step`` a step count has no
  interval (lo = hi = value); with it, the interval is the percentile interval of the difference over a
  parametric bootstrap of every step's reward accuracy (Binomial(units_per_step, value) /
  units_per_step: the groups or rollouts it is a share of;
  :func:`rlvr.experiments.association_measures.collapse_with_draws`). Not identifiable
  (:func:`starts_at_threshold`) when a run collapses within its first ``window`` steps in some seed (it
  starts at the threshold, so its "collapse step" says where it starts), or, with ``relative``, when a
  run starts at 0 reward accuracy (nothing to lose).
- ``past_peak`` (eval, model, against, samples_per_point, window = 3): the mean of ``model``'s last
  ``window`` held-out points minus the smoothed peak of ``against``'s (as ``rise_and_fall`` takes it,
  after the first point), paired by seed (> 0: e.g. a verifier-reward run ends above the best an
  intrinsic-reward run ever reached: it passes the confidence ceiling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rlvr.errors import UserError
from rlvr.experiments.association_measures import collapse_with_draws
from rlvr.experiments.registry import Measure, ModelArgs, PairArgs, register
from rlvr.experiments.verdict import Estimate, seed_label


def heldout(stats: dict) -> tuple[np.ndarray, np.ndarray]:
    """(steps (N,), held-out accuracy (N,)) of the steps where the run evaluated."""
    series = stats.get("series") if stats.get("kind") == "dynamics" else None
    if series is None:
        raise UserError("this measure needs a `kind: dynamics` evaluation (the run's logged series)")
    pts = [(s, r) for s, r in zip(series["step"], series["heldout_pass_rate"]) if r is not None]
    if len(pts) < 3:
        raise UserError(f"only {len(pts)} held-out evaluations in the run; need at least 3")
    s, r = zip(*pts)
    return np.asarray(s), np.asarray(r, dtype=float)


def _var(p: float, m: int, w: int = 1) -> float:
    return max(p * (1 - p), 1e-12) / (m * w)


def trailing_smooth(r: np.ndarray, w: int) -> np.ndarray:
    """Trailing mean over ``w`` points (the first points average what exists)."""
    c = np.cumsum(np.insert(r, 0, 0.0))
    idx = np.arange(1, r.size + 1)
    lo = np.maximum(0, idx - w)
    return (c[idx] - c[lo]) / (idx - lo)


def _m(args: dict) -> int:
    m = int(args["samples_per_point"])
    if m < 1:
        raise UserError(f"samples_per_point {m} must be >= 1 (held-out problems x samples per problem)")
    return m


def rise_and_fall(get, args: dict, seeds, against_seeds):
    m, w = _m(args), int(args["window"])
    out, details = [], {}
    for s in seeds:
        steps, r = heldout(get(args["eval"], args["model"], s))
        sm = trailing_smooth(r, w)
        # the peak after the start: a run that only falls has a negative rise (the claim refuted)
        k = int(np.argmax(sm[1:])) + 1 if r.size > 1 else 0
        first, peak, last = float(r[0]), float(sm[k]), float(sm[-1])
        rise, fall = peak - first, peak - last
        wk = min(w, k + 1)
        sd_peak = _var(peak, m, wk)
        v = min(rise, fall)
        sd = math.sqrt(sd_peak + (_var(first, m) if rise <= fall else _var(last, m, min(w, r.size))))
        out.append(Estimate(s, v, v - 1.96 * sd, v + 1.96 * sd))
        details[seed_label(s)] = {"first": first, "peak": peak, "peak_step": int(steps[k]), "last": last,
                                  "last_step": int(steps[-1])}
    return out, details


def heldout_change(get, args: dict, seeds, against_seeds):
    m, w = _m(args), int(args["window"])
    out, details = [], {}
    for s in seeds:
        steps, r = heldout(get(args["eval"], args["model"], s))
        w_ = min(w, r.size - 1)
        end = float(r[-w_:].mean())
        v = end - float(r[0])
        sd = math.sqrt(_var(end, m, w_) + _var(float(r[0]), m))
        out.append(Estimate(s, v, v - 1.96 * sd, v + 1.96 * sd))
        details[seed_label(s)] = {"first": float(r[0]), "end": end, "end_steps": [int(x) for x in steps[-w_:]]}
    return out, details


def collapse_order(get, args: dict, seeds, against_seeds):
    w, thr, rel, units = int(args["window"]), float(args["threshold"]), float(args["relative"]), \
        int(args["units_per_step"])
    out, details = [], {}
    for s, a in zip(seeds, against_seeds if against_seeds != [None] else [None] * len(seeds)):
        cm, ca = (collapse_with_draws(get(args["eval"], name, x), w, thr, rel, units)
                  for name, x in ((args["model"], s), (args["against"], a)))
        v = cm.step - ca.step
        lo, hi = (v, v) if not units else tuple(float(q) for q in np.quantile(cm.draws - ca.draws, [0.025, 0.975]))
        out.append(Estimate(s, v, lo, hi))
        start = {}
        for name, x in ((args["model"], s), (args["against"], a)):
            ra = [v_ for v_ in get(args["eval"], name, x)["series"]["reward_accuracy"][:5] if v_ is not None]
            start[name] = float(np.mean(ra)) if ra else None
        details[seed_label(s)] = {"model_step": cm.step, "model_collapsed": cm.collapsed, "against_step": ca.step,
                                  "against_collapsed": ca.collapsed, "start_reward_accuracy": start}
        if rel:
            details[seed_label(s)]["thresholds"] = {args["model"]: cm.threshold, args["against"]: ca.threshold}
    return out, details


def past_peak(get, args: dict, seeds, against_seeds):
    m, w = _m(args), int(args["window"])
    out, details = [], {}
    for s, a in zip(seeds, against_seeds if against_seeds != [None] else [None] * len(seeds)):
        steps, r = heldout(get(args["eval"], args["model"], s))
        isteps, ir = heldout(get(args["eval"], args["against"], a))
        w_ = min(w, r.size - 1)
        end = float(r[-w_:].mean())
        sm = trailing_smooth(ir, w)
        k = int(np.argmax(sm[1:])) + 1
        peak = float(sm[k])
        v = end - peak
        sd = math.sqrt(_var(end, m, w_) + _var(peak, m, min(w, k + 1)))
        out.append(Estimate(s, v, v - 1.96 * sd, v + 1.96 * sd))
        details[seed_label(s)] = {"end": end, "end_step": int(steps[-1]), "peak": peak, "peak_step": int(isteps[k])}
    return out, details


def starts_at_threshold(args: dict, estimates, details: dict) -> str:
    """Why a collapse order is degenerate ('' when it is not): some run collapsed within its first
    ``window`` logged steps (the first trailing mean is already below the threshold)."""
    w = int(args["window"])
    early = [f"{name}-{s} (step {step:.0f})" for s, x in details.items()
             for name, step, ok in ((args["model"], x["model_step"], x["model_collapsed"]),
                                    (args["against"], x["against_step"], x["against_collapsed"]))
             if ok and step <= w]
    flat = [f"{name}-{s}" for s, x in details.items() for name, t in x.get("thresholds", {}).items() if t <= 0]
    if flat:
        return f"{', '.join(flat)} started at 0 reward accuracy: a relative threshold has nothing to lose"
    if not early:
        return ""
    return (f"{', '.join(early)} collapsed within its first {w} steps: it starts at the threshold, so its collapse "
            "step measures where it starts, not when it collapses")


NORMAL = "+-1.96 sampling sd of the held-out points for the series measures"


@dataclass(frozen=True, kw_only=True)
class HeldoutArgs(ModelArgs):
    samples_per_point: int
    """Held-out problems x samples per problem of each point (its sampling variance p(1-p)/m)."""
    window: int = 3
    """Points in the trailing mean (rise_and_fall) or the end mean (heldout_change)."""


@dataclass(frozen=True, kw_only=True)
class CollapseArgs(PairArgs):
    window: int = 3
    """Steps in the trailing mean of the reward accuracy."""
    threshold: float = 0.01
    """A run has collapsed at the first step whose trailing mean is below it."""
    relative: float = 0.0
    """> 0: the threshold is this fraction of each run's start (mean of its first ``window`` steps)."""
    units_per_step: int = 0
    """> 0: an interval from a parametric bootstrap of each step's reward accuracy over this many
    groups (a continuous proxy) or rollouts (a binary one); 0: none (a step count)."""


@dataclass(frozen=True, kw_only=True)
class PastPeakArgs(PairArgs):
    samples_per_point: int
    """Held-out problems x samples per problem of each point (both runs evaluate alike)."""
    window: int = 3
    """Points in the end mean of ``model`` and the trailing mean that smooths ``against``'s peak."""


def _rise_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: {x['first']:.3f} -> peak {x['peak']:.3f} (step {x['peak_step']}) -> "
                     f"{x['last']:.3f} (step {x['last_step']}, smoothed)" for s, x in d.items())


def _change_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: {x['first']:.3f} -> {x['end']:.3f} (steps {', '.join(map(str, x['end_steps']))})"
                     for s, x in d.items())


def _past_peak_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: {a['model']} ends {x['end']:.3f} (step {x['end_step']}), {a['against']} peaked "
                     f"{x['peak']:.3f} (step {x['peak_step']}, smoothed)" for s, x in d.items())


def _order_detail(d: dict, a: dict) -> str:
    def num(v):
        return "-" if v is None else f"{v:.3f}"

    return "; ".join(
        f"{s}: {a['model']} {x['model_step']:.0f}{'' if x['model_collapsed'] else ' (never)'} vs {a['against']} "
        f"{x['against_step']:.0f}{'' if x['against_collapsed'] else ' (never)'}; starting reward accuracy "
        + ", ".join(f"{k} {num(v)}" for k, v in x["start_reward_accuracy"].items()) for s, x in d.items())


register(
    Measure("rise_and_fall", rise_and_fall, HeldoutArgs,
            lambda a: f"min(peak - first, peak - last) of {a['model']}'s smoothed held-out accuracy (peak after the "
                      "first point)", NORMAL, _rise_detail, section="Training dynamics"),
    Measure("heldout_change", heldout_change, HeldoutArgs,
            lambda a: f"{a['model']}'s held-out accuracy: mean of the last {a['window']} points - the first", NORMAL,
            _change_detail, section="Training dynamics"),
    Measure("collapse_order", collapse_order, CollapseArgs, lambda a: f"collapse step {a['model']} - {a['against']}",
            "none for the collapse steps (a step count per seed) unless units_per_step is declared: then a "
            "parametric bootstrap of each step's reward accuracy", _order_detail, starts_at_threshold,
            "Training dynamics"),
    Measure("past_peak", past_peak, PastPeakArgs,
            lambda a: f"{a['model']}'s held-out accuracy (mean of the last {a['window']} points) - {a['against']}'s "
                      "smoothed peak", NORMAL, _past_peak_detail, section="Training dynamics"),
)
