"""The ``arithmetic`` task (the default): reduce a short +/*(/-) expression step by step.

Prompt ``Q:3+4*2+1\\n``; gold completion ``4*2=8;3+8=11;11+1=12\\nA:12`` (one reduction per
``;``-separated step, then ``A:<answer>``). A problem has every distinct valid reduction order as a
solution (any reducible ``*`` pair, or a ``+``/``-`` pair not bound by a neighbouring ``*`` or ``-``),
so "SFT on one gold trace" and "SFT on all gold traces" differ.

This module also holds the helpers every synthetic task shares: :func:`extract_answer`,
:func:`split_of` (stable hash split) and :class:`ProblemPool` (seeded, deduplicated problem stream).
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
from collections.abc import Callable, Hashable
from decimal import Decimal

from rlvr.errors import UserError
from rlvr.tasks.base import Problem, Verdict

SPLITS = ("train", "heldout")
MAX_ANSWER_CHARS = 200  # longer answers are "malformed" without being parsed
_INT_RE = re.compile(r"-?[0-9]{1,18}")
_DECIMAL_RE = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


# ----------------------------------------------------------------------------- shared helpers
def extract_answer(text: str) -> str | None:
    """The text after the LAST ``A:`` up to the end of that line, stripped; None if no ``A:``.

    Linear time in ``len(text)``; never raises on ``str`` input (non-str gives None).
    """
    if not isinstance(text, str):
        return None
    i = text.rfind("A:")
    if i < 0:
        return None
    j = text.find("\n", i)
    return (text[i + 2 :] if j < 0 else text[i + 2 : j]).strip()


def digest(task_name: str, canonical: str) -> str:
    """Stable hex digest of a problem's canonical text (independent of seed and knobs)."""
    return hashlib.sha256(f"{task_name}|{canonical}".encode()).hexdigest()


def train_shard_of(canonical: str, shards: int) -> int:
    """Shard (0..shards-1) of a training problem, from a stable hash of its canonical text."""
    return int(digest("train-shard", canonical)[:12], 16) % shards


def split_of(task_name: str, canonical: str, heldout_frac: float) -> str:
    """``"heldout"`` for about ``heldout_frac`` of canonical texts, else ``"train"``; stable hash."""
    u = int(digest(task_name, canonical)[:12], 16) / float(16**12)
    return "heldout" if u < heldout_frac else "train"


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")


def check_range(name: str, lo: int, hi: int, min_lo: int, max_hi: int) -> None:
    """Validate an integer knob range ``lo..hi`` inside ``min_lo..max_hi``."""
    if not (isinstance(lo, int) and isinstance(hi, int)) or not (min_lo <= lo <= hi <= max_hi):
        raise UserError(
            f"bad {name} range {lo!r}..{hi!r}; "
            f"use integers with {min_lo} <= min_{name} <= max_{name} <= {max_hi}"
        )


