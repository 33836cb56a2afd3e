"""Per-problem tallies of samples rows: what every ``eval.json`` statistic needs, not the rows.

A file of any size is read once, row by row, into one :class:`ProblemTally` per problem (problems
in order of first appearance), from which :mod:`rlvr.eval.summary` computes pass@k, support,
crossover, maj@k, answer entropy, parsable, token entropy and the rest exactly as from the rows.
What a problem keeps (see :class:`ProblemTally`): counts, exact sums, its distinct answers with a
count and whether any of their samples is correct, and an 8-byte hash per distinct correct trace;
so memory grows with problems and distinct answers, not with samples or completion lengths.
The one statistic read through a hash is ``distinct_correct_traces``: two different traces of one
problem count as one only if their 64-bit string hashes collide (about 1e-13 for 2048 traces).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from rlvr.eval.trace_hash import trace_hash, trace_hashes

TRACE_BATCH = 64
"""Correct completions hashed together (:func:`rlvr.eval.trace_hash.trace_hashes`) while reading."""
PendingTraces = list[tuple[set[int], str]]
"""Correct completions read but not yet hashed: (the trace set of their problem, completion)."""

class ExactSum:
    """The exact sum of floats, kept as a short list of floats with that exact sum; ``value()`` is
    ``math.fsum`` of it (correctly rounded, so it equals ``math.fsum`` of all the values added, in any
    order). Every :data:`COMPRESS_AT` values the list is replaced by :func:`exact_parts` of it."""

    __slots__ = ("parts",)
    COMPRESS_AT = 1024

    def __init__(self) -> None:
        self.parts: list[float] = []

    def add(self, x: float) -> None:
        self.parts.append(x)
        if len(self.parts) > self.COMPRESS_AT:
            self.parts = exact_parts(self.parts)

    def merge(self, other: ExactSum) -> None:
        self.parts = exact_parts(self.parts + other.parts)

    def value(self) -> float:
        return math.fsum(self.parts)


def exact_parts(values: list[float]) -> list[float]:
    """A few floats whose exact sum is that of ``values``: each the correctly rounded remainder of the
    exact sum after the ones before (``math.fsum``), until the remainder is 0 (each remainder is at
    most half an ulp of the one before, so this ends within ~40 steps; usually 1 or 2)."""
    parts: list[float] = []
    while True:
        rest = math.fsum(values + [-p for p in parts])
        if rest == 0.0:
            return parts
        parts.append(rest)


class ToolTally:
    """A tool task's episodes (rows with ``tool_calls``) of one problem, tallied: ``episodes``, and the
    integer sums over them of ``tool_calls``, ``failed_calls`` and ``env_tokens`` (absent or null: 0),
    episodes with a call (``with_call``) and the correct ones with and without a call, and the policy
    turns (``turns``) summed over the episodes that record them (``turn_episodes``)."""

    __slots__ = ("episodes", "calls", "failed", "env_tokens", "with_call", "correct_with_call",
                 "correct_without_call", "turns", "turn_episodes")

    def __init__(self) -> None:
        self.episodes = self.calls = self.failed = self.env_tokens = 0
        self.with_call = self.correct_with_call = self.correct_without_call = 0
        self.turns = self.turn_episodes = 0

    def add(self, row: Mapping[str, Any], ok: bool) -> None:
        """Tally one episode (``row["tool_calls"]`` not None); ``ok``: the sample is correct."""
        calls = row["tool_calls"]
        self.episodes += 1
        self.calls += calls
        self.failed += row.get("failed_calls") or 0
        self.env_tokens += row.get("env_tokens") or 0
        if row.get("turns") is not None:
            self.turns += row["turns"]
            self.turn_episodes += 1
        if calls:
            self.with_call += 1
            self.correct_with_call += ok
        else:
            self.correct_without_call += ok

    def merge(self, other: ToolTally) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class ProblemTally:
    """One problem's samples, tallied.

    - ``n``, ``correct``: samples and correct samples; ``first_correct``: the file-order index among
      the problem's samples of its first correct one (None: none), which is all support needs.
    - ``answers``: stripped answer (None: no answer) -> [samples, any of them correct], in order of
      first appearance; ``has_answer`` / ``has_completion``: some row carries the field.
    - ``correct_traces``: hashes of the whitespace-normalised completions of the correct samples.
    - exact sums: reward (``reward_sum``, ``rewards``), ``num_tokens`` (``length_sum``, ``lengths``),
      mean_entropy x num_tokens over rows with both (``entropy_sum``, ``entropy_tokens``), and
      ``finish_reasons`` counts.
    - ``tools``: its tool-task episodes (:class:`ToolTally`), None until a row has ``tool_calls``.
    """

    __slots__ = ("n", "correct", "first_correct", "answers", "has_answer", "has_completion", "correct_traces",
                 "reward_sum", "rewards", "length_sum", "lengths", "entropy_sum", "entropy_tokens", "finish_reasons",
                 "tools")

    def __init__(self) -> None:
        self.n = self.correct = self.rewards = self.length_sum = self.lengths = self.entropy_tokens = 0
        self.first_correct: int | None = None
        self.answers: dict[str | None, list] = {}
        self.has_answer = self.has_completion = False
        self.correct_traces: set[int] = set()
        self.reward_sum, self.entropy_sum = ExactSum(), ExactSum()
        self.finish_reasons: Counter[str] = Counter()
        self.tools: ToolTally | None = None

    def add(self, row: Mapping[str, Any], pending: PendingTraces | None = None) -> None:
        """Tally one validated samples row (:func:`rlvr.eval.samples.validate_row`); correct as
        :func:`rlvr.eval.samples.is_correct` says (written out: this runs once per sample). A correct
        sample's completion is hashed now, or put on ``pending`` when given (:func:`add_pending`)."""
        get = row.get
        flag = get("correct")
        ok = bool(flag) if flag is not None else float(row["reward"]) > 0
        if ok:
            if self.first_correct is None:
                self.first_correct = self.n
            self.correct += 1
        self.n += 1
        answer = get("answer")
        if answer is not None:
            answer = answer.strip()
            self.has_answer = True
        elif "answer" in row:
            self.has_answer = True
        entry = self.answers.get(answer)
        if entry is None:
            self.answers[answer] = [1, ok]
        else:
            entry[0] += 1
            entry[1] = entry[1] or ok
        completion = get("completion")
        if completion is not None:
            self.has_completion = True
            if ok:
                if pending is None:
                    self.correct_traces.add(trace_hash(completion))
                else:
                    pending.append((self.correct_traces, completion))
        reward = get("reward")
        if reward is not None:
            self.reward_sum.add(float(reward))
            self.rewards += 1
        tokens = get("num_tokens")
        if tokens is not None:
            self.length_sum += tokens
            self.lengths += 1
            entropy = get("mean_entropy")
            if entropy is not None:
                self.entropy_sum.add(entropy * tokens)
                self.entropy_tokens += tokens
        reason = get("finish_reason")
        if reason is not None:
            self.finish_reasons[reason] += 1
        if get("tool_calls") is not None:
            if self.tools is None:
                self.tools = ToolTally()
            self.tools.add(row, ok)

    def merge(self, other: ProblemTally) -> None:
        """Add ``other``'s samples as if they followed this problem's in the file."""
        if self.first_correct is None and other.first_correct is not None:
            self.first_correct = self.n + other.first_correct
        self.n += other.n
        self.correct += other.correct
        for key, (count, ok) in other.answers.items():
            entry = self.answers.setdefault(key, [0, False])
            entry[0] += count
            entry[1] = entry[1] or ok
        self.has_answer = self.has_answer or other.has_answer
        self.has_completion = self.has_completion or other.has_completion
        self.correct_traces |= other.correct_traces
        self.reward_sum.merge(other.reward_sum)
        self.entropy_sum.merge(other.entropy_sum)
        self.rewards += other.rewards
        self.length_sum += other.length_sum
        self.lengths += other.lengths
        self.entropy_tokens += other.entropy_tokens
        self.finish_reasons.update(other.finish_reasons)
        if other.tools is not None:
            if self.tools is None:
                self.tools = ToolTally()
            self.tools.merge(other.tools)

    def answer_list(self) -> list[str | None]:
        """The problem's answers as a group in which each distinct answer appears in its order of first
        appearance (repeated as often as it was given, unparsable ones last): every vote statistic
        reads the same from it as from the file's order."""
        group: list[str | None] = [key for key, (count, _) in self.answers.items() if key is not None
                                   for _ in range(count)]
        return group + [None] * self.answers.get(None, [0])[0]


