"""An experiment declared in YAML (``rlvr/configs/experiments/NAME.yaml``): models to train,
evaluations to run on them, claims to check, and the miniature (``quick``) form.

Schema (every key checked at load; unknown keys are errors)::

    name: boundary                       # = the file name
    title: Does RL expand the reasoning boundary?
    papers: {yue: "Yue et al. 2025, arXiv 2504.13837"}
    config: quickstart                   # base config of every cell, + overrides
    overrides: [task.knobs={...}]
    seeds: 3                             # default seeds of seeded models (--seeds overrides)
    minutes: 38                          # measured wall minutes of the full run on 2 cores
    parts:                               # optional: evaluations run by `--part N` (1-based), with
      - {evaluations: [t06], minutes: 35}  #   the models they need; cells are shared between parts
    models:                              # trained (or pretrained) models, in dependency order
      base: {kind: base}
      rl: {kind: rl, seeded: true, overrides: [...]}
      distill: {kind: distill, teacher: teacher, seeded: true}
      sft: {kind: sft, seeded: true, milestones: 8}  # milestones: kept checkpoints (RL and SFT)
    evaluations:                         # sampling protocols, each run on some models
      t06: {temperature: 0.6, top_p: 0.95, n: 1024, problems: 128, models: [base, rl],
            perplexity: 32, milestones: false}
      w: {kind: weights, k: 0.05, temperature: 1.0, n: 4, problems: 64, models: [rl, sft]}
    claims:
      - {id: rl_wins_small_k, claim: "...", paper: "...", measure: passk_diff,
         args: {eval: t06, model: rl, against: base, k: 1}, expect: positive}
    protocol: [...]                      # sentences for the page
    deviations: [...]                    # every deviation from the papers' protocol, and why
    notes: [...]                         # optional: what the full run showed, why a claim failed
    quick: {overrides: [...], seeds: 2, n: 8, problems: 6}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlvr.errors import UserError
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.verdict import EXPECTS
from rlvr.tasks.registry import list_tasks

KINDS = ("base", "rl", "sft", "sft_gold", "distill", "sft_then_rl", "parallel", "rl_steps")
EVAL_KINDS = ("samples", "weights", "dynamics")
"""Model kinds: the pretrained base; RL with the config's recipe (the train loop); SFT on one or
all gold traces; SFT on a teacher model's verified-right samples; SFT then RL (half the budget
each); parallel averaging of the SFT and RL updates; RL for ``excursions.steps`` optimiser steps, the
budget of the others (docs/methods/excursions.md)."""
EXPERIMENTS_DIR = Path(__file__).resolve().parents[1] / "configs" / "experiments"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: str
    seeded: bool = False
    overrides: tuple[str, ...] = ()
    teacher: str = ""
    milestones: int = 0
    """Keep this many evenly spaced checkpoints through training (RL; SFT and distill too), for
    evaluations with milestones and weights evaluations (the final model is not counted)."""
    start: float = 1.0
    """The pretraining milestone (a fraction of the base's pretraining budget, one of
    ``pretrain.milestones``) the model starts from; a ``base`` model is that checkpoint itself."""
    base: str = "base"
    """The base model (a declared model of kind ``base``, e.g. one pretrained with another corpus mix
    or size) a trained model starts from; its architecture comes from that checkpoint."""


@dataclass(frozen=True)
class EvalSpec:
    name: str
    temperature: float
    top_p: float
    n: int
    problems: int
    models: tuple[str, ...]
    perplexity: int = 0
    """Score this many samples per problem of each model under the base (0 = skip)."""
    milestones: bool = False
    """Also evaluate each RL model's kept checkpoints (entropy through training)."""
    kind: str = "samples"
    """``samples``: sample and score (:mod:`rlvr.experiments.evaluate`); ``weights``: weight-space
    measures and KL to the base at every kept checkpoint (:mod:`rlvr.experiments.weights_eval`;
    temperature, top_p, n, problems then set the KL's samples); ``dynamics``: an RL model's per-step
    training series (:mod:`rlvr.experiments.dynamics_eval`; nothing sampled)."""
    k: float = 0.05
    """``weights``: singular directions kept per matrix, a fraction of its rank (or an integer >= 1)."""
    task: str = ""
    """``samples``: evaluate on this task instead of the experiment's (built with the pretraining
    corpus's knobs for it, ``pretrain.task_knobs``: a general-ability retention task, e.g. strings)."""
    offset: int = 0
    """``samples``: skip the first ``offset`` held-out problems (a validation block for tuning,
    disjoint from the evaluations that start at 0)."""

    def same_cells(self, other: EvalSpec) -> bool:
        """Whether ``other`` shares this evaluation's cells (the same protocol; every dynamics
        evaluation reads the same runs)."""
        if self.kind == "dynamics" or other.kind == "dynamics":
            return self.kind == other.kind
        keys = ("kind", "temperature", "top_p", "n", "problems", "perplexity", "k", "task", "offset")
        return all(getattr(self, k) == getattr(other, k) for k in keys)


