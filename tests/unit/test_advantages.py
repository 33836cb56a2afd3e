from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr.algo.advantages import group_advantages, overlong_penalty, zero_variance_groups

F64 = torch.float64
TOL = 1e-6

rewards_strategy = st.integers(1, 4).flatmap(
    lambda P: st.integers(1, 5).flatmap(
        lambda G: st.lists(
            st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.0, -1.0, 2.5]), min_size=G, max_size=G),
            min_size=P,
            max_size=P,
        )
    )
)


@settings(max_examples=60, deadline=None)
@given(rows=rewards_strategy, std_norm=st.sampled_from(["group", "batch", "none"]))
def test_zero_mean_per_group_and_finite(rows: list[list[float]], std_norm: str) -> None:
    adv = group_advantages(torch.tensor(rows, dtype=F64), std_norm)
    assert torch.isfinite(adv).all()
    assert torch.allclose(adv.mean(-1), torch.zeros(len(rows), dtype=F64), atol=TOL)


@settings(max_examples=60, deadline=None)
@given(
    rows=rewards_strategy, std_norm=st.sampled_from(["group", "batch", "none"]), seed=st.integers(0, 10**6)
)
def test_permutation_equivariance_within_groups(rows: list[list[float]], std_norm: str, seed: int) -> None:
    reward = torch.tensor(rows, dtype=F64)
    gen = torch.Generator().manual_seed(seed)
    perm = torch.stack([torch.randperm(reward.shape[1], generator=gen) for _ in range(reward.shape[0])])
    adv = group_advantages(reward, std_norm)
    adv_perm = group_advantages(reward.gather(1, perm), std_norm)
    assert torch.allclose(adv_perm, adv.gather(1, perm), atol=1e-12, rtol=0)


def test_constant_groups_are_exactly_zero() -> None:
    # 0.1 three times: the float mean is not exactly 0.1, the advantage must still be 0
    reward = torch.tensor([[0.1, 0.1, 0.1], [1.0, 0.0, 1.0], [0.7, 0.7, 0.7]], dtype=F64)
    for std_norm in ("group", "batch", "none"):
        adv = group_advantages(reward, std_norm)
        assert torch.equal(adv[[0, 2]], torch.zeros(2, 3, dtype=F64)), std_norm
        assert adv[1].abs().min() > 0.1
    all_constant = group_advantages(torch.ones(2, 4), "batch")
    assert torch.equal(all_constant, torch.zeros(2, 4)) and not torch.isnan(all_constant).any()
    assert torch.equal(zero_variance_groups(reward), torch.tensor([True, False, True]))


def test_group_vs_batch_std_hand_case() -> None:
    reward = torch.tensor([[0.0, 1.0], [0.0, 3.0]], dtype=F64)
    # centred [[-0.5, 0.5], [-1.5, 1.5]]; group stds 0.5, 1.5; batch std sqrt(1.25)
    group = group_advantages(reward, "group")
    expected_group = torch.tensor(
        [[-0.5 / 0.500001, 0.5 / 0.500001], [-1.5 / 1.500001, 1.5 / 1.500001]], dtype=F64
    )
    assert torch.allclose(group, expected_group, atol=1e-12, rtol=0)
    s = math.sqrt(1.25) + 1e-6
    expected_batch = torch.tensor([[-0.5 / s, 0.5 / s], [-1.5 / s, 1.5 / s]], dtype=F64)
    assert torch.allclose(group_advantages(reward, "batch"), expected_batch, atol=1e-12, rtol=0)
    expected_none = torch.tensor([[-0.5, 0.5], [-1.5, 1.5]], dtype=F64)
    assert torch.equal(group_advantages(reward, "none"), expected_none)


def test_population_std_not_sample_std() -> None:
    reward = torch.tensor([[0.0, 0.0, 3.0]], dtype=F64)  # centred [-1, -1, 2]; population std sqrt(2)
    adv = group_advantages(reward, "group")
    assert abs(adv[0, 2].item() - 2 / (math.sqrt(2) + 1e-6)) < 1e-12


def test_integer_rewards_and_bad_input() -> None:
    adv = group_advantages(torch.tensor([[0, 1]]), "none")
    assert adv.dtype == torch.float32 and torch.equal(adv, torch.tensor([[-0.5, 0.5]]))
    with pytest.raises(ValueError, match="unknown std_norm 'grup'"):
        group_advantages(torch.zeros(2, 2), "grup")
    with pytest.raises(ValueError, match=r"shape \(P, G\)"):
        group_advantages(torch.zeros(4), "group")


def test_overlong_penalty_piecewise() -> None:
    lengths = torch.tensor([0, 5, 6, 7, 8, 9, 10, 11, 50])
    expected = torch.tensor([0.0, 0.0, 0.0, -0.25, -0.5, -0.75, -1.0, -1.0, -1.0])
    assert torch.allclose(overlong_penalty(lengths, max_len=10, cache_len=4), expected, atol=1e-7, rtol=0)
    no_window = overlong_penalty(torch.tensor([9, 10, 11]), max_len=10, cache_len=0)
    assert torch.equal(no_window, torch.tensor([0.0, 0.0, -1.0]))
    with pytest.raises(ValueError, match="cache_len <= max_len"):
        overlong_penalty(lengths, max_len=4, cache_len=5)
