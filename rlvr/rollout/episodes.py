"""Multi-turn episodes: the policy's turns and the environment's observations, one row each.

Turn by turn, every live episode is sampled in one batch (:func:`rlvr.rollout.sample.generate`
on the prompt plus the episode so far, re-prefilled each turn) until it closes a tool call (one
of its environment's ``stop_strings``), ends its sequence, or reaches a limit. A tool call is
answered by the environment (:mod:`rlvr.tasks.environment`); the answer's tokens are appended as
environment tokens, and the episode continues. The row that comes out holds, in order, the policy
tokens (with their behaviour log-probs, entropies and versions) and the environment tokens (log-prob
0, entropy 0, in ``env_mask``, out of ``loss_mask``): the trainer re-reads the whole sequence in one
forward and trains on the policy's tokens only.

Limits (:class:`rlvr.tasks.environment.EpisodeLimits`): ``max_turns`` policy turns; ``max_turn_tokens``
per turn; ``params.max_new_tokens`` in all (policy and environment tokens). An episode stopped by a
limit (turns, total tokens, a turn's tokens) finishes ``length``, like a truncated completion.
Tokens are never re-tokenised: the next turn is conditioned on exactly the ids the trainer reads.
Not supported in episodes: forced interruption and in-flight weight updates (turns are short).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from rlvr.model.tokenizer import left_pad
from rlvr.rollout.sample import SampleParams, fixed_context, generate
from rlvr.types import EpisodeStats, Prompt, RolloutBatch, is_messages


@dataclass
class _Row:
    """One episode being built: its prompt ids and the completion so far, token by token."""

    prompt: list[int]
    ids: list[int] = field(default_factory=list)
    env: list[bool] = field(default_factory=list)
    floats: list[list[float]] = field(default_factory=list)  # per token: logp, entropy, self-certainty, margin
    versions: list[int] = field(default_factory=list)
    turns: int = 0
    calls: int = 0
    failed_calls: int = 0
    reason: str = "length"

    def add(self, ids: list[int], env: bool, floats: list[list[float]], version: int) -> None:
        self.ids += ids
        self.env += [env] * len(ids)
        self.floats += floats
        self.versions += [version] * len(ids)


def with_first_observation(prompt: Prompt, first: str) -> Prompt:
    """The prompt the policy sees: ``first`` (the environment's reset text) appended to a text prompt,
    or to the last message of chat messages (TRL's convention for ``reset``'s return value)."""
    if not first:
        return prompt
    if is_messages(prompt):
        return [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + first}]
    return prompt + first


def observation_ids(tok, observation, stop_strings: tuple[str, ...] = ()) -> list[int]:
    """Token ids of an observation: the tokenizer's rendering of it as a tool message when the
    tokenizer has one (a chat template, :meth:`rlvr.model.hf.HFTokenizer.tool_message_ids`, which
    returns None when it renders none) and the observation says its tool output (``content``), else
    the ids of its ``text``. ``stop_strings``: the environment's, where the policy's turn stopped."""
    render = getattr(tok, "tool_message_ids", None)
    if callable(render) and observation.content is not None:
        ids = render(observation.content, observation.tool, tuple(stop_strings))
        if ids is not None:
            return ids
    return tok.encode(observation.text)


def _stop_ids(tok, strings) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(tok.encode(s)) for s in strings)


def sample_episodes(model, tok, prompts: list[Prompt], environments: list, problems: list, params: SampleParams,
                    *, version: int = 0, generator: torch.Generator | None = None,
                    on_step: Callable[[int], None] | None = None) -> RolloutBatch:
    """One episode per row: ``prompts[i]`` with ``environments[i]`` (fresh, reset with ``problems[i]``).
    Returns B rows; ``texts`` hold the whole episode (policy turns and observations) decoded."""
    limits, budget = params.episode, params.max_new_tokens
    turn_cap = min(limits.max_turn_tokens or budget, budget)
    seen = [with_first_observation(p, env.reset(q)) for p, env, q in zip(prompts, environments, problems)]
    prompt_ids, prompt_mask = tok.batch_encode_left(seen)
    rows = [_Row(ids_row[mask_row].tolist()) for ids_row, mask_row in zip(prompt_ids, prompt_mask)]
    call_stops = {b: _stop_ids(tok, env.stop_strings) for b, env in enumerate(environments)}
    device = next(model.parameters()).device
    live = list(range(len(rows)))
    for turn in range(limits.max_turns):
        if not live:
            break
        width = min(turn_cap, max(budget - len(rows[b].ids) for b in live))
        stops = tuple(dict.fromkeys(s for b in live for s in call_stops[b]))
        turn_params = replace(params, max_new_tokens=width, stop_ids=params.stop_ids + stops, interruption_budget=0,
                              interruption_ids=(), marker_ids=())
        ids, mask = left_pad([rows[b].prompt + rows[b].ids for b in live], tok.pad_id)
        rb = generate(model, ids.to(device), mask.to(device), turn_params, eos_id=tok.eos_id, pad_id=tok.pad_id,
                      version=version, generator=generator, on_step=on_step,
                      row_limits=_own_limits([rows[b] for b in live], width, budget, model, device))
        live = [b for j, b in enumerate(live)
                if _after_turn(rows[b], environments[b], rb, j, tok, budget, call_stops[b],
                               last_turn=turn == limits.max_turns - 1)]
    return _batch(rows, prompt_ids, prompt_mask, tok, params.self_certainty, device)


def _own_limits(rows: list[_Row], width: int, budget: int, model, device) -> torch.Tensor | None:
    """Each row's cap on this turn's tokens (its budget left) when the turn's shared ``width`` would take
    some row past the model's fixed context (rows advance in lockstep; a row past its budget would else go
    on to the width); None when it cannot (every row gets ``width``, as before)."""
    context = fixed_context(model)
    if context is None or max(len(r.prompt) + len(r.ids) for r in rows) + width <= context:
        return None
    return torch.tensor([min(width, budget - len(r.ids)) for r in rows], dtype=torch.long, device=device)


def _after_turn(row: _Row, env, rb: RolloutBatch, j: int, tok, budget: int, call_stops, last_turn: bool) -> bool:
    """Append sample ``j`` of ``rb`` (one policy turn) to ``row``, then the environment's answer if the
    turn called a tool; -> whether the episode goes on."""
    n_gen = int(rb.lengths[j])
    n = min(n_gen, budget - len(row.ids))  # tokens past the episode's budget are dropped
    turn_ids = rb.completion_ids[j, :n].tolist()
    floats = torch.stack([rb.behaviour_logp[j, :n], rb.entropy[j, :n],
                          *([rb.self_certainty[j, :n], rb.top2_margin[j, :n]] if rb.self_certainty is not None
                            else [torch.zeros(n, device=rb.entropy.device)] * 2)], -1).tolist()
    row.add(turn_ids, False, floats, int(rb.versions[j, 0]) if n else 0)
    row.turns += 1
    reason = rb.finish_reason[j] if n == n_gen else "length"
    called = reason == "stop" and any(tuple(turn_ids[-len(s):]) == s for s in call_stops if s)
    if not called:
        row.reason = reason
        return False
    if last_turn:
        row.reason = "length"  # the turn limit cut the episode at a call
        return False
    observation = env.respond(tok.decode(turn_ids))
    if observation is None:
        row.reason = "stop"
        return False
    row.calls += 1
    row.failed_calls += observation.failed
    obs_ids = observation_ids(tok, observation, env.stop_strings)
    room = budget - len(row.ids)
    row.add(obs_ids[:room], True, [[0.0] * 4] * min(room, len(obs_ids)), row.versions[-1] if row.versions else 0)
    if len(obs_ids) >= room:
        row.reason = "length"
        return False
    if observation.done:
        row.reason = "stop"
        return False
    return True


def env_char_spans(row: _Row, tok) -> tuple[tuple[int, int], ...]:
    """The row's environment runs as [start, end) character spans of its decoded completion (the
    offsets are lengths of decoded prefixes: exact for a tokenizer whose decoding is concatenative)."""
    spans, start = [], None
    for t, is_env in enumerate([*row.env, False]):
        if is_env and start is None:
            start = t
        elif not is_env and start is not None:
            spans.append((len(tok.decode(row.ids[:start])), len(tok.decode(row.ids[:t]))))
            start = None
    return tuple(spans)


def _batch(rows: list[_Row], prompt_ids, prompt_mask, tok, self_certainty: bool,
           device) -> RolloutBatch:
    """The episodes as one right-padded RolloutBatch (environment tokens: logp 0, entropy 0, no loss)."""
    B, width = len(rows), max([len(r.ids) for r in rows] + [0])
    ids = torch.full((B, width), tok.pad_id, dtype=torch.long)
    mask = torch.zeros(B, width, dtype=torch.bool)
    env = torch.zeros(B, width, dtype=torch.bool)
    floats = torch.zeros(B, width, 4)
    versions = torch.zeros(B, width, dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r.ids)
        if n:
            ids[i, :n], mask[i, :n], env[i, :n] = torch.tensor(r.ids), True, torch.tensor(r.env)
            floats[i, :n], versions[i, :n] = torch.tensor(r.floats), torch.tensor(r.versions)
    episodes = [EpisodeStats(r.turns, r.calls, r.failed_calls, sum(r.env), env_char_spans(r, tok)) for r in rows]
    out = RolloutBatch(
        prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=ids, completion_mask=mask,
        loss_mask=mask & ~env, behaviour_logp=floats[..., 0], entropy=floats[..., 1], versions=versions,
        finish_reason=[r.reason for r in rows], texts=[tok.decode(r.ids) for r in rows],
        self_certainty=floats[..., 2] if self_certainty else None,
        top2_margin=floats[..., 3] if self_certainty else None,
        env_mask=env, episodes=episodes)
    return out.to(device)
