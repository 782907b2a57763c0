"""Socket frames follow the REST body rules (runtime/api/parsers.py): nesting past
64 levels (and past orjson's own 1024) is a clean ``invalid_json`` error frame,
lone surrogate escapes become U+FFFD, non-finite numbers are refused; the
socket stays usable and nothing reaches the store."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from runtime.api.parsers import MAX_JSON_DEPTH
from runtime.models import AgentRun
from sessions_tree.providers import get_provider
from tests.support.sockets import Socket, command

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def nested(depth: int) -> str:
    return '{"type": "ping", "requestId": 1, "x": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 1023, 1025, 10_000])
async def test_deep_frames_are_a_clean_invalid_json(tree, tokens, fresh_layer, depth):
    socket = await Socket.connect(tree.session_id, token=tokens.read_write)
    try:
        assert (await socket.recv())["type"] == "hello"
        before = await sync_to_async(get_provider("file").get_snapshot)(tree.session_id)
        await socket.send(nested(depth))
        reply = await socket.recv()
        assert reply["type"] == "error" and reply["code"] == "invalid_json", reply
        assert str(MAX_JSON_DEPTH) in reply["message"], reply
        assert (await command(socket, {"type": "ping", "requestId": "alive"}))["type"] == "pong"
        assert await sync_to_async(get_provider("file").get_snapshot)(tree.session_id) == before
    finally:
        await socket.close()


async def test_a_frame_just_within_the_bound_is_answered(tree, tokens, fresh_layer):
    socket = await Socket.connect(tree.session_id, token=tokens.read_write)
    try:
        assert (await socket.recv())["type"] == "hello"
        await socket.send(nested(MAX_JSON_DEPTH - 1))
        assert (await socket.recv())["type"] == "pong"
    finally:
        await socket.close()


async def test_lone_surrogates_and_non_finite_numbers_in_frames(tree, tokens, fresh_layer):
    socket = await Socket.connect(tree.session_id, token=tokens.read_write)
    try:
        assert (await socket.recv())["type"] == "hello"
        await socket.send('{"type": "ping", "requestId": "a\\ud800"}')
        assert await socket.recv() == {"type": "pong", "requestId": "a\ufffd"}
        await socket.send('{"type": "prompt", "text": "hi", "mode": "\\udfff"}')
        reply = await socket.recv()
        assert reply["type"] == "error" and reply["code"] == "invalid" and "mode" in reply["fields"], reply
        for bad in ('{"type": "ping", "x": 1e400}', '{"type": "ping", "x": NaN}'):
            await socket.send(bad)
            reply = await socket.recv()
            assert reply["type"] == "error" and reply["code"] == "invalid_json", (bad, reply)
        assert (await command(socket, {"type": "ping", "requestId": "alive"}))["type"] == "pong"
        assert not await sync_to_async(AgentRun.objects.exists)()
    finally:
        await socket.close()
