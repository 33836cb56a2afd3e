"""Train/inference mismatch correction (rlvr.algo.mismatch, docs/methods/mismatch.md): hand-computed
weights and gradients for every mode, the metrics, the config checks, and bf16 sampling against an
fp32 trainer (a measurable mismatch that the correction bounds)."""

from __future__ import annotations

import copy
import dataclasses
import math

import pytest
import torch

from rlvr.algo.losses import LossInputs, loss_config, policy_loss, resolve_loss, token_weights
from rlvr.algo.mismatch import correct, is_weights, log_mismatch, merge, mismatch_stats, rejected, summarise
from rlvr.config import IS_CORRECTIONS, ConfigError, LossConfig, load_config
from rlvr.model.logprobs import score
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.rollout.engine import sample, sample_params
from rlvr.train.state import TrainState, sampling_generator
from rlvr.train.step import policy_update
from rlvr.types import Problem, ScoredBatch, Verdict

F64 = torch.float64
C = 2.0
# 2 rows, T = 3; row 1 has 2 loss tokens. d = train - behaviour per token:
D = [[0.1, 1.0, -0.3], [-0.5, 0.2, 0.0]]
MASK = torch.tensor([[True, True, True], [True, True, False]])


def _logps():
    behaviour = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.0, -9.0]], dtype=F64)
    train = behaviour + torch.tensor(D, dtype=F64)
    train[1, 2] = float("nan")  # padding may hold anything
    return train, behaviour


def test_hand_weights_for_every_mode() -> None:
    train, beh = _logps()
    e = math.exp
    # token: ratios e^0.1=1.105, e^1=2.718 (> C), e^-0.3; e^-0.5, e^0.2. Row sums: 0.8 (e^.8=2.226 > C), -0.3
    want = {
        "none": [[1, 1, 1], [1, 1, 1]],
        "token_tis": [[e(0.1), C, e(-0.3)], [e(-0.5), e(0.2), 1]],
        "token_mis": [[e(0.1), 0, e(-0.3)], [e(-0.5), e(0.2), 1]],
        "seq_tis": [[C, C, C], [e(-0.3), e(-0.3), 1]],
        "seq_mis": [[0, 0, 0], [e(-0.3), e(-0.3), 1]],
    }
    assert set(want) == set(IS_CORRECTIONS)
    for mode, w in want.items():
        got = is_weights(train, beh, MASK, mode, C)
        assert not got.requires_grad
        torch.testing.assert_close(got, torch.tensor(w, dtype=F64), atol=1e-12, rtol=0, msg=mode)


def test_masked_modes_reject_exactly_the_tokens_past_the_cap() -> None:
    train, beh = _logps()
    assert rejected(train, beh, MASK, "token_mis", C).tolist() == [[False, True, False], [False, False, False]]
    assert rejected(train, beh, MASK, "seq_mis", C).tolist() == [[True, True, True], [False, False, False]]
    for mode in ("none", "token_tis", "seq_tis"):
        assert not rejected(train, beh, MASK, mode, C).any()


def test_weights_never_overflow_on_long_sequences() -> None:
    beh = torch.zeros(1, 4000, dtype=torch.float32)
    train = beh + 0.5  # product of ratios e^2000 overflows float32 and float64
    mask = torch.ones(1, 4000, dtype=torch.bool)
    assert is_weights(train, beh, mask, "seq_tis", C).max().item() == pytest.approx(C)
    assert is_weights(train, beh, mask, "seq_mis", C).abs().max().item() == 0.0


def test_hand_metrics() -> None:
    train, beh = _logps()
    s = summarise(mismatch_stats(train, beh, MASK, "token_tis", C))
    assert s["mismatch_logp_diff_mean"] == pytest.approx((0.1 + 1.0 + 0.3 + 0.5 + 0.2) / 5)
    assert s["mismatch_logp_diff_max"] == pytest.approx(1.0)
    assert s["mismatch_frac_past_cap"] == pytest.approx(1 / 5)  # token level: only e^1 > 2
    want_w = (math.exp(0.1) + C + math.exp(-0.3) + math.exp(-0.5) + math.exp(0.2)) / 5
    assert s["mismatch_is_weight_mean"] == pytest.approx(want_w)
    seq = summarise(mismatch_stats(train, beh, MASK, "seq_mis", C))
    assert seq["mismatch_frac_past_cap"] == pytest.approx(3 / 5)  # row 0's three tokens (sum 0.8 > log 2)
    # sums from two halves merge to the whole
    halves = merge(mismatch_stats(train[:1], beh[:1], MASK[:1], "none", C),
                      mismatch_stats(train[1:], beh[1:], MASK[1:], "none", C))
    assert summarise(halves) == pytest.approx(summarise(mismatch_stats(train, beh, MASK, "none", C)))


