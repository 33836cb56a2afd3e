"""Hand-computed cases for every registered policy loss, aggregation weights, KL estimators.

Batch used by the hand cases: 2 prompts x 2 samples, T = 3, ragged lengths 3, 1, 2, 3,
advantages A = [1, -0.5, 2, -1]. All in float64, tolerance 1e-6.
"""

from __future__ import annotations

import math

import pytest
import torch

from rlvr.algo.losses import (
    LOSS_DEFAULTS,
    LOSSES,
    LossInputs,
    get_loss,
    kl_penalty,
    loss_config,
    objective,
    policy_loss,
    register,
    resolve_loss,
    token_weights,
)
from rlvr.config import ConfigError, LossConfig, load_config

TOL = 1e-6
F64 = torch.float64
LENGTHS = [3, 1, 2, 3]
ADV = [1.0, -0.5, 2.0, -1.0]
LOGP = [[-1.0, -2.0, -0.5], [-3.0], [-1.0, -1.0], [-2.0, -1.0, -0.25]]
L_MAX = 3
# hand aggregation weight of every token of each row (lengths 3,1,2,3; G = 2; L_max = 3)
ROW_W = {
    "seq_mean_token_mean": [1 / 12, 1 / 4, 1 / 8, 1 / 12],  # (1/B)(1/|y_i|)
    "token_mean": [1 / 9] * 4,  # 9 tokens
    "prompt_mean": [1 / 8, 1 / 8, 1 / 10, 1 / 10],  # prompt lengths 4 and 5, P = 2
    "constant": [1 / 12] * 4,  # 1/(B * L_max)
    "wapo": [1 / 12, 0.0, 1 / 12, 0.0],  # winners rows 0, 2; 1/(G L_max) / 2 groups
}


def mask_of(lengths: list[int], T: int = 3) -> torch.Tensor:
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]


def rows_to_tensor(rows: list[list[float]], fill: float = 0.0, T: int = 3) -> torch.Tensor:
    out = torch.full((len(rows), T), fill, dtype=F64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=F64)
    return out


def build(name: str, log_ratio_rows: list[list[float]], pad_logp: float = -7.0, pad_old: float = -3.0):
    """LossInputs for the hand batch with the given per-token log-ratios; weights from token_weights."""
    mask = mask_of(LENGTHS)
    logp = rows_to_tensor(LOGP)
    old = logp - rows_to_tensor(log_ratio_rows)
    logp = torch.where(mask, logp, torch.full_like(logp, pad_logp)).requires_grad_(True)
    old = torch.where(mask, old, torch.full_like(old, pad_old))
    adv = torch.tensor(ADV, dtype=F64)
    spec = get_loss(name)
    w = token_weights(mask, 2, spec.aggregation, max_len=L_MAX, adv_B=adv, dtype=F64)
    return LossInputs(logp=logp, old_logp=old, adv=adv, mask=mask, weights=w)


def logs(rho_rows: list[list[float]]) -> list[list[float]]:
    return [[math.log(r) for r in row] for row in rho_rows]


# Per-token losses l and per-token dl/dlogp (g) of the off-policy cases, written out by hand.
PPO_RHO = [[1.5, 1.1, 0.5], [0.5], [0.5, 1.5], [1.5, 0.9, 0.7]]
PPO_02 = {  # eps_low = eps_high = 0.2: clipped tokens have g = 0, others g = -rho*A
    "l": [[-1.2, -1.1, -0.5], [0.4], [-1.0, -2.4], [1.5, 0.9, 0.8]],
    "g": [[0.0, -1.1, -0.5], [0.0], [-1.0, 0.0], [1.5, 0.9, 0.0]],
}
PPO_028 = {  # eps_high = 0.28 (dapo): ratio 1.5 with A > 0 capped at 1.28
    "l": [[-1.28, -1.1, -0.5], [0.4], [-1.0, -2.56], [1.5, 0.9, 0.8]],
    "g": [[0.0, -1.1, -0.5], [0.0], [-1.0, 0.0], [1.5, 0.9, 0.0]],
}
E4 = math.exp(1e-4)
GSPO_LOG = [  # sequence ratios s = 1.5, 1, e^1e-4, 0.5
    [math.log(1.5) + 0.1, math.log(1.5) - 0.1, math.log(1.5)],
    [0.0],
    [math.log(2.0) + 1e-4, -math.log(2.0) + 1e-4],
    [math.log(0.5) + 0.3, math.log(0.5) - 0.3, math.log(0.5)],
]
CISPO_RHO = [[5.0, 1.0, 0.5], [8.0], [1.0, 2.0], [0.5, 1.0, 6.0]]
WAPO_RHO = [[12.0, 1.0, 0.5], [0.5], [1.0, 11.0], [20.0, 1.0, 0.1]]

