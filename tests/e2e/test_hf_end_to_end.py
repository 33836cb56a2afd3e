"""The Hugging Face path end to end on CPU: `rlvr train gsm8k_tiny_hf` (a tiny random Llama built
locally into the cache, byte-level tokenizer, no download), resume, LoRA, and `rlvr eval` of the
checkpoint against the base model."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("transformers")

from rlvr.cli import main  # noqa: E402

# self-certainty: an intrinsic reward that varies inside every group even for a random model,
# so the policy update is not zero (the verifier reward of a random model is always 0).
OVER = ["reward.kind=self_certainty", "algo.prompts_per_step=2", "sampling.max_new_tokens=12",
        "train.eval_problems=4", "log.progress=none"]


pytestmark = pytest.mark.usefixtures("one_thread")


def _metrics(run):
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _weights(d):
    from safetensors.torch import load_file

    return load_file(str(d / "model.safetensors"))


@pytest.mark.slow
def test_train_resume_and_eval_tiny_hf(tmp_path):
    from rlvr.paths import cache_root

    run = tmp_path / "run"
    assert main(["train", "gsm8k_tiny_hf", "train.steps=2", *OVER, "--run-dir", str(run)]) == 0
    m = _metrics(run)
    assert [x["step"] for x in m] == [1, 2] and all(math.isfinite(x["loss"]) for x in m)
    assert all(x["grad_norm"] > 0 for x in m) and "heldout_pass_rate" in m[-1]
    assert m[1]["samples"] == 2 * m[0]["samples"] == 16 and m[1]["flops"] > m[0]["flops"] > 0
    ck = run / "checkpoints" / "step_000002"
    assert (ck / "config.json").exists() and (ck / "rlvr_hf.json").exists()
    base_dir = cache_root() / "hf-tiny" / "llama"
    base, trained = _weights(base_dir), _weights(ck)
    assert base.keys() == trained.keys()
    assert max((base[k] - trained[k]).abs().max().item() for k in base) > 1e-4  # the update happened

    assert main(["train", "--resume", str(run), "--steps", "3"]) == 0
    m = _metrics(run)
    assert [x["step"] for x in m] == [1, 2, 3] and m[2]["samples"] == 24
    assert (run / "checkpoints" / "step_000003" / "model.safetensors").exists()

    out = tmp_path / "eval"
    assert main(["eval", str(ck), "--base", "tiny-hf:llama", "--task", "arithmetic", "--n", "4",
                 "--problems", "5", "--out", str(out)]) == 0
    ev = json.loads((out / "eval.json").read_text())
    assert {"base", "trained", "support", "perplexity_under_base"} <= ev.keys()
    assert ev["trained"]["n"] == 4 and ev["trained"]["problems"] == 5
    assert {"1", "2", "4"} <= ev["trained"]["pass_at_k"].keys()
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and len({r["problem_id"] for r in rows}) == 5
    assert all(r["num_tokens"] > 0 and math.isfinite(r["mean_logp"]) and r["mean_logp"] < 0 for r in rows)


@pytest.mark.slow
def test_lora_step_tiny_hf(tmp_path):
    pytest.importorskip("peft")
    run = tmp_path / "lora"
    args = ["train", "gsm8k_tiny_hf", "train.steps=1", "model.lora_r=4", *OVER, "--run-dir", str(run)]
    assert main(args) == 0
    ck = run / "checkpoints" / "step_000001"
    from safetensors.torch import load_file

    lora = load_file(str(ck / "lora_adapter.safetensors"))
    assert lora and all("lora_" in k for k in lora)
    assert any(v.abs().max() > 0 for k, v in lora.items() if "lora_B" in k)  # B moved off its zero init
    assert not any("lora_" in k or "base_layer" in k for k in _weights(ck))  # a plain, merged HF model
