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


class Counted(frozenset):
    """A retired set that counts its membership tests (the walk's per-entry Python steps)."""

    calls = 0

    def __contains__(self, pid):
        Counted.calls += 1
        return frozenset.__contains__(self, pid)


def test_a_pool_retired_below_a_batch_gives_the_same_batches_warns_once_and_stays_cheap():
    problems = pool(3_400)
    left = {"p17", "p2001", "p3333"}
    retired = frozenset(p.id for p in problems if p.id not in left)
    sizes = [64] * 12 + [2, 5, 64]  # batches that end inside an epoch too
    s = PromptSampler(problems, seed=4)
    Counted.calls = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [[p.id for p in s.next(n, Counted(retired))] for n in sizes]
    assert got == walked(problems, 4, sizes, retired)  # the batches, in order, are the walk's
    said = [str(w.message) for w in caught if issubclass(w.category, RlvrWarning)]
    assert len(said) == 1 and "only 3 of 3,400 training prompts are not retired" in said[0]
    # two passes over the pool a batch (the exact count and the active list); position by position the
    # walk tested membership once per entry of 64 / 3 epochs a batch (about 73,000 for 3,400)
    assert Counted.calls <= 2 * len(problems) * len(sizes)
    resumed = PromptSampler(problems, seed=4)
    resumed.load_state_dict(s.state_dict())
    assert [p.id for p in s.next(64, retired)] == [p.id for p in resumed.next(64, retired)]
