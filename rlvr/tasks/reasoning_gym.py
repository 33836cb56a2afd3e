"""Any reasoning-gym procedural dataset as an rlvr task (``reasoning_gym.create_dataset``).

``ReasoningGymTask("basic_arithmetic", size=1000, seed=0)`` builds the train split with
``create_dataset(name, size=size, seed=seed, **config)`` and the held-out split with
``heldout_size`` and ``heldout_seed`` (default ``seed + 1_000_000_007``: reasoning-gym seeds
entry i with ``seed + i``, so ``seed + 1`` would repeat the train entries shifted by one);
train problems whose question also occurs in held-out are dropped (count in
``overlap_removed``).

Scoring uses the dataset's own ``score_answer(answer, entry)`` after extracting the final
answer (last ``<answer>...</answer>``, else the last ``\\boxed{}``, ``####`` or "answer is")
and normalising it: whitespace stripped, surrounding ``$`` removed, and a trailing ``.0`` on
an integer dropped, so ``' 30 '`` and ``'30.0'`` get full credit when the answer is ``30``.
The best score over the raw and the normalised answer is kept. Partial credit from the
dataset's scorer is kept as the reward; status is ``right`` only for a score of 1.
"""

from __future__ import annotations

import re
from typing import Any

from rlvr.errors import UserError
from rlvr.rewards.math import extract_answer
from rlvr.tasks.base import Problem, Verdict
from rlvr.tasks.jsonl import check_split, render, to_messages

DEFAULT_TEMPLATE = "{question}\n\nGive only your final answer, inside \\boxed{}."
_ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_INT_DOT_ZERO_RE = re.compile(r"([-+]?\d+)\.0+")
HELDOUT_SEED_OFFSET = 1_000_000_007


def normalize_answer(answer: str) -> str:
    """Strip whitespace and ``$``; ``30.0`` -> ``30`` (integers written as decimals)."""
    s = answer.strip()
    if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
        s = s[1:-1].strip()
    m = _INT_DOT_ZERO_RE.fullmatch(s)
    return m.group(1) if m else s


def extract_rg_answer(completion: str) -> str | None:
    """The last ``<answer>`` tag's content, else :func:`rlvr.rewards.math.extract_answer`."""
    if not isinstance(completion, str):
        return None
    tags = _ANSWER_TAG_RE.findall(completion)
    return tags[-1] if tags else extract_answer(completion)


class ReasoningGymTask:
    """A reasoning-gym dataset as an rlvr task (see the module docstring)."""

    name = "reasoning_gym"

    def __init__(
        self,
        dataset: str = "basic_arithmetic",
        size: int = 1000,
        heldout_size: int = 200,
        seed: int = 0,
        heldout_seed: int | None = None,
        template: str = DEFAULT_TEMPLATE,
        config: dict[str, Any] | None = None,
    ):
        try:
            import reasoning_gym
        except ImportError as e:
            raise UserError("the reasoning_gym task needs reasoning-gym; pip install 'rlvr[data]'") from e
        from reasoning_gym.factory import DATASETS

        if dataset not in DATASETS:
            import difflib

            close = difflib.get_close_matches(dataset, DATASETS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see reasoning_gym.factory.DATASETS"
            raise UserError(f"unknown reasoning-gym dataset {dataset!r}; {hint}")
        self.dataset, self.template = dataset, template
        seeds = {
            "train": seed,
            "heldout": seed + HELDOUT_SEED_OFFSET if heldout_seed is None else heldout_seed,
        }
        sizes = {"train": size, "heldout": heldout_size}
        try:
            self._datasets = {
                s: reasoning_gym.create_dataset(dataset, size=sizes[s], seed=seeds[s], **(config or {}))
                for s in ("train", "heldout")
            }
        except (TypeError, ValueError, AssertionError) as e:
            raise UserError(
                f"bad reasoning-gym config for {dataset!r} ({e}); check the dataset's options"
            ) from e
        self.overlap_removed = 0
        self._cache: dict[str, list[Problem]] = {}

    def _build(self, split: str) -> list[Problem]:
        entries = list(self._datasets[split])
        if split == "train":
            held = {e["question"] for e in self._datasets["heldout"]}
            kept = [e for e in entries if e["question"] not in held]
            self.overlap_removed = len(entries) - len(kept)
            entries = kept
        return [
            Problem(
                id=f"rg/{self.dataset}/{split}/{e['metadata'].get('source_index', i)}",
                prompt=render(self.template, e["question"]),
                answer=str(e["answer"]),
                solutions=(f"\\boxed{{{e['answer']}}}",),
                meta={"split": split, "dataset": self.dataset, "entry": e},
            )
            for i, e in enumerate(entries)
        ]

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        check_split(split)
        if split not in self._cache:
            self._cache[split] = self._build(split)
        probs = self._cache[split]
        return list(probs[:n]) if n is not None else list(probs)

    def score(self, answer: str, problem: Problem) -> float:
        """The dataset's score of an extracted ``answer``: best of raw (stripped) and normalised."""
        ds = self._datasets[problem.meta.get("split", "train")]
        entry = problem.meta["entry"]
        cands = dict.fromkeys([answer.strip(), normalize_answer(answer)])
        return max(float(ds.score_answer(c, entry)) for c in cands)

    def verify(self, completion: str, problem: Problem) -> Verdict:
        ans = extract_rg_answer(completion)
        if ans is None:
            return Verdict(0.0, "no_answer")
        try:
            reward = self.score(ans, problem)
        except Exception:  # noqa: BLE001 - a dataset scorer must not crash training
            return Verdict(0.0, "malformed", ans)
        return Verdict(reward, "right" if reward >= 1.0 else "wrong", normalize_answer(ans))

    def equivalent(self, a: str, b: str) -> bool:
        """Equal after :func:`normalize_answer` (whitespace, ``$``, ``30.0`` -> ``30``)."""
        return normalize_answer(a) == normalize_answer(b)

    def messages(self, problem: Problem, system: str | None = None) -> list[dict[str, str]]:
        """The chat-messages form of ``problem.prompt``."""
        return to_messages(problem.prompt, system)
