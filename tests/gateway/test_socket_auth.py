"""Who may open a session's socket, and what a read-only token may do there.

The socket half of the authorization matrix (the REST half is
tests/api/test_authorization_matrix.py): anonymous, owner, another user,
staff, read-only token, revoked token — plus origin checks.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from runtime.models import AgentRun
from sessions_tree.models import AgentSession
from tests.gateway.conftest import Socket, command

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


async def open_as(actor: str, session_id: str, tokens, cookie_for) -> Socket:
    if actor == "anonymous":
        return await Socket.connect(session_id)
    if actor in ("owner", "outsider", "staff"):
        return await Socket.connect(session_id, cookie=await sync_to_async(cookie_for)(actor))
    return await Socket.connect(session_id, token=getattr(tokens, actor))


EXPECTED = {
    "anonymous": 4401,
    "owner": "open",
    "outsider": 4404,
    "staff": "open",
    "read_only": "read-only",
    "revoked": 4401,
    "expired": 4401,
}


@pytest.mark.parametrize("actor", list(EXPECTED))
async def test_socket_for_every_actor(actor, tree, tokens, cookie_for, fresh_layer):
    socket = await open_as(actor, tree.session_id, tokens, cookie_for)
    try:
        first = await socket.recv()
        expected = EXPECTED[actor]
        if isinstance(expected, int):
            assert first == {"type": "__closed__", "code": expected}
            return
        assert first["type"] == "hello" and first["sessionId"] == tree.session_id
        assert first["readOnly"] is (expected == "read-only")
        revision = await sync_to_async(lambda: AgentSession.objects.get(session_id=tree.session_id).revision)()
        assert first["revision"] == revision
        # Everyone who may open the socket may subscribe.
        reply = await command(socket, {"type": "subscribe", "sinceRevision": revision})
        assert reply == {"type": "subscribed", "requestId": reply["requestId"], "revision": revision, "replayed": 0}
        # Commands need write access.
        reply = await command(socket, {"type": "switch_leaf", "entryId": tree.ids["a1"]})
        if expected == "read-only":
            assert reply["type"] == "error" and reply["code"] == "permission_denied"
            assert "switch_leaf" not in first["commands"]
            reply = await command(socket, {"type": "prompt", "text": "hi"})
            assert reply["code"] == "permission_denied"
            assert not await sync_to_async(AgentRun.objects.exists)()
            assert await sync_to_async(lambda: AgentSession.objects.get(session_id=tree.session_id).revision)() == revision
        else:
            assert reply["type"] == "ack" and reply["result"]["leafId"] == tree.ids["a1"]
    finally:
        await socket.close()


async def test_unknown_sessions_and_paths_are_closed_with_4404(owner, tokens, agent, fresh_layer):
    for path in ("/ws/sessions/no-such-session/", "/ws/elsewhere/"):
        socket = await Socket.connect("", token=tokens.read_write, path=path)
        assert await socket.recv() == {"type": "__closed__", "code": 4404}
        await socket.close()


@pytest.mark.parametrize("origin", [b"http://evil.example", b"null", None])
async def test_foreign_or_missing_origins_are_refused_before_anything_else(origin, tree, tokens, fresh_layer):
    socket = await Socket.connect(tree.session_id, token=tokens.read_write, origin=origin)
    # The origin validator refuses the handshake itself (HTTP 403 under Daphne).
    assert socket.closed_with is not None
    await socket.close()


async def test_allowed_origins_with_ports_and_schemes_are_accepted(tree, tokens, fresh_layer):
    for origin in (b"https://localhost", b"http://127.0.0.1:8000", b"http://testserver"):
        socket = await Socket.connect(tree.session_id, token=tokens.read_write, origin=origin)
        assert (await socket.recv())["type"] == "hello", origin
        await socket.close()