@pytest.mark.parametrize("mode", IS_CORRECTIONS)
def test_hand_gradient_is_weight_times_on_policy_gradient(mode: str) -> None:
    """GRPO with the PPO ratio against the trainer's own log-probs (ratio 1): d loss / d logp_t =
    -A_i * agg_weight_t * w_t, w from the hand table above."""
    train, beh = _logps()
    adv = torch.tensor([1.5, -2.0], dtype=F64)
    logp = torch.where(MASK, train, torch.zeros_like(train)).requires_grad_(True)
    agg = token_weights(MASK, 2, "seq_mean_token_mean", dtype=F64)  # 1/(2*3) row 0, 1/(2*2) row 1
    w = is_weights(train, beh, MASK, mode, C)
    inp = LossInputs(logp=logp, old_logp=logp.detach(), adv=adv, mask=MASK, weights=agg, is_weight=w)
    loss, _ = policy_loss(inp, loss_config("grpo"))
    loss.backward()
    want = -adv[:, None] * agg * w * MASK
    torch.testing.assert_close(logp.grad, want, atol=1e-12, rtol=0)
    # written out for one entry: row 0, token 1 under token_tis: -1.5 * (1/6) * min(e^1, 2) = -0.5
    if mode == "token_tis":
        assert logp.grad[0, 1].item() == pytest.approx(-0.5)


def test_no_correction_is_exactly_the_old_loss() -> None:
    train, beh = _logps()
    logp = torch.where(MASK, train, torch.zeros_like(train))
    agg = token_weights(MASK, 2, "token_mean", dtype=F64)
    adv = torch.tensor([1.0, -1.0], dtype=F64)
    base = LossInputs(logp=logp, old_logp=torch.where(MASK, beh, logp), adv=adv, mask=MASK, weights=agg)
    with_ones = LossInputs(**{**base.__dict__, "is_weight": is_weights(train, beh, MASK, "none", C)})
    assert policy_loss(base, loss_config("dapo"))[0].item() == \
        policy_loss(with_ones, loss_config("dapo"))[0].item()


def test_correct_is_the_weights_the_kept_tokens_and_the_sums_in_one_call() -> None:
    """One call where the step made three with the same five arguments."""
    train, beh = _logps()
    for mode in IS_CORRECTIONS:
        c = correct(train, beh, MASK, mode, C)
        assert torch.equal(c.weights, is_weights(train, beh, MASK, mode, C)), mode
        assert torch.equal(c.keep, MASK & ~rejected(train, beh, MASK, mode, C)), mode
        assert c.sums == mismatch_stats(train, beh, MASK, mode, C), mode
    # token_mis drops row 0's token 1 (ratio e^1 > 2); the other tokens stay
    assert correct(train, beh, MASK, "token_mis", C).keep.tolist() == [[True, False, True], [True, True, False]]


def test_config_checks_mode_and_cap() -> None:
    assert LossConfig().is_correction == "none" and LossConfig().is_cap == 2.0
    with pytest.raises(ConfigError, match="loss.is_correction"):
        LossConfig(is_correction="tis")
    with pytest.raises(ConfigError, match="loss.is_cap"):
        LossConfig(is_correction="token_tis", is_cap=0.5)
    cfg = load_config("quickstart", ["loss.is_correction=seq_mis", "loss.is_cap=3"])
    assert (cfg.loss.is_correction, cfg.loss.is_cap) == ("seq_mis", 3.0)
    with pytest.raises(ValueError, match="shape"):
        is_weights(torch.zeros(2, 3), torch.zeros(2, 2), torch.ones(2, 3), "token_tis", C)


# ----------------------------------------------------------------------------- bf16 sampler, fp32 trainer
G = 4
_PROMPTS = [p for p in ["1+2=", "30-4=", "7*6="] for _ in range(G)]


@pytest.fixture
def bf16_batch(one_thread):
    """A tiny policy sampling under bf16 autocast; the trainer is the same weights in float32."""
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"algo.group_size={G}",
                                     "sampling.max_new_tokens=12", "sampling.interruption_budget=0",
                                     "algo.minibatches=1", "optim.grad_clip=0"])
    tok = CharTokenizer()
    torch.manual_seed(0)
    trainer = TinyGPT(cfg.model, tok.vocab_size)
    trainer.set_dtype("float32")
    sampler = copy.deepcopy(trainer)
    sampler.set_dtype("bfloat16")
    params = sample_params(cfg.sampling, tok)
    rb = sample(sampler, tok, _PROMPTS, params, generator=sampling_generator(0, 0))
    return cfg, trainer, tok, params, rb


