"""Measures over compute-performance curves, for the ScaleRL claims (docs/methods/scaling_curves.md).

They read an RL run's held-out pass rate through training from a ``kind: dynamics`` evaluation cell
(its ``series``: per logged step, ``heldout_pass_rate`` where the run evaluated, and the compute axis,
``samples`` by default) and reduce it with :mod:`rlvr.analysis.predictability`. Each returns one
:class:`~rlvr.experiments.verdict.Estimate` per seed (or one shared estimate) and details for the page.

- ``curve_prediction`` (eval, model, fraction, tolerance = 0.02, window = 1): fit on the first
  ``fraction`` of the run's compute (R0 fixed to the first evaluation), predict the last evaluation
  (``window`` > 1: the mean of the last ``window`` evaluations, against the fit's mean at their
  compute). The estimate is tolerance - |predicted - observed|, with its interval from the fit's
  bootstrap curves at the end (> 0 beyond the interval: the prediction lies within the tolerance
  whatever the fit's uncertainty). Not identifiable (:func:`below_jitter`) when the tolerance is below
  the target's own jitter (:func:`jitter` / sqrt(window)): a noisy target could not land within it
  even from a perfect fit.
- ``curve_param_diff`` (eval, model, against, param: A | B | C_mid, log = false, tolerance): the mean
  over seeds of ``model``'s fitted parameter minus ``against``'s, one shared estimate whose interval
  resamples seeds and each fit's bootstrap replicates (:func:`rlvr.analysis.predictability.param_diff`).
  With ``tolerance`` the estimate is tolerance - |difference| (> 0 beyond its interval: the two agree
  within the tolerance), for claims of robustness.
- ``curve_shift_balance`` (eval, model, against): |ln(B_model / B_against)| - |ln(gain_model /
  gain_against)| with gain = A - R0, one shared estimate (> 0: the intervention moved the efficiency
  exponent more than the ceiling, in relative terms; :func:`rlvr.analysis.predictability.shift_balance`).
  Both are *not identifiable here* (:func:`unbent`) unless every fit of both arms is bent: parameters
  read off a curve that has not bent are extrapolations.
- ``early_ranking`` (eval, model, against, fraction): +1 when the fits on the first ``fraction`` of
  compute rank the two runs' final pass rates as they end (-1 when not), per seed; details say who led
  early and who ended higher (a crossing). Not identifiable (:func:`never_crossed`) unless the runs
  crossed in every seed: where the early leader also ends ahead, any ranking that follows the lead is right.
- ``crossing_scan`` (eval, model, arms, fraction, margin = 0.02): every pair of ``[model, *arms]``
  (the runs on disk) whose early leader (mean over the first ``fraction`` of compute) ends lower
  (mean of the last 3 evaluations), both gaps above ``margin``: a crossing. Per seed with at least one
  crossing: 2 x (share of crossings whose early fits pick the final leader) - 1, in [-1, 1]; no
  crossing in any seed: not identifiable (:func:`no_crossing`), saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from rlvr.analysis.curves import sigmoid_curve
from rlvr.analysis.predictability import crossing, fit_with_replicates, param_diff, predict_end, shift_balance
from rlvr.config import check
from rlvr.errors import UserError
from rlvr.experiments.registry import Measure, ModelArgs, one_of, register
from rlvr.experiments.verdict import Estimate, seed_label

N_BOOT = 200


def curve(stats: dict, x: str = "samples") -> tuple[np.ndarray, np.ndarray]:
    """(C (N,), R (N,)) of the steps where the run evaluated, from a dynamics cell's series."""
    series = stats.get("series") if stats.get("kind") == "dynamics" else None
    if series is None:
        raise UserError("curve measures need a `kind: dynamics` evaluation (the run's logged series)")
    if x not in series:
        raise UserError(f"the run's series has no {x!r}; curve measures need the compute axis logged")
    pts = [(c, r) for c, r in zip(series[x], series["heldout_pass_rate"]) if c is not None and r is not None]
    if len(pts) < 6:
        raise UserError(f"only {len(pts)} held-out evaluations in the run; a curve needs at least 6")
    C, R = (np.asarray(v, dtype=np.float64) for v in zip(*pts))
    return C, R



