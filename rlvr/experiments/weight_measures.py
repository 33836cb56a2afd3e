"""Measures of the ``weights`` experiment (The Path Not Taken): claims over weight-space records.

They read the statistics of a ``kind: weights`` evaluation cell (:mod:`rlvr.experiments.weights_eval`)
through the same ``get(eval, model, seed) -> stats`` lookup as the sampling measures, and return one
:class:`~rlvr.experiments.verdict.Estimate` per seed (or per pair of runs) with a 95% percentile
bootstrap interval **over tensors** (the model's weight matrices are resampled with replacement;
every aggregate is recomputed from the resampled records). Formulas: docs/methods/weight_updates.md.

- ``precision_gap`` (eval, model): sparsity at bf16 - sparsity at fp32 of the final update,
  sum(changed_fp32 - changed_bf16) / sum(numel) over tensors; > 0 means part of the apparent
  sparsity is entries whose change bf16 rounding hides.
- ``matched_weight_diff`` (eval, model, against, quantity, match): parameter-weighted mean over
  matrices of q(model) - q(against at its matched checkpoint); ``quantity`` is ``spectral_drift``,
  ``principal_angle`` (mean principal angle of the top-k subspaces, degrees), ``energy_ratio``
  (principal energy share of dW over its random baseline k^2/(mn)) or ``sparsity_bf16`` (share of
  entries unchanged at bf16); optional ``part`` keeps the matrices of one kind or part
  (``embedding``, ``mlp``, ``attention``, ``attention_q``...); ``match`` is ``kl`` (the
  checkpoint of ``against`` whose KL to the base is closest to the model's, :func:`match_index`)
  or ``norm`` (closest ||dW||_F / ||W0||_F).
- Identification: ``precision_gap`` is not identifiable here (:func:`fp32_moves_everything`) when every
  entry changed at fp32 in every seed (a model trained and stored in float32): the gap is then the
  bf16 sparsity itself, which any update below one bf16 step creates, so the claim could not fail;
  a matched difference over one tensor (:func:`one_tensor`) has no interval over tensors.
- ``mask_overlap`` (eval, model, against, pairing, chance, control, control_match): chance-corrected
  Jaccard of two runs' bf16 update masks, kappa = (J - J0) / (1 - J0), J = sum|A and B| / sum|A or B|
  over tensors and J0 the same ratio of the chance model's expectations; pairing ``seeds`` compares
  seed i of ``model`` with seed i+1 (mod the seed count) of the same model, ``same_seed`` seed i of
  ``model`` with seed i of ``against``. The chance model (``chance``): ``independent`` masks of the same
  densities per tensor, or ``stratified``: independent within each stratum of entries whose |W0| has
  the same binary exponent (they share one bf16 step, and every run from the same base shares them),
  E|A and B| = sum_strata a_s b_s / n_s. > 0: the masks agree more than the chance model's. With a
  ``control`` (e.g. sft), the estimate is kappa(A, B) - kappa(A, C), C the control's checkpoint of
  A's seed matched to A by update norm (``control_match``: norm | kl): RL-RL overlap beyond RL-SFT's.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlvr.config import check
from rlvr.errors import UserError
from rlvr.experiments.registry import Measure, ModelArgs, PairArgs, one_of, register
from rlvr.experiments.verdict import Estimate, seed_label

QUANTITIES = {"spectral_drift": "spectral_drift", "principal_angle": "principal_angle_mean_deg",
              "energy_ratio": "energy_ratio", "sparsity_bf16": "sparsity_bf16"}
MATCHES = ("kl", "norm")
PAIRINGS = ("seeds", "same_seed")
INTERVAL = "bootstrap over the model's tensors for the weight measures"
DRAWS = 1000


def block_length(n: int) -> int:
    """The block length of a moving-block bootstrap over ``n`` consecutive steps: round(n^(1/3)), at
    least 1 (the rate that balances the variance estimate's bias and variance for a short-memory
    series; Kuensch 1989, Hall, Horowitz and Jing 1995): 100 steps -> 5, 2400 -> 13."""
    return max(1, round(n ** (1 / 3)))


def resample(rng: np.random.Generator, n: int, block: int = 1) -> np.ndarray:
    """(n,) indices of range(n) drawn with replacement: single items (``block`` 1) or ceil(n / block)
    moving blocks of ``block`` consecutive indices, cut to n (autocorrelated series)."""
    if block <= 1:
        return rng.integers(0, n, n)
    block = min(block, n)
    starts = rng.integers(0, n - block + 1, -(-n // block))
    return (starts[:, None] + np.arange(block)).ravel()[:n]


def bootstrap_stat(stat: Callable[[np.ndarray], float], n: int, draws: int = DRAWS, seed: int = 0,
                   alpha: float = 0.05, block: int = 1) -> tuple[float, float]:
    """Percentile interval of ``stat(idx)`` over ``draws`` resamples idx (n,) of range(n)
    (:func:`resample`: with ``block`` > 1, moving blocks of consecutive items; non-finite draws
    dropped; (nan, nan) when none is finite). Fewer than 2 items give (nan, nan): one tensor cannot
    show its own spread, so its claim has no interval."""
    if n < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    vals = np.array([stat(resample(rng, n, block)) for _ in range(draws)], dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(vals, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def match_index(target: float, values: list[float]) -> int:
    """Index of the value closest to ``target`` on a log scale (|log(v / target)| smallest; the
    earlier one on a tie). Values <= 0 or non-finite are never chosen."""
    best, best_d = -1, math.inf
    for i, v in enumerate(values):
        if v is None or not math.isfinite(v) or v <= 0 or not target > 0:
            continue
        d = abs(math.log(v / target))
        if d < best_d:
            best, best_d = i, d
    if best < 0:
        raise UserError(f"nothing to match {target!r} against (candidates {values})" if target > 0 else
                        f"the model did not move (value {target!r}): there is nothing to match")
    return best


def kappa(inter: np.ndarray, union: np.ndarray, c_inter: np.ndarray, c_union: np.ndarray) -> float:
    """Chance-corrected Jaccard (J - J0) / (1 - J0) of per-tensor counts (T,) each; nan when a
    union is empty or J0 = 1 (both masks full: nothing to tell apart)."""
    if not union.sum() > 0 or not c_union.sum() > 0:
        return math.nan
    j, j0 = inter.sum() / union.sum(), c_inter.sum() / c_union.sum()
    return float((j - j0) / (1 - j0)) if j0 < 1 else math.nan


def _ratio_of_sums(num: np.ndarray, den: np.ndarray) -> Callable[[np.ndarray], float]:
    return lambda idx: num[idx].sum() / den[idx].sum()


def _kappa_of(c: dict) -> Callable[[np.ndarray], float]:
    return lambda i: kappa(c["inter"][i], c["union"][i], c["c_inter"][i], c["c_union"][i])



def _final(stats: dict) -> dict:
    if stats.get("kind") != "weights":
        raise UserError("weight measures need a `kind: weights` evaluation")
    return stats["checkpoints"][-1]


def _matrices(ckpt: dict, part: str = "") -> dict[str, dict]:
    """{name: record} of the 2-D matrices, only those of kind or part ``part`` when given."""
    return {r["name"]: r for r in ckpt["records"] if "k" in r and (not part or part in (r["kind"], r["part"]))}


def _value(r: dict, key: str) -> float:
    if key == "sparsity_bf16":
        return 1.0 - r["changed_bf16"] / r["numel"]
    if key == "energy_ratio":
        share = r["principal_energy_share"]
        return share / r["random_energy_share"] if share is not None and r["random_energy_share"] else math.nan
    v = r[key]
    return math.nan if v is None else float(v)


def precision_gap(get, args: dict, seeds, against_seeds):
    out, details = [], {}
    for s in seeds:
        recs = _final(get(args["eval"], args["model"], s))["records"]
        gap = np.array([r["changed_fp32"] - r["changed_bf16"] for r in recs], dtype=np.float64)
        numel = np.array([r["numel"] for r in recs], dtype=np.float64)
        if not sum(r["changed_fp32"] for r in recs):
            raise UserError(f"{args['model']}-{seed_label(s)} did not change any weight")
        value = float(gap.sum() / numel.sum())
        lo, hi = bootstrap_stat(_ratio_of_sums(gap, numel), len(recs))
        out.append(Estimate(s, value, lo, hi))
        by_part: dict[str, list[float]] = {}
        for r in recs:
            t = by_part.setdefault(r["part"], [0, 0, 0])
            t[0] += r["numel"] - r["changed_bf16"]
            t[1] += r["numel"] - r["changed_fp32"]
            t[2] += r["numel"]
        details[seed_label(s)] = {"sparsity_bf16": 1 - sum(r["changed_bf16"] for r in recs) / numel.sum(),
                              "sparsity_fp32": 1 - sum(r["changed_fp32"] for r in recs) / numel.sum(),
                              "by_part": {p: {"bf16": a / n, "fp32": b / n} for p, (a, b, n) in by_part.items()}}
    return out, details


def fp32_moves_everything(args: dict, estimates, details: dict) -> str:
    """Why a precision gap cannot fail here ('' when it could): the fp32 sparsity is 0 in every seed."""
    if not details or any(x["sparsity_fp32"] > 0 for x in details.values()):
        return ""
    return ("every entry changed at fp32 in every seed (the model trains and stores in float32): the gap is the "
            "bf16 sparsity itself, which any update below one bf16 step creates in any model, so it cannot fail; "
            "the RL-vs-SFT sparsity contrast tests the claim")


def one_tensor(args: dict, estimates, details: dict) -> str:
    """Why a matched difference has no interval ('' when it has): fewer than 2 tensors compared."""
    if not estimates or any(e.lo == e.lo and e.hi == e.hi for e in estimates):
        return ""
    return f"only one {args['part'] or 'matrix'} tensor compared: a bootstrap over tensors has no spread to show"


def matched_checkpoint(model_ckpt: dict, against: dict, match: str) -> int:
    """Index into against["checkpoints"] matched to ``model_ckpt`` by KL to the base or update norm."""
    key = "kl" if match == "kl" else "update_rel_norm"
    return match_index(model_ckpt[key], [c[key] for c in against["checkpoints"]])


def matched_weight_diff(get, args: dict, seeds, against_seeds):
    key, match = QUANTITIES[args["quantity"]], args["match"]
    out, details = [], {}
    a_seeded = against_seeds != [None]
    for i, s in enumerate(seeds):
        mc = _final(get(args["eval"], args["model"], s))
        against = get(args["eval"], args["against"], against_seeds[i % len(against_seeds)] if a_seeded else None)
        j = matched_checkpoint(mc, against, match)
        ac = against["checkpoints"][j]
        mm, am = _matrices(mc, args["part"]), _matrices(ac, args["part"])
        names = [n for n in mm if n in am and math.isfinite(_value(mm[n], key)) and math.isfinite(_value(am[n], key))]
        x = np.array([_value(mm[n], key) for n in names])
        y = np.array([_value(am[n], key) for n in names])
        w = np.array([mm[n]["numel"] for n in names], dtype=np.float64)
        d = w * (x - y)
        value = float(d.sum() / w.sum()) if names else math.nan
        lo, hi = bootstrap_stat(_ratio_of_sums(d, w), len(names))
        out.append(Estimate(s, value, lo, hi))
        parts: dict[str, list] = {}
        for n, xv, yv, wv in zip(names, x, y, w):
            p = parts.setdefault(mm[n]["part"], [0.0, 0.0, 0.0])
            p[0] += wv * xv
            p[1] += wv * yv
            p[2] += wv
        details[seed_label(s)] = {
            "matched": ac["name"], "model_kl": mc["kl"], "against_kl": ac["kl"],
            "model_norm": mc["update_rel_norm"], "against_norm": ac["update_rel_norm"],
            "model": float((w * x).sum() / w.sum()) if names else None,
            "against": float((w * y).sum() / w.sum()) if names else None,
            "by_part": {p: {"model": a / n, "against": b / n} for p, (a, b, n) in parts.items()}}
    return out, details


def unpack_mask(packed: str, numel: int) -> np.ndarray:
    """(numel,) bool mask from the base64 text of np.packbits of the flattened mask."""
    bits = np.frombuffer(base64.b64decode(packed), dtype=np.uint8)
    return np.unpackbits(bits, count=numel).astype(bool)


NULLS = ("independent", "stratified")


def chance_inter(a: dict, b: dict, name: str, null: str, ca: int, cb: int, size: int) -> float:
    """E|A and B| of tensor ``name`` under the chance model ``null`` (see the module docstring)."""
    if null == "independent":
        return ca * cb / size
    sa, sb = a.get("strata", {}).get(name), b.get("strata", {}).get(name)
    if sa is None or sb is None:
        raise UserError("the |W0|-stratified chance model needs the weights cells' strata: these cells predate "
                        "them (run the weights evaluation again)")
    got = dict(zip(sb["exponent"], sb["changed"]))
    return float(sum(c * got.get(e, 0) / n for e, n, c in zip(sa["exponent"], sa["size"], sa["changed"]) if n))


def overlap_counts(a: dict, b: dict, null: str = "independent") -> dict[str, np.ndarray]:
    """Per tensor (T,) counts of two checkpoints' masks ({name: packed}, records for numel): inter,
    union and their expectations under the chance model ``null`` (:data:`NULLS`)."""
    numel = {r["name"]: r["numel"] for r in a["records"]}
    names = [n for n in a["masks"] if n in b["masks"]]
    rows = []
    for n in names:
        ma, mb = unpack_mask(a["masks"][n], numel[n]), unpack_mask(b["masks"][n], numel[n])
        ca, cb, size = int(ma.sum()), int(mb.sum()), numel[n]
        ci = chance_inter(a, b, n, null, ca, cb, size)
        rows.append((int((ma & mb).sum()), int((ma | mb).sum()), ci, ca + cb - ci, ca, cb, size))
    arr = np.array(rows, dtype=np.float64).reshape(-1, 7)
    return {k: arr[:, i] for i, k in enumerate(("inter", "union", "c_inter", "c_union", "count_a", "count_b", "numel"))}


def mask_overlap(get, args: dict, seeds, against_seeds):
    if args["pairing"] == "seeds":
        if len(seeds) < 2:
            raise UserError(f"mask_overlap across seeds needs >= 2 seeds of {args['model']}")
        count = len(seeds) if len(seeds) > 2 else 1  # 2 seeds: one pair
        pairs = [(seeds[i], args["model"], seeds[(i + 1) % len(seeds)]) for i in range(count)]
    else:
        pairs = [(s, args["against"], against_seeds[i % len(against_seeds)]) for i, s in enumerate(seeds)]
    out, details = [], {}
    for s, other, t in pairs:
        a, b = _final(get(args["eval"], args["model"], s)), _final(get(args["eval"], other, t))
        c = overlap_counts(a, b, args["chance"])
        if not (c["count_a"].sum() and c["count_b"].sum()):
            raise UserError(f"{args['model']}-{seed_label(s)} or {other}-{seed_label(t)} changed no weight at bf16")
        stat = _kappa_of(c)
        j, j0 = c["inter"].sum() / c["union"].sum(), c["c_inter"].sum() / c["c_union"].sum()
        row = {"jaccard": float(j), "chance": float(j0), "ratio": float(j / j0),
               "density_a": float(c["count_a"].sum() / c["numel"].sum()),
               "density_b": float(c["count_b"].sum() / c["numel"].sum())}
        if args["control"]:
            ctrl, matched = _control_checkpoint(get, args, a, s)
            cc = overlap_counts(a, ctrl, args["chance"])
            if len(cc["inter"]) != len(c["inter"]):
                raise UserError(f"{args['control']}'s masks cover other tensors than {args['model']}'s")
            row.update(control=matched, control_kappa=_kappa_of(cc)(np.arange(len(cc["inter"]))))
            stat = _difference(stat, _kappa_of(cc))
        value = stat(np.arange(len(c["inter"])))
        out.append(Estimate(s, value, *bootstrap_stat(stat, len(c["inter"]))))
        details[f"{args['model']}-{seed_label(s)} vs {other}-{seed_label(t)}"] = row
    return out, details


def _difference(f: Callable[[np.ndarray], float], g: Callable[[np.ndarray], float]) -> Callable[[np.ndarray], float]:
    return lambda idx: f(idx) - g(idx)


def _control_checkpoint(get, args: dict, a: dict, seed) -> tuple[dict, str]:
    """The control run's checkpoint (its seed ``seed``, shared when unseeded) matched to the final
    checkpoint ``a`` by update norm or KL, and its name; it must carry its masks."""
    try:
        ctrl = get(args["eval"], args["control"], seed)
    except FileNotFoundError:
        ctrl = get(args["eval"], args["control"], None)
    ck = ctrl["checkpoints"][matched_checkpoint(a, ctrl, args["control_match"])]
    if "masks" not in ck:
        raise UserError(f"{args['control']}'s checkpoint {ck['name']} carries no mask: its weights cell predates "
                        "masks at every checkpoint (run the weights evaluation again)")
    return ck, ck["name"]


@dataclass(frozen=True, kw_only=True)
class MatchedArgs(PairArgs):
    quantity: str
    """spectral_drift | principal_angle | energy_ratio | sparsity_bf16."""
    match: str = "kl"
    """kl | norm: how the checkpoint of ``against`` is matched to the model."""
    part: str = ""
    """Only the matrices of this kind or part (embedding, mlp, attention, attention_q...); '' all."""

    def __post_init__(self):
        one_of(self.quantity, tuple(QUANTITIES), "quantity")
        one_of(self.match, MATCHES, "match")


@dataclass(frozen=True, kw_only=True)
class OverlapArgs(ModelArgs):
    against: str = ""
    """The other run (pairing same_seed)."""
    pairing: str = "same_seed"
    """seeds (seed i of the model with seed i+1) | same_seed (seed i of the model with seed i of against)."""
    chance: str = "independent"
    """The chance model: independent (per tensor) | stratified (per |W0| exponent within each tensor)."""
    control: str = ""
    """A control run (e.g. sft with kept checkpoints): the estimate is the overlap beyond A's with it."""
    control_match: str = "norm"
    """norm | kl: which of the control's checkpoints is matched to A."""

    def __post_init__(self):
        one_of(self.pairing, PAIRINGS, "pairing")
        one_of(self.chance, NULLS, "chance")
        one_of(self.control_match, MATCHES, "control_match")
        check(self.pairing == "seeds" or bool(self.against), "against", "pairing same_seed needs against")


