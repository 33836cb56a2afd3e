"""The quantities claims are checked on: registered measures over per-problem statistics.

A measure reads the per-problem statistics of evaluated models (:mod:`rlvr.experiments.evaluate`)
through a ``get(eval, model, seed) -> stats`` lookup and returns one
:class:`~rlvr.experiments.verdict.Estimate` per seed (the value and its 95% paired bootstrap
interval over problems) plus ``details`` for the page. Seeds: those of ``model`` when it is seeded,
else one; ``against`` is paired seed by seed when it is seeded too, else shared.

Measures (formulas in docs/commands/reproduce.md; the weight and dynamics measures are registered at the end):

- ``passk_diff`` (eval, model, against, k): mean_p [pass@k(model) - pass@k(against)], unbiased
  pass@k (k = "max" means n); details carry the crossover k (smallest k where against > model beyond
  the interval).
- ``support_balance`` (eval, model, against): mean_p [S_p - E_p] at k = n, S_p = 1 when only
  ``against`` solves p in n samples (shrunk), E_p = 1 when only ``model`` does (expanded); > 0 means
  shrinkage outweighs expansion. Details: P/S/E/O counts, SRR, NDR, SDS, NSCR.
- ``entropy_diff`` (eval, model, against, level: token | answer): mean_p [H_p(model) - H_p(against)].
- ``entropy_stability`` (eval, model, against, level, reference = base): mean_p [|H_p(model) -
  H_p(ref)| - |H_p(against) - H_p(ref)|]; < 0 means the model's entropy stays closer to the
  reference's than ``against``'s does (a collapse and an explosion both count as a shift).
- ``ppl_diff`` (eval, model, against): mean_p [logPPL_base(model's correct samples) -
  logPPL_base(against's own samples)] over problems where both exist; < 0 means the model's right
  answers are ones the base already rates as more likely than its own typical output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlvr.config import ConfigError
from rlvr.errors import UserError
from rlvr.eval.passk import bootstrap_ci
from rlvr.eval.support import classify, crossover_k, support_counts, support_rates
from rlvr.experiments import association_measures as am
from rlvr.experiments import curve_measures as cm
from rlvr.experiments import dynamics_measures as dm
from rlvr.experiments import series_measures as sm
from rlvr.experiments import weight_measures as wm
from rlvr.experiments.cells import cell_passk
from rlvr.experiments.verdict import Estimate, seed_label

Get = Callable[[str, str, "int | None"], dict]


def identified(args: dict, estimates: list[Estimate], details: dict) -> str:
    """The identification rule of a measure whose quantity always exists: no reason."""
    return ""


@dataclass(frozen=True)
class Measure:
    compute: Callable[[Get, dict, list[int | None], list[int | None]], tuple[list[Estimate], dict]]
    required: tuple[str, ...]
    describe: Callable[[dict], str]
    identify: Callable[[dict, list[Estimate], dict], str] = identified
    """(args, estimates, details) -> why the quantity is not identifiable here ('' when it is),
    computed from the data (:data:`rlvr.experiments.verdict.NOT_IDENTIFIABLE`)."""

    def check(self, args: dict, evals: dict, models: dict, where: str) -> None:
        """Declaration-time check: the arguments exist and name declared evaluations/models (ConfigError
        naming the key under ``where``, e.g. ``claims[3].args.eval``)."""
        missing = [a for a in self.required if a not in args]
        if missing:
            raise ConfigError(f"{where}.args: missing {', '.join(missing)}")
        ev = evals.get(args["eval"])
        if ev is None:
            raise ConfigError(f"{where}.args.eval: unknown evaluation {args['eval']!r}")
        # evaluations with the same protocol share their cells (every dynamics evaluation reads the same
        # runs): a claim may compare models that different evaluations (different parts) list
        pool = {m for e in evals.values() if ev.same_cells(e) for m in e.models}
        for key in ("model", "against", "reference"):
            if key in args and args[key] not in pool:
                raise ConfigError(f"{where}.args.{key}: {args[key]!r} is not evaluated by {args['eval']} "
                                  "or an evaluation with its protocol")
        if "arms" in args:  # a scan over runs
            if not isinstance(args["arms"], list) or not args["arms"]:
                raise ConfigError(f"{where}.args.arms: a non-empty list of models")
            for m in args["arms"]:
                if m not in pool:
                    raise ConfigError(f"{where}.args.arms: {m!r} is not evaluated by {args['eval']} or an "
                                      "evaluation with its protocol")
        if "pairs" in args:  # association measures: per checkpoint [model, ..., its start model]
            if not args["pairs"] or not all(isinstance(p, list) and len(p) >= 2 for p in args["pairs"]):
                raise ConfigError(f"{where}.args.pairs: a list of [model, ..., start model] lists, one per checkpoint")
            dyn = evals.get(args.get("dynamics", ""))
            for p in args["pairs"]:
                named = p[1:] if dyn is not None else p  # an intrinsic run (first) is read by `dynamics`
                for m in named:
                    if m not in pool:
                        raise ConfigError(f"{where}.args.pairs: {m!r} is not evaluated by {args['eval']} or an "
                                          "evaluation with its protocol")
                if dyn is not None and p[0] not in dyn.models:
                    raise ConfigError(f"{where}.args.pairs: {p[0]!r} is not evaluated by {args['dynamics']}")


def _estimate(seed: int | None, per_problem: np.ndarray, boot_seed: int = 0) -> Estimate:
    if per_problem.size == 0:
        return Estimate(seed, float("nan"), float("nan"), float("nan"))
    lo, hi = bootstrap_ci(per_problem, seed=boot_seed)
    return Estimate(seed, float(per_problem.mean()), float(lo), float(hi))



def _pairs(get: Get, args: dict, seeds: list[int | None], against_seeds: list[int | None]):
    """(seed, model stats, against stats), one per seed of whichever side is seeded (both seeded:
    paired seed by seed; a shared side, seeds ``[None]``, meets every seed of the other)."""
    m_seeded, a_seeded = seeds != [None], against_seeds != [None]
    if m_seeded and a_seeded and len(seeds) != len(against_seeds):
        raise UserError(f"{args['model']} and {args['against']} have different seed counts")
    for i in range(max(len(seeds), len(against_seeds))):
        s = seeds[i] if m_seeded else None
        a_seed = against_seeds[i] if a_seeded else None
        m, a = get(args["eval"], args["model"], s), get(args["eval"], args["against"], a_seed)
        if m["ids"] != a["ids"]:
            raise UserError(f"{args['model']} and {args['against']} were evaluated on different problems")
        yield (s if m_seeded else a_seed), m, a


def _k(args: dict, n: int) -> int:
    k = n if args.get("k", "max") == "max" else int(args["k"])
    if not 1 <= k <= n:
        raise UserError(f"k={k} is outside 1..n={n}")
    return k


def passk_diff(get: Get, args: dict, seeds, against_seeds):
    out, details = [], {"crossover": {}, "model": {}, "against": {}}
    for s, m, a in _pairs(get, args, seeds, against_seeds):
        n = min(m["n"], a["n"])
        k = _k(args, n)
        ks = sorted({1 << e for e in range(n.bit_length()) if (1 << e) <= n} | {n, k})
        pm = cell_passk(m, ks)  # (P, K)
        pa = cell_passk(a, ks)
        j = ks.index(k)
        out.append(_estimate(s, pm[:, j] - pa[:, j]))
        cross = crossover_k(ks, pa, pm)
        details["crossover"][seed_label(s)] = cross if cross is not None else f"none up to {ks[-1]}"
        details["model"][seed_label(s)] = {str(kk): float(v) for kk, v in zip(ks, pm.mean(0))}
        details["against"][seed_label(s)] = {str(kk): float(v) for kk, v in zip(ks, pa.mean(0))}
    return out, details


def support_balance(get: Get, args: dict, seeds, against_seeds):
    out, details = [], {}
    for s, m, a in _pairs(get, args, seeds, against_seeds):
        sm, sa = np.asarray(m["correct"]) > 0, np.asarray(a["correct"]) > 0
        shrunk, expanded = sa & ~sm, sm & ~sa
        out.append(_estimate(s, shrunk.astype(float) - expanded.astype(float)))
        cats = {str(i): classify(bool(x), bool(y)) for i, (x, y) in enumerate(zip(sa, sm))}
        counts = support_counts(cats)
        details[seed_label(s)] = {"counts": counts, "rates": support_rates(counts), "k": min(m["n"], a["n"])}
    return out, details


def entropy_diff(get: Get, args: dict, seeds, against_seeds):
    key = {"token": "token_entropy", "answer": "answer_entropy"}[args["level"]]
    out, details = [], {}
    for s, m, a in _pairs(get, args, seeds, against_seeds):
        d = np.array([x - y for x, y in zip(m[key], a[key]) if x is not None and y is not None])
        out.append(_estimate(s, d))
        details[seed_label(s)] = {"model": float(np.mean([x for x in m[key] if x is not None])),
                           "against": float(np.mean([y for y in a[key] if y is not None]))}
    return out, details


def entropy_stability(get: Get, args: dict, seeds, against_seeds):
    """mean_p [|H_p(model) - H_p(ref)| - |H_p(against) - H_p(ref)|] (token or answer level), ``ref``
    an unseeded model of the same evaluation (default base); < 0: the model stays closer to the
    reference's entropy than ``against`` does, whichever way ``against`` moved."""
    key = {"token": "token_entropy", "answer": "answer_entropy"}[args["level"]]
    ref = get(args["eval"], args.get("reference", "base"), None)
    out, details = [], {}
    for s, m, a in _pairs(get, args, seeds, against_seeds):
        if m["ids"] != ref["ids"]:
            raise UserError(f"{args['model']} and the reference were evaluated on different problems")
        d = np.array([abs(x - r) - abs(y - r) for x, y, r in zip(m[key], a[key], ref[key])
                      if x is not None and y is not None and r is not None])
        out.append(_estimate(s, d))
        details[seed_label(s)] = {"model": float(np.mean([x for x in m[key] if x is not None])),
                              "against": float(np.mean([y for y in a[key] if y is not None])),
                              "reference": float(np.mean([r for r in ref[key] if r is not None]))}
    return out, details


