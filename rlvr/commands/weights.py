"""``rlvr weights``: where did fine-tuning move the weights? (docs/methods/weight_updates.md)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from rlvr.console import print_table
from rlvr.errors import UserError
from rlvr.paths import atomic_write

HELP = "Compare a base model's weights with tuned ones: update sparsity, spectrum, principal subspaces."
EPILOG = """examples:
  rlvr weights runs/base runs/grpo                      # run dirs: latest checkpoint of each
  rlvr weights Qwen2.5-0.5B/ rl/ sft/ --k 0.05         # two tuned models: also their mask overlap
  rlvr weights base.safetensors rl.safetensors --precision fp32 --json w.json --plots plots/
  rlvr weights base/ tuned/ --precision 1e-5           # |dW| > 1e-5 counts as changed

BASE/TUNED: a .safetensors file, a Hugging Face model dir (shards + index), a checkpoint dir
or an rlvr run dir (checkpoints/final, else the highest step). See docs/commands/weights.md."""

PROGRESS_EVERY = 25  # tensors between progress lines on stderr (models with more tensors only)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE", help="the model before fine-tuning")
    parser.add_argument("tuned", metavar="TUNED", nargs="+", help="one or more fine-tuned models of BASE")
    parser.add_argument("--k", default="16", help="singular directions: an integer, or a fraction of rank "
                        "like 0.05 or 5%% (default 16)")
    parser.add_argument("--precision", default="bf16", help="what counts as changed: bf16 (differs after "
                        "rounding to bf16, default), fp32 (bitwise), a tolerance like 1e-5, or rel:1e-3")
    parser.add_argument("--svd", default="gram", choices=["gram", "svd", "lowrank"],
                        help="gram: exact float64 via the Gram matrix (default); svd: float64 SVD; "
                        "lowrank: randomized top-k (large matrices, approximate)")
    parser.add_argument("--json", metavar="FILE", help="write all results as JSON")
    parser.add_argument("--plots", metavar="DIR", help="write per-layer and principal-angle plots")
    parser.add_argument("--per-matrix", action="store_true", help="also print one line per tensor")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's; 1 is fastest on "
                        "cores shared with other jobs)")


def parse_k(text: str) -> int | float:
    """``"16"`` -> 16; ``"0.05"`` or ``"5%"`` -> 0.05 (a fraction of each matrix's rank)."""
    try:
        if text.endswith("%"):
            return float(text[:-1]) / 100
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise UserError(f"--k {text!r} is not a number; use an integer like 16 or a fraction like 0.05") \
            from None


def _tensor_records(name: str, src0, srcs: list, k_spec, precision, method: str) -> tuple[list[dict], list[dict]]:
    """One record per tuned model for tensor ``name``, and the update-mask overlap counts of each pair
    of tuned models (:func:`rlvr.analysis.updates.jaccard_record`). A matrix is read a block of rows at
    a time (:mod:`rlvr.analysis.matrix_compare`); other tensors whole."""
    import torch

    from rlvr.analysis import updates
    from rlvr.analysis.matrix_compare import compare_matrix
    from rlvr.analysis.weight_io import layer_index, tensor_kind

    shape = src0.shape(name)
    floating = all(src.dtype(name).is_floating_point for src in (src0, *srcs))
    numel = int(torch.Size(shape).numel())
    base = {"name": name, "kind": tensor_kind(name), "layer": layer_index(name), "shape": list(shape),
            "numel": numel}
    pairs = [(a, b) for a in range(len(srcs)) for b in range(a + 1, len(srcs))]
    if floating and len(shape) == 2 and min(shape) > 1:
        k = updates.resolve_k(k_spec, *shape)
        rows0 = src0.matrix(name)
        spec0 = updates.spectrum(rows0, k, method)
        measures = [compare_matrix(rows0, src.matrix(name), k, precision, spec0, method) for src in srcs]
        records = [{**base, "changed": m["changed"], "sparsity": 0.0, **m} for m in measures]  # old key order
        overlaps = _block_overlaps(rows0, [src.matrix(name) for src in srcs], pairs, precision) if pairs else []
    else:  # integer/bool buffers: exact comparison, sparsity only
        w0 = src0.get(name)
        masks = [updates.update_mask(w0, src.get(name), precision) if floating else w0 != src.get(name)
                 for src in srcs]
        records = [dict(base, changed=int(torch.count_nonzero(mask).item()), sparsity=0.0) for mask in masks]
        overlaps = [updates.jaccard_record(masks[a], masks[b]) for a, b in pairs]
    for rec in records:
        rec["sparsity"] = 1.0 - rec["changed"] / max(1, rec["numel"])
    return records, overlaps


def _block_overlaps(rows0, tuned: list, pairs: list[tuple[int, int]], precision) -> list[dict]:
    """:func:`rlvr.analysis.updates.jaccard_record` of each pair's update masks, summed over row blocks
    (the chance counts from the whole matrix's counts)."""
    from rlvr.analysis.row_blocks import block_rows, blocks
    from rlvr.analysis.updates import jaccard_chance, jaccard_record, update_mask

    totals: list[dict] = [{} for _ in pairs]
    for start, stop in blocks(rows0.shape[0], block_rows(rows0.shape[1])):
        w0 = rows0.block(start, stop)
        masks = [update_mask(w0, rows.block(start, stop), precision) for rows in tuned]
        for total, (a, b) in zip(totals, pairs):
            for key, value in jaccard_record(masks[a], masks[b]).items():
                total[key] = total.get(key, 0) + value
    for total in totals:
        total["chance_inter"], total["chance_union"] = jaccard_chance(total["count_a"], total["count_b"],
                                                                      total["numel"])
    return totals


def analyse(base: str, tuned: list[str], k_spec: int | float = 16, precision="bf16", method: str = "gram",
            progress=None) -> dict:
    """Stream the matched tensors of BASE and each TUNED model and return the JSON result
    (keys in docs/commands/weights.md); ``progress(i, total, name)`` is called after each tensor."""
    tuned = [tuned] if isinstance(tuned, str) else list(tuned)
    from rlvr.analysis.weight_io import WeightSource, matched_names

    per_pair: list[list[dict]] = [[] for _ in tuned]
    pair_ids = [(a, b) for a in range(len(tuned)) for b in range(a + 1, len(tuned))]
    overlap_rows: dict[tuple[int, int], list[dict]] = {ab: [] for ab in pair_ids}
    with ExitStack() as stack:
        src0 = stack.enter_context(WeightSource(base))
        sources = [stack.enter_context(WeightSource(t)) for t in tuned]
        names = matched_names(src0, sources)
        for i, name in enumerate(names, start=1):
            records, overlaps = _tensor_records(name, src0, sources, k_spec, precision, method)
            for rows, rec in zip(per_pair, records):
                rows.append(rec)
            for ab, row in zip(pair_ids, overlaps):
                overlap_rows[ab].append(dict(row, name=name, kind=records[0]["kind"]))
            if progress is not None:
                progress(i, len(names), name)
    return {"pairs": [_pair_result(base, t, rows) for t, rows in zip(tuned, per_pair)],
            "mask_overlap": {f"{a + 1}-{b + 1}": _overlap_result(tuned[a], tuned[b], overlap_rows[(a, b)])
                             for a, b in pair_ids}}


def _pair_result(base: str, tuned: str, rows: list[dict]) -> dict:
    from rlvr.analysis.updates import summarize_by_kind

    per_kind = summarize_by_kind(rows)
    overall = per_kind["all"]
    keys = ("sparsity", "spectral_drift", "principal_angle_mean_deg", "principal_energy_share",
            "random_energy_share")
    return {"base": base, "tuned": tuned, **{key: overall[key] for key in keys}, "per_kind": per_kind,
            "per_matrix": rows}


def _overlap_result(a: str, b: str, rows: list[dict]) -> dict:
    from rlvr.analysis.updates import summarize_jaccard

    kinds = sorted({r["kind"] for r in rows})
    return {"a": a, "b": b, **summarize_jaccard(rows),
            "per_kind": {kind: summarize_jaccard([r for r in rows if r["kind"] == kind]) for kind in kinds}}


def _fmt(x, spec: str = ".4f") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def _count(n: int) -> str:
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.1f}{suffix}"
    return str(n)


