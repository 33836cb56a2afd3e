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
- ``collapse_order`` (eval, model, against, window = 3, threshold = 0.01): the collapse step of
  ``model``'s run minus ``against``'s, per seed (> 0: model collapses later; a run that never
  collapses counts at its last step + 1). A step count has no sampling interval: lo = hi = value.
  Not identifiable (:func:`starts_at_threshold`) when a run collapses within its first ``window``
  steps in some seed: it starts at the threshold, so its "collapse step" says where it starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rlvr.errors import UserError
from rlvr.experiments.association_measures import collapse_step_of
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


def _smooth(r: np.ndarray, w: int) -> np.ndarray:
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
        sm = _smooth(r, w)
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
    w, thr = int(args["window"]), float(args["threshold"])
    out, details = [], {}
    for s, a in zip(seeds, against_seeds if against_seeds != [None] else [None] * len(seeds)):
        (cm, okm), (ca, oka) = (collapse_step_of(get(args["eval"], name, x), w, thr)
                                for name, x in ((args["model"], s), (args["against"], a)))
        v = cm - ca
        out.append(Estimate(s, v, v, v))
        start = {}
        for name, x in ((args["model"], s), (args["against"], a)):
            ra = [v_ for v_ in get(args["eval"], name, x)["series"]["reward_accuracy"][:5] if v_ is not None]
            start[name] = float(np.mean(ra)) if ra else None
        details[seed_label(s)] = {"model_step": cm, "model_collapsed": okm, "against_step": ca,
                                  "against_collapsed": oka, "start_reward_accuracy": start}
    return out, details


def starts_at_threshold(args: dict, estimates, details: dict) -> str:
    """Why a collapse order is degenerate ('' when it is not): some run collapsed within its first
    ``window`` logged steps (the first trailing mean is already below the threshold)."""
    w = int(args["window"])
    early = [f"{name}-{s} (step {step:.0f})" for s, x in details.items()
             for name, step, ok in ((args["model"], x["model_step"], x["model_collapsed"]),
                                    (args["against"], x["against_step"], x["against_collapsed"]))
             if ok and step <= w]
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


def _rise_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: {x['first']:.3f} -> peak {x['peak']:.3f} (step {x['peak_step']}) -> "
                     f"{x['last']:.3f} (step {x['last_step']}, smoothed)" for s, x in d.items())


def _change_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: {x['first']:.3f} -> {x['end']:.3f} (steps {', '.join(map(str, x['end_steps']))})"
                     for s, x in d.items())


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
            "none for the collapse steps (a step count per seed)", _order_detail, starts_at_threshold,
            "Training dynamics"),
)
