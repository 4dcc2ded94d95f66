"""Tool calls in the model's text. A parser finds the calls of one assistant turn and
says which text could not be read as a call (the loop reports that to the model as an
error rather than ignoring it). `HermesParser` reads Hermes / Qwen style
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks; `CallParser` reads a turn
that is one call `name(argument)` of a one-argument tool (a format small vocabularies can
write: the demo's character tokenizer has no quotes or braces); another format plugs in
through the `ToolCallParser` protocol."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class ParsedTurn:
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one line per unreadable call


class ToolCallParser(Protocol):
    @property
    def stop(self) -> tuple[str, ...]:  # texts that close a call
        ...

    def parse(self, text: str) -> ParsedTurn: ...


@dataclass
class HermesParser:
    open_tag: str = "<tool_call>"
    close_tag: str = "</tool_call>"

    @property
    def stop(self) -> tuple[str, ...]:
        return (self.close_tag,)

    def parse(self, text: str) -> ParsedTurn:
        turn = ParsedTurn()
        pattern = re.escape(self.open_tag) + r"(.*?)(?:" + re.escape(self.close_tag) + r"|$)"
        for body in re.findall(pattern, text, flags=re.DOTALL):
            try:
                call = json.loads(body.strip())
            except json.JSONDecodeError as error:
                turn.errors.append(f"tool call is not JSON ({error.msg})")
                continue
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                turn.errors.append("tool call needs a 'name'")
                continue
            arguments = call.get("arguments", {})
            if isinstance(arguments, str):  # some models send the arguments as a JSON string
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    turn.errors.append(f"{call['name']}: arguments are not JSON")
                    continue
            if not isinstance(arguments, dict):
                turn.errors.append(f"{call['name']}: arguments must be an object")
                continue
            turn.calls.append(ToolCall(call["name"], arguments))
        return turn


@dataclass
class CallParser:
    """A turn that is exactly one call `name(argument)` of a known tool: the argument text
    (up to the turn's last parenthesis) becomes the tool's one required parameter. A turn
    that opens a known tool's call without closing it is an error; any other turn is the
    final answer."""

    parameter: dict[str, str]  # tool name -> the parameter its argument fills

    @classmethod
    def for_tools(cls, tools: Sequence[Any]) -> CallParser:
        names = {}
        for tool in tools:
            required = list(tool.parameters.get("required", ()))
            if len(required) != 1:
                raise ValueError(
                    f"tool {tool.name!r} takes {len(required)} required arguments; the "
                    "call format (name(argument)) needs tools of exactly one"
                )
            names[tool.name] = required[0]
        return cls(names)

    @property
    def stop(self) -> tuple[str, ...]:
        return ()

    def parse(self, text: str) -> ParsedTurn:
        turn = ParsedTurn()
        opened = re.match(r"\s*([A-Za-z_]\w*)\(", text)
        if opened is None or opened.group(1) not in self.parameter:
            return turn  # the final answer
        name = opened.group(1)
        closed = re.fullmatch(r"(.*)\)\s*", text[opened.end() :], flags=re.DOTALL)
        if closed is None:
            turn.errors.append(f"{name}: a call is the whole turn, {name}(...) closed with ')'")
        else:
            turn.calls.append(ToolCall(name, {self.parameter[name]: closed.group(1)}))
        return turn
