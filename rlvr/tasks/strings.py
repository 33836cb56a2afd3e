"""The ``strings`` task: non-math string transforms, for general-ability retention.

Prompts ``R:abcde\\n`` (reverse), ``S:dbca\\n`` (sort letters), ``U:abc\\n`` (uppercase); the gold
completion is just ``A:<result>`` (e.g. ``A:edcba``). Words are random lowercase letter strings.
"""

from __future__ import annotations

import random
import re

from rlvr.errors import UserError
from rlvr.tasks.arithmetic import MAX_ANSWER_CHARS, PooledTask, ProblemPool, check_frac, check_range, extract_answer
from rlvr.tasks.base import Problem, Verdict

OPS = {"R": "reverse", "S": "sort", "U": "upper"}
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_WORD_RE = re.compile(r"[A-Za-z]+")


def transform(op: str, word: str) -> str:
    """Apply operation letter ``op`` (R, S or U) to ``word``."""
    if op == "R":
        return word[::-1]
    if op == "S":
        return "".join(sorted(word))
    return word.upper()


class StringsTask(PooledTask):
    """Reverse / sort / uppercase a random lowercase word.

    Knobs: ``min_len``/``max_len`` (word length, 1..16, default 3..6), ``ops`` (subset of "RSU",
    default "RSU": R reverse, S sort letters, U uppercase), ``letters`` (the lowercase letters words
    are drawn from, default all 26), ``heldout_frac`` (default 0.15),
    ``pool_size`` (distinct problems drawn when n=None, default 5000), ``seed`` (default 0).
    """

    name = "strings"

    def __init__(
        self,
        min_len: int = 3,
        max_len: int = 6,
        ops: str = "RSU",
        letters: str = _LETTERS,
        heldout_frac: float = 0.15,
        pool_size: int = 5000,
        seed: int = 0,
    ) -> None:
        check_range("len", min_len, max_len, 1, 16)
        if not ops or set(ops) - set(OPS) or len(set(ops)) != len(ops):
            raise UserError(f"bad ops={ops!r}; use a non-empty subset of 'RSU' (reverse, sort, upper)")
        if not letters or set(letters) - set(_LETTERS) or len(set(letters)) != len(letters):
            raise UserError(f"bad letters={letters!r}; use distinct lowercase letters a-z, e.g. 'abcdefgh'")
        check_frac("heldout_frac", heldout_frac)
        if pool_size < 1:
            raise UserError(f"bad pool_size={pool_size!r}; use an integer >= 1")
        self.min_len, self.max_len, self.ops, self.letters, self.seed = min_len, max_len, ops, letters, seed
        self._pool = ProblemPool(self.name, seed, self._sample, heldout_frac, pool_size)

    def _sample(self, rng: random.Random) -> Problem | None:
        op = rng.choice(self.ops)
        word = "".join(rng.choice(self.letters) for _ in range(rng.randint(self.min_len, self.max_len)))
        ans = transform(op, word)
        return Problem("", f"{op}:{word}\n", ans, (f"A:{ans}",), {"op": OPS[op], "word": word})

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """right iff the last ``A:`` line equals the transformed word exactly; never raises."""
        ans = extract_answer(completion)
        if ans is None:
            return Verdict(0.0, "no_answer", None)
        if len(ans) > MAX_ANSWER_CHARS or not _WORD_RE.fullmatch(ans):
            return Verdict(0.0, "malformed", ans[:MAX_ANSWER_CHARS])
        ok = ans == problem.answer
        return Verdict(1.0 if ok else 0.0, "right" if ok else "wrong", ans)

    def equivalent(self, a: str, b: str) -> bool:
        """Exact string equality (case and letter order matter)."""
        return a == b

    def wrong_solution(self, problem: Problem, rng: random.Random) -> str:
        """A plausible mistake: two adjacent letters swapped, else one letter changed."""
        ans = list(problem.answer)
        pairs = [i for i in range(len(ans) - 1) if ans[i] != ans[i + 1]]
        if pairs and rng.random() < 0.7:
            i = rng.choice(pairs)
            ans[i], ans[i + 1] = ans[i + 1], ans[i]
        else:
            i = rng.randrange(len(ans))
            pool = self.letters if len(self.letters) > 1 else _LETTERS  # a mistake stays in the alphabet
            letters = pool.upper() if ans[i].isupper() else pool
            ans[i] = rng.choice([c for c in letters if c != ans[i]])
        return "A:" + "".join(ans)
