"""Run a declared experiment: build its models, run its evaluations, check its claims, write its page.

Every cell (a model x seed, or an evaluation x model x seed [x milestone]) is cached on disk, so a
killed run continues where it stopped and a run split across sessions (``max_minutes``) picks up
the cells still missing; an RL run still training at the deadline checkpoints and pauses, and the
next invocation resumes it (:class:`~rlvr.experiments.models.RunPaused`). The claims are computed
from whatever cells exist: a claim whose cells are missing is reported as "not run yet", never
guessed.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from rlvr.config import config_hash
from rlvr.errors import UserError
from rlvr.eval.retention import retention_task
from rlvr.experiments.base_weights import agreed_weights, check_same_base, recorded_base_weights
from rlvr.experiments.cells import cell_passk, cell_state, cell_time
from rlvr.experiments.curve_measures import curve
from rlvr.experiments.dynamics_eval import evaluate_dynamics
from rlvr.experiments.evaluate import evaluate_model
from rlvr.experiments.models import (
    RunPaused,
    base_identity,
    build_model,
    keyed_section,
    model_cached,
    model_config,
    model_id,
    model_state,
)
from rlvr.experiments.replicates import pretrain_index, pretrain_seeded, reference_base
from rlvr.experiments.spec import EvalSpec, Experiment
from rlvr.experiments.weights_eval import evaluate_weights
from rlvr.log import Progress, warn
from rlvr.model.precision import ENV_PIN, config_spec, resolve_dtype
from rlvr.train.state import get_task

BF16_ARM_MIN_RATIO = 0.5
"""A model declared in bf16 trains where bf16 autocast runs at least this fraction of float32's speed
(its part then takes at most about twice a float32 part); elsewhere (a CPU without bf16 units, 0.02-0.16x)
it is not trained and its claims say so."""
WEIGHTS_CELL = "|masks+strata@every"
"""What a weights cell holds beyond its key's checkpoints: masks and |W0| strata at every checkpoint
(older cells kept masks at the final one only, and are computed again)."""
SAMPLING_SEED = 20_250_418  # every model of an evaluation samples with the same seeds (common random numbers)


@dataclass(frozen=True)
class Cell:
    kind: str  # "model" | "eval"
    model: str
    seed: int | None
    eval: str = ""
    milestone: str = ""  # a kept RL checkpoint's name (eval cells with milestones)

    @property
    def id(self) -> str:
        mid = model_id(self.model, self.seed)
        if self.kind == "model":
            return f"model {mid}"
        return f"eval {self.eval} {mid}" + (f" @{self.milestone}" if self.milestone else "")


def seeds_of(exp: Experiment, model: str, seeds: int) -> list[int | None]:
    spec = exp.models[model]
    return list(range(spec.first_seed, spec.first_seed + seeds)) if spec.seeded else [None]


def protocol_name(ev: EvalSpec) -> str:
    """The folder of an evaluation protocol: evaluations with the same protocol share their cells."""
    name = (f"T{ev.temperature:g}-p{ev.top_p:g}-n{ev.n}-P{ev.problems}" + (f"-o{ev.offset}" if ev.offset else "")
            + (f"-{ev.task}" if ev.task else ""))
    if ev.kind == "weights":
        return f"weights-k{ev.k:g}-{name}"
    if ev.kind == "dynamics":
        return "dynamics"
    return name + (f"-ppl{ev.perplexity}" if ev.perplexity else "") + ("-nll" if ev.gold_nll else "")


def eval_dir(out: Path, ev: EvalSpec, model: str, seed: int | None, milestone: str = "") -> Path:
    return out / "evals" / protocol_name(ev) / (model_id(model, seed) + (f"@{milestone}" if milestone else ""))


def cell_times(exp: Experiment, out: Path, seeds: int):
    """``(eval, model) -> [when each of its seeds' cells on disk was computed (None: not recorded)]``,
    for the claims' provenance (:class:`rlvr.experiments.provenance.Ledger`)."""
    def times(ev: str, model: str) -> list[str | None]:
        if ev not in exp.evaluations or model not in exp.models:
            return []
        dirs = [eval_dir(out, exp.evaluations[ev], model, s) for s in seeds_of(exp, model, seeds)]
        return [cell_time(d) for d in dirs if (d / "stats.json").exists()]

    return times


def needed_models(exp: Experiment, evals: tuple[str, ...], pretrain: tuple[int, ...] = ()) -> set[str]:
    """The models the evaluations ``evals`` sample, with what they are built from (base, teachers);
    only the pretraining seeds ``pretrain`` of the pretrain-seeded models when given (empty: all)."""
    need = ({"base"} if not pretrain or 0 in pretrain else set()) | {
        m for e in evals for m in exp.evaluations[e].models if in_pretrain_seeds(exp, m, pretrain)}
    for m in list(need):
        need.update((exp.models[m].base, reference_base(exp.models, m)))
        t = exp.models[m].teacher
        while t:
            need.update((t, exp.models[t].base))
            t = exp.models[t].teacher
    return need


def in_pretrain_seeds(exp: Experiment, model: str, pretrain: tuple[int, ...]) -> bool:
    """Whether ``model`` belongs to the pretraining seeds ``pretrain`` (empty: all; a model not built
    from a pretrain-seeded base belongs to every pretraining seed)."""
    return not pretrain or not pretrain_seeded(exp.models, model) or pretrain_index(model) in pretrain


def model_cells(exp: Experiment, seeds: int, evals: tuple[str, ...] | None = None,
                pretrain: tuple[int, ...] = ()) -> list[Cell]:
    """Models in declaration order (a teacher before its student), each seed; only those the
    evaluations ``evals`` need (of the pretraining seeds ``pretrain``) when given."""
    need = needed_models(exp, evals, pretrain) if evals is not None else set(exp.models)
    return [Cell("model", m, s) for m in exp.models if m in need for s in seeds_of(exp, m, seeds)]


def in_part_seeds(exp: Experiment, part: int, model: str, seed: int | None) -> bool:
    """Whether ``part`` names (or does not limit) ``model``'s ``seed``. A part's seeds are positions
    0..seeds-1, as the declaration checks them: a model declared ``first_seed: 3`` runs seeds 3, 4, 5,
    so a part's ``seeds: [0]`` is its seed 3."""
    only = exp.part_seeds(part)
    return not only or seed is None or seed - exp.models[model].first_seed in only


def in_parts(exp: Experiment, parts: tuple[int, ...] | None, ev: str, model: str, seed: int | None) -> bool:
    """Whether evaluation ``ev`` of ``model`` at ``seed`` is a cell of one of ``parts`` (None: all):
    the part runs ``ev`` and names (or does not limit) that seed and that pretraining seed."""
    return parts is None or any(
        ev in exp.part_evaluations(p) and in_part_seeds(exp, p, model, seed)
        and in_pretrain_seeds(exp, model, exp.part_pretrain_seeds(p)) for p in parts)


def part_cells(exp: Experiment, seeds: int, parts: tuple[int, ...] | None) -> tuple[list[Cell], tuple[str, ...]]:
    """The model cells (each once, in the order of ``parts``) and the evaluations of the given
    parts (1-based; None = the whole experiment). A part limited to some seeds (some pretraining
    seeds) builds only those seeds (those pretraining seeds' models, with what they are built from)."""
    if parts is None:
        return model_cells(exp, seeds), exp.part_evaluations(None)
    cells: list[Cell] = []
    for p in parts:
        evals = exp.part_evaluations(p)  # checks p
        for c in model_cells(exp, seeds, evals, exp.part_pretrain_seeds(p)):
            if in_part_seeds(exp, p, c.model, c.seed) and c not in cells:
                cells.append(c)
    return cells, tuple(dict.fromkeys(e for p in parts for e in exp.part_evaluations(p)))


def slow_bf16(exp: Experiment, cells: list[Cell]) -> dict[str, str]:
    """{model: why it is not trained here} for the models of ``cells`` declared in bf16
    (``model.dtype=bfloat16``) unless bf16 autocast is known to run at least :data:`BF16_ARM_MIN_RATIO`
    of float32's speed on this machine (the cached measurement behind ``model.dtype=auto``; where
    ``auto`` is pinned, the pin decides); {} in the quick form, which trains everything.

    Where the speed is not measured (the probe does not measure on a busy machine, and caches
    nothing) the models are not trained either, and the reason says so rather than "too slow": an
    unmeasured CPU may run bf16 at 0.02-0.16x float32 (hours for a 30-minute part), and the next run
    on a quiet machine measures and decides."""
    cfgs = {} if exp.is_quick else {c.model: model_config(exp, exp.models[c.model], c.seed) for c in cells}
    bf16 = {m: cfg for m, cfg in cfgs.items() if cfg.model.dtype == "bfloat16"}
    if not bf16:
        return {}
    cfg = next(iter(bf16.values()))
    p = resolve_dtype("auto", "cpu", lambda: config_spec(cfg.model))
    ratio = (p.measurement or {}).get("ratio")
    if p.dtype == "bfloat16" or (ratio is not None and float(ratio) >= BF16_ARM_MIN_RATIO):
        return {}
    rule = (f"it trains where the measurement behind model.dtype=auto finds bf16 autocast at least "
            f"{BF16_ARM_MIN_RATIO}x float32 (a CPU with avx512_bf16 or AMX)")
    if ratio is None:
        then = (f"unset {ENV_PIN} to let the measurement decide" if os.environ.get(ENV_PIN)
                else "run it again when the machine is quiet (the probe measures then)")
        why = (f"runs in bf16 (model.dtype=bfloat16), whose speed on this machine is not measured ({p.reason}); "
               f"{rule}: {then}")
    else:
        why = f"runs in bf16 (model.dtype=bfloat16), which is too slow on this machine ({p.reason}); {rule}"
    return {m: why for m in bf16}


def run_experiment(exp: Experiment, out: Path, seeds: int, progress: str = "auto",
                   max_minutes: float | None = None, part: int | tuple[int, ...] | None = None, jobs: int = 1,
                   cached_only: bool = False) -> dict:
    """Build the models and run the evaluations of ``exp`` (of one ``part`` or several, 1-based,
    when given; with ``jobs`` > 1 the models of several parts share the workers) under ``out``,
    reusing every cached cell -> {"built", "timings", "failed", "complete", "missing", "stopped" (paused on
    ``max_minutes``), "read_only" (``cached_only``), "stale" (of the
    missing, how many have a folder holding a finished cell under another key), "wall_s"}.
    ``jobs`` > 1 trains that many models at once, each in its own process with
    ``cores // jobs`` torch threads (:func:`_build_parallel`). ``cached_only``: train and evaluate
    nothing, read back the cells already on disk and skip the others ("complete" says whether
    none was missing, "missing" how many were); the bases are then taken by their declared identity,
    never read or pretrained (:func:`~rlvr.experiments.models.base_identity`). Anything trained or evaluated
    first checks that the folder's finished models started from the local base's weights
    (:func:`~rlvr.experiments.base_weights.check_same_base`)."""
    if cached_only and max_minutes is not None:
        raise UserError("reading only the cached cells (--page-only) takes no time budget: drop --max-minutes")
    parts = (part,) if isinstance(part, int) else part
    cells, evals = part_cells(exp, seeds, parts)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    built: dict[str, dict] = {}
    timings: dict[str, float] = {}
    stopped = False
    failed: dict[str, str] = {}

    stop_at = None if max_minutes is None else t0 + 60 * max_minutes  # a run in training pauses there

    def over_budget() -> bool:
        return stop_at is not None and time.time() > stop_at

    missing = stale = 0  # stale: on disk under another key (computed under an older declaration or code)
    samplers = {protocol_name(ev): ev for ev in exp.evaluations.values() if ev.kind == "samples"}.values()
    bases = recorded_base_weights(exp, out, lambda m: seeds_of(exp, m, seeds),
                                  lambda b: [eval_dir(out, ev, b, None) for ev in samplers])

    def same_base(c: Cell) -> None:  # before c is trained or evaluated here
        spec = exp.models[c.model]
        base = c.model if spec.kind == "base" else spec.base
        if base in built:
            check_same_base(bases, base, built[base], c.id, out)

    slow = {} if cached_only else slow_bf16(exp, cells)
    for m, why in slow.items():
        warn(f"{m}: not trained (unless already on disk): it {why}")
    bar = Progress(len(cells), f"reproduce {exp.name}: models", progress)
    try:
        if jobs > 1 and not cached_only:
            stopped = _build_parallel(exp, cells, out, built, timings, failed, jobs, over_budget, bar,
                                      progress != "none", slow, same_base, stop_at)
        else:
            for c in cells:
                spec = exp.models[c.model]
                if cached_only and spec.kind == "base":  # its identity: nothing is computed from it
                    t = time.time()
                    built[model_id(c.model, c.seed)] = base_identity(exp, spec, c.seed,
                                                                     agreed_weights(bases, c.model))
                    timings[c.id] = time.time() - t
                    bar.update(1)
                    continue
                if ((c.model in slow or cached_only or over_budget())
                        and (state := model_state(exp, spec, c.seed, out, built)) != "cached"):
                    if c.model in slow:  # not on disk, and this machine does not train it
                        failed[c.model] = slow[c.model]
                    elif not cached_only:
                        stopped = True
                        break
                    else:
                        missing += 1
                        stale += state == "stale"
                    bar.update(1)
                    continue
                if spec.kind != "base" and not model_cached(exp, spec, c.seed, out, built):
                    same_base(c)  # about to train it
                t = time.time()
                try:
                    built[model_id(c.model, c.seed)] = build_model(exp, exp.models[c.model], c.seed, out, built,
                                                                   "none" if progress == "none" else "plain",
                                                                   stop_at)
                except RunPaused:  # checkpointed on the time budget (the training loop said so): the next
                    timings[c.id] = time.time() - t  # invocation resumes it
                    stopped = True
                    break
                except UserError as e:  # e.g. a teacher that gets nothing right: its claims say why
                    failed[c.model] = str(e)
                    warn(f"{c.id} failed: {e}")
                timings[c.id] = time.time() - t
                bar.update(1)
    finally:
        bar.close()
    ecells = [] if stopped else _eval_cells(exp, seeds, built, evals, parts)  # milestones are known now
    if cached_only:  # a model not on disk: its evaluations are not on disk either (milestones unknown: 1 each)
        absent = _eval_cells(exp, seeds, _absent(exp, cells, built), evals, parts)
        missing += len(absent)
        stale += sum(cell_state(eval_dir(out, exp.evaluations[c.eval], c.model, c.seed), None) == "stale"
                     for c in absent)
    bar = Progress(len(ecells), f"reproduce {exp.name}: evaluations", progress)
    try:
        for c in ecells:
            folder, key = _eval_target(exp, c, out, built)[-2:]
            state = cell_state(folder, key)
            cached = state == "cached"
            if (cached_only or over_budget()) and not cached:
                if not cached_only:
                    stopped = True
                    break
                missing += 1
                stale += state == "stale"
                bar.update(1)
                continue
            if not cached:
                same_base(c)  # about to evaluate it
            t = time.time()
            _run_eval(exp, c, out, built, None if progress == "none" else _chunk_note(c))
            timings[c.id] = time.time() - t
            bar.update(1)
    finally:
        bar.close()
    if stopped:
        warn(f"stopped after {max_minutes} minutes (--max-minutes); run the same command again to continue")
    if missing:
        older = (f" ({stale} of them on disk under another key: computed under an older declaration or code)"
                 if stale else "")
        warn(f"{missing} declared cell(s) not on disk{older} (--page-only reads only cached cells): a claim "
             "reading one says 'not run yet'; claims whose cells are all on disk are judged")
    return {"built": built, "timings": timings, "failed": failed, "complete": not stopped and not missing,
            "missing": missing, "stale": stale, "stopped": stopped, "read_only": cached_only,
            "wall_s": time.time() - t0}


def _build_one(exp: Experiment, c: Cell, out: str, built: dict[str, dict], threads: int,
               stop_at: float | None = None) -> dict:
    """Worker of :func:`_build_parallel` (a spawned process): one model, ``threads`` torch threads."""
    import torch

    torch.set_num_threads(threads)
    return build_model(exp, exp.models[c.model], c.seed, Path(out), built, "none", stop_at)


def _build_parallel(exp: Experiment, cells: list[Cell], out: Path, built: dict[str, dict], timings: dict,
                    failed: dict, jobs: int, over_budget, bar, say: bool = True,
                    skip: dict[str, str] | None = None, before_training=None, stop_at: float | None = None) -> bool:
    """Build ``cells`` with ``jobs`` worker processes: a model starts once what it is built from
    (the base, its teacher) is built; cached models are read in this process; a model in ``skip``
    that is not cached is not trained (failed, with its reason); ``before_training(cell)`` runs
    before one starts (it may stop the run); ``stop_at``: the deadline at which a run in training
    checkpoints and pauses (:class:`~rlvr.experiments.models.RunPaused`). Fills ``built``,
    ``timings``, ``failed``; -> whether it stopped on the time budget. ``say``: a line on stderr
    when a model starts and ends (the workers train without progress bars)."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from multiprocessing import get_context

    def note(text: str) -> None:
        if say:
            print(f"[reproduce {exp.name}] {text}", file=sys.stderr, flush=True)

    def deps(c: Cell) -> list[tuple[str, str]]:  # (model id, model name) of what c is built from
        spec = exp.models[c.model]
        out_ = [] if spec.kind == "base" else [(spec.base, spec.base)]
        if spec.teacher:
            out_.append((model_id(spec.teacher, c.seed if exp.models[spec.teacher].seeded else None), spec.teacher))
        return out_

    threads = max(1, (os.cpu_count() or 1) // jobs)
    todo, running, stopped = list(cells), {}, False
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        while todo or running:
            for c in list(todo):
                if any(name in failed for _, name in deps(c)):
                    todo.remove(c)
                    failed[c.model] = f"{c.id}: what it is built from could not be built"
                    bar.update(1)
                elif not all(i in built for i, _ in deps(c)):
                    continue
                elif exp.models[c.model].kind == "base" or model_cached(exp, exp.models[c.model], c.seed, out, built):
                    todo.remove(c)  # read back here: nothing to train
                    t = time.time()
                    built[model_id(c.model, c.seed)] = build_model(exp, exp.models[c.model], c.seed, out, built, "none")
                    timings[c.id] = time.time() - t
                    bar.update(1)
                elif c.model in (skip or {}):
                    todo.remove(c)
                    failed[c.model] = skip[c.model]
                    bar.update(1)
                elif len(running) < jobs:
                    stopped = stopped or over_budget()
                    if not stopped:
                        if before_training is not None:
                            before_training(c)
                        todo.remove(c)
                        job = pool.submit(_build_one, exp, c, str(out), dict(built), threads, stop_at)
                        running[job] = (c, time.time())
                        note(f"training {c.id} (process {len(running)} of {jobs}, {threads} thread(s))")
            if not running:
                break  # nothing left that can start (stopped on the budget, or all done)
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in done:
                c, t = running.pop(f)
                try:
                    built[model_id(c.model, c.seed)] = f.result()
                    note(f"{c.id} done in {(time.time() - t) / 60:.1f} min")
                except RunPaused as e:  # checkpointed on the time budget: the next invocation resumes it
                    note(f"{e} after {(time.time() - t) / 60:.1f} min (--max-minutes)")
                    stopped = True
                except UserError as e:
                    failed[c.model] = str(e)
                    warn(f"{c.id} failed: {e}")
                timings[c.id] = time.time() - t
                bar.update(1)
    return stopped


def _absent(exp: Experiment, cells: list[Cell], built: dict[str, dict]) -> dict[str, dict]:
    """{model id: {}} of the non-base model cells not in ``built`` (so :func:`_eval_cells` lists
    their evaluations, without milestones)."""
    return {i: {} for c in cells if exp.models[c.model].kind != "base"
            and (i := model_id(c.model, c.seed)) not in built}


def part_status(exp: Experiment, out: Path, seeds: int) -> list[dict]:
    """Per declared part, in order: {"part" (1-based), "missing" (its cells not on disk: models and
    evaluations, a missing model's evaluations counted once each), "stale" (of those, the ones whose
    folder holds a finished cell under another key: computed under an older declaration or code),
    "minutes" (declared)}, read as
    ``--page-only`` reads (nothing trained, sampled or pretrained; warnings silenced)."""
    if not out.is_dir():
        raise UserError(f"no such folder: {out} (name the experiment's output folder with --out)")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, part in enumerate(exp.parts, 1):
            run = run_experiment(exp, out, seeds, "none", part=i, cached_only=True)
            rows.append({"part": i, "missing": run["missing"], "stale": run["stale"], "minutes": part.minutes})
    return rows


def _eval_cells(exp: Experiment, seeds: int, built: dict[str, dict], evals: tuple[str, ...],
                parts: tuple[int, ...] | None = None) -> list[Cell]:
    """The evaluation cells of ``evals`` that belong to ``parts`` (None: all), of the models built."""
    out = []
    for ev in (exp.evaluations[e] for e in evals):
        for m in ev.models:
            for s in seeds_of(exp, m, seeds):
                if model_id(m, s) not in built or not in_parts(exp, parts, ev.name, m, s):
                    continue  # its model failed (nothing to evaluate), or another part's cell
                out.append(Cell("eval", m, s, ev.name))
                if ev.milestones and ev.kind == "samples":
                    out += [Cell("eval", m, s, ev.name, Path(p).name)
                            for p in built[model_id(m, s)].get("milestones", [])]
    return out


def _eval_target(exp: Experiment, c: Cell, out: Path, built: dict[str, dict]):
    """(checkpoint, config, cell folder, cell key) of an evaluation cell."""
    info = built[model_id(c.model, c.seed)]
    path = next(p for p in info["milestones"] if Path(p).name == c.milestone) if c.milestone else info["path"]
    cfg = model_config(exp, exp.models[c.model], c.seed)
    reference = built[reference_base(exp.models, c.model)]["key"]  # the base that scores its samples
    key = (f"{info['key']}|{reference}|{Path(path).name}|{config_hash(cfg.task)}"
           f"|{config_hash(keyed_section(cfg, 'sampling'))}")
    if exp.evaluations[c.eval].kind == "weights":  # the cell covers the kept checkpoints too
        key += "|" + ",".join(Path(p).name for p in info.get("milestones", [])) + WEIGHTS_CELL
    return path, cfg, eval_dir(out, exp.evaluations[c.eval], c.model, c.seed, c.milestone), key


def _chunk_note(c: Cell):
    def note(i: int, n: int) -> None:
        print(f"[{c.id}] samples chunk {i}/{n}", file=sys.stderr, flush=True)

    return note


def _run_eval(exp: Experiment, c: Cell, out: Path, built: dict[str, dict], on_chunk=None) -> dict:
    ev = exp.evaluations[c.eval]
    path, cfg, d, key = _eval_target(exp, c, out, built)
    info = built[model_id(c.model, c.seed)]
    reference = built[reference_base(exp.models, c.model)]  # each pretraining seed's own base
    if info.get("restored") and not Path(path).exists() and cell_state(d, key) != "cached":
        raise UserError(f"{c.id}: the model's record was restored from {info['restored']} (--resume-published) "
                        f"without its weights, and this evaluation is not among the published cells; delete "
                        f"{out / 'models' / model_id(c.model, c.seed)} to train it again")
    if ev.kind == "dynamics":
        return evaluate_dynamics(built[model_id(c.model, c.seed)]["run"], d, key)
    if ev.kind == "weights":  # every kept checkpoint of the model and its final one, in one cell
        info = built[model_id(c.model, c.seed)]
        return evaluate_weights(path, info.get("milestones", []), reference["path"], cfg, get_task(cfg), ev,
                                SAMPLING_SEED, d, key)
    task = retention_task(cfg, ev.task) if ev.task else get_task(cfg)
    return evaluate_model(path, reference["path"], cfg, task, ev.problems, ev.n, ev.temperature,
                          ev.top_p, ev.perplexity, SAMPLING_SEED, d, key, on_chunk, ev.offset, ev.gold_nll)


def load_stats(out: Path, ev: EvalSpec, model: str, seed: int | None, milestone: str = "") -> dict:
    path = eval_dir(out, ev, model, seed, milestone) / "stats.json"
    if not path.exists():
        raise FileNotFoundError(str(path))
    return json.loads(path.read_text())


def load_curve(out: Path, ev: EvalSpec, model: str, seed: int | None) -> tuple:
    """(C (N,), R (N,)): the held-out curve of ``model`` (RL seed ``seed``, None for an unseeded model)
    from its dynamics cell under ``out``; a missing cell or a series too short is a UserError naming
    the run and what to do."""
    name = model_id(model, seed)
    try:
        return curve(load_stats(out, ev, model, seed))
    except FileNotFoundError as e:
        raise UserError(f"no curve of {name} ({ev.name}): {e} is missing; run its part first") from None
    except UserError as e:
        raise UserError(f"{name} ({ev.name}): {e}") from None


def trajectories(exp: Experiment, out: Path, seeds: int, built: dict[str, dict]) -> dict:
    """Token and answer entropy and pass@1 at each kept checkpoint of each RL model (evaluations
    with milestones), with the base's values: {eval: {model-seed: [{step, token, answer, pass1}]}}."""
    res: dict = {}
    for ev in (e for e in exp.evaluations.values() if e.milestones):
        try:
            base = load_stats(out, ev, "base", None)
        except FileNotFoundError:
            continue
        table = {"base": [_point(0, base)]}
        for m in ev.models:
            for s in seeds_of(exp, m, seeds):
                info = built.get(model_id(m, s)) or {}
                points = []
                for p in [*info.get("milestones", []), info.get("path")]:
                    if not p:
                        continue
                    name = Path(p).name if p != info.get("path") else ""
                    try:
                        st = load_stats(out, ev, m, s, name)
                    except FileNotFoundError:
                        continue
                    step = int(Path(p).name.split("_")[-1]) if Path(p).name.startswith("step_") else -1
                    points.append(_point(step, st))
                if points and info.get("milestones"):
                    table[model_id(m, s)] = points
        res[ev.name] = table
    return res


def _point(step: int, st: dict) -> dict:
    def mean(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else None

    return {"step": step, "token_entropy": mean(st["token_entropy"]), "answer_entropy": mean(st["answer_entropy"]),
            "pass1": sum(st["correct"]) / (st["n"] * len(st["correct"]))}


def passk_curves(exp: Experiment, out: Path, seeds: int) -> dict:
    """{eval: {model: {k: mean over seeds of pass@k}}} for k = 1, 2, 4, ... n of every evaluated
    model (milestones excluded), from the cells on disk."""
    res: dict = {}
    for ev in (e for e in exp.evaluations.values() if e.kind == "samples"):
        ks = [1 << e for e in range(ev.n.bit_length()) if (1 << e) <= ev.n]
        for m in ev.models:
            per_seed = []
            for s in seeds_of(exp, m, seeds):
                try:
                    st = load_stats(out, ev, m, s)
                except FileNotFoundError:
                    continue
                per_seed.append(cell_passk(st, ks).mean(0))
            if per_seed:
                res.setdefault(ev.name, {})[m] = {str(k): float(sum(v[j] for v in per_seed) / len(per_seed))
                                                  for j, k in enumerate(ks)}
    return res
