"""On-policy distillation (``loss.name: opd``): hand-computed divergences and gradients, the
registered loss, its config checks, the teacher's vocabulary check and its place in the one step.

Hand logits (V = 2): the student's z = [0, ln 3] gives s = [1/4, 3/4]; the teacher's [0, 0] gives
t = [1/2, 1/2]. With KL(p || q) = sum_v p_v ln(p_v / q_v):

* reverse KL(s || t) = 1/4 ln(1/2) + 3/4 ln(3/2); d/dz_j = s_j (ln(s_j / t_j) - KL(s || t));
* forward KL(t || s) = 1/2 ln 2 + 1/2 ln(2/3);     d/dz = s - t = [-1/4, 1/4];
* JSD(1/2): m = (s + t) / 2 = [3/8, 5/8], 1/2 KL(t || m) + 1/2 KL(s || m);
  d/dz_j = (1 - beta) s_j (l_j - sum_k s_k l_k), l = ln(s / m) = [ln(2/3), ln(6/5)]
  (dJSD/ds_k = (1 - beta) ln(s_k / m_k): the other terms cancel because (1 - beta) s_k + beta t_k = m_k).
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from rlvr.algo.distill import generalized_jsd, reverse_kl
from rlvr.algo.losses import LossInputs, loss_config, objective, policy_loss, token_weights
from rlvr.config import ConfigError, load_config
from rlvr.errors import UserError
from rlvr.model.io import save_policy
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.train.teacher import check_same_vocabulary, check_teacher_files

F64 = torch.float64
TOL = 1e-9
S = [0.25, 0.75]
T_ = [0.5, 0.5]
M = [0.375, 0.625]
REVERSE = 0.25 * math.log(0.5) + 0.75 * math.log(1.5)
FORWARD = 0.5 * math.log(2.0) + 0.5 * math.log(2.0 / 3.0)
JSD_HALF = 0.5 * (0.5 * math.log(0.5 / 0.375) + 0.5 * math.log(0.5 / 0.625)) \
    + 0.5 * (0.25 * math.log(0.25 / 0.375) + 0.75 * math.log(0.75 / 0.625))
GRAD_REVERSE = [S[j] * (math.log(S[j] / T_[j]) - REVERSE) for j in range(2)]
GRAD_FORWARD = [-0.25, 0.25]
_L = [math.log(S[j] / M[j]) for j in range(2)]
GRAD_JSD_HALF = [0.5 * S[j] * (_L[j] - (S[0] * _L[0] + S[1] * _L[1])) for j in range(2)]
HAND = {1.0: (REVERSE, GRAD_REVERSE), 0.0: (FORWARD, GRAD_FORWARD), 0.5: (JSD_HALF, GRAD_JSD_HALF)}


def student_logits() -> torch.Tensor:
    return torch.tensor([[[0.0, math.log(3.0)]]], dtype=F64, requires_grad=True)


def teacher_logits() -> torch.Tensor:
    return torch.zeros(1, 1, 2, dtype=F64)


@pytest.mark.parametrize("beta", sorted(HAND))
def test_divergence_and_gradient_by_hand(beta: float) -> None:
    value, grad = HAND[beta]
    z = student_logits()
    div = generalized_jsd(z.double(), teacher_logits(), beta)
    div.sum().backward()
    assert div.shape == (1, 1) and abs(div.item() - value) < 1e-6  # computed in float32
    assert torch.allclose(z.grad[0, 0], torch.tensor(grad, dtype=F64), atol=1e-6, rtol=0)


def test_the_ends_are_the_two_kls_and_jsd_lies_between_in_scale() -> None:
    """TRL's convention: beta 1 = reverse KL, 0 = forward KL; JSD(beta) / (1 - beta) -> reverse KL as
    beta -> 1 and JSD(beta) / beta -> forward KL as beta -> 0."""
    z, t = student_logits().detach(), teacher_logits()
    near_one = generalized_jsd(z, t, 1 - 1e-4).item() / 1e-4
    near_zero = generalized_jsd(z, t, 1e-4).item() / 1e-4
    assert abs(near_one - REVERSE) < 1e-3 and abs(near_zero - FORWARD) < 1e-3
    assert abs(reverse_kl(z, t).item() - REVERSE) < 1e-6
    assert generalized_jsd(z, z, 0.5).abs().item() < 1e-7  # a student equal to its teacher: zero


def test_no_gradient_reaches_the_teacher_and_vocabularies_must_match() -> None:
    t = teacher_logits().requires_grad_(True)
    generalized_jsd(student_logits(), t, 1.0).sum().backward()
    assert t.grad is None
    with pytest.raises(ValueError, match="share the student's vocabulary"):
        generalized_jsd(student_logits(), torch.zeros(1, 1, 3), 1.0)
    with pytest.raises(ValueError, match="beta must be in"):
        generalized_jsd(student_logits(), teacher_logits(), 1.5)


def _batch(beta_rows: int = 4):
    """B = 4 rows (2 groups of 2), T = 2, V = 2: every row's first token has the hand logits; row 1's
    second token and row 3's second token are off the loss mask (padding / a tool's output), with
    garbage logits there."""
    B, T = beta_rows, 2
    z = torch.zeros(B, T, 2, dtype=F64)
    z[:, :, 1] = math.log(3.0)
    mask = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 0]], dtype=torch.bool)
    teacher = torch.zeros(B, T, 2, dtype=F64)
    teacher[~mask] = torch.tensor([40.0, -40.0], dtype=F64)  # far from the student: large if counted
    z = z.requires_grad_(True)
    logp = torch.log_softmax(z, -1)[..., 1]
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5], dtype=F64)
    return z, logp, teacher, mask, adv


def _opd_loss(cfg, z, logp, teacher, mask, adv):
    """(loss, stats, token weights) of ``policy_loss`` on the batch, on-policy (old_logp = logp)."""
    w = token_weights(mask, 2, cfg.aggregation, dtype=F64)
    inp = LossInputs(logp=logp, old_logp=logp.detach(), adv=adv, mask=mask, weights=w, logits=z,
                     teacher_logits=teacher)
    loss, stats = policy_loss(inp, cfg)
    return loss, stats, w


@pytest.mark.parametrize("beta", sorted(HAND))
def test_opd_loss_is_the_token_mean_divergence_with_its_hand_gradient(beta: float) -> None:
    z, logp, teacher, mask, adv = _batch()
    cfg = loss_config("opd", distill_beta=beta)
    loss, stats, _ = _opd_loss(cfg, z, logp, teacher, mask, adv)
    loss.backward()
    value, grad = HAND[beta]
    assert cfg.aggregation == "token_mean" and abs(loss.item() - value) < 1e-6  # 6 loss tokens, all equal
    want = torch.zeros_like(z)
    want[mask] = torch.tensor(grad, dtype=F64) / 6
    assert torch.allclose(z.grad, want, atol=1e-7, rtol=0)  # off-mask tokens: exactly zero
    assert abs(stats["distill_div"].item() - value) < 1e-6 and abs(stats["distill_kl"].item() - REVERSE) < 1e-6


def test_reward_coef_adds_grpo_surrogate_of_the_verifier_advantages() -> None:
    """On-policy (ratio 1) the surrogate's gradient on logp is -A w per token: with reward_coef 0.5 the
    logp gradient is -0.5 A / 6 on every loss token; with 0 it is zero (pure distillation)."""
    for coef in (0.0, 0.5):
        z, logp, teacher, mask, adv = _batch()
        logp = logp.detach().requires_grad_(True)
        cfg = loss_config("opd", reward_coef=coef)
        loss, _, w = _opd_loss(cfg, z, logp, teacher, mask, adv)
        loss.backward()
        assert abs(loss.item() - (REVERSE - coef * float((adv[:, None] * w).sum()))) < 1e-6
        got = torch.zeros_like(logp) if logp.grad is None else logp.grad  # coef 0: logp is not used at all
        assert torch.allclose(got, -coef * adv[:, None] * w, atol=1e-12, rtol=0)


def test_micro_batches_sum_to_the_full_batch_gradient() -> None:
    torch.manual_seed(0)
    B, T, V = 6, 4, 5
    z = torch.randn(B, T, V, dtype=F64, requires_grad=True)
    teacher = torch.randn(B, T, V, dtype=F64)
    mask = torch.arange(T)[None, :] < torch.tensor([4, 2, 0, 3, 1, 4])[:, None]
    adv = torch.randn(B, dtype=F64)
    cfg = loss_config("opd", distill_beta=0.3, reward_coef=0.2)
    w = token_weights(mask, 2, cfg.aggregation, dtype=F64)

    def loss_of(rows):
        logp = torch.log_softmax(z[rows], -1)[..., 0]
        inp = LossInputs(logp, logp.detach(), adv[rows], mask[rows], w[rows], logits=z[rows],
                         teacher_logits=teacher[rows])
        return policy_loss(inp, cfg)[0]

    (full,) = torch.autograd.grad(loss_of(slice(None)), z)
    (split,) = torch.autograd.grad(loss_of(slice(0, 2)) + loss_of(slice(2, B)), z)
    assert torch.allclose(full, split, atol=1e-12, rtol=0) and full.abs().max() > 1e-3


def test_opd_without_logits_is_an_error_and_objective_adds_nothing_else() -> None:
    z, logp, teacher, mask, adv = _batch()
    cfg = loss_config("opd")
    w = token_weights(mask, 2, cfg.aggregation, dtype=F64)
    with pytest.raises(ValueError, match="needs the student's and the teacher's logits"):
        policy_loss(LossInputs(logp, logp.detach(), adv, mask, w), cfg)
    inp = LossInputs(logp, logp.detach(), adv, mask, w, logits=z, teacher_logits=teacher)
    loss, stats = objective(inp, cfg, torch.zeros_like(logp))
    assert abs(loss.item() - REVERSE) < 1e-6 and stats["policy_loss"].item() == loss.item()
    with pytest.raises(ValueError, match="teacher_logits has shape"):
        LossInputs(logp, logp.detach(), adv, mask, w, logits=z, teacher_logits=teacher[:, :1])


def test_config_checks_at_load() -> None:
    with pytest.raises(ConfigError, match="loss.teacher: loss.name=opd .* needs a teacher"):
        load_config("quickstart", ["loss.name=opd", "algo.zero_var_filter=false"])
    with pytest.raises(ConfigError, match="algo.zero_var_filter: must be false with loss.name=opd"):
        load_config("quickstart", ["loss.name=opd", "loss.teacher=t/x/y"])
    for key in ("loss.teacher=t/x/y", "loss.distill_beta=0.5", "loss.reward_coef=1"):
        with pytest.raises(ConfigError, match="is read only by loss.name=opd"):
            load_config("quickstart", [key])
    with pytest.raises(ConfigError, match="loss.distill_beta"):
        load_config("opd", ["loss.distill_beta=1.5"])
    with pytest.raises(ConfigError, match="loss.reward_coef"):
        load_config("opd", ["loss.reward_coef=-1"])
    cfg = load_config("opd", ["loss.teacher=t/x/y", "loss.distill_beta=0", "loss.reward_coef=0.25"])
    assert (cfg.loss.name, cfg.loss.distill_beta, cfg.loss.reward_coef) == ("opd", 0.0, 0.25)


def test_a_missing_teacher_fails_validation_with_its_key(tmp_path) -> None:
    from rlvr.train.validate import validate

    with pytest.raises(ConfigError, match="loss.teacher: .* does not exist"):
        validate(load_config("opd", [f"loss.teacher={tmp_path}/none/here"]))
    with pytest.raises(UserError, match="no model_config.json or config.json inside"):
        validate(load_config("opd", [f"loss.teacher={tmp_path}"]))  # a folder that holds no model
    cfg = load_config("opd", ["model.n_layer=1", "model.d_model=16", "model.n_head=2"])
    save_policy(TinyGPT(cfg.model, CharTokenizer().vocab_size), CharTokenizer(), tmp_path / "teacher")
    validate(load_config("opd", [f"loss.teacher={tmp_path / 'teacher'}"]))  # the tiny base's tokenizer: accepted


def test_a_mismatched_teacher_fails_before_the_run_folder_exists(tmp_path) -> None:
    """The teacher's tokenizer and output width are read from its files and compared with the
    student's before ``train`` creates the run folder (before: only once both models were loaded,
    after config.yaml and machine.json were written): a refused run leaves no folder behind."""
    from rlvr.train.loop import train

    small = ["model.n_layer=1", "model.d_model=16", "model.n_head=2"]
    model_cfg = load_config("quickstart", small).model
    tok = CharTokenizer()
    save_policy(TinyGPT(model_cfg, tok.vocab_size), tok, tmp_path / "student")
    digits = CharTokenizer("0123456789+-=")
    save_policy(TinyGPT(model_cfg, digits.vocab_size), digits, tmp_path / "digits")
    save_policy(TinyGPT(model_cfg, tok.vocab_size + 1), tok, tmp_path / "wide")  # same tokenizer, one more logit
    out = tmp_path / "runs"
    for teacher, why in (("digits", "its tokenizer differs"), ("wide", f"{tok.vocab_size + 1} logits")):
        cfg = load_config("opd", [*small, f"model.init_from={tmp_path / 'student'}", f"train.out_dir={out}",
                                  f"loss.teacher={tmp_path / teacher}"])
        with pytest.raises(UserError, match=why):
            train(cfg, progress="none")
        with pytest.raises(UserError, match=why):
            train(cfg, run_dir=tmp_path / "named", progress="none")
        assert not out.exists() and not (tmp_path / "named").exists()


def test_a_teacher_with_another_tokenizer_or_vocabulary_is_refused() -> None:
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=16", "model.n_head=2"])
    tok = CharTokenizer()
    student = TinyGPT(cfg.model, tok.vocab_size)
    check_same_vocabulary(student, tok, copy.deepcopy(student), CharTokenizer(), "same")
    digits = CharTokenizer("0123456789+-=")
    with pytest.raises(UserError, match="loss.teacher=digits: its tokenizer differs"):
        check_same_vocabulary(student, tok, TinyGPT(cfg.model, digits.vocab_size), digits, "digits")
    with pytest.raises(UserError, match="output layer has 99 logits"):
        check_same_vocabulary(student, tok, TinyGPT(cfg.model, 99), CharTokenizer(), "wide")


def test_the_step_scores_the_teacher_in_each_micro_batch(one_thread) -> None:
    """The teacher's logits come from the trainer's own micro-batches: splitting the batch into
    micro-batches of 4 rows gives the update of the whole batch; the teacher stays frozen; a teacher
    equal to the student gives no gradient at all (pure distillation)."""
    from rlvr.algo.losses import resolve_loss
    from rlvr.rollout.engine import sample, sample_params
    from rlvr.train.state import TrainState, sampling_generator
    from rlvr.train.step import policy_update
    from tests.unit.test_step import G, _batch

    common = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"algo.group_size={G}", "algo.minibatches=1",
              "sampling.max_new_tokens=10", "sampling.interruption_budget=0", "optim.grad_clip=0",
              "loss.teacher=t/x/y"]
    tok = CharTokenizer()
    torch.manual_seed(0)
    student = TinyGPT(load_config("opd", common).model, tok.vocab_size)
    teacher = copy.deepcopy(student).requires_grad_(False)
    with torch.no_grad():
        for p in teacher.parameters():
            p.add_(0.1 * torch.randn_like(p))
    frozen = [p.clone() for p in teacher.parameters()]
    params = sample_params(load_config("opd", common).sampling, tok)
    rb = sample(student, tok, [p for p in ["1+2=", "30-4=", "7*6="] for _ in range(G)], params,
                generator=sampling_generator(0, 0))
    batch, adv_B = _batch([[1, 0, 0, 0]] * 3, rb=rb), torch.tensor([1.0, -1.0, 0.5, -0.5] * 3)

    def update(micro: int, teacher_model) -> tuple[dict, list[torch.Tensor]]:
        cfg = load_config("opd", [*common, f"algo.micro_batch_size={micro}"])
        model = copy.deepcopy(student)
        st = TrainState(cfg=cfg, model=model, tok=tok, task=None, opt=torch.optim.SGD(model.parameters(), lr=0.1),
                        data=None, params=params, gen=torch.Generator().manual_seed(1), loss=resolve_loss(cfg.loss),
                        teacher_model=teacher_model)
        return policy_update(st, batch, adv_B, rb.loss_mask), list(model.parameters())

    whole, after_whole = update(0, teacher)
    split, after_split = update(4, teacher)
    assert whole["distill_kl"] > 1e-3 and whole["grad_norm"] > 1e-3
    # a statistic is a row-share-weighted mean of micro-batch token means (as every loss statistic): close
    assert split["distill_kl"] == pytest.approx(whole["distill_kl"], rel=0.01)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(after_whole, after_split))
    assert all(torch.equal(p, q) for p, q in zip(teacher.parameters(), frozen))
    same, _ = update(0, copy.deepcopy(student).requires_grad_(False))
    assert same["distill_kl"] < 1e-6 and same["grad_norm"] < 1e-6


def test_an_hf_teacher_is_built_and_checked_by_its_whole_vocabulary(tmp_path, monkeypatch) -> None:
    """A tiny-hf teacher is built on first use (before: 'not built yet'); against a character-tokenizer
    student it is refused, against a student with the same HF tokenizer it loads frozen."""
    from rlvr.model.io import load_policy
    from rlvr.train.teacher import load_teacher

    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    cfg = load_config("opd", ["model.kind=hf", "model.path=tiny-hf:llama", "loss.teacher=tiny-hf:llama"])
    char_student = TinyGPT(load_config("quickstart", ["model.n_layer=1", "model.d_model=16"]).model, 100)
    with pytest.raises(UserError, match="loss.teacher=tiny-hf:llama: its tokenizer differs"):
        load_teacher(cfg, char_student, CharTokenizer())
    student, tok = load_policy("tiny-hf:llama")
    teacher = load_teacher(cfg, student, tok)
    assert teacher is not None and not any(p.requires_grad for p in teacher.parameters()) and not teacher.training
    check_teacher_files(cfg)  # the same from the files alone: the HF tokenizer and config.json's vocab_size
    with pytest.raises(UserError, match="loss.teacher=tiny-hf:llama: its tokenizer differs"):
        check_teacher_files(load_config("opd", ["loss.teacher=tiny-hf:llama"]))  # the tiny character base
