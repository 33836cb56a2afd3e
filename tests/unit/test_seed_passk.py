"""pass@k over several seeds (``rlvr eval --samples A B C``, ``rlvr compare``): per-seed values and
intervals and the seed-level interval, against hand computations.

Three seeds of one model on two problems, n = 2 samples each (c = correct samples):

    seed   p0 c   p1 c   pass@1 per problem   mean    bootstrap 95% interval over the 2 problems
    0      2      0      (1, 0)               1/2     [0, 1]      (resamples: both p0, mixed, both p1)
    1      1      1      (1/2, 1/2)           1/2     [1/2, 1/2]
    2      1      0      (1/2, 0)             1/4     [0, 1/2]

(each extreme resample has probability 1/4, far above 2.5%, so the percentiles are the extremes).
Seed level: mean 5/12; sd of (1/2, 1/2, 1/4) = sqrt(3)/12, so t s / sqrt(3) = t / 12 with t the 97.5%
Student quantile at 2 degrees of freedom (4.302652729911275); h = (1/2 + 0 + 1/4) / 3 = 1/4; half-width
sqrt((t / 12)^2 + 1/16). pass@2 per problem: (1, 0), (1, 1), (1, 0) -> 1/2, 1, 1/2.
"""

from __future__ import annotations

import json
import math

import pytest

from rlvr.cli import main
from rlvr.errors import UserError
from rlvr.eval.samples import write_samples
from rlvr.experiments.seed_passk import seed_level_of_pairs, seed_passk, seed_passk_difference

T_2 = 4.302652729911275  # Student t, 97.5%, 2 degrees of freedom
T_1 = 12.706204736174707  # 1 degree of freedom
HALF = math.sqrt((T_2 / 12) ** 2 + 1 / 16)


def rows(correct: list[int], n: int = 2) -> list[dict]:
    """n samples of each problem p<i>, the first correct[i] of them correct."""
    return [{"problem_id": f"p{i}", "completion": "x", "correct": j < c, "reward": float(j < c)}
            for i, c in enumerate(correct) for j in range(n)]


SEEDS = [rows([2, 0]), rows([1, 1]), rows([1, 0])]
NAMES = ["s0.jsonl", "s1.jsonl", "s2.jsonl"]


def test_one_model_over_seeds_by_hand():
    result = seed_passk(SEEDS, NAMES)
    assert result["problems"] == 2 and result["n"] == 2 and list(result["pass_at_k"]) == ["1", "2"]
    at1 = result["pass_at_k"]["1"]
    assert [s["value"] for s in at1["per_seed"]] == pytest.approx([0.5, 0.5, 0.25])
    assert [s["ci"] for s in at1["per_seed"]] == [pytest.approx([0, 1]), pytest.approx([0.5, 0.5]),
                                                  pytest.approx([0, 0.5])]
    assert at1["mean"] == pytest.approx(5 / 12)
    assert at1["ci"] == pytest.approx([5 / 12 - HALF, 5 / 12 + HALF])
    at2 = result["pass_at_k"]["2"]
    assert [s["value"] for s in at2["per_seed"]] == pytest.approx([0.5, 1.0, 0.5])
    assert at2["mean"] == pytest.approx(2 / 3)


def test_paired_difference_over_seeds_by_hand():
    """A base sampled once, (1/2, 1/2) at pass@1, shared by the three seeds: per-problem differences
    (1/2, -1/2), (0, 0), (0, -1/2): means 0, 0, -1/4 (sd sqrt(3)/12 again), bootstrap intervals
    [-1/2, 1/2], [0, 0], [-1/2, 0] (h = 1/4)."""
    result = seed_passk_difference([rows([1, 1])], SEEDS, ["base.jsonl"], NAMES)
    assert result["pairing"] == "one reference file shared by every seed"
    at1 = result["difference"]["1"]
    assert [s["value"] for s in at1["per_seed"]] == pytest.approx([0, 0, -0.25])
    assert [s["ci"] for s in at1["per_seed"]] == [pytest.approx([-0.5, 0.5]), pytest.approx([0, 0]),
                                                  pytest.approx([-0.5, 0])]
    assert at1["mean"] == pytest.approx(-1 / 12) and at1["ci"] == pytest.approx([-1 / 12 - HALF, -1 / 12 + HALF])
    assert result["reference"]["1"]["mean"] == pytest.approx(0.5)
    assert result["other"]["1"]["mean"] == pytest.approx(5 / 12)
    paired = seed_passk_difference(SEEDS, SEEDS, NAMES, NAMES)  # each seed against itself: exactly 0
    assert paired["pairing"] == "in order, file i with file i"
    assert paired["difference"]["2"]["mean"] == 0 and paired["difference"]["2"]["ci"] == pytest.approx([0, 0])


def test_seeds_must_share_their_problems_and_pair_counts():
    with pytest.raises(UserError, match="s1.jsonl holds other problems than s0.jsonl"):
        seed_passk([rows([1, 1]), rows([1, 1, 1])], NAMES[:2])
    with pytest.raises(UserError, match="3 seeds' files against 2 reference files"):
        seed_passk_difference(SEEDS[:2], SEEDS, NAMES[:2], NAMES)
    with pytest.raises(UserError, match=r"ks must lie in 1..2"):
        seed_passk(SEEDS, NAMES, ks=[4])


def test_compare_pairs_over_seeds_by_hand():
    """Two seed pairs with differences 0.1 and 0.3 and intervals [0, 0.2], [0.2, 0.4]: mean 0.2, sd
    sqrt(0.02), t s / sqrt(2) = 0.1 t (1 degree of freedom), h = 0.1."""
    per_pair = [{"pass_at_k_difference": {"1": 0.1}, "ci": {"1": [0.0, 0.2]}},
                {"pass_at_k_difference": {"1": 0.3}, "ci": {"1": [0.2, 0.4]}}]
    level = seed_level_of_pairs(per_pair)["1"]
    half = math.sqrt((0.1 * T_1) ** 2 + 0.1 ** 2)
    assert level["mean"] == pytest.approx(0.2) and level["ci"] == pytest.approx([0.2 - half, 0.2 + half])


def test_eval_command_with_several_seeds(tmp_path, capsys):
    paths = [str(write_samples(tmp_path / name, r)) for name, r in zip(NAMES, SEEDS)]
    base = str(write_samples(tmp_path / "base.jsonl", rows([1, 1])))
    out = tmp_path / "seeds.json"
    assert main(["eval", "--samples", *paths, "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["kind"] == "seeds" and written["pass_at_k"]["1"]["mean"] == pytest.approx(5 / 12)
    assert "seed 2 [95% CI]" in capsys.readouterr().out
    assert main(["eval", "--samples", *paths, "--base-samples", base, "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["kind"] == "seed_difference" and written["difference"]["1"]["mean"] == pytest.approx(-1 / 12)
    assert "trained - base [95% seed-level CI]" in capsys.readouterr().out
    assert main(["eval", "--samples", *paths, "--base-samples", base, base]) == 2  # 2 base files for 3 seeds
    assert main(["eval", "--samples", *paths, "--plots", str(tmp_path / "plots")]) == 2
    assert main(["eval", "--samples", paths[0], "--json", str(out)]) == 0  # one file: the one-model result
    assert "pass_at_k_ci" in json.loads(out.read_text())