Tallies = dict[str, ProblemTally]
"""problem_id -> its tally, problems in order of first appearance."""


def tally_rows(rows: Iterable[Mapping[str, Any]], into: Tallies | None = None) -> Tallies:
    """Tally validated samples rows (added to ``into`` when given) -> problem_id -> ProblemTally."""
    tallies: Tallies = {} if into is None else into
    pending: PendingTraces = []
    for row in rows:
        tally = tallies.get(row["problem_id"])
        if tally is None:
            tally = tallies[row["problem_id"]] = ProblemTally()
        tally.add(row, pending)
        if len(pending) == TRACE_BATCH:
            add_pending(pending)
    add_pending(pending)
    return tallies


def add_pending(pending: PendingTraces) -> None:
    """Hash the pending completions together and add each hash to its problem's traces; empties ``pending``."""
    for (traces, _), hashed in zip(pending, trace_hashes([text for _, text in pending]), strict=True):
        traces.add(hashed)
    pending.clear()


def merge_tallies(parts: Iterable[Tallies]) -> Tallies:
    """The tallies of ``parts``' samples read one after the other (a problem in several holds all its
    samples, in that order); the parts are not changed."""
    pooled: Tallies = {}
    for part in parts:
        for problem, tally in part.items():
            pooled.setdefault(problem, ProblemTally()).merge(tally)
    return pooled


def restrict(tallies: Tallies, keep: set[str]) -> Tallies:
    """The tallies of the problems in ``keep``, in the same order."""
    return {problem: tally for problem, tally in tallies.items() if problem in keep}
