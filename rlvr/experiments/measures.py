"""The quantities claims are checked on: registered measures over per-problem statistics.

A measure reads the per-problem statistics of evaluated models (:mod:`rlvr.experiments.evaluate`)
through a ``get(eval, model, seed) -> stats`` lookup and returns one
:class:`~rlvr.experiments.verdict.Estimate` per seed (the value and its 95% paired bootstrap
interval over problems) plus ``details`` for the page. Seeds: those of ``model`` when it is seeded,
else one; ``against`` is paired seed by seed when it is seeded too, else shared.

Measures (formulas in docs/commands/reproduce.md; each registered once, :mod:`rlvr.experiments.registry`,
the others by their own modules):

- ``passk_diff`` (eval, model, against, k): mean_p [pass@k(model) - pass@k(against)], unbiased
  pass@k (k = "max" means n); details carry the crossover k (smallest k where against > model beyond
  the interval). A bound other than 0 is the claim's ``bound`` ("within m" is two claims: expect
  positive with bound -m, expect negative with bound m).
- ``passk_crossover`` (eval, model, against): log2 k_max - log2 k*, k* where the seed's mean pass@k
  curves cross (``model`` overtaking ``against``, interpolated in log2 k; :mod:`rlvr.eval.crossing`);
  > 0 means ``model`` overtakes before k_max; -1 (censored) that it does not up to k_max.
- ``support_balance`` (eval, model, against): mean_p [S_p - E_p] at k = n, S_p = 1 when only
  ``against`` solves p in n samples (shrunk), E_p = 1 when only ``model`` does (expanded); > 0 means
  shrinkage outweighs expansion. Details: P/S/E/O counts, SRR, NDR, SDS, NSCR.
- ``entropy_diff`` (eval, model, against, level: token | answer): mean_p [H_p(model) - H_p(against)].
- ``entropy_stability`` (eval, model, against, level, reference = base): mean_p [|H_p(model) -
  H_p(ref)| - |H_p(against) - H_p(ref)|]; < 0 means the model's entropy stays closer to the
  reference's than ``against``'s does (a collapse and an explosion both count as a shift).
- ``ppl_diff`` (eval, model, against): mean_p [logPPL_base(model's correct samples) -
  logPPL_base(against's own samples)] over problems where both exist; < 0 means the model's right
  answers are ones the base already rates as more likely than its own typical output. Not like for
  like (correct samples against all); kept as the published claim's measure.
- ``ppl_like_for_like`` (eval, model, against, samples: all | correct): mean_p [logPPL_base(model's
  samples) - logPPL_base(against's samples)], all against all or correct against correct, over
  problems where both exist; < 0 means the base rates the model's samples as more likely than the same
  kind of sample from ``against``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlvr.errors import UserError
from rlvr.eval.crossing import CENSOR_DOUBLINGS, crossing_doublings
from rlvr.eval.support import classify, crossover_k, support_counts, support_rates
from rlvr.experiments import (
    association_measures,
    collapse_measures,
    curve_measures,
    dynamics_measures,
    final_measures,
    gain_measures,
    series_measures,
    tool_measures,
    trajectory_measures,
    weight_measures,
)
from rlvr.experiments.cells import cell_passk
from rlvr.experiments.registry import MEASURES, Get, Measure, PairArgs, one_of, register
from rlvr.experiments.verdict import Estimate, problem_estimate, seed_label

REGISTERED_ELSEWHERE = (association_measures, collapse_measures, curve_measures, dynamics_measures, final_measures,
                        gain_measures, series_measures, tool_measures, trajectory_measures, weight_measures)
"""The modules that register the other measures when imported (so that MEASURES holds them all)."""
__all__ = ["MEASURES", "Measure", "REGISTERED_ELSEWHERE"]




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
    k = n if args["k"] == "max" else int(args["k"])
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
        out.append(problem_estimate(s, pm[:, j] - pa[:, j]))
        cross = crossover_k(ks, pa, pm)
        details["crossover"][seed_label(s)] = cross if cross is not None else f"none up to {ks[-1]}"
        details["model"][seed_label(s)] = {str(kk): float(v) for kk, v in zip(ks, pm.mean(0))}
        details["against"][seed_label(s)] = {str(kk): float(v) for kk, v in zip(ks, pa.mean(0))}
    return out, details


def passk_crossover(get: Get, args: dict, seeds, against_seeds):
    out, details = [], {}
    for s, m, a in _pairs(get, args, seeds, against_seeds):
        n = min(m["n"], a["n"])
        ks = sorted({1 << e for e in range(n.bit_length()) if (1 << e) <= n} | {n})
        pm, pa = cell_passk(m, ks), cell_passk(a, ks)  # (P, K)
        value, lo, hi = crossing_doublings(ks, pm, pa)
        out.append(Estimate(s, value, lo, hi))
        details[seed_label(s)] = {"k_max": n, "k": _crossing_k(n, value), "k_lo": _crossing_k(n, hi),
                                  "k_hi": _crossing_k(n, lo), "tied_at_max": bool(np.all(pm[:, -1] == pa[:, -1]))}
    return out, details


def _crossing_identified(args: dict, estimates: list[Estimate], details: dict) -> str:
    """Not identifiable when, in every seed, both models solve exactly the same problems at k = n: the
    curves end tied, so no resample can show one overtaking the other (e.g. both solve all, or none)."""
    if details and all(x.get("tied_at_max") for x in details.values()):
        return (f"{args['model']} and {args['against']} solve the same problems at k = n in every seed: the "
                "curves end tied, so neither can be seen to overtake")
    return ""


def _crossing_k(n: int, doublings: float) -> float | None:
    """The crossing k that ``doublings`` inside k_max = n means; None: beyond n (censored)."""
    return None if doublings <= -CENSOR_DOUBLINGS + 1e-12 else float(n * 2.0 ** -doublings)


def support_balance(get: Get, args: dict, seeds, against_seeds):
    out, details = [], {}
    for s, m, a in _pairs(get, args, seeds, against_seeds):
        sm, sa = np.asarray(m["correct"]) > 0, np.asarray(a["correct"]) > 0
        shrunk, expanded = sa & ~sm, sm & ~sa
        out.append(problem_estimate(s, shrunk.astype(float) - expanded.astype(float)))
        cats = {str(i): classify(bool(x), bool(y)) for i, (x, y) in enumerate(zip(sa, sm))}
        counts = support_counts(cats)
        details[seed_label(s)] = {"counts": counts, "rates": support_rates(counts), "k": min(m["n"], a["n"])}
    return out, details


def entropy_diff(get: Get, args: dict, seeds, against_seeds):
    key = {"token": "token_entropy", "answer": "answer_entropy"}[args["level"]]
    out, details = [], {}
    for s, m, a in _pairs(get, args, seeds, against_seeds):
        d = np.array([x - y for x, y in zip(m[key], a[key]) if x is not None and y is not None])
        out.append(problem_estimate(s, d))
        details[seed_label(s)] = {"model": float(np.mean([x for x in m[key] if x is not None])),
                           "against": float(np.mean([y for y in a[key] if y is not None]))}
    return out, details


def entropy_stability(get: Get, args: dict, seeds, against_seeds):
    """mean_p [|H_p(model) - H_p(ref)| - |H_p(against) - H_p(ref)|] (token or answer level), ``ref``
    an unseeded model of the same evaluation (default base); < 0: the model stays closer to the
    reference's entropy than ``against`` does, whichever way ``against`` moved."""
    key = {"token": "token_entropy", "answer": "answer_entropy"}[args["level"]]
    ref = get(args["eval"], args["reference"], None)
    out, details = [], {}
    for s, m, a in _pairs(get, args, seeds, against_seeds):
        if m["ids"] != ref["ids"]:
            raise UserError(f"{args['model']} and the reference were evaluated on different problems")
        d = np.array([abs(x - r) - abs(y - r) for x, y, r in zip(m[key], a[key], ref[key])
                      if x is not None and y is not None and r is not None])
        out.append(problem_estimate(s, d))
        details[seed_label(s)] = {"model": float(np.mean([x for x in m[key] if x is not None])),
                              "against": float(np.mean([y for y in a[key] if y is not None])),
                              "reference": float(np.mean([r for r in ref[key] if r is not None]))}
    return out, details


