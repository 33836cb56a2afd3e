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


def test_progress_hook_reports_the_whole_step_budget():
    """``on_step`` calls add up to the step budget whether the batch runs to the length limit or
    every row stops at its first token (the rest is reported at once), and change no sample."""
    torch.manual_seed(0)
    m = TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2), TOK.vocab_size).eval()
    params = SampleParams(max_new_tokens=10, temperature=1.0)
    ids, mask = TOK.batch_encode_left(PROMPTS)
    for eos_bias in (-100.0, 100.0):  # never EOS (10 steps) | EOS first (1 step, then the 9 left)
        real = m.logits
        m.logits = lambda h, real=real, bias=eos_bias: real(h) + bias * (torch.arange(TOK.vocab_size) == TOK.eos_id)
        calls = []
        rb = generate(m, ids, mask, params, eos_id=TOK.eos_id, pad_id=TOK.pad_id,
                      generator=torch.Generator().manual_seed(0), on_step=calls.append)
        plain = generate(m, ids, mask, params, eos_id=TOK.eos_id, pad_id=TOK.pad_id,
                         generator=torch.Generator().manual_seed(0))
        m.logits = real
        assert sum(calls) == 10 and torch.equal(rb.completion_ids, plain.completion_ids)
        assert calls == ([1] * 10 if eos_bias < 0 else [10])  # EOS first: one call, for the step and the 9 left


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


# --------------------------------------------------------------------------- prefix sharing
def _shared_vs_repeated(model, tok, prompts, counts, params, seed=3):
    """generate() on the prompts repeated row by row, and on each prompt once with ``repeats``."""
    rows = [p for p, c in zip(prompts, counts) for _ in range(c)]
    ids, mask = tok.batch_encode_left(rows)
    flat = generate(model, ids, mask, params, eos_id=tok.eos_id, pad_id=tok.pad_id,
                    generator=torch.Generator().manual_seed(seed))
    ids, mask = tok.batch_encode_left(prompts)
    shared = generate(model, ids, mask, params, eos_id=tok.eos_id, pad_id=tok.pad_id,
                      generator=torch.Generator().manual_seed(seed), repeats=torch.tensor(counts))
    return flat, shared


def _assert_same_samples(flat, shared):
    assert flat.completion_ids.shape[0] > 1
    assert torch.equal(flat.completion_ids, shared.completion_ids)
    assert torch.equal(flat.completion_mask, shared.completion_mask)
    assert torch.equal(flat.loss_mask, shared.loss_mask)
    assert flat.finish_reason == shared.finish_reason
    m = flat.completion_mask
    assert (flat.behaviour_logp - shared.behaviour_logp)[m].abs().max() < 1e-5
    assert (flat.entropy - shared.entropy)[m].abs().max() < 1e-5
    # the prompt rows come back one per sample, as if they had been repeated
    assert torch.equal(shared.prompt_mask.sum(-1), flat.prompt_mask.sum(-1))


@pytest.mark.parametrize("params", [
    SampleParams(max_new_tokens=24, temperature=1.0),
    SampleParams(max_new_tokens=20, temperature=0.8, top_p=0.9, top_k=20, stop_ids=((TOK.encode("\n")[0],),)),
    SampleParams(max_new_tokens=12, temperature=1.0, interruption_budget=6, interruption_ids=tuple(TOK.encode("A:")),
                 interruption_extra=4),
], ids=["plain", "truncated-stop", "interruption"])
def test_prefix_sharing_gives_the_same_samples(model, params):
    """Same seed, same samples: each prompt prefilled once (its keys shared by its rows) or repeated
    row by row. Uneven groups, left padding of different depths, rows finishing at different steps."""
    flat, shared = _shared_vs_repeated(model, TOK, PROMPTS, [5, 1, 9, 3], params)
    assert len(set(flat.lengths.tolist())) > 1  # rows finish at different steps (compaction runs)
    _assert_same_samples(flat, shared)


def test_prefix_sharing_many_samples_of_one_prompt(model):
    flat, shared = _shared_vs_repeated(model, TOK, ["Q:3*4+5\n"], [64], SampleParams(max_new_tokens=30))
    _assert_same_samples(flat, shared)


