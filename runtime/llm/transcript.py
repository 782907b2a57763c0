"""Pi LLM messages made safe to send to one model (Pi's `transformMessages`).

Input: the output of `sessions_tree.context.convert_to_llm` (user / assistant /
toolResult). What changes before a provider converts it to its wire format:

- images become a text placeholder when the model does not take images;
- assistant messages that ended in `error` or `aborted` are left out (an incomplete
  turn is not replayed), with the tool results that answer their calls;
- thinking from the same model (provider + api + model id) is kept with its
  signature; from another model it becomes plain text, redacted thinking is dropped,
  empty thinking is dropped;
- tool-call ids from another model are rewritten when the provider needs a
  different id alphabet, and the matching tool results follow;
- a tool call without a result gets a synthetic error result ("No result provided"),
  so the transcript the provider sees is always well formed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from .spec import ModelSpec

USER_IMAGE_PLACEHOLDER = "(image omitted: model does not support images)"
TOOL_IMAGE_PLACEHOLDER = "(tool image omitted: model does not support images)"
MISSING_RESULT_TEXT = "No result provided"


def _without_images(content: list, placeholder: str) -> list:
    result = []
    previous_was_placeholder = False
    for block in content:
        if isinstance(block, dict) and block.get("type") == "image":
            if not previous_was_placeholder:
                result.append({"type": "text", "text": placeholder})
            previous_was_placeholder = True
            continue
        result.append(block)
        previous_was_placeholder = isinstance(block, dict) and block.get("text") == placeholder
    return result


def text_of(content) -> str:
    """The text blocks of a content value joined with nothing between them (a string stays)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


def _same_model(message: dict, model: ModelSpec) -> bool:
    return (
        message.get("provider") == model.provider_name
        and message.get("api") == model.api
        and message.get("model") == model.model_id
    )


def _assistant_blocks(message: dict, model: ModelSpec, id_map: dict, normalize_id) -> list:
    same = _same_model(message, model)
    blocks = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "thinking":
            if block.get("redacted"):
                if same:
                    blocks.append(block)
                continue
            if same and block.get("thinkingSignature"):
                blocks.append(block)
                continue
            thinking = block.get("thinking") or ""
            if not thinking.strip():
                continue
            blocks.append(block if same else {"type": "text", "text": thinking})
        elif kind == "text":
            blocks.append(block if same else {"type": "text", "text": block.get("text") or ""})
        elif kind == "toolCall":
            call = block
            if not same and "thoughtSignature" in call:
                call = {k: v for k, v in call.items() if k != "thoughtSignature"}
            if not same and normalize_id is not None:
                new_id = normalize_id(str(call.get("id") or ""))
                if new_id != call.get("id"):
                    id_map[call.get("id")] = new_id
                    call = {**call, "id": new_id}
            blocks.append(call)
        else:
            blocks.append(block)
    return blocks


def prepare_transcript(
    messages: list[dict], model: ModelSpec, *, normalize_tool_call_id: Callable[[str], str] | None = None
) -> list[dict]:
    id_map: dict = {}
    transformed = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "user":
            content = message.get("content")
            if not model.supports_images and isinstance(content, list):
                message = {**message, "content": _without_images(content, USER_IMAGE_PLACEHOLDER)}
            transformed.append(message)
        elif role == "toolResult":
            content = message.get("content")
            if not isinstance(content, list):
                content = [{"type": "text", "text": content}] if isinstance(content, str) else []
            if not model.supports_images:
                content = _without_images(content, TOOL_IMAGE_PLACEHOLDER)
            message = {**message, "content": content}
            if message.get("toolCallId") in id_map:
                message["toolCallId"] = id_map[message["toolCallId"]]
            transformed.append(message)
        elif role == "assistant":
            transformed.append({**message, "content": _assistant_blocks(message, model, id_map, normalize_tool_call_id)})
        else:
            transformed.append(message)

    result: list[dict] = []
    pending: list[dict] = []
    answered: set = set()
    skipped_calls: set = set()

    def close_pending() -> None:
        for call in pending:
            if call.get("id") not in answered:
                result.append(
                    {
                        "role": "toolResult",
                        "toolCallId": call.get("id"),
                        "toolName": call.get("name"),
                        "content": [{"type": "text", "text": MISSING_RESULT_TEXT}],
                        "isError": True,
                        "timestamp": int(time.time() * 1000),
                    }
                )
        pending.clear()
        answered.clear()

    for message in transformed:
        role = message.get("role")
        if role == "assistant":
            close_pending()
            if message.get("stopReason") in ("error", "aborted"):
                skipped_calls.update(b.get("id") for b in message["content"] if b.get("type") == "toolCall")
                continue
            calls = [b for b in message["content"] if b.get("type") == "toolCall"]
            if calls:
                pending.extend(calls)
            result.append(message)
        elif role == "toolResult":
            if message.get("toolCallId") in skipped_calls:
                continue  # answers a call that is not replayed
            answered.add(message.get("toolCallId"))
            result.append(message)
        elif role == "user":
            close_pending()
            result.append(message)
        else:
            result.append(message)
    close_pending()
    return result


_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def anthropic_tool_call_id(tool_call_id: str) -> str:
    """Anthropic requires ids matching ^[a-zA-Z0-9_-]+$, at most 64 characters."""
    return _ID_UNSAFE.sub("_", tool_call_id)[:64]


def openai_tool_call_id(tool_call_id: str) -> str:
    """OpenAI limits tool-call ids to 40 characters; `call|item` ids keep the call part."""
    if "|" in tool_call_id:
        return _ID_UNSAFE.sub("_", tool_call_id.split("|", 1)[0])[:40]
    return tool_call_id[:40]


def content_parts(content: list, text_part: Callable[[str], dict], image_part: Callable[[dict], dict]) -> list[dict]:
    """A user message's text and image blocks in a wire format (the others are dropped)."""
    parts = []
    for block in content:
        if block.get("type") == "text":
            parts.append(text_part(block.get("text") or ""))
        elif block.get("type") == "image":
            parts.append(image_part(block))
    return parts


def result_text(result: dict) -> str:
    """A tool result's text blocks, one per line."""
    return "\n".join(b.get("text") or "" for b in result.get("content") or [] if b.get("type") == "text")


def result_images(result: dict) -> list[dict]:
    return [b for b in result.get("content") or [] if b.get("type") == "image"]
