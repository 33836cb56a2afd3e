"""Turning problems into scored rollouts: prompts x G -> sampler -> texts -> verdicts.

The native engine wraps :func:`rlvr.rollout.sample.generate` (tiny or HF policy);
``rlvr.rollout.vllm`` provides the same ``sample`` call on a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from rlvr.config import SamplingConfig
from rlvr.model.io import model_device
from rlvr.rollout.sample import SampleParams, generate
from rlvr.tasks.base import Problem, Verdict
from rlvr.types import RolloutBatch


def sample_params(cfg: SamplingConfig, tok, self_certainty: bool = False,
                  max_new_tokens: int | None = None) -> SampleParams:
    """SampleParams from the config; stop strings and the interruption text as token ids."""
    marker = cfg.interruption_text.strip()
    return SampleParams(
        max_new_tokens=max_new_tokens or cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
        stop_ids=tuple(tuple(tok.encode(s)) for s in cfg.stop),
        interruption_budget=cfg.interruption_budget,
        interruption_ids=tuple(tok.encode(cfg.interruption_text)) if cfg.interruption_budget else (),
        marker_ids=tuple(tok.encode(marker)) if cfg.interruption_budget and marker else (),
        interruption_extra=cfg.interruption_extra,
        self_certainty=self_certainty,
    )


def encode_prompts(tok, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded (B, Tp) ids and mask, for the char tokenizer or an HF tokenizer adapter."""
    return tok.batch_encode_left(prompts)


def sample(model, tok, prompts: list[str], params: SampleParams, *, version: int = 0,
           generator: torch.Generator | None = None, batch_size: int = 512, weight_sync=None,
           sync_every: int = 8) -> RolloutBatch:
    """One completion per prompt (repeat prompts for G samples), on the model's device; texts decoded.
    Large inputs are split into chunks of ``batch_size`` rows and concatenated. ``weight_sync`` and
    ``sync_every``: the in-flight weight update hook of :func:`rlvr.rollout.sample.generate`."""
    was_training = model.training
    model.eval()
    try:
        parts = []
        device = model_device(model)
        for i in range(0, len(prompts), batch_size):
            ids, mask = encode_prompts(tok, prompts[i : i + batch_size])
            rb = generate(model, ids.to(device), mask.to(device), params, eos_id=tok.eos_id, pad_id=tok.pad_id,
                          version=version, generator=generator, weight_sync=weight_sync, sync_every=sync_every)
            rb.texts = [tok.decode(row[m]) for row, m in zip(rb.completion_ids.cpu(), rb.completion_mask.cpu())]
            parts.append(rb)
    finally:
        model.train(was_training)
    return parts[0] if len(parts) == 1 else concat_batches(parts, tok.pad_id)


def _pad_cat(ts: list[torch.Tensor], value, left: bool = False) -> torch.Tensor:
    width = max(t.shape[1] for t in ts)
    out = []
    for t in ts:
        pad = width - t.shape[1]
        out.append(torch.nn.functional.pad(t, (pad, 0) if left else (0, pad), value=value))
    return torch.cat(out)


def concat_batches(parts: list[RolloutBatch], pad_id: int) -> RolloutBatch:
    """Row-wise concatenation of rollout batches (re-padding prompts left, completions right)."""
    sc = [p.self_certainty for p in parts]
    return RolloutBatch(
        prompt_ids=_pad_cat([p.prompt_ids for p in parts], pad_id, left=True),
        prompt_mask=_pad_cat([p.prompt_mask for p in parts], False, left=True),
        completion_ids=_pad_cat([p.completion_ids for p in parts], pad_id),
        completion_mask=_pad_cat([p.completion_mask for p in parts], False),
        loss_mask=_pad_cat([p.loss_mask for p in parts], False),
        behaviour_logp=_pad_cat([p.behaviour_logp for p in parts], 0.0),
        entropy=_pad_cat([p.entropy for p in parts], 0.0),
        versions=_pad_cat([p.versions for p in parts], 0),
        finish_reason=[r for p in parts for r in p.finish_reason],
        texts=[t for p in parts for t in p.texts],
        self_certainty=None if any(s is None for s in sc) else _pad_cat(sc, 0.0),
    )


