from __future__ import annotations

import math

import pytest
import torch

from rlvr.algo.diagnostics import (
    CELLS,
    entropy_cell_sums,
    entropy_dynamics,
    entropy_dynamics_from_sums,
    token_stats_from_logits,
)

F64 = torch.float64
TOL = 1e-6
LN2 = math.log(2.0)


def entropy_of(z: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(z, -1)
    return -(logp.exp() * logp).sum(-1)


def test_token_stats_hand_values() -> None:
    logits = torch.stack([torch.log(torch.tensor([1.0, 2.0, 1.0], dtype=F64)), torch.zeros(3, dtype=F64)])
    stats = token_stats_from_logits(logits[None], torch.tensor([[1, 0]]))
    # p = [1/4, 1/2, 1/4], sampled token 1; then uniform over 3, sampled token 0
    expected = {
        "p_s": [0.5, 1 / 3],
        "logp_s": [-LN2, -math.log(3)],
        "sum_p2": [0.375, 1 / 3],
        "entropy": [1.5 * LN2, math.log(3)],
        "sum_p2_logp_plus_H": [0.0625 * LN2, 0.0],
    }
    for key, values in expected.items():
        assert stats[key].shape == (1, 2)
        assert torch.allclose(stats[key][0], torch.tensor(values, dtype=F64), atol=TOL, rtol=0), key


def test_token_stats_chunking_and_dtype() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 7, dtype=F64) * 3
    tokens = torch.randint(0, 7, (2, 3))
    whole = token_stats_from_logits(logits, tokens)
    rows1 = token_stats_from_logits(logits, tokens, chunk_rows=1)
    rows4 = token_stats_from_logits(logits, tokens, chunk_rows=4)
    for key in whole:
        assert torch.allclose(whole[key], rows1[key], atol=1e-12) and torch.allclose(whole[key], rows4[key])
    direct = torch.softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)
    assert torch.allclose(whole["p_s"], direct, atol=1e-12)
    low = token_stats_from_logits(logits.to(torch.bfloat16).requires_grad_(True), tokens)
    assert all(v.dtype == torch.float32 and not v.requires_grad for v in low.values())


@pytest.mark.parametrize(
    ("probs", "peak", "valley"),
    [
        ([0.6, 0.2, 0.1, 0.06, 0.04], 0, 3),  # sum p^2 = 0.4152
        ([0.45, 0.3, 0.15, 0.1], 0, 1),  # sum p^2 = 0.325: a peak below 1/2, a valley just under it
    ],
)
def test_predicted_entropy_change_matches_a_real_softmax_step(
    probs: list[float], peak: int, valley: int
) -> None:
    """dH formula vs the finite entropy change of one SGD step on -A log p_s, all four cells."""
    z0 = torch.log(torch.tensor(probs, dtype=F64))
    eta = 1e-4
    signs = {}
    for s, A in ((peak, 1.0), (valley, 1.0), (peak, -1.0), (valley, -1.0)):
        z = z0.clone().requires_grad_(True)
        (-A * torch.log_softmax(z, -1)[s]).backward()
        observed = (entropy_of(z0 - eta * z.grad) - entropy_of(z0)).item()
        stats = token_stats_from_logits(z0[None, None], torch.tensor([[s]]))
        out = entropy_dynamics(
            stats,
            torch.tensor([A], dtype=F64),
            torch.ones(1, 1, dtype=torch.bool),
            torch.ones(1, 1, dtype=F64),
            eta,
        )
        predicted = out["dH_total"]
        assert abs(predicted) > 1e-6
        assert abs(predicted - observed) < TOL and abs(predicted - observed) < 1e-3 * abs(predicted)
        cell = ("pos_" if A > 0 else "neg_") + ("peak" if s == peak else "valley")
        assert out[f"dH_{cell}"] == predicted and out[f"token_share_{cell}"] == 1.0
        signs[cell] = math.copysign(1, predicted)
    # docs/methods/losses.md: +A peak sharpens, +A valley lifts the tail, -A peak spreads, -A valley collapses
    assert signs == {"pos_peak": -1, "pos_valley": 1, "neg_peak": 1, "neg_valley": -1}


