"""`sampling.engine=vllm` through `rlvr train` on the tiny HF model, with a fake `vllm` module (vLLM
itself needs a GPU and a newer torch): the engine is built once from the policy's files, its weights
are synced from the trainer after every optimiser step, and its rollouts reach the loss."""

from __future__ import annotations

import json
import sys
from types import ModuleType, SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from rlvr.cli import main  # noqa: E402
from rlvr.config import ConfigError, load_config  # noqa: E402


class FakeLLM:
    built: list = []

    def __init__(self, model, **kw):
        self.model, self.kw, self.loads, self.vocab = model, kw, [], 200
        FakeLLM.built.append(self)
        self.gen = torch.Generator().manual_seed(0)

    def generate(self, reqs, sps, use_tqdm=False):
        outs = []
        for sp in sps:
            n = sp["max_tokens"]
            ids = torch.randint(3, self.vocab, (n,), generator=self.gen).tolist()
            lps = [{t: SimpleNamespace(logprob=-2.0)} for t in ids]
            outs.append(SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, logprobs=lps, finish_reason="length",
                                                                 stop_reason=None)]))
        return outs

    def collective_rpc(self, fn, args=()):
        self.loads.append(len(args[0]))

    def reset_prefix_cache(self):
        pass


@pytest.fixture
def fake_vllm(monkeypatch):
    mod = ModuleType("vllm")
    mod.LLM, mod.SamplingParams = FakeLLM, (lambda **kw: kw)
    monkeypatch.setitem(sys.modules, "vllm", mod)
    FakeLLM.built = []
    return FakeLLM


def test_train_with_the_vllm_engine_syncs_weights_after_each_update(fake_vllm, tmp_path):
    run = tmp_path / "run"
    args = ["train", "gsm8k_tiny_hf", "sampling.engine=vllm", "train.steps=3", "train.eval_every=0",
            "train.final_eval_samples=1", "train.eval_problems=2", "algo.prompts_per_step=2", "algo.minibatches=1",
            "log.progress=none", "train.device=cpu", "--run-dir", str(run)]
    assert main(args) == 0
    assert len(fake_vllm.built) == 1  # built once, from the policy's own files
    llm = fake_vllm.built[0]
    assert "hf-tiny" in llm.model and llm.kw["logprobs_mode"] == "processed_logprobs"
    m = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in m if "loss" in x]
    assert len(steps) == 3 and all(x["response_len"] == 24 for x in steps)  # the fake engine's completions
    # one optimiser step per RL step (1 epoch x 1 mini-batch): the engine is synced before steps 2 and 3
    assert [x["version"] for x in steps] == [1, 2, 3]
    assert len(llm.loads) == 2 and all(n > 0 for n in llm.loads)


def test_vllm_engine_config_is_checked():
    with pytest.raises(ConfigError, match="Hugging Face"):
        load_config("quickstart", ["sampling.engine=vllm"])
    with pytest.raises(ConfigError, match="interruption"):
        load_config("gsm8k_tiny_hf", ["sampling.engine=vllm", "sampling.interruption_budget=8"])
    with pytest.raises(ConfigError, match="native or vllm"):
        load_config("gsm8k_tiny_hf", ["sampling.engine=sglang"])