def select_rows(rb: RolloutBatch, rows: torch.Tensor) -> RolloutBatch:
    """The sub-batch of ``rows`` (1-D long index)."""
    idx = rows.tolist()
    return RolloutBatch(
        prompt_ids=rb.prompt_ids[rows], prompt_mask=rb.prompt_mask[rows],
        completion_ids=rb.completion_ids[rows], completion_mask=rb.completion_mask[rows],
        loss_mask=rb.loss_mask[rows], behaviour_logp=rb.behaviour_logp[rows], entropy=rb.entropy[rows],
        versions=rb.versions[rows], finish_reason=[rb.finish_reason[i] for i in idx],
        texts=[rb.texts[i] for i in idx] if rb.texts else [],
        self_certainty=None if rb.self_certainty is None else rb.self_certainty[rows],
    )


# Built-in synthetic tasks whose verifiers are bounded regex/integer checks: scored in-process.
FAST_VERIFY_MODULES = frozenset({"rlvr.tasks.arithmetic", "rlvr.tasks.countdown", "rlvr.tasks.strings",
                                 "rlvr.tasks.docrecon"})


@dataclass
class VerifyReport:
    """Verdicts of B completions plus the rows whose verifier failed (raised, timed out, bad return)."""

    verdicts: list[Verdict]
    failures: list[tuple[int, str]] = field(default_factory=list)  # (row, "TypeError: ..." | "timeout ...")

    @property
    def timeouts(self) -> int:
        return sum(msg.startswith("timeout") for _, msg in self.failures)


def needs_timeout(task) -> bool:
    """True unless ``task`` is a built-in synthetic task (exact class) or sets ``fast_verify = True``."""
    return type(task).__module__ not in FAST_VERIFY_MODULES and not getattr(task, "fast_verify", False)


def _checked(v, row: int, failure_value: float, failures: list) -> Verdict:
    if isinstance(v, Verdict) and math.isfinite(v.reward):
        return v
    failures.append((row, f"verifier returned {v!r:.80}, expected a Verdict with a finite reward"))
    return Verdict(failure_value, "malformed", None)


def verify_checked(task, texts: list[str], problems: list[Problem], *, failure_value: float = 0.0,
                   timeout_s: float | None = None, workers: int = 2) -> VerifyReport:
    """One verdict per completion, in order; never raises on a verifier failure.

    A verifier that raises, returns something other than a finite Verdict, or (when ``timeout_s``
    is set and :func:`needs_timeout`) runs past ``timeout_s`` seconds in the
    :mod:`rlvr.rewards.pool` worker (killed and replaced) gets ``Verdict(failure_value,
    "malformed")`` and is listed in ``failures`` with the exception text.
    """
    failures: list[tuple[int, str]] = []
    out: list[Verdict] = []
    if timeout_s and needs_timeout(task) and texts:
        from rlvr.rewards.pool import get_pool

        results = get_pool(workers).map(task.verify, [((t, p), {}) for t, p in zip(texts, problems)], timeout_s)
        for i, r in enumerate(results):
            if r.ok:
                out.append(_checked(r.value, i, failure_value, failures))
            else:
                failures.append((i, r.error or "unknown error"))
                out.append(Verdict(failure_value, "malformed", None))
        return VerifyReport(out, failures)
    for i, (text, prob) in enumerate(zip(texts, problems)):
        try:
            out.append(_checked(task.verify(text, prob), i, failure_value, failures))
        except Exception as e:  # noqa: BLE001 - a verifier bug must not kill the run
            failures.append((i, f"{type(e).__name__}: {e}"[:300]))
            out.append(Verdict(failure_value, "malformed", None))
    return VerifyReport(out, failures)


def verify_all(task, texts: list[str], problems: list[Problem], *, failure_value: float = 0.0,
               timeout_s: float | None = None) -> list[Verdict]:
    """The verdicts of :func:`verify_checked` (failures scored ``failure_value``, not reported)."""
    return verify_checked(task, texts, problems, failure_value=failure_value, timeout_s=timeout_s).verdicts