def test_engine_shares_runs_of_the_same_prompt(model, monkeypatch):
    """sample() prefills each run of equal prompts once, and gets what it gets without sharing."""
    import rlvr.rollout.engine as engine

    seen = []
    real = engine.generate
    monkeypatch.setattr(engine, "generate", lambda *a, **k: seen.append(k.get("repeats")) or real(*a, **k))
    prompts = ["Q:1+2\n"] * 6 + ["R:ab\n"] * 6 + ["Q:1+2\n"] * 2
    p = SampleParams(max_new_tokens=16)
    a = engine.sample(model, TOK, prompts, p, generator=torch.Generator().manual_seed(0), batch_size=8)
    b = engine.sample(model, TOK, prompts, p, generator=torch.Generator().manual_seed(0), batch_size=8,
                      share_prefix=False)
    assert [r.tolist() for r in seen[:2]] == [[6, 2], [4, 2]] and seen[2:] == [None, None]
    assert a.texts == b.texts


def test_finished_rows_wait_for_compaction_without_changing_results(model, monkeypatch):
    """Rows that finish stay in the batch until they are 1/COMPACT_FRACTION of it; their later
    tokens are ignored, so the outputs equal compacting at every finish."""
    import rlvr.rollout.sample as sample_mod

    params = SampleParams(max_new_tokens=24)
    prompts = PROMPTS * 4
    lazy = run(model, params, prompts, seed=5)
    monkeypatch.setattr(sample_mod, "COMPACT_FRACTION", 10**9)  # compact at every finish
    eager = run(model, params, prompts, seed=5)
    # the draws differ (a finished row still takes a uniform), so compare what each row holds
    for rb in (lazy, eager):
        assert (rb.completion_mask.sum(-1) == rb.lengths).all()
        assert all(r in ("eos", "length") for r in rb.finish_reason)
        assert ((rb.completion_ids == TOK.eos_id) & rb.completion_mask).sum() == rb.finish_reason.count("eos")
    _, logp = full_forward(model, lazy)
    assert (logp - lazy.behaviour_logp)[lazy.completion_mask].abs().max() < 1e-5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_prefix_sharing_on_cuda_gives_the_same_samples():
    torch.manual_seed(0)
    m = TinyGPT(ModelConfig(n_layer=2, d_model=64, n_head=4, context=96), TOK.vocab_size).eval().cuda()
    rows = [p for p, c in zip(PROMPTS, [5, 1, 9, 3]) for _ in range(c)]
    params = SampleParams(max_new_tokens=24)
    ids, mask = TOK.batch_encode_left(rows)
    flat = generate(m, ids.cuda(), mask.cuda(), params, eos_id=TOK.eos_id, pad_id=TOK.pad_id,
                    generator=torch.Generator().manual_seed(3))
    ids, mask = TOK.batch_encode_left(PROMPTS)
    shared = generate(m, ids.cuda(), mask.cuda(), params, eos_id=TOK.eos_id, pad_id=TOK.pad_id,
                      generator=torch.Generator().manual_seed(3), repeats=torch.tensor([5, 1, 9, 3]))
    assert torch.equal(flat.completion_ids, shared.completion_ids)
    m_ = flat.completion_mask
    assert (flat.behaviour_logp - shared.behaviour_logp)[m_].abs().max() < 1e-4


def test_batched_prompt_attention_is_bit_identical_to_one_product_per_prompt():
    """The shared-prefix decode batches the prompts with as many rows (span_classes, issue 53): the
    same scores and values, bit for bit, as one product per prompt, with spans of unequal rows."""
    from rlvr.model.tiny import prompt_scores, prompt_values, span_classes

    torch.manual_seed(0)
    G, H, Tp, Dh = 5, 2, 4, 8
    spans, start = [], 0
    for g, rows in enumerate([3, 1, 3, 2, 3]):
        spans.append((g, start, start + rows))
        start += rows
    q, pk, pv = torch.randn(start, H, Dh), torch.randn(G, H, Tp, Dh), torch.randn(G, H, Tp, Dh)
    pbias = torch.zeros(G, 1, Tp)
    pbias[1, 0, 0] = float("-inf")
    classes = span_classes(spans, q.device)
    assert sorted(r for _, _, r in classes) == [1, 2, 3]
    qt = q.transpose(0, 1)
    want = torch.cat([torch.baddbmm(pbias[g], qt[:, a:b], pk[g].transpose(1, 2)) for g, a, b in spans], 1)
    assert torch.equal(prompt_scores(q, pk, pbias, classes), want.transpose(0, 1))
    att = want.transpose(0, 1).softmax(-1)
    at = att.transpose(0, 1)
    want_values = torch.cat([torch.bmm(at[:, a:b], pv[g]) for g, a, b in spans], 1)
    assert torch.equal(prompt_values(att, pv, classes), want_values.transpose(0, 1))


