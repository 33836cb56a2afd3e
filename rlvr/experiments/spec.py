"""An experiment declared in YAML (``rlvr/configs/experiments/NAME.yaml``): models to train,
evaluations to run on them, claims to check, and the miniature (``quick``) form.

The declaration is the dataclasses below, read by the same strict loader as run configs
(:func:`rlvr.config.load_declaration`): unknown keys fail with a did-you-mean, wrong types and
out-of-range values fail, each naming the file and the full key
(``experiments/boundary.yaml: models.rl.start: must be in (0, 1] (got 1.5)``). Each class checks
itself (``RANGES``: the valid range of each numeric field); :class:`Experiment` checks what its
parts name (models, evaluations, parts, claims' args).

Schema (each key is a field below, with its docstring)::

    name: boundary                       # = the file name
    title: Does RL expand the reasoning boundary?
    papers: {yue: "Yue et al. 2025, arXiv 2504.13837"}
    config: quickstart                   # base config of every cell, + overrides
    overrides: [task.knobs={...}]
    seeds: 3                             # default seeds of seeded models (--seeds overrides)
    pretrain_seeds: 1                    # pretraining seeds of the bases declared pretrain_seeded
    minutes: 38                          # measured wall minutes of the full run on 2 cores
    parts:                               # optional: evaluations run by `--part N` (1-based), with
      - {evaluations: [t06], minutes: 35}  #   the models they need; cells are shared between parts
      - {evaluations: [t07], seeds: [0], pretrain_seeds: [0, 1]}  # only these (pretraining) seeds
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
         args: {eval: t06, model: rl, against: base, k: 1}, expect: positive}  # kind: premise (not counted)
    protocol: [...]                      # sentences for the page
    deviations: [...]                    # every deviation from the papers' protocol, and why
    notes: [...]                         # optional: what the full run showed, why a claim failed
    quick: {overrides: [...], seeds: 2, n: 8, problems: 6}  # pretrain_seeds: 1 drops the copies
    archive: {series: [step, ...]}       # optional: the series a published dynamics cell keeps
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from rlvr.config import (
    FINITE,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    SET_BY_CODE,
    ConfigError,
    Range,
    at_least,
    check,
    check_ranges,
    load_declaration,
    read_mapping,
)
from rlvr.errors import UserError
from rlvr.experiments.measures import MEASURES
from rlvr.experiments.replicates import NAMED, SEP, expand, pretrain_index, pretrain_seeded
from rlvr.experiments.verdict import CLAIM_KINDS, EXPECTS
from rlvr.tasks.registry import list_tasks

KINDS = ("base", "rl", "sft", "sft_gold", "distill", "sft_then_rl", "parallel", "rl_steps")
"""Model kinds: the pretrained base; RL with the config's recipe (the train loop); SFT on one or
all gold traces; SFT on a teacher model's verified-right samples; SFT then RL (half the budget
each); parallel averaging of the SFT and RL updates; RL for ``excursions.steps`` optimiser steps, the
budget of the others (docs/methods/excursions.md)."""
TAUGHT = ("distill", "rl")
"""The kinds that may name a teacher: SFT on its verified samples; on-policy distillation (an ``rl`` model
whose loss is ``opd``)."""
EVAL_KINDS = ("samples", "weights", "dynamics")
"""Evaluation kinds: sample and score; weight-space measures at every kept checkpoint; an RL model's
per-step training series (see :attr:`EvalSpec.kind`)."""
EXPERIMENTS_DIR = Path(__file__).resolve().parents[1] / "configs" / "experiments"


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model to train (or the pretrained base), one per seed where ``seeded``."""

    name: str
    """Its key under ``models:``."""
    kind: str
    """One of :data:`KINDS`."""
    seeded: bool = False
    """Train one model per seed (``train.seed``); otherwise one model serves every seed."""
    overrides: tuple[str, ...] = ()
    """Config overrides of this model, after the experiment's."""
    teacher: str = ""
    """A model declared before it that teaches this one: a distill model's (SFT on its verified-right
    samples; "" = the checkpoint its config's ``excursions.teacher`` names) or an ``rl`` model's with
    ``loss.name=opd`` (on-policy distillation: it scores every sampled token; ``loss.teacher`` is set to
    its checkpoint)."""
    milestones: int = 0
    """Keep this many evenly spaced checkpoints through training (RL; rl_steps, parallel, SFT and
    distill too; not sft_then_rl), for evaluations with milestones and weights evaluations (the final
    model is not counted)."""
    start: float = 1.0
    """The pretraining milestone (a fraction of the base's pretraining budget, one of
    ``pretrain.milestones``) the model starts from; a ``base`` model is that checkpoint itself."""
    base: str = "base"
    """The base model (a declared model of kind ``base``, e.g. one pretrained with another corpus mix
    or size) a trained model starts from; its architecture comes from that checkpoint."""
    first_seed: int = 0
    """A seeded model's seeds are first_seed .. first_seed + seeds - 1: a fresh replication on seeds no
    earlier run used (its claims pair seeds by position)."""
    pretrain_seeded: bool = False
    """A base model: pretrain it once per pretraining seed (the experiment's ``pretrain_seeds``,
    ``pretrain.seed``); every model built from it is then trained over pretraining x RL seeds
    (:mod:`rlvr.experiments.replicates`)."""

    RANGES: ClassVar[dict[str, Range]] = {"milestones": NON_NEGATIVE, "start": FRACTION, "first_seed": NON_NEGATIVE}

    def __post_init__(self):
        check_ranges(self, self.RANGES)
        check(self.kind in KINDS, "kind", f"unknown {self.kind!r}; use one of {', '.join(KINDS)}")
        check(self.kind in TAUGHT or not self.teacher, "teacher",
              "only a distill model or an rl model with loss.name=opd (on-policy distillation) has a teacher")
        check(self.kind != "base" or not self.seeded, "", "a base model is pretrained once; it cannot be seeded")
        check(self.kind != "base" or self.base == "base", "base",
              "a base model takes no base (give it overrides or a start)")
        check(self.seeded or not self.first_seed, "first_seed", "only a seeded model has seeds to start from")
        check(self.kind == "base" or not self.pretrain_seeded, "pretrain_seeded",
              "only a base model is pretrain_seeded (the models built from it follow)")


