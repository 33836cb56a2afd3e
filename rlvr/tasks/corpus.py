"""Pretraining corpus for the tiny character-level model, built from the synthetic tasks.

A document is ``prompt + completion`` of a task problem (tasks mixed by weight), or a short
English-like sentence from a bundled generator (no downloads). A ``wrong_frac`` share of task
documents carries a plausible mistake (the task's ``wrong_solution``), and a ``truncated_frac``
share is cut at a random point inside the completion, so that the base model is imperfect in the
ways RL has to fix. Everything is ASCII and deterministic per seed.
"""

from __future__ import annotations

import random

from rlvr.errors import UserError
from rlvr.tasks.base import Problem, Task
from rlvr.tasks.registry import get_task

_DET = ["the", "a", "my", "one", "that", "this"]
_ADJ = ["red", "big", "old", "small", "quiet", "happy", "green", "cold", "fast", "kind", "dark", "warm"]
_NOUN = ["cat", "dog", "bird", "tree", "boy", "girl", "ship", "book", "fish", "king", "town", "river", "door"]
_VERB = ["sees", "finds", "likes", "holds", "helps", "paints", "follows", "reads", "moves", "calls"]
_VERB_I = ["sleeps", "runs", "sings", "waits", "smiles", "falls", "grows", "jumps"]
_ADV = ["today", "again", "slowly", "at night", "in the rain", "by the sea", "all day", "now"]


def sentence(rng: random.Random) -> str:
    """One short English-like sentence (ASCII, <= 60 chars), e.g. ``The old cat sees a red bird.``"""

    def phrase() -> str:
        adj = f"{rng.choice(_ADJ)} " if rng.random() < 0.5 else ""
        return f"{rng.choice(_DET)} {adj}{rng.choice(_NOUN)}"

    r = rng.random()
    if r < 0.45:
        s = f"{phrase()} {rng.choice(_VERB)} {phrase()}"
    elif r < 0.8:
        s = f"{phrase()} {rng.choice(_VERB_I)} {rng.choice(_ADV)}"
    else:
        s = f"{phrase()} is {rng.choice(_ADJ)}"
    return s[0].upper() + s[1:] + ("?" if rng.random() < 0.1 else ".")


def text_document(rng: random.Random) -> str:
    """One or two sentences joined by a space."""
    return sentence(rng) if rng.random() < 0.6 else f"{sentence(rng)} {sentence(rng)}"


def _check(tasks: list[tuple[Task, float]], n_docs: int, fracs: dict[str, float]) -> None:
    if not isinstance(n_docs, int) or n_docs < 0:
        raise UserError(f"bad n_docs={n_docs!r}; use a non-negative integer")
    for name, f in fracs.items():
        if not isinstance(f, (int, float)) or not 0.0 <= f <= 1.0:
            raise UserError(f"bad {name}={f!r}; use a fraction between 0 and 1")
    if not tasks and fracs["text_frac"] < 1.0:
        raise UserError("no tasks for the corpus; pass [(task, weight), ...] or text_frac=1.0")
    for task, w in tasks:
        if not isinstance(w, (int, float)) or w <= 0:
            raise UserError(
                f"bad weight {w!r} for task {getattr(task, 'name', task)!r}; use a positive number"
            )


def task_document(
    task: Task, problem: Problem, rng: random.Random, wrong_frac: float, truncated_frac: float
) -> str:
    """``prompt + completion``: a gold solution, or (``wrong_frac``) a wrong one; maybe truncated."""
    if rng.random() < wrong_frac and hasattr(task, "wrong_solution"):
        completion = task.wrong_solution(problem, rng)
    else:
        completion = rng.choice(problem.solutions) if problem.solutions else f"A:{problem.answer}"
    if rng.random() < truncated_frac and len(completion) > 1:
        completion = completion[: rng.randint(1, len(completion) - 1)]
    return problem.prompt + completion


def build_corpus(
    tasks: list[tuple[Task, float]],
    n_docs: int,
    wrong_frac: float,
    truncated_frac: float,
    seed: int,
    split: str = "train",
    text_frac: float = 0.1,
) -> list[str]:
    """``n_docs`` documents: a ``text_frac`` share of English-like sentences, the rest task documents.

    ``tasks`` are (task, weight) pairs; problems come from ``task.problems(split)`` (sampled with
    replacement). ``wrong_frac`` / ``truncated_frac`` are the expected shares of task documents with
    a wrong solution / cut at a random point inside the completion (drawn independently).
    Deterministic per ``seed`` (given the tasks' own seeds and knobs).
    """
    _check(
        tasks, n_docs, {"wrong_frac": wrong_frac, "truncated_frac": truncated_frac, "text_frac": text_frac}
    )
    rng = random.Random(f"corpus:{seed}")
    pools = [task.problems(split) for task, _ in tasks]
    for (task, _), pool in zip(tasks, pools, strict=True):
        if not pool:
            raise UserError(
                f"task {task.name!r} has no {split} problems; widen its knobs or use another split"
            )
    weights = [w for _, w in tasks]
    docs: list[str] = []
    for _ in range(n_docs):
        if not tasks or rng.random() < text_frac:
            docs.append(text_document(rng))
            continue
        k = rng.choices(range(len(tasks)), weights=weights)[0]
        docs.append(task_document(tasks[k][0], rng.choice(pools[k]), rng, wrong_frac, truncated_frac))
    return docs


def default_tasks(seed: int = 0) -> list[tuple[Task, float]]:
    """The default pretraining mix: arithmetic 0.5, countdown 0.25, strings 0.25 (default knobs)."""
    return [
        (get_task("arithmetic", seed=seed), 0.5),
        (get_task("countdown", seed=seed), 0.25),
        (get_task("strings", seed=seed), 0.25),
    ]
