"""The ``code_synth_tool`` task: :mod:`rlvr.tasks.code_synth` with an execution tool in the sandbox.

The prompt is code_synth's (three input/output pairs of a hidden function). The policy may run a
candidate on inputs of its choosing, read the results (or the error), and revise before it answers::

    #f(0)=1 f(3)=7 f(5)=11
    <run>x+5@0,3,5</run><out>5,8,10</out>
    <run>2*x+1@0,3,5</run><out>1,7,11</out>
    def f(x):return 2*x+1

``<run>EXPR@X,Y,...</run>`` runs ``def f(x):return EXPR`` on the integers X, Y, ... (1 to
``MAX_INPUTS`` of them, each in -99..99) in the code sandbox (:mod:`rlvr.rewards.sandbox`) and
answers ``<out>f(X),f(Y),...</out>`` (environment tokens, never trained on). A candidate that raises
is answered with its error's last line, one that runs past the limit with ``timed out``, one that
prints or returns too much with the sandbox's output limit; all are failed calls, never crashes.
The reward is code_synth's verifier (every shown and hidden test, in the two-process harness) on
the episode's answer: its last ``def f(x):return ...`` line written by the policy (tool outputs are
left out before the answer is looked for).

For the pretraining corpus the task's solutions are whole episodes (a run on the shown inputs, then
the answer; or a first wrong candidate, its mismatching output, then the right one), and
:meth:`CodeSynthToolTask.wrong_solution` writes the mistakes RL has to fix: a wrong candidate run
and answered although its output does not match, a right run answered with another function, or
no run and a wrong guess. ``pretrain.mix: {code_synth_tool: ...}`` puts these traces in the corpus
(``code_synth`` gives the corpus programs without runs).
"""

from __future__ import annotations

import functools
import random
import re

from rlvr.rewards.sandbox import run_sandboxed
from rlvr.tasks.code_synth import _FAMILIES, CodeSynthTask, program
from rlvr.tasks.environment import DEFAULT_LIMITS, EpisodeLimits, ToolEnvironment
from rlvr.tasks.tool_calls import TagCalls
from rlvr.types import Problem, Verdict

MAX_INPUTS = 5
"""Inputs one run may take."""
INPUT_RANGE = range(-99, 100)
SANDBOX_OUTPUT_BYTES = 4096
"""What a run may print or return before the sandbox stops it (the observation is cut shorter still,
to ``sampling.max_observation_chars``)."""
_ANSWER = re.compile(r"^def f\(x\):.*$", re.M)
CALLS = TagCalls(("run",))


class RunFailed(RuntimeError):
    """The candidate raised, ran out of time or wrote too much (the message is what the policy reads)."""


def parse_run(argument: str) -> tuple[str, list[int]]:
    """``EXPR@X,Y,...`` -> (EXPR, [X, Y, ...]); ValueError (read by the policy) when malformed."""
    expression, at, inputs = argument.rpartition("@")
    if not at or not expression.strip():
        raise ValueError("a run is EXPR@X,Y,..., e.g. 2*x+1@0,3")
    try:
        xs = [int(x) for x in inputs.split(",")]
    except ValueError:
        raise ValueError(f"inputs must be integers joined by ',', got {inputs[:20]!r}") from None
    if not 1 <= len(xs) <= MAX_INPUTS or any(x not in INPUT_RANGE for x in xs):
        raise ValueError(f"give 1 to {MAX_INPUTS} inputs in -99..99")
    return expression.strip(), xs


def run_candidate(argument: str, timeout_s: float) -> str:
    """The candidate ``EXPR@X,Y,...`` run in the sandbox: its values joined by ',' (RunFailed /
    ValueError with the reason otherwise). The candidate is model-written code: it runs only in the
    sandbox, at most ``timeout_s`` seconds of wall clock and CPU, 256 MB, SANDBOX_OUTPUT_BYTES."""
    expression, xs = parse_run(argument)
    code = f"{program(expression)}\nprint(','.join(str(f(x)) for x in {xs!r}))\n"
    result = run_sandboxed(code, timeout_s=timeout_s, cpu_s=timeout_s, memory_mb=256,
                           max_output=SANDBOX_OUTPUT_BYTES, max_procs=8)
    if result.reason == "ok":
        return result.stdout.strip()
    if result.reason == "timeout":
        raise RunFailed(f"timed out after {timeout_s:g}s")
    if result.reason == "output_limit":
        raise RunFailed(f"more than {SANDBOX_OUTPUT_BYTES} bytes of output")
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    raise RunFailed(lines[-1] if lines else f"{result.reason} (exit {result.returncode})")


def episode_answer(text: str) -> str | None:
    """The last ``def f(x):...`` line the policy wrote in an episode's ``text`` (tool outputs left out)."""
    policy_text, at = [], 0
    for start, end in CALLS.observation_spans(text):
        policy_text.append(text[at:start])
        at = end
    policy_text.append(text[at:])
    answers = _ANSWER.findall("\n".join(policy_text))
    return answers[-1] if answers else None


