"""TRL's side of ``benchmarks/speed/vs_trl.py``: ``trl.GRPOTrainer`` on CPU (no vLLM) with the HF model
directory, prompts and settings of ``settings.json`` and the shared reward of ``_bench_common.py``.
Writes ``result.json`` (per-step times, generation times, tokens, rewards, peak RSS). Runs in the
benchmark's own TRL environment (``benchmarks/speed/.venv-trl``, made by vs_trl.py), never in rlvr's:

    benchmarks/speed/.venv-trl/bin/python benchmarks/speed/_trl_side.py SETTINGS.json OUT.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import digit_reward, peak_rss_mb, summarise, write_json  # noqa: E402


def grpo_config(s: dict, out_dir: str):
    """GRPOConfig equal to rlvr's side (see _rlvr_side.overrides and docs/performance.md)."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=out_dir, report_to="none", use_cpu=True, bf16=s.get("precision") == "bfloat16", fp16=False,
        gradient_checkpointing=False,
        per_device_train_batch_size=s["prompts_per_step"] * s["group_size"], gradient_accumulation_steps=1,
        num_generations=s["group_size"], num_iterations=1, max_completion_length=s["max_new_tokens"],
        temperature=s["temperature"], top_p=1.0, top_k=0, beta=0.0, loss_type="dapo", epsilon=0.2,
        scale_rewards="group", mask_truncated_completions=False,
        learning_rate=s["lr"], adam_beta1=s["beta1"], adam_beta2=s["beta2"], weight_decay=s["weight_decay"],
        max_grad_norm=s["grad_clip"], optim="adamw_torch", lr_scheduler_type="constant", warmup_steps=0,
        max_steps=s["steps"], logging_steps=1, save_strategy="no", disable_tqdm=True, seed=s["seed"],
        dataloader_num_workers=0, log_completions=False,
    )


def main() -> None:
    settings_path, out_path = sys.argv[1], sys.argv[2]
    s = json.loads(Path(settings_path).read_text())
    import torch

    torch.set_num_threads(s["threads"])
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOTrainer

    tok = AutoTokenizer.from_pretrained(s["model_dir"])
    model = AutoModelForCausalLM.from_pretrained(s["model_dir"], dtype=torch.float32)
    eos = tok.eos_token_id
    gen_s, gen_cpu, gen_tokens, prompt_tokens = [], [], [], []
    hf_generate = model.generate

    def timed_generate(*args, **kw):  # HF generate, timed; token counts as TRL masks them (up to EOS)
        t, c = time.perf_counter(), time.process_time()
        out = hf_generate(*args, **kw)
        gen_s.append(time.perf_counter() - t)
        gen_cpu.append(time.process_time() - c)
        n_prompt = kw["input_ids"].shape[1]
        comp = out[:, n_prompt:]
        is_eos = comp == eos
        length = torch.where(is_eos.any(1), is_eos.int().argmax(1) + 1, torch.full_like(comp[:, 0], comp.shape[1]))
        gen_tokens.append(int(length.sum()))
        prompt_tokens.append(int(kw["attention_mask"].sum()))
        return out

    model.generate = timed_generate
    step_s: list[float] = []
    step_cpu: list[float] = []

    class StepTimer(TrainerCallback):  # one optimiser step = generate + reward + loss + backward + AdamW
        def on_step_begin(self, args, state, control, **kw):
            self.t, self.c = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, **kw):
            step_s.append(time.perf_counter() - self.t)
            step_cpu.append(time.process_time() - self.c)

    # rlvr encodes a raw prompt as BOS + text; TRL tokenises the string as given, so prefix BOS
    data = Dataset.from_dict({"prompt": [tok.bos_token + p for p in s["prompts"]]})
    trainer = GRPOTrainer(model=model, reward_funcs=digit_reward, args=grpo_config(s, str(Path(out_path).parent /
                                                                                         "trl_run")),
                          train_dataset=data, processing_class=tok, callbacks=[StepTimer()])
    t0 = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - t0
    logs = [h for h in trainer.state.log_history if "reward" in h]
    n = len(step_s)
    train_tokens = [p + g for p, g in zip(prompt_tokens, gen_tokens)]
    res = {
        "side": "trl", "trl": trl.__version__, "torch": torch.__version__, "threads": torch.get_num_threads(),
        "total_s": total, "peak_rss_mb": peak_rss_mb(), "step_s": step_s, "step_cpu_s": step_cpu,
        "gen_s": gen_s[:n], "gen_cpu_s": gen_cpu[:n],
        "gen_tokens": gen_tokens[:n], "train_tokens": train_tokens[:n], "reward": [h["reward"] for h in logs],
        "optimizer": type(trainer.optimizer.optimizer if hasattr(trainer.optimizer, "optimizer")
                          else trainer.optimizer).__name__,
    }
    res.update(summarise(res, s["warmup"]))
    write_json(out_path, res)


if __name__ == "__main__":
    main()
