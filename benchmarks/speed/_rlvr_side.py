"""rlvr's side of ``benchmarks/speed/vs_trl.py``: ``rlvr train``'s Python entry (``rlvr.train.loop.train``,
the code path of the CLI) on the HF model directory and the prompts of ``settings.json``, with the
shared TRL-signature reward of ``_bench_common.py``. Writes ``result.json`` (per-step times, tokens,
rewards, peak RSS). Runs in rlvr's environment:

    python benchmarks/speed/_rlvr_side.py SETTINGS.json OUT.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import digit_reward, peak_rss_mb, summarise, write_json  # noqa: E402


class DigitTask:
    """The benchmark's prompts; ``verify`` is the shared TRL-signature reward on one completion."""

    name = "bench_digits"
    fast_verify = True  # a bounded pure-Python function: scored in-process, like TRL does

    def __init__(self, prompts: list[str]):
        from rlvr.tasks.base import Problem

        self._problems = [Problem(id=str(i), prompt=p, answer="") for i, p in enumerate(prompts)]

    def problems(self, split: str, n: int | None = None):
        return self._problems[: n or None]

    def verify(self, completion: str, problem):
        from rlvr.tasks.base import Verdict

        r = digit_reward([problem.prompt], [completion])[0]
        return Verdict(r, "right" if r >= 0.5 else "wrong", None)


def overrides(s: dict, run_dir: str) -> list[str]:
    """The dotted overrides that make ``rlvr train`` the same algorithm as TRL's GRPOTrainer defaults
    (loss_type="dapo": clipped ratio with eps 0.2 both sides, token-mean over the batch, group std
    normalisation, no KL, one update per batch); see docs/performance.md."""
    return [
        "name=vs_trl", "task.name=bench_digits", "task.retention_tasks=[]", f"train.out_dir={run_dir}",
        "model.kind=hf", f"model.path={s['model_dir']}", "model.chat_template=false", "model.fp32_logits=true",
        f"model.dtype={s.get('precision', 'float32')}",  # vs_trl.py resolved auto for both sides
        "loss.name=grpo", "loss.aggregation=token_mean", "loss.std_norm=group", "loss.kl_coef=0.0",
        "loss.entropy_coef=0.0",
        f"algo.prompts_per_step={s['prompts_per_step']}", f"algo.group_size={s['group_size']}",
        "algo.ppo_epochs=1", "algo.minibatches=1", "algo.micro_batch_size=0", "algo.zero_var_filter=false",
        "algo.dynamic_sampling=false", "algo.mask_truncated=false", "algo.npr_threshold=0.0",
        f"sampling.max_new_tokens={s['max_new_tokens']}", f"sampling.temperature={s['temperature']}",
        "sampling.top_p=1.0", "sampling.top_k=0",
        f"optim.lr={s['lr']}", f"optim.betas=[{s['beta1']}, {s['beta2']}]", f"optim.weight_decay={s['weight_decay']}",
        f"optim.grad_clip={s['grad_clip']}", "optim.warmup_steps=0", "optim.schedule=constant",
        f"train.steps={s['steps']}", "train.eval_every=0", "train.eval_problems=1",
        f"train.checkpoint_every={s['steps'] + 1}", f"train.seed={s['seed']}", "log.progress=none",
    ]


def timers(clock: dict) -> None:
    """Time each RL step and each generation call (wall and CPU seconds) around the real functions
    (the loop's ``rl_step`` and the sampler it calls); nothing else changes."""
    import rlvr.train.loop as loop
    import rlvr.train.step as step

    real_step, real_sample = loop.rl_step, step.sample

    def timed(fn, prefix):
        def run(*a, **kw):
            w, c = time.perf_counter(), time.process_time()
            out = fn(*a, **kw)
            clock[prefix + "wall"].append(time.perf_counter() - w)
            clock[prefix + "cpu"].append(time.process_time() - c)
            return out
        return run

    loop.rl_step, step.sample = timed(real_step, "step_"), timed(real_sample, "gen_")


def main() -> None:
    settings_path, out_path = sys.argv[1], sys.argv[2]
    s = json.loads(Path(settings_path).read_text())
    import torch

    torch.set_num_threads(s["threads"])
    from rlvr.config import load_config
    from rlvr.log import read_metrics
    from rlvr.tasks.registry import register_task
    from rlvr.train.loop import train

    prompts = s["prompts"]
    register_task("bench_digits", lambda: DigitTask(prompts), replace=True)
    clock: dict[str, list[float]] = {k: [] for k in ("step_wall", "step_cpu", "gen_wall", "gen_cpu")}
    timers(clock)
    run_root = Path(out_path).parent / "rlvr_run"
    cfg = load_config(None, overrides(s, str(run_root)))
    t0 = time.perf_counter()
    run = train(cfg)
    total = time.perf_counter() - t0
    lines = read_metrics(run)
    n, B = len(lines), s["prompts_per_step"] * s["group_size"]
    tokens = [m["tokens"] for m in lines]
    # st.tokens grows by (prompt + completion tokens) twice a step: once generated, once trained on
    seq_tokens = [(b - a) // 2 for a, b in zip([0, *tokens[:-1]], tokens)]
    gen_tokens = [round(m["response_len"] * B) for m in lines]
    res = {
        "side": "rlvr", "run_dir": str(run), "total_s": total, "peak_rss_mb": peak_rss_mb(),
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "step_s": clock["step_wall"], "step_cpu_s": clock["step_cpu"],
        "gen_s": clock["gen_wall"][:n], "gen_cpu_s": clock["gen_cpu"][:n],  # held-out eval samples elsewhere
        "gen_tokens": gen_tokens, "train_tokens": seq_tokens, "reward": [m["reward"] for m in lines],
        "metrics_wall_s": [m["wall_s"] for m in lines], "overrides": overrides(s, str(run_root)),
    }
    res.update(summarise(res, s["warmup"]))
    write_json(out_path, res)


if __name__ == "__main__":
    main()
