"""Judge an experiment's claims: each claim's measure over the cells, its status
(:mod:`rlvr.experiments.verdict`) and the counts a page and the index show.

A row is the JSON-ready record of one claim: what it says, what it measured (per-seed estimates, the
spread over seeds, details), its status and the reason for a status that needs one (``why``: what is
missing for *not measured*, what does not exist for *not identifiable here*), and whether it is a
finding or a premise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rlvr.errors import UserError
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.provenance import Ledger
from rlvr.experiments.replicates import claim_args
from rlvr.experiments.spec import ClaimSpec, Experiment
from rlvr.experiments.verdict import NOT_MEASURED, VERDICTS, Estimate, seed_interval, spread, verdict

Get = Callable[[str, str, "int | None"], dict]


def claim_head(cl: ClaimSpec) -> dict:
    """The part of a row the declaration alone decides."""
    head = {"id": cl.id, "claim": cl.claim, "paper": cl.paper, "expect": cl.expect, "measure": cl.measure,
            "kind": cl.kind, "quantity": MEASURES[cl.measure].describe(MEASURES[cl.measure].typed(cl.args)),
            "args": cl.args}
    return {**head, "bound": cl.bound} if cl.bound else head  # rows without a bound stay as they were


def judge(cl: ClaimSpec, get: Get, seeds: list[int | None], against_seeds: list[int | None],
          failed: dict[str, str] | None = None) -> dict:
    """One claim's row: its measure over the cells ``get`` reads (``seeds`` of its model, of its
    ``against``); a missing cell or a model that ``failed`` to build (model -> reason) makes it
    *not measured*, saying why."""
    row = claim_head(cl)
    measure = MEASURES[cl.measure]
    args = measure.typed(cl.args)
    try:
        est, details = measure.compute(get, args, seeds, against_seeds)
    except FileNotFoundError as e:
        named = [cl.args.get("model", ""), cl.args.get("against", "base")]
        why = [(failed or {})[m] for m in named if m in (failed or {})]
        return {**row, "verdict": NOT_MEASURED, "why": why[0] if why else "not run yet", "missing": str(e)}
    except UserError as e:  # the measure cannot use these cells (e.g. no perplexity was scored)
        return {**row, "verdict": NOT_MEASURED, "why": str(e), "missing": str(e)}
    why = measure.identify(args, est, details)
    return {**row, "estimates": [{**e.__dict__, "label": e.label} for e in est], "spread": spread(est),
            "verdict": verdict(est, cl.expect, why, cl.bound), "details": details, "why": why,
            "seed_level": seed_interval(est).__dict__}


def judge_all(exp: Experiment, get: Get, seeds_of: Callable[[str], list[int | None]],
              failed: dict[str, str] | None = None, ledger: Ledger | None = None) -> list[dict]:
    """Every claim's row, in declaration order, with its provenance when a ``ledger`` is given; in
    an experiment with several pretraining seeds, measured once per pretraining seed
    (:func:`judge_replicated`)."""
    rows = []
    for cl in exp.claims:
        row = judge_replicated(cl, exp, get, seeds_of, failed)
        rows.append(ledger.mark(row, cl) if ledger is not None else row)
    return rows


def judge_replicated(cl: ClaimSpec, exp: Experiment, get: Get, seeds_of: Callable[[str], list[int | None]],
                     failed: dict[str, str] | None = None) -> dict:
    """One claim's row over every pretraining seed its models have: the estimates of all of them
    (each carrying its pretraining seed), details per pretraining seed (``p0``, ``p1``...), and *not
    measured* or *not identifiable here* when any pretraining seed's is."""
    parts = []
    for p in range(exp.pretrain_seeds):
        args = claim_args(cl.args, exp.models, p)
        if args is None:
            continue
        model = first_model(args)
        parts.append((p, {**judge(dataclasses.replace(cl, args=args), get, seeds_of(model),
                                  seeds_of(args.get("against", "base")), failed), "args": args}))
    if len(parts) == 1:
        return {**parts[0][1], "args": cl.args}
    missing = next((r for _, r in parts if r["verdict"] == NOT_MEASURED), None)
    if missing is not None:
        return {**missing, "args": cl.args}
    est = [dataclasses.replace(e, pretrain=p) for p, r in parts for e in _estimates(r)]
    why = "; ".join(f"p{p}: {r['why']}" for p, r in parts if r["why"])
    return {**claim_head(cl), "estimates": [{**e.__dict__, "label": e.label} for e in est], "spread": spread(est),
            "verdict": verdict(est, cl.expect, why, cl.bound), "details": {f"p{p}": r["details"] for p, r in parts},
            "detail_args": {f"p{p}": r["args"] for p, r in parts},  # the models each seed's details name
            "why": why, "seed_level": seed_interval(est).__dict__}


