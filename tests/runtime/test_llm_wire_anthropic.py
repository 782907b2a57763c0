"""The anthropic provider: the official SDK against a local server speaking Messages SSE."""

from __future__ import annotations

import threading

import pytest

from runtime.llm import LlmRequest, ModelSpec, complete, stream
from runtime.llm.anthropic_messages import Decoder, build_params
from runtime.llm.assistant import AssistantBuilder
from tests.support.wire_servers import (
    Reply,
    Status,
    anthropic_events,
    ask,
    comparable,
    serve,
    terminal_events,
    user,
    wire_spec,
)

PRICES = {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}
server, clean = serve("anthropic")
ANTHROPIC = {
    "provider_kind": "anthropic",
    "model_id": "claude-test-1",
    "provider_name": "anthropic",
    "api_key": "sk-ant-test",
    "supports_thinking": True,
    "supports_images": True,
    "max_output_tokens": 64000,
    "prices": PRICES,
}


def spec(server, **overrides) -> ModelSpec:
    return wire_spec(server, ANTHROPIC, overrides)


THINKING = {"type": "thinking", "thinking": "The user greets me; answer briefly.", "thinkingSignature": "EqQBsig=="}
REDACTED = {"type": "thinking", "thinking": "[Reasoning redacted]", "thinkingSignature": "opaque-redacted", "redacted": True}
TEXT = {"type": "text", "text": "Hello! How can I help you today?"}
CALL_1 = {"type": "toolCall", "id": "toolu_01A", "name": "ls", "arguments": {"path": ".", "limit": 20}}
CALL_2 = {"type": "toolCall", "id": "toolu_01B", "name": "read", "arguments": {"path": "README.md"}}


# -- streamed content ---------------------------------------------------------------------------


def test_text_reply_events_and_message(server):
    server.script(Reply([TEXT], usage={"input": 12, "output": 9, "cacheRead": 0, "cacheWrite": 0}))
    events = list(stream(spec(server), ask()))
    types = [e.type for e in events]
    assert types[:2] == ["start", "text_start"]
    assert types[-2:] == ["text_end", "done"]
    assert "".join(e.delta for e in events if e.type == "text_delta") == TEXT["text"]
    message = events[-1].message
    assert list(message) == ["role", "content", "api", "provider", "model", "usage", "stopReason", "timestamp", "responseId"]
    assert message["content"] == [TEXT]
    assert (message["api"], message["provider"], message["model"]) == ("anthropic-messages", "anthropic", "claude-test-1")
    assert message["stopReason"] == "stop"
    assert message["responseId"] == "msg_wire_0001"
    assert len(terminal_events(events)) == 1


def test_thinking_signature_and_redacted_thinking(server):
    server.script(Reply([THINKING, REDACTED, TEXT]))
    message = complete(spec(server), ask(thinking_level="high"))
    assert message["content"] == [THINKING, REDACTED, TEXT]


def test_several_tool_calls_stop_with_tool_use(server):
    server.script(Reply([TEXT, CALL_1, CALL_2], stop_reason="toolUse", chunk=3))
    events = list(stream(spec(server), ask()))
    message = events[-1].message
    assert message["content"] == [TEXT, CALL_1, CALL_2]
    assert message["stopReason"] == "toolUse"
    ends = [e for e in events if e.type == "toolcall_end"]
    assert [e.content_index for e in ends] == [1, 2]
    deltas = "".join(e.delta for e in events if e.type == "toolcall_delta" and e.content_index == 1)
    assert deltas == '{"path":".","limit":20}'


def test_max_tokens_becomes_length(server):
    server.script(Reply([{"type": "text", "text": "cut sh"}], stop_reason="length"))
    assert complete(spec(server), ask())["stopReason"] == "length"