@dataclass(frozen=True, kw_only=True)
class EvalSpec:
    """An evaluation: a sampling protocol (or a weights / dynamics reading) run on some models."""

    name: str
    """Its key under ``evaluations:``."""
    temperature: float
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    n: int
    """Samples per problem."""
    problems: int
    """Held-out problems."""
    models: tuple[str, ...]
    """The declared models it evaluates."""
    perplexity: int = 0
    """Score this many samples per problem of each model under the base (0 = skip)."""
    milestones: bool = False
    """Also evaluate each model's kept checkpoints (entropy, pass@1, retention through training)."""
    kind: str = "samples"
    """``samples``: sample and score (:mod:`rlvr.experiments.evaluate`); ``weights``: weight-space
    measures and KL to the base at every kept checkpoint (:mod:`rlvr.experiments.weights_eval`;
    temperature, top_p, n, problems then set the KL's samples); ``dynamics``: an RL model's per-step
    training series (:mod:`rlvr.experiments.dynamics_eval`; nothing sampled)."""
    k: float = 0.05
    """``weights``: singular directions kept per matrix, a fraction of its rank in (0, 1] or a whole
    number > 1 of directions (:attr:`directions`)."""
    task: str = ""
    """``samples``: evaluate on this task instead of the experiment's (built with the pretraining
    corpus's knobs for it, ``pretrain.task_knobs``: a general-ability retention task, e.g. strings)."""
    offset: int = 0
    """``samples``: skip the first ``offset`` held-out problems (a validation block for tuning,
    disjoint from the evaluations that start at 0)."""
    gold_nll: bool = False
    """``samples``: also score each problem's first gold solution under the model (``gold_nll``: its
    mean per-token negative log-likelihood, nats; it moves where accuracy does not)."""

    RANGES: ClassVar[dict[str, Range]] = {
        "temperature": NON_NEGATIVE, "top_p": FRACTION, "n": at_least(1), "problems": at_least(1),
        "perplexity": NON_NEGATIVE, "k": POSITIVE, "offset": NON_NEGATIVE,
    }

    def __post_init__(self):
        check_ranges(self, self.RANGES)
        check(self.kind in EVAL_KINDS, "kind", f"unknown {self.kind!r}; use one of {', '.join(EVAL_KINDS)}")
        check(self.k <= 1 or float(self.k).is_integer(), "k",
              f"{self.k} is neither a fraction in (0, 1] nor an integer")
        check(not self.task or self.task in list_tasks(), "task",
              f"unknown task {self.task!r}; use one of {', '.join(list_tasks())}")
        check(self.kind == "samples" or not (self.perplexity or self.milestones or self.task or self.offset
                                             or self.gold_nll), "",
              f"a {self.kind} evaluation takes no perplexity, milestones, task, offset or gold_nll")

    @property
    def directions(self) -> int | float:
        """``k`` as :func:`rlvr.analysis.updates.resolve_k` reads it: a fraction of rank (float <= 1)
        or a number of directions (int)."""
        return int(self.k) if self.k > 1 else float(self.k)

    def same_cells(self, other: EvalSpec) -> bool:
        """Whether ``other`` shares this evaluation's cells (the same protocol; every dynamics
        evaluation reads the same runs)."""
        if self.kind == "dynamics" or other.kind == "dynamics":
            return self.kind == other.kind
        keys = ("kind", "temperature", "top_p", "n", "problems", "perplexity", "k", "task", "offset", "gold_nll")
        return all(getattr(self, k) == getattr(other, k) for k in keys)


