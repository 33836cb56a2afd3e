"""``observed_entropy_prediction``: the taxonomy's predicted entropy change of each update against its
observed change (docs/methods/losses.md, "Observed entropy change"), by hand, and planted cases whose
verdicts must come out each way."""

from __future__ import annotations

import numpy as np
import pytest

from rlvr.algo.diagnostics import CELLS
from rlvr.config import ConfigError
from rlvr.experiments import spec
from rlvr.experiments.claims import judge
from rlvr.experiments.measures import MEASURES

MEASURE = MEASURES["observed_entropy_prediction"]


def _cell(pred, obs, probe=None, cells=None) -> dict:
    n = len(pred)
    series = {"step": list(range(1, n + 1)), "dH_total": pred, "dH_obs_total": obs,
              "probe_entropy_change": probe if probe is not None else [None] * n}
    for c in CELLS:
        series[f"dH_{c}"], series[f"dH_obs_{c}"] = (cells or {}).get(c, ([None] * n, [None] * n))
    return {"kind": "dynamics", "series": series}


def _claim(args: dict, expect: str = "positive"):
    models = {"base": {"kind": "base"}, "grpo": {"kind": "rl", "seeded": True}}
    exp = spec.parse({"name": "x", "title": "t", "models": models,
                      "evaluations": {"dyn": {"kind": "dynamics", "temperature": 1.0, "n": 1, "problems": 1,
                                              "models": ["grpo"]}},
                      "claims": [{"id": "c", "claim": "c", "paper": "p", "measure": "observed_entropy_prediction",
                                  "args": {"eval": "dyn", "model": "grpo", **args}, "expect": expect}]}, "x")
    return exp.claims[0]


def test_the_same_step_pairs_and_the_correlation_by_hand():
    """Step t's prediction against step t's observation (no lag); steps missing either are skipped."""
    pred = [1.0, -2.0, None, 3.0, 0.5]
    obs = [2.0, -1.0, 7.0, 4.0, None]  # pairs (1, 2), (-2, -1), (3, 4)
    est, det = MEASURE.run(lambda e, m, s: _cell(pred, obs), {"eval": "d", "model": "g"}, [0], [None])
    x, y = np.array([1.0, -2.0, 3.0]), np.array([2.0, -1.0, 4.0])
    dx, dy = x - x.mean(), y - y.mean()
    by_hand = (dx * dy).sum() / np.sqrt((dx ** 2).sum() * (dy ** 2).sum())
    assert est[0].value == pytest.approx(by_hand) and det["s0"]["steps"] == 3
    assert det["s0"]["sign_agreement"] == 1.0 and det["s0"]["observed_mean"] == pytest.approx(5 / 3)


def test_the_probe_and_a_cell_read_their_own_series():
    pred = [1.0, 2.0, 3.0, 4.0]
    probe = [-1.0, -2.0, -3.0, -5.0]  # falls as the prediction rises: r < 0
    est, det = MEASURE.run(lambda e, m, s: _cell(pred, [0.0] * 4, probe), {"eval": "d", "model": "g",
                                                                           "observed": "probe"}, [0], [None])
    assert est[0].value == pytest.approx(np.corrcoef(pred, probe)[0, 1]) and det["s0"]["sign_agreement"] == 0.0
    cells = {"neg_valley": ([-1.0, -2.0, -3.0], [-0.1, -0.3, -0.2])}
    est, _ = MEASURE.run(lambda e, m, s: _cell([0.0] * 3, [0.0] * 3, cells=cells),
                         {"eval": "d", "model": "g", "cell": "neg_valley"}, [0], [None])
    assert est[0].value == pytest.approx(np.corrcoef([-1, -2, -3], [-0.1, -0.3, -0.2])[0, 1])


def test_typed_arguments():
    with pytest.raises(ConfigError, match="args.cell: 'neg_valley': the probe batch has no advantages"):
        MEASURE.typed({"eval": "d", "model": "g", "observed": "probe", "cell": "neg_valley"})
    with pytest.raises(ConfigError, match="args.observed: 'batches'; use one of batch, probe"):
        MEASURE.typed({"eval": "d", "model": "g", "observed": "batches"})
    with pytest.raises(ConfigError, match="obsreved"):
        MEASURE.typed({"eval": "d", "model": "g", "obsreved": "probe"})


def _planted(seed: int, related: float, n: int = 100) -> dict:
    """n steps: a prediction, and an observation = related x prediction + independent noise."""
    rng = np.random.default_rng(seed)
    pred = rng.normal(size=n)
    obs = related * pred + rng.normal(size=n)
    return _cell(pred.tolist(), obs.tolist())


def test_a_prediction_unrelated_to_the_observation_does_not_read_reproduced():
    """Planted: the observed change is noise independent of the prediction, in three seeds."""
    row = judge(_claim({}), lambda e, m, s: _planted(10 + s, related=0.0), [0, 1, 2], [None])
    assert row["verdict"] == "inconclusive" and row["why"] == ""
    assert all(e["lo"] < 0 < e["hi"] for e in row["estimates"])


def test_a_prediction_that_tracks_the_observation_reads_reproduced_and_its_opposite_not_reproduced():
    assert judge(_claim({}), lambda e, m, s: _planted(s, related=1.0), [0, 1, 2], [None])["verdict"] == "reproduced"
    assert judge(_claim({}), lambda e, m, s: _planted(s, related=-1.0), [0, 1, 2],
                 [None])["verdict"] == "not reproduced"


def test_a_run_without_the_observation_is_not_measured_and_a_short_one_not_identifiable():
    blind = judge(_claim({}), lambda e, m, s: _cell([1.0, 2.0, 3.0], [None] * 3), [0], [None])
    assert blind["verdict"] == "not measured" and "train.entropy_probe" in blind["why"]
    short = judge(_claim({}), lambda e, m, s: _cell([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 5.0]), [0, 1], [None])
    assert short["verdict"] == "not identifiable here" and "s0: 4, s1: 4 steps; at least 10" in short["why"]
    # a seed whose updates never had a gradient logs neither series: too few updates, not a run without the probe
    idle = judge(_claim({}), lambda e, m, s: _cell([None] * 3, [None] * 3), [0], [None])
    assert idle["verdict"] == "not identifiable here" and "s0: 0 steps" in idle["why"]