def test_usage_with_cache_tokens_and_cost(server):
    server.script(Reply([TEXT], usage={"input": 1200, "output": 340, "cacheRead": 5000, "cacheWrite": 800}))
    usage = complete(spec(server), ask())["usage"]
    assert {k: usage[k] for k in ("input", "output", "cacheRead", "cacheWrite", "totalTokens")} == {
        "input": 1200,
        "output": 340,
        "cacheRead": 5000,
        "cacheWrite": 800,
        "totalTokens": 7340,
    }
    assert usage["cost"] == {
        "input": (3 / 1000000) * 1200,
        "output": (15 / 1000000) * 340,
        "cacheRead": (0.3 / 1000000) * 5000,
        "cacheWrite": (3.75 / 1000000) * 800,
        "total": (3 / 1000000) * 1200 + (15 / 1000000) * 340 + (0.3 / 1000000) * 5000 + (3.75 / 1000000) * 800,
    }


# -- retries ------------------------------------------------------------------------------------


def test_429_retry_after_is_honoured(server):
    server.script(Status(429, "Number of requests has exceeded your rate limit", headers={"retry-after": "1"}), Reply([TEXT]))
    message = complete(spec(server), ask())
    assert message["content"] == [TEXT] and message["stopReason"] == "stop"
    first, second = server.requests
    # The backoff alone would be ~10 ms; the server asked for a second.
    assert second.at - first.at >= 0.9


def test_overloaded_and_server_errors_are_retried(server):
    server.script(Status(529, "Overloaded"), Status(500, "Internal server error"), Status(503, "unavailable"), Reply([TEXT]))
    message = complete(spec(server), ask())
    assert message["stopReason"] == "stop"
    assert len(server.requests) == 4


