"""What a task hands to a verifier and what the verifier says, without torch: :class:`Problem` (a prompt,
its reference answer and gold solutions), :data:`Prompt` (text or chat :data:`Messages`),
:class:`Verdict` (reward, status, extracted answer) and a task's answer equivalence.

Reading and scoring samples files (``rlvr eval --samples``) needs these and no tensor, so they live
apart from :mod:`rlvr.types` (the batches), which re-exports them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("no_answer", "malformed", "wrong", "right")

Messages = list[dict[str, str]]
"""A conversation in TRL's conversational format: ``[{"role": "system" | "user" | "assistant", "content": str}]``."""
Prompt = str | Messages
"""A task prompt: plain text, or chat messages rendered by the tokenizer's chat template
(:meth:`rlvr.model.hf.HFTokenizer.render`)."""


def is_messages(prompt: object) -> bool:
    """Whether ``prompt`` is chat messages (a list), not plain text."""
    return isinstance(prompt, list)


def check_messages(messages: object) -> Messages:
    """``messages`` as a list of ``{"role", "content"}`` dicts with string values, else ValueError/TypeError
    naming the first bad message (a non-empty list, every role and content a string, every role non-empty)."""
    if not isinstance(messages, list) or not messages:
        raise TypeError("chat messages must be a non-empty list of {'role', 'content'} objects")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise TypeError(f"message {i} is not a {{'role': str, 'content': str}} object: {str(m)[:80]}")
        if not m["role"].strip():
            raise ValueError(f"message {i} has an empty role")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def prompt_key(prompt: Prompt) -> str:
    """A string identity of a prompt (itself, or the messages as JSON): for dict keys and hashes."""
    if isinstance(prompt, str):
        return prompt
    return json.dumps(prompt, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Problem:
    """One verifiable problem.

    ``prompt`` is the exact text fed to the model, or chat messages (:data:`Messages`) that the
    tokenizer renders with its chat template; ``solutions`` are gold completions (worked traces
    ending in the task's answer format), possibly several distinct ones; ``answer`` is the reference
    final answer; ``meta`` holds anything else (a dataset's extra columns, for reward functions).
    """

    id: str
    prompt: Prompt
    answer: str
    solutions: tuple[str, ...] = ()
    meta: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Verdict:
    """A verifier's judgement of one completion."""

    reward: float
    status: str  # one of STATUSES
    answer: str | None = None  # the extracted final answer, if any

    @property
    def correct(self) -> bool:
        return self.status == "right"


def default_equivalent(a: str, b: str) -> bool:
    """The equivalence of a task that defines none: equal strings after ``str.strip``."""
    return a.strip() == b.strip()


def task_equivalence(task: Any) -> Callable[[str, str], bool]:
    """``task.equivalent`` when the task defines it, else :func:`default_equivalent`.

    Pass the result as ``equal=`` to :func:`rlvr.rewards.intrinsic.majority_vote_reward`,
    :func:`rlvr.rewards.intrinsic.proxy_diagnostics` or :func:`rlvr.rewards.scoring.compute_rewards`.
    """
    fn = getattr(task, "equivalent", None)
    return fn if callable(fn) else default_equivalent
