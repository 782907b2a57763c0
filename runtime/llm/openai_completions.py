"""OpenAI Chat Completions (streaming) through the official `openai` SDK.

Serves two provider kinds:
- `openai`: api.openai.com conventions (`developer` role for reasoning models,
  `max_completion_tokens`, `store: false`, `strict: false` tools, `reasoning_effort`);
- `openai-compatible`: any endpoint by `base_url` (DeepSeek, vLLM, llama.cpp, Ollama
  …): `system` role, `max_tokens`, reasoning deltas (`reasoning_content`,
  `reasoning`, `reasoning_text`) become a thinking block whose `thinkingSignature`
  names the field, so the same model gets it back in that field (Pi's convention).
  DeepSeek (provider name `deepseek` or a deepseek.com URL) gets `thinking:
  {"type": "enabled"|"disabled"}` and `reasoning_content` on every assistant message.

Response chunks → one thinking block, one text block and one block per tool call (by
`index`), in order of first appearance, all ended when the stream ends (as Pi does);
`finish_reason` gives the stop reason, the final usage chunk the usage.
"""

from __future__ import annotations

import json

from .assistant import AssistantBuilder
from .clients import openai_client, raw_events, request_timeout
from .retry import Failure, ProviderError, parse_retry_after, status_is_retryable
from .sampling import sampling_params
from .spec import LlmRequest, ModelSpec, StreamEvent, WireProvider
from .sse import OpenAIChatEvents
from .transcript import (
    content_parts,
    openai_tool_call_id,
    prepare_transcript,
    result_images,
    result_text,
)

API = "openai-completions"
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
# Pi clamps xhigh to high for models that do not list it.
REASONING_EFFORT = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}
DEFAULT_MAX_TOKENS_CAP = 32000
RETRYABLE_STREAM_ERRORS = frozenset(
    {"server_error", "overloaded_error", "rate_limit_error", "rate_limit_exceeded", "service_unavailable", "api_error"}
)

FINISH_REASONS = {"stop": "stop", "end": "stop", "length": "length", "tool_calls": "toolUse", "function_call": "toolUse"}


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def is_deepseek(model: ModelSpec) -> bool:
    fmt = model.options.get("thinking_format")
    if fmt is not None:
        return fmt == "deepseek"
    return model.provider_name == "deepseek" or "deepseek.com" in (model.base_url or "")


def _compat_tool_call_id(tool_call_id: str) -> str:
    return openai_tool_call_id(tool_call_id) if "|" in tool_call_id else tool_call_id


def _image_part(block: dict) -> dict:
    return {"type": "image_url", "image_url": {"url": f"data:{block.get('mimeType')};base64,{block.get('data')}"}}


def convert_messages(model: ModelSpec, request: LlmRequest) -> list[dict]:
    official = model.provider_kind == "openai"
    normalize = openai_tool_call_id if official else _compat_tool_call_id
    transcript = prepare_transcript(request.messages, model, normalize_tool_call_id=normalize)
    out: list[dict] = []
    if request.system_prompt:
        role = model.options.get("system_role") or ("developer" if official and model.supports_thinking else "system")
        out.append({"role": role, "content": request.system_prompt})
    deepseek = is_deepseek(model)
    i = 0
    while i < len(transcript):
        message = transcript[i]
        role = message.get("role")
        if role == "user":
            content = message.get("content")
            if isinstance(content, str):
                out.append({"role": "user", "content": content})
            elif isinstance(content, list):
                parts = content_parts(content, lambda text: {"type": "text", "text": text}, _image_part)
                if parts:
                    out.append({"role": "user", "content": parts})
        elif role == "assistant":
            blocks = message.get("content") or []
            entry: dict = {"role": "assistant", "content": None}
            text = "".join(b.get("text") or "" for b in blocks if b.get("type") == "text" and (b.get("text") or "").strip())
            if text:
                entry["content"] = text
            thinking = [b for b in blocks if b.get("type") == "thinking" and (b.get("thinking") or "").strip()]
            if thinking:
                field = thinking[0].get("thinkingSignature")
                if field in REASONING_FIELDS:
                    entry[field] = "\n".join(b["thinking"] for b in thinking)
            calls = [b for b in blocks if b.get("type") == "toolCall"]
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call.get("id"),
                        "type": "function",
                        "function": {"name": call.get("name"), "arguments": _dumps(call.get("arguments") or {})},
                    }
                    for call in calls
                ]
            if deepseek and model.supports_thinking and "reasoning_content" not in entry:
                entry["reasoning_content"] = ""
            if entry["content"] is None and "tool_calls" not in entry:
                i += 1
                continue
            out.append(entry)
        elif role == "toolResult":
            images = []
            while i < len(transcript) and transcript[i].get("role") == "toolResult":
                result = transcript[i]
                text = result_text(result)
                out.append({"role": "tool", "content": text or "(see attached image)", "tool_call_id": result.get("toolCallId")})
                if model.supports_images:
                    images.extend(_image_part(b) for b in result_images(result))
                i += 1
            if images:
                out.append({"role": "user", "content": [{"type": "text", "text": "Attached image(s) from tool result:"}, *images]})
            continue
        i += 1
    return out


