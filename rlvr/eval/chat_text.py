"""Prompts and completions stored as chat messages, as the peers write them: a list of
``{"role", "content"}`` dicts (TRL's conversational format in parquet, NeMo-RL's message logs) or the
Python repr of such a list (the same table once W&B or a CSV has turned the cell into text)."""

from __future__ import annotations

import ast
from typing import Any

Messages = list[dict[str, Any]]


def as_messages(value: Any) -> Messages | None:
    """``value`` as a list of message dicts, or None when it is not one (plain text stays text)."""
    if isinstance(value, str):
        text = value.strip()
        if not (text.startswith("[") and text.endswith("]") and "content" in text):
            return None
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if hasattr(value, "tolist") and not isinstance(value, list):  # a numpy array from pandas
        value = value.tolist()
    if isinstance(value, list) and value and all(isinstance(m, dict) and "content" in m for m in value):
        return value
    return None


def content_text(content: Any) -> str:
    """A message's content as text: a string as is; a list of content blocks, its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type", "text") == "text")
    return "" if content is None else str(content)


def completion_text(value: Any) -> str:
    """The completion as text: for messages, the content of the last assistant message (the last
    message when none is marked assistant); text as is."""
    messages = as_messages(value)
    if messages is None:
        return "" if value is None else str(value)
    replies = [m for m in messages if m.get("role") == "assistant"] or messages
    return content_text(replies[-1].get("content"))


def prompt_messages(value: Any) -> Any:
    """The prompt as messages when it is stored as messages (text repr included), else unchanged."""
    messages = as_messages(value)
    return value if messages is None else messages
