"""The ``code_synth`` task: programming by example, graded by running the program in the sandbox.

A prompt shows three input/output pairs of a hidden integer function as a Python comment (``f(0)``
first, then two inputs from 1..9 in increasing order); the completion is the function::

    #f(0)=1 f(3)=7 f(5)=11
    def f(x):return 2*x+1

The program is run in the code sandbox (:mod:`rlvr.rewards.sandbox`) and judged by the
two-process harness (:func:`rlvr.rewards.code.score_code`) on the shown pairs and
``hidden`` more inputs (negative and larger ones too): reward 1.0 iff every test passes. A
lookup table of the shown pairs therefore fails. Each problem has several correct programs
(``2*x+1``, ``x*2+1``, ``1+2*x``, ``1+x*2``), all in ``Problem.solutions``.

Functions come from a fixed library of families graded by ``levels``: 1 = ``x+c``, ``x-c``,
``x*c``; 2 = ``a*x+b``, ``x*x+c``, ``c-x``, ``x%m``, ``x//d``; 3 = ``abs(x-c)``, ``max(x,c)``,
``min(x,c)``. A problem is kept only when every library function that matches its three shown
pairs is the same function on every input (0..9 and the hidden range -6..15), so the examples
determine the answer.
"""

from __future__ import annotations

import functools
import random
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from rlvr.errors import UserError
from rlvr.rewards.code import score_code
from rlvr.tasks.arithmetic import PooledTask, ProblemPool, check_frac
from rlvr.tasks.base import Problem, Verdict

SHOWN_INPUTS = range(0, 10)
HIDDEN_INPUTS = tuple(range(-6, 16))
_FN_RE = re.compile(r"^def f\(x\):(?:\s*return\s*)(.+)$")


