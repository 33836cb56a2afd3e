"""rlvr vs TRL's GRPOTrainer on the same tiny Hugging Face model, same settings, same machine, same run.

Both sides load the very same weights and tokenizer from disk (a random Qwen2 built locally by
``rlvr.train.tiny_hf.build_tiny_hf``, no download), train on the same prompts with the same reward
function (``_bench_common.digit_reward``, TRL signature), group size, completion length,
temperature, optimiser (torch AdamW, same betas / weight decay / grad clip, constant lr, no
warm-up) and loss (TRL's default ``loss_type="dapo"`` = rlvr ``grpo`` with ``token_mean``
aggregation, group std normalisation, KL off, one update per batch). Each side runs in its own
subprocess with the same thread count: rlvr in this environment (``rlvr.train.loop.train``, the code
path of ``rlvr train``), TRL in its own virtual environment ``benchmarks/speed/.venv-trl``, created on first
use with this environment's torch wheel (never another torch) and TRL 1.16.

Precision by machine (``--precision auto``, the default): each side computes in its best precision
here. rlvr's ``model.dtype=auto`` measures bf16 autocast against float32 at the model's shapes once
per machine (``rlvr.model.precision``); TRL gets ``bf16=True`` exactly where that measurement chose
bfloat16 (its CPU autocast is the same op set), else float32. Where bf16 is slow (an AVX2 CPU
without native bf16) both sides run float32. The report says which, and why.

Also measures rlvr's sampler against HF ``generate`` on the same HF model and batch (64 prompts,
64 new tokens, temperature 1, EOS off on both sides), in this process.

Prints, per model: seconds per RL step (median after warm-up; wall and CPU), generation tokens/s,
training tokens/s, peak RSS, and rlvr/TRL ratios; writes both reward curves (JSON, CSV, PNG) to
--out. Last line machine-readable: ``speedup_vs_trl=<float> gen_speedup_vs_hf=<float>`` (first
model: TRL seconds per step / rlvr seconds per step, and rlvr sampler tokens/s / HF generate tokens/s).

    python benchmarks/speed/vs_trl.py --quick          # small model, 8 steps: a few minutes
    python benchmarks/speed/vs_trl.py                  # both models, 50 steps each (docs/performance.md)
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata as md
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: the shared _timing.py
from _timing import median_time  # noqa: E402

TRL_VERSION = "1.16.0"
MODELS = {  # name -> build_tiny_hf arguments (qwen2, byte-level tokenizer, tied embedding)
    "qwen2-0.14M": {"arch": "qwen2", "hidden": 64, "layers": 2, "heads": 4},
    "qwen2-5M": {"arch": "qwen2", "hidden": 256, "layers": 5, "heads": 4},
}


# ----------------------------------------------------------------------------- environments
def trl_python(venv: Path) -> Path:
    """The TRL environment's python, created on first use: this environment's torch wheel FIRST
    (a constraint keeps any later install from pulling another torch), then TRL and the same
    transformers/tokenizers versions as rlvr's side."""
    py = venv / "bin" / "python"
    probe = [str(py), "-c", f"import trl, torch; assert trl.__version__ == '{TRL_VERSION}'"]
    if py.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return py
    torch_v = md.version("torch").split("+")[0]
    print(f"creating {venv} (torch=={torch_v}, trl=={TRL_VERSION}); once", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pins = venv / "constraints.txt"
    pins.write_text(f"torch=={torch_v}\n")
    pip = [str(py), "-m", "pip", "install", "-q", "-c", str(pins)]
    same = [f"{p}=={md.version(p)}" for p in ("transformers", "tokenizers", "accelerate", "datasets")
            if _installed(p)]
    with (venv / "install.log").open("w") as log:
        for args in ([f"torch=={torch_v}"], [f"trl=={TRL_VERSION}", *same]):
            if subprocess.run([*pip, *args], stdout=log, stderr=subprocess.STDOUT).returncode:
                raise SystemExit(f"pip install {' '.join(args)} failed; see {venv / 'install.log'}")
    got = subprocess.run([str(py), "-c", "import torch; print(torch.__version__)"], capture_output=True,
                         text=True, check=True).stdout.strip()
    if got.split("+")[0] != torch_v:
        raise SystemExit(f"{venv}: torch {got} instead of {torch_v}; remove the folder and retry")
    subprocess.run(probe, check=True)
    return py


def _installed(name: str) -> bool:
    try:
        md.version(name)
        return True
    except md.PackageNotFoundError:
        return False


def child_env(threads: int) -> dict:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", TOKENIZERS_PARALLELISM="false",
               TRANSFORMERS_NO_ADVISORY_WARNINGS="1", PYTHONWARNINGS="ignore")
    return env


