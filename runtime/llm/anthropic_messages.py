"""Anthropic Messages API (streaming) through the official `anthropic` SDK.

Request: Pi messages → Messages API params (system prompt block, tools, user /
assistant / tool_result turns, images, thinking with signatures and redacted
thinking carried back for the same model), prompt caching marks (system prompt,
last tool, last user block), and thinking from the level (`thinking_params`).
Response: raw SSE events (`message_start`, `content_block_start/delta/stop`,
`message_delta`, `message_stop`, `error`) → `AssistantBuilder` steps.
"""

from __future__ import annotations

import json

from .assistant import AssistantBuilder
from .clients import anthropic_client, raw_events, request_timeout
from .retry import Failure, ProviderError, parse_retry_after, status_is_retryable
from .sampling import sampling_params
from .spec import LlmRequest, ModelSpec, StreamEvent, WireProvider
from .sse import AnthropicEvents
from .transcript import anthropic_tool_call_id, prepare_transcript

API = "anthropic-messages"

# Pi's default thinking budgets (tokens) per level; xhigh is clamped to high.
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
# Adaptive-thinking models take an effort instead of a budget.
ADAPTIVE_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}
MIN_OUTPUT_TOKENS = 1024
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
DEFAULT_MAX_TOKENS_CAP = 32000
_ADAPTIVE_IDS = ("opus-4-6", "opus-4.6", "opus-4-7", "opus-4.7", "sonnet-4-6", "sonnet-4.6")

STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "tool_use": "toolUse",
}
# Errors sent as an SSE `error` event that may pass on a second try.
RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})


# -- request --------------------------------------------------------------------------------


def uses_adaptive_thinking(model: ModelSpec) -> bool:
    forced = model.options.get("adaptive_thinking")
    if isinstance(forced, bool):
        return forced
    return any(part in model.model_id for part in _ADAPTIVE_IDS)


def thinking_params(model: ModelSpec, level: str, base_max_tokens: int) -> tuple[dict, int]:
    """(params to merge, max_tokens) for a thinking level (Pi's `adjustMaxTokensForThinking`).

    Budget models: budget = THINKING_BUDGETS[level] (option `thinking_budgets` overrides
    per level); max_tokens = min(base + budget, model max output); when that leaves no
    room the budget shrinks to max_tokens - 1024. Adaptive models: `{"type":
    "adaptive"}` plus `output_config.effort`. A thinking model at level "off" gets
    `{"type": "disabled"}`; a model without thinking gets nothing.
    """
    if not model.supports_thinking:
        return {}, base_max_tokens
    if level == "off":
        return {"thinking": {"type": "disabled"}}, base_max_tokens
    display = model.options.get("thinking_display", "summarized")
    if uses_adaptive_thinking(model):
        effort = {**ADAPTIVE_EFFORT, **(model.options.get("thinking_effort") or {})}.get(level, "high")
        return {"thinking": {"type": "adaptive", "display": display}, "output_config": {"effort": effort}}, base_max_tokens
    budgets = {**THINKING_BUDGETS, **(model.options.get("thinking_budgets") or {})}
    clamped = "high" if level == "xhigh" else level
    budget = int(budgets[clamped])
    max_tokens = min(base_max_tokens + budget, model.max_output_tokens)
    if max_tokens <= budget:
        budget = max(0, max_tokens - MIN_OUTPUT_TOKENS)
    return {"thinking": {"type": "enabled", "budget_tokens": budget, "display": display}}, max_tokens


def beta_headers(model: ModelSpec, params: dict) -> dict:
    """Budget-thinking models think between tool calls only with the interleaved-thinking
    beta (adaptive models do it anyway); option `interleaved_thinking: false` turns it off."""
    thinking = params.get("thinking") or {}
    if thinking.get("type") == "enabled" and model.options.get("interleaved_thinking", True):
        return {"anthropic-beta": INTERLEAVED_THINKING_BETA}
    return {}


def _image(block: dict) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": block.get("mimeType"), "data": block.get("data")}}


def _tool_result_content(content: list):
    if not any(b.get("type") == "image" for b in content):
        return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    blocks = [
        {"type": "text", "text": b.get("text", "")} if b.get("type") == "text" else _image(b)
        for b in content
        if b.get("type") in ("text", "image")
    ]
    if not any(b["type"] == "text" for b in blocks):
        blocks.insert(0, {"type": "text", "text": "(see attached image)"})
    return blocks


