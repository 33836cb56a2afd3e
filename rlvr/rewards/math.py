"""Final-answer extraction and math equivalence (math-verify), plus numeric and exact checks.

Extraction order (first rule that matches wins): the last ``\\boxed{...}`` (or ``\\fbox``),
nested braces included; the last ``#### x`` line (GSM8K); the last "answer is x".

Equivalence goes through math-verify (``parse``/``verify``) with its own SIGALRM timeout
switched off (it only works in the main thread). Calls here are therefore unbounded; bound
them with :mod:`rlvr.rewards.pool` (``score_batch``/``verify_batch`` in the registry do), except
:func:`math_equivalent` (two answers, for majority vote and label accuracy), which bounds itself.

Verifiers return a :class:`~rlvr.tasks.base.Verdict`: ``no_answer`` when nothing could be
extracted, ``malformed`` when the extracted answer does not parse, else ``wrong``/``right``.
They never raise on model output.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation, localcontext

import math_verify.grader
import math_verify.parser
from math_verify import parse, verify

from rlvr.rewards.pool import get_pool
from rlvr.types import Verdict

_BOX_CMDS = ("\\boxed", "\\fbox")
_MAX_BOX_TRIES = 8  # unclosed boxes tried from the end before giving up (keeps extraction linear)
MAX_ANSWER_CHARS = 1000  # longer extracted answers are "malformed" without being parsed
_HASH_RE = re.compile(r"####\s*([^\n]*)")
_ANSWER_IS_RE = re.compile(r"answer\s+is\s*:?\s*(.+?)(?:\.(?:\s|$)|\n|$)", re.IGNORECASE)
_NUMBER_RE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}(?:\D|$))")
_TEXT_WRAP_RE = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_BASE_RE = re.compile(r"([0-9A-Za-z]+)_\{?(\d+)\}?")  # 52_8, 4210_{5}: a numeral in base 8, 5


# ----------------------------------------------------------------------------- extraction
def _match_brace(text: str, open_idx: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``open_idx`` (None when unbalanced)."""
    depth = 0
    i = open_idx
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2  # skip escaped char such as \{ or \}
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}``/``\\fbox{...}`` (or ``\\boxed x``)."""
    starts = [(text.rfind(cmd), cmd) for cmd in _BOX_CMDS]
    pos, cmd = max(starts)
    for _ in range(_MAX_BOX_TRIES):
        if pos < 0:
            break
        j = pos + len(cmd)
        while j < len(text) and text[j] == " ":
            j += 1
        if j < len(text) and text[j] == "{":
            end = _match_brace(text, j)
            if end is not None:
                return text[j + 1 : end].strip()
        elif j > pos + len(cmd) and j < len(text):  # "\boxed 5": up to whitespace or $
            m = re.match(r"[^\s$]+", text[j:])
            if m:
                return m.group(0)
        # malformed (e.g. truncated) box: try an earlier one
        starts = [(text.rfind(c, 0, pos), c) for c in _BOX_CMDS]
        pos, cmd = max(starts)
    return None


def _strip_answer(ans: str) -> str:
    ans = ans.strip()
    if len(ans) >= 2 and ans[0] == "$" and ans[-1] == "$":
        ans = ans.strip("$").strip()
    return ans.rstrip(".").strip()


def extract_answer(text: str) -> str | None:
    """The final answer in ``text`` (boxed, then ``####``, then "answer is"), or None."""
    if not isinstance(text, str):
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed or None
    hashes = _HASH_RE.findall(text)
    if hashes and hashes[-1].strip():
        return _strip_answer(hashes[-1])
    said = _ANSWER_IS_RE.findall(text)
    if said and _strip_answer(said[-1]):
        return _strip_answer(said[-1])
    return None


# ----------------------------------------------------------------------------- numeric
def normalize_number(s: str) -> str | None:
    """Canonical decimal string of a plain number, or None when ``s`` is not one.

    Handles dollar signs (``$``, ``\\$``), thousands commas, percent (``%``, ``\\%``),
    ``\\text{...}`` wrappers, a trailing period and trailing zeros (``18.0`` -> ``18``).
    """
    t = _TEXT_WRAP_RE.sub(r"\1", s.strip())
    for junk in ("\\$", "$", "\\%", "%", "\\!", "\\,", "\\ ", "{,}", " "):
        t = t.replace(junk, "")
    t = _THOUSANDS_RE.sub("", t).rstrip(".")
    if not t or _NUMBER_RE.fullmatch(t) is None:
        return None
    try:
        d = Decimal(t)
    except InvalidOperation:
        return None
    if not d.is_finite() or abs(d.adjusted()) > MAX_ANSWER_CHARS:
        return None  # "1e999999999": its plain form would not fit in memory; not a plain answer
    with localcontext() as ctx:
        ctx.prec = len(t) + abs(d.adjusted()) + 2  # exact: the default 28 digits would round (or raise)
        if d == d.to_integral_value():
            return str(d.quantize(Decimal(1)))
        return format(d.normalize(), "f")


def numbers_equal(pred: str, gold: str) -> bool | None:
    """Numeric equality after :func:`normalize_number`; None when either is not a number."""
    a, b = normalize_number(pred), normalize_number(gold)
    if a is None or b is None:
        return None
    return Decimal(a) == Decimal(b)


# ----------------------------------------------------------------------------- math-verify
# math-verify is imported at module import (not lazily) so that pool workers forked
# afterwards inherit it instead of each paying the ~1 s sympy/antlr import.
# Its timeout is off on purpose (rlvr's pool bounds calls): silence the warning about it.
math_verify.grader.TIMEOUT_WARNING_SHOWN = True
math_verify.parser.TIMEOUT_WARNING_SHOWN = True
logging.getLogger("math_verify").setLevel(logging.ERROR)


def parse_math(expr: str) -> list:
    """math-verify's parse of one answer expression (without ``$``), timeout off; [] if unparseable."""
    # strip: math-verify reads "$ 3\text{ cm}$" (leading space) differently from "$3\text{ cm}$"
    return parse(f"${expr.strip()}$", parsing_timeout=None)


def _base_numeral(s: str) -> tuple[str, str] | None:
    m = _BASE_RE.fullmatch(s.replace(" ", ""))
    return (m.group(1).lower(), m.group(2)) if m else None


def math_equal(pred: str, gold: str) -> bool:
    """True when answer ``pred`` is mathematically equivalent to reference ``gold``.

    Two rules run before math-verify, which gets them wrong: plain decimal numbers compare
    exactly (math-verify rounds to 6 places, so ``.0000672 == .0000673``), and numerals with
    a base subscript must agree in digits and base (math-verify drops the subscript).
    """
    pred, gold = pred.strip(), gold.strip()
    fast = _fast_equal(pred, gold)
    if fast is not None:
        return fast
    g, p = parse_math(gold), parse_math(pred)
    if not g or not p:
        return False
    return bool(verify(g, p, timeout_seconds=None))


def _fast_equal(a: str, b: str) -> bool | None:
    """The rules settled before math-verify (stripped ``a``, ``b``): identical strings, plain decimal
    numbers (exact), base numerals (digits and base); None when they do not decide."""
    if a == b:
        return True
    same = numbers_equal(a, b)
    if same is not None:
        return same
    pa, pb = _base_numeral(a), _base_numeral(b)
    return pa == pb if pa is not None and pb is not None else None


# ----------------------------------------------------------------------------- equivalence of two answers
EQUIVALENCE_TIMEOUT_S = 2.0  # wall-clock bound on one math-verify comparison in math_equivalent
_SLOW_AFTER = 2  # an answer in this many timed-out comparisons is compared as a string from then on
_slow: dict[str, int] = {}  # answer -> timed-out comparisons it took part in (bounded, see below)


def _bounded_math_equal(a: str, b: str, timeout_s: float | None) -> bool:
    """:func:`math_equal` in a :mod:`rlvr.rewards.pool` worker, killed past ``timeout_s``."""
    if _slow.get(a, 0) >= _SLOW_AFTER or _slow.get(b, 0) >= _SLOW_AFTER:
        return False
    if timeout_s is None or mp.current_process().daemon:  # a pool worker cannot fork its own pool
        try:
            return math_equal(a, b)
        except Exception:  # noqa: BLE001 - model output must never crash scoring
            return False
    res = get_pool().map(math_equal, [((a, b), {})], timeout_s)[0]
    if res.timed_out:
        if len(_slow) > 4096:
            _slow.clear()
        for s in (a, b):
            _slow[s] = _slow.get(s, 0) + 1
    return bool(res.ok and res.value)


def math_equivalent(a: str, b: str, timeout_s: float | None = EQUIVALENCE_TIMEOUT_S) -> bool:
    """True when answers ``a`` and ``b`` are the same mathematical object (:func:`math_equal`), bounded.

    For answer equivalence (majority-vote clustering, label accuracy) of math tasks: ``"0.5"``,
    ``"1/2"`` and ``"\\frac{1}{2}"`` are equivalent. Identical stripped strings, plain numbers and
    base numerals are settled here (bounded string and Decimal work); only the math-verify step runs
    in the shared :mod:`rlvr.rewards.pool` worker, killed after ``timeout_s`` seconds (None: in this
    process, unbounded). A timeout or an error counts as not equivalent, and an answer that timed out
    :data:`_SLOW_AFTER` times is compared by the fast rules only from then on. Answers longer than
    ``MAX_ANSWER_CHARS`` compare as strings. Never raises on model output.
    """
    a, b = a.strip(), b.strip()
    if a == b:
        return True
    if len(a) > MAX_ANSWER_CHARS or len(b) > MAX_ANSWER_CHARS:
        return False
    try:
        fast = _fast_equal(a, b)
    except Exception:  # noqa: BLE001 - model output must never crash scoring
        return False
    return fast if fast is not None else _bounded_math_equal(a, b, timeout_s)


# ----------------------------------------------------------------------------- verifiers
def _math_verdict(pred: str, answer: str) -> Verdict:
    """Verdict for an extracted ``pred`` by math-verify equivalence (never raises)."""
    if len(pred) > MAX_ANSWER_CHARS:
        return Verdict(0.0, "malformed", pred[:MAX_ANSWER_CHARS])
    try:
        if math_equal(pred, answer):
            return Verdict(1.0, "right", pred)
        status = "wrong" if parse_math(pred) else "malformed"
    except Exception:  # noqa: BLE001 - model output must never crash scoring
        status = "malformed"
    return Verdict(0.0, status, pred)


def verify_math(completion: str, answer: str) -> Verdict:
    """Math verifier: extracted final answer vs ``answer`` via math-verify (reward 1/0)."""
    pred = extract_answer(completion)
    return Verdict(0.0, "no_answer") if pred is None else _math_verdict(pred, answer)


def verify_numeric(completion: str, answer: str, fallback_math: bool = True) -> Verdict:
    """Numeric verifier (GSM8K): commas, ``$``, ``%``, trailing ``.0`` ignored.

    When the prediction is not a plain number (``\\frac{36}{2}``) and ``fallback_math``,
    math-verify decides; otherwise it is ``malformed``.
    """
    pred = extract_answer(completion)
    if pred is None:
        return Verdict(0.0, "no_answer")
    same = numbers_equal(pred, answer) if len(pred) <= MAX_ANSWER_CHARS else None
    if same is not None:
        return Verdict(float(same), "right" if same else "wrong", pred)
    if not fallback_math:
        return Verdict(0.0, "malformed", pred[:MAX_ANSWER_CHARS])
    return _math_verdict(pred, answer)


def verify_exact(completion: str, answer: str) -> Verdict:
    """Exact verifier: extracted answer equals ``answer`` after stripping whitespace."""
    pred = extract_answer(completion)
    if pred is None:
        return Verdict(0.0, "no_answer")
    ok = pred.strip() == answer.strip()
    return Verdict(float(ok), "right" if ok else "wrong", pred)


VERIFIERS: dict[str, Callable[[str, str], Verdict]] = {
    "math": verify_math,
    "numeric": verify_numeric,
    "exact": verify_exact,
}
