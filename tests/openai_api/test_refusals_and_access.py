"""What the OpenAI endpoints refuse, in OpenAI's error shape with the REST API's status codes,
without writing anything; who may do what (tokens, sessions, agents); a client that goes away
aborts its run."""

from __future__ import annotations

import json

import httpx2 as httpx
import openai
import pytest

from tests.openai_api.openai_support import role, text_of, wait_for_run

pytestmark = [pytest.mark.slow]

SESSION = "x-neta-session-id"
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
FUNCTION = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
CHAT_FUNCTION = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
HI = [{"role": "user", "content": "hi"}]

RESPONSES_REFUSED = [
    ({"input": "hi", "tools": [FUNCTION]}, "tools"),
    ({"input": "hi", "tool_choice": "required"}, "tool_choice"),
    ({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}}, "text.format"),
    ({"input": "hi", "background": True}, "background"),
    ({"input": "hi", "conversation": "conv_1"}, "conversation"),
    ({"input": [{"type": "function_call_output", "call_id": "c1", "output": "42"}]}, "input[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": "https://example.com/a.png"}]}]}, "input[0].content[1].image_url"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]}]}, "input[0].content[0]"),
    ({"input": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "prefill"}]}, "input"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
    ({"input": "hi", "temperature": 3}, "temperature"),
    ({"input": "hi", "top_p": "high"}, "top_p"),
    ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "hi", "reasoning": {"effort": "extreme"}}, "reasoning.effort"),
    ({"input": 42}, "input"),
    ({"input": "   "}, "input"),
    ({}, "model"),
]
CHAT_REFUSED = [
    ({"messages": HI, "tools": [CHAT_FUNCTION]}, "tools"),
    ({"messages": HI, "tool_choice": {"type": "function", "function": {"name": "lookup"}}}, "tool_choice"),
    ({"messages": HI, "functions": [{"name": "lookup", "parameters": {}}]}, "functions"),
    ({"messages": HI, "response_format": {"type": "json_object"}}, "response_format"),
    ({"messages": HI, "n": 2}, "n"),
    ({"messages": HI, "audio": {"voice": "alloy", "format": "mp3"}, "modalities": ["text", "audio"]}, "modalities"),
    ({"messages": [*HI, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "1"}]}, "messages[1].tool_calls"),
    ({"messages": [*HI, {"role": "tool", "tool_call_id": "c", "content": "1"}]}, "messages[1].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]}, "messages[0].content[0].image_url"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]}, "messages[0].content[0]"),
    ({"messages": [*HI, {"role": "assistant", "content": "prefill"}]}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": HI, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"messages": HI, "presence_penalty": 9}, "presence_penalty"),
    ({"messages": HI, "seed": 1.5}, "seed"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}, {"type": "text", "text": "x"}]}]}, "messages[0].content[0].image_url"),
]


def stored_counts(deployment) -> tuple[int, int]:
    status, runs = deployment.rest("get", "/api/runs/?limit=200")
    assert status == 200
    return deployment.session_count(), len(runs["results"])


def test_each_refusal_is_a_400_naming_the_parameter_and_writes_nothing(deployment):
    before = stored_counts(deployment)
    for body, param in RESPONSES_REFUSED:
        status, headers, answer = deployment.raw("POST", "/v1/responses", {"model": "default", **body} if body else {})
        assert status == 400, (body, answer)
        assert set(answer["error"]) == {"message", "type", "param", "code"}
        assert answer["error"]["type"] == "invalid_request_error" and answer["error"]["param"] == param, (body, answer)
    for body, param in CHAT_REFUSED:
        status, _, answer = deployment.raw("POST", "/v1/chat/completions", {"model": "default", **body})
        assert status == 400 and answer["error"]["param"] == param, (body, answer)
    # Through the SDK the same refusals are BadRequestErrors with the body's fields.
    with pytest.raises(openai.BadRequestError) as refused:
        deployment.client().chat.completions.create(model="default", messages=HI, response_format={"type": "json_object"})
    assert refused.value.param == "response_format" and refused.value.code == "unsupported_parameter"
    assert stored_counts(deployment) == before


