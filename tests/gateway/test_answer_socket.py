"""The socket's ``answer`` command: a question asked in one tab is seen as a
``waiting`` run by another, answered there over the socket (bad answers are error events,
nothing written), and the run continues to the end. The real ASGI stack, the in-memory
layer, the inline backend and the scripted model."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from runtime.models import AgentRun, ModelConfig
from tests.support.rules import TEST_RULES
from tests.support.sockets import Socket, command, run_finished

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

ASK = {
    "match": {"contains": "ask me"},
    "replies": [
        [{"tool_call": {"name": "ask_user", "id": "call_sock", "arguments": {"question": "Pick one", "options": ["a", "b"], "multi_select": True}}}],
        [{"text": "got {{result}}"}],
    ],
}


@sync_to_async(thread_sensitive=False)
def with_ask_rule() -> None:
    ModelConfig.objects.filter(name="scripted-demo").update(options={"rules": {**TEST_RULES, "rules": [ASK, *TEST_RULES["rules"]]}})


@sync_to_async(thread_sensitive=False)
def run_row(run_id: str) -> AgentRun:
    return AgentRun.objects.get(run_id=run_id)


async def test_a_question_is_answered_over_the_socket_from_another_tab(tree, tokens, fresh_layer):
    await with_ask_rule()
    tabs = []
    for _ in range(2):
        socket = await Socket.connect(tree.session_id, token=tokens.read_write)
        assert (await socket.recv())["type"] == "hello"
        assert (await command(socket, {"type": "subscribe"}))["type"] == "subscribed"
        tabs.append(socket)
    first, second = tabs
    ack = await command(first, {"type": "prompt", "text": "please ask me"})
    run_id = ack["result"]["runId"]
    await second.recv_until(lambda f: f.get("type") == "run_state" and f.get("runId") == run_id and f.get("state") == "waiting")
    assert (await run_row(run_id)).status == "waiting"

    bad = await command(second, {"type": "answer", "toolCallId": "call_sock", "answer": ["c"]})
    assert bad["type"] == "error" and bad["code"] == "invalid" and "answer" in bad["fields"]
    unknown = await command(second, {"type": "answer", "toolCallId": "call_nope", "answer": ["a"]})
    assert unknown["type"] == "error" and unknown["code"] == "invalid" and "toolCallId" in unknown["fields"]
    missing = await command(second, {"type": "answer", "answer": "a"})
    assert missing["type"] == "error" and missing["code"] == "invalid" and "toolCallId" in missing["fields"]
    assert (await run_row(run_id)).status == "waiting"  # nothing written for a refused answer

    ok = await command(second, {"type": "answer", "toolCallId": "call_sock", "answer": ["b", "a"]})
    assert ok["type"] == "ack" and ok["result"]["runId"] == run_id
    end = await run_finished(first)
    assert end["runId"] == run_id and end["state"] == "completed"
    row = await run_row(run_id)
    assert row.question["outcome"] == "answered" and row.question["selected"] == ["b", "a"]
    for socket in tabs:
        await socket.close()