CASES = {
    "grpo": {
        "on_loss": -(1 - 0.5 + 2 - 1) / 4,
        "log_ratio": logs(PPO_RHO),
        "l": PPO_02["l"],
        "g": PPO_02["g"],
        "stats": {"clip_frac_low": 2 / 9, "clip_frac_high": 2 / 9, "trunc_frac": 0.0, "ratio_mean": 8.7 / 9},
    },
    "dr_grpo": {
        "on_loss": -(3 * 1 - 0.5 + 2 * 2 - 3 * 1) / 12,
        "log_ratio": logs(PPO_RHO),
        "l": PPO_02["l"],
        "g": PPO_02["g"],
        "stats": {"clip_frac_low": 2 / 9, "clip_frac_high": 2 / 9},
    },
    "dapo": {
        "on_loss": -(3 * 1 - 0.5 + 2 * 2 - 3 * 1) / 9,
        "log_ratio": logs(PPO_RHO),
        "l": PPO_028["l"],
        "g": PPO_028["g"],
        "stats": {"clip_frac_low": 2 / 9, "clip_frac_high": 2 / 9},
    },
    "gspo": {  # l_i broadcast to the tokens of i; g = -A s_i unless the sequence is clipped
        "on_loss": -(1 - 0.5 + 2 - 1) / 4,
        "log_ratio": GSPO_LOG,
        "l": [[-1.0004] * 3, [0.5], [-2 * E4] * 2, [0.9997] * 3],
        "g": [[0.0] * 3, [0.5], [-2 * E4] * 2, [0.0] * 3],
        "stats": {
            "clip_frac_low": 3 / 9,
            "clip_frac_high": 3 / 9,
            "ratio_mean": (4.5 + 1 + 2 * E4 + 1.5) / 9,
        },
    },
    "cispo": {  # l = -min(rho, 4) A logp, g = -min(rho, 4) A (truncated tokens keep gradient)
        "on_loss": 0.325,  # -sum w A logp = -(-3.5/8 + 1.5/8 - 4/10 + 3.25/10)
        "log_ratio": logs(CISPO_RHO),
        "l": [[4.0, 2.0, 0.25], [-6.0], [2.0, 4.0], [-1.0, -1.0, -1.0]],
        "g": [[-4.0, -1.0, -0.5], [2.0], [-2.0, -4.0], [0.5, 1.0, 4.0]],
        "stats": {"trunc_frac": 3 / 9, "clip_frac_high": 3 / 9, "clip_frac_low": 0.0},
    },
    "wapo": {  # winners only; l = -min(rho, 10) A; g = 0 above the cap
        "on_loss": -(3 * 1 + 2 * 2) / 12,
        "log_ratio": logs(WAPO_RHO),
        "l": [[-10.0, -1.0, -0.5], [0.0], [-2.0, -20.0], [0.0, 0.0, 0.0]],
        "g": [[0.0, -1.0, -0.5], [0.0], [-2.0, 0.0], [0.0, 0.0, 0.0]],
        "stats": {"clip_frac_high": 2 / 9, "clip_frac_low": 0.0, "trunc_frac": 0.0},
    },
}


def hand_weights(name: str) -> torch.Tensor:
    row_w = ROW_W[get_loss(name).aggregation]
    return rows_to_tensor([[row_w[i]] * n for i, n in enumerate(LENGTHS)])


