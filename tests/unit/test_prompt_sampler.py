"""rlvr.train.data.PromptSampler: No-Positive-Resampling's retired prompts are skipped, a pool with none
left active is reused with one warning (not one a step), and the order resumes exactly."""

from __future__ import annotations

import warnings

from rlvr.log import RlvrWarning
from rlvr.tasks.base import Problem
from rlvr.train.data import PromptSampler


def pool(n: int) -> list[Problem]:
    return [Problem(f"p{i}", f"Q:{i}\n", str(i), [f"A:{i}"], {}) for i in range(n)]


def test_retired_prompts_are_skipped_and_the_order_resumes():
    a = PromptSampler(pool(10), seed=3)
    first = [p.id for p in a.next(4, frozenset({"p1", "p2"}))]
    assert len(first) == 4 and not {"p1", "p2"} & set(first)
    b = PromptSampler(pool(10), seed=3)
    b.load_state_dict(a.state_dict())
    assert [p.id for p in a.next(7)] == [p.id for p in b.next(7)]  # across the epoch boundary too


def test_a_fully_retired_pool_is_reused_with_one_warning():
    s = PromptSampler(pool(5), seed=0)
    every = frozenset(f"p{i}" for i in range(5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = [s.next(3, every) for _ in range(4)]
    assert all(len(b) == 3 for b in batches)  # reused, not empty
    said = [w for w in caught if issubclass(w.category, RlvrWarning)]
    assert len(said) == 1 and "every training prompt (5) is retired" in str(said[0].message)
