"""Document reconstruction (docs/methods/docrecon.md; 2602.08237): long-context RLVR without labels.

A long text is cut into chunks (whole sentences, up to ``chunk_chars`` each). A problem takes
``window`` consecutive chunks, removes ``m`` of them chosen among every other chunk (so no two
gaps touch), puts numbered placeholders ``[GAP 1]``.. ``[GAP m]`` in their place and lists the
removed chunks, shuffled, as lettered options. The model answers the letters in gap order
inside ``\\boxed{}`` (``\\boxed{C, A, B}``; ``CAB`` and ``C A B`` are read too).

Reward (dense, default): 0 if the multiset of letters differs from the truth, else the
fraction of gaps filled correctly; sparse (``dense=False``): 1 only for the full order.
``problem.meta["m"]`` is the difficulty; a missing answer has status ``no_answer``.

Splits: the last ``heldout_frac`` of the chunks (at least one window) is reserved for
``heldout`` when the text holds at least two windows, so held-out windows are unseen text.
"""

from __future__ import annotations

import random
import re
from importlib import resources
from pathlib import Path

from rlvr.errors import UserError
from rlvr.rewards.math import extract_answer
from rlvr.tasks.base import Problem, Verdict
from rlvr.tasks.jsonl import check_split

_SENTENCE_RE = re.compile(r"(?<=[.!?;])\s+")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
INSTRUCTION = (
    "The passage below has {m} missing segments, marked [GAP 1] to [GAP {m}]. The missing "
    "segments are listed after the passage, shuffled and labelled with letters. Work out which "
    "segment belongs in each gap, then give the letters in gap order ([GAP 1] first), separated "
    "by commas, inside \\boxed{{}}, for example \\boxed{{C, A, B}}."
)


def default_text() -> str:
    """The packaged sample document (``rlvr/data/sample_document.txt``)."""
    return resources.files("rlvr").joinpath("data/sample_document.txt").read_text(encoding="utf-8")


def split_chunks(text: str, chunk_chars: int = 250) -> list[str]:
    """Whitespace-normalised chunks of whole sentences, each at most ``chunk_chars`` long
    (a longer sentence is a chunk on its own)."""
    sentences = [s for s in _SENTENCE_RE.split(" ".join(text.split())) if s]
    chunks: list[str] = []
    cur = ""
    for s in sentences:
        if cur and len(cur) + 1 + len(s) > chunk_chars:
            chunks.append(cur)
            cur = s
        else:
            cur = f"{cur} {s}" if cur else s
    if cur:
        chunks.append(cur)
    return chunks


def choose_gaps(window: int, m: int, rng: random.Random) -> list[int]:
    """``m`` sorted positions in ``range(window)``, all of one parity (no two adjacent)."""
    parity = rng.randrange(2)
    candidates = list(range(parity, window, 2))
    if len(candidates) < m:
        candidates = list(range(1 - parity, window, 2))
    return sorted(rng.sample(candidates, m))


def parse_letters(answer: str) -> list[str] | None:
    """Letters of an answer such as ``C, A, B`` / ``(C) (A)`` / ``CAB``; None if not letters."""
    s = re.sub(r"[\s,;()\[\]{}.\-]|\\text|\\mathrm|\band\b", " ", answer)
    tokens = s.split()
    if not tokens or not all(t.isalpha() and t.isascii() for t in tokens):
        return None
    if len(tokens) == 1:
        return list(tokens[0].upper())
    if not all(len(t) == 1 for t in tokens):
        return None
    return [t.upper() for t in tokens]


def reconstruction_reward(pred: list[str], truth: list[str], dense: bool = True) -> float:
    """Dense: 0 if the letters differ as a multiset, else the fraction in the right place.
    Sparse: 1.0 only for the exact order."""
    if not dense:
        return float(pred == truth)
    if sorted(pred) != sorted(truth):
        return 0.0
    return sum(p == t for p, t in zip(pred, truth)) / len(truth)