def check_frac(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise UserError(f"bad {name}={value!r}; use a fraction strictly between 0 and 1, e.g. 0.15")


class ProblemPool:
    """A seeded stream of distinct problems, split by a stable hash of the prompt.

    ``sample(rng)`` draws one candidate (``Problem`` with any id, or None to reject). The stream is
    extended lazily and cached, so ``take(split, n)`` is a prefix of ``take(split, m)`` for n < m.
    """

    def __init__(
        self,
        task_name: str,
        seed: int,
        sample: Callable[[random.Random], Problem | None],
        heldout_frac: float,
        pool_size: int,
        max_misses: int = 5000,
    ) -> None:
        self.task_name, self.heldout_frac, self.pool_size = task_name, heldout_frac, pool_size
        self._sample, self._max_misses = sample, max_misses
        self._rng = random.Random(f"{task_name}:{seed}")
        self._seen: set[str] = set()
        self._by_split: dict[str, list[Problem]] = {s: [] for s in SPLITS}
        self._index: dict[str, list[int]] = {s: [] for s in SPLITS}  # stream position of each problem
        self._exhausted = False
        self._lock = threading.Lock()  # a shared pool may grow from several threads

    def _grow(self, split: str, n: int | None) -> None:
        misses = 0
        while not self._exhausted:
            if n is not None and len(self._by_split[split]) >= n:
                return
            if n is None and len(self._seen) >= self.pool_size:
                return
            p = self._sample(self._rng)
            if p is None or p.prompt in self._seen:
                misses += 1
                self._exhausted = misses >= self._max_misses
                continue
            misses = 0
            self._seen.add(p.prompt)
            s = split_of(self.task_name, p.prompt, self.heldout_frac)
            pid = f"{self.task_name}-{digest(self.task_name, p.prompt)[:12]}"
            meta = {**p.meta, "split": s, "task": self.task_name}
            self._by_split[s].append(Problem(pid, p.prompt, p.answer, p.solutions, meta))
            self._index[s].append(len(self._seen) - 1)

    def __getstate__(self) -> dict:
        """Picklable (a task travels to worker processes): everything but the lock."""
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    _shared: dict[Hashable, ProblemPool] = {}
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls, key: Hashable, task_name: str, seed: int, sample: Callable[[random.Random], Problem | None],
               heldout_frac: float, pool_size: int) -> ProblemPool:
        """The one pool of this process for ``key``, which must name everything ``sample`` depends on
        (the task's class and knobs) besides the arguments: a second task built with the same knobs
        reads the stream the first one drew (the same problems; a pool is deterministic, so who grew it
        first does not matter) instead of drawing it again (about 0.5 s for arithmetic's default pool)."""
        with cls._shared_lock:
            pool = cls._shared.get(key)
            if pool is None:
                pool = cls._shared[key] = cls(task_name, seed, sample, heldout_frac, pool_size)
            return pool

    def take(self, split: str, n: int | None) -> list[Problem]:
        """The first n problems of ``split`` (n=None: its share of the first ``pool_size``)."""
        check_split(split)
        if n is not None and (not isinstance(n, int) or n < 0):
            raise UserError(f"bad number of problems n={n!r}; use a non-negative integer or None")
        with self._lock:
            self._grow(split, n)
        have = self._by_split[split]
        if n is None:
            return [p for p, i in zip(have, self._index[split], strict=True) if i < self.pool_size]
        if len(have) < n:
            raise UserError(
                f"task {self.task_name!r} has only {len(have)} distinct {split} problems with these knobs, "
                f"{n} asked; ask for fewer or widen the difficulty knobs"
            )
        return list(have[:n])


def numeric_equivalent(a: str, b: str) -> bool:
    """Equal numbers (``"4"`` == ``"4.0"`` == ``"04"``, exact decimals), else equal stripped strings.

    Plain decimals only (no exponent), at most ``MAX_ANSWER_CHARS`` long: bounded, never raises.
    """
    a, b = a.strip(), b.strip()
    if a == b:
        return True
    if len(a) > MAX_ANSWER_CHARS or len(b) > MAX_ANSWER_CHARS:
        return False
    if _DECIMAL_RE.fullmatch(a) and _DECIMAL_RE.fullmatch(b):
        return Decimal(a) == Decimal(b)
    return False


def int_verdict(completion: str, gold: int) -> Verdict:
    """Verdict for tasks whose answer is one integer."""
    ans = extract_answer(completion)
    if ans is None:
        return Verdict(0.0, "no_answer", None)
    if len(ans) > MAX_ANSWER_CHARS or not _INT_RE.fullmatch(ans):
        return Verdict(0.0, "malformed", ans[:MAX_ANSWER_CHARS])
    ok = int(ans) == gold
    return Verdict(1.0 if ok else 0.0, "right" if ok else "wrong", ans)


# ----------------------------------------------------------------------------- arithmetic
Tokens = list  # alternating [int, str, int, str, ..., int]


def _reducible(toks: Tokens, k: int) -> bool:
    """Can the operator at odd index k be applied first without changing the value?"""
    op = toks[k]
    if op == "*":
        return True
    left = toks[k - 2] if k >= 3 else None
    right = toks[k + 2] if k + 2 < len(toks) else None
    return left in (None, "+") and right != "*"


def _apply(a: int, op: str, b: int) -> int:
    return a * b if op == "*" else a + b if op == "+" else a - b


def evaluate(toks: Tokens) -> int:
    """Value of the token list with the usual precedence (* before +/-, left to right)."""
    while len(toks) > 1:
        k = next(i for i in range(1, len(toks), 2) if _reducible(toks, i))
        toks = toks[: k - 1] + [_apply(toks[k - 1], toks[k], toks[k + 1])] + toks[k + 2 :]
    return toks[0]


