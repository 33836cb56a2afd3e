"""Measures of what a pipeline gains over the checkpoint it starts from (RL excursions, issue 51):
a difference of gains, and general ability compared where two pipelines have gained the same.

- ``gain_contrast`` (eval, model, reference, against, control, k = 1): mean_p [(pass@k(model) -
  pass@k(reference)) - (pass@k(against) - pass@k(control))]: how much more ``model`` gains over its
  start than ``against`` over its own (e.g. RL from the larger base minus RL from the small one, each
  over its base). ``model`` and ``against`` are paired seed by seed (a shared side meets every seed);
  ``reference`` and ``control`` are the unseeded starts (bases).
- ``matched_gain_retention`` (eval, retain, model, against, reference, gain, steps, against_steps =
  steps): general ability at matched task gain. Per seed and pipeline, the level is
  pass@1(reference) + ``gain`` on ``eval``; the matched checkpoint is the first of the pipeline's kept
  checkpoints (``steps`` / ``against_steps``, in order, then the final model) whose pass@1 on ``eval``
  reaches it; the estimate is mean_p [acc_p(model at its
  matched checkpoint) - acc_p(against at its)] on ``retain`` (a general-ability evaluation, e.g.
  greedy strings accuracy). Both evaluations need ``milestones: true`` (the kept checkpoints' cells).
  A pipeline that never reaches the level is read at its final model, and the claim is *not
  identifiable here* (:func:`never_reached`): its quantity does not exist on this testbed.

Each estimate carries a paired bootstrap interval over problems (the same problems on every side).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlvr.errors import UserError
from rlvr.experiments.cells import cell_passk
from rlvr.experiments.registry import Get, Measure, PairArgs, register
from rlvr.experiments.verdict import problem_estimate, seed_label

INTERVAL = "paired bootstrap over problems"


def _seeded(seeds: list[int | None], i: int) -> int | None:
    """The ``i``-th seed of a side (a shared side, seeds ``[None]``, for every i)."""
    return seeds[i] if seeds != [None] else None


def _passk_P(stats: dict, k: int) -> np.ndarray:
    """Per-problem unbiased pass@k of a samples cell: (P,)."""
    if not 1 <= k <= stats["n"]:
        raise UserError(f"k={k} is outside 1..n={stats['n']}")
    return cell_passk(stats, [k])[:, 0]


def _same_problems(*cells: tuple[str, dict]) -> None:
    first_name, first = cells[0]
    for name, stats in cells[1:]:
        if stats["ids"] != first["ids"]:
            raise UserError(f"{first_name} and {name} were evaluated on different problems")


@dataclass(frozen=True, kw_only=True)
class GainContrastArgs(PairArgs):
    reference: str
    """The start of ``model`` (a base), read once for every seed."""
    control: str
    """The start of ``against`` (a base), read once for every seed."""
    k: int = 1
    """The gains are in pass@k."""


def gain_contrast(get: Get, args: dict, seeds, against_seeds):
    """Per seed: mean_p [(pass@k(model) - pass@k(reference)) - (pass@k(against) - pass@k(control))]."""
    ev, k = args["eval"], int(args["k"])
    ref, ctl = get(ev, args["reference"], None), get(ev, args["control"], None)
    out, details = [], {}
    for i in range(max(len(seeds), len(against_seeds))):
        s, a_seed = _seeded(seeds, i), _seeded(against_seeds, i)
        m, a = get(ev, args["model"], s), get(ev, args["against"], a_seed)
        _same_problems((args["model"], m), (args["reference"], ref), (args["against"], a), (args["control"], ctl))
        gain_m = _passk_P(m, k) - _passk_P(ref, k)
        gain_a = _passk_P(a, k) - _passk_P(ctl, k)
        seed = s if seeds != [None] else a_seed
        out.append(problem_estimate(seed, gain_m - gain_a))
        details[seed_label(seed)] = {"gain_model": float(gain_m.mean()), "gain_against": float(gain_a.mean())}
    return out, details


def _gain_detail(d: dict, a: dict) -> str:
    return (f"gain in pass@{a['k']} of {a['model']} over {a['reference']} against {a['against']} over "
            f"{a['control']}: " + ", ".join(f"{s} {v['gain_model']:+.3f} vs {v['gain_against']:+.3f}"
                                            for s, v in d.items()))


@dataclass(frozen=True, kw_only=True)
class MatchedGainArgs(PairArgs):
    reference: str
    """The checkpoint both pipelines start from (unseeded); its pass@1 on ``eval`` + ``gain`` is the level."""
    retain: str
    """The general-ability evaluation (with ``milestones: true``) read at each matched checkpoint."""
    gain: float
    """The common task gain in pass@1 over ``reference`` that each pipeline's checkpoint must reach."""
    steps: tuple[int, ...]
    """The optimiser steps of ``model``'s kept checkpoints (its ``milestones``), in order; the final
    model follows them."""
    against_steps: tuple[int, ...] | None = None
    """The same of ``against`` (None: ``steps``): a pipeline that moves fast keeps denser checkpoints."""


