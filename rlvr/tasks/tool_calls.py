"""How a policy turn writes a tool call, and how the tool's result is written back.

Two formats, each a small class with the same three members (``stop_strings``, ``parse``,
``result``):

- :class:`TagCalls` ``<calc>37*48</calc>`` -> ``<out>1776</out>``: one string argument, short enough
  for the character-level tiny model (the built-in tool tasks use it).
- :class:`JsonCalls` ``<tool_call>{"name": "calc", "arguments": {"expression": "37*48"}}</tool_call>``
  -> ``<tool_response>1776</tool_response>``: the Hermes / Qwen convention that chat templates and
  TRL's tool parsing use; keyword arguments.

A turn is a tool call when it ends with one of ``stop_strings`` (the sampler stops the turn there);
``parse`` then reads the call out of the turn's text, or raises :class:`BadCall` with a reason
that becomes the observation (never a crash).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


class BadCall(ValueError):
    """A turn ended like a tool call but the call cannot be read (the reason is shown to the policy)."""


@dataclass(frozen=True)
class ToolCall:
    """One parsed tool call: the tool's ``name``, its ``arguments`` (keyword arguments, or one
    positional string for :class:`TagCalls`) and the ``text`` of the call as the policy wrote it."""

    name: str
    arguments: dict | str = field(default_factory=dict)
    text: str = ""


class TagCalls:
    """``<name>argument</name>`` calls for the tools ``names``; results ``<out>text</out>``."""

    def __init__(self, names: tuple[str, ...] | list[str]):
        self.names = tuple(names)
        self.stop_strings = tuple(f"</{name}>" for name in self.names)

    def parse(self, turn: str) -> ToolCall | None:
        """The call the turn ends with, None if it ends with none; BadCall without its opening tag."""
        for name in self.names:
            close = f"</{name}>"
            if turn.endswith(close):
                start = turn.rfind(f"<{name}>")
                if start < 0:
                    raise BadCall(f"{close} without <{name}>")
                return ToolCall(name, turn[start + len(name) + 2 : -len(close)], turn[start:])
        return None

    def result(self, text: str) -> str:
        return f"<out>{text}</out>"


class JsonCalls:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` calls; results in ``<tool_response>``."""

    open_tag, close_tag = "<tool_call>", "</tool_call>"
    stop_strings = (close_tag,)

    def parse(self, turn: str) -> ToolCall | None:
        """The call the turn ends with, None if it ends with none; BadCall for JSON that is not a call."""
        if not turn.rstrip().endswith(self.close_tag):
            return None
        end = turn.rstrip()[: -len(self.close_tag)]
        start = end.rfind(self.open_tag)
        if start < 0:
            raise BadCall(f"{self.close_tag} without {self.open_tag}")
        body = end[start + len(self.open_tag) :].strip()
        try:
            call = json.loads(body)
        except ValueError as e:
            raise BadCall(f"the call is not JSON ({e})") from None
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise BadCall('a call is {"name": str, "arguments": {...}}')
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):  # some templates write the arguments as a JSON string
            try:
                arguments = json.loads(arguments)
            except ValueError:
                raise BadCall("arguments is a string that is not JSON") from None
        if not isinstance(arguments, dict):
            raise BadCall("arguments must be an object of keyword arguments")
        return ToolCall(call["name"], arguments, turn[start:])

    def result(self, text: str) -> str:
        return f"<tool_response>{text}</tool_response>"


CALL_FORMATS = {"tag": TagCalls, "json": JsonCalls}
"""The call formats by name (``task.knobs.calls`` of a TRL-style environment)."""
