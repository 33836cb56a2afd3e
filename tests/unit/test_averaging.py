"""Parallel SFT+RL averaging: theta <- theta + w d_RL + (1 - w) d_SFT with two independent AdamWs."""

from __future__ import annotations

import copy

import pytest
import torch

from rlvr.config import load_config
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.tasks.base import Verdict
from rlvr.train.averaging import averaged_update, parallel_step, snapshot
from rlvr.train.sft import sft_loss

torch.set_num_threads(1)
TOK = CharTokenizer()
PAIRS_A = [("Q:1+2\n", "1+2=3\nA:3"), ("Q:2*4\n", "2*4=8\nA:8")]
PAIRS_B = [("R:abc\n", "A:cba"), ("U:xy\n", "A:XY")]
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.99), 1e-8, 0.01


def tiny64() -> TinyGPT:
    torch.manual_seed(0)
    cfg = load_config(None, ["model.n_layer=1", "model.d_model=16", "model.n_head=2",
                             "model.fp32_logits=false"]).model
    return TinyGPT(cfg, TOK.vocab_size).double()


def adamw(model):
    return torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)


def hand_adamw(theta, grads, state, t):
    """AdamW by hand (decoupled decay, bias-corrected moments) -> the update d (not applied)."""
    b1, b2 = BETAS
    out = []
    for i, (p, g) in enumerate(zip(theta, grads)):
        m, v = state.get(i, (torch.zeros_like(p), torch.zeros_like(p)))
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        state[i] = (m, v)
        decayed = p * (1 - LR * WD)
        out.append(decayed - LR * (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + EPS) - p)
    return out


def grads_at(model, theta, pairs):
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for p, t in zip(ref.parameters(), theta):
            p.copy_(t)
    return torch.autograd.grad(sft_loss(ref, TOK, pairs), list(ref.parameters()))


def test_averaged_update_equals_hand_computed_average_of_two_adamw_updates():
    model, w = tiny64(), 0.3
    opt_a, opt_b = adamw(model), adamw(model)

    def step(opt, pairs):
        def fn():
            opt.zero_grad()
            sft_loss(model, TOK, pairs).backward()
            opt.step()
            return {}
        return fn

    theta = snapshot(model)
    state_a, state_b, theta_gradavg, state_g = {}, {}, list(theta), {}
    for t in (1, 2):
        averaged_update(model, [(w, step(opt_a, PAIRS_A)), (1 - w, step(opt_b, PAIRS_B))])
        d_a = hand_adamw(theta, grads_at(model, theta, PAIRS_A), state_a, t)
        d_b = hand_adamw(theta, grads_at(model, theta, PAIRS_B), state_b, t)
        theta = [p + w * a + (1 - w) * b for p, a, b in zip(theta, d_a, d_b)]
        # the tempting wrong method: one Adam on the averaged gradient
        ga, gb = grads_at(model, theta_gradavg, PAIRS_A), grads_at(model, theta_gradavg, PAIRS_B)
        g = [w * x + (1 - w) * y for x, y in zip(ga, gb)]
        theta_gradavg = [p + d for p, d in zip(theta_gradavg, hand_adamw(theta_gradavg, g, state_g, t))]
    got = snapshot(model)
    assert got[0].dtype == torch.float64
    err = max(float((a - b).abs().max()) for a, b in zip(got, theta))
    assert err < 1e-12
    wrong = max(float((a - b).abs().max()) for a, b in zip(got, theta_gradavg))
    assert wrong > 1e-4  # averaging updates is not averaging gradients: the check can tell them apart
    # each optimiser kept its own moments: opt_a's first moment is the hand one of PAIRS_A only
    p0 = next(iter(model.parameters()))
    assert torch.allclose(opt_a.state[p0]["exp_avg"], state_a[0][0], atol=1e-14, rtol=0)
    assert torch.allclose(opt_b.state[p0]["exp_avg"], state_b[0][0], atol=1e-14, rtol=0)


class HalfRight:
    """Stub verifier with mixed rewards on any model: right iff the completion length is even."""

    name = "stub"

    def verify(self, completion, problem):
        ok = len(completion) % 2 == 0
        return Verdict(float(ok), "right" if ok else "wrong", completion)


def test_parallel_step_is_the_weighted_sum_of_an_rl_and_an_sft_update():
    from rlvr.train.loop import build_state
    from rlvr.train.sft import sft_optimizer, sft_update
    from rlvr.train.step import rl_step

    cfg = load_config(None, ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "loss.name=grpo",
                             "algo.prompts_per_step=4", "algo.group_size=4", "algo.minibatches=1",
                             "sampling.max_new_tokens=12", "task.train_size=40", "optim.warmup_steps=0",
                             "optim.lr=0.01"])
    torch.manual_seed(0)
    model = TinyGPT(cfg.model, TOK.vocab_size)
    st = build_state(cfg, model, TOK)
    st.task = HalfRight()
    sft_opt = sft_optimizer(model, 0.01)
    batch = PAIRS_A + PAIRS_B
    theta0 = snapshot(model)

    st_rl = copy.deepcopy(st)  # the RL update alone, same rollouts (the generator is copied too)
    m_rl = rl_step(st_rl, 5)
    d_rl = [a - b for a, b in zip(snapshot(st_rl.model), theta0)]
    sft_model, sft_opt_copy = copy.deepcopy((model, sft_opt))
    sft_update(sft_model, TOK, batch, sft_opt_copy, cfg.optim.grad_clip)
    d_sft = [a - b for a, b in zip(snapshot(sft_model), theta0)]
    assert min(sum(float(d.norm()) for d in ds) for ds in (d_rl, d_sft)) > 1e-4  # both really move

    m = parallel_step(st, sft_opt, batch, 5, w=0.5)
    want = [t + 0.5 * a + 0.5 * b for t, a, b in zip(theta0, d_rl, d_sft)]
    err = max(float((a - b).abs().max()) for a, b in zip(snapshot(model), want))
    assert err < 1e-6
    assert m["reward"] == pytest.approx(m_rl["reward"]) and "sft_loss" in m
    p0 = next(iter(model.parameters()))  # two independent Adam states, each as if alone
    q0 = next(iter(st_rl.model.parameters()))
    assert torch.allclose(st.opt.state[p0]["exp_avg"], st_rl.opt.state[q0]["exp_avg"], atol=1e-7)
    s0 = next(iter(sft_model.parameters()))
    assert torch.allclose(sft_opt.state[p0]["exp_avg"], sft_opt_copy.state[s0]["exp_avg"], atol=1e-7)