def traces(toks: Tokens, max_result: int, limit: int) -> list[list[str]]:
    """Distinct valid reduction orders (leftmost-first order first), each a list of ``a*b=c`` steps.

    Orders with a negative or > ``max_result`` intermediate are dropped; at most ``limit`` returned.
    """
    out: list[list[str]] = []

    def dfs(cur: Tokens, steps: list[str]) -> None:
        if len(out) >= limit:
            return
        if len(cur) == 1:
            out.append(steps)
            return
        for k in range(1, len(cur), 2):
            if not _reducible(cur, k):
                continue
            v = _apply(cur[k - 1], cur[k], cur[k + 1])
            if 0 <= v <= max_result:
                dfs(cur[: k - 1] + [v] + cur[k + 2 :], steps + [f"{cur[k - 1]}{cur[k]}{cur[k + 1]}={v}"])

    dfs(list(toks), [])
    return out


def step_forms(step: str) -> list[str]:
    """The written forms of one reduction step: ``a+b=c`` and, for a commutative ``+``/``*`` with
    a != b, ``b+a=c`` too (the written form first)."""
    lhs, c = step.split("=")
    op = next(ch for ch in lhs[1:] if ch in "+*-")
    i = lhs.index(op, 1)
    a, b = lhs[:i], lhs[i + 1:]
    return [step] if op == "-" or a == b else [step, f"{b}{op}{a}={c}"]


def commuted_traces(orders: list[list[str]], limit: int) -> list[list[str]]:
    """Every written form of every reduction order (each step as in :func:`step_forms`), the orders'
    own forms first and in order, then the variants order by order; at most ``limit``."""
    out = {tuple(t): None for t in orders[:limit]}  # insertion-ordered set
    for t in orders:
        variants: list[list[str]] = [[]]
        for step in t:
            variants = [v + [f] for v in variants for f in step_forms(step)]
        out.update((tuple(v), None) for v in variants[1:])
        if len(out) >= limit:
            break
    return [list(t) for t in out][:limit]


def parse_prompt(prompt: str) -> Tokens:
    """``Q:3+4*2\\n`` -> [3, '+', 4, '*', 2]."""
    body = prompt.strip()[2:]
    parts = re.split(r"([+*-])", body)
    return [int(x) if i % 2 == 0 else x for i, x in enumerate(parts)]


class PooledTask:
    """Base of the synthetic tasks whose problems come from a :class:`ProblemPool` (``self._pool``,
    built by the subclass's ``__init__``)."""

    _pool: ProblemPool

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        """Deterministic problems of ``split``; the first n (its share of ``pool_size`` if None)."""
        return self._pool.take(split, n)