@dataclass(frozen=True)
class ClaimSpec:
    id: str
    claim: str
    paper: str
    measure: str
    args: dict
    expect: str


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    config: str
    seeds: int
    minutes: float
    models: dict[str, ModelSpec]
    evaluations: dict[str, EvalSpec]
    claims: tuple[ClaimSpec, ...]
    papers: dict = field(default_factory=dict)
    overrides: tuple[str, ...] = ()
    protocol: tuple[str, ...] = ()
    deviations: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    """What a full run showed beyond the verdicts, and why a claim failed (written after the run;
    the page prints them under the table they read)."""
    quick: dict = field(default_factory=dict)
    parts: tuple[tuple[tuple[str, ...], float, tuple[int, ...]], ...] = ()
    """(evaluation names, measured minutes, seeds) of each part; empty = one part, everything.
    Seeds empty: every seed; else the part trains and evaluates only these seeds of its seeded
    models (an evaluation may then appear in several parts, each with other seeds)."""
    last_overrides: tuple[str, ...] = ()
    """Applied after every model's own overrides (the quick form's miniature settings)."""
    is_quick: bool = False
    """The miniature form (:meth:`quick_form`): it checks the machinery, so it trains every model
    whatever the machine (a bf16 model too where bf16 is slow)."""
    archive_series: tuple[str, ...] = ()
    """The series a published dynamics cell keeps (``archive: {series: [...]}``; empty: the whole
    cell), so the committed record of a long experiment stays small (:mod:`rlvr.experiments.archive`)."""

    def part_evaluations(self, part: int | None) -> tuple[str, ...]:
        """The evaluations of ``part`` (1-based; None = all)."""
        if part is None:
            return tuple(self.evaluations)
        if not self.parts or not 1 <= part <= len(self.parts):
            raise UserError(f"{self.name} has {len(self.parts) or 1} part(s); --part must be 1..{len(self.parts) or 1}")
        return self.parts[part - 1][0]

    def part_seeds(self, part: int | None) -> tuple[int, ...]:
        """The seeds ``part`` is limited to (empty: every seed)."""
        return () if part is None else self.parts[part - 1][2]

    def quick_form(self) -> Experiment:
        """The miniature: quick overrides appended, fewer seeds, n and problems capped."""
        q = self.quick
        evals = {k: EvalSpec(**{**e.__dict__, "n": min(e.n, q.get("n", 8)),
                                "problems": min(e.problems, q.get("problems", 6)),
                                "perplexity": min(e.perplexity, q.get("n", 8))})
                 for k, e in self.evaluations.items()}
        return Experiment(**{**self.__dict__, "last_overrides": tuple(q.get("overrides", ())), "is_quick": True,
                             "seeds": q.get("seeds", min(2, self.seeds)), "minutes": q.get("minutes", 3),
                             "evaluations": evals})


def _keys(d: dict, allowed: set[str], where: str, required: set[str] = frozenset()) -> None:
    if not isinstance(d, dict):
        raise UserError(f"{where}: expected a mapping, got {type(d).__name__}")
    extra, missing = set(d) - allowed, set(required) - set(d)
    if extra:
        raise UserError(f"{where}: unknown key(s) {', '.join(sorted(extra))}; allowed: {', '.join(sorted(allowed))}")
    if missing:
        raise UserError(f"{where}: missing key(s) {', '.join(sorted(missing))}")