def jitter(R: np.ndarray) -> float:
    """The sd of one evaluation's noise, from the step-to-step differences of a held-out series
    (N,): sd(diff(R)) / sqrt(2), the trend between neighbouring evaluations taken as negligible."""
    return float(np.std(np.diff(R), ddof=1) / np.sqrt(2)) if R.size > 2 else float("nan")


def curve_prediction(get, args: dict, seeds, against_seeds):
    frac, tol, window = float(args["fraction"]), float(args["tolerance"]), int(args["window"])
    out, details = [], {}
    for s in seeds:
        C, R = curve(get(args["eval"], args["model"], s), args["x"])
        p = early_prediction(C, R, frac, s)
        b = p.boot  # the early fit's replicates, at the end without the residual noise of p's interval
        if window == 1:  # the last evaluation
            predicted, observed = p.predicted, p.observed
            ends = sigmoid_curve(float(C[-1]), b.R0, b.A, b.B, b.C_mid)
        else:  # the mean of the last `window` evaluations against the fit's mean at their compute
            last_W = C[-window:]
            predicted = float(sigmoid_curve(last_W, p.fit.R0, p.fit.A, p.fit.B, p.fit.C_mid).mean())
            observed = float(R[-window:].mean())
            ends = sigmoid_curve(last_W[None, :], b.R0[:, None], b.A[:, None], b.B[:, None],
                                 b.C_mid[:, None]).mean(axis=1)
        error = predicted - observed
        e_lo, e_hi = (float(v) - observed for v in np.percentile(ends, [2.5, 97.5]))
        worst = max(abs(e_lo), abs(e_hi), abs(error))
        best = 0.0 if e_lo <= 0 <= e_hi else min(abs(e_lo), abs(e_hi), abs(error))
        out.append(Estimate(s, tol - abs(error), tol - worst, tol - best))
        details[seed_label(s)] = {"predicted": predicted, "observed": observed, "error": error,
                                  "error_interval": [e_lo, e_hi], "bent": p.fit.bent, "points": p.n_points,
                                  "jitter": jitter(R) / np.sqrt(window)}
    return out, details


def below_jitter(args: dict, estimates, details: dict) -> str:
    """Why a prediction cannot pass ('' when it can): its tolerance is below the jitter of the target
    it is checked against (the quietest seed's; the mean of ``window`` evaluations: one's / sqrt(window))."""
    tol = float(args["tolerance"])
    sds = [x["jitter"] for x in details.values() if np.isfinite(x.get("jitter", np.nan))]
    if not sds or tol >= min(sds):
        return ""
    return (f"the tolerance ({100 * tol:.1f} pts) is below one evaluation's own jitter (sd {100 * min(sds):.1f}-"
            f"{100 * max(sds):.1f} pts, from the step-to-step differences of the series{_over_window(args)}): "
            "a perfect fit would still miss the target by more than the tolerance about half the time")


def _over_window(args: dict) -> str:
    window = int(args.get("window", 1))
    return f"; the target, a mean of {window}: one evaluation's / sqrt {window}" if window > 1 else ""


_FITS: dict[tuple, object] = {}  # fits and early predictions of runs, by their curve
_FITS_MAX = 512  # remembered; a page computes at most a few hundred (scalerl: 60 runs, 20 means, 18 predictions)


def fit_run(C: np.ndarray, R: np.ndarray, seed: int | None, n_boot: int | None = None):
    """:func:`~rlvr.analysis.predictability.fit_with_replicates` of one run's curve (``n_boot``
    replicates, default :data:`N_BOOT`), remembered for the process (a page's claims, tables and
    plotted mean curves fit the same runs many times, and a resumed run's page fits them again); the
    oldest fit is forgotten past ``_FITS_MAX`` runs, so a long-lived process does not grow without
    bound."""
    n_boot = N_BOOT if n_boot is None else n_boot
    return _remembered((C.tobytes(), R.tobytes(), seed or 0, n_boot),
                       lambda: fit_with_replicates(C, R, n_boot=n_boot, seed=seed or 0))