@dataclass(frozen=True, kw_only=True)
class ClaimSpec:
    """A claim of a paper and the measure that checks it."""

    id: str
    """Short name (the page's anchor)."""
    claim: str
    """The claim in one sentence."""
    paper: str
    """Where the paper shows it (figure, table)."""
    measure: str
    """A registered measure (:data:`rlvr.experiments.measures.MEASURES`)."""
    args: dict
    """The measure's arguments (evaluations and models it reads; checked by the measure)."""
    expect: str
    """The claimed direction of the measured quantity: positive | negative."""
    bound: float = 0.0
    """What ``expect`` is judged against (0: the quantity's sign). Non-inferiority with margin m:
    ``expect: positive, bound: -m`` (reproduced when every interval's lower end is above -m, not
    reproduced when every upper end is below it, else inconclusive)."""
    kind: str = "finding"
    """``finding`` (a paper's claim, counted), ``premise`` (a manipulation check: the regime the
    findings need, e.g. "the high learning rate destabilises GRPO"; shown apart, never counted) or
    ``exploratory`` (declared after its data were seen: post hoc by declaration, whatever the
    history shows; shown with the post hoc claims, never counted)."""
    post_hoc: str = ""
    """Audited from the history: why this claim is post hoc where its cells' records cannot show it
    (they carry no time), e.g. "re-specified after a pilot run that is in its sample". A claim declared
    after its recorded cells is post hoc without it (:mod:`rlvr.experiments.provenance`)."""

    RANGES: ClassVar[dict[str, Range]] = {"bound": FINITE}

    def __post_init__(self):
        check_ranges(self, self.RANGES)
        check(self.measure in MEASURES, "measure",
              f"unknown {self.measure!r}; use one of {', '.join(sorted(MEASURES))}")
        check(self.expect in EXPECTS, "expect", f"use one of {', '.join(EXPECTS)}")
        check(self.kind in CLAIM_KINDS, "kind", f"unknown {self.kind!r}; use one of {', '.join(CLAIM_KINDS)}")


