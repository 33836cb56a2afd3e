"""Speed of ``rlvr weights`` on a random 125M-parameter Llama-like pair, against a naive baseline.

Writes BASE and TUNED bf16 safetensors files to a temp dir (12 layers x 768 hidden, 2048 MLP,
vocab 32000, untied lm_head: 134M parameters; TUNED = BASE with ``--density`` of the entries
moved by 2%, which always changes their bf16 value), then

1. times ``python -m rlvr.cli weights BASE TUNED --k 16 --json ...`` in a subprocess and reads its
   peak RSS (target: under 60 s on a 2-core machine);
2. times the naive baseline in this process: full ``torch.linalg.svd`` (``--baseline-dtype``,
   float32 by default, the least precision allowed) of every base and tuned matrix, and nothing else.

Prints one line per step and, last, one JSON line with the numbers (speedup = baseline_s / analysis_s).

    python benchmarks/speed/weights_speed.py                 # the 125M pair
    python benchmarks/speed/weights_speed.py --layers 2 --hidden 256 --intermediate 512 --vocab 4000  # quick
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def llama_shapes(layers: int, hidden: int, intermediate: int, vocab: int) -> dict[str, tuple[int, ...]]:
    """Tensor names and shapes of a Llama-style decoder (no biases, untied lm_head)."""
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, hidden),
                                          "model.norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)}
    for i in range(layers):
        p = f"model.layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[f"{p}.self_attn.{proj}.weight"] = (hidden, hidden)
        shapes[f"{p}.mlp.gate_proj.weight"] = (intermediate, hidden)
        shapes[f"{p}.mlp.up_proj.weight"] = (intermediate, hidden)
        shapes[f"{p}.mlp.down_proj.weight"] = (hidden, intermediate)
        shapes[f"{p}.input_layernorm.weight"] = (hidden,)
        shapes[f"{p}.post_attention_layernorm.weight"] = (hidden,)
    return shapes


def make_pair(out: Path, shapes: dict[str, tuple[int, ...]], density: float,
              seed: int = 0) -> tuple[Path, Path]:
    """Write base.safetensors and tuned.safetensors (bf16) under ``out``."""
    g = torch.Generator().manual_seed(seed)
    base = {}
    for name, shape in shapes.items():
        w = torch.ones(shape) if len(shape) == 1 else torch.randn(shape, generator=g) * 0.02
        base[name] = w.to(torch.bfloat16)
    save_file(base, str(out / "base.safetensors"))
    tuned = {}
    for name in list(base):
        w = base.pop(name).float()
        hit = torch.rand(w.shape, generator=g) < density
        sign = torch.where(torch.rand(w.shape, generator=g) < 0.5, -1.0, 1.0)
        tuned[name] = torch.where(hit, w * (1 + 0.02 * sign), w).to(torch.bfloat16)
    save_file(tuned, str(out / "tuned.safetensors"))
    return out / "base.safetensors", out / "tuned.safetensors"


def _stream_file(path: Path, shapes: dict[str, tuple[int, ...]], tensor) -> None:
    """Write a bf16 safetensors file one tensor at a time (``tensor(i, name, shape)`` -> bf16 tensor):
    the header first (offsets from the shapes), then each tensor's bytes, so memory holds one tensor."""
    offsets, at = {}, 0
    for name, shape in shapes.items():
        size = 2 * torch.Size(shape).numel()
        offsets[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [at, at + size]}
        at += size
    header = json.dumps(offsets, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        for i, (name, shape) in enumerate(shapes.items()):
            f.write(tensor(i, name, shape).contiguous().view(torch.int16).numpy().tobytes())


def make_pair_streamed(out: Path, shapes: dict[str, tuple[int, ...]], density: float,
                       seed: int = 0) -> tuple[Path, Path]:
    """:func:`make_pair`'s kind of pair (bf16, N(0, 0.02) matrices, ``density`` of entries moved by 2%) for
    pairs too large to hold in memory: each tensor drawn from its own generator (seed, index), written
    as it is drawn, and drawn again for the tuned file. Not the same numbers as :func:`make_pair`."""
    def base(i: int, shape: tuple[int, ...]) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed * 100_003 + 2 * i)
        w = torch.ones(shape) if len(shape) == 1 else torch.randn(shape, generator=g) * 0.02
        return w.to(torch.bfloat16)

    def tuned(i: int, shape: tuple[int, ...]) -> torch.Tensor:
        w, g = base(i, shape).float(), torch.Generator().manual_seed(seed * 100_003 + 2 * i + 1)
        hit = torch.rand(w.shape, generator=g) < density
        sign = torch.where(torch.rand(w.shape, generator=g) < 0.5, -1.0, 1.0)
        return torch.where(hit, w * (1 + 0.02 * sign), w).to(torch.bfloat16)

    _stream_file(out / "base.safetensors", shapes, lambda i, name, shape: base(i, shape))
    _stream_file(out / "tuned.safetensors", shapes, lambda i, name, shape: tuned(i, shape))
    return out / "base.safetensors", out / "tuned.safetensors"