def convert_messages(messages: list[dict], model: ModelSpec, cache_control: dict | None) -> list[dict]:
    out: list[dict] = []
    transcript = prepare_transcript(messages, model, normalize_tool_call_id=anthropic_tool_call_id)
    i = 0
    while i < len(transcript):
        message = transcript[i]
        role = message.get("role")
        if role == "user":
            content = message.get("content")
            if isinstance(content, str):
                if content.strip():
                    out.append({"role": "user", "content": content})
            elif isinstance(content, list):
                blocks = []
                for block in content:
                    if block.get("type") == "text":
                        if (block.get("text") or "").strip():
                            blocks.append({"type": "text", "text": block["text"]})
                    elif block.get("type") == "image":
                        blocks.append(_image(block))
                if blocks:
                    out.append({"role": "user", "content": blocks})
        elif role == "assistant":
            blocks = []
            for block in message.get("content") or []:
                kind = block.get("type")
                if kind == "text":
                    if (block.get("text") or "").strip():
                        blocks.append({"type": "text", "text": block["text"]})
                elif kind == "thinking":
                    if block.get("redacted"):
                        blocks.append({"type": "redacted_thinking", "data": block.get("thinkingSignature") or ""})
                        continue
                    thinking = block.get("thinking") or ""
                    if not thinking.strip():
                        continue
                    signature = block.get("thinkingSignature") or ""
                    if signature.strip():
                        blocks.append({"type": "thinking", "thinking": thinking, "signature": signature})
                    else:
                        # No signature (an aborted stream): the API would reject it as thinking.
                        blocks.append({"type": "text", "text": thinking})
                elif kind == "toolCall":
                    arguments = block.get("arguments")
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": block.get("id"),
                            "name": block.get("name"),
                            "input": arguments if isinstance(arguments, dict) else {},
                        }
                    )
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif role == "toolResult":
            results = []
            while i < len(transcript) and transcript[i].get("role") == "toolResult":
                result = transcript[i]
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": result.get("toolCallId"),
                        "content": _tool_result_content(result.get("content") or []),
                        "is_error": bool(result.get("isError")),
                    }
                )
                i += 1
            out.append({"role": "user", "content": results})
            continue
        i += 1

    if cache_control and out and out[-1]["role"] == "user":
        last = out[-1]
        if isinstance(last["content"], str):
            last["content"] = [{"type": "text", "text": last["content"], "cache_control": cache_control}]
        elif last["content"] and last["content"][-1].get("type") in ("text", "image", "tool_result"):
            last["content"][-1]["cache_control"] = cache_control
    return out


def convert_tools(tools: list[dict], cache_control: dict | None) -> list[dict]:
    out = []
    for tool in tools:
        schema = tool.get("parameters") or {}
        schema = {**schema, "type": "object"}
        schema.setdefault("properties", {})
        out.append({"name": tool["name"], "description": tool.get("description") or "", "input_schema": schema})
    if cache_control and out:
        out[-1]["cache_control"] = cache_control
    return out


def build_params(model: ModelSpec, request: LlmRequest) -> dict:
    caching = model.options.get("cache", "short")
    cache_control = None if caching == "none" else {"type": "ephemeral", **({"ttl": "1h"} if caching == "long" else {})}
    base_max = request.max_tokens or min(model.max_output_tokens, DEFAULT_MAX_TOKENS_CAP)
    thinking, max_tokens = thinking_params(model, request.effective_thinking_level(model), base_max)
    params: dict = {
        "model": model.model_id,
        "max_tokens": max_tokens,
        "messages": convert_messages(request.messages, model, cache_control),
    }
    if request.system_prompt:
        block = {"type": "text", "text": request.system_prompt}
        if cache_control:
            block["cache_control"] = cache_control
        params["system"] = [block]
    if request.tools and model.supports_tools:
        params["tools"] = convert_tools(request.tools, cache_control)
    params.update(thinking)
    params.update(sampling_params(model, request))
    return params


# -- response -------------------------------------------------------------------------------