def test_attempts_are_bounded(server):
    server.script(*[Status(500, "Internal server error")] * 5)
    message = complete(spec(server, options={"max_retries": 2}), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "500 api_error: Internal server error"
    assert message["content"] == []
    assert len(server.requests) == 3


def test_a_retry_after_beyond_the_limit_is_not_waited_for(server):
    server.script(Status(429, "slow down", headers={"retry-after": "3600"}))
    message = complete(spec(server), ask())
    assert message["errorMessage"] == "429 rate_limit_error: slow down"
    assert len(server.requests) == 1


def test_client_errors_are_not_retried_and_keep_the_provider_message(server):
    server.script(Status(400, "prompt is too long: 213462 tokens > 200000 maximum"))
    message = complete(spec(server), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "400 invalid_request_error: prompt is too long: 213462 tokens > 200000 maximum"
    assert len(server.requests) == 1


def test_dropped_connection_before_output_is_retried(server):
    server.script(Reply([TEXT], cut_after=2), Reply([TEXT]))  # cut after message_start + ping
    message = complete(spec(server), ask())
    assert message["content"] == [TEXT] and message["stopReason"] == "stop"
    assert len(server.requests) == 2


def test_error_event_before_output_is_retried(server):
    server.script(Reply([TEXT], error_after=1), Reply([TEXT]))
    message = complete(spec(server), ask())
    assert message["stopReason"] == "stop"
    assert len(server.requests) == 2


def test_no_retry_once_output_started_dropped_connection(server):
    # message_start, ping, content_block_start, 2 deltas ("Hello", "! How"), then the socket closes.
    server.script(Reply([TEXT], cut_after=5), Reply([TEXT]))
    events = list(stream(spec(server), ask()))
    message = events[-1].message
    assert events[-1].type == "error" and len(terminal_events(events)) == 1
    assert message["stopReason"] == "error"
    assert message["errorMessage"].startswith("Connection error:")
    assert message["content"] == [{"type": "text", "text": "Hello! How"}]
    assert len(server.requests) == 1


def test_error_event_mid_stream_ends_with_the_message(server):
    server.script(Reply([TEXT], error_after=4, error=("overloaded_error", "Overloaded")), Reply([TEXT]))
    message = complete(spec(server), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "overloaded_error: Overloaded"
    assert message["content"] == [{"type": "text", "text": "Hello"}]
    assert len(server.requests) == 1


def test_stream_ending_before_message_stop_is_an_error(server):
    reply = Reply([TEXT])
    reply.end_after = len(anthropic_events(reply, "m")) - 2  # no message_delta, no message_stop
    server.script(reply, Reply([TEXT]))
    message = complete(spec(server), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "Anthropic stream ended before message_stop"
    assert message["content"] == [TEXT]
    assert len(server.requests) == 1


# -- cancel -------------------------------------------------------------------------------------


def test_cancel_mid_stream_is_aborted_with_partial_content(server):
    reply = Reply([THINKING, TEXT])
    frames = [data for _, data in anthropic_events(reply, "m")]
    text_deltas = [i for i, d in enumerate(frames) if d.get("delta", {}).get("type") == "text_delta"]
    reply.hold_after = text_deltas[2]  # two text deltas go out, then the server goes silent
    server.script(reply)
    cancel = threading.Event()
    events = []
    for event in stream(spec(server), ask(), cancel=cancel):
        events.append(event)
        if event.type == "text_delta":
            threading.Timer(0.1, cancel.set).start()
    reply.release.set()
    message = events[-1].message
    assert events[-1].type == "error"
    assert message["stopReason"] == "aborted"
    assert message["errorMessage"] == "Request was aborted"
    assert message["content"][0] == THINKING
    assert message["content"][1] == {"type": "text", "text": "Hello! How"}


def test_cancel_while_waiting_for_the_response(server):
    reply = Reply([TEXT], hold_headers=True)
    server.script(reply)
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    message = complete(spec(server), ask(), cancel=cancel)
    reply.release.set()
    assert message["stopReason"] == "aborted"
    assert message["content"] == []


# -- the request the SDK sent -------------------------------------------------------------------

PNG = "iVBORw0KGgo="
LS_TOOL = {
    "name": "ls",
    "description": "List a directory",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": False},
}


def transcript(model_id: str = "claude-test-1") -> list[dict]:
    """A Pi LLM transcript: user with image, assistant with thinking + tool calls, results."""
    own = {"api": "anthropic-messages", "provider": "anthropic", "model": model_id}
    return [
        {
            "role": "user",
            "content": [{"type": "text", "text": "What is this?"}, {"type": "image", "data": PNG, "mimeType": "image/png"}],
            "timestamp": 1,
        },
        {
            "role": "assistant",
            "content": [THINKING, REDACTED, {"type": "text", "text": "Let me look."}, CALL_1, CALL_2],
            **own,
            "usage": {},
            "stopReason": "toolUse",
            "timestamp": 2,
        },
        {
            "role": "toolResult",
            "toolCallId": "toolu_01A",
            "toolName": "ls",
            "content": [{"type": "text", "text": "README.md\nsrc/"}],
            "isError": False,
            "timestamp": 3,
        },
        {
            "role": "toolResult",
            "toolCallId": "toolu_01B",
            "toolName": "read",
            "content": [{"type": "text", "text": "screenshot:"}, {"type": "image", "data": PNG, "mimeType": "image/png"}],
            "isError": True,
            "timestamp": 4,
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "half an ans"}],
            **own,
            "usage": {},
            "stopReason": "aborted",
            "timestamp": 5,
        },
        {"role": "user", "content": "Go on.", "timestamp": 6},
    ]


def test_request_shape(server):
    server.script(Reply([TEXT]))
    request = LlmRequest(system_prompt="You are Neta.", messages=transcript(), tools=[LS_TOOL], thinking_level="low")
    complete(spec(server), request)
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    # The key travels as x-api-key or as a bearer token, depending on the SDK version.
    assert "sk-ant-test" in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "").removeprefix("Bearer "))
    assert "anthropic-version" in sent.headers
    assert sent.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"  # budget thinking is on
    body = sent.body
    assert body["model"] == "claude-test-1"
    assert body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "You are Neta.", "cache_control": {"type": "ephemeral"}}]
    assert body["tools"] == [
        {
            "name": "ls",
            "description": "List a directory",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": False},
            "cache_control": {"type": "ephemeral"},
        }
    ]
    # low: budget 2048 on top of min(64000, 32000).
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048, "display": "summarized"}
    assert body["max_tokens"] == 32000 + 2048
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": THINKING["thinking"], "signature": "EqQBsig=="},
                {"type": "redacted_thinking", "data": "opaque-redacted"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_01A", "name": "ls", "input": {"path": ".", "limit": 20}},
                {"type": "tool_use", "id": "toolu_01B", "name": "read", "input": {"path": "README.md"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "README.md\nsrc/", "is_error": False},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B",
                    "content": [{"type": "text", "text": "screenshot:"}, image],
                    "is_error": True,
                },
            ],
        },
        # The aborted assistant message is not replayed.
        {"role": "user", "content": [{"type": "text", "text": "Go on.", "cache_control": {"type": "ephemeral"}}]},
    ]