def convert_tools(model: ModelSpec, tools: list[dict]) -> list[dict]:
    out = []
    for tool in tools:
        function = {"name": tool["name"], "description": tool.get("description") or "", "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}
        if model.provider_kind == "openai":
            function["strict"] = False
        out.append({"type": "function", "function": function})
    return out


def build_params(model: ModelSpec, request: LlmRequest) -> tuple[dict, dict]:
    """(SDK keyword arguments, extra_body) for `chat.completions.create`."""
    official = model.provider_kind == "openai"
    params: dict = {
        "model": model.model_id,
        "messages": convert_messages(model, request),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    extra: dict = {}
    max_tokens = request.max_tokens or min(model.max_output_tokens, DEFAULT_MAX_TOKENS_CAP)
    field = model.options.get("max_tokens_field") or ("max_completion_tokens" if official else "max_tokens")
    if field not in ("max_tokens", "max_completion_tokens"):
        raise ValueError(f"option 'max_tokens_field' must be max_tokens or max_completion_tokens, got {field!r}")
    params[field] = max_tokens
    if official:
        params["store"] = False
        if request.session_id:  # OpenAI's own API: the session's calls share a prompt cache
            params["prompt_cache_key"] = request.session_id
    if request.tools and model.supports_tools:
        params["tools"] = convert_tools(model, request.tools)
    level = request.effective_thinking_level(model)
    if model.supports_thinking:
        if is_deepseek(model):
            extra["thinking"] = {"type": "disabled" if level == "off" else "enabled"}
        elif level != "off":
            params["reasoning_effort"] = {**REASONING_EFFORT, **(model.options.get("reasoning_effort") or {})}[level]
    params.update(sampling_params(model, request))
    return params, extra


# -- response -------------------------------------------------------------------------------


class Decoder:
    def __init__(self, builder: AssistantBuilder) -> None:
        self.b = builder
        self.text_index: int | None = None
        self.thinking_index: int | None = None
        self.calls_by_stream: dict[int, int] = {}
        self.calls_by_id: dict[str, int] = {}
        self.finish_reason: str | None = None

    def _usage(self, usage: dict) -> None:
        prompt = usage.get("prompt_tokens") or 0
        details = usage.get("prompt_tokens_details")
        details = details if isinstance(details, dict) else {}
        cached = details.get("cached_tokens")
        if cached is None:
            cached = usage.get("prompt_cache_hit_tokens") or 0  # DeepSeek
        cache_write = details.get("cache_write_tokens") or 0
        # Some endpoints count this request's cache writes in cached_tokens too (Pi's rule).
        cache_read = max(0, cached - cache_write) if cache_write > 0 else cached
        self.b.set_usage(
            input=max(0, prompt - cache_read - cache_write),
            output=usage.get("completion_tokens") or 0,
            cache_read=cache_read,
            cache_write=cache_write,
        )

    def _call_index(self, call: dict, events: list) -> int:
        stream_index = call.get("index") if isinstance(call.get("index"), int) else None
        call_id = call.get("id") or ""
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = function.get("name") or ""
        index = self.calls_by_stream.get(stream_index) if stream_index is not None else None
        if index is None and call_id:
            index = self.calls_by_id.get(call_id)
        if index is None:
            index, ev = self.b.begin_tool_call(call_id, name)
            events.append(ev)
        block = self.b.content[index]
        if stream_index is not None:
            self.calls_by_stream.setdefault(stream_index, index)
        if call_id:
            self.calls_by_id.setdefault(call_id, index)
            if not block["id"]:
                block["id"] = call_id
        if not block["name"] and name:
            block["name"] = name
        return index

    def feed(self, chunk) -> list[StreamEvent]:
        """One chunk as its JSON object (``raw_events``), or the SDK's model of it."""
        if type(chunk) is not dict:  # an SDK whose stream cannot hand over the JSON: its model
            chunk = chunk.model_dump(mode="json")
        b = self.b
        events: list[StreamEvent] = []
        b.set_response_id(chunk.get("id"))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)
        choices = chunk.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            return events
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return events
        for field in REASONING_FIELDS:
            value = delta.get(field)
            if isinstance(value, str) and value:
                if self.thinking_index is None:
                    self.thinking_index, ev = b.begin_thinking("", signature=field)
                    events.append(ev)
                events.append(b.thinking_delta(self.thinking_index, value))
                break
        content = delta.get("content")
        if content:
            if self.text_index is None:
                self.text_index, ev = b.begin_text()
                events.append(ev)
            events.append(b.text_delta(self.text_index, content))
        for call in delta.get("tool_calls") or ():
            if not isinstance(call, dict):
                continue
            index = self._call_index(call, events)
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            events.append(b.tool_call_delta(index, function.get("arguments") or ""))
        return events

    def close_blocks(self) -> list[StreamEvent]:
        return self.b.end_open_blocks()

    def finish(self) -> str:
        reason = self.finish_reason
        if reason is None:
            raise ProviderError(Failure("Stream ended before a finish_reason", retryable=True))
        if reason in FINISH_REASONS:
            return FINISH_REASONS[reason]
        raise ProviderError(Failure(f"Provider finish_reason: {reason}"))


# -- errors ---------------------------------------------------------------------------------


def describe_error(exc: BaseException) -> Failure:
    import httpx2  # the SDK and its HTTP client load when a model of this kind first fails
    import openai

    if isinstance(exc, ProviderError):
        return exc.failure
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        message = body.get("message") if isinstance(body, dict) else (body.strip() if isinstance(body, str) else None)
        status = exc.status_code
        text = f"{status} {message}" if message else f"{status} status code (no body)"
        return Failure(text, retryable=status_is_retryable(status), retry_after=parse_retry_after(exc.response.headers))
    if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
        return Failure(f"Request timed out: {exc}", retryable=True)
    if isinstance(exc, openai.APIConnectionError | httpx2.TransportError):
        cause = exc.__cause__ or exc
        return Failure(f"Connection error: {cause}", retryable=True)
    if isinstance(exc, openai.APIError):
        # An `{"error": …}` object inside a 200 stream.
        kinds = {getattr(exc, "type", None), getattr(exc, "code", None)}
        return Failure(exc.message, retryable=bool(kinds & RETRYABLE_STREAM_ERRORS))
    return Failure(f"{type(exc).__name__}: {exc}")


class OpenAIProvider(WireProvider):
    api = API
    decoder_class = Decoder
    describe_error = staticmethod(describe_error)

    def open(self, model: ModelSpec, request: LlmRequest):
        api_key = model.api_key
        if not api_key:
            if model.provider_kind == "openai":
                raise ProviderError(Failure(f"No API key for provider: {model.provider_name}"))
            api_key = "not-needed"  # local OpenAI-compatible servers often take no key
        if model.provider_kind == "openai-compatible" and not model.base_url:
            raise ProviderError(Failure("An openai-compatible model needs a base_url"))
        params, extra = build_params(model, request)
        timeout = request_timeout(model.options)
        client = openai_client(base_url=model.base_url, api_key=api_key)

        def start():
            return raw_events(client.chat.completions.create(**params, extra_body=extra or None, timeout=timeout), OpenAIChatEvents)

        return start
