"""bf16 compute must not leak into the logits or the sampler (issue 29, items 1-2), on the CPU.

With ``model.dtype=bfloat16`` the behaviour log-probs the sampler records must equal a teacher-forced
recomputation (``rlvr.model.logprobs.score``, whose logits are float32) on the same bf16 model: both
see float32 logits, so they differ only by the bf16 rounding of the hidden states in the KV-cache
decode versus the full forward. Before the fix the HF decode step ran the float32 LM head inside
autocast (bf16 logits) and the sampler's log_softmax/cumsum ran in bf16.
"""

from __future__ import annotations

import pytest
import torch

from rlvr.config import ModelConfig
from rlvr.model import tiny as tiny_mod
from rlvr.model.logprobs import score
from rlvr.model.tiny import TinyGPT
from rlvr.rollout.sample import SampleParams, generate, sample_next

# The models below have small-init layers (so the bf16 rounding of the hidden states is small) and an
# untied LM head scaled up 30x (logits of magnitude ~10, where one bf16 ulp is 0.03-0.06). Measured on
# the tiny llama: max |behaviour - recomputed| 0.009 with float32 logits, 0.04 with the old bf16
# decode logits (0.08 at 60x). TOL sits between.
TOL = 2e-2
HEAD_SCALE = 30.0


def _prompts(vocab: int, b: int = 6, t: int = 5):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, vocab, (b, t), generator=g)
    mask = torch.ones(b, t, dtype=torch.bool)
    mask[0, :2] = False  # left padding on one row
    ids[0, :2] = 0
    return ids, mask


def _check(model, vocab: int, eos: int) -> float:
    ids, mask = _prompts(vocab)
    rb = generate(model, ids, mask, SampleParams(max_new_tokens=12), eos_id=eos, pad_id=0,
                  generator=torch.Generator().manual_seed(0))
    assert rb.behaviour_logp.dtype == torch.float32
    ref = score(model, rb)
    diff = ((rb.behaviour_logp - ref).abs() * rb.completion_mask).max().item()
    assert diff < TOL, f"behaviour log-probs off by {diff:.4f} (> {TOL}) under bf16"
    return diff


def test_tiny_bf16_behaviour_logprobs_match_fp32_recomputation():
    torch.manual_seed(0)
    cfg = ModelConfig(n_layer=2, d_model=32, n_head=2, context=64, dtype="bfloat16", tie_weights=False)
    model = TinyGPT(cfg, 512).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(HEAD_SCALE)
    _check(model, 512, eos=2)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_hf_bf16_behaviour_logprobs_match_fp32_recomputation(tmp_path, arch):
    pytest.importorskip("transformers")
    from rlvr.model.hf import load_hf_policy
    from rlvr.train.tiny_hf import build_tiny_hf

    d = build_tiny_hf(tmp_path / arch, arch=arch, hidden=32, layers=2, heads=4, init_std=0.02, tie=False)
    cfg = ModelConfig(kind="hf", path=str(d), chat_template=False, dtype="bfloat16")
    model, tok = load_hf_policy(str(d), cfg)
    model.eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(HEAD_SCALE)
    assert model.native is not None  # the native decode path is the one that leaked bf16
    _check(model, tok.vocab_size, eos=tok.eos_id)
    ids, mask = _prompts(tok.vocab_size)
    cache = model.new_cache(ids.shape[0], 20)
    cache.key_mask[:, :5] = mask
    with torch.no_grad():
        first = model.logits(model.hidden(ids, cache.key_mask[:, :5], cache)[:, -1:])[:, -1]
        cache.key_mask[:, 5] = True
        step = model.decode_step(first.argmax(-1), cache)
    assert first.dtype == step.dtype == torch.float32


def test_sampler_upcasts_bf16_logits():
    logits = (torch.randn(4, 50000) * 3).to(torch.bfloat16)
    tok, logp, ent, _, logp_all = sample_next(logits, SampleParams(), torch.Generator().manual_seed(0))
    assert logp.dtype == ent.dtype == logp_all.dtype == torch.float32
    ref = torch.log_softmax(logits.float(), -1).gather(-1, tok[:, None]).squeeze(-1)
    assert torch.allclose(logp, ref, atol=1e-6)


def test_tiny_autocasts_on_the_weights_device_type(monkeypatch):
    from rlvr.model.tiny import autocast_for

    seen = []
    real = torch.autocast

    def spy(device_type, *a, **k):
        seen.append(device_type)
        return real("cpu", *a, **k)

    cfg = ModelConfig(n_layer=1, d_model=32, n_head=2, context=32, dtype="bfloat16", fp32_logits=False)
    model = TinyGPT(cfg, 64)
    monkeypatch.setattr(tiny_mod.torch, "autocast", spy)
    monkeypatch.setattr(TinyGPT, "device", property(lambda self: torch.device("cuda", 0)))
    ids = torch.randint(3, 64, (2, 4))
    with torch.no_grad():
        model(ids)
    assert seen and set(seen) == {"cuda"}
    assert autocast_for(torch.device("cuda", 1), "bfloat16") == ("cuda", True)
    assert autocast_for(torch.device("cpu"), "float32") == ("cpu", False)
    assert autocast_for(torch.device("mps"), "bfloat16") == ("mps", True)