def test_every_registered_loss_has_a_hand_case() -> None:
    """opd (on-policy distillation) reads logits, not only log-probs: its hand cases are in test_distill.py."""
    assert set(CASES) == set(LOSSES) - {"opd"}
    assert {"grpo", "dr_grpo", "dapo", "gspo", "cispo", "wapo"} <= set(LOSSES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_on_policy_gradient_is_minus_adv_times_weight(name: str) -> None:
    inp = build(name, [[0.0] * n for n in LENGTHS])
    loss, stats = policy_loss(inp, loss_config(name))
    loss.backward()
    assert abs(loss.item() - CASES[name]["on_loss"]) < TOL
    w = hand_weights(name)
    assert torch.allclose(inp.weights, w, atol=TOL, rtol=0)
    expected = -torch.tensor(ADV, dtype=F64)[:, None] * w
    assert torch.allclose(inp.logp.grad, expected, atol=TOL, rtol=0)
    assert abs(stats["ratio_mean"].item() - 1.0) < TOL and abs(stats["approx_kl"].item()) < TOL


@pytest.mark.parametrize("name", sorted(CASES))
def test_off_policy_hand_case(name: str) -> None:
    case = CASES[name]
    inp = build(name, case["log_ratio"])
    loss, stats = policy_loss(inp, loss_config(name))
    loss.backward()
    w = hand_weights(name)
    expected_loss = (w * rows_to_tensor(case["l"])).sum().item()
    assert abs(loss.item() - expected_loss) < TOL
    assert torch.allclose(inp.logp.grad, w * rows_to_tensor(case["g"]), atol=TOL, rtol=0)
    for key, value in case["stats"].items():
        assert abs(stats[key].item() - value) < TOL, key
    assert all(not v.requires_grad and v.dim() == 0 for v in stats.values())


def test_clipped_tokens_have_exactly_zero_gradient() -> None:
    for name in ("grpo", "dr_grpo", "dapo", "gspo"):
        inp = build(name, CASES[name]["log_ratio"])
        policy_loss(inp, loss_config(name))[0].backward()
        zero_g = (rows_to_tensor(CASES[name]["g"]) == 0) & mask_of(LENGTHS)
        assert zero_g.any() and torch.all(inp.logp.grad[zero_g] == 0), name


def test_hand_loss_values_written_out() -> None:
    """Two totals spelled out, as a check on the tables above."""
    inp = build("grpo", logs(PPO_RHO))
    grpo = policy_loss(inp, loss_config("grpo"))[0].item()
    assert abs(grpo - (-2.8 / 12 + 0.4 / 4 - 3.4 / 8 + 3.2 / 12)) < TOL
    inp = build("cispo", logs(CISPO_RHO))
    assert abs(policy_loss(inp, loss_config("cispo"))[0].item() - 0.33125) < TOL
    inp = build("wapo", logs(WAPO_RHO))
    assert abs(policy_loss(inp, loss_config("wapo"))[0].item() - (-33.5 / 12)) < TOL


def test_approx_kl_is_k3_of_token_ratios() -> None:
    inp = build("grpo", logs(PPO_RHO))
    stats = policy_loss(inp, loss_config("grpo"))[1]
    rhos = [r for row in PPO_RHO for r in row]
    expected = sum(r - 1 - math.log(r) for r in rhos) / 9
    assert abs(stats["approx_kl"].item() - expected) < TOL


def test_cispo_lower_bound_and_cap() -> None:
    inp = build("cispo", logs(CISPO_RHO))
    loss, stats = policy_loss(inp, loss_config("cispo", cispo_eps_low=0.2, eps_max=6.0))
    loss.backward()
    # weights clip(rho, 0.8, 6): row0 [5, 1, 0.8], row1 [6], row2 [1, 2], row3 [0.8, 1, 6]
    g = [[-5.0, -1.0, -0.8], [3.0], [-2.0, -4.0], [0.8, 1.0, 6.0]]
    assert torch.allclose(inp.logp.grad, hand_weights("cispo") * rows_to_tensor(g), atol=TOL, rtol=0)
    assert abs(stats["trunc_frac"].item() - 1 / 9) < TOL  # only rho = 8 exceeds 6
    assert abs(stats["clip_frac_low"].item() - 2 / 9) < TOL


def test_wapo_losers_give_zero_gradient_even_with_nonzero_weights() -> None:
    inp = build("wapo", logs(WAPO_RHO))
    uniform = token_weights(inp.mask, 2, "token_mean", dtype=F64)
    inp = LossInputs(inp.logp, inp.old_logp, inp.adv, inp.mask, uniform)
    policy_loss(inp, loss_config("wapo"))[0].backward()
    assert torch.all(inp.logp.grad[[1, 3]] == 0)
    assert torch.allclose(inp.logp.grad[0], torch.tensor([0.0, -1.0, -0.5], dtype=F64) / 9, atol=TOL)


def test_gspo_token_form_same_value_and_gradient_but_local_flow() -> None:
    base = build("gspo", GSPO_LOG)
    tok = build("gspo", GSPO_LOG)
    cfg = loss_config("gspo")
    loss_s = policy_loss(base, cfg)[0]
    loss_t = policy_loss(tok, loss_config("gspo", gspo_token=True))[0]
    loss_s.backward()
    loss_t.backward()
    assert abs(loss_s.item() - loss_t.item()) < TOL
    assert torch.allclose(base.logp.grad, tok.logp.grad, atol=TOL, rtol=0)
    # the row-2 per-token loss of token 0 depends on token 1's logp only in the sequence form
    for token_form, coupled in ((False, True), (True, False)):
        inp = build("gspo", GSPO_LOG)
        per_token = get_loss("gspo").fn(inp, loss_config("gspo", gspo_token=token_form))[0]
        per_token[2, 0].backward()
        assert (inp.logp.grad[2, 1].abs().item() > 1e-3) is coupled


@pytest.mark.parametrize("name", sorted(CASES))
def test_padding_never_contributes(name: str) -> None:
    ref = build(name, CASES[name]["log_ratio"])
    odd = build(name, CASES[name]["log_ratio"], pad_logp=30.0, pad_old=-math.inf)
    loss_ref, stats_ref = policy_loss(ref, loss_config(name))
    loss_odd, stats_odd = policy_loss(odd, loss_config(name))
    loss_ref.backward()
    loss_odd.backward()
    assert torch.isfinite(loss_odd) and abs(loss_ref.item() - loss_odd.item()) < 1e-12
    pad = ~mask_of(LENGTHS)
    assert torch.all(odd.logp.grad[pad] == 0) and torch.equal(odd.logp.grad, ref.logp.grad)
    for key in stats_ref:
        assert torch.isfinite(stats_odd[key]) and abs(stats_ref[key].item() - stats_odd[key].item()) < 1e-12


@pytest.mark.parametrize("name", sorted(CASES))
def test_micro_batches_sum_to_full_batch_gradient(name: str) -> None:
    torch.manual_seed(0)
    P, G, T = 3, 2, 5
    mask = mask_of([5, 2, 0, 4, 1, 3], T)
    logp = (-torch.rand(P * G, T, dtype=F64) * 3).requires_grad_(True)
    old = logp.detach() + 0.4 * torch.randn(P * G, T, dtype=F64)
    adv = torch.randn(P * G, dtype=F64)
    w = token_weights(mask, G, get_loss(name).aggregation, max_len=T, adv_B=adv, dtype=F64)
    cfg = loss_config(name, eps_low=0.2, eps_high=0.25) if name == "gspo" else loss_config(name)
    full, _ = policy_loss(LossInputs(logp, old, adv, mask, w), cfg)
    (g_full,) = torch.autograd.grad(full, logp)
    for cut in (2, 3):
        total = torch.zeros((), dtype=F64)
        for rows in (slice(0, cut), slice(cut, P * G)):
            inp = LossInputs(logp[rows], old[rows], adv[rows], mask[rows], w[rows])
            total = total + policy_loss(inp, cfg)[0]
        (g_micro,) = torch.autograd.grad(total, logp)
        assert abs(total.item() - full.item()) < TOL
        assert torch.allclose(g_micro, g_full, atol=TOL, rtol=0) and g_full.abs().max() > 1e-3


def test_objective_is_policy_term_plus_kl_anchor_minus_entropy_bonus() -> None:
    """The whole objective in one call (before: the KL anchor and the entropy bonus were added in
    train/step.py). On-policy hand batch: policy term = CASES' on_loss, k1 = 1 on every loss token
    (its token mean 1), entropy 0.5 on every token (seq-mean-token-mean weights sum to 1)."""
    inp = build("grpo", [[0.0] * n for n in LENGTHS])
    mask = mask_of(LENGTHS)
    entropy = torch.full_like(inp.logp, 0.5)
    ref_logp = inp.logp.detach() - 1.0  # d = ref - logp = -1: k1 = 1
    kl_weights = token_weights(mask, 2, "token_mean", dtype=F64)
    cfg = loss_config("grpo", kl_coef=0.1, entropy_coef=0.01, kl_estimator="k1")
    loss, stats = objective(inp, cfg, entropy, ref_logp, kl_weights)
    policy = CASES["grpo"]["on_loss"]
    assert abs(loss.item() - (policy + 0.1 * 1.0 - 0.01 * 0.5)) < TOL
    assert abs(stats["policy_loss"].item() - policy) < TOL and abs(stats["kl_ref"].item() - 1.0) < TOL
    assert stats["loss"].item() == loss.item() and all(not v.requires_grad for v in stats.values())
    loss.backward()  # d/dlogp: -A w (policy) + kl_coef / 9 (k1 = logp - ref, token mean over 9 tokens)
    expected = -torch.tensor(ADV, dtype=F64)[:, None] * hand_weights("grpo") + 0.1 / 9 * mask
    assert torch.allclose(inp.logp.grad, expected, atol=TOL, rtol=0)


def test_objective_without_anchor_or_bonus_is_the_policy_term_exactly() -> None:
    inp = build("dapo", logs(PPO_RHO))
    loss, stats = objective(inp, loss_config("dapo"), torch.ones_like(inp.logp))
    assert loss.item() == policy_loss(inp, loss_config("dapo"))[0].item() == stats["policy_loss"].item()
    assert "kl_ref" not in stats


# ----------------------------------------------------------------------------- aggregation
def test_token_weights_hand_normalisers() -> None:
    mask = mask_of(LENGTHS)
    adv = torch.tensor(ADV, dtype=F64)
    for mode, row_w in ROW_W.items():
        w = token_weights(mask, 2, mode, max_len=L_MAX, adv_B=adv, dtype=F64)
        expected = rows_to_tensor([[row_w[i]] * n for i, n in enumerate(LENGTHS)])
        assert torch.allclose(w, expected, atol=1e-12, rtol=0), mode
    assert abs(token_weights(mask, 2, "constant", max_len=8, dtype=F64)[0, 0].item() - 1 / 32) < 1e-12


def test_token_weights_zero_length_rows() -> None:
    mask = mask_of([3, 0, 2, 3])
    adv = torch.tensor([-1.0, 1.0, 0.5, -0.5], dtype=F64)  # the only winner of group 0 is empty
    rows = {
        "seq_mean_token_mean": [1 / 9, 0, 1 / 6, 1 / 9],  # B counts the 3 live rows
        "token_mean": [1 / 8] * 4,
        "prompt_mean": [1 / 6, 0, 1 / 10, 1 / 10],
        "constant": [1 / 9] * 4,
        "wapo": [0, 0, 1 / 6, 0],  # one group with a (non-empty) winner
    }
    for mode, row_w in rows.items():
        w = token_weights(mask, 2, mode, max_len=3, adv_B=adv, dtype=F64)
        expected = rows_to_tensor([[row_w[i]] * n for i, n in enumerate([3, 0, 2, 3])])
        assert torch.allclose(w, expected, atol=1e-12, rtol=0), mode
        empty = token_weights(torch.zeros(4, 3, dtype=torch.bool), 2, mode, max_len=3, adv_B=adv)
        assert torch.equal(empty, torch.zeros(4, 3)), mode


def test_wapo_normaliser_counts_groups_with_a_winner() -> None:
    mask = mask_of(LENGTHS)
    adv = torch.tensor([1.0, -1.0, 0.0, 0.0], dtype=F64)
    w = token_weights(mask, 2, "wapo", max_len=3, adv_B=adv, dtype=F64)
    assert torch.allclose(w[0], torch.full((3,), 1 / 6, dtype=F64)) and torch.all(w[1:] == 0)


def test_token_weights_bad_input() -> None:
    mask = mask_of(LENGTHS)
    with pytest.raises(ValueError, match="unknown aggregation"):
        token_weights(mask, 2, "seq_mean")
    with pytest.raises(ValueError, match="max_len"):
        token_weights(mask, 2, "constant")
    with pytest.raises(ValueError, match="max_len=2"):
        token_weights(mask, 2, "constant", max_len=2)
    with pytest.raises(ValueError, match="adv_B"):
        token_weights(mask, 2, "wapo", max_len=3)
    with pytest.raises(ValueError, match="groups of 3"):
        token_weights(mask, 3, "prompt_mean")


# ----------------------------------------------------------------------------- registry, KL
def test_unknown_loss_name_suggests_the_closest() -> None:
    inp = build("grpo", logs(PPO_RHO))
    with pytest.raises(ValueError, match=r"did you mean 'grpo'.*registered: cispo, dapo"):
        policy_loss(inp, LossConfig(name="grp0"))


def test_loss_config_defaults_and_overrides() -> None:
    assert loss_config("dapo").eps_high == 0.28 and loss_config("dapo").eps_low == 0.2
    assert (loss_config("gspo").eps_low, loss_config("gspo").eps_high) == (3e-4, 4e-4)
    grpo = loss_config("grpo")
    assert (grpo.eps_low, grpo.eps_high, grpo.eps_max, grpo.wapo_eps, grpo.cispo_eps_low) == (0.2, 0.2, 4.0, 9.0, None)
    assert (grpo.name, grpo.aggregation, grpo.std_norm) == ("grpo", "seq_mean_token_mean", "group")
    assert grpo == resolve_loss(LossConfig(name="grpo")) and loss_config("cispo").eps_max == 4.0
    assert loss_config("dapo", eps_high=0.3).eps_high == 0.3
    with pytest.raises(ValueError, match="did you mean 'eps_high'"):
        loss_config("dapo", eps_hgh=0.3)
    specs = {n: (s.aggregation, s.std_norm) for n, s in LOSSES.items()}
    assert specs["grpo"] == ("seq_mean_token_mean", "group") and specs["cispo"] == ("prompt_mean", "batch")
    assert specs["dr_grpo"] == ("constant", "none") and specs["wapo"] == ("wapo", "none")
    assert all(s.paper for s in LOSSES.values())


def test_loss_inputs_shape_checks() -> None:
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="adv"):
        LossInputs(x, x, torch.zeros(3), x, x)
    with pytest.raises(ValueError, match="weights"):
        LossInputs(x, x, torch.zeros(2), x, torch.zeros(2, 4))


