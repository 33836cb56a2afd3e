"""The ``countdown`` task: reach a target by combining the given numbers.

Prompt ``N:3 5 7 T:22\\n``; gold completion ``5*3=15;15+7=22\\nA:5*3+7``. The answer is an expression
with + - * / and parentheses that uses each given number AT MOST ONCE (a sub-multiset of the list;
not every number has to be used). Division must be exact. Only the ``A:`` line is verified (the steps
are not checked), with a bounded recursive-descent parser over exact fractions; no ``eval``.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from fractions import Fraction

from rlvr.errors import UserError
from rlvr.tasks.arithmetic import PooledTask, ProblemPool, check_frac, check_range, extract_answer, numeric_equivalent
from rlvr.tasks.base import Problem, Verdict

MAX_EXPR_CHARS = 100  # longer answers are malformed
MAX_DEPTH = 20  # deeper parenthesis nesting is malformed
_TOKEN_RE = re.compile(r"[ ]*([0-9]{1,6}|[-+*/()])")
Item = tuple[int, str, int]  # (value, expression, precedence: 3 atom, 2 * /, 1 + -)


class _Invalid(Exception):
    """Answer does not parse (or divides by zero)."""


class _Inexact(Exception):
    """A division with a remainder: parses, but breaks the rules."""


# ----------------------------------------------------------------------------- safe evaluation
def _tokenize(text: str) -> list[str]:
    toks, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise _Invalid(text[pos:])
        toks.append(m.group(1))
        pos = m.end()
    return toks


class _Parser:
    """expr := term (('+'|'-') term)*; term := atom (('*'|'/') atom)*; atom := INT | '(' expr ')'."""

    def __init__(self, toks: list[str]) -> None:
        self.toks, self.i, self.numbers = toks, 0, []

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def expr(self, depth: int) -> Fraction:
        v = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.toks[self.i]
            self.i += 1
            w = self.term(depth)
            v = v + w if op == "+" else v - w
        return v

    def term(self, depth: int) -> Fraction:
        v = self.atom(depth)
        while self.peek() in ("*", "/"):
            op = self.toks[self.i]
            self.i += 1
            w = self.atom(depth)
            if op == "*":
                v = v * w
            elif w == 0:
                raise _Invalid("division by zero")
            elif (v / w).denominator != 1:
                raise _Inexact()
            else:
                v = v / w
        return v

    def atom(self, depth: int) -> Fraction:
        if depth > MAX_DEPTH:
            raise _Invalid("too deep")
        t = self.peek()
        self.i += 1
        if t == "(":
            v = self.expr(depth + 1)
            if self.peek() != ")":
                raise _Invalid("unbalanced")
            self.i += 1
            return v
        if t is not None and t[0] in "0123456789":
            self.numbers.append(int(t))
            return Fraction(int(t))
        raise _Invalid(f"unexpected {t!r}")


def evaluate(expr: str) -> tuple[Fraction, list[int]]:
    """Value of a countdown expression and the numbers it uses.

    Raises ``ValueError`` (malformed: bad syntax, > MAX_EXPR_CHARS, nesting > MAX_DEPTH, division by
    zero) or ``ArithmeticError`` (a division with a remainder).
    """
    if len(expr) > MAX_EXPR_CHARS:
        raise ValueError("too long")
    try:
        p = _Parser(_tokenize(expr))
        v = p.expr(0)
        if p.i != len(p.toks):
            raise _Invalid("trailing tokens")
    except _Invalid as e:
        raise ValueError(str(e)) from None
    except _Inexact:
        raise ArithmeticError("inexact division") from None
    return v, p.numbers


# ----------------------------------------------------------------------------- solving
def combine(a: Item, b: Item, op: str) -> Item | None:
    """``a op b`` as an item, or None if not allowed (non-positive, inexact, trivial *1 or /1)."""
    (va, ea, pa), (vb, eb, pb) = a, b
    if op == "+":
        return va + vb, f"{ea}+{eb}", 1
    if op == "-":
        return (va - vb, f"{ea}-{eb if pb > 1 else f'({eb})'}", 1) if va > vb else None
    if op == "*":
        if va == 1 or vb == 1:
            return None
        return va * vb, f"{ea if pa > 1 else f'({ea})'}*{eb if pb > 1 else f'({eb})'}", 2
    if vb > 1 and va % vb == 0:
        return va // vb, f"{ea if pa > 1 else f'({ea})'}/{eb if pb > 2 else f'({eb})'}", 2
    return None


def _moves(items: list[Item], ops: str):
    """Every allowed (i, j, op, result) step; larger operand first."""
    for i in range(len(items)):
        for j in range(len(items)):
            if i == j or items[i][0] < items[j][0] or (items[i][0] == items[j][0] and i > j):
                continue
            for op in ops:
                r = combine(items[i], items[j], op)
                if r is not None:
                    yield i, j, op, r


def solve(numbers: list[int], target: int, ops: str, max_nodes: int = 50000) -> list[tuple[str, str]]:
    """All (trace, expression) solutions found, one per distinct expression, shortest first."""
    found: dict[str, str] = {}
    nodes = 0

    def dfs(items: list[Item], steps: list[str]) -> None:
        nonlocal nodes
        for i, j, op, r in _moves(items, ops):
            nodes += 1
            if nodes > max_nodes:
                return
            step = f"{items[i][0]}{op}{items[j][0]}={r[0]}"
            if r[0] == target:
                found.setdefault(r[1], ";".join(steps + [step]))
                continue
            rest = [x for k, x in enumerate(items) if k not in (i, j)]
            if rest:
                dfs(rest + [r], steps + [step])

    dfs([(n, str(n), 3) for n in numbers], [])
    return sorted(((t, e) for e, t in found.items()), key=lambda te: (te[0].count(";"), len(te[1]), te))


def _random_path(items: list[Item], ops: str, rng: random.Random, n_steps: int) -> tuple[list[str], Item]:
    steps: list[str] = []
    while len(steps) < n_steps and len(items) > 1:
        moves = list(_moves(items, ops))
        if not moves:
            break
        i, j, op, r = rng.choice(moves)
        steps.append(f"{items[i][0]}{op}{items[j][0]}={r[0]}")
        items = [x for k, x in enumerate(items) if k not in (i, j)] + [r]
    return steps, items[-1]


class CountdownTask(PooledTask):
    """Reach ``T`` from the listed numbers with + - * (and exact /), each number at most once.

    Knobs: ``min_numbers``/``max_numbers`` (2..5, default 3..3), ``max_value`` (numbers 1..max_value,
    default 9), ``min_target``/``max_target`` (default 10..99; targets equal to a given number are
    rejected), ``ops`` (subset of "+-*/", default "+-*/"), ``max_solutions`` (default 8),
    ``heldout_frac`` (default 0.15), ``pool_size`` (default 3000), ``seed`` (default 0).
    """

    name = "countdown"

    def __init__(
        self,
        min_numbers: int = 3,
        max_numbers: int = 3,
        max_value: int = 9,
        min_target: int = 10,
        max_target: int = 99,
        ops: str = "+-*/",
        max_solutions: int = 8,
        heldout_frac: float = 0.15,
        pool_size: int = 3000,
        seed: int = 0,
    ) -> None:
        check_range("numbers", min_numbers, max_numbers, 2, 5)
        check_range("value", 1, max_value, 1, 99)
        check_range("target", min_target, max_target, 1, 9999)
        if not ops or set(ops) - set("+-*/") or len(set(ops)) != len(ops):
            raise UserError(f"bad ops={ops!r}; use a non-empty subset of '+-*/'")
        check_frac("heldout_frac", heldout_frac)
        if max_solutions < 1 or pool_size < 1:
            raise UserError("max_solutions and pool_size must be >= 1; raise the offending knob")
        self.min_numbers, self.max_numbers, self.max_value = min_numbers, max_numbers, max_value
        self.min_target, self.max_target, self.ops = min_target, max_target, ops
        self.max_solutions, self.seed = max_solutions, seed
        self._pool = ProblemPool(self.name, seed, self._sample, heldout_frac, pool_size)

    def _sample(self, rng: random.Random) -> Problem | None:
        k = rng.randint(self.min_numbers, self.max_numbers)
        numbers = [rng.randint(1, self.max_value) for _ in range(k)]
        _, (target, _, _) = _random_path([(n, str(n), 3) for n in numbers], self.ops, rng, len(numbers) - 1)
        if not self.min_target <= target <= self.max_target or target in numbers:
            return None
        sols = solve(numbers, target, self.ops)[: self.max_solutions]
        if not sols:
            return None
        prompt = f"N:{' '.join(map(str, numbers))} T:{target}\n"
        return Problem("", prompt, str(target), tuple(f"{t}\nA:{e}" for t, e in sols), {"numbers": numbers})

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """right iff the last ``A:`` expression is valid, uses given numbers at most once, hits T."""
        ans = extract_answer(completion)
        if ans is None:
            return Verdict(0.0, "no_answer", None)
        short = ans[:MAX_EXPR_CHARS]
        try:
            value, used = evaluate(ans)
        except ValueError:
            return Verdict(0.0, "malformed", short)
        except ArithmeticError:
            return Verdict(0.0, "wrong", short)
        numbers = Counter(problem.meta.get("numbers") or _numbers_of(problem.prompt))
        ok = not (Counter(used) - numbers) and value == int(problem.answer)
        return Verdict(1.0 if ok else 0.0, "right" if ok else "wrong", short)

    def equivalent(self, a: str, b: str) -> bool:
        """Same value (exact rationals): ``"5*3+7"`` == ``"7+5*3"`` == ``"22"``; else equal stripped strings.

        The rule on which numbers an expression may use belongs to the problem (the verifier), not to
        the equivalence. Expressions that do not parse compare as strings. Bounded, never raises.
        """
        a, b = a.strip(), b.strip()
        if a == b:
            return True
        try:
            return evaluate(a)[0] == evaluate(b)[0]
        except (ValueError, ArithmeticError):
            return numeric_equivalent(a, b)

    def wrong_solution(self, problem: Problem, rng: random.Random) -> str:
        """A valid-looking trace whose expression misses the target (the nearest of 20 random tries)."""
        numbers, target = _numbers_of(problem.prompt), int(problem.answer)
        best: tuple[int, list[str], str] | None = None
        for _ in range(20):
            items = [(n, str(n), 3) for n in numbers]
            steps, (v, e, _) = _random_path(items, self.ops, rng, rng.randint(1, len(numbers) - 1))
            if steps and v != target and (best is None or abs(v - target) < best[0]):
                best = (abs(v - target), steps, e)
        if best is None:  # nothing but the target reachable: misuse a number instead
            return f"{target}+{numbers[0]}={target + numbers[0]}\nA:{target}+{numbers[0]}"
        return ";".join(best[1]) + f"\nA:{best[2]}"


def _numbers_of(prompt: str) -> list[int]:
    """``N:3 5 7 T:22\\n`` -> [3, 5, 7]."""
    body = prompt.split("T:", 1)[0].strip()[2:]
    return [int(x) for x in body.split()]
