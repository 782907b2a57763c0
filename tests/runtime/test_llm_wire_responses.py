"""The openai-responses provider: the official SDK against a local server speaking the
Responses API's server-sent events (reasoning summaries, messages, function calls)."""

from __future__ import annotations

import json
import threading

import pytest

from runtime.llm import LlmRequest, ModelSpec, complete, stream
from runtime.llm.openai_responses import build_params
from tests.support.wire_servers import (
    FAST_RETRY,
    Reply,
    Status,
    ask,
    responses_events,
    serve,
    terminal_events,
    user,
    wire_spec,
)

PRICES = {"input": 1.1, "output": 4.4, "cacheRead": 0.275}
server, clean = serve("openai-responses")

REASONING = {"type": "thinking", "thinking": "The user wants a plan.\n\nTwo files to read first."}
TEXT = {"type": "text", "text": "Sure, here is the plan."}
CALL_1 = {"type": "toolCall", "id": "call_aaa111|fc_aaa111", "name": "ls", "arguments": {"path": "src"}}
CALL_2 = {"type": "toolCall", "id": "call_bbb222|fc_bbb222", "name": "grep", "arguments": {"pattern": "TODO", "path": "."}}
RESPONSES = {
    "provider_kind": "openai-responses",
    "model_id": "o-test",
    "provider_name": "openai",
    "api_key": "sk-openai-test",
    "supports_thinking": True,
    "supports_images": True,
    "prices": PRICES,
}


def spec(server, **overrides) -> ModelSpec:
    return wire_spec(server, RESPONSES, overrides)


def reasoning_item(index: int, text: str) -> dict:
    return {"type": "reasoning", "id": f"rs_{index:04d}", "summary": [{"type": "summary_text", "text": p} for p in text.split("\n\n")], "encrypted_content": f"enc-{index}"}


# -- streamed content ---------------------------------------------------------------------------


def test_reasoning_text_and_function_calls(server):
    server.script(Reply([REASONING, TEXT, CALL_1, CALL_2], stop_reason="toolUse", chunk=4))
    events = list(stream(spec(server), ask(thinking_level="high")))
    message = events[-1].message
    thinking, text, call_1, call_2 = message["content"]
    assert thinking["thinking"] == REASONING["thinking"]  # summary parts joined by a blank line
    assert json.loads(thinking["thinkingSignature"]) == reasoning_item(0, REASONING["thinking"])  # the whole item, to send back
    assert text == {**TEXT, "textSignature": '{"v":1,"id":"msg_0001"}'}  # as Pi writes it
    assert (call_1, call_2) == (CALL_1, CALL_2)  # "<call_id>|<item id>"
    assert message["stopReason"] == "toolUse"
    assert (message["api"], message["provider"], message["model"], message["responseId"]) == ("openai-responses", "openai", "o-test", "msg_wire_0001")
    types = [e.type for e in events]
    assert types[0] == "start" and types[-1] == "done" and len(terminal_events(events)) == 1
    # Each block ends with its output item, in order.
    ends = [t for t in types if t.endswith("_end")]
    assert ends == ["thinking_end", "text_end", "toolcall_end", "toolcall_end"]
    assert types.index("thinking_end") < types.index("text_start")
    assert "".join(e.delta for e in events if e.type == "thinking_delta") == REASONING["thinking"]
    assert "".join(e.delta for e in events if e.type == "toolcall_delta" and e.content_index == 3) == '{"pattern":"TODO","path":"."}'


def test_incomplete_at_max_tokens_is_length_and_usage_counts_cached_tokens(server):
    server.script(Reply([TEXT], stop_reason="length", usage={"input": 900, "output": 120, "cacheRead": 100, "cacheWrite": 0}))
    message = complete(spec(server), ask())
    assert message["stopReason"] == "length"
    usage = message["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"], usage["totalTokens"]) == (900, 120, 100, 0, 1120)
    assert usage["cost"]["total"] == pytest.approx((1.1 * 900 + 4.4 * 120 + 0.275 * 100) / 1e6)


