"""Token counts estimated from characters (four a token): what the scripted model reports,
and what a wire call reports when its stream carried no usage (``calls.py``)."""

from __future__ import annotations

import json
import math

from .spec import LlmRequest


def usage_tokens(chars: int) -> int:
    """Four characters a token (not the kernel's message estimate)."""
    return math.ceil(chars / 4)


def prompt_chars(request: LlmRequest) -> int:
    """Characters of the prompt as a model would see them: system, messages, tools."""
    total = len(request.system_prompt or "")
    for message in request.messages:
        role = message.get("role")
        total += len(role or "") + 1
        if role == "assistant":
            for block in message.get("content") or []:
                kind = block.get("type")
                if kind == "text":
                    total += len(block.get("text") or "")
                elif kind == "thinking":
                    total += len(block.get("thinking") or "")
                elif kind == "toolCall":
                    total += len(block.get("name") or "") + len(json.dumps(block.get("arguments") or {}, ensure_ascii=False))
        else:
            content = message.get("content")
            if isinstance(content, str):
                total += len(content)
            elif isinstance(content, list):
                for block in content:
                    if block.get("type") == "text":
                        total += len(block.get("text") or "")
                    elif block.get("type") == "image":
                        total += 4800 * 4  # an image counts like Pi's estimate: 4800 tokens
            if role == "toolResult":
                total += len(message.get("toolName") or "")
    if request.tools:
        total += _tools_chars(request.tools)
    return total


# The tools' JSON length by what makes it (name, description, the schema object): the
# same few lists come with every call, and dumping them was ~4 % of a demo turn's CPU.
_tools_lengths: dict[tuple, tuple[list, int]] = {}


def _tools_chars(tools: list) -> int:
    try:
        key = tuple((t["name"], t["description"], id(t["parameters"])) for t in tools)
    except (KeyError, TypeError):
        return len(json.dumps(tools, ensure_ascii=False))
    known = _tools_lengths.get(key)
    if known is None:
        if len(_tools_lengths) > 256:
            _tools_lengths.clear()
        # The schemas are kept with their length, so an id here is never another object's.
        known = _tools_lengths[key] = ([t["parameters"] for t in tools], len(json.dumps(tools, ensure_ascii=False)))
    return known[1]


def output_chars(content: list[dict]) -> int:
    total = 0
    for block in content:
        kind = block["type"]
        if kind == "text":
            total += len(block["text"])
        elif kind == "thinking":
            total += len(block["thinking"])
        else:
            total += len(block["name"]) + len(json.dumps(block["arguments"], ensure_ascii=False, separators=(",", ":")))
    return total