def ppl_diff(get: Get, args: dict, seeds, against_seeds):
    out, details = [], {}
    for s, m, a in _pairs(get, args, seeds, against_seeds):
        if "logppl_base_correct" not in m or "logppl_base" not in a:
            raise UserError(f"ppl_diff needs evaluation {args['eval']} with perplexity > 0")
        d = np.array([x - y for x, y in zip(m["logppl_base_correct"], a["logppl_base"])
                      if x is not None and y is not None])
        out.append(_estimate(s, d))
        details[seed_label(s)] = {"problems": int(d.size),
                           "ppl_model_correct": float(np.exp(np.mean([x for x in m["logppl_base_correct"]
                                                                      if x is not None] or [np.nan]))),
                           "ppl_against": float(np.exp(np.mean([y for y in a["logppl_base"] if y is not None]
                                                               or [np.nan])))}
    return out, details


MEASURES: dict[str, Measure] = {
    "passk_diff": Measure(passk_diff, ("eval", "model", "against"),
                          lambda a: f"pass@{a.get('k', 'max')} {a['model']} - {a['against']}"),
    "support_balance": Measure(support_balance, ("eval", "model", "against"),
                               lambda a: f"(shrunk - expanded) / problems, {a['model']} vs {a['against']}"),
    "entropy_diff": Measure(entropy_diff, ("eval", "model", "against", "level"),
                            lambda a: f"{a['level']} entropy (nats) {a['model']} - {a['against']}"),
    "entropy_stability": Measure(entropy_stability, ("eval", "model", "against", "level"),
                                 lambda a: f"abs({a['level']} entropy - {a.get('reference', 'base')}'s) "
                                           f"{a['model']} - {a['against']}"),
    "ppl_diff": Measure(ppl_diff, ("eval", "model", "against"),
                        lambda a: f"log PPL_base of {a['model']}'s correct samples - of {a['against']}'s own"),
}