class ArithmeticTask:
    """Single-digit expressions with + and * (and - if ``ops`` has it), reduced step by step.

    Knobs: ``min_operands``/``max_operands`` (2..8, default 3..3), ``max_value`` (operands 1..max_value,
    default 9), ``ops`` (subset of "+*-", default "+*"), ``max_result`` (problems whose every valid
    order has an intermediate above it are rejected; orders exceeding it are dropped; default 99),
    ``max_solutions`` (cap on distinct traces per problem, default 24), ``commute`` (also write each
    ``+``/``*`` step with its operands swapped, ``4*2=8`` or ``2*4=8``: many more gold traces per problem,
    default False), ``heldout_frac`` (default 0.15), ``pool_size`` (distinct problems drawn when n=None,
    default 5000; the default knobs allow only 2,605 distinct problems: 2,247 train, 358 held-out),
    ``seed`` (default 0), ``train_shards`` / ``train_shard`` (train on one of that many disjoint hash
    shards of the train split; default 1 / 0: all of it).
    """

    name = "arithmetic"

    def __init__(
        self,
        min_operands: int = 3,
        max_operands: int = 3,
        max_value: int = 9,
        ops: str = "+*",
        max_result: int = 99,
        max_solutions: int = 24,
        heldout_frac: float = 0.15,
        pool_size: int = 5000,
        seed: int = 0,
        commute: bool = False,
        train_shards: int = 1,
        train_shard: int = 0,
    ) -> None:
        check_range("operands", min_operands, max_operands, 2, 8)
        if not isinstance(commute, bool):
            raise UserError(f"commute={commute!r}; use true or false")
        if not (isinstance(train_shards, int) and isinstance(train_shard, int) and 0 <= train_shard < train_shards):
            raise UserError(f"bad train_shard={train_shard!r} of train_shards={train_shards!r}; "
                            "use integers with 0 <= train_shard < train_shards")
        self.train_shards, self.train_shard = train_shards, train_shard
        check_range("value", 1, max_value, 1, 9)
        if not ops or set(ops) - set("+*-") or len(set(ops)) != len(ops):
            raise UserError(f"bad ops={ops!r}; use a non-empty subset of '+*-', e.g. '+*'")
        check_frac("heldout_frac", heldout_frac)
        if max_result < 1 or max_solutions < 1 or pool_size < 1:
            raise UserError("max_result, max_solutions and pool_size must be >= 1; raise the offending knob")
        self.min_operands, self.max_operands = min_operands, max_operands
        self.max_value, self.ops = max_value, ops
        self.max_result, self.max_solutions, self.seed = max_result, max_solutions, seed
        self.commute = commute
        key = (type(self).__module__, type(self).__qualname__, seed, min_operands, max_operands, max_value, ops,
               max_result, max_solutions, heldout_frac, pool_size, commute)
        self._pool = ProblemPool.shared(key, self.name, seed, self._sample, heldout_frac, pool_size)

    def _sample(self, rng: random.Random) -> Problem | None:
        n = rng.randint(self.min_operands, self.max_operands)
        toks: Tokens = [rng.randint(1, self.max_value)]
        for _ in range(n - 1):
            toks += [rng.choice(self.ops), rng.randint(1, self.max_value)]
        ts = traces(toks, self.max_result, self.max_solutions)
        if not ts:
            return None
        if self.commute:
            ts = commuted_traces(ts, self.max_solutions)
        ans = str(evaluate(toks))
        expr = "".join(str(t) for t in toks)
        sols = tuple(";".join(t) + f"\nA:{ans}" for t in ts)
        return Problem("", f"Q:{expr}\n", ans, sols, {"operands": n})

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        """Deterministic problems of ``split``; the first n (its share of ``pool_size`` if None).
        With ``train_shards`` > 1 the train split keeps only the problems whose prompt hashes to
        ``train_shard`` (disjoint training sets of one distribution; held-out problems unchanged)."""
        if split != "train" or self.train_shards == 1:
            return self._pool.take(split, n)
        mine = [p for p in self._pool.take(split, None)
                if train_shard_of(p.prompt, self.train_shards) == self.train_shard]
        if n is not None and len(mine) < n:
            raise UserError(f"train shard {self.train_shard} of {self.train_shards} has only {len(mine)} problems "
                            f"within pool_size, {n} asked; ask for fewer or raise pool_size")
        return mine if n is None else mine[:n]

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """right iff the last ``A:`` line is the integer value; never raises."""
        return int_verdict(completion, int(problem.answer))

    def equivalent(self, a: str, b: str) -> bool:
        """Answers are numbers: equal values (``"4"`` == ``"4.0"``), else equal stripped strings."""
        return numeric_equivalent(a, b)

    def wrong_solution(self, problem: Problem, rng: random.Random) -> str:
        """A well-formed trace with one step off by 1..2, propagated; or a wrong final answer only."""
        toks = parse_prompt(problem.prompt)
        gold = int(problem.answer)
        if rng.random() < 0.25 or len(toks) < 3:
            delta = rng.choice([d for d in (-2, -1, 1, 2) if gold + d >= 0])
            return problem.solutions[0].rsplit("A:", 1)[0] + f"A:{gold + delta}"
        err_step = rng.randrange((len(toks) - 1) // 2)
        steps, cur = [], list(toks)
        while len(cur) > 1:
            k = next(i for i in range(1, len(cur), 2) if _reducible(cur, i))
            v = _apply(cur[k - 1], cur[k], cur[k + 1])
            if len(steps) == err_step:
                v += rng.choice([d for d in (-2, -1, 1, 2) if v + d >= 1])
            steps.append(f"{cur[k - 1]}{cur[k]}{cur[k + 1]}={v}")
            cur = cur[: k - 1] + [v] + cur[k + 2 :]
        wrong = cur[0] if cur[0] != gold else gold + 1
        return ";".join(steps) + f"\nA:{wrong}"