@dataclass(frozen=True, kw_only=True)
class PartSpec:
    """A part of a long experiment (``--part N``): some evaluations, with the models they need."""

    evaluations: tuple[str, ...]
    """The evaluations it runs."""
    minutes: float = 0.0
    """Measured wall minutes."""
    seeds: tuple[int, ...] = ()
    """Train and evaluate only these seeds of the seeded models (empty: every seed): positions
    0..seeds-1, counted from each model's ``first_seed``."""
    pretrain_seeds: tuple[int, ...] = ()
    """Train and evaluate only these pretraining seeds' models (the copies ``NAME@pP`` of the models built
    from a pretrain-seeded base, :mod:`rlvr.experiments.replicates`; 0: the models as declared) (empty:
    every pretraining seed)."""

    RANGES: ClassVar[dict[str, Range]] = {"minutes": NON_NEGATIVE, "seeds": NON_NEGATIVE,
                                          "pretrain_seeds": NON_NEGATIVE}

    def __post_init__(self):
        check_ranges(self, self.RANGES)


@dataclass(frozen=True, kw_only=True)
class QuickSpec:
    """The miniature form (``--quick``): it checks the machinery in minutes."""

    overrides: tuple[str, ...] = ()
    """Config overrides applied after every model's own (the miniature settings)."""
    seeds: int = 0
    """Seeds; 0 = the experiment's, at most 2."""
    pretrain_seeds: int = 0
    """Pretraining seeds; 0 = the experiment's (the copies ``NAME@pP`` of the others are left out)."""
    models: tuple[str, ...] = ()
    """The declared models the miniature keeps (empty: every one): the others, and the claims that name
    them, leave it. A kept model's base and teacher must be kept."""
    n: int = 8
    """Cap on every evaluation's samples per problem (and perplexity samples)."""
    problems: int = 6
    """Cap on every evaluation's problems."""
    minutes: float = 3.0
    """Measured wall minutes of the quick form."""

    RANGES: ClassVar[dict[str, Range]] = {"seeds": NON_NEGATIVE, "pretrain_seeds": NON_NEGATIVE, "n": at_least(1),
                                          "problems": at_least(1), "minutes": NON_NEGATIVE}

    def __post_init__(self):
        check_ranges(self, self.RANGES)


@dataclass(frozen=True, kw_only=True)
class ArchiveSpec:
    """What a published record keeps (:mod:`rlvr.experiments.archive`)."""

    series: tuple[str, ...] = ()
    """The series a published dynamics cell keeps (empty: the whole cell), so the committed record of
    a long experiment stays small; includes ``step``."""

    def __post_init__(self):
        check(not self.series or "step" in self.series, "series",
              f"{list(self.series)!r}; a list of series names that includes step")


