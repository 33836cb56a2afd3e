"""General-ability retention: how well a model still does the non-target tasks it learnt in
pretraining (``task.retention_tasks``), never trained on after it.

One measure for every command (``rlvr run``; ``rlvr excursions`` and ``rlvr reproduce`` sample it greedily
through the experiment framework, :mod:`rlvr.experiments.evaluate`): the **greedy accuracy** on the
first N held-out problems of each retention task, with a 95% bootstrap interval over problems, and
the per-token perplexity of the gold answers (which moves even where accuracy does not). A
retention task is built with the knobs the pretraining corpus used for it (``pretrain.task_knobs``),
so it measures the skill the base was taught. Base vs trained is a paired comparison on the same
problems: :func:`retention_delta`. See docs/methods/testbed.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlvr.config import RunConfig, SamplingConfig
from rlvr.eval.generate import perplexity_of_rows, samples_for
from rlvr.eval.passk import bootstrap_ci
from rlvr.tasks.environment import written_env_spans
from rlvr.tasks.registry import get_task

GREEDY_TOKENS = 24  # a retention answer is short (``A:<word>``); longer output is wrong anyway


def retention_task(cfg: RunConfig, name: str):
    """The retention task ``name`` with the corpus's knobs for it (``pretrain.task_knobs[name]``)."""
    return get_task(name, **cfg.pretrain.task_knobs.get(name, {}))


def retention_eval(model, tok, task, problems: Sequence, seed: int = 0) -> dict:
    """Greedy accuracy of ``model`` on ``problems`` of ``task``.

    Returns {"accuracy", "ci" ([lo, hi], 95% bootstrap over problems), "problems", "correct"
    ((P,) 0/1 per problem, for the paired delta), "gold_perplexity" (mean per-token perplexity of
    the first gold solution)}.
    """
    greedy = SamplingConfig(temperature=0.0, max_new_tokens=GREEDY_TOKENS)
    rows = samples_for(model, tok, task, problems, 1, greedy, seed)
    correct = [int(r["correct"]) for r in rows]
    lo, hi = bootstrap_ci(correct, seed=seed) if correct else (0.0, 0.0)
    gold = [{"prompt": p.prompt, "completion": p.solutions[0] if p.solutions else p.answer} for p in problems]
    for row, problem in zip(gold, problems):  # a tool task's gold episode: its tool outputs are not scored
        row["env_spans"] = written_env_spans(task, problem, row["completion"])
    return {"accuracy": sum(correct) / max(1, len(correct)), "ci": [float(lo), float(hi)],
            "problems": len(correct), "correct": correct,
            "gold_perplexity": perplexity_of_rows(model, tok, gold).get("mean")}


def retention(model, tok, cfg: RunConfig, n_problems: int, seed: int = 0) -> dict:
    """{task name: :func:`retention_eval`} over ``task.retention_tasks``."""
    out = {}
    for name in cfg.task.retention_tasks:
        task = retention_task(cfg, name)
        out[name] = retention_eval(model, tok, task, task.problems("heldout", n_problems), seed)
    return out


def retention_delta(base: dict, trained: dict, seed: int = 0) -> dict:
    """Trained minus base accuracy with its 95% paired bootstrap interval over the same problems
    (``base``/``trained``: :func:`retention_eval` results). {"delta", "ci"}."""
    b, t = np.asarray(base["correct"], float), np.asarray(trained["correct"], float)
    if b.shape != t.shape or b.size == 0:
        raise ValueError(f"retention delta needs the same problems on both sides ({b.size} vs {t.size})")
    lo, hi = bootstrap_ci(t - b, seed=seed)
    return {"delta": float((t - b).mean()), "ci": [float(lo), float(hi)]}
