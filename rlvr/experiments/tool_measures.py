"""Measures over tool-use episodes and over a tool / no-tool control (``rlvr reproduce tools``).

- ``tool_calls_diff`` (eval, model, against): mean_p [c_p(model) - c_p(against)], c_p the mean tool
  calls per episode of problem p (``tool_calls`` of the per-problem statistics,
  :mod:`rlvr.experiments.evaluate`); > 0 means the model calls the tool more often. A manipulation
  check: RL "with the tool" only tests the tool if the policy uses it.
- ``support_contrast`` (eval, model, against, control, control_against): mean_p [N_p(model, against)
  - N_p(control, control_against)], N_p(a, b) = E_p - S_p the net expansion of a over b at k = n (E_p
  = 1 when only a solves p in n samples, S_p = 1 when only b does; :func:`support_balance
  <rlvr.experiments.measures.support_balance>` with the sign turned). > 0 means ``model`` expands its
  reference's support more (or shrinks it less) than ``control`` expands its own: e.g. RL with the
  tool against the base with the tool, and RL without the tool against the base without it.
  ``control`` is paired with ``model`` seed by seed (both seeded alike), ``control_against`` with
  ``against`` (a shared base meets every seed).

Each estimate carries a paired bootstrap interval over problems (the same problems on every side).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlvr.errors import UserError
from rlvr.experiments.registry import Get, Measure, PairArgs, register
from rlvr.experiments.verdict import problem_estimate, seed_label

INTERVAL = "paired bootstrap over problems"


@dataclass(frozen=True, kw_only=True)
class ContrastArgs(PairArgs):
    control: str
    """The control model (e.g. RL without the tool), seeded like ``model``."""
    control_against: str
    """The control's reference (e.g. the base evaluated without the tool)."""



def _mean(values) -> float:
    """The mean of ``values``; NaN for none (no problems), without numpy's empty-slice warning."""
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()) if arr.size else float("nan")


def _side(get: Get, ev: str, model: str, seeds: list[int | None], i: int) -> tuple[int | None, dict]:
    """The ``i``-th seed's statistics of ``model`` (a shared model, seeds ``[None]``, for every i)."""
    seed = seeds[i] if seeds != [None] else None
    return seed, get(ev, model, seed)


def _calls(stats: dict, model: str) -> np.ndarray:
    if "tool_calls" not in stats:
        raise UserError(f"{model}'s statistics hold no tool calls: it was not evaluated on tool episodes "
                        "(a tool task with its tool on), or its cell predates tool statistics (delete it)")
    return np.asarray(stats["tool_calls"], dtype=float)


def tool_calls_diff(get: Get, args: dict, seeds, against_seeds):
    """Per seed: mean_p [calls per episode of ``model`` - of ``against``] -> (estimates, details)."""
    out, details = [], {}
    for i in range(max(len(seeds), len(against_seeds))):
        s, m = _side(get, args["eval"], args["model"], seeds, i)
        a_seed, a = _side(get, args["eval"], args["against"], against_seeds, i)
        if m["ids"] != a["ids"]:
            raise UserError(f"{args['model']} and {args['against']} were evaluated on different problems")
        cm, ca = _calls(m, args["model"]), _calls(a, args["against"])
        seed = s if s is not None else a_seed
        out.append(problem_estimate(seed, cm - ca))
        failed = {k: _mean(x.get("failed_calls", [np.nan])) for k, x in (("model", m), ("against", a))}
        details[seed_label(seed)] = {"model": _mean(cm), "against": _mean(ca),
                                     "failed_model": failed["model"], "failed_against": failed["against"]}
    return out, details


def _net_expansion(model: dict, against: dict) -> np.ndarray:
    """Per problem: 1 expanded (only ``model`` solves it), -1 shrunk (only ``against``), 0 else. (P,)"""
    sm, sa = np.asarray(model["correct"]) > 0, np.asarray(against["correct"]) > 0
    return (sm & ~sa).astype(float) - (sa & ~sm).astype(float)


def support_contrast(get: Get, args: dict, seeds, against_seeds):
    """Per seed: mean_p [N_p(model, against) - N_p(control, control_against)] -> (estimates, details)."""
    ev = args["eval"]
    out, details = [], {}
    for i in range(max(len(seeds), len(against_seeds))):
        s, m = _side(get, ev, args["model"], seeds, i)
        a_seed, a = _side(get, ev, args["against"], against_seeds, i)
        _, c = _side(get, ev, args["control"], seeds, i)
        _, ca = _side(get, ev, args["control_against"], against_seeds, i)
        if not m["ids"] == a["ids"] == c["ids"] == ca["ids"]:
            raise UserError(f"{args['model']}, {args['against']}, {args['control']} and {args['control_against']} "
                            "were evaluated on different problems")
        net, net_control = _net_expansion(m, a), _net_expansion(c, ca)
        seed = s if s is not None else a_seed
        out.append(problem_estimate(seed, net - net_control))
        details[seed_label(seed)] = {"net_model": _mean(net), "net_control": _mean(net_control),
                                     "k": min(m["n"], a["n"], c["n"], ca["n"])}
    return out, details


def _calls_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: calls per episode {a['model']} {x['model']:.3f}, {a['against']} {x['against']:.3f} "
                     f"(failed {x['failed_model']:.3f}, {x['failed_against']:.3f})" for s, x in d.items())


def _contrast_detail(d: dict, a: dict) -> str:
    return "; ".join(f"{s}: net expansion (expanded - shrunk) / problems {a['model']} vs {a['against']} "
                     f"{x['net_model']:+.3f}, {a['control']} vs {a['control_against']} {x['net_control']:+.3f} "
                     f"(k = {x['k']})" for s, x in d.items())


register(
    Measure("tool_calls_diff", tool_calls_diff, PairArgs,
            lambda a: f"tool calls per episode {a['model']} - {a['against']}", INTERVAL, _calls_detail),
    Measure("support_contrast", support_contrast, ContrastArgs,
            lambda a: f"net expansion {a['model']} vs {a['against']} - {a['control']} vs {a['control_against']}",
            INTERVAL, _contrast_detail, models=("model", "against", "control", "control_against")),
)
