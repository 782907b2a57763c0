"""OpenAI Responses (streaming) through the official `openai` SDK: provider kind `openai-responses`.

The API OpenAI's reasoning models speak natively: their reasoning comes back as
summaries, so a thinking level above `off` gives thinking blocks here (Chat
Completions returns none for them). Pi's `openai-responses` conventions:

- a reasoning item becomes a thinking block: the summary texts (parts separated by a
  blank line) as `thinking`, the whole item as JSON in `thinkingSignature`; with
  `store: false` and `include: ["reasoning.encrypted_content"]` that item (with its
  encrypted content) is sent back as it was on the next turn to the same model;
- a message item becomes a text block whose `textSignature` is `{"v":1,"id":<item id>}`
  with the item's `phase` (`commentary` | `final_answer`) when it has one, as Pi writes it;
  the id and the phase go back with the item (a bare id, as older files hold, is read too);
- `prompt_cache_key` is the session's id, as Pi sends it;
- a function call becomes a tool call with id `<call_id>|<item id>`; the call id goes
  back as `call_id`, the item id as `id` (same model only: another model's calls keep
  just a call id, see transcript.py);
- tool results go back as `function_call_output` items (their images as a user
  message after them); the system prompt is sent as `instructions`.

Events → blocks in order of their output items; `response.completed` gives the usage
and the stop reason (`toolUse` when a function was called), `response.incomplete`
(max tokens) gives `length`, `response.failed` and `error` events end with an error.
"""

from __future__ import annotations

import json

from .assistant import AssistantBuilder
from .clients import openai_client, raw_events, request_timeout
from .openai_completions import (
    DEFAULT_MAX_TOKENS_CAP,
    REASONING_EFFORT,
    RETRYABLE_STREAM_ERRORS,
    describe_error,
)
from .retry import Failure, ProviderError
from .sampling import sampling_params
from .spec import LlmRequest, ModelSpec, StreamEvent, WireProvider
from .sse import JsonView, OpenAIResponsesEvents
from .transcript import (
    content_parts,
    openai_tool_call_id,
    prepare_transcript,
    result_images,
    result_text,
)

API = "openai-responses"


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _image_part(block: dict) -> dict:
    return {"type": "input_image", "detail": "auto", "image_url": f"data:{block.get('mimeType')};base64,{block.get('data')}"}


def _split_call_id(tool_call_id: str) -> tuple[str, str | None]:
    call_id, _, item_id = str(tool_call_id or "").partition("|")
    return call_id, (item_id or None)


def convert_input(model: ModelSpec, request: LlmRequest) -> list[dict]:
    """Pi messages → Responses input items."""
    transcript = prepare_transcript(request.messages, model, normalize_tool_call_id=openai_tool_call_id)
    out: list[dict] = []
    i = 0
    while i < len(transcript):
        message = transcript[i]
        role = message.get("role")
        if role == "user":
            content = message.get("content")
            if isinstance(content, str):
                out.append({"role": "user", "content": [{"type": "input_text", "text": content}]})
            elif isinstance(content, list):
                parts = content_parts(content, lambda text: {"type": "input_text", "text": text}, _image_part)
                if parts:
                    out.append({"role": "user", "content": parts})
        elif role == "assistant":
            out.extend(_assistant_items(message))
        elif role == "toolResult":
            images = []
            while i < len(transcript) and transcript[i].get("role") == "toolResult":
                result = transcript[i]
                call_id, _ = _split_call_id(result.get("toolCallId"))
                out.append({"type": "function_call_output", "call_id": call_id, "output": result_text(result) or "(see attached image)"})
                if model.supports_images:
                    images.extend(_image_part(b) for b in result_images(result))
                i += 1
            if images:
                out.append({"role": "user", "content": [{"type": "input_text", "text": "Attached image(s) from tool result:"}, *images]})
            continue
        i += 1
    return out


