"""HF policy adapter (rlvr.model.hf) on tiny random Llama / Qwen2 models built locally, and the
vLLM engine's pure parts (rlvr.rollout.vllm) with fake vLLM objects (vLLM is not installed here)."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from rlvr.config import ModelConfig  # noqa: E402
from rlvr.errors import UserError  # noqa: E402
from rlvr.model.hf import load_hf_policy  # noqa: E402
from rlvr.model.io import load_policy, save_policy  # noqa: E402
from rlvr.model.logprobs import score  # noqa: E402
from rlvr.model.precision import apply_compute  # noqa: E402
from rlvr.rollout.sample import SampleParams, generate  # noqa: E402
from rlvr.train.tiny_hf import build_tiny_hf, main, train_tokenizer  # noqa: E402

CHAT = ("{% for m in messages %}<bos>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}")
PROMPTS = ["Q:3+4*2+1\n", "Q:1+1\n", "Q:9*9-2+3*3\n"]
NO_CHAT = ModelConfig(kind="hf", path="x", chat_template=False)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, one_thread):
    root = tmp_path_factory.mktemp("hf")
    llama = build_tiny_hf(root / "llama", arch="llama", hidden=32, layers=2, heads=4, init_std=0.3)
    cli = ["build-tiny", str(root / "qwen2"), "--arch", "qwen2", "--hidden", "32", "--layers", "1"]
    assert main(cli) == 0 and (root / "qwen2" / "config.json").exists()
    build_tiny_hf(root / "qwen2", arch="qwen2", hidden=32, layers=1, heads=4, tie=False, init_std=0.3,
                  chat_template=CHAT)
    return {"llama": llama, "qwen2": root / "qwen2"}


def _load(dirs, arch, cfg=NO_CHAT):
    torch.manual_seed(0)
    m, tok = load_hf_policy(str(dirs[arch]), cfg)
    return m.eval(), tok


# ----------------------------------------------------------------------------- tokenizer
def test_tokenizer_roundtrip_left_padding_and_chat_template(dirs):
    _, tok = _load(dirs, "llama")
    text = "Q:3+4*2=8;  x\nA:12 é€"
    assert tok.decode(tok.encode(text)) == text
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    assert tok.encode("ab", bos=True, eos=True) == [1, *tok.encode("ab"), 2]
    ids, mask = tok.batch_encode_left(["Q:1\n", "Q:12+3\n"])
    assert ids.shape == mask.shape == (2, 8) and mask.sum(1).tolist() == [5, 8]
    assert ids[0, :3].tolist() == [0, 0, 0] and ids[0, 3].item() == 1 and tok.decode(ids[0]) == "Q:1\n"
    _, chat = _load(dirs, "qwen2", ModelConfig(kind="hf", path="x"))
    assert chat.chat and tok.chat is False
    assert chat.decode(chat.prompt_ids("Q:1+1\n"), skip_special=False) == "<bos>user: Q:1+1\n\nassistant: "
    _, raw = _load(dirs, "qwen2")
    assert raw.prompt_ids("Q:1") == [1, *raw.encode("Q:1")]
    bpe = train_tokenizer(["Q:12+34\nA:46 the cat"] * 20, vocab_size=280)  # with merges
    assert 259 < len(bpe) <= 280 and bpe.convert_ids_to_tokens([0, 1, 2]) == ["<pad>", "<bos>", "<eos>"]
    enc = bpe.encode("Q:12+34\nA:46", add_special_tokens=False)
    assert len(enc) < len("Q:12+34\nA:46") and bpe.decode(enc) == "Q:12+34\nA:46"


# ----------------------------------------------------------------------------- forward
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_logits_equal_hf_forward_and_left_padding_is_neutral(dirs, arch):
    m, tok = _load(dirs, arch)
    ids, mask = tok.batch_encode_left(PROMPTS)
    with torch.no_grad():
        padded = m(ids, mask)
        assert padded.dtype == torch.float32 and padded.shape == (3, ids.shape[1], m.lm.config.vocab_size)
        for i in range(3):
            alone = ids[i, mask[i]][None]
            ours = m.logits(m.hidden(alone))
            theirs = m.lm(input_ids=alone).logits
            torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
            torch.testing.assert_close(padded[i, mask[i]], ours[0], atol=1e-5, rtol=0)


def test_kv_cache_sampler_greedy_and_behaviour_logp(dirs):
    m, tok = _load(dirs, "llama")
    ids, mask = tok.batch_encode_left(PROMPTS)
    rb = generate(m, ids, mask, SampleParams(max_new_tokens=10, temperature=0.0), eos_id=tok.eos_id,
                  pad_id=tok.pad_id)
    seq, km = torch.cat([ids, rb.completion_ids], 1), torch.cat([mask, rb.completion_mask], 1)
    with torch.no_grad():
        full = m(seq, km)[:, ids.shape[1] - 1 : -1]
    cm = rb.completion_mask
    assert cm.sum() >= 3 and len(set(rb.completion_ids[cm].tolist())) > 1  # not a degenerate model
    assert torch.equal(full.argmax(-1)[cm], rb.completion_ids[cm])
    assert ((score(m, rb) - rb.behaviour_logp).abs() * cm).max() < 1e-4
    for temp in (1.0, 0.7):
        g = torch.Generator().manual_seed(1)
        rb = generate(m, ids, mask, SampleParams(max_new_tokens=12, temperature=temp), eos_id=tok.eos_id,
                      pad_id=tok.pad_id, generator=g)
        assert ((score(m, rb, temperature=temp) - rb.behaviour_logp).abs() * rb.completion_mask).max() < 1e-4
    # left padding: a prompt sampled alone gives the same greedy completion as inside the batch
    greedy = SampleParams(max_new_tokens=10, temperature=0.0)
    alone = generate(m, ids[1:2, mask[1]], mask[1:2, mask[1]], greedy, eos_id=tok.eos_id, pad_id=tok.pad_id)
    n = int(alone.lengths[0])
    rb0 = generate(m, ids, mask, SampleParams(max_new_tokens=10, temperature=0.0), eos_id=tok.eos_id,
                   pad_id=tok.pad_id)
    assert torch.equal(rb0.completion_ids[1, :n], alone.completion_ids[0, :n])
    torch.testing.assert_close(rb0.behaviour_logp[1, :n], alone.behaviour_logp[0, :n], atol=1e-5, rtol=0)


def test_cache_select_keeps_rows(dirs):
    m, tok = _load(dirs, "qwen2")
    ids, mask = tok.batch_encode_left(PROMPTS)

    def greedy(ids, mask, rows=None, steps=4):
        cache = m.new_cache(ids.shape[0], ids.shape[1] + steps)
        cache.key_mask[:, : ids.shape[1]] = mask
        with torch.no_grad():
            logits = m(ids, cache.key_mask[:, : ids.shape[1]], cache)[:, -1]
            if rows is not None:
                cache.select(rows)
                logits = logits[rows]
            out = []
            for _ in range(steps):
                nxt = logits.argmax(-1)
                out.append(nxt)
                s = cache.length
                cache.key_mask[:, s] = True
                logits = m(nxt[:, None], cache.key_mask[:, : s + 1], cache)[:, -1]
        return torch.stack(out, 1), logits

    rows = torch.tensor([0, 2])
    sel, last_sel = greedy(ids, mask, rows)
    ref, last_ref = greedy(ids[rows], mask[rows])
    assert torch.equal(sel, ref)
    torch.testing.assert_close(last_sel, last_ref, atol=1e-5, rtol=0)


def test_flops_and_cfg(dirs):
    m, _ = _load(dirs, "llama")
    c = m.lm.config
    h, i, kv = c.hidden_size, c.intermediate_size, c.num_key_value_heads
    hd = h // c.num_attention_heads
    per_layer = 2 * h * h + 2 * h * kv * hd + 3 * h * i + 2 * h
    assert m.cfg.tie_weights and m.cfg.kind == "hf"
    assert m.flops_per_token() == 2 * (c.num_hidden_layers * per_layer + h + c.vocab_size * h)
    q, _ = _load(dirs, "qwen2")  # untied: the input embedding is a lookup, not FLOPs
    assert not q.cfg.tie_weights and q.flops_per_token() == 2 * (q.num_params() - q.lm.config.vocab_size * 32)


# ----------------------------------------------------------------------------- saving, loading
def test_save_load_roundtrip_and_in_place_checkpoint(dirs, tmp_path):
    m, tok = _load(dirs, "qwen2")
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.01 * torch.randn_like(p))
    ids, mask = tok.batch_encode_left(PROMPTS)
    save_policy(m, tok, tmp_path / "ck")
    assert json.loads((tmp_path / "ck" / "rlvr_hf.json").read_text())["chat_template"] is False
    m2, tok2 = load_policy(tmp_path / "ck")
    assert tok2.chat is False and torch.equal(tok2.batch_encode_left(PROMPTS)[0], ids)
    with torch.no_grad():
        torch.testing.assert_close(m2.eval()(ids, mask), m(ids, mask), atol=1e-6, rtol=0)
        fresh, _ = _load(dirs, "qwen2")
        before = [p.data_ptr() for p in fresh.parameters()]
        assert (fresh(ids, mask) - m(ids, mask)).abs().max() > 1e-3
        fresh.load_checkpoint(tmp_path / "ck")
        assert [p.data_ptr() for p in fresh.parameters()] == before  # in place: the optimiser keeps them
        torch.testing.assert_close(fresh(ids, mask), m(ids, mask), atol=1e-6, rtol=0)


def _pg_steps(m, tok, steps=3):
    """A few REINFORCE steps: advantage +1 on row 0, -1 on row 1 -> (logp before, after) (2,)."""
    ids, mask = tok.batch_encode_left(PROMPTS[:2])
    rb = generate(m, ids, mask, SampleParams(max_new_tokens=6), eos_id=tok.eos_id, pad_id=tok.pad_id,
                  generator=torch.Generator().manual_seed(3))
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-2)
    adv = torch.tensor([1.0, -1.0])
    from rlvr.model.logprobs import completion_logits, sequences, token_logprobs

    def seq_logp():
        s, km, tp = sequences(rb)
        logp = token_logprobs(completion_logits(m, s, km, tp), rb.completion_ids)[0]
        return (logp * rb.completion_mask).sum(1)

    before = seq_logp().detach()
    m.train()
    for _ in range(steps):
        opt.zero_grad()
        (-(adv * seq_logp()).mean()).backward()
        opt.step()
    return before, seq_logp().detach()


def test_policy_gradient_moves_logp(dirs):
    m, tok = _load(dirs, "llama")
    before, after = _pg_steps(m, tok)
    assert after[0] > before[0] + 0.5 and after[1] < before[1] - 0.5


def test_lora_trains_adapter_only_and_merges(dirs, tmp_path):
    pytest.importorskip("peft")
    base, tok = _load(dirs, "llama")
    m, _ = _load(dirs, "llama", ModelConfig(kind="hf", path="x", chat_template=False, lora_r=4))
    trainable = {n for n, p in m.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    ids, mask = tok.batch_encode_left(PROMPTS)
    with torch.no_grad():
        torch.testing.assert_close(m(ids, mask), base(ids, mask), atol=1e-6, rtol=0)  # B = 0 at init
    frozen = {n: p.detach().clone() for n, p in m.named_parameters() if not p.requires_grad}
    before, after = _pg_steps(m, tok)
    assert after[0] > before[0] + 0.2 and after[1] < before[1] - 0.2
    assert all(torch.equal(p, frozen[n]) for n, p in m.named_parameters() if not p.requires_grad)
    m.eval()
    save_policy(m, tok, tmp_path / "lora")
    merged, _ = load_policy(tmp_path / "lora")  # a plain HF model with the deltas merged
    again, _ = _load(dirs, "llama", ModelConfig(kind="hf", path="x", chat_template=False, lora_r=4))
    again.load_checkpoint(tmp_path / "lora")
    with torch.no_grad():
        want = m(ids, mask)
        torch.testing.assert_close(merged.eval()(ids, mask), want, atol=1e-4, rtol=0)
        torch.testing.assert_close(again(ids, mask), want, atol=1e-6, rtol=0)
    with pytest.raises(UserError, match="LoRA"):
        again.load_checkpoint(dirs["llama"])


def test_user_errors(dirs, tmp_path, monkeypatch):
    with pytest.raises(UserError, match="not found"):
        load_hf_policy(str(tmp_path / "missing" / "model"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no config.json"):
        load_hf_policy(str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # and never ask the network
    with pytest.raises(UserError, match="HF_HUB_OFFLINE"):
        load_policy("no-such-org-rlvr/no-such-model")
    with pytest.raises(UserError, match="llama or qwen2"):
        build_tiny_hf(tmp_path / "x", arch="gpt9")


def test_tiny_hf_names_are_built_beside_pretraining_and_only_loaded_by_the_model(tmp_path, monkeypatch):
    """``tiny-hf:<arch>`` is ``<cache>/hf-tiny/<arch>``: rlvr.model.hf only loads it (rlvr.model does not
    import the task corpus a tokenizer may train on) and says how to build it when it is missing;
    rlvr.train.tiny_hf.build_if_tiny builds it once, and leaves every other path alone."""
    from pathlib import Path

    import rlvr.model
    from rlvr.model.hf import model_source
    from rlvr.train import tiny_hf

    assert not [p.name for p in Path(rlvr.model.__file__).parent.glob("*.py") if "rlvr.tasks" in p.read_text()]
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    with pytest.raises(UserError, match=r"tiny-hf:qwen2 is not built yet .*build-tiny .*--arch qwen2"):
        load_hf_policy("tiny-hf:qwen2", NO_CHAT)
    built = []
    small = tiny_hf.build_tiny_hf

    def build(out, arch):
        built.append(arch)
        return small(out, arch=arch, hidden=16, layers=1, heads=2)

    monkeypatch.setattr(tiny_hf, "build_tiny_hf", build)
    tiny_hf.build_if_tiny("tiny-hf:qwen2", "", str(tmp_path / "some_dir"), "Org/Name")
    tiny_hf.build_if_tiny("tiny-hf:qwen2")  # built already
    assert built == ["qwen2"] and model_source("tiny-hf:qwen2") == str(tmp_path / "hf-tiny" / "qwen2")
    policy, _ = load_hf_policy("tiny-hf:qwen2", NO_CHAT)
    assert policy.lm.config.model_type == "qwen2" and policy.lm.config.hidden_size == 16


# ----------------------------------------------------------------------------- vLLM (no vLLM needed)
def test_vllm_missing_gives_install_hint(monkeypatch):
    from rlvr.rollout import vllm as V

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(UserError, match=r"pip install 'rlvr\[vllm\]'"):
        V.VLLMEngine("some/model")


def _lp(v):
    return SimpleNamespace(logprob=v, rank=1, decoded_token=None)


def _fake_outputs():
    a, b, c = math.log(0.5), math.log(0.25), math.log(0.2)
    done = SimpleNamespace(token_ids=[5, 7, 2], finish_reason="stop", stop_reason=None,
                           logprobs=[{5: _lp(a), 6: _lp(b)}, {7: _lp(c)}, {2: _lp(a)}])
    cut = SimpleNamespace(token_ids=[9], finish_reason="length", stop_reason=None, logprobs=[{9: _lp(b)}])
    stop = SimpleNamespace(token_ids=[4, 4], finish_reason="stop", stop_reason="\n\n",
                           logprobs=[{4: _lp(c)}, {4: _lp(a)}])
    return [SimpleNamespace(outputs=[o]) for o in (done, cut, stop)]


class _Tok:
    pad_id, eos_id = 0, 2

    def decode(self, ids):
        return "".join(chr(96 + int(i)) for i in ids if int(i) != 2)

    def batch_encode_left(self, texts):
        n = max(len(t) for t in texts)
        ids = torch.tensor([[0] * (n - len(t)) + [ord(ch) - 96 for ch in t] for t in texts])
        return ids, ids != 0


def test_vllm_outputs_to_rollout_batch():
    from rlvr.rollout.vllm import to_rollout_batch

    pids, pmask = _Tok().batch_encode_left(["ab", "c", "de"])
    rb = to_rollout_batch(_fake_outputs(), pids, pmask, _Tok(), version=3)
    assert rb.completion_ids.tolist() == [[5, 7, 2], [9, 0, 0], [4, 4, 0]]
    assert rb.completion_mask.tolist() == [[True] * 3, [True, False, False], [True, True, False]]
    assert torch.equal(rb.loss_mask, rb.completion_mask) and rb.versions[rb.completion_mask].eq(3).all()
    want = torch.tensor([[0.5, 0.2, 0.5], [0.25, 1, 1], [0.2, 0.5, 1]]).log() * rb.completion_mask
    torch.testing.assert_close(rb.behaviour_logp, want)
    h0 = -(0.5 * math.log(0.5) + 0.25 * math.log(0.25))  # top-2 truncated entropy at row 0, token 0
    assert abs(rb.entropy[0, 0].item() - h0) < 1e-6 and rb.entropy[1, 1].item() == 0.0
    assert rb.finish_reason == ["eos", "length", "stop"] and rb.texts == ["eg", "i", "dd"]
    assert rb.prompt_ids is pids


def test_vllm_sample_call_shape_and_params(monkeypatch):
    from rlvr.rollout import vllm as V

    seen = {}

    class FakeEngine(V.VLLMEngine):
        def __init__(self):  # no vLLM: only the parts the sampler touches
            self.entropy_topk, self.version = 2, 0
            self._sampling_params = lambda **kw: kw

        def generate(self, rows, p, tok, seeds):
            seen.update(rows=rows, seeds=seeds, sp=self.sampling_params(p, tok, seeds[0]))
            return _fake_outputs()

    p = SampleParams(max_new_tokens=7, temperature=0.8, stop_ids=((4,), (3, 1)))
    gen = torch.Generator().manual_seed(0)
    rb = V.sample(FakeEngine(), _Tok(), ["ab", "c", "de"], p, version=1, generator=gen)
    assert seen["rows"] == [[1, 2], [3], [4, 5]] and len(set(seen["seeds"])) == 3
    sp = seen["sp"]
    assert (sp["max_tokens"], sp["temperature"], sp["top_k"], sp["logprobs"]) == (7, 0.8, -1, 2)
    assert sp["stop_token_ids"] == [4] and sp["stop"] == ["ca"]
    assert rb.size == 3 and rb.versions[0, 0].item() == 1
    with pytest.raises(UserError, match="interruption"):
        FakeEngine().sampling_params(SampleParams(interruption_budget=4), _Tok(), 0)
    with pytest.raises(UserError, match="in-flight"):
        V.sample(FakeEngine(), _Tok(), ["a"], p, weight_sync=lambda: None)


def test_prefix_sharing_on_hf_models_gives_the_same_samples(dirs):
    """HF policies have no shared-prefix attention: the prompts are prefilled once and their cache rows
    copied per sample. Same seed, same samples as the prompts repeated row by row."""
    for arch in ("llama", "qwen2"):
        m, tok = _load(dirs, arch)
        counts = [3, 1, 4][: len(PROMPTS)]
        prompts = PROMPTS[: len(counts)]
        rows = [p for p, c in zip(prompts, counts) for _ in range(c)]
        p = SampleParams(max_new_tokens=8, temperature=1.0)
        ids, mask = tok.batch_encode_left(rows)
        flat = generate(m, ids, mask, p, eos_id=tok.eos_id, pad_id=tok.pad_id,
                        generator=torch.Generator().manual_seed(2))
        ids, mask = tok.batch_encode_left(prompts)
        shared = generate(m, ids, mask, p, eos_id=tok.eos_id, pad_id=tok.pad_id,
                          generator=torch.Generator().manual_seed(2), repeats=torch.tensor(counts))
        assert torch.equal(flat.completion_ids, shared.completion_ids), arch
        cm = flat.completion_mask
        assert (flat.behaviour_logp - shared.behaviour_logp)[cm].abs().max() < 1e-4, arch


def test_the_runs_compute_options_reach_an_hf_policy(dirs):
    """apply_compute: an HF checkpoint computes in the run's dtype and with the run's fp32_logits; with
    them off, the LM head runs in bf16 under bf16 autocast (rounded), with them on in float32."""
    m, _ = _load(dirs, "llama", dataclasses.replace(NO_CHAT, fp32_logits=True))
    apply_compute(m, dataclasses.replace(NO_CHAT, dtype="bfloat16", fp32_logits=False))
    assert m.cfg.dtype == "bfloat16" and not m.cfg.fp32_logits
    h = torch.randn(2, 3, m.lm.config.hidden_size)
    exact = torch.nn.functional.linear(h, m.lm.get_output_embeddings().weight)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rounded = m.logits(h)
    assert not torch.allclose(rounded, exact, atol=1e-5)
    apply_compute(m, dataclasses.replace(NO_CHAT, dtype="bfloat16", fp32_logits=True))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.allclose(m.logits(h), exact, atol=1e-5)