def _register_weight_measures() -> None:
    """The weight-space (:mod:`rlvr.experiments.weight_measures`) and training-dynamics
    (:mod:`rlvr.experiments.dynamics_measures`) measures."""
    MEASURES.update({
        "entropy_prediction": Measure(dm.entropy_prediction, ("eval", "model"),
                                      lambda a: f"corr(predicted dH of step t-1, observed entropy change at t), "
                                                f"{a['model']}"),
        "driving_cell": Measure(dm.driving_cell, ("eval", "model", "cell"),
                                lambda a: f"sum dH_{a['cell']} - the "
                                          f"{'highest' if a.get('direction') == 'increase' else 'lowest'} "
                                          f"other cell's sum, {a['model']}"),
        "precision_gap": Measure(wm.precision_gap, ("eval", "model"),
                                 lambda a: f"update sparsity at bf16 - at fp32, {a['model']}",
                                 wm.fp32_moves_everything),
        "matched_weight_diff": Measure(wm.matched_weight_diff, ("eval", "model", "against", "quantity"),
                                       lambda a: f"{a['quantity']} {a['model']} - {a['against']} "
                                                 f"(matched by {a.get('match', 'kl')}"
                                                 + (f"; {a['part']} matrices)" if a.get("part") else ")"),
                                       wm.one_tensor),
        "mask_overlap": Measure(wm.mask_overlap, ("eval", "model"),
                                lambda a: f"chance-corrected Jaccard of bf16 update masks, {a['model']} vs "
                                          + ("its other seeds" if a.get("pairing") == "seeds"
                                             else a.get("against", "?"))),
    })


