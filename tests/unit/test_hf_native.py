"""The native Llama/Qwen2 forward of rlvr.model.hf (NativeDecoder) against the HF decoder it stands
in for: logits, gradients, the lean sampling path (fused weights, complex RoPE, permuted cache)
and its refresh after in-place weight updates, and the fallbacks to the HF path."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from rlvr.config import ModelConfig  # noqa: E402
from rlvr.model.hf import HFPolicy, NativeCache, load_hf_policy  # noqa: E402
from rlvr.rollout.sample import SampleParams, generate  # noqa: E402
from rlvr.train.tiny_hf import build_tiny_hf  # noqa: E402

CFG = ModelConfig(kind="hf", path="x", chat_template=False)
PROMPTS = ["Q:3+4*2+1\n", "Q:1+1\n", "Q:9*9-2+3*3\n"]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, one_thread):
    root = tmp_path_factory.mktemp("native")
    return {arch: build_tiny_hf(root / arch, arch=arch, hidden=32, layers=2, heads=4, init_std=0.3)
            for arch in ("llama", "qwen2")}


def _pair(make):
    """(native policy, HF-path policy) with the same weights."""
    torch.manual_seed(0)
    a, b = make(None), make(False)
    b.lm.load_state_dict(a.lm.state_dict())
    assert a.native is not None and b.native is None and b.native_off == "native=False"
    return a.eval(), b.eval()


def _biased_llama(native):
    """A Llama with biases on every projection (o_proj and down_proj too): the lean path's bias adds."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    conf = LlamaConfig(vocab_size=320, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, attention_bias=True, mlp_bias=True,
                       pad_token_id=0, bos_token_id=1, eos_token_id=2, initializer_range=0.3)
    lm = AutoModelForCausalLM.from_config(conf)
    with torch.no_grad():
        for n, p in lm.named_parameters():
            if n.endswith("bias"):
                p.normal_(0, 0.3)
    return HFPolicy(lm, CFG, native)


def _models(dirs, arch):
    if arch == "biased":
        return _pair(_biased_llama), None
    _, tok = load_hf_policy(str(dirs[arch]), CFG)
    return _pair(lambda native: load_hf_policy(str(dirs[arch]), CFG, native)[0]), tok


def _batch(tok):
    if tok is None:
        ids = torch.randint(3, 250, (3, 9), generator=torch.Generator().manual_seed(0))
        mask = torch.ones_like(ids, dtype=torch.bool)
        mask[1, :4] = False
        return ids, mask
    return tok.batch_encode_left(PROMPTS)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "biased"])
def test_native_forward_and_gradient_equal_hf(dirs, arch):
    (a, b), tok = _models(dirs, arch)
    ids, mask = _batch(tok)
    with torch.no_grad():
        torch.testing.assert_close(a(ids, mask)[mask], b(ids, mask)[mask], atol=1e-5, rtol=0)
        torch.testing.assert_close(a(ids), b(ids), atol=1e-5, rtol=0)
    a.train(), b.train()
    for m in (a, b):
        m.zero_grad()
        m(ids, mask)[mask].logsumexp(-1).sum().backward()
    for (n, pa), pb in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, atol=1e-4, rtol=1e-4, msg=n)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "biased"])
def test_lean_sampling_equals_hf_path(dirs, arch):
    (a, b), tok = _models(dirs, arch)
    ids, mask = _batch(tok)
    greedy = SampleParams(max_new_tokens=10, temperature=0.0)
    ra, rb = (generate(m, ids, mask, greedy, eos_id=-1, pad_id=0) for m in (a, b))
    assert torch.equal(ra.completion_ids, rb.completion_ids)
    torch.testing.assert_close(ra.behaviour_logp, rb.behaviour_logp, atol=1e-4, rtol=0)
    # decode_step == forward of one token against the cache (lean path on one cache, HF path on the other)
    with torch.no_grad():
        caches = [m.new_cache(3, ids.shape[1] + 2) for m in (a, b)]
        for c, m in zip(caches, (a, b)):
            c.key_mask[:, : ids.shape[1]] = mask
            m(ids, c.key_mask[:, : ids.shape[1]], c)
            c.key_mask[:, ids.shape[1]] = True
        tok1 = torch.tensor([5, 6, 7])
        torch.testing.assert_close(a.decode_step(tok1, caches[0]), b.decode_step(tok1, caches[1]), atol=1e-5, rtol=0)
    assert isinstance(caches[0], NativeCache) and caches[0].lean


