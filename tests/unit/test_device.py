"""Device placement (`train.device`): resolution and errors on any machine; the whole RL step and
evaluation on a CUDA GPU when one is visible (skipped otherwise)."""

from __future__ import annotations

import json

import pytest
import torch

from rlvr.errors import UserError
from rlvr.model.io import model_device, resolve_device

CUDA = torch.cuda.is_available()


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if CUDA else "cpu")
    with pytest.raises(UserError, match="not a device"):
        resolve_device("gpu0")


@pytest.mark.skipif(CUDA, reason="checks the error shown when no GPU is visible")
def test_cuda_without_gpu_is_a_clear_error():
    with pytest.raises(UserError, match="no CUDA GPU"):
        resolve_device("cuda")


def test_model_device_and_sampler_follow_the_model():
    from rlvr.config import ModelConfig
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer
    from rlvr.rollout.engine import sample
    from rlvr.rollout.sample import SampleParams

    tok = CharTokenizer()
    m = TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2), tok.vocab_size)
    assert model_device(m) == torch.device("cpu") and model_device(torch.nn.Identity()) == torch.device("cpu")
    rb = sample(m, tok, ["Q:1+2\n"] * 3, SampleParams(max_new_tokens=4), generator=torch.Generator().manual_seed(0))
    assert rb.completion_ids.device == model_device(m) and len(rb.texts) == 3


def test_bad_device_fails_before_loading(tiny_overrides, tmp_path):
    from rlvr.cli import main

    assert main(["train", "quickstart", *tiny_overrides, "train.device=tpu9", "--run-dir", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r" / "metrics.jsonl").exists()


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_rl_steps_and_eval_on_gpu(tiny_overrides, tmp_path):
    from rlvr.cli import main

    run = tmp_path / "run"
    over = [*tiny_overrides, "train.device=cuda", "train.steps=2", "train.eval_every=1", "train.eval_problems=8",
            "algo.prompts_per_step=2", "algo.group_size=4", "algo.minibatches=1"]
    assert main(["train", "quickstart", *over, "--run-dir", str(run)]) == 0
    m = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in m if "step" in x][-1] == 2
    assert main(["train", "gsm8k_tiny_hf", "train.device=cuda", "train.steps=1", "log.progress=none",
                 "reward.kind=self_certainty", "--run-dir", str(tmp_path / "hf")]) == 0