# ----------------------------------------------------------------------------- pieces
def build_models(out: Path, names: list[str]) -> dict[str, Path]:
    from rlvr.train.tiny_hf import build_tiny_hf

    dirs = {}
    for name in names:
        d = out / "models" / name
        if not (d / "config.json").exists():
            build_tiny_hf(d, **MODELS[name])
        dirs[name] = d
    return dirs


def prompts(n: int) -> list[str]:
    from rlvr.tasks.registry import get_task

    return [p.prompt for p in get_task("arithmetic").problems("train", n)]


def check_same_prompt_tokens(model_dir: Path, texts: list[str]) -> None:
    """rlvr encodes BOS + raw text; TRL tokenises bos_token + text. They must be the same ids."""
    from transformers import AutoTokenizer

    from rlvr.model.hf import HFTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    ours = HFTokenizer(tok, chat=False)
    for t in texts[:32]:
        if ours.prompt_ids(t) != tok(tok.bos_token + t)["input_ids"]:
            raise SystemExit(f"prompt {t!r} tokenises differently on the two sides")


def side_precision(model_dir: Path, requested: str, shape: dict):
    """The precision both sides use: rlvr's resolution of ``requested`` for this model on this CPU
    (auto: measured once per machine and cached; real steps recorded at this step ``shape`` decide
    where both precisions have some). -> :class:`rlvr.model.precision.Precision`."""
    from rlvr.model.precision import dir_spec, resolve_dtype

    return resolve_dtype(requested, "cpu", lambda: dir_spec(model_dir), shape)


def record_real_step(model_dir: Path, prec, shape: dict, sec_per_step: float) -> None:
    """Record rlvr's measured step (median after warm-up) in its precision for ``model.dtype=auto``
    (:func:`rlvr.model.precision_cache.record_steps`): where auto decided, or where auto measured
    this model before (so a ``--precision float32`` run can overturn a bfloat16 choice)."""
    from rlvr.model.precision import dir_spec
    from rlvr.model.precision_cache import cache_key, cache_path, record_steps

    spec = prec.workload or dir_spec(model_dir)
    if spec and (prec.workload is not None or cache_path(cache_key(spec)).exists()):
        print(f"precision: {record_steps(spec, shape, prec.dtype, [sec_per_step], prec.measurement)}", flush=True)


def run_side(cmd: list[str], settings: Path, out: Path, log: Path, threads: int) -> dict:
    t = time.time()
    with log.open("w") as f:
        rc = subprocess.run([*cmd, str(settings), str(out)], stdout=f, stderr=subprocess.STDOUT,
                            env=child_env(threads)).returncode
    if rc != 0 or not out.exists():
        tail = "".join(log.read_text().splitlines(keepends=True)[-20:])
        raise SystemExit(f"{' '.join(cmd[-1:])} failed (exit {rc}); log {log}:\n{tail}")
    print(f"  {cmd[-1].split('/')[-1]:15s} {time.time() - t:6.1f} s", flush=True)
    return json.loads(out.read_text())


