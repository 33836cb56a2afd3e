"""``rlvr reproduce NAME`` as one library call (:func:`reproduce`): put back the published records
when asked, build and evaluate the cells, judge the claims with their provenance, write the page and
publish it. The command only parses its flags and prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlvr.errors import UserError
from rlvr.experiments.archive import restore_archive
from rlvr.experiments.claims import judge_all
from rlvr.experiments.curve_page import SECTION as CURVES
from rlvr.experiments.curve_page import curve_lines
from rlvr.experiments.dynamics_page import dynamics_lines
from rlvr.experiments.grid_page import grid_lines
from rlvr.experiments.legs import LEGS, end_leg, merge_legs, start_leg
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.models import model_config
from rlvr.experiments.page import publish, write_page
from rlvr.experiments.provenance import ledger
from rlvr.experiments.runner import cell_times, load_stats, passk_curves, run_experiment, seeds_of, trajectories
from rlvr.experiments.spec import EXPERIMENTS_DIR, Experiment
from rlvr.experiments.weight_page import weight_lines
from rlvr.machine import machine_info, machine_line
from rlvr.model.precision import config_spec, resolve_dtype

PUBLISHED = Path("docs/reproductions")
"""Where pages are published (relative to the repository root, where the command runs)."""


@dataclass(frozen=True)
class Reproduction:
    """What :func:`reproduce` did: the claims' rows, the page, and the index when it published."""

    rows: list[dict]
    page: Path
    index: Path | None


def reproduce(exp: Experiment, out: Path, seeds: int, command: str, *, progress: str = "auto",
              max_minutes: float | None = None, part: int | tuple[int, ...] | None = None, jobs: int = 1,
              page_only: bool = False, resume_published: bool = False, publish_page: bool = False,
              docs: Path = PUBLISHED, say: Callable[[str], None] = print) -> Reproduction:
    """Run ``exp`` into ``out`` (``seeds`` of its seeded models) and write its page; see
    docs/commands/reproduce.md for each option (``page_only``: build and evaluate nothing;
    ``resume_published``: first restore the records published under ``docs``; ``publish_page``: copy
    the page there and rebuild the index)."""
    if resume_published:
        restore(exp, out, docs, say)
    if page_only and not out.is_dir():
        raise UserError(f"--page-only writes the page from the cells in {out}, and there is no such folder; "
                        "run the experiment (or a part of it) first, or name its folder with --out")
    cfg = model_config(exp, exp.models["base"], None)
    precision = resolve_dtype(cfg.model.dtype, "cpu", lambda: config_spec(cfg.model)).dtype
    machine = machine_line(machine_info(precision))
    run = _run_leg(exp, out, seeds, progress, max_minutes, part, jobs, machine) if not page_only \
        else run_experiment(exp, out, seeds, progress, max_minutes, part, jobs, cached_only=True)
    book = ledger(EXPERIMENTS_DIR / f"{exp.name}.yaml", docs / exp.name / "table.json", cell_times(exp, out, seeds))
    rows = judge_all(exp, lambda ev, m, s, milestone="": load_stats(out, exp.evaluations[ev], m, s, milestone),
                     lambda m: seeds_of(exp, m, seeds), run["failed"], book)
    page = write_page(exp, out, rows, trajectories(exp, out, seeds, run["built"]), passk_curves(exp, out, seeds), run,
                      machine, command, exp.is_quick, sections(exp, out, seeds))
    index = publish(out, docs, exp.archive.series) if publish_page else None
    return Reproduction(rows, page, index)


def _run_leg(exp: Experiment, out: Path, seeds: int, progress: str, max_minutes: float | None,
             part: int | tuple[int, ...] | None, jobs: int, machine: str) -> dict:
    """:func:`run_experiment` as one leg recorded in ``out/legs.jsonl`` (:mod:`rlvr.experiments.legs`):
    its start, then its end with the outcome ("complete", "paused", "incomplete", or the exception's
    name when one ends it)."""
    parts = (part,) if isinstance(part, int) else part
    if parts is not None:
        for p in parts:
            exp.part_evaluations(p)  # an unknown part is an error before any leg is recorded
    out.mkdir(parents=True, exist_ok=True)
    leg = start_leg(out, parts, machine, max_minutes)
    try:
        run = run_experiment(exp, out, seeds, progress, max_minutes, part, jobs)
    except BaseException as e:  # Ctrl-C, a failure: the leg still says how it ended
        end_leg(out, leg, type(e).__name__)
        raise
    end_leg(out, leg, "complete" if run["complete"] else "paused" if run["stopped"] else "incomplete")
    return run


def restore(exp: Experiment, out: Path, docs: Path, say: Callable[[str], None]) -> None:
    """Put the records published under ``docs/NAME/cells`` that ``out`` lacks into ``out``."""
    src = docs / exp.name / "cells"
    if exp.is_quick:
        raise UserError("--resume-published continues a full run from its published records; drop --quick")
    if not src.is_dir():
        raise UserError(f"--resume-published: no published records at {src} (run from the repository "
                        f"root, after a `rlvr reproduce {exp.name} --publish`)")
    n = restore_archive(src, out)
    merge_legs(src / LEGS, out / LEGS)  # the wall time of the parts run elsewhere
    say(f"restored from {src}: {n['models']} model record(s), {n['evals']} evaluation cell(s) "
        "(what the output folder already had is kept)")


def sections(exp: Experiment, out: Path, seeds: int) -> dict[str, list[str]]:
    """The page's sections from the cells on disk: curves, the grid across pretraining checkpoints,
    weights, training dynamics (not when every claim reads curves: their series are the Curves)."""
    def seeds_of_model(m: str):
        return seeds_of(exp, m, seeds)

    def look(ev, m, s):
        return load_stats(out, ev, m, s)

    curves_only = all(MEASURES[c.measure].section == CURVES for c in exp.claims)
    return {"Curves": curve_lines(exp, seeds_of_model, look, out),
            "Across pretraining checkpoints": grid_lines(exp, seeds_of_model, look, out),
            "Weights": weight_lines(exp, seeds_of_model, look),
            "Training dynamics": [] if curves_only else dynamics_lines(exp, seeds_of_model, look, out)}
