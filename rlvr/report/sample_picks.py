"""Which completions a page shows of a run's samples: the best, the worst and a few at random.

Best: the highest reward (a correct one before an incorrect one at equal reward), then the
highest mean log-probability (what the model was surest of). Worst: the lowest reward (an
incorrect one first), then again the highest mean log-probability: the most confident failure is
the most telling one. Random: ``n_random`` of the others, drawn with a seeded generator, in file
order, so a page is the same every time it is written.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.eval.samples import is_correct

Row = Mapping[str, Any]


def _reward(row: Row) -> float:
    reward = row.get("reward")
    return float(reward) if isinstance(reward, int | float) else float(is_correct(row))


def _confidence(row: Row) -> float:
    logp = row.get("mean_logp")
    return float(logp) if isinstance(logp, int | float) and math.isfinite(logp) else -math.inf


def pick_samples(rows: Sequence[Row], n_random: int = 3, seed: int = 0) -> list[tuple[str, Row]]:
    """[(``"best"`` | ``"worst"`` | ``"random"``, row)]: one best, one worst (when another row is
    left), then up to ``n_random`` others at random. Empty for no rows."""
    if not rows:
        return []
    order = range(len(rows))
    best = max(order, key=lambda i: (_reward(rows[i]), is_correct(rows[i]), _confidence(rows[i]), -i))
    rest = [i for i in order if i != best]
    picks = [("best", best)]
    if rest:
        worst = min(rest, key=lambda i: (_reward(rows[i]), is_correct(rows[i]), -_confidence(rows[i]), i))
        picks.append(("worst", worst))
        rest = [i for i in rest if i != worst]
    drawn = sorted(random.Random(seed).sample(rest, min(n_random, len(rest))))
    picks += [("random", i) for i in drawn]
    return [(label, rows[i]) for label, i in picks]