def test_plain_answer_stops(server):
    server.script(Reply([TEXT]))
    message = complete(spec(server, supports_thinking=False), ask())
    assert message["stopReason"] == "stop" and message["content"] == [{**TEXT, "textSignature": '{"v":1,"id":"msg_0000"}'}]


# -- retries and errors -------------------------------------------------------------------------


def test_429_then_success(server):
    server.script(Status(429, "Rate limit reached", headers={"retry-after-ms": "200"}), Reply([TEXT]))
    message = complete(spec(server), ask())
    assert message["stopReason"] == "stop"
    first, second = server.requests
    assert second.at - first.at >= 0.19


def test_error_event_mid_stream_keeps_what_came(server):
    reply = Reply([TEXT, CALL_1], chunk=4, error=("invalid_request_error", "Content blocked by policy"))
    reply.error_after = 6  # created, in_progress, item added, part added, "Sure", ", he"
    server.script(reply)
    message = complete(spec(server), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "invalid_request_error: Content blocked by policy"
    assert message["content"] == [{"type": "text", "text": "Sure, he"}]
    assert len(server.requests) == 1


def test_server_error_before_output_is_retried(server):
    server.script(Reply([TEXT], error_after=2, error=("server_error", "The server is overloaded")), Reply([TEXT]))
    assert complete(spec(server), ask())["stopReason"] == "stop"
    assert len(server.requests) == 2


def test_stream_without_completion_is_an_error(server):
    reply = Reply([TEXT])
    reply.end_after = len(responses_events(reply, "m")) - 1  # everything but response.completed
    server.script(reply)
    message = complete(spec(server), ask())
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "Stream ended before the response completed"
    assert message["content"] == [{**TEXT, "textSignature": '{"v":1,"id":"msg_0000"}'}]


def test_cancel_mid_stream(server):
    reply = Reply([TEXT, CALL_1], chunk=3, hold_after=6)
    server.script(reply)
    cancel = threading.Event()
    events = []
    for event in stream(spec(server), ask(), cancel=cancel):
        events.append(event)
        if len(events) == 3:
            threading.Timer(0.05, cancel.set).start()
    reply.release.set()
    message = events[-1].message
    assert message["stopReason"] == "aborted" and message["errorMessage"] == "Request was aborted"
    assert message["content"] == [{"type": "text", "text": "Sure, "}]
    assert len(terminal_events(events)) == 1


def test_missing_key(server):
    assert complete(spec(server, api_key=None), ask())["errorMessage"] == "No API key for provider: openai"
    assert server.requests == []


# -- the request the SDK sent -------------------------------------------------------------------

PNG = "iVBORw0KGgo="
GREP_TOOL = {
    "name": "grep",
    "description": "Search files",
    "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]},
}


def test_a_second_turn_sends_the_first_back_as_items(server):
    server.script(Reply([REASONING, TEXT, CALL_1], stop_reason="toolUse"), Reply([TEXT]))
    model = spec(server)
    first = complete(model, ask("look", thinking_level="xhigh"))
    history = [
        {"role": "user", "content": [{"type": "text", "text": "Look"}, {"type": "image", "data": PNG, "mimeType": "image/png"}], "timestamp": 1},
        first,
        {
            "role": "toolResult",
            "toolCallId": CALL_1["id"],
            "toolName": "ls",
            "content": [{"type": "text", "text": "a.py"}, {"type": "image", "data": PNG, "mimeType": "image/png"}],
            "isError": False,
            "timestamp": 3,
        },
        {"role": "user", "content": "continue", "timestamp": 5},
    ]
    complete(model, LlmRequest("You are Neta.", history, [GREP_TOOL], thinking_level="xhigh"))
    sent = server.requests[1]
    assert sent.path == "/v1/responses" and sent.headers["authorization"] == "Bearer sk-openai-test"
    body = sent.body
    assert body["stream"] is True and body["store"] is False and body["max_output_tokens"] == 8192
    assert body["instructions"] == "You are Neta."
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}  # xhigh is clamped
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["tools"] == [{"type": "function", "name": "grep", "description": "Search files", "parameters": GREP_TOOL["parameters"], "strict": False}]
    image = {"type": "input_image", "detail": "auto", "image_url": f"data:image/png;base64,{PNG}"}
    assert body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "Look"}, image]},
        reasoning_item(0, REASONING["thinking"]),  # as received, with its encrypted content
        {"type": "message", "role": "assistant", "status": "completed", "id": "msg_0001", "content": [{"type": "output_text", "text": TEXT["text"], "annotations": []}]},
        {"type": "function_call", "call_id": "call_aaa111", "name": "ls", "arguments": '{"path":"src"}', "id": "fc_aaa111"},
        {"type": "function_call_output", "call_id": "call_aaa111", "output": "a.py"},
        {"role": "user", "content": [{"type": "input_text", "text": "Attached image(s) from tool result:"}, image]},
        {"role": "user", "content": [{"type": "input_text", "text": "continue"}]},
    ]