def test_kl_estimators_hand_values() -> None:
    logp = torch.tensor([[-1.0, -2.0, -1.5]], dtype=F64)
    ref = torch.tensor([[-2.0, -1.0, -1.5]], dtype=F64)
    expected = {
        "k1": [1.0, -1.0, 0.0],
        "k2": [0.5, 0.5, 0.0],
        "k3": [math.exp(-1) + 1 - 1, math.e - 1 - 1, 0.0],
    }
    for est, values in expected.items():
        assert torch.allclose(kl_penalty(logp, ref, est), torch.tensor([values], dtype=F64), atol=TOL), est
    with pytest.raises(ValueError, match="k1, k2, k3"):
        kl_penalty(logp, ref, "k4")


def test_kl_mask_zeroes_padding_without_nan() -> None:
    logp = torch.tensor([[-1.0, 5.0]], dtype=F64, requires_grad=True)
    ref = torch.tensor([[-2.0, -math.inf]], dtype=F64)
    kl = kl_penalty(logp, ref, "k3", mask=torch.tensor([[True, False]]))
    kl.sum().backward()
    assert abs(kl[0, 0].item() - math.exp(-1)) < TOL and kl[0, 1].item() == 0.0
    # d k3 / d logp = 1 - exp(ref - logp)
    assert abs(logp.grad[0, 0].item() - (1 - math.exp(-1))) < TOL and logp.grad[0, 1].item() == 0.0


