"""Records of prime-rl, SkyRL and NeMo-RL dumps, flattened to rows with rlvr's field names
(``problem_id``, ``prompt``, ``completion``, ``gold``, ``reward``; ``answer`` where the peer writes the
model's parsed answer: none of these three does).

- ``prime-rl``: ``OUTPUT_DIR/rollouts/step_<N>/<train|eval>/<all|effective>/traces.jsonl``, one verifiers
  ``Episode.to_record()`` per line (src/prime_rl/monitors/file.py ``FileMonitor.log_episodes``;
  verifiers/v1/episode.py): ``task.data`` holds ``idx``, ``prompt`` and the taskset's own fields (gsm8k:
  ``answer``, the gold), ``traces[-1].nodes`` the messages, ``traces[-1].rewards`` the named rewards
  ``{name: {score, weight}}`` (the trace's reward is the sum of score x weight, ``Trace.reward``).
- ``skyrl``: ``EXPORT_PATH/dumped_evals/global_step_<N>_evals/<data_source>.jsonl`` with
  ``input_prompt``, ``output_response``, ``score`` (a number, or per-token rewards whose last entry is the
  trajectory's), ``stop_reason``, ``env_class``, ``env_extras`` (gold: ``reward_spec.ground_truth``),
  ``data_source`` (skyrl/train/utils/trainer_utils.py ``dump_per_dataset_eval_results``);
  ``aggregated_results.jsonl`` beside them holds metrics, not samples.
- ``nemo-rl``: ``LOG_DIR/val_data_step<N>.jsonl`` (and ``train_data_step<N>.jsonl``), one sample per line
  ``{"content": [message log], "rewards": [reward], "idx": i}``: each value wrapped in a one-element list
  by ``Logger.log_batched_dict_as_jsonl`` (nemo_rl/utils/logger.py; payload from nemo_rl/algorithms/grpo.py
  ``validate``).
"""

from __future__ import annotations

import json
from typing import Any

from rlvr.eval.chat_text import as_messages, content_text

PEER_COLUMNS = {
    "prime-rl": ("traces", "task", "group"),
    "skyrl": ("input_prompt", "output_response", "score"),
    "nemo-rl": ("content", "rewards", "idx"),
}
"""format -> the columns that identify its records."""


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def prime_rl_row(record: dict) -> dict:
    """One prime-rl episode record -> a flat row (the last trace is the episode's answer)."""
    data = _get(record, "task", "data") or {}
    trace = (record.get("traces") or [None])[-1] or {}
    messages = [n.get("message") or {} for n in trace.get("nodes") or []]
    replies = [m for m in messages if m.get("role") == "assistant"]
    rewards = [r for r in (trace.get("rewards") or {}).values() if r is not None]
    env = _get(record, "env", "name") or _get(record, "env", "id") or ""
    row = {
        "prompt": data.get("prompt"),
        "completion": content_text(replies[-1].get("content")) if replies else "",
        "gold": _text(data.get("answer")),
        "reward": sum(float(r["score"]) * float(r.get("weight", 1.0)) for r in rewards) if rewards else None,
        "step": _get(record, "run", "work", "step"),
    }
    if data.get("idx") is not None:
        row["problem_id"] = f"{env}/{data['idx']}"
    return row


def skyrl_row(record: dict) -> dict:
    """One SkyRL eval dump line -> a flat row."""
    score = record.get("score")
    if isinstance(score, list):  # per-token rewards: the last is the trajectory's (get_metrics_from_generator_output)
        score = score[-1] if score else None
    return {
        "prompt": record.get("input_prompt"),
        "completion": record.get("output_response") or "",
        "gold": _text(_get(record, "env_extras", "reward_spec", "ground_truth")),
        "reward": score,
    }


def _unwrap(value: Any) -> Any:
    """NeMo-RL's one-sample microbatch wraps each value in a one-element list."""
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def nemo_rl_row(record: dict) -> dict:
    """One NeMo-RL val/train data line -> a flat row: the prompt is the messages before the last
    assistant message, the completion that message's content."""
    messages = as_messages(_unwrap(record.get("content"))) or []
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=len(messages))
    prompt = [{"role": m.get("role"), "content": content_text(m.get("content"))} for m in messages[:last]]
    return {
        "prompt": prompt,
        "completion": content_text(messages[last].get("content")) if last < len(messages) else "",
        "reward": _unwrap(record.get("rewards")),
    }


FLATTEN = {"prime-rl": prime_rl_row, "skyrl": skyrl_row, "nemo-rl": nemo_rl_row}
"""format -> record flattener."""
