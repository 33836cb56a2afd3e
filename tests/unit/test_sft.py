"""SFT: data of the three flavours, the completion-only loss, training, distillation filtering."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr.config import ModelConfig, SamplingConfig
from rlvr.errors import UserError
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.tasks.base import Problem, Verdict
from rlvr.tasks.registry import get_task
from rlvr.train.sft import distill_pairs, encode_pairs, keep_correct, sft_loss, sft_pairs, sft_train

torch.set_num_threads(1)
TOK = CharTokenizer()


def tiny(seed: int = 0, **kw) -> TinyGPT:
    torch.manual_seed(seed)
    cfg = ModelConfig(n_layer=1, d_model=32, n_head=2, context=64, **kw)
    return TinyGPT(cfg, TOK.vocab_size)


class Bigram(torch.nn.Module):
    """Mock policy whose next-token logits depend on the current token only: h = E[x], logits = W h."""

    def __init__(self, V: int, D: int = 8):
        super().__init__()
        self.emb = torch.nn.Embedding(V, D)
        self.head = torch.nn.Linear(D, V, bias=False)

    def hidden(self, ids, key_mask=None):
        return self.emb(ids)

    def logits(self, h):
        return self.head(h)


# ----------------------------------------------------------------------------- data
def test_sft_pairs_one_gold_vs_every_gold():
    problems = get_task("arithmetic").problems("train", 200)
    one = sft_pairs(problems, "sft")
    gold = sft_pairs(problems, "sft_gold")
    assert one == [(p.prompt, p.solutions[0]) for p in problems]
    assert any(len(p.solutions) > 1 for p in problems)  # otherwise the two flavours coincide
    assert len(gold) == sum(len(p.solutions) for p in problems) > len(one)
    for p in problems:  # every gold solution, each exactly once, with its own prompt
        assert sorted(c for q, c in gold if q == p.prompt) == sorted(p.solutions)
    with pytest.raises(UserError, match="sft_gold"):
        sft_pairs(problems, "gold")


def test_encode_pairs_layout():
    ids, key_mask, targets, tmask, tp = encode_pairs(TOK, [("Q:1+2\n", "A:3"), ("Q:12*3\n", "A:36")])
    assert tp == 1 + len("Q:12*3\n")  # BOS + longest prompt
    assert ids[0, 0] == TOK.pad_id and not key_mask[0, 0] and ids[1, 0] == TOK.bos_id  # left padding
    assert TOK.decode(targets[1]) == "A:36" and targets[1, 4] == TOK.eos_id  # completion + EOS
    assert tmask.sum(1).tolist() == [4, 5] and targets[0, 4] == TOK.pad_id  # right padding
    assert torch.equal(ids[:, tp:], targets)


# ----------------------------------------------------------------------------- loss
def test_sft_loss_is_completion_nll_by_hand():
    torch.manual_seed(0)
    model = Bigram(TOK.vocab_size).double()
    pairs = [("Q:1+2\n", "A:3"), ("Q:4\n", "A:44")]
    loss = sft_loss(model, TOK, pairs)
    nll, n = 0.0, 0
    for prompt, comp in pairs:  # target y_t given the previous token (a bigram model)
        seq = TOK.encode(prompt, bos=True) + TOK.encode(comp) + [TOK.eos_id]
        for t in range(len(TOK.encode(prompt, bos=True)), len(seq)):
            logp = torch.log_softmax(model.head(model.emb.weight[seq[t - 1]]), -1)
            nll -= float(logp[seq[t]].detach())
            n += 1
    assert n == 4 + 5
    assert float(loss.detach()) == pytest.approx(nll / n, rel=1e-6)  # token_logprobs runs in float32


def test_prompt_tokens_are_not_targets():
    """With a bigram mock the loss sees the prompt only through its last token: changing every
    other prompt token changes neither the loss nor the gradient, and the embedding rows of
    tokens that appear only early in prompts get exactly zero gradient."""
    torch.manual_seed(0)
    model = Bigram(TOK.vocab_size).double()

    def loss_and_grad(pairs):
        model.zero_grad()
        loss = sft_loss(model, TOK, pairs)
        loss.backward()
        return float(loss), model.emb.weight.grad.clone(), model.head.weight.grad.clone()

    a = loss_and_grad([("Q:1+2\n", "A:3"), ("Q:7*8\n", "A:56")])
    b = loss_and_grad([("Zz~#!\n", "A:3"), ("&&&&\n", "A:56")])  # same last prompt token
    assert a[0] == b[0]
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])
    rows = a[1].abs().sum(1)
    for ch in "Q+*178":  # only ever at prompt positions before the last: no gradient
        assert rows[TOK.encode(ch)[0]] == 0
    for ch in "\nA:356":  # inputs of completion predictions: gradient flows
        assert rows[TOK.encode(ch)[0]] > 0
    c = loss_and_grad([("Q:1+2?", "A:3"), ("Q:7*8\n", "A:56")])  # the last prompt token is context
    assert c[0] != a[0]


def test_sft_loss_equals_masked_cross_entropy_on_tiny_gpt():
    model = tiny()
    pairs = [("Q:1+2\n", "A:3"), ("Q:12*3+4\n", "12*3=36;36+4=40\nA:40")]
    ids, key_mask, targets, tmask, tp = encode_pairs(TOK, pairs)
    logits = model(ids, key_mask)[:, :-1]  # (B, L-1, V): position t predicts ids[t + 1]
    labels = ids[:, 1:].clone()
    labels[:, : tp - 1] = -100  # prompt targets ignored
    labels[~key_mask[:, 1:]] = -100  # padding ignored
    masked = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    assert float(sft_loss(model, TOK, pairs)) == pytest.approx(float(masked), rel=1e-5)
    # the unmasked loss (prompt tokens as targets too) is a different number: the mask matters
    full = ids[:, 1:].masked_fill(~key_mask[:, 1:], -100)
    unmasked = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), full.reshape(-1))
    assert abs(float(unmasked) - float(masked)) > 1e-3
    with pytest.raises(UserError, match="no SFT pairs"):
        sft_loss(model, TOK, [])


def test_sft_train_memorises_a_small_set():
    model = tiny()
    pairs = sft_pairs(get_task("arithmetic").problems("train", 4), "sft")
    before = float(sft_loss(model, TOK, pairs))
    log = sft_train(model, TOK, pairs, steps=40, batch_size=4, lr=3e-3, seed=0)
    after = float(sft_loss(model, TOK, pairs))
    assert [r["step"] for r in log] == list(range(1, 41)) and log[-1]["sequences"] == 160
    assert math.isfinite(after) and after < 0.5 * before


# ----------------------------------------------------------------------------- distillation
def test_keep_correct():
    rows = [("p1", "a", True), ("p1", "b", False), ("p2", "c", True), ("p3", "d", False)]
    assert keep_correct(rows) == [("p1", "a"), ("p2", "c")]


class ParityTask:
    """Stub verifier: a completion is right iff it has an even number of characters."""

    name = "parity"

    def __init__(self):
        self.calls = 0

    def verify(self, completion: str, problem: Problem) -> Verdict:
        self.calls += 1
        ok = len(completion) % 2 == 0
        return Verdict(float(ok), "right" if ok else "wrong", completion)


def test_distill_keeps_exactly_the_verified_correct_samples():
    teacher = tiny(seed=1)
    problems = [Problem(f"p{i}", f"Q:{i}+1\n", str(i + 1)) for i in range(6)]
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=9)
    task = ParityTask()
    pairs, stats = distill_pairs(teacher, TOK, task, problems, 4, sampling, seed=3)
    assert stats["generated"] == 24 == task.calls  # every teacher sample was verified
    assert stats["kept"] == len(pairs)
    assert all(len(c) % 2 == 0 for _, c in pairs)  # only right ones kept
    # ... and every right one was kept: regenerate the same samples with the same seed
    from rlvr.eval.generate import samples_for

    rows = samples_for(teacher, TOK, ParityTask(), problems, 4, sampling, 3)
    right = [(r["prompt"], r["completion"]) for r in rows if len(r["completion"]) % 2 == 0]
    assert pairs == right and 0 < len(pairs) < 24  # the filter did drop some and keep some
