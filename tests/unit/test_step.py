"""Method fidelity of the one RL step (docs/methods/): each test fails on the behaviour before the
redesign (commit 17d5306), named in its docstring."""

from __future__ import annotations

import copy
import inspect

import pytest
import torch

from rlvr.algo.advantages import mixed_outcome_groups
from rlvr.algo.diagnostics import entropy_dynamics, token_stats_from_logits
from rlvr.algo.losses import resolve_loss
from rlvr.config import load_config
from rlvr.model.logprobs import completion_logits, sequences
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.rollout.engine import sample, sample_params
from rlvr.train.pipeline import make_groups
from rlvr.train.state import TrainState, sampling_generator
from rlvr.train.step import Collected, advantages, micro_step, policy_update, rl_step
from rlvr.types import Problem, RolloutBatch, ScoredBatch, Verdict

G = 4


def _batch(rewards: list[list[float]], correct: list[list[bool]] | None = None, rb: RolloutBatch | None = None):
    P = len(rewards)
    B = P * G
    if rb is None:
        z, one = torch.zeros(B, 2), torch.ones(B, 2, dtype=torch.bool)
        rb = RolloutBatch(prompt_ids=z.long(), prompt_mask=one, completion_ids=z.long(), completion_mask=one,
                          loss_mask=one, behaviour_logp=z, entropy=z, versions=z.long(), finish_reason=["eos"] * B)
    correct = correct or [[r > 0.5 for r in g] for g in rewards]
    verdicts = [Verdict(float(c), "right" if c else "wrong", "1") for g in correct for c in g]
    reward_B = torch.tensor(rewards, dtype=torch.float32).reshape(-1)
    return ScoredBatch(rb, verdicts, reward_B, reward_B.clone(), [Problem(str(p), "q", "1") for p in range(P)], G)


def test_batch_std_is_the_std_of_the_rows_trained_on():
    """Before: the zero-variance groups' zeros entered the batch std (0.354 instead of 0.5 here)."""
    batch = _batch([[1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    kept, adv_B, zero_frac = advantages(batch, "batch", zero_var_filter=True)
    assert kept.n_groups == 1 and zero_frac == pytest.approx(2 / 3)
    # kept group centred: +-0.5; population std over its 4 rows 0.5 -> +-1 (the old std over 12 rows: 0.289)
    assert adv_B.tolist() == pytest.approx([1.0, -1.0, 1.0, -1.0], abs=1e-5)
    _, adv_all, _ = advantages(batch, "batch", zero_var_filter=False)  # without the filter: all rows count
    assert adv_all[:4].tolist() == pytest.approx([0.5 / 0.288675, -0.5 / 0.288675] * 2, rel=1e-4)


def test_dynamic_sampling_keeps_groups_with_mixed_outcomes_not_unequal_rewards():
    """Before: a group kept if its (overlong-shaped) rewards differed, even when every sample was wrong."""
    correct = [[True, False, False, False], [False] * 4, [True] * 4]
    assert mixed_outcome_groups(torch.tensor(correct)).tolist() == [True, False, False]
    shaped = [[1.0, 0.0, 0.0, 0.0], [0.0, -0.25, -1.0, 0.0], [1.0, 1.0, 0.75, 1.0]]  # overlong penalties
    cfg = load_config("quickstart", ["algo.dynamic_sampling=true", f"algo.group_size={G}"])
    kept, filtered = make_groups(cfg, _batch(shaped, correct), worker=0, chunk=0)
    assert [g.batch.problems[0].id for g in kept] == ["0"]
    assert [(r, g.batch.problems[0].id) for r, g in filtered] == [("zero_variance", "1"), ("zero_variance", "2")]


@pytest.fixture
def tiny(one_thread):
    """A random tiny policy, its tokenizer and a sampled batch of 3 prompts x G (seeded)."""
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"algo.group_size={G}",
                                     "sampling.max_new_tokens=10", "sampling.interruption_budget=0",
                                     "optim.grad_clip=0"])
    tok = CharTokenizer()
    torch.manual_seed(0)
    model = TinyGPT(cfg.model, tok.vocab_size)
    params = sample_params(cfg.sampling, tok)
    prompts = [p for p in ["1+2=", "30-4=", "7*6="] for _ in range(G)]
    rb = sample(model, tok, prompts, params, generator=sampling_generator(0, 0))
    return cfg, model, tok, params, rb


def _state(cfg, model, tok, params, **kw) -> TrainState:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return TrainState(cfg=cfg, model=model, tok=tok, task=None, opt=opt, data=None, params=params,
                      gen=torch.Generator().manual_seed(1), loss=resolve_loss(cfg.loss), **kw)


def test_entropy_dynamics_cells_cover_every_micro_batch(tiny):
    """Before: the cells came from the first micro-batch only (and were divided by the number of
    optimiser updates)."""
    cfg, model, tok, params, rb = tiny
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"algo.group_size={G}",
                                     "algo.minibatches=1", "algo.micro_batch_size=4", "sampling.max_new_tokens=10",
                                     "sampling.interruption_budget=0"])
    st = _state(cfg, model, tok, params)
    adv_B = torch.tensor([1.0, -1.0, 0.5, -0.5] * 3)
    batch = _batch([[1, 0, 1, 0]] * 3, rb=rb)
    with torch.no_grad():  # the cells of the whole batch under the policy before the update
        ids, key_mask, tp = sequences(rb)
        stats = token_stats_from_logits(completion_logits(model, ids, key_mask, tp), rb.completion_ids)
    from rlvr.algo.losses import token_weights

    w = token_weights(rb.loss_mask, G, st.loss.aggregation, max_len=10, adv_B=adv_B)
    want = entropy_dynamics(stats, adv_B, rb.loss_mask, w, lr := st.opt.param_groups[0]["lr"])
    got = policy_update(st, batch, adv_B, rb.loss_mask)
    assert lr == 0.1
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-5, abs=1e-9), k
    first = entropy_dynamics({k: t[:4] for k, t in stats.items()}, adv_B[:4], rb.loss_mask[:4], w[:4], lr)
    assert any(abs(first[k] - want[k]) > 1e-3 for k in want)  # the first micro-batch alone differs