def build_problem(
    chunks: list[str], start: int, window: int, m: int, rng: random.Random, pid: str
) -> Problem:
    """One reconstruction problem from ``chunks[start:start+window]`` with ``m`` gaps."""
    win = chunks[start : start + window]
    gaps = choose_gaps(len(win), m, rng)
    order = list(range(m))
    rng.shuffle(order)  # option letter j shows gap order[j]
    letter_of_gap = {order[j]: _LETTERS[j] for j in range(m)}
    truth = [letter_of_gap[g] for g in range(m)]
    parts = list(win)
    for k, pos in enumerate(gaps):
        parts[pos] = f"[GAP {k + 1}]"
    options = "\n".join(f"{_LETTERS[j]}. {win[gaps[order[j]]]}" for j in range(m))
    prompt = f"{INSTRUCTION.format(m=m)}\n\nPassage:\n{' '.join(parts)}\n\nSegments:\n{options}\n\nAnswer:"
    answer = ", ".join(truth)
    return Problem(
        id=pid,
        prompt=prompt,
        answer=answer,
        solutions=(f"The segments in gap order are \\boxed{{{answer}}}.",),
        meta={"m": m, "gaps": [start + g for g in gaps], "start": start, "window": len(win)},
    )


class DocReconTask:
    """Document reconstruction as an rlvr task (see the module docstring).

    ``source``: path to a text file (default: the packaged sample document) or ``text`` given
    directly. ``m_values``: gap counts drawn uniformly per problem. ``size`` / ``heldout_size``:
    problems per split (problem i of a split is the same whatever n is asked for).
    """

    name = "docrecon"

    def __init__(
        self,
        source: str | None = None,
        text: str | None = None,
        chunk_chars: int = 250,
        window: int = 20,
        m_values: tuple[int, ...] | list[int] = (2, 4, 6, 8),
        dense: bool = True,
        seed: int = 0,
        size: int = 1000,
        heldout_size: int = 100,
        heldout_frac: float = 0.2,
    ):
        if text is None:
            if source is not None and not Path(source).is_file():
                raise UserError(f"docrecon source {source!r} not found; pass an existing text file")
            text = Path(source).read_text(encoding="utf-8") if source else default_text()
        self.m_values = tuple(int(m) for m in m_values)
        if not self.m_values or min(self.m_values) < 1 or max(self.m_values) > 26:
            raise UserError(f"bad m_values {m_values!r}; use gap counts between 1 and 26, e.g. [2, 4, 6, 8]")
        if window < 2 * max(self.m_values):
            raise UserError(
                f"window={window} chunks is too small for m={max(self.m_values)}; use window >= 2*m"
            )
        self.chunks = split_chunks(text, chunk_chars)
        if len(self.chunks) < window:
            raise UserError(
                f"document has {len(self.chunks)} chunks, fewer than window={window}; "
                "use a longer text, a smaller chunk_chars or a smaller window"
            )
        self.window, self.dense, self.seed = window, dense, seed
        self.sizes = {"train": size, "heldout": heldout_size}
        self.regions = self._regions(len(self.chunks), window, heldout_frac)

    @staticmethod
    def _regions(n: int, window: int, frac: float) -> dict[str, tuple[int, int]]:
        """Chunk ranges [lo, hi) per split; disjoint when the text holds two windows."""
        if n < 2 * window:
            return {"train": (0, n), "heldout": (0, n)}
        cut = n - max(window, round(frac * n))
        return {"train": (0, cut), "heldout": (cut, n)}

    def _make(self, split: str, i: int) -> Problem:
        rng = random.Random(f"docrecon:{self.seed}:{split}:{i}")
        lo, hi = self.regions[split]
        m = rng.choice(self.m_values)
        for _ in range(20):  # redraw if two removed chunks have the same text (ambiguous)
            start = rng.randrange(lo, hi - self.window + 1)
            p = build_problem(self.chunks, start, self.window, m, rng, f"docrecon/{split}/{i}")
            if len({self.chunks[g] for g in p.meta["gaps"]}) == m:
                break
        p.meta["split"] = split
        return p

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        check_split(split)
        count = self.sizes[split] if n is None else n
        return [self._make(split, i) for i in range(count)]

    def verify(self, completion: str, problem: Problem) -> Verdict:
        ans = extract_answer(completion) if isinstance(completion, str) else None
        if ans is None:
            return Verdict(0.0, "no_answer")
        pred = parse_letters(ans)
        if pred is None:
            return Verdict(0.0, "malformed", ans)
        truth = problem.answer.replace(" ", "").split(",")
        reward = reconstruction_reward(pred, truth, self.dense)
        return Verdict(reward, "right" if pred == truth else "wrong", ", ".join(pred))

    def equivalent(self, a: str, b: str) -> bool:
        """The same letters in the same order (``"C, A, B"`` == ``"CAB"``); else equal stripped strings."""
        la, lb = parse_letters(a), parse_letters(b)
        if la is not None and lb is not None:
            return la == lb
        return a.strip() == b.strip()
