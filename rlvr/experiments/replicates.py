"""Pretraining seeds as a declared factor: an experiment with ``pretrain_seeds: P`` and a base model
declared ``pretrain_seeded: true`` trains its models over P pretraining seeds x its RL seeds.

The declaration is expanded once, when it is read (:func:`expand`): pretraining seed 0 is the model as
declared; for p = 1..P-1 every model built from a pretrain-seeded base (through ``base:`` and
``teacher:``) gets a copy ``NAME@pP`` whose config adds ``pretrain.seed=P`` and whose base (and
teacher) is the copy of the same pretraining seed; every evaluation that lists a model lists its
copies. A claim is then measured once per pretraining seed (:func:`claim_args`), and its estimates
carry the pretraining seed, which is the top level of the seed-level interval
(:func:`rlvr.experiments.verdict.seed_interval`).
"""

from __future__ import annotations

import dataclasses

SEP = "@p"


def replica(name: str, p: int) -> str:
    """The name of model ``name``'s copy for pretraining seed ``p`` (``p`` 0: the model itself)."""
    return name if p == 0 else f"{name}{SEP}{p}"


def pretrain_index(name: str) -> int:
    """The pretraining seed of model ``name`` (``NAME@pP`` -> P; a declared model -> 0)."""
    head, sep, tail = name.rpartition(SEP)
    return int(tail) if sep and head and tail.isdigit() else 0


def reference_base(models: dict, name: str) -> str:
    """The base that scores model ``name``'s samples (the perplexity and KL columns): the declared
    ``base``, or for a copy of pretraining seed P the base's copy ``base@pP`` where there is one, so that
    each pretraining seed's samples are scored under its own base."""
    own = replica("base", pretrain_index(name))
    return own if own in models else "base"


def pretrain_seeded(models: dict, name: str) -> bool:
    """Whether model ``name`` is (or is built from) a base declared ``pretrain_seeded``."""
    spec = models[name]
    if spec.kind == "base":
        return spec.pretrain_seeded
    return pretrain_seeded(models, spec.base) or bool(spec.teacher and pretrain_seeded(models, spec.teacher))


def expand(exp):
    """``exp`` (an :class:`~rlvr.experiments.spec.Experiment`) with a copy of every pretrain-seeded
    model per extra pretraining seed, appended after the declared models, and the evaluations listing
    the copies; ``exp`` itself when it declares one pretraining seed."""
    if exp.pretrain_seeds <= 1:
        return exp
    seeded = [n for n in exp.models if pretrain_seeded(exp.models, n)]
    models = dict(exp.models)
    for p in range(1, exp.pretrain_seeds):
        for name in seeded:
            spec = exp.models[name]
            moved = {"base": replica(spec.base, p) if spec.base in seeded else spec.base,
                     "teacher": replica(spec.teacher, p) if spec.teacher in seeded else spec.teacher}
            models[replica(name, p)] = dataclasses.replace(
                spec, name=replica(name, p), overrides=(*spec.overrides, f"pretrain.seed={p}"),
                **({} if spec.kind == "base" else moved))
    evaluations = {k: dataclasses.replace(e, models=tuple(m_ for m in e.models for m_ in
                                                          ([m] + [replica(m, p) for p in range(1, exp.pretrain_seeds)]
                                                           if m in seeded else [m])))
                   for k, e in exp.evaluations.items()}
    return dataclasses.replace(exp, models=models, evaluations=evaluations)


NAMED = ("model", "against", "reference", "control", "control_against")


def claim_args(args: dict, models: dict, p: int) -> dict | None:
    """A claim's ``args`` for pretraining seed ``p`` (its models replaced by their copies); None for
    p > 0 when it names no pretrain-seeded model (it is measured once)."""
    def move(m: str) -> str:
        return replica(m, p) if replica(m, p) in models else m

    moved = {k: (move(v) if k in NAMED else [move(m) for m in v] if k in ("arms", "runs")
                 else [[move(m) for m in pair] for pair in v] if k in ("pairs", "grid") else v)
             for k, v in args.items()}
    return moved if p == 0 or moved != args else None
