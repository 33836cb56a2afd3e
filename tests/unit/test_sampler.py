"""KV-cache sampler: exactness against a full forward, stops, lengths, padding, interruption."""

import pytest
import torch

from rlvr.config import ModelConfig
from rlvr.model.logprobs import completion_logits, sequences, token_logprobs
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.rollout.sample import SampleParams, generate

TOK = CharTokenizer()
PROMPTS = ["Q:1+2\n", "Q:3*4+5\n", "R:ab\n", "N:3 5 7 T:22\n"]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyGPT(ModelConfig(n_layer=2, d_model=64, n_head=4, context=96), TOK.vocab_size).eval()


def run(model, params, prompts=PROMPTS, seed=0):
    ids, mask = TOK.batch_encode_left(prompts)
    return generate(model, ids, mask, params, eos_id=TOK.eos_id, pad_id=TOK.pad_id,
                    generator=torch.Generator().manual_seed(seed))


def full_forward(model, rb, temperature=1.0):
    ids, mask, tp = sequences(rb)
    logits = completion_logits(model, ids, mask, tp, temperature)
    return logits, token_logprobs(logits, rb.completion_ids)[0]


def test_greedy_equals_argmax_of_full_forward(model):
    rb = run(model, SampleParams(max_new_tokens=24, temperature=0.0))
    logits, _ = full_forward(model, rb)
    m = rb.completion_mask
    assert m.sum() > 0
    assert torch.equal(logits.argmax(-1)[m], rb.completion_ids[m])


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_behaviour_logprobs_match_full_forward(model, temperature):
    rb = run(model, SampleParams(max_new_tokens=24, temperature=temperature))
    _, logp = full_forward(model, rb, temperature)
    m = rb.completion_mask
    assert (logp[m] - rb.behaviour_logp[m]).abs().max() < 1e-5


def test_left_padding_does_not_change_results(model):
    params = SampleParams(max_new_tokens=16, temperature=0.0)
    alone = run(model, params, ["Q:1+2\n"])
    padded = run(model, params, ["Q:1+2\n", "Q:9*9+9*9+9\n"])
    n = int(alone.lengths[0])
    assert torch.equal(alone.completion_ids[0, :n], padded.completion_ids[0, :n])
    assert torch.allclose(alone.behaviour_logp[0, :n], padded.behaviour_logp[0, :n], atol=1e-5)


def test_length_limit_and_finish_reason(model):
    rb = run(model, SampleParams(max_new_tokens=5, temperature=1.0))
    assert rb.lengths.max() <= 5
    for r, n in zip(rb.finish_reason, rb.lengths.tolist()):
        assert r in ("eos", "length") and (r != "length" or n == 5)


def test_eos_ends_a_completion():
    torch.manual_seed(0)
    m = TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2), TOK.vocab_size).eval()
    real = m.logits

    def eos_heavy(h):  # EOS becomes the argmax everywhere
        out = real(h)
        out[..., TOK.eos_id] += 100.0
        return out

    m.logits = eos_heavy
    rb = run(m, SampleParams(max_new_tokens=10, temperature=0.0))
    assert rb.finish_reason == ["eos"] * len(PROMPTS) and rb.lengths.tolist() == [1] * len(PROMPTS)


def test_stop_string(model):
    free = run(model, SampleParams(max_new_tokens=30, temperature=1.0), seed=3)
    text = TOK.decode(free.completion_ids[0][free.completion_mask[0]])
    stop = text[3:5]
    rb = run(model, SampleParams(max_new_tokens=30, temperature=1.0, stop_ids=(tuple(TOK.encode(stop)),)), seed=3)
    out = TOK.decode(rb.completion_ids[0][rb.completion_mask[0]])
    assert out.endswith(stop) and rb.finish_reason[0] == "stop" and stop not in out[:-len(stop)]


def test_forced_interruption_masks_injected_tokens(model):
    forced = tuple(TOK.encode("\nA:"))
    p = SampleParams(max_new_tokens=30, temperature=1.0, interruption_budget=6, interruption_ids=forced,
                     marker_ids=tuple(TOK.encode("A:")), interruption_extra=3)
    rb = run(model, p)
    for i, reason in enumerate(rb.finish_reason):
        if reason != "interrupted":
            continue
        ids = rb.completion_ids[i].tolist()
        assert ids[6:9] == list(forced)
        assert rb.loss_mask[i, 6:9].tolist() == [False] * 3 and rb.loss_mask[i, :6].all()
        assert rb.lengths[i] <= 6 + 3 + 3
    assert "interrupted" in rb.finish_reason


def test_inflight_weight_update_versions(model):
    import copy

    m = copy.deepcopy(model)
    calls = []

    def sync():
        calls.append(1)
        if len(calls) == 1:
            with torch.no_grad():
                for p in m.parameters():
                    p.mul_(1.01)
            return 1
        return None

    ids, mask = TOK.batch_encode_left(PROMPTS)
    rb = generate(m, ids, mask, SampleParams(max_new_tokens=20, temperature=0.0), eos_id=-1, pad_id=TOK.pad_id,
                  weight_sync=sync, sync_every=4)
    assert rb.versions[0, :4].tolist() == [0] * 4 and rb.versions[0, 4:20].eq(1).all()
