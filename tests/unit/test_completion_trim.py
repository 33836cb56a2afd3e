"""The trainer's forward runs rows in length buckets cut to their own longest row, a tiny model's
prompts once for all their rows (rlvr.model.logprobs.completion_logits, issue 53): the same logits
and gradient as the padded batch up to float rounding, and the grouping that minimises the positions."""

from __future__ import annotations

import itertools

import pytest
import torch

from rlvr.config import load_config
from rlvr.model.logprobs import completion_logits, last_real, length_buckets
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer, left_pad


def test_length_buckets_are_the_cheapest_grouping():
    lengths = [5, 1, 9, 9, 2, 30, 1, 7]
    for extra, overhead in [(3, 0), (3, 10), (3, 40), (0, 1000)]:
        buckets = length_buckets(lengths, extra, overhead)
        assert sorted(i for b in buckets for i in b) == list(range(len(lengths)))

        def cost(groups, extra=extra, overhead=overhead):
            return sum(len(g) * (extra + max(lengths[i] for i in g)) + overhead for g in groups)

        order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
        brute = min(cost([order[a:b] for a, b in zip((0, *cuts), (*cuts, len(order)))])
                    for n in range(len(order)) for cuts in itertools.combinations(range(1, len(order)), n))
        assert cost(buckets) == brute
    assert len(length_buckets(lengths, 3, 10**6)) == 1
    assert len(length_buckets(lengths, 3, 0)) == len(set(lengths))


def _batch():
    """A random tiny model and 8 rows: 5 prompts of 2..6 characters (left-padded; three of them
    sampled twice), completions of 0..9 tokens (right-padded)."""
    torch.manual_seed(0)
    cfg = load_config(None, ["model.n_layer=2", "model.d_model=32", "model.n_head=2", "model.dtype=float32"])
    tok = CharTokenizer()
    model = TinyGPT(cfg.model, tok.vocab_size)
    prompts = ["12", "345+", "12", "6*7=", "8-9", "345+", "1+1=2+", "8-9"]
    completion_lengths = [3, 9, 2, 0, 1, 9, 4, 1]
    p_ids, p_mask = left_pad([tok.encode(p, bos=True) for p in prompts], tok.pad_id)
    c_ids = torch.randint(4, tok.vocab_size, (len(prompts), 9))
    c_mask = torch.arange(9)[None] < torch.tensor(completion_lengths)[:, None]
    ids = torch.cat([p_ids, torch.where(c_mask, c_ids, tok.pad_id)], 1)
    return model, ids, torch.cat([p_mask, c_mask], 1), p_ids.shape[1], c_mask


class Plain:
    """The tiny model seen as any policy (hidden + logits): the trimmed path without prompt sharing."""

    def __init__(self, model):
        self.hidden, self.logits = model.hidden, model.logits


@pytest.mark.parametrize("shared_prompts", [True, False])
def test_trimmed_forward_equals_padded_one(shared_prompts):
    model, ids, key_mask, tp, c_mask = _batch()
    assert last_real(c_mask).tolist() == [3, 9, 2, 0, 1, 9, 4, 1]
    weights = torch.randn(c_mask.shape) * c_mask

    def run(trim: bool):
        model.zero_grad()
        policy = Plain(model) if trim and not shared_prompts else model
        logits = completion_logits(policy, ids, key_mask, tp, 0.7, trim=trim)
        loss = (torch.log_softmax(logits, -1).amax(-1) * weights).sum()
        loss.backward()
        return logits.detach(), loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    full, full_loss, full_grad = run(False)
    trimmed, trimmed_loss, trimmed_grad = run(True)
    real = c_mask[..., None].expand_as(full)
    assert torch.allclose(trimmed[real], full[real], rtol=0, atol=1e-5)
    assert torch.isfinite(trimmed).all()  # padding positions: 0, or computed as before
    assert torch.allclose(trimmed_loss, full_loss, rtol=1e-5)
    for name, grad in full_grad.items():
        assert torch.allclose(trimmed_grad[name], grad, rtol=1e-4, atol=1e-6), name