def _ratio(x, chance) -> str:
    return "-" if x is None or not chance else f"{x / chance:.2f}x"


KIND_HEADERS = ["kind", "tensors", "params", "sparsity", "drift", "angle", "energy", "random", "princ.ovl",
                "lowmag.ovl"]
MATRIX_HEADERS = ["matrix", "sparsity", "drift", "angle", "energy"]


def print_pair(pair: dict, per_matrix: bool = False) -> None:
    """The per-kind table of one base/tuned pair (a rule above the ``all`` row), with ``per_matrix``
    one row per matrix too, then what the columns mean."""
    print(f"base  {pair['base']}\ntuned {pair['tuned']}")
    rows = []
    for kind, s in pair["per_kind"].items():
        if kind == "all":
            rows.append(None)
        rows.append([kind, str(s["tensors"]), _count(s["params"]), _fmt(s["sparsity"]),
                     _fmt(s["spectral_drift"], ".2e"), _fmt(s["principal_angle_mean_deg"], ".3f"),
                     _fmt(s["principal_energy_share"], ".2e"), _fmt(s["random_energy_share"], ".2e"),
                     _ratio(s["principal_mask_overlap"], s["mask_chance"]),
                     _ratio(s["low_magnitude_overlap"], s["mask_chance"])])
    print_table(KIND_HEADERS, rows)
    if per_matrix:
        print()
        print_table(MATRIX_HEADERS, [[r["name"], f"{r['sparsity']:.4f}", _fmt(r.get("spectral_drift"), ".2e"),
                                      _fmt(r.get("principal_angle_mean_deg"), ".3f"),
                                      _fmt(r.get("principal_energy_share"), ".2e")] for r in pair["per_matrix"]])
    print("sparsity: fraction unchanged; drift: ||s1-s0||/||s0||; angle: mean principal angle (deg)\n"
          "of the top-k subspaces; energy/random: update energy in the top-k subspace vs k^2/(mn);\n"
          "*.ovl: update-mask overlap with the principal / low-magnitude masks, vs chance.")