def _assistant_items(message: dict) -> list[dict]:
    items: list[dict] = []
    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "thinking":
            signature = block.get("thinkingSignature")
            if not signature:
                continue  # thinking without its item cannot be sent back (another model's became text already)
            try:
                item = json.loads(signature)
            except ValueError:
                continue
            if isinstance(item, dict) and item.get("type") == "reasoning":
                items.append(item)
        elif kind == "text":
            text = block.get("text") or ""
            if not text:
                continue
            item = {"type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}
            item_id, phase = parse_text_signature(block.get("textSignature"))
            if item_id and item_id.startswith("msg"):
                item["id"] = item_id
            if phase:
                item["phase"] = phase
            items.append(item)
        elif kind == "toolCall":
            call_id, item_id = _split_call_id(block.get("id"))
            item = {"type": "function_call", "call_id": call_id, "name": block.get("name"), "arguments": _dumps(block.get("arguments") or {})}
            if item_id:
                item["id"] = item_id
            items.append(item)
    return items


TEXT_PHASES = ("commentary", "final_answer")


def text_signature(item_id: str, phase=None) -> str:
    """A text block's ``textSignature`` as Pi writes it: ``{"v":1,"id":…}`` and the message
    item's ``phase`` (commentary | final_answer) when it has one."""
    payload = {"v": 1, "id": item_id}
    if phase in TEXT_PHASES:
        payload["phase"] = phase
    return json.dumps(payload, separators=(",", ":"))


def parse_text_signature(signature) -> tuple[str | None, str | None]:
    """(item id, phase) of a ``textSignature``: Pi's v1 JSON, or a bare item id (what older
    files hold)."""
    if not isinstance(signature, str) or not signature:
        return None, None
    if signature.startswith("{"):
        try:
            parsed = json.loads(signature)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("v") == 1:
            item_id = parsed.get("id") if isinstance(parsed.get("id"), str) else None
            phase = parsed.get("phase") if parsed.get("phase") in TEXT_PHASES else None
            return item_id, phase
    return signature, None


def convert_tools(tools: list[dict]) -> list[dict]:
    return [
        {
            "type": "function",
            "name": tool["name"],
            "description": tool.get("description") or "",
            "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            "strict": False,
        }
        for tool in tools
    ]


def build_params(model: ModelSpec, request: LlmRequest) -> dict:
    """Keyword arguments for `responses.create`."""
    params: dict = {
        "model": model.model_id,
        "input": convert_input(model, request),
        "stream": True,
        "store": False,
        "max_output_tokens": request.max_tokens or min(model.max_output_tokens, DEFAULT_MAX_TOKENS_CAP),
    }
    if request.system_prompt:
        params["instructions"] = request.system_prompt
    if request.session_id:
        params["prompt_cache_key"] = request.session_id
    if request.tools and model.supports_tools:
        params["tools"] = convert_tools(request.tools)
    level = request.effective_thinking_level(model)
    if model.supports_thinking and level != "off":
        effort = {**REASONING_EFFORT, **(model.options.get("reasoning_effort") or {})}[level]
        params["reasoning"] = {"effort": effort, "summary": model.options.get("reasoning_summary") or "auto"}
        params["include"] = ["reasoning.encrypted_content"]
    params.update(sampling_params(model, request))
    return params


# -- response -------------------------------------------------------------------------------


def _as_dict(item) -> dict:
    """An output item as the SDK's ``model_dump(exclude_none=True)`` gives it."""
    if isinstance(item, JsonView):
        item = item.data
    if isinstance(item, dict):
        return _without_none(item)
    return item.model_dump(mode="json", exclude_none=True)


def _without_none(value):
    if type(value) is dict:
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if type(value) is list:
        return [_without_none(v) for v in value]
    return value


class Decoder:
    def __init__(self, builder: AssistantBuilder) -> None:
        self.b = builder
        self.blocks: dict[int, int] = {}  # output_index -> block index
        self.streamed: set[int] = set()  # blocks that got deltas (the done item fills the others)
        self.status: str | None = None
        self.incomplete_reason: str | None = None
        self.called = False

    def _block(self, output_index: int, events: list, kind: str, item=None) -> int:
        index = self.blocks.get(output_index)
        if index is not None:
            return index
        b = self.b
        if kind == "reasoning":
            index, ev = b.begin_thinking("")
        elif kind == "function_call":
            call_id = getattr(item, "call_id", None) or ""
            item_id = getattr(item, "id", None)
            index, ev = b.begin_tool_call(f"{call_id}|{item_id}" if item_id else call_id, getattr(item, "name", None) or "")
            self.called = True
        else:
            index, ev = b.begin_text()
        self.blocks[output_index] = index
        events.append(ev)
        return index

    def feed(self, event) -> list[StreamEvent]:
        b = self.b
        events: list[StreamEvent] = []
        kind = getattr(event, "type", None)
        if kind in ("response.created", "response.in_progress"):
            b.set_response_id(getattr(event.response, "id", None))
        elif kind == "response.output_item.added":
            item_type = getattr(event.item, "type", None)
            if item_type in ("reasoning", "function_call", "message"):
                index = self._block(event.output_index, events, item_type, event.item)
                arguments = getattr(event.item, "arguments", None) if item_type == "function_call" else None
                if arguments:
                    self.streamed.add(index)
                    events.append(b.tool_call_delta(index, arguments))
        elif kind == "response.reasoning_summary_part.added":
            index = self._block(event.output_index, events, "reasoning")
            if event.summary_index > 0 and b.content[index]["thinking"]:
                events.append(b.thinking_delta(index, "\n\n"))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            index = self._block(event.output_index, events, "reasoning")
            self.streamed.add(index)
            events.append(b.thinking_delta(index, event.delta))
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            index = self._block(event.output_index, events, "message")
            self.streamed.add(index)
            events.append(b.text_delta(index, event.delta))
        elif kind == "response.function_call_arguments.delta":
            index = self._block(event.output_index, events, "function_call")
            self.streamed.add(index)
            events.append(b.tool_call_delta(index, event.delta))
        elif kind == "response.output_item.done":
            events.extend(self._item_done(event.output_index, event.item))
        elif kind in ("response.completed", "response.incomplete"):
            response = event.response
            self.status = getattr(response, "status", None) or ("completed" if kind == "response.completed" else "incomplete")
            details = getattr(response, "incomplete_details", None)
            self.incomplete_reason = getattr(details, "reason", None)
            b.set_response_id(getattr(response, "id", None))
            if getattr(response, "usage", None) is not None:
                self._usage(response.usage)
        elif kind == "response.failed":
            error = getattr(event.response, "error", None)
            message = getattr(error, "message", None) or "The response failed"
            code = getattr(error, "code", None)
            raise ProviderError(Failure(f"{code}: {message}" if code else message, retryable=code in RETRYABLE_STREAM_ERRORS))
        elif kind == "error":
            code = getattr(event, "code", None)
            message = getattr(event, "message", None) or "An error occurred during streaming"
            raise ProviderError(Failure(f"{code}: {message}" if code else message, retryable=code in RETRYABLE_STREAM_ERRORS))
        return events

    def _item_done(self, output_index: int, item) -> list[StreamEvent]:
        b = self.b
        events: list[StreamEvent] = []
        item_type = getattr(item, "type", None)
        if item_type not in ("reasoning", "function_call", "message"):
            return events
        index = self._block(output_index, events, item_type, item)
        block = b.content[index]
        if item_type == "reasoning":
            if index not in self.streamed:
                summary = "\n\n".join(getattr(s, "text", "") or "" for s in getattr(item, "summary", None) or [])
                if summary:
                    events.append(b.thinking_delta(index, summary))
            b.add_thinking_signature(index, json.dumps(_as_dict(item), ensure_ascii=False, separators=(",", ":")))
            if b.is_open(index):
                events.append(b.end_thinking(index))
        elif item_type == "message":
            if index not in self.streamed:
                text = "".join(
                    getattr(part, "text", None) or getattr(part, "refusal", None) or "" for part in getattr(item, "content", None) or []
                )
                if text:
                    events.append(b.text_delta(index, text))
            if getattr(item, "id", None):
                block["textSignature"] = text_signature(item.id, _as_dict(item).get("phase"))
            if b.is_open(index):
                events.append(b.end_text(index))
        else:
            if index not in self.streamed and getattr(item, "arguments", None):
                events.append(b.tool_call_delta(index, item.arguments))
            if b.is_open(index):
                events.append(b.end_tool_call(index))
        return events

    def _usage(self, usage) -> None:
        details = getattr(usage, "input_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) or 0
        total_input = getattr(usage, "input_tokens", None) or 0
        self.b.set_usage(input=max(0, total_input - cached), output=getattr(usage, "output_tokens", None) or 0, cache_read=cached)

    def close_blocks(self) -> list[StreamEvent]:
        return self.b.end_open_blocks()

    def finish(self) -> str:
        if self.status is None:
            raise ProviderError(Failure("Stream ended before the response completed", retryable=True))
        if self.status == "incomplete":
            if self.incomplete_reason in (None, "max_output_tokens"):
                return "length"
            raise ProviderError(Failure(f"Response incomplete: {self.incomplete_reason}"))
        if self.status != "completed":
            raise ProviderError(Failure(f"Response status: {self.status}"))
        return "toolUse" if self.called else "stop"


class OpenAIResponsesProvider(WireProvider):
    api = API
    decoder_class = Decoder
    describe_error = staticmethod(describe_error)

    def open(self, model: ModelSpec, request: LlmRequest):
        client = openai_client(base_url=model.base_url, api_key=self.api_key(model))
        params = build_params(model, request)
        timeout = request_timeout(model.options)
        return lambda: raw_events(client.responses.create(**params, timeout=timeout), OpenAIResponsesEvents)