# ----------------------------------------------------------------------------- one settings class
def test_the_config_loss_section_is_the_loss_settings_class() -> None:
    import rlvr.algo.losses as L
    from rlvr.algo.advantages import STD_NORMS
    from rlvr.config import STD_NORMS as CONFIG_STD_NORMS

    assert L.LossConfig is LossConfig and STD_NORMS == CONFIG_STD_NORMS
    assert set(LOSS_DEFAULTS) == {f for f, v in vars(LossConfig()).items() if v is None}


def test_resolve_loss_fills_every_optional_field_in_order() -> None:
    for name, spec in LOSSES.items():
        r = resolve_loss(LossConfig(name=name))
        assert all(getattr(r, k) == spec.defaults.get(k, v) for k, v in LOSS_DEFAULTS.items())
        assert (r.aggregation, r.std_norm) == (spec.aggregation, spec.std_norm)
        assert resolve_loss(r) == r  # idempotent
    dapo = resolve_loss(load_config("dapo").loss)
    assert dapo.eps_high == 0.28 and dapo.eps_low == 0.2  # the variant's default over the global one
    explicit = resolve_loss(load_config("dapo", ["loss.eps_high=0.3", "loss.aggregation=prompt_mean"]).loss)
    assert explicit.eps_high == 0.3 and explicit.aggregation == "prompt_mean" and explicit.std_norm == "group"
    assert loss_config("dapo", eps_high=0.3).eps_high == 0.3
    with pytest.raises(ValueError, match="did you mean 'grpo'"):
        resolve_loss(LossConfig(name="grp0"))