def test_the_text_phase_is_kept_as_pi_writes_it_and_sent_back(server):
    server.script(Reply([TEXT], text_phase="final_answer"), Reply([TEXT]))
    model = spec(server)
    first = complete(model, ask("look"))
    assert first["content"][0]["textSignature"] == '{"v":1,"id":"msg_0000","phase":"final_answer"}'
    legacy = {**first, "content": [{**TEXT, "textSignature": "msg_0000"}]}  # a bare id, as older files hold
    complete(model, LlmRequest("", [user("look"), first, user("again"), legacy, user("more")], session_id="session-42"))
    body = server.requests[1].body
    sent = [item for item in body["input"] if item.get("type") == "message"]
    assert [(item["id"], item.get("phase")) for item in sent] == [("msg_0000", "final_answer"), ("msg_0000", None)]
    assert body["prompt_cache_key"] == "session-42"  # the session's id, as Pi sends it
    assert "prompt_cache_key" not in server.requests[0].body  # no session: no key


def test_history_from_another_model_is_sent_as_plain_items():
    other = {"api": "anthropic-messages", "provider": "anthropic", "model": "claude", "usage": {}, "timestamp": 2, "stopReason": "toolUse"}
    messages = [
        user("go"),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Claude's own reasoning.", "thinkingSignature": "sig-anthropic"},
                {"type": "toolCall", "id": "toolu_01ABC", "name": "ls", "arguments": {}},
            ],
            **other,
        },
        {"role": "toolResult", "toolCallId": "toolu_01ABC", "toolName": "ls", "content": [{"type": "text", "text": "x"}], "isError": False, "timestamp": 3},
    ]
    params = build_params(ModelSpec("openai-responses", "o-test", "openai", supports_thinking=True), LlmRequest("", messages, [], thinking_level="off"))
    assert params["input"][1:] == [
        {"type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Claude's own reasoning.", "annotations": []}]},
        {"type": "function_call", "call_id": "toolu_01ABC", "name": "ls", "arguments": "{}"},  # no item id: not ours
        {"type": "function_call_output", "call_id": "toolu_01ABC", "output": "x"},
    ]
    assert "reasoning" not in params and "include" not in params and "instructions" not in params


def test_reasoning_effort_per_level():
    model = ModelSpec("openai-responses", "o-test", "openai", supports_thinking=True)
    for level, effort in [("minimal", "minimal"), ("low", "low"), ("medium", "medium"), ("high", "high"), ("xhigh", "high")]:
        assert build_params(model, LlmRequest("", [user("x")], [], thinking_level=level))["reasoning"] == {"effort": effort, "summary": "auto"}
    plain = ModelSpec("openai-responses", "gpt-test", "openai", supports_thinking=False)
    assert "reasoning" not in build_params(plain, LlmRequest("", [user("x")], [], thinking_level="high"))


# -- a whole turn through the runtime -------------------------------------------------------------