@dataclass(frozen=True, kw_only=True)
class Experiment:
    """A declared experiment (one YAML file)."""

    name: str
    """The file's name."""
    title: str
    """The page's title."""
    papers: dict[str, str] = field(default_factory=dict)
    """Short name -> citation of each paper it reproduces."""
    config: str = "quickstart"
    """The base config of every model (a built-in name or a path)."""
    overrides: tuple[str, ...] = ()
    """Config overrides of every model."""
    seeds: int = 3
    """Seeds of the seeded models (``--seeds`` overrides)."""
    pretrain_seeds: int = 1
    """Pretraining seeds of the base models declared ``pretrain_seeded`` (claims that compare bases
    need at least 2): the replicates above the RL seeds (:mod:`rlvr.experiments.replicates`)."""
    minutes: float = 0.0
    """Measured wall minutes of the full run on 2 cores."""
    minutes_estimated: bool = False
    """True while ``minutes`` and the parts' minutes are estimates (from timed slices, before a full run
    measured them): ``rlvr reproduce`` lists them as estimates."""
    parts: tuple[PartSpec, ...] = ()
    """Its parts; empty = one part, everything. A part that names seeds (or pretraining seeds) trains and
    evaluates only those seeds of its seeded models (those pretraining seeds' copies of its pretrain-seeded
    models); an evaluation may then appear in several parts, each with other seeds; every evaluation is in
    exactly one part, once per seed and pretraining seed."""
    models: dict[str, ModelSpec]
    """The models, in dependency order; one called ``base`` of kind base is every comparison's reference."""
    evaluations: dict[str, EvalSpec]
    """The evaluations."""
    claims: tuple[ClaimSpec, ...]
    """The claims checked."""
    protocol: tuple[str, ...] = ()
    """Sentences for the page."""
    deviations: tuple[str, ...] = ()
    """Every deviation from the papers' protocol, and why."""
    notes: tuple[str, ...] = ()
    """What a full run showed beyond the verdicts, and why a claim failed (written after the run;
    the page prints them under the table they read)."""
    quick: QuickSpec = field(default_factory=QuickSpec)
    """The miniature form's settings (:meth:`quick_form`)."""
    archive: ArchiveSpec = field(default_factory=ArchiveSpec)
    """What a published record keeps."""
    last_overrides: tuple[str, ...] = field(default=(), metadata=SET_BY_CODE)
    """Applied after every model's own overrides (the quick form's miniature settings)."""
    is_quick: bool = field(default=False, metadata=SET_BY_CODE)
    """The miniature form (:meth:`quick_form`): it checks the machinery, so it trains every model
    whatever the machine (a bf16 model too where bf16 is slow)."""

    RANGES: ClassVar[dict[str, Range]] = {"seeds": at_least(1), "pretrain_seeds": at_least(1),
                                          "minutes": NON_NEGATIVE}

    def __post_init__(self):
        check_ranges(self, self.RANGES)
        if not self.is_quick:  # the miniature is cut from a checked declaration (its seeds may be fewer)
            self._check_models()
            self._check_evaluations()
            for i, claim in enumerate(self.claims):
                MEASURES[claim.measure].check(claim.args, self.evaluations, self.models, f"claims[{i}]")
            self._check_parts()
            self._check_quick_models()

    def _check_models(self) -> None:
        """Teachers and bases are declared before the models that use them; a model called base exists."""
        seen: dict[str, ModelSpec] = {}
        for name, model in self.models.items():
            check(not model.teacher or model.teacher in seen, f"models.{name}.teacher",
                  f"{model.teacher!r} is not a model declared before it")
            parent = seen.get(model.base)
            check(model.kind == "base" or model.base == "base" or (parent is not None and parent.kind == "base"),
                  f"models.{name}.base", f"{model.base!r} is not a model of kind base declared before it")
            seen[name] = model
        check("base" in self.models and self.models["base"].kind == "base", "models",
              "needs a model called base of kind base (every comparison's reference)")

    def _check_quick_models(self) -> None:
        """The miniature's models are declared, with what each is built from."""
        kept = set(self.quick.models)
        for name in self.quick.models:
            check(name in self.models, "quick.models", f"unknown model {name!r}")
            spec = self.models[name]
            for needed in (spec.base if spec.kind != "base" else "", spec.teacher):
                check(not needed or needed in kept, "quick.models", f"{name!r} needs {needed!r}; keep it too")

    def _check_evaluations(self) -> None:
        for name, ev in self.evaluations.items():
            for model in ev.models:
                check(model in self.models, f"evaluations.{name}.models", f"unknown model {model!r}")
            check(ev.kind != "dynamics" or all(self.models[m].kind == "rl" for m in ev.models),
                  f"evaluations.{name}", "a dynamics evaluation reads RL runs; its models must be rl")

    def _check_parts(self) -> None:
        """Every evaluation in exactly one part (once per seed and pretraining seed where parts name them)."""
        covered: dict[str, list[tuple[int, int]]] = {}
        for i, part in enumerate(self.parts):
            for ev in part.evaluations:
                check(ev in self.evaluations, f"parts[{i}].evaluations", f"unknown evaluation {ev!r}")
                limited = any(pretrain_seeded(self.models, m) for m in self.evaluations[ev].models)
                covered.setdefault(ev, []).extend(itertools.product(
                    part.seeds or range(self.seeds),
                    (limited and part.pretrain_seeds) or range(self.pretrain_seeds)))  # unlimited: every one
            check(all(s < self.seeds for s in part.seeds), f"parts[{i}].seeds",
                  f"{list(part.seeds)!r}; use seeds among 0..{self.seeds - 1}")
            check(all(p < self.pretrain_seeds for p in part.pretrain_seeds), f"parts[{i}].pretrain_seeds",
                  f"{list(part.pretrain_seeds)!r}; use pretraining seeds among 0..{self.pretrain_seeds - 1}")
        every = sorted(itertools.product(range(self.seeds), range(self.pretrain_seeds)))
        check(not self.parts or (set(covered) == set(self.evaluations)
                                 and all(sorted(v) == every for v in covered.values())),
              "parts", "every evaluation must be in exactly one part (or, for parts that name seeds"
              + (f", once per seed 0..{self.seeds - 1})" if self.pretrain_seeds == 1 else " or pretraining seeds, once "
                 f"per seed 0..{self.seeds - 1} and pretraining seed 0..{self.pretrain_seeds - 1})"))

    def part_evaluations(self, part: int | None) -> tuple[str, ...]:
        """The evaluations of ``part`` (1-based; None = all)."""
        if part is None:
            return tuple(self.evaluations)
        if not self.parts or not 1 <= part <= len(self.parts):
            raise UserError(f"{self.name} has {len(self.parts) or 1} part(s); --part must be 1..{len(self.parts) or 1}")
        return self.parts[part - 1].evaluations

    def part_seeds(self, part: int | None) -> tuple[int, ...]:
        """The seeds ``part`` is limited to (empty: every seed)."""
        return () if part is None else self.parts[part - 1].seeds

    def part_pretrain_seeds(self, part: int | None) -> tuple[int, ...]:
        """The pretraining seeds ``part`` is limited to (empty: every pretraining seed)."""
        return () if part is None else self.parts[part - 1].pretrain_seeds

    def quick_form(self) -> Experiment:
        """The miniature: quick overrides appended, fewer seeds (and pretraining seeds, where it caps
        them: the other pretraining seeds' copies left out), the models it names (all where it names
        none), n and problems capped."""
        q = self.quick
        pretrain = min(q.pretrain_seeds or self.pretrain_seeds, self.pretrain_seeds)
        kept = set(q.models or self.models)
        models = {k: m for k, m in self.models.items() if pretrain_index(k) < pretrain and k.partition(SEP)[0] in kept}
        evals = {k: dataclasses.replace(e, n=min(e.n, q.n), problems=min(e.problems, q.problems),
                                        perplexity=min(e.perplexity, q.n), models=tuple(m for m in e.models
                                                                                      if m in models))
                 for k, e in self.evaluations.items()}
        claims = tuple(c for c in self.claims if all(m in models for m in named_models(c.args)))
        return dataclasses.replace(self, last_overrides=q.overrides, is_quick=True, pretrain_seeds=pretrain,
                                   seeds=q.seeds or min(2, self.seeds), minutes=q.minutes, models=models,
                                   evaluations=evals, claims=claims)