def time_analysis(base: Path, tuned: Path, k: int, out_json: Path, threads: int | None,
                  rlvr_root: str | None = None) -> tuple[float, ...]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of the ``rlvr weights`` subprocess
    (the rlvr of ``rlvr_root`` when given: another checkout, e.g. the code before a change), from
    ``os.wait4``: that child's own usage, whatever other children this process had."""
    # -P: the working directory is not put first on the path, so PYTHONPATH decides which rlvr runs
    cmd = [sys.executable, "-P", "-m", "rlvr.cli", "weights", str(base), str(tuned), "--k", str(k),
           "--json", str(out_json)] + ([] if threads is None else ["--threads", str(threads)])
    env = dict(os.environ, PYTHONPATH=rlvr_root or str(Path(__file__).resolve().parents[2]))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"rlvr weights failed with status {os.waitstatus_to_exitcode(status)}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def time_baseline(base: Path, tuned: Path, dtype: torch.dtype) -> tuple[float, float]:
    """Wall and CPU seconds for a full torch.linalg.svd of every 2-D base and tuned matrix."""
    start, cpu = time.perf_counter(), time.process_time()
    with safe_open(str(base), "pt") as f0, safe_open(str(tuned), "pt") as f1:
        for name in f0.keys():
            for f in (f0, f1):
                w = f.get_tensor(name)
                if w.ndim == 2:
                    torch.linalg.svd(w.to(dtype), full_matrices=False)
    return time.perf_counter() - start, time.process_time() - cpu


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--intermediate", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--density", type=float, default=0.1, help="fraction of entries the update moves")
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--baseline-dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--threads", type=int, help="torch threads for both the analysis and the baseline")
    parser.add_argument("--pair-dir", help="keep the pair in this folder (written when absent, reused when present) "
                        "and the result JSON there as weights.json: runs of two checkouts compare on one pair")
    parser.add_argument("--stream-write", action="store_true",
                        help="write the pair a tensor at a time (automatic when it would fill half the memory)")
    parser.add_argument("--rlvr-root", help="run the rlvr of this checkout (default: the one importable here)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    shapes = llama_shapes(args.layers, args.hidden, args.intermediate, args.vocab)
    row: dict = {"benchmark": "weights_speed", "params": sum(torch.Size(s).numel() for s in shapes.values()),
                 "rlvr_root": args.rlvr_root or str(Path(__file__).resolve().parents[2])}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.pair_dir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        base, tuned = folder / "base.safetensors", folder / "tuned.safetensors"
        if not (base.is_file() and tuned.is_file()):  # written by a child: this process stays small, and
            start = time.perf_counter()                 # the analysis child forked from it starts small
            # a pair whose two bf16 copies would fill half the memory is written a tensor at a time
            streamed = 4 * row["params"] > os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2
            maker = "make_pair_streamed" if streamed or args.stream_write else "make_pair"
            writer = ("import sys; sys.path.insert(0, sys.argv[1]); import weights_speed as w; "
                      "from pathlib import Path; "
                      f"w.{maker}(Path(sys.argv[2]), w.llama_shapes(*map(int, sys.argv[3:7])), float(sys.argv[7]))")
            subprocess.run([sys.executable, "-c", writer, str(Path(__file__).parent), str(folder), str(args.layers),
                            str(args.hidden), str(args.intermediate), str(args.vocab), str(args.density)], check=True)
            print(f"wrote a {row['params'] / 1e6:.1f}M-parameter bf16 pair in {time.perf_counter() - start:.1f}s"
                  f"{' (a tensor at a time)' if maker == 'make_pair_streamed' else ''}")
        wall, cpu, rss = time_analysis(base, tuned, args.k, folder / "weights.json", args.threads, args.rlvr_root)
        sparsity = json.loads((folder / "weights.json").read_text())["pairs"][0]["sparsity"]
        print(f"rlvr weights: {wall:.1f}s wall, {cpu:.1f}s CPU, peak RSS {rss:.0f} MiB, "
              f"sparsity {sparsity:.4f} (expected ~{1 - args.density:.4f}), "
              f"torch threads {args.threads or torch.get_num_threads()}, "
              f"load average {os.getloadavg()[0]:.1f}")
        row |= {"analysis_s": round(wall, 2), "analysis_cpu_s": round(cpu, 2), "peak_rss_mib": round(rss),
                "baseline": f"full {args.baseline_dtype} svd", "baseline_s": None, "baseline_cpu_s": None,
                "speedup": None, "cpu_speedup": None}
        if not args.skip_baseline:
            b_wall, b_cpu = time_baseline(base, tuned, getattr(torch, args.baseline_dtype))
            print(f"baseline (full {args.baseline_dtype} SVD of every base and tuned matrix): "
                  f"{b_wall:.1f}s wall, {b_cpu:.1f}s CPU = {b_wall / wall:.2f}x the analysis wall time, "
                  f"{b_cpu / cpu:.2f}x its CPU")
            row |= {"baseline_s": round(b_wall, 2), "baseline_cpu_s": round(b_cpu, 2),
                    "speedup": round(b_wall / wall, 2), "cpu_speedup": round(b_cpu / cpu, 2)}
    row |= {"load_avg": round(os.getloadavg()[0], 1), "target_s": 60, "under_target": wall < 60}
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