def test_batched_prompt_attention_keeps_the_autocast_dtype():
    """Under bfloat16 autocast the batched products are bfloat16: unequal spans are gathered into a
    tensor of their dtype (the first version allocated float32 and failed to write them)."""
    from rlvr.model.tiny import prompt_scores, prompt_values, span_classes

    q, pk, pv = torch.randn(3, 2, 8), torch.randn(2, 2, 4, 8), torch.randn(2, 2, 4, 8)
    classes = span_classes([(0, 0, 1), (1, 1, 3)], q.device)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        scores = prompt_scores(q, pk, torch.zeros(2, 1, 4), classes)
        assert prompt_values(scores.softmax(-1), pv, classes).shape == (3, 2, 8)


def _shared_run(model, params, pool, seed=3):
    """generate() with prefix sharing (rows of unequal counts, compactions) drawing its completion
    cache from ``pool``."""
    import rlvr.model.tiny as tiny

    ids, mask = TOK.batch_encode_left(PROMPTS)
    before = tiny.DECODE_BUFFERS
    tiny.DECODE_BUFFERS = pool
    try:
        return generate(model, ids, mask, params, eos_id=TOK.eos_id, pad_id=TOK.pad_id,
                        generator=torch.Generator().manual_seed(seed), repeats=torch.tensor([5, 1, 9, 3]))
    finally:
        tiny.DECODE_BUFFERS = before


def test_pooled_cache_buffers_give_bit_identical_samples(model):
    """The shared-prefix cache's buffers come from a pool kept between calls (issue 53: fresh 48 MiB
    mappings page-faulted on every call). Reused buffers that hold another call's values, or NaN
    everywhere, give the same tokens, log-probs and entropies, bit for bit, as fresh buffers: no
    position is read before it is written."""
    from rlvr.model.tiny import BufferPool

    params = SampleParams(max_new_tokens=30, interruption_budget=12, interruption_ids=tuple(TOK.encode("\nA:")))
    fresh = _shared_run(model, params, BufferPool(keep=0))  # keeps nothing: every buffer new
    pool = BufferPool()
    _shared_run(model, params, pool, seed=11)  # another call's values left in the buffers
    assert len(pool.free) >= 2  # handed back
    reused = _shared_run(model, params, pool)
    with torch.inference_mode():  # the sampler's buffers are inference tensors
        for t in pool.free:
            t.fill_(float("nan"))
    poisoned = _shared_run(model, params, pool)
    for rb in (reused, poisoned):
        for name in ("completion_ids", "completion_mask", "loss_mask", "behaviour_logp", "entropy"):
            assert torch.equal(getattr(rb, name), getattr(fresh, name)), name
        assert rb.finish_reason == fresh.finish_reason


def test_buffer_pool_reuses_the_same_storage():
    """A second call of the same shape allocates nothing: the pool hands back its own buffers,
    the smallest that fits, and only those of the caller's kind (inference tensors in inference mode)."""
    from rlvr.model.tiny import BufferPool

    pool = BufferPool()
    with torch.inference_mode():
        a = pool.take((2, 3, 4), torch.float32, "cpu")
        b = pool.take((2, 2, 4), torch.float32, "cpu")  # as large as the largest request so far
        ptrs = {a.data_ptr(), b.data_ptr()}
        pool.give(a)
        pool.give(b)
        pool.give(a)  # twice: kept once
        assert len(pool.free) == 2
        c = pool.take((2, 3, 4), torch.float32, "cpu")
        assert c.data_ptr() in ptrs and c.shape == (2, 3, 4)
        assert pool.take((2, 3, 4), torch.bfloat16, "cpu").data_ptr() not in ptrs
    assert pool.take((1, 3, 4), torch.float32, "cpu").data_ptr() not in ptrs  # a normal tensor outside it


def test_buffer_pool_holds_at_most_its_byte_cap():
    """An evaluation's batch of thousands of rows would leave gigabytes in the pool after the call: a
    buffer above half the cap is never kept nor raises the size of later ones, and what is kept stays
    under the cap (the largest that fit)."""
    from rlvr.model.tiny import BufferPool

    pool = BufferPool(max_bytes=1000)  # float32: a buffer of at most 125 elements is poolable
    big = pool.take((200,), torch.float32, "cpu")  # 800 bytes: above half the cap
    small = pool.take((10,), torch.float32, "cpu")
    assert small.untyped_storage().nbytes() == 40  # the big request did not set the size of the next
    pool.give(big)
    assert pool.free == []
    a, b, c = (pool.take((100,), torch.float32, "cpu") for _ in range(3))  # 400 bytes each
    for t in (small, a, b, c):
        pool.give(t)
    assert sorted(t.untyped_storage().nbytes() for t in pool.free) == [40, 400, 400]  # a third 400 passes 1000