def test_bf16_sampling_gives_a_measurable_mismatch_that_the_correction_bounds(bf16_batch) -> None:
    cfg, trainer, tok, params, rb = bf16_batch
    train = score(trainer, rb, cfg.sampling.temperature)
    m = rb.loss_mask
    s = summarise(mismatch_stats(train, rb.behaviour_logp, m, "none", 1.01))
    same = sample(trainer, tok, _PROMPTS, params, generator=sampling_generator(0, 0))  # fp32 sampler
    s32 = summarise(mismatch_stats(score(trainer, same), same.behaviour_logp, same.loss_mask, "none", 1.01))
    # measured: bf16 ~5e-5 mean, ~2e-4 max; the fp32 sampler ~2e-8 (float rounding only)
    assert s["mismatch_logp_diff_mean"] > 1e-5 and s["mismatch_logp_diff_max"] > 5e-5
    assert s["mismatch_logp_diff_mean"] > 100 * s32["mismatch_logp_diff_mean"]
    ratio = torch.exp(log_mismatch(train, rb.behaviour_logp, m))
    cap = 1.0 + 0.5 * float(ratio[m].max() - 1.0)  # a cap inside the measured spread: some tokens past it
    assert ratio[m].max() > cap
    past = summarise(mismatch_stats(train, rb.behaviour_logp, m, "token_tis", cap))
    assert 0 < past["mismatch_frac_past_cap"] < 1
    for mode in ("token_tis", "seq_tis", "token_mis", "seq_mis"):
        w = is_weights(train, rb.behaviour_logp, m, mode, cap)
        assert float(w[m].max()) <= cap + 1e-6, mode  # bounded, whatever the raw ratio
    tis = is_weights(train, rb.behaviour_logp, m, "token_tis", cap)
    assert torch.equal(tis[m] < ratio[m] - 1e-7, ratio[m] > cap)  # exactly the tokens past the cap are cut


def _state(cfg, model, tok, params) -> TrainState:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return TrainState(cfg=cfg, model=model, tok=tok, task=None, opt=opt, data=None, params=params,
                      gen=torch.Generator().manual_seed(1), loss=resolve_loss(cfg.loss))


def _scored(rb):
    reward = torch.tensor([1.0, 0.0, 1.0, 0.0] * 3)
    verdicts = [Verdict(float(r), "right" if r else "wrong", "1") for r in reward.tolist()]
    return ScoredBatch(rb, verdicts, reward, reward.clone(), [Problem(str(p), "q", "1") for p in range(3)], G)


@pytest.mark.parametrize("mode", ["none", "token_tis", "seq_mis"])
def test_the_step_logs_the_mismatch_and_applies_the_correction(bf16_batch, mode: str) -> None:
    cfg, trainer, tok, params, rb = bf16_batch
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"algo.group_size={G}",
                                     "sampling.max_new_tokens=12", "algo.minibatches=1", "optim.grad_clip=0",
                                     f"loss.is_correction={mode}"])
    train = score(trainer, rb, 1.0)
    ratio = torch.exp(log_mismatch(train, rb.behaviour_logp, rb.loss_mask))
    cap = 1.0 + 0.5 * float(ratio[rb.loss_mask].max() - 1.0)  # inside the measured spread
    cfg = dataclasses.replace(cfg, loss=dataclasses.replace(cfg.loss, is_cap=cap))
    want = summarise(mismatch_stats(train, rb.behaviour_logp, rb.loss_mask, mode, cap))
    adv_B = torch.tensor([1.0, -1.0, 1.0, -1.0] * 3)
    out = policy_update(_state(cfg, trainer, tok, params), _scored(rb), adv_B, rb.loss_mask)
    for k, v in want.items():  # one mini-batch: the measured rows are every row, before the update
        assert out[k] == pytest.approx(v, rel=1e-4, abs=1e-7), k
    assert out["mismatch_logp_diff_mean"] > 1e-5 and out["mismatch_frac_past_cap"] > 0
    if mode != "none":  # the PPO ratio is against the trainer's own log-probs: exactly 1 on the first pass
        assert out["ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    else:  # against the sampler's: off 1 by the mismatch
        assert out["ratio_mean"] != pytest.approx(1.0, abs=1e-9)