def test_errors_in_openais_shape(deployment):
    # No key, a wrong key: 401 (the SDK's AuthenticationError).
    status, headers, body = deployment.raw("GET", "/v1/models", token=None)
    assert status == 401 and headers["www-authenticate"] == "Bearer" and body["error"]["type"] == "authentication_error"
    with pytest.raises(openai.AuthenticationError) as wrong:
        openai.OpenAI(base_url=deployment.base_url, api_key="neta_" + "x" * 43, max_retries=0).models.list()
    assert wrong.value.code == "invalid_api_key" and "unknown token" in wrong.value.message
    # An agent that does not exist, or that the caller may not use.
    for model in ("nope", "secret"):
        with pytest.raises(openai.NotFoundError) as missing:
            deployment.client().responses.create(model=model, input="hi")
        assert (missing.value.code, missing.value.param) == ("model_not_found", "model")
    # Not JSON, an unknown path, a response that is not there.
    status, _, body = deployment.raw("POST", "/v1/chat/completions", b"{not json", headers={"Content-Type": "application/json"})
    assert status == 400 and body["error"]["code"] == "parse_error"
    status, _, body = deployment.raw("POST", "/v1/embeddings", {"model": "default", "input": "x"})
    assert status == 404 and body["error"]["type"] == "invalid_request_error"
    for bogus in ("resp_nothing", "resp_" + "0" * 32 + "abcd1234", "resp_r" + "0" * 32):
        with pytest.raises(openai.NotFoundError):
            deployment.client().responses.retrieve(bogus)
    with pytest.raises(openai.BadRequestError) as previous:
        deployment.client().responses.create(model="default", input="hi", previous_response_id="resp_nothing")
    assert previous.value.code == "previous_response_not_found"
    status, _, body = deployment.raw("PUT", "/v1/responses", {"model": "default", "input": "x"})
    assert status == 405 and body["error"]["param"] is None


def test_an_outsider_cannot_read_or_continue_anothers_response(deployment):
    alice = deployment.client()
    raw = alice.responses.with_raw_response.create(model="default", input="alice's secret plan")
    response, sid = raw.parse(), raw.headers[SESSION]
    before = len(deployment.entries(sid))
    bob = deployment.client("bob")
    with pytest.raises(openai.BadRequestError) as refused:
        bob.responses.create(model="default", input="let me in", previous_response_id=response.id)
    assert refused.value.code == "previous_response_not_found"  # as if it did not exist
    with pytest.raises(openai.NotFoundError):
        bob.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError) as pinned:
        bob.with_options(default_headers={"X-Neta-Session-Id": sid}).chat.completions.create(model="default", messages=HI)
    assert pinned.value.param == "X-Neta-Session-Id"
    # The same history from bob never lands in alice's session: bob gets a session of his own.
    history = [{"role": "user", "content": "alice's secret plan"}, {"role": "assistant", "content": response.output_text}, {"role": "user", "content": "more"}]
    raw = bob.chat.completions.with_raw_response.create(model="default", messages=history)
    assert raw.headers[SESSION] != sid
    assert len(deployment.entries(sid)) == before
    assert "secret" not in [m.id for m in bob.models.list()]


def test_a_read_only_token_reads_but_starts_no_turn(deployment):
    response = deployment.client().responses.create(model="default", input="read me later")
    reader = deployment.client("alice_read_only")
    before = stored_counts(deployment)
    with pytest.raises(openai.PermissionDeniedError) as denied:
        reader.responses.create(model="default", input="write something")
    assert denied.value.body["type"] == "permission_error" and "read-only" in denied.value.message
    with pytest.raises(openai.PermissionDeniedError):
        reader.chat.completions.create(model="default", messages=HI)
    assert stored_counts(deployment) == before
    assert reader.responses.retrieve(response.id).output_text == "Echo: read me later"
    assert "default" in [m.id for m in reader.models.list()]