@pytest.mark.django_db
def test_a_turn_over_the_responses_api_runs_tools_and_replays_its_reasoning(server, workspace, monkeypatch):
    from runtime.models import Agent, ModelConfig
    from runtime.runs.prompts import session_prompt
    from runtime.runs.turn import execute_run
    from runtime.sessions.services import session_start
    from sessions_tree.providers import get_provider

    (workspace / "notes.md").write_text("# notes\n")
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-turn-test")
    model = ModelConfig.objects.create(
        name="o-wire", provider_kind="openai-responses", provider_name="openai", model_id="o-test",
        base_url=server.base_url, api_key_env="TEST_OPENAI_KEY", supports_thinking=True, options=FAST_RETRY,
    )
    agent = Agent.objects.create(name="responder", model=model, cwd=str(workspace), workspace_mode="shared", thinking_level="medium")
    call = {"type": "toolCall", "id": "call_ls0001|fc_ls0001", "name": "ls", "arguments": {"path": "."}}
    server.script(
        Reply([REASONING, call], stop_reason="toolUse"),
        Reply([{"type": "text", "text": "You have notes.md."}]),
        Reply([{"type": "text", "text": "Still just notes.md."}]),
    )
    session_id = session_start(agent=agent).session_id
    for text in ("what is here?", "and now?"):
        run = session_prompt(actor=None, session_id=session_id, text=text, dispatch=False).run
        assert execute_run(run.run_id).status == "completed"
    stored = [e["message"] for e in get_provider("file").get_active_path(session_id) if e["type"] == "message"]
    assert [m["role"] for m in stored] == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]
    assert stored[1]["api"] == "openai-responses" and stored[1]["content"][1]["id"] == "call_ls0001|fc_ls0001"
    assert "notes.md" in stored[2]["content"][0]["text"]  # the real ls tool ran
    second, third = server.requests[1].body, server.requests[2].body
    assert second["reasoning"] == {"effort": "medium", "summary": "auto"}
    # The tool round sends the reasoning item back with the call and its output ...
    assert reasoning_item(0, REASONING["thinking"]) in second["input"]
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_ls0001"] and "notes.md" in outputs[0]["output"]
    # ... and so does the next prompt's first request, read back from the session file.
    assert reasoning_item(0, REASONING["thinking"]) in third["input"]
    assert third["input"][-1] == {"role": "user", "content": [{"type": "input_text", "text": "and now?"}]}


def test_the_decoder_reads_the_sdks_event_models_as_it_reads_their_json():
    """The stream hands the decoder each event's JSON (as a view read by attribute); an SDK
    that cannot hands its event models, and the message built is the same: the reasoning
    item kept to send back (nulls left out, as the SDK's dump leaves them), the text's
    phase, the function calls and the usage."""
    from openai._models import construct_type  # how the SDK's stream builds its models, for this test only
    from openai.types.responses import ResponseStreamEvent

    from runtime.llm.assistant import AssistantBuilder
    from runtime.llm.openai_responses import Decoder
    from runtime.llm.sse import JsonView

    events = responses_events(Reply([REASONING, TEXT, CALL_1], stop_reason="toolUse", text_phase="commentary"), "o-test")
    for event in events:  # a field the server sends as null: the SDK's dump leaves it out
        if event.get("type") == "response.output_item.done" and event["item"]["type"] == "reasoning":
            event["item"]["status"] = None
    built = []
    for convert in (JsonView, lambda data: construct_type(type_=ResponseStreamEvent, value=data)):
        builder = AssistantBuilder(api="openai-responses", provider="openai", model="o-test", prices=PRICES)
        decoder = Decoder(builder)
        builder.start()
        for event in events:
            decoder.feed(convert(json.loads(json.dumps(event))))
        decoder.close_blocks()
        built.append(builder.done(decoder.finish()).message)
    raw, models = built
    thinking = [json.loads(b.pop("thinkingSignature")) for b in (raw["content"][0], models["content"][0])]
    assert thinking[0] == thinking[1] == reasoning_item(0, REASONING["thinking"])
    assert raw["content"] == models["content"] and raw["usage"] == models["usage"]
    assert raw["stopReason"] == models["stopReason"] == "toolUse"
    assert raw["content"][1]["textSignature"] == '{"v":1,"id":"msg_0001","phase":"commentary"}'