def ppl_diff(get: Get, args: dict, seeds, against_seeds):
    """The published measure (kept for its claim's provenance): the model's *correct* samples against
    *all* of ``against``'s; :func:`ppl_like_for_like` compares like with like."""
    return _ppl_under_base(get, args, seeds, against_seeds, "logppl_base_correct", "logppl_base",
                           ("ppl_model_correct", "ppl_against"), "ppl_diff")


PPL_SAMPLES = {"all": "logppl_base", "correct": "logppl_base_correct"}
"""``ppl_like_for_like``'s ``samples`` -> the per-problem statistic both sides are read from."""


def ppl_like_for_like(get: Get, args: dict, seeds, against_seeds):
    """mean_p [logPPL_base(model's samples) - logPPL_base(against's samples)], the same kind of sample
    on both sides: ``samples: all`` (every scored sample) or ``correct`` (the correct ones only)."""
    key = PPL_SAMPLES[args["samples"]]
    return _ppl_under_base(get, args, seeds, against_seeds, key, key, ("ppl_model", "ppl_against"),
                           "ppl_like_for_like")


def _ppl_under_base(get: Get, args: dict, seeds, against_seeds, model_key: str, against_key: str,
                    names: tuple[str, str], measure: str):
    """Per seed, the paired per-problem difference ``model[model_key] - against[against_key]`` (mean
    log-perplexities under the base) over the problems where both exist; details: how many problems
    and each side's perplexity (exp of its mean log-perplexity over its problems)."""
    out, details = [], {}
    for s, m, a in _pairs(get, args, seeds, against_seeds):
        if model_key not in m or against_key not in a:
            raise UserError(f"{measure} needs evaluation {args['eval']} with perplexity > 0")
        d = np.array([x - y for x, y in zip(m[model_key], a[against_key]) if x is not None and y is not None])
        out.append(problem_estimate(s, d))
        details[seed_label(s)] = {"problems": int(d.size),
                                  names[0]: float(np.exp(np.mean([x for x in m[model_key] if x is not None]
                                                                 or [np.nan]))),
                                  names[1]: float(np.exp(np.mean([y for y in a[against_key] if y is not None]
                                                                 or [np.nan])))}
    return out, details