def _family_table() -> dict[int, list[tuple[str, Callable[[int], int], tuple[str, ...]]]]:
    """level -> [(name, function, equivalent expression forms)]."""
    lv: dict[int, list] = {1: [], 2: [], 3: []}
    for c in range(1, 10):
        lv[1].append((f"x+{c}", lambda x, c=c: x + c, (f"x+{c}", f"{c}+x")))
        lv[1].append((f"x-{c}", lambda x, c=c: x - c, (f"x-{c}", f"-{c}+x")))
        lv[2].append((f"{c}-x", lambda x, c=c: c - x, (f"{c}-x", f"-x+{c}")))
        lv[3].append((f"abs(x-{c})", lambda x, c=c: abs(x - c), (f"abs(x-{c})", f"abs({c}-x)")))
        lv[3].append((f"max(x,{c})", lambda x, c=c: max(x, c), (f"max(x,{c})", f"max({c},x)")))
        lv[3].append((f"min(x,{c})", lambda x, c=c: min(x, c), (f"min(x,{c})", f"min({c},x)")))
    for c in range(2, 10):
        forms = (f"x*{c}", f"{c}*x") + (("x+x",) if c == 2 else ())
        lv[1].append((f"x*{c}", lambda x, c=c: x * c, forms))
    for a in range(2, 6):
        for b in range(1, 10):
            lv[2].append((f"{a}*x+{b}", lambda x, a=a, b=b: a * x + b,
                          (f"{a}*x+{b}", f"x*{a}+{b}", f"{b}+{a}*x", f"{b}+x*{a}")))
    for c in range(0, 10):
        forms = ("x*x", "x**2") if c == 0 else (f"x*x+{c}", f"x**2+{c}", f"{c}+x*x")
        lv[2].append(("x*x" if c == 0 else f"x*x+{c}", lambda x, c=c: x * x + c, forms))
    for m in range(2, 6):
        lv[2].append((f"x%{m}", lambda x, m=m: x % m, (f"x%{m}",)))
        lv[2].append((f"x//{m}", lambda x, m=m: x // m, (f"x//{m}",)))
    return lv


_FAMILIES = _family_table()


_TABLE = {name: tuple(fn(x) for x in (*SHOWN_INPUTS, *HIDDEN_INPUTS))
          for fams in _FAMILIES.values() for name, fn, _ in fams}
_COL = {x: i for i, x in enumerate((*SHOWN_INPUTS, *HIDDEN_INPUTS))}


@functools.cache
def _determined(shown: tuple[int, ...], name: str) -> bool:
    """True when every library function that matches ``name`` on ``shown`` matches it on every input."""
    mine = _TABLE[name]
    return all(row == mine for row in _TABLE.values() if all(row[_COL[x]] == mine[_COL[x]] for x in shown))


def program(expr: str) -> str:
    """The completion for expression ``expr``: ``def f(x):return <expr>``."""
    return f"def f(x):return {expr}"


class CodeSynthTask(PooledTask):
    """Programming by example: write ``f`` from three input/output pairs; graded in the sandbox.

    Knobs: ``levels`` (difficulty levels to draw from, a subset of "123", default "123"),
    ``hidden`` (hidden test inputs besides the shown ones, 1..20, default 5), ``heldout_frac``
    (default 0.15), ``pool_size`` (default 5000), ``seed`` (default 0), ``timeout_s`` (sandbox wall
    clock per program, default 5), ``workers`` (parallel sandboxes in :meth:`verify_many`, default 2).
    """

    name = "code_synth"

    def __init__(self, levels: str = "123", hidden: int = 5, heldout_frac: float = 0.15, pool_size: int = 5000,
                 seed: int = 0, timeout_s: float = 5.0, workers: int = 2) -> None:
        if not levels or set(levels) - set("123") or len(set(levels)) != len(levels):
            raise UserError(f"bad levels={levels!r}; use a non-empty subset of '123' (1 easiest)")
        if not isinstance(hidden, int) or not 1 <= hidden <= 20:
            raise UserError(f"bad hidden={hidden!r}; use an integer in 1..20")
        if not timeout_s > 0 or not isinstance(workers, int) or workers < 1:
            raise UserError(f"bad timeout_s={timeout_s!r} or workers={workers!r}; use timeout_s > 0, workers >= 1")
        check_frac("heldout_frac", heldout_frac)
        self.levels, self.hidden, self.seed, self.timeout_s, self.workers = levels, hidden, seed, timeout_s, workers
        self._fns = [(lvl, f) for lvl in sorted(levels) for f in _FAMILIES[int(lvl)]]
        self._all = [f for fams in _FAMILIES.values() for f in fams]
        self._pool = ProblemPool(self.name, seed, self._sample, heldout_frac, pool_size)
        self._lock = threading.Lock()
        self.sandbox_runs = 0

    def _sample(self, rng: random.Random) -> Problem | None:
        lvl, (name, fn, forms) = rng.choice(self._fns)
        shown = (0, *sorted(rng.sample(SHOWN_INPUTS[1:], 2)))
        if not _determined(shown, name):
            return None  # another library function fits the shown pairs
        hidden = rng.sample([x for x in HIDDEN_INPUTS if x not in shown], self.hidden)
        pairs = " ".join(f"f({x})={fn(x)}" for x in shown)
        tests = tuple(f"assert f({x}) == {fn(x)}" for x in (*shown, *hidden))
        return Problem("", f"#{pairs}\n", name, tuple(program(e) for e in forms),
                       {"level": int(lvl), "tests": tests})

    @staticmethod
    def expression(completion: str) -> str | None:
        """The returned expression of the completion's first line ``def f(x):return E`` (None if absent)."""
        line = completion.strip().split("\n", 1)[0].strip() if isinstance(completion, str) else ""
        m = _FN_RE.match(line)
        return m.group(1).strip() if m else None

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """right iff the completion's program passes every test in the sandbox.

        A completion without ``def f(x):return ...`` on its first line is ``no_answer`` and is not
        run; only the first line is run (what follows is the model running on, not the program).
        Never raises on model output; raises RuntimeError only when the sandbox itself cannot start
        (the trainer counts that as a reward failure)."""
        expr = self.expression(completion)
        if expr is None:
            return Verdict(0.0, "no_answer", None)
        with self._lock:
            self.sandbox_runs += 1
        reward, res = score_code(program(expr), list(problem.meta["tests"]), entry_points=["f"],
                                 timeout_s=self.timeout_s, cpu_s=min(2.0, self.timeout_s), memory_mb=256,
                                 max_output=4096, max_procs=8)
        if res.reason == "sandbox_error":
            raise RuntimeError(f"code sandbox failed: {res.stderr[-300:]}")
        return Verdict(reward, "right" if reward == 1.0 else "wrong", expr)

    def verify_many(self, completions: Sequence[str], problems: Sequence[Problem]) -> list[Verdict]:
        """:meth:`verify` of each pair, ``workers`` sandboxes at a time; in order."""
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(self.verify, completions, problems))

    def equivalent(self, a: str, b: str) -> bool:
        """Exact equality of the expressions with spaces removed."""
        return a.replace(" ", "") == b.replace(" ", "")

    def wrong_solution(self, problem: Problem, rng: random.Random) -> str:
        """A plausible mistake: a library function that agrees with some but not all shown pairs."""
        shown = [int(x) for x in re.findall(r"f\((-?\d+)\)", problem.prompt)]
        want = [int(y) for y in re.findall(r"=(-?\d+)", problem.prompt)]
        near = [forms for _, g, forms in self._all
                if 0 < sum(g(x) == y for x, y in zip(shown, want)) < len(shown)]
        forms = rng.choice(near) if near else ("x",)
        return program(rng.choice(forms))
