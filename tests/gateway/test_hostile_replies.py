"""A model reply that JSON over UTF-8 cannot carry as it is (lone surrogates, as real
providers can send them as escapes; tool arguments nested past what orjson encodes)
reaches the socket as a repaired copy and never fails the run: the stored entry is
normalized on append, the streaming events are repaired where they enter the layer."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from runtime.models import ModelConfig
from tests.support.sockets import Socket, api, command, rest, run_finished

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

DEEP = json.loads('{"a":' * 300 + "1" + "}" * 300)
REPLIES = {
    "surrogate text": [[{"thinking": "th\ud800ink"}, {"text": "bad \ud800 char \udc00 end"}], [{"text": "ok"}]],
    "surrogate tool call": [[{"tool_call": {"name": "l\ud800s", "arguments": {"pa\ud800th": "\udfff"}}}], [{"text": "ok"}]],
    "deep tool arguments": [[{"tool_call": {"name": "ls", "arguments": DEEP}}], [{"text": "ok"}]],
    # a provider's JSON parsed by Python: integers past 64 bits, non-finite floats
    "huge numbers in tool arguments": [
        [{"tool_call": {"name": "ls", "arguments": {"n": 10**400, "m": -(2**70), "x": float("inf"), "y": float("nan")}}}],
        [{"text": "ok"}],
    ],
}


@pytest.mark.parametrize("provider", ["file", "mysql"])
@pytest.mark.parametrize("case", list(REPLIES))
async def test_a_reply_json_cannot_carry_completes_and_reaches_the_socket(owner, agent, tokens, fresh_layer, provider, case, tmp_path, settings):
    settings.NETA_SCRIPTED_RULES_DIR = tmp_path  # rules files come from there
    rules = tmp_path / "rules.json"  # a file: the options column cannot hold NaN
    rules.write_text(json.dumps({"version": 1, "default": {"replies": REPLIES[case]}}), encoding="utf-8")

    def configure():
        model = ModelConfig.objects.get(name="scripted-demo")
        model.options = {"rules": str(rules), "delay_ms": 0}
        model.save()
        agent.session_provider = provider
        agent.save()

    await sync_to_async(configure, thread_sensitive=False)()
    client = await api(tokens.read_write)
    created = await rest(client, "post", "/api/sessions/", {"title": "hostile"}, format="json")
    assert created.status_code == 201, created.content
    sid = created.json()["sessionId"]
    socket = await Socket.connect(sid, token=tokens.read_write)
    try:
        await socket.recv_until(lambda f: f["type"] == "hello")
        assert (await command(socket, {"type": "subscribe"}))["type"] == "subscribed"
        ack = await command(socket, {"type": "prompt", "text": "go"})
        assert ack["type"] == "ack", ack
        final = await run_finished(socket)
        assert final["state"] == "completed", final
        assert any(f["type"] == "session_entry_added" for f in socket.frames)
        assert (await command(socket, {"type": "ping"}))["type"] == "pong"  # still open
        run = await rest(client, "get", f"/api/runs/{ack['result']['runId']}/")
        assert run.json()["status"] == "completed", run.json()
        snapshot = await rest(client, "get", f"/api/sessions/{sid}/snapshot/")
        assert snapshot.status_code == 200
    finally:
        await socket.close()