def early_prediction(C: np.ndarray, R: np.ndarray, fraction: float, seed: int | None):
    """:func:`~rlvr.analysis.predictability.predict_end` of one run's curve from its first ``fraction``
    of compute (:data:`N_BOOT` replicates), remembered for the process as :func:`fit_run` is."""
    return _remembered(("early", C.tobytes(), R.tobytes(), fraction, seed or 0, N_BOOT),
                       lambda: predict_end(C, R, fraction, n_boot=N_BOOT, seed=seed or 0))


def _remembered(key: tuple, compute: Callable):
    """``compute()``, kept under ``key`` in ``_FITS`` (the oldest forgotten past ``_FITS_MAX``)."""
    if key not in _FITS:
        if len(_FITS) >= _FITS_MAX:
            del _FITS[next(iter(_FITS))]
        _FITS[key] = compute()
    return _FITS[key]


def _arms(get, args: dict, seeds, against_seeds) -> list[list]:
    """The fits with replicates of ``model``'s and ``against``'s runs, one per seed."""
    x = args["x"]
    return [[fit_run(*curve(get(args["eval"], name, s), x), s) for s in ss]
            for name, ss in ((args["model"], seeds), (args["against"], against_seeds))]


def _bent(args: dict, arms: list[list]) -> dict:
    """The details every parameter comparison carries: per arm, whether each seed's fit bent."""
    return {"bent": {n: [f.bent for f, _ in arm] for n, arm in zip((args["model"], args["against"]), arms)}}


def unbent(args: dict, estimates, details: dict) -> str:
    """The identification rule of the parameter comparisons: :func:`withheld` of ``details["bent"]``."""
    return withheld(details["bent"])


def withheld(bent: dict[str, list[bool]]) -> str:
    """Why a comparison of fitted parameters is not identifiable here ('' when it is): every fit of
    both arms must be bent, else A (and B and C_mid, which trade off with it) is an extrapolation
    whose bootstrap interval understates how little the data pin it down (a fit with C_mid beyond the
    data often puts A at its bound)."""
    if all(all(v) for v in bent.values()):
        return ""
    counts = ", ".join(f"{n} {sum(v)} of {len(v)}" for n, v in bent.items())
    return f"not every fit has bent ({counts}): the compared parameters are extrapolations"


def curve_param_diff(get, args: dict, seeds, against_seeds):
    param = args["param"]
    arms = _arms(get, args, seeds, against_seeds)
    d = param_diff(arms[0], arms[1], param, log=bool(args["log"]))
    details = {"model": d.a, "against": d.b, "diff": d.diff, "interval": [d.low, d.high], **_bent(args, arms)}
    if "tolerance" not in args:
        return [Estimate(None, d.diff, d.low, d.high)], details
    tol = float(args["tolerance"])
    worst = max(abs(d.low), abs(d.high))
    best = 0.0 if d.low <= 0 <= d.high else min(abs(d.low), abs(d.high))
    return [Estimate(None, tol - abs(d.diff), tol - worst, tol - best)], details


def curve_shift_balance(get, args: dict, seeds, against_seeds):
    arms = _arms(get, args, seeds, against_seeds)
    b = shift_balance(arms[0], arms[1])
    return [Estimate(None, b.balance, b.low, b.high)], {"d_ln_B": b.d_ln_B, "d_ln_gain": b.d_ln_gain,
                                                        **_bent(args, arms)}


def early_ranking(get, args: dict, seeds, against_seeds):
    frac, x = float(args["fraction"]), args["x"]
    paired = seeds if seeds != [None] else against_seeds
    out, details = [], {}
    for i, s in enumerate(paired):
        ms = seeds[i] if seeds != [None] else None
        as_ = against_seeds[i] if against_seeds != [None] else None
        c = crossing(curve(get(args["eval"], args["model"], ms), x), curve(get(args["eval"], args["against"], as_), x),
                     frac)
        v = 1.0 if c.ranked_right else -1.0
        out.append(Estimate(s, v, v, v))
        details[seed_label(s)] = {"early_leader": c.early_leader, "final_leader": c.final_leader,
                                  "predicted_leader": c.predicted_leader, "crossed": c.crossed}
    return out, details