def _run_text(expression: str, fn, xs: list[int]) -> str:
    """A run of ``expression`` (the function ``fn``) on ``xs`` as the episode shows it (call and output)."""
    return f"<run>{expression}@{','.join(map(str, xs))}</run><out>{','.join(str(fn(x)) for x in xs)}</out>\n"


class CodeSynthToolTask(CodeSynthTask):
    """code_synth with the ``run`` tool (module docstring). Knobs: code_synth's (``levels``,
    ``hidden``, ``heldout_frac``, ``pool_size``, ``seed``, ``timeout_s``: the sandbox's wall clock per
    program, for the verifier and, capped by ``sampling.tool_timeout_s``, for a run, ``workers``)."""

    name = "code_synth_tool"

    def __init__(self, **knobs) -> None:
        super().__init__(**knobs)
        self._functions = {name: (fn, forms) for fams in _FAMILIES.values() for name, fn, forms in fams}
        self._episodes: dict[str, Problem] = {}

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        """code_synth's problems with episodes for solutions (:meth:`_with_episodes`)."""
        return [self._with_episodes(problem) for problem in super().problems(split, n)]

    def _with_episodes(self, problem: Problem) -> Problem:
        """``problem`` whose solutions are episodes: a run of each right form on the shown inputs then
        its answer, and one that revises (a wrong candidate's run first). Cached per problem."""
        if problem.id not in self._episodes:
            fn, forms = self._functions[problem.answer]
            xs = _shown_inputs(problem)
            direct = tuple(_run_text(form, fn, xs) + program(form) for form in forms)
            wrong = self._wrong_expression(problem, random.Random(f"{self.name}:{self.seed}:{problem.prompt}"))
            revised = _run_text(wrong, _evaluator(wrong), xs) + direct[0]
            self._episodes[problem.id] = Problem(problem.id, problem.prompt, problem.answer, (*direct, revised),
                                                 problem.meta)
        return self._episodes[problem.id]

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """code_synth's verdict on the episode's answer (:func:`episode_answer`); ``no_answer`` without one."""
        answer = episode_answer(completion) if isinstance(completion, str) else None
        if answer is None:
            return Verdict(0.0, "no_answer", None)
        return super().verify(answer, problem)

    def environment(self, problem: Problem, limits: EpisodeLimits = DEFAULT_LIMITS) -> ToolEnvironment:
        """A fresh ``run`` tool for one episode; a run's sandbox stops before the tool's own timeout."""
        timeout_s = min(self.timeout_s, 0.8 * limits.tool_timeout_s)
        return ToolEnvironment({"run": lambda argument: run_candidate(argument, timeout_s)}, CALLS, limits)

    def _wrong_expression(self, problem: Problem, rng: random.Random) -> str:
        """A plausible mistake, as code_synth makes them: a library function that matches some but not
        all of the shown pairs (``x`` when none does), in one of its forms."""
        shown = _shown_inputs(problem)
        want = tuple(int(y) for y in re.findall(r"=(-?\d+)", problem.prompt))
        near = _near_forms(tuple(shown), want)
        return rng.choice(rng.choice(near) if near else ("x",))

    def wrong_solution(self, problem: Problem, rng: random.Random) -> str:
        """A plausible wrong episode: a wrong candidate run and answered although its output does not
        match; the right run answered with another function; or no run and a wrong guess."""
        wrong = self._wrong_expression(problem, rng)
        fn, forms = self._functions[problem.answer]
        xs = _shown_inputs(problem)
        r = rng.random()
        if r < 0.4:
            return _run_text(wrong, _evaluator(wrong), xs) + program(wrong)
        if r < 0.7:
            return _run_text(rng.choice(forms), fn, xs) + program(wrong)
        return program(wrong)


def _shown_inputs(problem: Problem) -> list[int]:
    return [int(x) for x in re.findall(r"f\((-?\d+)\)", problem.prompt)]


@functools.cache
def _near_forms(shown: tuple[int, ...], want: tuple[int, ...]) -> tuple[tuple[str, ...], ...]:
    """The forms of each library function that agrees with some but not all of the pairs (cached: the
    problem pool draws the same pairs many times)."""
    return tuple(forms for fams in _FAMILIES.values() for _, fn, forms in fams
                 if 0 < sum(fn(x) == y for x, y in zip(shown, want)) < len(shown))


_BY_FORM = {form: fn for fams in _FAMILIES.values() for _, fn, forms in fams for form in forms}


def _evaluator(expression: str):
    """The library function written ``expression`` (one of code_synth's forms: trusted text; ``x``,
    the fallback guess, otherwise)."""
    return _BY_FORM.get(expression, lambda x: x)