def gen_vs_hf(model_dir: Path, batch: int, new_tokens: int, repeats: int) -> dict:
    """rlvr's sampler vs HF generate on the same HF model and batch (prompt 32 tokens, EOS off)."""
    import torch

    from rlvr.config import ModelConfig
    from rlvr.model.hf import load_hf_policy
    from rlvr.rollout.sample import SampleParams, generate

    policy, _ = load_hf_policy(str(model_dir), ModelConfig(kind="hf", path=str(model_dir), chat_template=False))
    policy.eval()
    torch.manual_seed(0)
    ids = torch.randint(3, 259, (batch, 32))
    mask = torch.ones_like(ids, dtype=torch.bool)
    p = SampleParams(max_new_tokens=new_tokens, temperature=1.0)
    n_tok = batch * new_tokens

    def rlvr():
        rb = generate(policy, ids, mask, p, eos_id=-1, pad_id=0, generator=torch.Generator().manual_seed(0))
        assert int(rb.lengths.sum()) == n_tok

    @torch.no_grad()
    def hf():
        out = policy.lm.generate(ids, attention_mask=mask.long(), do_sample=True, temperature=1.0, top_k=0,
                                 top_p=1.0, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                 eos_token_id=None, pad_token_id=0)
        assert out.shape[1] == 32 + new_tokens

    res = {}
    for name, fn in (("rlvr", rlvr), ("hf_generate", hf)):
        res[name] = n_tok / median_time(fn, repeats)
    res["speedup"] = res["rlvr"] / res["hf_generate"]
    res["params"] = policy.num_params()
    return res


def write_curves(out: Path, results: dict) -> None:
    (out / "reward_curves.json").write_text(json.dumps(
        {m: {side: r[side]["reward"] for side in ("rlvr", "trl")} for m, r in results.items()}, indent=1))
    with (out / "reward_curves.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "step", "rlvr_reward", "trl_reward"])
        for m, r in results.items():
            for i, (a, b) in enumerate(zip(r["rlvr"]["reward"], r["trl"]["reward"])):
                w.writerow([m, i + 1, f"{a:.5f}", f"{b:.5f}"])
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.6), squeeze=False)
    for ax, (m, r) in zip(axes[0], results.items()):
        for side, style in (("rlvr", "-"), ("trl", "--")):
            y = r[side]["reward"]
            ax.plot(range(1, len(y) + 1), y, style, label=f"{side} ({r[side]['sec_per_step']:.2f} s/step)")
        ax.set(title=m, xlabel="RL step", ylabel="mean reward (digit share)", ylim=(0, 1.02))
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "reward_curves.png", dpi=110)


# ----------------------------------------------------------------------------- report
ROWS = (("sec/step (wall)", "sec_per_step"), ("sec/step (CPU)", "sec_per_step_cpu"),
        ("gen tokens/s (wall)", "gen_tok_s"), ("train tokens/s (wall)", "train_tok_s"),
        ("peak RSS MiB", "peak_rss_mb"))