def never_crossed(args: dict, estimates, details: dict) -> str:
    """Why a ranking is degenerate ('' when every seed's pair crossed): a pair that did not cross ends
    as it began, so fits that follow the early lead rank it right whatever they are worth."""
    flat = [s for s, x in details.items() if not x["crossed"]]
    if not flat:
        return ""
    return (f"{args['model']} and {args['against']} did not cross in {', '.join(flat)} of {len(details)} seed(s) "
            "(the early leader ends ahead): any ranking that follows the early lead is right")


def crossing_scan(get, args: dict, seeds, against_seeds):
    frac, x, margin = float(args["fraction"]), args["x"], float(args["margin"])
    names = [args["model"], *args["arms"]]
    out, details = [], {}
    for s in seeds:
        curves = {}
        for n in names:
            try:
                curves[n] = curve(get(args["eval"], n, s), x)
            except FileNotFoundError:  # an arm not run yet: the scan covers the runs on disk
                continue
        found = []
        for a, b in combinations(curves, 2):
            c = crossing(curves[a], curves[b], frac)
            if c.crossed and min(abs(c.early_gap), abs(c.final_gap)) > margin:
                found.append({"early_leader": a if c.early_leader == "a" else b,
                              "final_leader": a if c.final_leader == "a" else b,
                              "early_gap": abs(c.early_gap), "final_gap": abs(c.final_gap),
                              "ranked_right": c.ranked_right})
        details[seed_label(s)] = {"runs": len(curves), "pairs": len(curves) * (len(curves) - 1) // 2,
                                  "crossings": sorted(found, key=lambda f: -f["final_gap"])}
        if found:
            v = 2.0 * sum(f["ranked_right"] for f in found) / len(found) - 1.0
            out.append(Estimate(s, v, v, v))
    if not any(d["runs"] >= 2 for d in details.values()):
        raise FileNotFoundError(f"fewer than 2 of the runs {', '.join(names)} on disk in every seed")
    return out, details


def no_crossing(args: dict, estimates, details: dict) -> str:
    """Why a crossing scan has nothing to rank ('' when some seed has a crossing)."""
    if estimates:
        return ""
    runs = max(d["runs"] for d in details.values())
    return (f"no crossing: in no seed did the run ahead over the first {float(args['fraction']):.0%} of compute "
            f"end lower, both gaps above {float(args['margin']):g}, among {runs} runs")


SECTION = "Curves"
PARAMS = ("A", "B", "C_mid")
AXES = ("samples", "flops")


@dataclass(frozen=True, kw_only=True)
class CurveArgs(ModelArgs):
    x: str = "samples"
    """The compute axis: samples | flops."""

    def __post_init__(self):
        one_of(self.x, AXES, "x")


@dataclass(frozen=True, kw_only=True)
class PredictionArgs(CurveArgs):
    fraction: float
    """The share of compute the early fit sees."""
    tolerance: float = 0.02
    """How close the prediction must come to the target."""
    window: int = 1
    """The target: the mean of the last ``window`` evaluations (1: the last one)."""

    def __post_init__(self):
        super().__post_init__()
        check(self.window >= 1, "window", f"must be >= 1 (got {self.window})")


@dataclass(frozen=True, kw_only=True)
class CompareArgs(CurveArgs):
    against: str
    """The run it is compared with."""


@dataclass(frozen=True, kw_only=True)
class ParamArgs(CompareArgs):
    param: str
    """A | B | C_mid."""
    log: bool = False
    """Compare ln(param)."""
    tolerance: float | None = None
    """Given: the estimate is tolerance - |difference| (a robustness claim)."""

    def __post_init__(self):
        super().__post_init__()
        one_of(self.param, PARAMS, "param")


@dataclass(frozen=True, kw_only=True)
class RankingArgs(CompareArgs):
    fraction: float
    """The share of compute the early fits see."""


@dataclass(frozen=True, kw_only=True)
class ScanArgs(CurveArgs):
    arms: tuple[str, ...]
    """The other runs scanned with ``model``."""
    fraction: float
    """The share of compute the early fits see."""
    margin: float = 0.02
    """Both gaps (early, final) of a crossing exceed it."""