def checkpoint_name(step: int) -> str:
    """A kept checkpoint's name, as the models keep it (``models/<name>/milestones/step_XXXXXX``)."""
    return f"step_{step:06d}"


def matched_checkpoint(pass1: list[float], level: float) -> int | None:
    """The index of the first checkpoint whose pass@1 reaches ``level``; None when none does."""
    return next((i for i, p in enumerate(pass1) if p >= level), None)


def _matched(get: Get, args: dict, model: str, seed: int | None, level: float,
             steps: tuple[int, ...]) -> tuple[dict, dict]:
    """(the retention cell at ``model``'s matched checkpoint, what the details say of it); ``steps``:
    its kept checkpoints."""
    names = [*(checkpoint_name(s) for s in steps), ""]  # "": the final model
    pass1 = [float(_passk_P(get(args["eval"], model, seed, milestone=n), 1).mean()) for n in names]
    at = matched_checkpoint(pass1, level)
    chosen = len(names) - 1 if at is None else at
    step = "final" if names[chosen] == "" else steps[chosen]
    return (get(args["retain"], model, seed, milestone=names[chosen]),
            {"step": step, "pass1": pass1[chosen], "reached": at is not None})


def matched_gain_retention(get: Get, args: dict, seeds, against_seeds):
    """Per seed: mean_p [retention(model at its matched checkpoint) - retention(against at its)]."""
    start = float(_passk_P(get(args["eval"], args["reference"], None), 1).mean())
    level = start + float(args["gain"])
    out, details = [], {"level": level, "start": start}
    for i in range(max(len(seeds), len(against_seeds))):
        s, a_seed = _seeded(seeds, i), _seeded(against_seeds, i)
        rm, dm = _matched(get, args, args["model"], s, level, args["steps"])
        ra, da = _matched(get, args, args["against"], a_seed, level, args.get("against_steps") or args["steps"])
        _same_problems((args["model"], rm), (args["against"], ra))
        seed = s if seeds != [None] else a_seed
        out.append(problem_estimate(seed, _passk_P(rm, 1) - _passk_P(ra, 1)))
        details[seed_label(seed)] = {"model": dm, "against": da}
    return out, details


def never_reached(args: dict, estimates, details: dict) -> str:
    """Not identifiable when a pipeline never reaches the level in some seed: there is no checkpoint of
    matched gain to read general ability at."""
    missing = [f"{args[side]} {s}" for s, d in details.items() if isinstance(d, dict) and "model" in d
               for side in ("model", "against") if not d[side]["reached"]]
    if not missing:
        return ""
    return (f"pass@1 never reaches the matched level {details['level']:.3f} ({args['reference']} "
            f"{details['start']:.3f} + {args['gain']:.2f}) for {', '.join(missing)}")


def _matched_detail(d: dict, a: dict) -> str:
    def side(v: dict) -> str:
        return f"step {v['step']} (pass@1 {v['pass1']:.3f}{'' if v['reached'] else ', never reached'})"

    return (f"level pass@1 {d['level']:.3f} ({a['reference']} {d['start']:.3f} + {a['gain']:.2f}); "
            + ", ".join(f"{s}: {a['model']} at {side(v['model'])}, {a['against']} at {side(v['against'])}"
                        for s, v in d.items() if isinstance(v, dict)))


register(
    Measure("gain_contrast", gain_contrast, GainContrastArgs,
            lambda a: f"(pass@{a['k']} {a['model']} - {a['reference']}) - (pass@{a['k']} {a['against']} - "
                      f"{a['control']})", INTERVAL, _gain_detail),
    Measure("matched_gain_retention", matched_gain_retention, MatchedGainArgs,
            lambda a: f"{a['retain']} accuracy of {a['model']} - {a['against']}, each at its first checkpoint "
                      f"whose pass@1 reaches {a['reference']}'s + {a['gain']:.2f}", INTERVAL, _matched_detail,
            never_reached),
)