def test_cispo_eps_low_from_yaml_and_overrides_reaches_the_loss(tmp_path) -> None:
    assert resolve_loss(load_config(None).loss).cispo_eps_low is None  # no floor unless set
    lc = resolve_loss(load_config(None, ["loss.cispo_eps_low=0.5"]).loss)
    assert lc.name == "cispo" and lc.cispo_eps_low == 0.5 and lc.eps_max == 4.0
    p = tmp_path / "c.yaml"
    p.write_text("loss:\n  name: cispo\n  cispo_eps_low: 0.2\n  eps_max: 6\n")
    from_yaml = resolve_loss(load_config(p).loss)
    assert (from_yaml.cispo_eps_low, from_yaml.eps_max) == (0.2, 6.0)
    assert from_yaml == loss_config("cispo", cispo_eps_low=0.2, eps_max=6.0)
    # the floor acts: the same hand case as test_cispo_lower_bound_and_cap, from the config
    inp = build("cispo", logs(CISPO_RHO))
    stats = policy_loss(inp, from_yaml)[1]
    assert abs(stats["clip_frac_low"].item() - 2 / 9) < TOL
    with pytest.raises(ConfigError, match=r"loss.cispo_eps_low: must be in \(0, 1\]"):
        load_config(None, ["loss.cispo_eps_low=1.5"])