def test_thinking_from_another_model_becomes_text_and_images_can_be_refused(server):
    server.script(Reply([TEXT]))
    messages = transcript(model_id="claude-3-7-sonnet")
    complete(spec(server, supports_images=False, options={"cache": "none"}), LlmRequest("", messages, []))
    body = server.requests[0].body
    assert "anthropic-beta" not in server.requests[0].headers  # thinking is off
    assert "system" not in body and "tools" not in body
    assert body["messages"][0]["content"][1] == {"type": "text", "text": "(image omitted: model does not support images)"}
    assert body["messages"][1]["content"][:2] == [
        {"type": "text", "text": THINKING["thinking"]},  # no signature for another model; redacted dropped
        {"type": "text", "text": "Let me look."},
    ]
    assert body["messages"][2]["content"][1]["content"] == "screenshot:\n(tool image omitted: model does not support images)"
    assert body["thinking"] == {"type": "disabled"}


def test_a_tool_call_without_result_gets_a_synthetic_error_result(server):
    server.script(Reply([TEXT]))
    messages = transcript()[:2] + [{"role": "user", "content": "never mind", "timestamp": 9}]
    complete(spec(server), LlmRequest("", messages, []))
    results = server.requests[0].body["messages"][2]["content"]
    assert [(r["tool_use_id"], r["content"], r["is_error"]) for r in results] == [
        ("toolu_01A", "No result provided", True),
        ("toolu_01B", "No result provided", True),
    ]


@pytest.mark.parametrize(
    ("level", "budget", "max_tokens"),
    [("minimal", 1024, 33024), ("low", 2048, 34048), ("medium", 8192, 40192), ("high", 16384, 48384), ("xhigh", 16384, 48384)],
)
def test_thinking_budget_per_level(level, budget, max_tokens):
    model = ModelSpec("anthropic", "claude-test-1", "anthropic", supports_thinking=True, max_output_tokens=64000)
    params = build_params(model, LlmRequest("", [user("x")], [], thinking_level=level))
    assert params["thinking"] == {"type": "enabled", "budget_tokens": budget, "display": "summarized"}
    assert params["max_tokens"] == max_tokens


def test_thinking_budget_shrinks_when_output_is_small_and_can_be_forced_off():
    model = ModelSpec("anthropic", "claude-haiku", "anthropic", supports_thinking=True, max_output_tokens=8192)
    params = build_params(model, LlmRequest("", [user("x")], [], thinking_level="high"))
    assert params["max_tokens"] == 8192
    assert params["thinking"]["budget_tokens"] == 8192 - 1024
    off = build_params(model, LlmRequest("", [user("x")], [], thinking_level="high", reasoning=False))
    assert off["thinking"] == {"type": "disabled"} and off["max_tokens"] == 8192
    no_thinking = ModelSpec("anthropic", "claude-haiku", "anthropic", supports_thinking=False)
    assert "thinking" not in build_params(no_thinking, LlmRequest("", [user("x")], [], thinking_level="high"))