def first_model(args: dict) -> str:
    """The model whose seeds a claim is measured over: ``model``, else the first run it names (an
    association's first pair, a list of ``runs``, a ``grid``'s first cell)."""
    if "model" in args:
        return args["model"]
    if "pairs" in args:
        return args["pairs"][0][0]
    return args["runs"][0] if "runs" in args else args["grid"][0][0]


def _estimates(row: dict) -> list[Estimate]:
    return [Estimate(e["seed"], e["value"], e["lo"], e["hi"], e.get("pretrain")) for e in row["estimates"]]


def counted(row: dict) -> bool:
    """Whether a row counts among the findings: a finding, not post hoc."""
    return row.get("kind", "finding") == "finding" and not row.get("post_hoc")


def counts(rows: list[dict]) -> dict:
    """{"findings": {status: n}, "post hoc": {status: n}, "premises": {status: n}} over ``rows`` (an
    exploratory claim counts with the post hoc ones)."""
    out: dict[str, dict[str, int]] = {group: dict.fromkeys(VERDICTS, 0) for group in ("findings", "post hoc",
                                                                                        "premises")}
    for r in rows:
        kind = r.get("kind", "finding")
        group = "premises" if kind == "premise" else "post hoc" if r.get("post_hoc") or kind == "exploratory" \
            else "findings"
        out[group][status_of(r)] += 1
    return out


def status_of(row: dict) -> str:
    """A row's status among :data:`VERDICTS` (a published row of an older page may say "not run yet"
    or "not measured: why")."""
    v = row["verdict"]
    return v if v in VERDICTS else NOT_MEASURED


def shown_status(row: dict | None) -> str:
    """A row's status as the change table shows it: ``reproduced (post hoc)``, ``premise: reproduced``;
    ``(not declared)`` for no row."""
    if row is None:
        return "(not declared)"
    text = status_of(row) + (" (post hoc)" if row.get("post_hoc") else "")
    return f"premise: {text}" if row.get("kind", "finding") == "premise" else text


def verdict_changes(old: list[dict], new: list[dict]) -> list[dict]:
    """[{id, before, after, why}] for every claim whose shown status differs between the published
    rows ``old`` and the new rows ``new`` (a removed claim reads ``(removed)``), the reason computed
    from the two rows."""
    before, after = {r["id"]: r for r in old if "id" in r}, {r["id"]: r for r in new}
    out = []
    for cid in dict.fromkeys([*before, *after]):
        was, now = shown_status(before.get(cid)), shown_status(after.get(cid)) if cid in after else "(removed)"
        if was != now:
            out.append({"id": cid, "before": was, "after": now, "why": _change_reason(before.get(cid), after.get(cid))})
    return out


def _change_reason(old: dict | None, new: dict | None) -> str:
    if new is None:
        return "no longer declared"
    if old is None:
        late = f"; post hoc: {new['post_hoc']}" if new.get("post_hoc") else ""
        return ("new claim" + (f" ({new['declared']})" if new.get("declared") else "")
                + (f": {new['why']}" if new.get("why") else "") + late)
    why = []
    if new.get("kind") == "premise" and old.get("kind", "finding") != "premise":
        why.append("declared a premise (a manipulation check): never counted")
    if new.get("post_hoc") and not old.get("post_hoc"):
        why.append(f"post hoc: {new['post_hoc']}")
    if (new["measure"], new["args"], new["expect"], new.get("bound")) != (old["measure"], old["args"], old["expect"],
                                                                         old.get("bound")):
        why.append("re-declared (its measure, arguments or direction changed)")
    if status_of(new) != status_of(old):
        why.append(_status_reason(old, new))
    return "; ".join(why)


def _status_reason(old: dict, new: dict) -> str:
    status = status_of(new)
    if status == NOT_MEASURED or status == "not identifiable here":
        return new.get("why") or status
    same = [(e["value"], e["lo"], e["hi"]) for e in old.get("estimates", [])] == \
        [(e["value"], e["lo"], e["hi"]) for e in new.get("estimates", [])]
    level = new.get("seed_level")
    if same and level:
        return (f"the seed-level interval [{level['lo']:+.3f}, {level['hi']:+.3f}] (between-seed variation) "
                + ("covers 0" if level["lo"] <= 0 <= level["hi"] else "lies beyond 0"))
    return "recomputed from its cells (intervals: the measure's current construction)"
