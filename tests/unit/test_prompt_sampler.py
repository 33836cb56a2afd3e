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


def walked(problems: list[Problem], seed: int, sizes: list[int], retired: frozenset[str]) -> list[list[str]]:
    """The definition: batches read off the epoch orders in turn, retired prompts skipped."""
    s = PromptSampler(problems, seed)
    order, epoch, pos, out = s._shuffle(0), 0, 0, []
    for n in sizes:
        batch = []
        while len(batch) < n:
            if pos == len(order):
                epoch, pos = epoch + 1, 0
                order = s._shuffle(epoch)
            if problems[order[pos]].id not in retired:
                batch.append(problems[order[pos]].id)
            pos += 1
        out.append(batch)
    return out


def test_batches_follow_the_epoch_orders_while_a_batch_of_prompts_is_active():
    problems = pool(50)
    retired = frozenset(f"p{i}" for i in range(0, 50, 2)) | {"elsewhere"}  # 25 active; one id not in the pool
    s = PromptSampler(problems, seed=7)
    got = [[p.id for p in s.next(n, retired)] for n in (8, 8, 25, 8, 8)]
    assert got == walked(problems, 7, [8, 8, 25, 8, 8], retired)
    small = PromptSampler(pool(3), seed=1)  # a pool smaller than a batch, none retired: walked as always
    assert [p.id for p in small.next(8)] == walked(pool(3), 1, [8], frozenset())[0]


def test_a_pool_retired_below_a_batch_repeats_its_next_pass_warns_once_and_stays_cheap(monkeypatch):
    problems = pool(34_000)
    left = {"p17", "p20001", "p33333"}
    retired = frozenset(p.id for p in problems if p.id not in left)
    s = PromptSampler(problems, seed=0)
    shuffles = []
    monkeypatch.setattr(s, "_shuffle", lambda e: shuffles.append(e) or PromptSampler._shuffle(s, e))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = [[p.id for p in s.next(64, retired)] for _ in range(20)]
    said = [str(w.message) for w in caught if issubclass(w.category, RlvrWarning)]
    assert len(said) == 1 and "only 3 of 34,000 training prompts are not retired" in said[0]
    for b in batches:
        assert len(b) == 64 and set(b) == left and b[:3] * 21 + b[:1] == b  # one pass over the 3, repeated
    # each batch walks on to the next pass over the three (at most the rest of an epoch and the next), so
    # 20 batches read 20 passes and shuffle about 20 epochs; before, every problem of a batch took a walk to
    # the next epoch: 64 / 3 epochs a batch (about 430 shuffles and 14.6 million steps for these 20)
    assert len(shuffles) <= 21 and s.state_dict()["epoch"] <= 21
    assert sorted({tuple(sorted(b[:3])) for b in batches}) == [tuple(sorted(left))]