INTERVAL = "paired bootstrap over problems"
LEVELS = ("token", "answer")


@dataclass(frozen=True, kw_only=True)
class PasskArgs(PairArgs):
    k: int | str = "max"
    """pass@k's k, or "max" (= n)."""

    def __post_init__(self):
        check_k(self.k)


def check_k(k) -> None:
    if not (k == "max" or (isinstance(k, int) and k >= 1)):
        one_of(str(k), ("max", "a whole number >= 1"), "k")


@dataclass(frozen=True, kw_only=True)
class PplArgs(PairArgs):
    samples: str
    """all (every sample scored under the base, on both sides) | correct (the correct ones, on both sides)."""

    def __post_init__(self):
        one_of(self.samples, tuple(PPL_SAMPLES), "samples")


@dataclass(frozen=True, kw_only=True)
class EntropyArgs(PairArgs):
    level: str
    """token | answer."""

    def __post_init__(self):
        one_of(self.level, LEVELS, "level")


@dataclass(frozen=True, kw_only=True)
class StabilityArgs(EntropyArgs):
    reference: str = "base"
    """An unseeded model of the same evaluation whose entropy both are compared with."""


def _passk_detail(d: dict, a: dict) -> str:
    return (f"crossover (smallest k where {a['against']} is above {a['model']} beyond the 95% interval): "
            + ", ".join(f"{s} {k}" for s, k in d["crossover"].items()))


def _crossover_detail(d: dict, a: dict) -> str:
    def k(v):
        return "beyond k_max" if v is None else f"{v:.0f}"

    return (f"crossing k (where {a['model']}'s mean pass@k curve overtakes {a['against']}'s) [95% interval]: "
            + "; ".join(f"{s} {k(x['k'])} [{k(x['k_lo'])}, {k(x['k_hi'])}] of k_max {x['k_max']}"
                        for s, x in d.items()))


def _support_detail(d: dict, a: dict) -> str:
    def num(v):
        return "-" if v is None else f"{v:.3f}"

    return "; ".join(f"{s}: " + ", ".join(f"{k} {v}" for k, v in x["counts"].items()) + ", "
                     + ", ".join(f"{k} {num(v)}" for k, v in x["rates"].items()) + f" (k = {x['k']})"
                     for s, x in d.items())


def _entropy_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: {a['model']} {x['model']:.3f}, {a['against']} {x['against']:.3f} nats"
                     for s, x in d.items())


def _stability_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: {a['model']} {x['model']:.3f}, {a['against']} {x['against']:.3f}, reference "
                     f"{x['reference']:.3f} nats" for s, x in d.items())


register(
    Measure("passk_diff", passk_diff, PasskArgs, lambda a: f"pass@{a['k']} {a['model']} - {a['against']}",
            INTERVAL, _passk_detail),
    Measure("passk_crossover", passk_crossover, PairArgs,
            lambda a: f"log2 k_max - log2 k*, k* where {a['model']} overtakes {a['against']} (doublings)", INTERVAL,
            _crossover_detail, _crossing_identified),
    Measure("support_balance", support_balance, PairArgs,
            lambda a: f"(shrunk - expanded) / problems, {a['model']} vs {a['against']}", INTERVAL, _support_detail),
    Measure("entropy_diff", entropy_diff, EntropyArgs,
            lambda a: f"{a['level']} entropy (nats) {a['model']} - {a['against']}", INTERVAL, _entropy_detail),
    Measure("entropy_stability", entropy_stability, StabilityArgs,
            lambda a: f"abs({a['level']} entropy - {a['reference']}'s) {a['model']} - {a['against']}", INTERVAL,
            _stability_detail),
    Measure("ppl_diff", ppl_diff, PairArgs,
            lambda a: f"log PPL_base of {a['model']}'s correct samples - of {a['against']}'s own", INTERVAL),
    Measure("ppl_like_for_like", ppl_like_for_like, PplArgs,
            lambda a: f"log PPL_base of {a['model']}'s {a['samples']} samples - of {a['against']}'s {a['samples']}",
            INTERVAL),
)