def _register_curve_measures() -> None:
    """The compute-performance curve measures (:mod:`rlvr.experiments.curve_measures`), over the
    held-out pass rate a ``kind: dynamics`` cell reads from an RL run."""
    MEASURES.update({
        "curve_prediction": Measure(cm.curve_prediction, ("eval", "model", "fraction"),
                                    lambda a: f"{a.get('tolerance', 0.02)} - |predicted - observed final pass "
                                              f"rate|, fit on the first {a['fraction']:.0%} of compute, "
                                              f"{a['model']}", cm.below_jitter),
        "curve_param_diff": Measure(cm.curve_param_diff, ("eval", "model", "against", "param"),
                                    lambda a: (f"{a['tolerance']} - |" if "tolerance" in a else "")
                                    + f"{'ln ' if a.get('log') else ''}{a['param']} {a['model']} - "
                                      f"{a['against']}" + ("|" if "tolerance" in a else "") + " (mean over seeds)",
                                    cm.unbent),
        "curve_shift_balance": Measure(cm.curve_shift_balance, ("eval", "model", "against"),
                                       lambda a: f"|ln B ratio| - |ln (A - R0) ratio|, {a['model']} vs "
                                                 f"{a['against']} (> 0: B moved more than A)", cm.unbent),
        "early_ranking": Measure(cm.early_ranking, ("eval", "model", "against", "fraction"),
                                 lambda a: f"+1 when fits on the first {a['fraction']:.0%} of compute rank "
                                           f"{a['model']} and {a['against']} as they end, else -1",
                                 cm.never_crossed),
        "crossing_scan": Measure(cm.crossing_scan, ("eval", "model", "arms", "fraction"),
                                 lambda a: f"2 x share of crossing pairs (gaps > {a.get('margin', 0.02):g}) whose "
                                           f"fits on the first {a['fraction']:.0%} of compute pick the final leader "
                                           f"- 1, among {a['model']} and {len(a['arms'])} arms", cm.no_crossing),
    })


def _register_series_measures() -> None:
    """The held-out and reward-accuracy series measures (:mod:`rlvr.experiments.series_measures`)."""
    MEASURES.update({
        "rise_and_fall": Measure(sm.rise_and_fall, ("eval", "model", "samples_per_point"),
                                 lambda a: f"min(peak - first, peak - last) of {a['model']}'s smoothed held-out "
                                           "accuracy (peak after the first point)"),
        "heldout_change": Measure(sm.heldout_change, ("eval", "model", "samples_per_point"),
                                  lambda a: f"{a['model']}'s held-out accuracy: mean of the last "
                                            f"{a.get('window', 3)} points - the first"),
        "collapse_order": Measure(sm.collapse_order, ("eval", "model", "against"),
                                  lambda a: f"collapse step {a['model']} - {a['against']}", sm.starts_at_threshold),
    })


def _register_association_measures() -> None:
    """Correlations across checkpoints and seeds (:mod:`rlvr.experiments.association_measures`)."""
    MEASURES.update({
        "gain_association": Measure(am.gain_association, ("eval", "pairs"),
                                    lambda a: f"{'Spearman' if a.get('stat') == 'rho' else 'Pearson'} corr(start's "
                                              f"pass@{a.get('k', 1)}, RL's gain in pass@{a.get('gain_k', 1)}) "
                                              "across checkpoints x seeds", am.too_few_clusters),
        "collapse_association": Measure(am.collapse_association, ("eval", "dynamics", "pairs"),
                                        lambda a: f"{'Spearman' if a.get('stat') == 'rho' else 'Pearson'} "
                                                  "corr(collapse step of the intrinsic run, supervised RL's gain "
                                                  f"in pass@{a.get('gain_k', 1)}) across checkpoints x seeds",
                                        am.too_few_clusters),
    })


_register_weight_measures()
_register_curve_measures()
_register_series_measures()
_register_association_measures()