class Decoder:
    """Raw Anthropic stream events → builder steps (Pi's `streamAnthropic`).

    The events are their JSON objects as the server sent them (`raw_events`): building the
    SDK's model of every delta cost more than all the rest of the layer's work on it."""

    def __init__(self, builder: AssistantBuilder) -> None:
        self.b = builder
        self.blocks: dict[int, int] = {}  # wire index → content index
        self.stop_reason: str | None = None
        self.error: str | None = None
        self.saw_start = False
        self.saw_stop = False

    def _usage(self, usage: dict, *, initial: bool) -> None:
        current = self.b.message["usage"]

        def pick(name: str, key: str) -> int:
            value = usage.get(name)
            if value is None:
                return 0 if initial else current[key]
            return int(value)

        creation = usage.get("cache_creation")
        long_writes = creation.get("ephemeral_1h_input_tokens") if isinstance(creation, dict) else None
        self.b.set_usage(
            input=pick("input_tokens", "input"),
            output=pick("output_tokens", "output"),
            cache_read=pick("cache_read_input_tokens", "cacheRead"),
            cache_write=pick("cache_creation_input_tokens", "cacheWrite"),
            # The 1-hour writes (cache "long") cost more than the 5-minute ones.
            cache_write_1h=int(long_writes) if long_writes is not None else int(current.get("cacheWrite1h") or 0) if not initial else 0,
        )

    def feed(self, event) -> list[StreamEvent]:
        if type(event) is not dict:  # an SDK whose stream cannot hand over the JSON: its model
            event = event.model_dump(mode="json", by_alias=True)
        kind = event.get("type")
        b = self.b
        if kind == "content_block_delta":
            index = self.blocks.get(event.get("index"))
            if index is None:
                return []
            delta = event["delta"]
            dkind = delta.get("type")
            block_type = b.content[index]["type"]
            if dkind == "text_delta" and block_type == "text":
                return [b.text_delta(index, delta["text"])]
            if dkind == "thinking_delta" and block_type == "thinking":
                return [b.thinking_delta(index, delta["thinking"])]
            if dkind == "input_json_delta" and block_type == "toolCall":
                return [b.tool_call_delta(index, delta["partial_json"])]
            if dkind == "signature_delta" and block_type == "thinking":
                b.add_thinking_signature(index, delta["signature"])
            return []
        if kind == "content_block_start":
            block = event["content_block"]
            btype = block.get("type")
            initial = ""
            if btype == "text":
                index, ev = b.begin_text()
                initial = block.get("text") or ""
            elif btype == "thinking":
                index, ev = b.begin_thinking(signature=block.get("signature") or "")
                initial = block.get("thinking") or ""
            elif btype == "redacted_thinking":
                index, ev = b.begin_thinking("[Reasoning redacted]", signature=block["data"], redacted=True)
            elif btype == "tool_use":
                start_input = block.get("input")
                index, ev = b.begin_tool_call(block["id"], block["name"], start_input if isinstance(start_input, dict) else None)
            else:
                return []  # server tools, citations …: not part of Pi's message
            self.blocks[event.get("index")] = index
            if initial:  # text that came with the start event still arrives as a delta
                delta = b.text_delta(index, initial) if btype == "text" else b.thinking_delta(index, initial)
                return [ev, delta]
            return [ev]
        if kind == "content_block_stop":
            index = self.blocks.pop(event.get("index"), None)
            if index is None:
                return []
            btype = b.content[index]["type"]
            if btype == "text":
                return [b.end_text(index)]
            if btype == "thinking":
                return [b.end_thinking(index)]
            return [b.end_tool_call(index)]
        if kind == "message_start":
            self.saw_start = True
            message = event["message"]
            b.set_response_id(message.get("id"))
            self._usage(message.get("usage") or {}, initial=True)
            return []
        if kind == "message_delta":
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                self.stop_reason = reason
            usage = event.get("usage")
            if usage is not None:
                self._usage(usage, initial=False)
            return []
        if kind == "message_stop":
            self.saw_stop = True
        return []

    def finish(self) -> str:
        """The Pi stop reason; raises ProviderError when the stream did not end properly."""
        if not self.saw_stop:
            raise ProviderError(Failure("Anthropic stream ended before message_stop", retryable=True))
        reason = self.stop_reason
        if reason in STOP_REASONS:
            return STOP_REASONS[reason]
        if reason == "refusal":
            raise ProviderError(Failure("The model declined to answer (stop_reason: refusal)"))
        if reason == "model_context_window_exceeded":
            raise ProviderError(Failure("model_context_window_exceeded: the request filled the model's context window"))
        raise ProviderError(Failure(f"Unhandled stop reason: {reason}"))


# -- errors ---------------------------------------------------------------------------------


def _provider_message(body) -> tuple[str | None, str | None]:
    """(error type, message) from an Anthropic error body `{"type":"error","error":{...}}`."""
    if isinstance(body, dict):
        error = body.get("error") if isinstance(body.get("error"), dict) else body
        message = error.get("message")
        kind = error.get("type")
        return (kind if isinstance(kind, str) else None, message if isinstance(message, str) else None)
    if isinstance(body, str) and body.strip():
        try:
            return _provider_message(json.loads(body))
        except ValueError:
            return None, body.strip()
    return None, None


def describe_error(exc: BaseException) -> Failure:
    import anthropic  # the SDK (~0.3 s) loads when a model of this kind first fails, not at start-up
    import httpx2

    if isinstance(exc, ProviderError):
        return exc.failure
    if isinstance(exc, anthropic.APIStatusError):
        kind, message = _provider_message(exc.body)
        status = exc.status_code
        if status < 400:
            # An `error` event inside a 200 stream.
            text = f"{kind}: {message}" if kind and message else (message or str(exc))
            return Failure(text, retryable=kind in RETRYABLE_STREAM_ERRORS)
        if message:
            text = f"{status} {kind}: {message}" if kind else f"{status} {message}"
        else:
            text = f"{status} status code (no body)"
        return Failure(text, retryable=status_is_retryable(status), retry_after=parse_retry_after(exc.response.headers))
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return Failure(f"Request timed out: {exc}", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        cause = exc.__cause__ or exc
        return Failure(f"Connection error: {cause}", retryable=True)
    return Failure(f"{type(exc).__name__}: {exc}")


# -- the provider ---------------------------------------------------------------------------


class AnthropicProvider(WireProvider):
    api = API
    decoder_class = Decoder
    describe_error = staticmethod(describe_error)

    def open(self, model: ModelSpec, request: LlmRequest):
        client = anthropic_client(base_url=model.base_url, api_key=self.api_key(model))
        params = build_params(model, request)
        timeout = request_timeout(model.options)
        headers = beta_headers(model, params)

        def start():
            return raw_events(client.messages.create(**params, stream=True, timeout=timeout, extra_headers=headers or None), AnthropicEvents)

        return start