def test_kl_anchor_acts_on_every_token_whatever_the_loss_weights(tiny):
    """Before: the KL term was weighted by the policy loss's weights, so under WAPO (winner tokens
    only) a batch without winners got no KL gradient at all."""
    cfg, model, tok, params, rb = tiny
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"algo.group_size={G}",
                                     "loss.name=wapo", "loss.aggregation=", "loss.std_norm=", "loss.kl_coef=1.0",
                                     "algo.minibatches=1", "sampling.max_new_tokens=10",
                                     "sampling.interruption_budget=0", "optim.grad_clip=0"])
    ref = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.05 * torch.randn_like(p))  # a reference that differs, so KL has a gradient
    st = _state(cfg, model, tok, params, ref_model=ref)
    adv_B = -torch.ones(rb.size)  # no winner: WAPO's policy-loss weights are all zero
    out = policy_update(st, _batch([[0, 0, 0, 0]] * 3, rb=rb), adv_B, rb.loss_mask)
    assert out["policy_loss"] == 0.0 and out["kl_ref"] > 0
    assert out["grad_norm"] > 1e-4  # the KL anchor alone moves the policy


def test_micro_step_takes_a_micro_batch_not_eleven_arguments():
    """Before: ``micro_step`` took 11 parameters, two of them dicts it mutated as outputs (issue 46)."""
    assert list(inspect.signature(micro_step).parameters) == ["st", "micro", "diagnostics"]


class _Handed:
    """A source that hands over fixed groups: ``seen`` sampled, ``kept`` to train on."""

    def __init__(self, kept: ScoredBatch, seen: ScoredBatch):
        self.kept, self.seen = kept, seen

    def collect(self, st) -> Collected:
        return Collected(self.kept, self.seen, self.seen.size, self.seen.rollouts.n_tokens)

    def after_update(self, st, collected) -> dict:
        return {}

    def close(self) -> None:
        pass


def test_zero_var_frac_is_the_share_of_every_sampled_group_as_trl_logs_it(tiny):
    """Before: ``zero_var_frac`` was written twice per step, over the sampled groups and then over the
    kept ones, and the second won: with dynamic sampling it read 0 here although 2 of the 3 sampled
    groups had equal rewards. TRL's ``frac_reward_zero_std`` (the sink name) is over every generated
    group; the trained batch's share has its own key."""
    cfg, model, tok, params, rb = tiny
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"algo.group_size={G}",
                                     "sampling.max_new_tokens=10", "sampling.interruption_budget=0",
                                     "reward.kind=verifier", "algo.npr_threshold=0"])
    seen = _batch([[1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]], rb=rb)
    kept = seen.select(torch.tensor([True, False, False]))  # dynamic sampling kept the mixed group
    metrics = rl_step(_state(cfg, model, tok, params), 1, _Handed(kept, seen))
    assert metrics["zero_var_frac"] == pytest.approx(2 / 3) and metrics["zero_var_frac_trained"] == 0.0
    assert "grad_norm" in metrics