def test_adaptive_thinking_models_get_an_effort():
    model = ModelSpec("anthropic", "claude-opus-4-6", "anthropic", supports_thinking=True, max_output_tokens=64000)
    params = build_params(model, LlmRequest("", [user("x")], [], thinking_level="minimal"))
    assert params["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert params["output_config"] == {"effort": "low"}
    assert params["max_tokens"] == 32000


def test_missing_key_is_an_error_message(server):
    message = complete(spec(server, api_key=None), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "No API key for provider: anthropic"
    assert server.requests == []


# -- the key proof: same content, same message ---------------------------------------------------


@pytest.mark.parametrize("stop_reason", ["toolUse", "length"])
def test_scripted_and_anthropic_produce_equal_messages(server, stop_reason):
    rules = {
        "default": {
            "reply": {
                "steps": [
                    {"thinking": THINKING["thinking"], "signature": THINKING["thinkingSignature"]},
                    {"thinking": "[Reasoning redacted]", "signature": "opaque-redacted", "redacted": True},
                    {"text": "I will look at two things.\n\n- the tree\n- the readme"},
                    {"tool_call": {"name": "ls", "arguments": {"path": ".", "limit": 20}, "id": "toolu_01A"}},
                    {"tool_call": {"name": "read", "arguments": {"path": "README.md", "offset": 1}, "id": "toolu_01B"}},
                ],
                "stop_reason": stop_reason,
            }
        }
    }
    scripted = ModelSpec("scripted", "demo", "scripted", prices=PRICES, options={"rules": rules})
    request = LlmRequest("You are Neta.", [user("look around")], [LS_TOOL], thinking_level="medium")
    expected = complete(scripted, request)
    assert expected["usage"]["cost"]["total"] > 0

    server.script(Reply.of(expected, chunk=4))
    actual = complete(spec(server), request)
    assert comparable(actual) == comparable(expected)
    assert actual["api"] == "anthropic-messages" and actual["responseId"] == "msg_wire_0001"


def test_one_hour_cache_writes_are_billed_at_their_own_price(server):
    """Anthropic bills a 1-hour cache write (cache "long") at twice the input price, a
    5-minute one at the model's cache-write price: the cost follows the split the usage
    reports (``cache_creation``), and the usage keeps how many were 1-hour writes."""
    prices = {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75, "cacheWrite1h": 6}
    usage = {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 3000, "cacheWrite1h": 2000}
    server.script(Reply([{"type": "text", "text": "ok"}], usage=usage))
    message = complete(spec(server, prices=prices, options={"cache": "long"}), ask("hi"))
    got = message["usage"]
    assert (got["cacheWrite"], got["cacheWrite1h"]) == (3000, 2000)
    assert got["cost"]["cacheWrite"] == pytest.approx(1000 * 3.75 / 1e6 + 2000 * 6 / 1e6)
    assert got["cost"]["total"] == pytest.approx(100 * 3 / 1e6 + 10 * 15 / 1e6 + got["cost"]["cacheWrite"])
    assert server.requests[0].body["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    # Without the split, every write is priced as a 5-minute one (Pi's arithmetic).
    server.script(Reply([{"type": "text", "text": "ok"}], usage={"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 3000}))
    plain = complete(spec(server, prices=prices), ask("hi"))["usage"]
    assert "cacheWrite1h" not in plain and plain["cost"]["cacheWrite"] == pytest.approx(3000 * 3.75 / 1e6)


# -- the decoder --------------------------------------------------------------------------------


def test_the_decoder_reads_the_sdks_event_models_as_it_reads_their_json():
    """The stream hands the decoder each event's JSON; an SDK that cannot hands its models,
    and the message built is the same."""
    import pydantic  # the SDK's own event types, for this test only
    from anthropic.types import RawMessageStreamEvent  # as above

    usage = {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 2, "cache_creation_input_tokens": 4,
             "cache_creation": {"ephemeral_1h_input_tokens": 3, "ephemeral_5m_input_tokens": 1}}  # fmt: skip
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
                                              "stop_reason": None, "stop_sequence": None, "usage": usage}},  # fmt: skip
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "Hel"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"path": "."}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    models = pydantic.TypeAdapter(RawMessageStreamEvent)
    built = []
    for convert in (lambda event: event, models.validate_python):
        builder = AssistantBuilder(api="anthropic-messages", provider="p", model="m", prices={}, timestamp=1)
        decoder = Decoder(builder)
        steps = [step.type for event in events for step in decoder.feed(convert(event))]
        built.append((steps, decoder.finish(), builder.message))
    assert built[0] == built[1]
    steps, stop, message = built[0]
    assert stop == "toolUse"
    assert steps[:3] == ["thinking_start", "thinking_delta", "thinking_end"]
    assert message["content"][1] == {"type": "text", "text": "Hello"}
    assert message["content"][2]["arguments"] == {"path": "."}
    assert message["responseId"] == "msg_1"
    assert message["usage"]["output"] == 9