def _prediction_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: predicted {x['predicted']:.3f}, observed {x['observed']:.3f}, error "
                     f"{100 * x['error']:+.1f} pts [{100 * x['error_interval'][0]:+.1f}, "
                     f"{100 * x['error_interval'][1]:+.1f}], {x['points']} points fitted, "
                     f"{'bent' if x['bent'] else 'not bent'}"
                     + (f", jitter sd {100 * x['jitter']:.1f} pts" if "jitter" in x else "") for s, x in d.items())


def _bent_text(d: dict, name: str) -> str:
    flags = d["bent"][name]
    return f"{name} bent in {sum(flags)} of {len(flags)}"


def _param_detail(d: dict, a: dict) -> str:
    lo, hi = d["interval"]
    return (f"{a['model']} {d['model']:.3f} vs {a['against']} {d['against']:.3f}: difference {d['diff']:+.3f} "
            f"[{lo:+.3f}, {hi:+.3f}]; {_bent_text(d, a['model'])}, {_bent_text(d, a['against'])}")


def _balance_detail(d: dict, a: dict) -> str:
    return (f"ln(B ratio) {d['d_ln_B']:+.3f}, ln((A - R0) ratio) {d['d_ln_gain']:+.3f}; "
            f"{_bent_text(d, a['model'])}, {_bent_text(d, a['against'])}")


def _ranking_detail(d: dict, a: dict) -> str:
    names = {"a": a["model"], "b": a["against"]}
    return "; ".join(f"{s}: early leader {names[x['early_leader']]}, final leader {names[x['final_leader']]}, "
                     f"early fits pick {names[x['predicted_leader']]}" + (" (crossed)" if x["crossed"] else "")
                     for s, x in d.items())


def _scan_detail(d: dict, a: dict) -> str:
    def one(f: dict) -> str:
        return (f"{f['early_leader']} ahead early by {100 * f['early_gap']:.1f} pts, {f['final_leader']} ends "
                f"higher by {100 * f['final_gap']:.1f}, early fits {'right' if f['ranked_right'] else 'wrong'}")

    return "; ".join(f"{s}: {len(x['crossings'])} crossing(s) among {x['runs']} runs ({x['pairs']} pairs)"
                     + (": " + ", ".join(one(f) for f in x["crossings"][:5]) if x["crossings"] else "")
                     + (f", and {len(x['crossings']) - 5} more" if len(x["crossings"]) > 5 else "")
                     for s, x in d.items())


def _param_text(a: dict) -> str:
    tol = "tolerance" in a
    return ((f"{a['tolerance']} - |" if tol else "") + f"{'ln ' if a['log'] else ''}{a['param']} {a['model']} - "
            f"{a['against']}" + ("|" if tol else "") + " (mean over seeds)")


FITTED = "seeds and each fit's bootstrap replicates resampled for the curve parameters"
register(
    Measure("curve_prediction", curve_prediction, PredictionArgs,
            lambda a: f"{a['tolerance']} - |predicted - observed final pass rate"
                      + (f" (mean of the last {a['window']})" if a.get("window", 1) > 1 else "")
                      + f"|, fit on the first {a['fraction']:.0%} of compute, {a['model']}",
            "the early fit's bootstrap curves for the predictions", _prediction_detail, below_jitter, SECTION),
    Measure("curve_param_diff", curve_param_diff, ParamArgs, _param_text, FITTED, _param_detail, unbent, SECTION),
    Measure("curve_shift_balance", curve_shift_balance, CompareArgs,
            lambda a: f"|ln B ratio| - |ln (A - R0) ratio|, {a['model']} vs {a['against']} (> 0: B moved more than A)",
            FITTED, _balance_detail, unbent, SECTION),
    Measure("early_ranking", early_ranking, RankingArgs,
            lambda a: f"+1 when fits on the first {a['fraction']:.0%} of compute rank {a['model']} and "
                      f"{a['against']} as they end, else -1", "none for the rankings (+1 / -1 per seed)",
            _ranking_detail, never_crossed, SECTION),
    Measure("crossing_scan", crossing_scan, ScanArgs,
            lambda a: f"2 x share of crossing pairs (gaps > {a['margin']:g}) whose fits on the first "
                      f"{a['fraction']:.0%} of compute pick the final leader - 1, among {a['model']} and "
                      f"{len(a['arms'])} arms", "none for the crossing scan (a share of pairs per seed)", _scan_detail,
            no_crossing, SECTION),
)
