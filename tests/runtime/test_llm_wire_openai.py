"""The openai and openai-compatible providers: the official SDK against local servers
speaking chat-completions chunks (OpenAI, and DeepSeek with reasoning_content)."""

from __future__ import annotations

import threading

from runtime.llm import LlmRequest, ModelSpec, complete, stream
from runtime.llm.assistant import AssistantBuilder
from runtime.llm.openai_completions import Decoder, build_params
from tests.support.wire_servers import (
    Reply,
    Status,
    ask,
    comparable,
    openai_chunks,
    serve,
    terminal_events,
    user,
    wire_spec,
)

PRICES = {"input": 2, "output": 8, "cacheRead": 0.5}
openai_server, _clean_openai = serve("openai", "openai_server")
deepseek_server, _clean_deepseek = serve("deepseek", "deepseek_server")
OPENAI = {
    "provider_kind": "openai",
    "model_id": "gpt-test",
    "provider_name": "openai",
    "api_key": "sk-openai-test",
    "supports_images": True,
    "prices": PRICES,
}
DEEPSEEK = {
    "provider_kind": "openai-compatible",
    "model_id": "deepseek-reasoner",
    "provider_name": "deepseek",
    "api_key": "sk-deepseek-test",
    "supports_thinking": True,
    "prices": PRICES,
}


def openai_spec(server, **overrides) -> ModelSpec:
    return wire_spec(server, OPENAI, overrides)


def deepseek_spec(server, **overrides) -> ModelSpec:
    return wire_spec(server, DEEPSEEK, overrides)


TEXT = {"type": "text", "text": "Sure, here is the plan."}
REASONING = {"type": "thinking", "thinking": "Two files to read first.", "thinkingSignature": "reasoning_content"}
CALL_1 = {"type": "toolCall", "id": "call_aaa111", "name": "ls", "arguments": {"path": "src"}}
CALL_2 = {"type": "toolCall", "id": "call_bbb222", "name": "grep", "arguments": {"pattern": "TODO", "path": "."}}


# -- streamed content ---------------------------------------------------------------------------


def test_text_and_several_tool_calls(openai_server):
    openai_server.script(Reply([TEXT, CALL_1, CALL_2], stop_reason="toolUse", chunk=4))
    events = list(stream(openai_spec(openai_server), ask()))
    message = events[-1].message
    assert message["content"] == [TEXT, CALL_1, CALL_2]
    assert message["stopReason"] == "toolUse"
    assert (message["api"], message["provider"], message["responseId"]) == ("openai-completions", "openai", "msg_wire_0001")
    types = [e.type for e in events]
    assert types[0] == "start" and types[-1] == "done" and len(terminal_events(events)) == 1
    assert [e.content_index for e in events if e.type == "toolcall_start"] == [1, 2]
    assert "".join(e.delta for e in events if e.type == "toolcall_delta" and e.content_index == 2) == (
        '{"pattern":"TODO","path":"."}'
    )
    # Blocks end when the stream ends, in order (as Pi does for chat completions).
    assert types[-4:] == ["text_end", "toolcall_end", "toolcall_end", "done"]