def named_models(args: dict) -> list[str]:
    """The models a claim's ``args`` name (its model, against, reference, control..., arms and pairs)."""
    return [*(v for k, v in args.items() if k in NAMED), *args.get("arms", ()),
            *(m for pair in args.get("pairs", ()) for m in pair)]


def source(name: str) -> str:
    """How errors name the declaration ``name``: ``experiments/NAME.yaml``."""
    return f"{EXPERIMENTS_DIR.name}/{name}.yaml"


def parse(data: dict, name: str) -> Experiment:
    """A loaded YAML mapping as an :class:`Experiment` (ConfigError naming the file and the key)."""
    exp = load_declaration(Experiment, data, source(name))
    if exp.name != name:
        raise ConfigError(f"{source(name)}: name: {exp.name!r} differs from the file name")
    return expand(exp)


def names() -> list[str]:
    """The declared experiments (file names under rlvr/configs/experiments/)."""
    return sorted(p.stem for p in EXPERIMENTS_DIR.glob("*.yaml"))


def load(name: str) -> Experiment:
    """The declared experiment ``name`` (a did-you-mean error for an unknown one)."""
    path = EXPERIMENTS_DIR / f"{name}.yaml"
    if not path.exists():
        close = difflib.get_close_matches(name, names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; declared: {', '.join(names()) or 'none'}"
        raise UserError(f"unknown experiment {name!r}{hint}")
    return parse(read_mapping(path, "declaration"), name)