@pytest.mark.parametrize("endpoint", ["responses", "chat"])
def test_a_client_that_goes_away_mid_stream_aborts_the_run(deployment, endpoint):
    client = deployment.client()
    if endpoint == "responses":
        stream = client.responses.create(model="default", input="hold on there", stream=True)
        wanted = "response.output_text.delta"
        kind = lambda event: event.type  # noqa: E731
    else:
        stream = client.chat.completions.create(model="default", messages=[{"role": "user", "content": "hold on there"}], stream=True)
        wanted = "text"
        kind = lambda chunk: "text" if chunk.choices and chunk.choices[0].delta.content else "other"  # noqa: E731
    sid = stream.response.headers[SESSION]
    first = None
    for event in stream:
        first = first or event
        if kind(event) == wanted:
            break  # "Holding" arrived; the model is paused for a minute
    assert wait_for_run(deployment, sid, "running")["status"] == "running"
    if endpoint == "responses":  # the response is in progress, for whoever reads it meanwhile
        reading = client.responses.retrieve(first.response.id)
        assert (reading.id, reading.status, reading.output) == (first.response.id, "in_progress", [])
    stream.close()
    run = wait_for_run(deployment, sid, "aborted", "completed", "failed")
    assert run["status"] == "aborted" and run["error"] == "aborted by the user"  # as the page's Abort: by its user
    reply = [e for e in deployment.entries(sid) if role(e) == "assistant"][-1]
    assert reply["message"]["stopReason"] == "aborted" and text_of(reply) == "Holding"


def test_a_client_that_stops_waiting_for_a_whole_answer_aborts_the_run(deployment):
    body = json.dumps({"model": "default", "input": "hold on please"})
    headers = {"Authorization": f"Bearer {deployment.tokens['alice']}", "Content-Type": "application/json"}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(deployment.cluster.url(0, "/v1/responses"), content=body, headers=headers, timeout=httpx.Timeout(60, read=2))
    status, sessions = deployment.rest("get", "/api/sessions/search/?q=hold%20on%20please")
    assert status == 200 and sessions["results"], sessions
    sid = sessions["results"][0]["session"]["sessionId"]
    assert wait_for_run(deployment, sid, "aborted", "completed", "failed")["status"] == "aborted"


WEIRD = [None, 0, -1, 1.5, 10**30, "", "x", "\ud800", [], [None], {}, {"type": None}, True, "a" * 5000]
RESPONSES_FIELDS = ["model", "input", "instructions", "previous_response_id", "stream", "tools", "tool_choice", "text",
                    "temperature", "top_p", "max_output_tokens", "reasoning", "background", "conversation", "prompt"]  # fmt: skip
CHAT_FIELDS = ["model", "messages", "stream", "stream_options", "temperature", "top_p", "n", "stop", "max_tokens",
               "max_completion_tokens", "presence_penalty", "frequency_penalty", "seed", "tools", "tool_choice",
               "functions", "function_call", "response_format", "reasoning_effort", "modalities", "audio"]  # fmt: skip


def test_no_input_makes_a_server_error(deployment):
    """Every route and method; bodies that are not JSON, nested too deep, of the wrong type in
    every field: a 4xx in OpenAI's shape, never a 5xx."""

    def check(method, path, body=None, headers=None):
        status, _, answer = deployment.raw(method, path, body, headers=headers)
        assert status < 500, (method, path, body, answer)
        if status >= 400:
            assert isinstance(answer, dict) and set(answer["error"]) >= {"message", "type", "param", "code"}, (method, path, answer)
        return status

    raw_bodies = [b"", b"null", b"[]", b'"x"', b"{", b"\xff\xfe", b"[" * 200 + b"]" * 200, b'{"model": "default", "input": "\\ud800"}']
    for path in ("/v1/models", "/v1/models/default", "/v1/responses", "/v1/responses/resp_x", "/v1/chat/completions", "/v1/nowhere"):
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            check(method, path)
            if method != "GET":
                for body in raw_bodies:
                    check(method, path, body, {"Content-Type": "application/json"})
    for field in RESPONSES_FIELDS:
        for value in WEIRD:
            check("POST", "/v1/responses", json.dumps({"model": "nope", field: value}))
    for field in CHAT_FIELDS:
        for value in WEIRD:
            check("POST", "/v1/chat/completions", json.dumps({"model": "nope", field: value}))
    for value in WEIRD:
        check("POST", "/v1/chat/completions", json.dumps({"model": "nope", "messages": [{"role": value, "content": value}]}))
        check("POST", "/v1/chat/completions", json.dumps({"model": "nope", "messages": [{"role": "user", "content": [{"type": value, "text": value, "image_url": value}]}]}))
        check("POST", "/v1/responses", json.dumps({"model": "nope", "input": [{"type": value, "role": "user", "content": [{"type": "input_image", "image_url": value}]}]}))
    check("POST", "/v1/chat/completions", json.dumps({"model": "default", "messages": HI}), {"X-Neta-Session-Id": "\u00e9".encode("latin-1") * 10})
