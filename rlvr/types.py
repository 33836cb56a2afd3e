"""Containers passed between modules. Shapes: P prompts, G samples per prompt,
B = P*G completions, T completion tokens (right-padded).

A multi-turn episode (a tool task) is one row: its completion holds the policy's turns and the
environment's observations in order; ``env_mask`` marks the observation tokens, which are read by
the model but never trained on (no behaviour log-prob, out of ``loss_mask``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import torch

from rlvr.problems import (
    STATUSES,
    Messages,
    Problem,
    Prompt,
    Verdict,
    check_messages,
    default_equivalent,
    is_messages,
    prompt_key,
    task_equivalence,
)

__all__ = [  # rlvr.problems' names are re-exported: rlvr.types has always held them
    "STATUSES", "EpisodeStats", "Messages", "Problem", "Prompt", "RolloutBatch", "ScoredBatch", "Verdict",
    "check_messages", "default_equivalent", "is_messages", "prompt_key", "task_equivalence",
]


@dataclass(frozen=True)
class EpisodeStats:
    """One multi-turn episode: policy turns, tool calls, the calls that failed (raised, timed out,
    unknown tool, unreadable call), environment tokens in its completion, and where the environment's
    text lies in the decoded completion ([start, end) character spans, ascending)."""

    turns: int
    tool_calls: int
    failed_calls: int
    env_tokens: int
    env_spans: tuple[tuple[int, int], ...] = ()


@dataclass
class RolloutBatch:
    """What the sampler returns for B completions.

    Completion tensors are right-padded to T; prompts are kept separately
    (left-padded) so that the trainer can rebuild full sequences.
    """

    prompt_ids: torch.Tensor  # (B, Tp) long, left-padded with pad_id
    prompt_mask: torch.Tensor  # (B, Tp) bool
    completion_ids: torch.Tensor  # (B, T) long, right-padded with pad_id
    completion_mask: torch.Tensor  # (B, T) bool, 1 on generated tokens (EOS included)
    loss_mask: torch.Tensor  # (B, T) bool, completion_mask minus injected (non-sampled) tokens
    behaviour_logp: torch.Tensor  # (B, T) float32, log-prob of each token under the policy that sampled it
    entropy: torch.Tensor  # (B, T) float32, next-token entropy at each generated position (nats)
    versions: torch.Tensor  # (B, T) long, policy version that produced each token
    finish_reason: list[str]  # B entries: "eos" | "stop" | "length" | "interrupted"
    texts: list[str] = field(default_factory=list)  # B decoded completions (special tokens removed)
    self_certainty: torch.Tensor | None = None  # (B, T) float32, KL(U || pi) per position, if asked
    top2_margin: torch.Tensor | None = None  # (B, T) float32, top-1 minus top-2 probability, if asked
    env_mask: torch.Tensor | None = None  # (B, T) bool, 1 on environment tokens (tool outputs); None: single-turn
    episodes: list[EpisodeStats] | None = None  # B entries for multi-turn episodes; None: single-turn

    def to(self, device) -> RolloutBatch:
        """The same batch with every tensor on ``device``."""
        moved = {f.name: getattr(self, f.name).to(device) for f in fields(self)
                 if isinstance(getattr(self, f.name), torch.Tensor)}
        return replace(self, **moved)

    @property
    def size(self) -> int:
        return self.completion_ids.shape[0]

    @property
    def lengths(self) -> torch.Tensor:
        """(B,) number of completion tokens."""
        return self.completion_mask.sum(-1)

    @property
    def policy_mask(self) -> torch.Tensor:
        """(B, T) bool: the tokens the policy generated (completion tokens minus environment tokens)."""
        return self.completion_mask if self.env_mask is None else self.completion_mask & ~self.env_mask

    @property
    def policy_lengths(self) -> torch.Tensor:
        """(B,) number of tokens the policy generated (:attr:`lengths` for a single-turn batch)."""
        return self.lengths if self.env_mask is None else self.policy_mask.sum(-1)

    def select(self, rows: torch.Tensor) -> RolloutBatch:
        """The sub-batch of ``rows`` (1-D long index), in that order."""
        idx = rows.tolist()
        kept = {f.name: getattr(self, f.name)[rows] for f in fields(self)
                if isinstance(getattr(self, f.name), torch.Tensor)}
        return replace(self, **kept, finish_reason=[self.finish_reason[i] for i in idx],
                       texts=[self.texts[i] for i in idx] if self.texts else [],
                       episodes=None if self.episodes is None else [self.episodes[i] for i in idx])

    @staticmethod
    def concat(parts: list[RolloutBatch], pad_id: int) -> RolloutBatch:
        """Row-wise concatenation (prompts re-padded on the left, completions on the right)."""
        if len(parts) == 1:
            return parts[0]
        sc, m2 = [p.self_certainty for p in parts], [p.top2_margin for p in parts]
        multi_turn = any(p.env_mask is not None for p in parts)
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
            top2_margin=None if any(m is None for m in m2) else _pad_cat(m2, 0.0),
            env_mask=_pad_cat([torch.zeros_like(p.completion_mask) if p.env_mask is None else p.env_mask
                               for p in parts], False) if multi_turn else None,
            episodes=[e for p in parts for e in (p.episodes or [EpisodeStats(1, 0, 0, 0)] * p.size)]
            if multi_turn else None,
        )

    @property
    def n_tokens(self) -> int:
        """Prompt plus completion tokens of every row (what one forward pass over the batch reads)."""
        return int(self.completion_mask.sum() + self.prompt_mask.sum())


def _pad_cat(ts: list[torch.Tensor], value, left: bool = False) -> torch.Tensor:
    width = max(t.shape[1] for t in ts)
    out = []
    for t in ts:
        pad = width - t.shape[1]
        out.append(torch.nn.functional.pad(t, (pad, 0) if left else (0, pad), value=value))
    return torch.cat(out)


@dataclass
class ScoredBatch:
    """P prompt groups of G scored completions: what the reward phase hands to the update.

    Rows ``p*G .. p*G+G-1`` are the G samples of ``problems[p]``; every per-row field has B = P*G
    entries. ``reward_B`` is what the advantages see (verifier, intrinsic or mix, plus shaping);
    ``truth_B`` is the verifier's reward, always computed and logged, fed to the loss only when the
    reward is the verifier. ``labels_P``: the majority-vote label of each group (majority_vote
    rewards), else None.
    """

    rollouts: RolloutBatch  # B rows
    verdicts: list[Verdict]  # B
    reward_B: torch.Tensor  # (B,) float32
    truth_B: torch.Tensor  # (B,) float32
    problems: list[Problem]  # P
    group_size: int  # G
    labels_P: list[str | None] | None = None  # P

    def __post_init__(self) -> None:
        B, G = self.rollouts.size, self.group_size
        if B != len(self.problems) * G or len(self.verdicts) != B or self.reward_B.shape != (B,):
            raise ValueError(f"ScoredBatch: {B} rollouts, {len(self.verdicts)} verdicts, rewards "
                             f"{tuple(self.reward_B.shape)} for {len(self.problems)} problems x G={G}")

    @property
    def size(self) -> int:
        """B, the number of completions."""
        return self.rollouts.size

    @property
    def n_groups(self) -> int:
        """P, the number of prompt groups."""
        return len(self.problems)

    def correct_P_G(self) -> torch.Tensor:
        """(P, G) bool: the verifier judged the sample right."""
        return torch.tensor([v.correct for v in self.verdicts], dtype=torch.bool).view(-1, self.group_size)

    def select(self, groups: torch.Tensor) -> ScoredBatch:
        """The groups ``groups`` (a (P,) bool mask or a 1-D index of groups), whole, in order."""
        if groups.dtype == torch.bool:
            groups = groups.nonzero().squeeze(-1)
        G = self.group_size
        rows = (groups[:, None] * G + torch.arange(G)).reshape(-1)
        idx, gi = rows.tolist(), groups.tolist()
        return ScoredBatch(self.rollouts.select(rows), [self.verdicts[i] for i in idx], self.reward_B[rows],
                           self.truth_B[rows], [self.problems[i] for i in gi], G,
                           None if self.labels_P is None else [self.labels_P[i] for i in gi])

    def head(self, n_groups: int) -> ScoredBatch:
        """The first ``n_groups`` groups (all of them if there are fewer)."""
        return self if n_groups >= self.n_groups else self.select(torch.arange(n_groups))

    @staticmethod
    def concat(parts: list[ScoredBatch], pad_id: int) -> ScoredBatch:
        """The groups of every part, in order (at least one part, all with the same G)."""
        if not parts:
            raise ValueError("ScoredBatch.concat needs at least one part")
        if len(parts) == 1:
            return parts[0]
        labels = None if any(p.labels_P is None for p in parts) else [x for p in parts for x in p.labels_P]
        return ScoredBatch(RolloutBatch.concat([p.rollouts for p in parts], pad_id),
                           [v for p in parts for v in p.verdicts], torch.cat([p.reward_B for p in parts]),
                           torch.cat([p.truth_B for p in parts]), [q for p in parts for q in p.problems],
                           parts[0].group_size, labels)