def test_policy_loss_takes_the_resolved_config_only() -> None:
    """Before: ``policy_loss(name, inp, cfg)`` took the name twice and quietly re-resolved a config
    whose optional fields were None (with the name argument's variant, whatever ``cfg.name`` said)."""
    inp = build("dapo", logs(PPO_RHO))
    with pytest.raises(ValueError, match="eps_low, eps_high, eps_max, wapo_eps unresolved; pass resolve_loss"):
        policy_loss(inp, LossConfig(name="dapo"))
    assert policy_loss(inp, resolve_loss(LossConfig(name="dapo")))[0].item() == \
        policy_loss(inp, loss_config("dapo"))[0].item()


def test_register_checks_defaults_against_the_config_fields() -> None:
    fn = LOSSES["grpo"].fn
    with pytest.raises(ValueError, match="unknown LossConfig fields.*did you mean 'eps_high'"):
        register("_bad1", aggregation="token_mean", std_norm="group", paper="-", defaults={"eps_hi": 0.3})(fn)
    with pytest.raises(ValueError, match="may set only"):
        register("_bad2", aggregation="token_mean", std_norm="group", paper="-", defaults={"kl_coef": 0.1})(fn)
    with pytest.raises(ConfigError, match="loss.eps_low"):
        register("_bad3", aggregation="token_mean", std_norm="group", paper="-", defaults={"eps_low": -1})(fn)
    assert not {"_bad1", "_bad2", "_bad3"} & set(LOSSES)