def test_finish_reason_length_and_usage_with_cached_tokens(openai_server):
    openai_server.script(Reply([TEXT], stop_reason="length", usage={"input": 900, "output": 120, "cacheRead": 100, "cacheWrite": 0}))
    message = complete(openai_spec(openai_server), ask())
    assert message["stopReason"] == "length"
    usage = message["usage"]
    # prompt_tokens 1000 of which 100 cached → input 900, cacheRead 100.
    assert (usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"], usage["totalTokens"]) == (900, 120, 100, 0, 1120)
    assert usage["cost"]["total"] == (2 / 1000000) * 900 + (8 / 1000000) * 120 + (0.5 / 1000000) * 100 + 0


def test_deepseek_reasoning_content_becomes_a_thinking_block(deepseek_server):
    deepseek_server.script(Reply([REASONING, TEXT, CALL_1], stop_reason="toolUse", usage={"input": 50, "output": 30, "cacheRead": 64, "cacheWrite": 0}))
    events = list(stream(deepseek_spec(deepseek_server), ask(thinking_level="high")))
    message = events[-1].message
    assert message["content"] == [REASONING, TEXT, CALL_1]
    assert message["provider"] == "deepseek"
    assert message["usage"]["cacheRead"] == 64 and message["usage"]["input"] == 50  # prompt_cache_hit_tokens
    assert "".join(e.delta for e in events if e.type == "thinking_delta") == REASONING["thinking"]


# -- retries and errors -------------------------------------------------------------------------


def test_429_with_retry_after_ms_then_500_then_success(openai_server):
    openai_server.script(
        Status(429, "Rate limit reached for requests", headers={"retry-after-ms": "300"}),
        Status(500, "The server had an error"),
        Reply([TEXT]),
    )
    message = complete(openai_spec(openai_server), ask())
    assert message["stopReason"] == "stop" and message["content"] == [TEXT]
    first, second, third = openai_server.requests
    assert second.at - first.at >= 0.29
    assert len(openai_server.requests) == 3


def test_attempts_are_bounded_and_the_last_message_kept(openai_server):
    openai_server.script(*[Status(502, "Bad gateway")] * 4)
    message = complete(openai_spec(openai_server, options={"max_retries": 1}), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "502 Bad gateway"
    assert len(openai_server.requests) == 2


def test_context_overflow_message_is_not_retried(openai_server):
    openai_server.script(Status(400, "Your input exceeds the context window of this model."))
    message = complete(openai_spec(openai_server), ask())
    assert message["errorMessage"] == "400 Your input exceeds the context window of this model."
    assert len(openai_server.requests) == 1


def test_dropped_connection_before_output_is_retried(openai_server):
    openai_server.script(Reply([TEXT], cut_after=1), Reply([TEXT]))  # role chunk only, then cut
    message = complete(openai_spec(openai_server), ask())
    assert message["stopReason"] == "stop"
    assert len(openai_server.requests) == 2


def test_no_retry_after_output_dropped_connection(openai_server):
    openai_server.script(Reply([TEXT], cut_after=3, chunk=4), Reply([TEXT]))  # role chunk + "Sure", ", he"
    message = complete(openai_spec(openai_server), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"].startswith("Connection error:")
    assert message["content"] == [{"type": "text", "text": "Sure, he"}]
    assert len(openai_server.requests) == 1


def test_error_object_mid_stream(deepseek_server):
    deepseek_server.script(Reply([REASONING, TEXT], error_after=4, error=("invalid_request_error", "Content blocked by policy")))
    message = complete(deepseek_spec(deepseek_server), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "Content blocked by policy"
    assert message["content"] == [{"type": "thinking", "thinking": "Two files to re", "thinkingSignature": "reasoning_content"}]
    assert len(deepseek_server.requests) == 1


def test_server_error_object_before_output_is_retried(openai_server):
    openai_server.script(Reply([TEXT], error_after=1, error=("server_error", "The server is overloaded")), Reply([TEXT]))
    assert complete(openai_spec(openai_server), ask())["stopReason"] == "stop"
    assert len(openai_server.requests) == 2


def test_stream_without_finish_reason_is_an_error(openai_server):
    reply = Reply([TEXT])
    chunks = openai_chunks(reply, "m")
    reply.end_after = len(chunks) - 2  # everything up to the finish chunk, then a clean end
    openai_server.script(reply, Reply([TEXT]))
    message = complete(openai_spec(openai_server), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "Stream ended before a finish_reason"
    assert message["content"] == [TEXT]
    assert len(openai_server.requests) == 1


def test_cancel_mid_stream(openai_server):
    reply = Reply([TEXT, CALL_1], chunk=3, hold_after=4)
    openai_server.script(reply)
    cancel = threading.Event()
    events = []
    for event in stream(openai_spec(openai_server), ask(), cancel=cancel):
        events.append(event)
        if len(events) == 3:
            threading.Timer(0.05, cancel.set).start()
    reply.release.set()
    message = events[-1].message
    assert message["stopReason"] == "aborted"
    assert message["errorMessage"] == "Request was aborted"
    assert message["content"] == [{"type": "text", "text": "Sure, her"}]
    assert len(terminal_events(events)) == 1


def test_missing_key_and_missing_base_url(openai_server):
    assert complete(openai_spec(openai_server, api_key=None), ask())["errorMessage"] == "No API key for provider: openai"
    no_url = complete(deepseek_spec(openai_server, base_url=None), ask())
    assert no_url["errorMessage"] == "An openai-compatible model needs a base_url"
    assert openai_server.requests == []


# -- the request the SDK sent -------------------------------------------------------------------

PNG = "iVBORw0KGgo="
GREP_TOOL = {
    "name": "grep",
    "description": "Search files",
    "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]},
}


def transcript(provider: str, model_id: str, api: str = "openai-completions") -> list[dict]:
    own = {"api": api, "provider": provider, "model": model_id, "usage": {}, "timestamp": 2}
    return [
        {"role": "user", "content": [{"type": "text", "text": "Look"}, {"type": "image", "data": PNG, "mimeType": "image/png"}], "timestamp": 1},
        {"role": "assistant", "content": [REASONING, {"type": "text", "text": "Searching."}, CALL_1, CALL_2], **own, "stopReason": "toolUse"},
        {"role": "toolResult", "toolCallId": CALL_1["id"], "toolName": "ls", "content": [{"type": "text", "text": "a.py"}], "isError": False, "timestamp": 3},
        {
            "role": "toolResult",
            "toolCallId": CALL_2["id"],
            "toolName": "grep",
            "content": [{"type": "image", "data": PNG, "mimeType": "image/png"}],
            "isError": False,
            "timestamp": 4,
        },
        {"role": "user", "content": "continue", "timestamp": 5},
    ]


def test_openai_request_shape(openai_server):
    openai_server.script(Reply([TEXT]))
    model = openai_spec(openai_server, supports_thinking=True)
    request = LlmRequest("You are Neta.", transcript("openai", "gpt-test"), [GREP_TOOL], thinking_level="xhigh")
    complete(model, request)
    sent = openai_server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-openai-test"
    body = sent.body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["reasoning_effort"] == "high"  # xhigh is clamped
    assert body["max_completion_tokens"] == 8192 and body["store"] is False
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "grep",
                "description": "Search files",
                "parameters": GREP_TOOL["parameters"],
                "strict": False,
            },
        }
    ]
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert body["messages"] == [
        {"role": "developer", "content": "You are Neta."},
        {"role": "user", "content": [{"type": "text", "text": "Look"}, image]},
        {
            "role": "assistant",
            "content": "Searching.",
            "reasoning_content": REASONING["thinking"],
            "tool_calls": [
                {"id": "call_aaa111", "type": "function", "function": {"name": "ls", "arguments": '{"path":"src"}'}},
                {"id": "call_bbb222", "type": "function", "function": {"name": "grep", "arguments": '{"pattern":"TODO","path":"."}'}},
            ],
        },
        {"role": "tool", "content": "a.py", "tool_call_id": "call_aaa111"},
        {"role": "tool", "content": "(see attached image)", "tool_call_id": "call_bbb222"},
        {"role": "user", "content": [{"type": "text", "text": "Attached image(s) from tool result:"}, image]},
        {"role": "user", "content": "continue"},
    ]


def test_deepseek_request_shape(deepseek_server):
    deepseek_server.script(Reply([TEXT]))
    # History from another model: its reasoning is replayed as plain text, not as reasoning_content.
    messages = transcript("openai", "gpt-test")
    messages.insert(4, {"role": "assistant", "content": [{"type": "text", "text": "x"}], "api": "openai-completions", "provider": "deepseek", "model": "deepseek-reasoner", "usage": {}, "stopReason": "error", "timestamp": 2})
    complete(deepseek_spec(deepseek_server), LlmRequest("You are Neta.", messages, [GREP_TOOL], thinking_level="off"))
    body = deepseek_server.requests[0].body
    assert body["thinking"] == {"type": "disabled"}
    assert body["max_tokens"] == 8192 and "max_completion_tokens" not in body and "store" not in body
    assert "strict" not in body["tools"][0]["function"]
    assert body["messages"][0] == {"role": "system", "content": "You are Neta."}
    # no images for this model
    assert body["messages"][1]["content"][1] == {"type": "text", "text": "(image omitted: model does not support images)"}
    assistant = body["messages"][2]
    assert assistant["content"] == REASONING["thinking"] + "Searching."
    assert assistant["reasoning_content"] == ""  # DeepSeek wants the field on every assistant message
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool", "user"]


def test_reasoning_effort_per_level_and_off():
    model = ModelSpec("openai", "o-test", "openai", supports_thinking=True)
    for level, effort in [("minimal", "minimal"), ("low", "low"), ("medium", "medium"), ("high", "high"), ("xhigh", "high")]:
        params, extra = build_params(model, LlmRequest("", [user("x")], [], thinking_level=level))
        assert params["reasoning_effort"] == effort and extra == {}
    params, _ = build_params(model, LlmRequest("", [user("x")], [], thinking_level="off"))
    assert "reasoning_effort" not in params
    params, _ = build_params(model, LlmRequest("", [user("x")], [], thinking_level="high", reasoning=False))
    assert "reasoning_effort" not in params
    plain = ModelSpec("openai", "gpt-test", "openai", supports_thinking=False)
    params, _ = build_params(plain, LlmRequest("sys", [user("x")], [], thinking_level="high"))
    assert "reasoning_effort" not in params and params["messages"][0]["role"] == "system"


# -- the key proof: same content, same message ---------------------------------------------------


def test_scripted_and_openai_produce_equal_messages(openai_server):
    rules = {
        "default": {
            "reply": [
                {"text": "Let me search.\n\n```sh\ngrep -r TODO .\n```"},
                {"tool_call": {"name": "ls", "arguments": {"path": "src"}, "id": "call_aaa111"}},
                {"tool_call": {"name": "grep", "arguments": {"pattern": "TODO", "path": ".", "ignore_case": True}, "id": "call_bbb222"}},
            ]
        }
    }
    request = LlmRequest("You are Neta.", [user("find todos")], [GREP_TOOL])
    expected = complete(ModelSpec("scripted", "demo", "scripted", prices=PRICES, options={"rules": rules}), request)
    openai_server.script(Reply.of(expected, chunk=7))
    actual = complete(openai_spec(openai_server), request)
    assert comparable(actual) == comparable(expected)


def test_scripted_and_deepseek_produce_equal_messages(deepseek_server):
    rules = {
        "default": {
            "reply": [
                {"thinking": "The user wants the todo list; one grep will do.", "signature": "reasoning_content"},
                {"text": "Searching for TODO markers."},
                {"tool_call": {"name": "grep", "arguments": {"pattern": "TODO"}, "id": "call_ds_1"}},
            ]
        }
    }
    request = LlmRequest("You are Neta.", [user("find todos")], [GREP_TOOL], thinking_level="medium")
    expected = complete(ModelSpec("scripted", "demo", "scripted", prices=PRICES, options={"rules": rules}), request)
    deepseek_server.script(Reply.of(expected, chunk=5))
    actual = complete(deepseek_spec(deepseek_server), request)
    assert comparable(actual) == comparable(expected)


def test_the_session_id_is_openais_prompt_cache_key_and_no_one_elses(openai_server, deepseek_server):
    """As Pi sends it: the calls of one session share OpenAI's prompt cache routing; an
    OpenAI-style endpoint of someone else gets no such field."""
    openai_server.script(Reply([{"type": "text", "text": "ok"}]))
    deepseek_server.script(Reply([{"type": "text", "text": "ok"}]))
    complete(openai_spec(openai_server), LlmRequest("", [user("hi")], session_id="session-42"))
    complete(deepseek_spec(deepseek_server), LlmRequest("", [user("hi")], session_id="session-42"))
    assert openai_server.requests[0].body["prompt_cache_key"] == "session-42"
    assert "prompt_cache_key" not in deepseek_server.requests[0].body


def test_a_stream_without_usage_gets_an_estimate_marked_as_such(openai_server):
    """An endpoint that sends no usage chunk: the call's usage is estimated (four characters a
    token, priced) and says ``estimated``, instead of zeros that cost nothing and never compact."""
    answer = "An answer of some length, " * 8
    openai_server.script(Reply([{"type": "text", "text": answer}], usage=None), Reply([{"type": "text", "text": answer}]))
    request = LlmRequest("You are terse.", [user("x" * 400)])
    message = complete(openai_spec(openai_server), request)
    usage = message["usage"]
    assert usage["estimated"] is True and message["stopReason"] == "stop"
    assert usage["output"] == -(-len(answer) // 4) and usage["input"] >= 100
    assert usage["totalTokens"] == usage["input"] + usage["output"] and usage["cost"]["total"] > 0
    reported = complete(openai_spec(openai_server), request)["usage"]  # a usage chunk: taken as it is, not marked
    assert "estimated" not in reported and (reported["input"], reported["output"]) == (10, 5)


# -- the decoder --------------------------------------------------------------------------------


def test_the_decoder_reads_the_sdks_chunk_models_as_it_reads_their_json():
    """The stream hands the decoder each chunk's JSON; an SDK that cannot hands its models,
    and the message built is the same (reasoning fields of other endpoints, tool calls by
    index and id, cached tokens included)."""
    from openai.types.chat import ChatCompletionChunk  # the SDK's own chunk type, for this test only

    def chunk(delta: dict | None = None, finish=None, usage=None, choices=True) -> dict:
        out = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}
        if choices:
            out["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
        if usage is not None:
            out["usage"] = usage
        return out

    chunks = [
        chunk({"role": "assistant", "reasoning_content": "Think"}),
        chunk({"reasoning_content": "ing."}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"pa'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "."}'}}]}),
        chunk({}, finish="tool_calls"),
        chunk(choices=False, usage={"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57, "prompt_tokens_details": {"cached_tokens": 20}}),
    ]
    built = []
    for convert in (lambda c: c, ChatCompletionChunk.model_validate):
        builder = AssistantBuilder(api="openai-completions", provider="p", model="m", prices={}, timestamp=1)
        decoder = Decoder(builder)
        steps = [step.type for c in chunks for step in decoder.feed(convert(c))]
        steps += [step.type for step in decoder.close_blocks()]
        built.append((steps, decoder.finish(), builder.message))
    assert built[0] == built[1]
    steps, stop, message = built[0]
    assert stop == "toolUse" and steps[0] == "thinking_start"
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "toolCall"]
    assert message["content"][0]["thinking"] == "Thinking." and message["content"][1]["text"] == "Hello"
    assert message["content"][2]["id"] == "call_1" and message["content"][2]["arguments"] == {"path": "."}
    assert (message["usage"]["input"], message["usage"]["cacheRead"], message["usage"]["output"]) == (30, 20, 7)
    assert message["responseId"] == "chatcmpl-1"
