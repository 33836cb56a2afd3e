"""Turning problems into scored rollouts: prompts x G -> sampler -> texts -> verdicts.

The native engine wraps :func:`rlvr.rollout.sample.generate` (tiny or HF policy);
``rlvr.rollout.vllm`` provides the same ``sample`` call on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.config import SamplingConfig
from rlvr.model.io import model_device
from rlvr.rollout.episodes import sample_episodes
from rlvr.rollout.sample import SampleParams, generate, runs_of
from rlvr.tasks.environment import EpisodeLimits
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
        episode=EpisodeLimits(cfg.max_turns, cfg.max_turn_tokens, cfg.tool_timeout_s, cfg.max_observation_chars),
    )


def encode_prompts(tok, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded (B, Tp) ids and mask, for the char tokenizer or an HF tokenizer adapter."""
    return tok.batch_encode_left(prompts)


def sample(model, tok, prompts: list[str], params: SampleParams, *, version: int = 0,
           generator: torch.Generator | None = None, batch_size: int = 512, weight_sync=None,
           sync_every: int = 8, share_prefix: bool = True,
           on_step: Callable[[int], None] | None = None, environments: list | None = None,
           problems: list | None = None) -> RolloutBatch:
    """One completion per prompt (repeat prompts for G samples), on the model's device; texts decoded.
    Large inputs are split into chunks of ``batch_size`` rows and concatenated. Within a chunk, runs
    of the same prompt are prefilled once (``share_prefix``; the samples are the same as without it,
    see :func:`rlvr.rollout.sample.generate`). ``weight_sync`` and ``sync_every``: the in-flight
    weight update hook of :func:`rlvr.rollout.sample.generate`; ``on_step`` its progress hook (each
    chunk reports its whole step budget). ``environments`` (one per prompt, with its ``problems`` row:
    :func:`rlvr.tasks.environment.environments_for`) makes every row a multi-turn episode
    (:func:`rlvr.rollout.episodes.sample_episodes`); None (a single-turn task) samples as above."""
    if environments is not None:
        return _sample_episodes(model, tok, prompts, environments, problems, params, version=version,
                                generator=generator, batch_size=batch_size, on_step=on_step)
    was_training = model.training
    model.eval()
    try:
        parts = []
        device = model_device(model)
        for i in range(0, len(prompts), batch_size):
            chunk = prompts[i : i + batch_size]
            firsts, counts = runs_of(chunk) if share_prefix else (chunk, [])
            repeats = torch.tensor(counts) if len(firsts) < len(chunk) else None
            ids, mask = encode_prompts(tok, firsts if repeats is not None else chunk)
            rb = generate(model, ids.to(device), mask.to(device), params, eos_id=tok.eos_id, pad_id=tok.pad_id,
                          version=version, generator=generator, weight_sync=weight_sync, sync_every=sync_every,
                          repeats=repeats, on_step=on_step)
            ids_rows, lens = rb.completion_ids.tolist(), rb.lengths.tolist()  # python lists: no per-token tensor ops
            rb.texts = [tok.decode(row[:n]) for row, n in zip(ids_rows, lens)]
            parts.append(rb)
    finally:
        model.train(was_training)
    return RolloutBatch.concat(parts, tok.pad_id)


def _sample_episodes(model, tok, prompts, environments, problems, params: SampleParams, *, version: int,
                     generator, batch_size: int, on_step) -> RolloutBatch:
    """Multi-turn episodes in chunks of ``batch_size`` rows (the policy in eval mode meanwhile)."""
    if problems is None or not (len(problems) == len(environments) == len(prompts)):
        raise ValueError("multi-turn sampling needs one environment and one problem per prompt")
    was_training = model.training
    model.eval()
    try:
        parts = [sample_episodes(model, tok, prompts[i : i + batch_size], environments[i : i + batch_size],
                                 problems[i : i + batch_size], params, version=version, generator=generator,
                                 on_step=on_step)
                 for i in range(0, len(prompts), batch_size)]
    finally:
        model.train(was_training)
    return RolloutBatch.concat(parts, tok.pad_id)