def parse(data: dict, name: str) -> Experiment:
    """Validate a loaded YAML mapping into an :class:`Experiment` (errors name the bad key)."""
    _keys(data, {"name", "title", "papers", "config", "overrides", "seeds", "minutes", "models", "evaluations",
                 "claims", "protocol", "deviations", "notes", "quick", "parts", "archive"}, name,
          {"name", "title", "models", "evaluations", "claims"})
    if data["name"] != name:
        raise UserError(f"{name}: name {data['name']!r} differs from the file name")
    models: dict[str, ModelSpec] = {}
    for m, md in data["models"].items():
        _keys(md, {"kind", "seeded", "overrides", "teacher", "milestones", "start", "base"}, f"{name}.models.{m}",
              {"kind"})
        if md["kind"] not in KINDS:
            raise UserError(f"{name}.models.{m}.kind: unknown {md['kind']!r}; use one of {', '.join(KINDS)}")
        if (md["kind"] == "distill") != bool(md.get("teacher")):
            raise UserError(f"{name}.models.{m}: a distill model needs a teacher (and only it has one)")
        if md.get("teacher") and md["teacher"] not in models:
            raise UserError(f"{name}.models.{m}.teacher: {md['teacher']!r} is not a model declared before it")
        start = md.get("start", 1.0)
        if not isinstance(start, (int, float)) or not 0 < start <= 1:
            raise UserError(f"{name}.models.{m}.start: {start!r} is not a pretraining fraction in (0, 1]")
        if md["kind"] == "base" and md.get("seeded"):
            raise UserError(f"{name}.models.{m}: a base model is pretrained once; it cannot be seeded")
        parent = md.get("base", "base")
        if md["kind"] != "base" and parent != "base" and (parent not in models or models[parent].kind != "base"):
            raise UserError(f"{name}.models.{m}.base: {parent!r} is not a model of kind base declared before it")
        if md["kind"] == "base" and "base" in md:
            raise UserError(f"{name}.models.{m}: a base model takes no base (give it overrides or a start)")
        models[m] = ModelSpec(m, md["kind"], bool(md.get("seeded", False)), tuple(md.get("overrides", ())),
                              md.get("teacher", ""), int(md.get("milestones", 0)), float(start), parent)
    if "base" not in models or models["base"].kind != "base":
        raise UserError(f"{name}.models: needs a model called base of kind base (every comparison's reference)")
    evals: dict[str, EvalSpec] = {}
    for e, ed in data["evaluations"].items():
        _keys(ed, {"temperature", "top_p", "n", "problems", "models", "perplexity", "milestones", "kind", "k", "task",
                   "offset"},
              f"{name}.evaluations.{e}", {"temperature", "n", "problems", "models"})
        for m in ed["models"]:
            if m not in models:
                raise UserError(f"{name}.evaluations.{e}.models: unknown model {m!r}")
        if int(ed["n"]) < 1 or int(ed["problems"]) < 1:
            raise UserError(f"{name}.evaluations.{e}: n and problems must be >= 1")
        if ed.get("task") and ed["task"] not in list_tasks():
            raise UserError(f"{name}.evaluations.{e}.task: unknown task {ed['task']!r}; use one of "
                            f"{', '.join(list_tasks())}")
        kind = ed.get("kind", "samples")
        if kind not in EVAL_KINDS:
            raise UserError(f"{name}.evaluations.{e}.kind: unknown {kind!r}; use one of {', '.join(EVAL_KINDS)}")
        k = float(ed.get("k", 0.05))
        if not (0 < k <= 1 or (k > 1 and k.is_integer())):
            raise UserError(f"{name}.evaluations.{e}.k: {k} is neither a fraction in (0, 1] nor an integer")
        if kind != "samples" and (ed.get("perplexity") or "milestones" in ed or ed.get("task") or ed.get("offset")):
            raise UserError(f"{name}.evaluations.{e}: a {kind} evaluation takes no perplexity, milestones, task "
                            "or offset")
        if not isinstance(ed.get("offset", 0), int) or ed.get("offset", 0) < 0:
            raise UserError(f"{name}.evaluations.{e}.offset: {ed['offset']!r}; use an integer >= 0")
        if kind == "dynamics" and any(models[m].kind != "rl" for m in ed["models"]):
            raise UserError(f"{name}.evaluations.{e}: a dynamics evaluation reads RL runs; its models must be rl")
        evals[e] = EvalSpec(e, float(ed["temperature"]), float(ed.get("top_p", 1.0)), int(ed["n"]),
                            int(ed["problems"]), tuple(ed["models"]), int(ed.get("perplexity", 0)),
                            bool(ed.get("milestones", False)), kind, int(k) if k > 1 else k, str(ed.get("task", "")),
                            int(ed.get("offset", 0)))
    claims = []
    for i, cd in enumerate(data["claims"]):
        where = f"{name}.claims[{i}]"
        _keys(cd, {"id", "claim", "paper", "measure", "args", "expect"}, where,
              {"id", "claim", "paper", "measure", "args", "expect"})
        if cd["measure"] not in MEASURES:
            raise UserError(f"{where}.measure: unknown {cd['measure']!r}; use one of {', '.join(sorted(MEASURES))}")
        if cd["expect"] not in EXPECTS:
            raise UserError(f"{where}.expect: use one of {', '.join(EXPECTS)}")
        MEASURES[cd["measure"]].check(cd["args"], evals, models, where)
        claims.append(ClaimSpec(cd["id"], cd["claim"], cd["paper"], cd["measure"], dict(cd["args"]), cd["expect"]))
    parts = _parts(data.get("parts") or [], evals, int(data.get("seeds", 3)), name)
    quick = data.get("quick") or {}
    _keys(quick, {"overrides", "seeds", "n", "problems", "minutes"}, f"{name}.quick")
    archive = data.get("archive") or {}
    _keys(archive, {"series"}, f"{name}.archive")
    kept = archive.get("series") or []
    if not isinstance(kept, list) or not all(isinstance(k, str) for k in kept) or (kept and "step" not in kept):
        raise UserError(f"{name}.archive.series: {kept!r}; a list of series names that includes step")
    return Experiment(name, data["title"], data.get("config", "quickstart"), int(data.get("seeds", 3)),
                      float(data.get("minutes", 0)), models, evals, tuple(claims), dict(data.get("papers") or {}),
                      tuple(data.get("overrides", ())), tuple(data.get("protocol", ())),
                      tuple(data.get("deviations", ())), tuple(data.get("notes", ())), dict(quick), tuple(parts),
                      archive_series=tuple(kept))