@contextmanager
def single_threaded_lapack() -> Iterator[None]:
    """Run scipy's OpenBLAS single-threaded (best effort, restored on exit).

    The tridiagonal eigensolver of :func:`rlvr.analysis.updates.top_eigh` is memory-bound: a second
    OpenBLAS thread gains nothing alone and costs 2-10x when other processes share the cores.
    """
    import ctypes

    import scipy

    handles = []
    root = Path(scipy.__file__).parent
    for lib in sorted([*root.parent.glob("scipy.libs/*openblas*"), *root.glob(".dylibs/*openblas*")]):
        try:
            dll = ctypes.CDLL(str(lib))
        except OSError:
            continue
        for prefix in ("scipy_openblas", "openblas"):
            get = getattr(dll, f"{prefix}_get_num_threads", None)
            put = getattr(dll, f"{prefix}_set_num_threads", None)
            if get is not None and put is not None:
                handles.append((put, get()))
                put(1)
                break
    try:
        yield
    finally:
        for put, before in handles:
            put(before)


def _clean(x):
    """JSON-safe copy: non-finite floats become null."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {key: _clean(v) for key, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def run(args: argparse.Namespace) -> int:
    from rlvr.analysis.updates import parse_precision
    from rlvr.commands._common import check_output, require_path

    for what, path in (("BASE", args.base), *(("TUNED", t) for t in args.tuned)):
        require_path(path, what, "pass a run dir, checkpoint dir, model dir or .safetensors file")
    for flag, path, kind in (("--json", args.json, "file"), ("--plots", args.plots, "dir")):
        if path:
            check_output(path, flag, kind)

    k_spec, precision = parse_k(args.k), parse_precision(args.precision)
    if args.threads is not None:
        import torch

        if args.threads < 1:
            raise UserError(f"--threads {args.threads} is below 1; pass a positive thread count")
        torch.set_num_threads(args.threads)
    start = time.perf_counter()

    def progress(i: int, total: int, name: str) -> None:
        if total > PROGRESS_EVERY and (i % PROGRESS_EVERY == 0 or i == total):
            elapsed = time.perf_counter() - start
            print(f"[weights] {i}/{total} tensors, {elapsed:.1f}s ({name})", file=sys.stderr, flush=True)

    with single_threaded_lapack():
        result = _clean(analyse(args.base, args.tuned, k_spec, precision, args.svd, progress))
    for pair in result["pairs"]:
        print_pair(pair, args.per_matrix)
        print()
    for key, ov in result["mask_overlap"].items():
        print(f"mask overlap {key} ({ov['a']} vs {ov['b']}): jaccard {_fmt(ov['jaccard'])}, chance "
              f"{_fmt(ov['jaccard_chance'])} ({_fmt(ov['ratio'], '.2f')}x)")
    if args.json:
        atomic_write(args.json, json.dumps(result, indent=1))
        print(f"wrote {args.json}")
    if args.plots:
        from rlvr.analysis.update_plots import plot_results

        for path in plot_results(result, args.plots):
            print(f"wrote {path}")
    return 0