def report(model: str, r: dict) -> None:
    a, b = r["rlvr"], r["trl"]
    print(f"\n{model} ({r['params']:,} params), {r['steps']} steps, median over steps after {r['warmup']}")
    print(f"  {'':22s} {'rlvr':>10s} {'TRL':>10s} {'rlvr/TRL':>9s}")
    for label, k in ROWS:
        print(f"  {label:22s} {a[k]:10.3f} {b[k]:10.3f} {a[k] / b[k]:9.2f}")
    print(f"  speedup per step (TRL/rlvr): wall {b['sec_per_step'] / a['sec_per_step']:.2f}x, "
          f"CPU {b['sec_per_step_cpu'] / a['sec_per_step_cpu']:.2f}x")
    k = max(1, len(a["reward"]) // 5)
    for side, x in (("rlvr", a), ("TRL", b)):
        rw = x["reward"]
        print(f"  reward {side:4s}: first {k} steps {statistics.mean(rw[:k]):.3f} -> last {k} "
              f"{statistics.mean(rw[-k:]):.3f}")
    if "gen" in r:
        g = r["gen"]
        print(f"  sampler, 64 x 64 new tokens: rlvr {g['rlvr']:.0f} tok/s, HF generate {g['hf_generate']:.0f} "
              f"tok/s -> {g['speedup']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="first model only, 8 steps (a few minutes)")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma list of {', '.join(MODELS)}")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of the medians")
    ap.add_argument("--threads", type=int, default=2, help="torch threads on both sides")
    ap.add_argument("--prompts-per-step", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gen-repeats", type=int, default=3)
    ap.add_argument("--precision", default="auto", choices=["auto", "float32", "bfloat16"],
                    help="both sides' compute precision (default auto: each side's best on this machine)")
    ap.add_argument("--out", default=str(Path(os.environ.get("RLVR_CACHE", Path.home() / ".cache" / "rlvr"))
                                         / "bench-vs-trl"))
    ap.add_argument("--trl-venv", default=str(HERE / ".venv-trl"))
    a = ap.parse_args()
    names = [m for m in a.models.split(",") if m]
    for m in names:
        if m not in MODELS:
            raise SystemExit(f"unknown model {m!r}; use {', '.join(MODELS)}")
    if a.quick:
        names, a.steps, a.warmup, a.gen_repeats = names[:1], 8, 2, 2
    import torch

    torch.set_num_threads(a.threads)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    trl_py = trl_python(Path(a.trl_venv))
    dirs = build_models(out, names)
    texts = prompts(256)
    results: dict = {}
    for name in names:
        check_same_prompt_tokens(dirs[name], texts)
        from rlvr.model.precision import step_shape

        shape = step_shape(a.prompts_per_step, a.group_size, a.max_new_tokens)
        prec = side_precision(dirs[name], a.precision, shape)
        print(f"{name}: {prec.line()}; TRL bf16={prec.dtype == 'bfloat16'}", flush=True)
        s = {"model_dir": str(dirs[name]), "prompts": texts, "precision": prec.dtype,
             "prompts_per_step": a.prompts_per_step,
             "group_size": a.group_size, "max_new_tokens": a.max_new_tokens, "temperature": 1.0, "lr": a.lr,
             "beta1": 0.9, "beta2": 0.999, "weight_decay": 0.0, "grad_clip": 1.0, "steps": a.steps,
             "seed": a.seed, "threads": a.threads, "warmup": a.warmup}
        d = out / name
        d.mkdir(exist_ok=True)
        (d / "settings.json").write_text(json.dumps(s, indent=1))
        print(f"{name}: {a.steps} steps, {a.prompts_per_step} prompts x {a.group_size} completions of "
              f"<= {a.max_new_tokens} tokens, {a.threads} threads", flush=True)
        r = {"steps": a.steps, "warmup": a.warmup, "precision": prec.dtype, "precision_reason": prec.reason}
        r["rlvr"] = run_side([sys.executable, str(HERE / "_rlvr_side.py")], d / "settings.json", d / "rlvr.json",
                             d / "rlvr.log", a.threads)
        record_real_step(dirs[name], prec, shape, r["rlvr"]["sec_per_step"])
        r["trl"] = run_side([str(trl_py), str(HERE / "_trl_side.py")], d / "settings.json", d / "trl.json",
                            d / "trl.log", a.threads)
        r["gen"] = gen_vs_hf(dirs[name], 64, 64, a.gen_repeats)
        r["params"] = r["gen"].pop("params")
        results[name] = r
        report(name, r)
    write_curves(out, results)
    from rlvr.machine import machine_info, machine_line

    machine = machine_line(machine_info(None, torch.device("cpu")))
    summary = {m: {"speedup_vs_trl": r["trl"]["sec_per_step"] / r["rlvr"]["sec_per_step"],
                   "speedup_vs_trl_cpu": r["trl"]["sec_per_step_cpu"] / r["rlvr"]["sec_per_step_cpu"],
                   "gen_speedup_vs_hf": r["gen"]["speedup"], "rlvr": {k: r["rlvr"][k] for _, k in ROWS},
                   "trl": {k: r["trl"][k] for _, k in ROWS}, "trl_version": r["trl"]["trl"],
                   "precision": r["precision"], "precision_reason": r["precision_reason"], "machine": machine}
               for m, r in results.items()}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"\nreward curves and per-step data: {out}/reward_curves.{{json,csv,png}}, {out}/<model>/")
    first = summary[names[0]]
    print(f"machine: {machine}")
    print(f"speedup_vs_trl={first['speedup_vs_trl']:.3f} gen_speedup_vs_hf={first['gen_speedup_vs_hf']:.3f} "
          f"precision={first['precision']}")


if __name__ == "__main__":
    main()