def _parts(raw: list, evals: dict, seeds: int, name: str) -> list:
    """Validate ``parts``: every evaluation covered once (once per seed where parts name seeds)."""
    parts = []
    for i, pd in enumerate(raw):
        _keys(pd, {"evaluations", "minutes", "seeds"}, f"{name}.parts[{i}]", {"evaluations"})
        for e in pd["evaluations"]:
            if e not in evals:
                raise UserError(f"{name}.parts[{i}].evaluations: unknown evaluation {e!r}")
        ss = pd.get("seeds") or []
        if not all(isinstance(x, int) and 0 <= x < seeds for x in ss):
            raise UserError(f"{name}.parts[{i}].seeds: {ss!r}; use seeds among 0..{seeds - 1}")
        parts.append((tuple(pd["evaluations"]), float(pd.get("minutes", 0)), tuple(ss)))
    covered: dict[str, list[int]] = {}
    for evs, _, ss in parts:
        for e in evs:
            covered.setdefault(e, []).extend(ss or range(seeds))
    if parts and (set(covered) != set(evals) or any(sorted(v) != list(range(seeds)) for v in covered.values())):
        raise UserError(f"{name}.parts: every evaluation must be in exactly one part (or, for parts that "
                        f"name seeds, once per seed 0..{seeds - 1})")
    return parts


def names() -> list[str]:
    """The declared experiments (file names under rlvr/configs/experiments/)."""
    return sorted(p.stem for p in EXPERIMENTS_DIR.glob("*.yaml"))


def load(name: str) -> Experiment:
    """The declared experiment ``name`` (a did-you-mean error for an unknown one)."""
    path = EXPERIMENTS_DIR / f"{name}.yaml"
    if not path.exists():
        import difflib

        close = difflib.get_close_matches(name, names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; declared: {', '.join(names()) or 'none'}"
        raise UserError(f"unknown experiment {name!r}{hint}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({e})") from None
    return parse(data, name)
