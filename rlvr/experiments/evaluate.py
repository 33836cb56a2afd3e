"""Sample a model n times on each of the first P held-out problems, streamed to disk in chunks
(a killed evaluation resumes at the first missing chunk), then reduce the samples to per-problem
statistics (``stats.json``) that the claims' measures read.

Per-problem statistics (P entries each, problem order of the task's held-out split):
``correct`` (c_p of n), ``token_entropy`` (token-weighted mean next-token entropy, nats),
``answer_entropy`` (Shannon entropy of the final answers, nats, unparsed answers one category),
``logppl_base`` / ``logppl_base_correct`` (mean per-token log-perplexity under the base model of
the first ``perplexity`` samples / of the correct ones among them; None where there are none),
``gold_nll`` (mean per-token negative log-likelihood, nats, of the problem's first gold solution under
the model; only where asked); for a tool task's episodes (rows with ``tool_calls``), ``tool_calls``
and ``failed_calls`` (mean tool calls, and failed ones, per episode).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import torch

from rlvr.config import RunConfig
from rlvr.errors import UserError
from rlvr.eval import stream
from rlvr.eval.entropy import answer_entropy_of, token_entropy
from rlvr.eval.generate import mean_logp_under, row_env_spans
from rlvr.eval.samples import group_by_problem, load_samples
from rlvr.experiments.cells import finish_cell, open_cell
from rlvr.model.io import load_policy, weights_digest
from rlvr.tasks.environment import written_env_spans


def sample_chunks(model_dir: str | Path, cfg: RunConfig, task, problems: list, n: int, temperature: float,
                  top_p: float, seed: int, out: Path, on_chunk: Callable[[int, int], None] | None = None) -> list[Path]:
    """n samples per problem of ``model_dir``, in chunk files ``out/chunk_XXXX.jsonl`` (existing
    chunks are kept: resume; see :func:`rlvr.eval.stream.sample_chunks`). Sampling settings are the
    config's (length, interruption) with ``temperature`` and ``top_p``. -> the chunk paths."""
    sampling = dataclasses.replace(cfg.sampling, temperature=temperature, top_p=top_p, top_k=0)
    report = (lambda done, total, rows: on_chunk(done, total)) if on_chunk else None
    return stream.sample_chunks(lambda: load_policy(model_dir, device=cfg.train.device), task, problems, n, sampling,
                                seed, out, on_chunk=report)


def per_problem_stats(rows: list[dict], problem_ids: list[str]) -> dict:
    """Reduce sample rows to the per-problem statistics of the module docstring (no perplexity)."""
    groups = group_by_problem(rows)
    missing = [p for p in problem_ids if p not in groups]
    if missing:
        raise ValueError(f"{len(missing)} problems have no samples (first: {missing[0]})")
    ns = {len(groups[p]) for p in problem_ids}
    if len(ns) != 1:
        raise ValueError(f"problems have different sample counts {sorted(ns)}")
    correct, tok_ent, ans_ent = [], [], []
    for p in problem_ids:
        g = groups[p]
        correct.append(sum(bool(r["correct"]) for r in g))
        tok_ent.append(token_entropy([r["mean_entropy"] for r in g], [r["num_tokens"] for r in g]))
        ans_ent.append(answer_entropy_of([r.get("answer") for r in g]))
    stats = {"ids": list(problem_ids), "n": ns.pop(), "correct": correct, "token_entropy": tok_ent,
             "answer_entropy": ans_ent}
    if all(r.get("tool_calls") is not None for r in rows):  # episodes of a tool task
        for key in ("tool_calls", "failed_calls"):
            stats[key] = [sum(r.get(key) or 0 for r in groups[p]) / len(groups[p]) for p in problem_ids]
    return stats


def logppl_under(base_dir: str | Path, cfg: RunConfig, rows: list[dict], problem_ids: list[str], m: int) -> dict:
    """Per problem, the mean log-perplexity under the base of the first ``m`` samples, and of the
    correct ones among them (None where none)."""
    groups = group_by_problem(rows)
    picked = [(p, r) for p in problem_ids for r in groups[p][:m]]
    if not picked:
        return {"logppl_base": [None] * len(problem_ids), "logppl_base_correct": [None] * len(problem_ids)}
    base, tok = load_policy(base_dir, device=cfg.train.device)
    with torch.no_grad():
        lp = mean_logp_under(base, tok, [r["prompt"] for _, r in picked], [r["completion"] for _, r in picked],
                             env_spans=row_env_spans([r for _, r in picked]))
    by: dict[str, list[tuple[float, bool]]] = {}
    for (p, r), x in zip(picked, lp):
        if math.isfinite(x):
            by.setdefault(p, []).append((-x, bool(r["correct"])))

    def mean(xs):
        return sum(xs) / len(xs) if xs else None

    return {"logppl_base": [mean([v for v, _ in by.get(p, [])]) for p in problem_ids],
            "logppl_base_correct": [mean([v for v, ok in by.get(p, []) if ok]) for p in problem_ids]}


def gold_nll(model_dir: str | Path, cfg: RunConfig, problems: list, task=None) -> list[float]:
    """Per problem, the mean per-token negative log-likelihood (nats, EOS excluded) of its first gold
    solution (its answer where it has none) given its prompt, under the model; a tool ``task``'s
    tool outputs in the gold episode are context, not scored."""
    model, tok = load_policy(model_dir, device=cfg.train.device)
    golds = [p.solutions[0] if p.solutions else p.answer for p in problems]
    spans = [written_env_spans(task, p, gold) for p, gold in zip(problems, golds)]
    with torch.no_grad():
        return [-x for x in mean_logp_under(model, tok, [p.prompt for p in problems], golds,
                                            env_spans=spans if any(spans) else None)]


def evaluate_model(model_dir: str | Path, base_dir: str | Path, cfg: RunConfig, task, n_problems: int, n: int,
                   temperature: float, top_p: float, perplexity: int, seed: int, out: Path, key: str = "",
                   on_chunk: Callable[[int, int], None] | None = None, offset: int = 0,
                   with_gold_nll: bool = False) -> dict:
    """Sample (resumably), reduce, score under the base (and the gold solutions under the model where
    ``with_gold_nll``); writes ``out/stats.json`` -> the stats (with
    ``weights``, the sampled checkpoint's digest: :func:`rlvr.model.io.weights_digest`).
    ``key`` names what decides the cell (the model's own key, the protocol): a folder holding
    another key's samples or statistics is cleared first."""
    if (cached := open_cell(out, key)) is not None:
        return cached
    problems = task.problems("heldout", offset + n_problems)[offset:]  # offset: a validation block
    if offset and len(problems) < n_problems:  # a short validation block: say so, never evaluate fewer
        raise UserError(f"the task has {len(problems) + offset} held-out problems; {n_problems} from {offset} on "
                        "need more (lower problems or offset)")
    paths = sample_chunks(model_dir, cfg, task, problems, n, temperature, top_p, seed, out / "samples", on_chunk)
    rows = [r for p in paths for r in load_samples(p)]
    ids = [p.id for p in problems]
    stats = per_problem_stats(rows, ids)
    if perplexity:
        stats.update(logppl_under(base_dir, cfg, rows, ids, perplexity))
    if with_gold_nll:
        stats["gold_nll"] = gold_nll(model_dir, cfg, problems, task)
    # weights: which weights were sampled (a base pretrained again on another CPU has its key, not always
    # its weights; rlvr.experiments.base_weights compares it before a folder gets more cells)
    stats.update(temperature=temperature, top_p=top_p, model=str(model_dir), weights=weights_digest(model_dir))
    return finish_cell(out, stats)