def _gap_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: sparsity bf16 {x['sparsity_bf16']:.4f}, fp32 {x['sparsity_fp32']:.4f}; by part "
                     + ", ".join(f"{p} {v['bf16']:.3f}/{v['fp32']:.3f}" for p, v in x["by_part"].items())
                     for s, x in d.items())


def _g(x) -> str:
    return "-" if x is None else f"{x:.4g}"


def _matched_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: {a['model']} {_g(x['model'])} vs {a['against']}@{x['matched']} {_g(x['against'])}"
                     f" (KL {x['model_kl']:.2e} vs {x['against_kl']:.2e}, norm {x['model_norm']:.2e} vs "
                     f"{x['against_norm']:.2e}); by part " + ", ".join(
                         f"{p} {v['model']:.3g}/{v['against']:.3g}" for p, v in x["by_part"].items())
                     for s, x in d.items())


def _overlap_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{pair}: Jaccard {x['jaccard']:.4f} vs chance {x['chance']:.4f} (x{x['ratio']:.3f}; "
                     f"densities {x['density_a']:.3f}, {x['density_b']:.3f})"
                     + (f"; kappa with {a['control']}@{x['control']} {x['control_kappa']:+.4f}"
                        if "control" in x else "")
                     for pair, x in d.items())


register(
    Measure("precision_gap", precision_gap, ModelArgs, lambda a: f"update sparsity at bf16 - at fp32, {a['model']}",
            INTERVAL, _gap_detail, fp32_moves_everything, "Weights"),
    Measure("matched_weight_diff", matched_weight_diff, MatchedArgs,
            lambda a: f"{a['quantity']} {a['model']} - {a['against']} (matched by {a['match']}"
                      + (f"; {a['part']} matrices)" if a["part"] else ")"), INTERVAL, _matched_detail, one_tensor,
            "Weights"),
    Measure("mask_overlap", mask_overlap, OverlapArgs,
            lambda a: f"chance-corrected Jaccard of bf16 update masks, {a['model']} vs "
                      + ("its other seeds" if a["pairing"] == "seeds" else a["against"])
                      + (" (|W0|-stratified chance)" if a["chance"] == "stratified" else "")
                      + (f", minus {a['model']} vs {a['control']} matched by {a['control_match']}"
                         if a["control"] else ""),
            INTERVAL, _overlap_detail, section="Weights"),
)