def test_entropy_dynamics_cell_shares_hand_case() -> None:
    row = torch.log(torch.tensor([1.0, 2.0, 1.0], dtype=F64))  # p = [1/4, 1/2, 1/4]; token 1 peak, 0 valley
    logits = row.expand(3, 3, 3).clone()
    logits[1, 2] = torch.tensor([50.0, -50.0, 0.0], dtype=F64)  # padding: must not count
    tokens = torch.tensor([[1, 0, 1], [1, 0, 0], [1, 1, 1]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    adv = torch.tensor([1.0, -2.0, 0.0], dtype=F64)
    weights = torch.tensor([[0.1, 0.2, 0.3], [0.25, 0.15, 9.0], [0.5, 0.0, 0.0]], dtype=F64)
    out = entropy_dynamics(token_stats_from_logits(logits, tokens), adv, mask, weights, eta=0.1)
    # bracket p_s(log p_s + H) - sum p^2 (log p + H) = +0.1875 ln2 on the peak, -0.1875 ln2 on the valley
    b = 0.1875 * LN2
    expected = {
        "token_share_pos_peak": 2 / 6, "token_share_pos_valley": 1 / 6,
        "token_share_neg_peak": 1 / 6, "token_share_neg_valley": 1 / 6, "token_share_zero_adv": 1 / 6,
        "weight_share_pos_peak": 0.4 / 1.4, "weight_share_pos_valley": 0.2 / 1.4,
        "weight_share_neg_peak": 0.5 / 1.4, "weight_share_neg_valley": 0.3 / 1.4,
        "dH_pos_peak": -0.1 * 2 * b, "dH_pos_valley": 0.1 * b,
        "dH_neg_peak": 0.2 * b, "dH_neg_valley": -0.2 * b, "dH_total": -0.1 * b,
    }  # fmt: skip
    assert set(out) == set(expected)
    for key, value in expected.items():
        assert abs(out[key] - value) < TOL, key
    assert abs(sum(out[f"token_share_{c}"] for c in CELLS) + 1 / 6 - 1) < TOL


def test_entropy_dynamics_empty_batch_is_finite() -> None:
    stats = token_stats_from_logits(torch.zeros(2, 2, 3), torch.zeros(2, 2, dtype=torch.long))
    out = entropy_dynamics(stats, torch.zeros(2), torch.zeros(2, 2, dtype=torch.bool), torch.zeros(2, 2), 0.1)
    assert all(v == 0.0 for v in out.values())


def test_entropy_cell_sums_add_up_over_row_splits() -> None:
    """The cells of a batch equal the accumulated sums of its parts (micro-batches, ranks)."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 4, 5, generator=g, dtype=F64)
    tokens = torch.randint(0, 5, (6, 4), generator=g)
    mask = torch.rand(6, 4, generator=g) > 0.3
    adv = torch.tensor([1.0, -1.0, 0.5, 0.0, -2.0, 1.5], dtype=F64)
    weights = torch.rand(6, 4, generator=g, dtype=F64) * mask
    whole = entropy_dynamics(token_stats_from_logits(logits, tokens), adv, mask, weights, 0.1)
    acc: dict = {}
    for rows in (slice(0, 2), slice(2, 6)):
        part = entropy_cell_sums(token_stats_from_logits(logits[rows], tokens[rows]), adv[rows], mask[rows],
                                 weights[rows], 0.1)
        for k, v in part.items():
            acc[k] = acc.get(k, 0.0) + float(v)
    split = entropy_dynamics_from_sums(acc)
    assert whole.keys() == split.keys()
    for k in whole:
        assert abs(whole[k] - split[k]) < 1e-12, k