def test_lean_weights_follow_in_place_updates(dirs):
    (a, b), tok = _models(dirs, "qwen2")
    ids, mask = _batch(tok)
    greedy = SampleParams(max_new_tokens=8, temperature=0.0)
    generate(a, ids, mask, greedy, eos_id=-1, pad_id=0)  # builds the fused weights
    with torch.no_grad():
        for pa, pb in zip(a.parameters(), b.parameters()):
            noise = 0.2 * torch.randn_like(pa)
            pa.add_(noise), pb.add_(noise)  # an optimiser step: in place
    ra, rb = (generate(m, ids, mask, greedy, eos_id=-1, pad_id=0) for m in (a, b))
    assert torch.equal(ra.completion_ids, rb.completion_ids)
    torch.testing.assert_close(ra.behaviour_logp, rb.behaviour_logp, atol=1e-4, rtol=0)


def test_fallbacks_and_cache_misuse(dirs, monkeypatch):
    ck = ModelConfig(kind="hf", path="x", chat_template=False, gradient_checkpointing=True)
    m, _ = load_hf_policy(str(dirs["llama"]), ck)
    assert m.native is None and m.native_off == "gradient checkpointing"
    monkeypatch.setenv("RLVR_HF_NATIVE", "0")
    m, _ = load_hf_policy(str(dirs["llama"]), CFG)
    assert m.native is None and m.native_off == "RLVR_HF_NATIVE=0"
    monkeypatch.delenv("RLVR_HF_NATIVE")
    bf, _ = load_hf_policy(str(dirs["llama"]), ModelConfig(kind="hf", path="x", chat_template=False,
                                                            dtype="bfloat16"))
    assert bf.native is not None and not bf.native.fuse  # bf16 autocast: general path with a cache
    m, tok = load_hf_policy(str(dirs["llama"]), CFG)
    ids, mask = tok.batch_encode_left(PROMPTS)
    cache = m.new_cache(3, ids.shape[1] + 1)
    cache.key_mask[:, : ids.shape[1]] = mask
    with torch.no_grad():
        m(ids, cache.key_mask[:, : ids.shape[1]], cache)
    cache.key_mask[:, ids.shape[1]] = True
    with pytest.raises(RuntimeError, match="NativeCache"):
        m.decode_step(torch.tensor([5, 6, 7]), cache)  # gradient on now: the key layout would not match


def test_dtype_auto_resolves_on_load_and_set_dtype_switches_the_paths(dirs, monkeypatch, tmp_path):
    from rlvr.model import bf16_probe, precision
    from rlvr.model.io import load_policy

    m, _ = load_hf_policy(str(dirs["llama"]), CFG)  # dtype auto, unresolved: computes as float32
    assert CFG.dtype == "auto" and m.native.fuse
    m.set_dtype("bfloat16")
    assert m.cfg.dtype == "bfloat16" and not m.native.fuse and m.new_cache(1, 4).k.dtype == torch.bfloat16
    m.set_dtype("float32")
    assert m.native.fuse
    spec = precision.dir_spec(dirs["llama"])  # from config.json: one layer's q, k, v, o, gate, up, down
    shapes = {(lin.in_features, lin.out_features) for lin in m.lm.model.layers[0].modules()
              if isinstance(lin, torch.nn.Linear)}
    assert spec["kind"] == "linear" and {tuple(s) for s in spec["shapes"]} == shapes
    monkeypatch.delenv(precision.ENV_PIN, raising=False)
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))  # the fake measurement stays out of the session cache
    monkeypatch.setattr(bf16_probe, "busy_reason", lambda threads: "")  # a quiet machine, whatever runs beside
    monkeypatch.setattr(bf16_probe, "measure", lambda s: {"ratio": 3.0})
    loaded, _ = load_policy(dirs["llama"], device="cpu")  # no rlvr sidecar: auto, resolved here
    assert loaded.cfg.dtype == "bfloat16" and not loaded.native.fuse
