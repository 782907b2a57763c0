"""Who may open a session's socket, and what a read-only token may do there.

The socket half of the authorization matrix (the REST half is
tests/api/test_authorization_matrix.py): anonymous, owner, another user, staff
roles (superuser; staff with view, change, view+delete or no session
permission), read-only, revoked and expired tokens — plus the Origin check
(scheme, host and port, as Django's CSRF check). Rights withdrawn on an open
socket: test_socket_rights.py; real Daphne handshakes: test_daphne.py.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from runtime.models import AgentRun
from sessions_tree.models import AgentSession
from tests.support.roles import role_user
from tests.support.sockets import Socket, command, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


async def open_as(actor: str, session_id: str, tokens, cookie_for) -> Socket:
    if actor == "anonymous":
        return await Socket.connect(session_id)
    if actor in ("owner", "outsider", "staff"):
        return await Socket.connect(session_id, cookie=await sync_to_async(cookie_for)(actor))
    if actor in ("superuser", "plain_staff", "view_staff", "change_staff", "delete_staff"):
        user = await sync_to_async(role_user)(actor)
        return await Socket.connect(session_id, cookie=await sync_to_async(session_cookie)(user))
    return await Socket.connect(session_id, token=getattr(tokens, actor))


EXPECTED = {
    "anonymous": 4401,
    "owner": "open",
    "outsider": 4404,
    "staff": "open",  # the fixture is a superuser
    "superuser": "open",
    "plain_staff": 4404,  # staff without a session permission: another user's session is not there
    "view_staff": "read-only",
    "change_staff": "open",
    "delete_staff": "read-only",
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


@pytest.mark.parametrize(
    "host, origin, accepted",
    [
        (b"testserver", b"http://testserver", True),
        (b"127.0.0.1:8000", b"http://127.0.0.1:8000", True),
        (b"localhost:8000", b"http://localhost:8000", True),
        # Another port of the same host is another origin (the defect: it was let in).
        (b"127.0.0.1:8000", b"http://127.0.0.1:8001", False),
        (b"127.0.0.1:8000", b"http://127.0.0.1", False),
        (b"testserver", b"http://testserver:8000", False),
        # Another scheme, another host.
        (b"testserver", b"https://testserver", False),
        (b"127.0.0.1:8000", b"http://localhost:8000", False),
        (b"testserver", b"http://localhost", False),
        # A Host outside ALLOWED_HOSTS (DNS rebinding) has no good origin at all.
        (b"evil.example", b"http://evil.example", False),
        (None, b"http://testserver", False),
    ],
)
async def test_the_origin_must_be_the_handshakes_own_scheme_host_and_port(host, origin, accepted, tree, tokens, fresh_layer):
    socket = await Socket.connect(tree.session_id, token=tokens.read_write, origin=origin, host=host)
    try:
        if accepted:
            assert (await socket.recv())["type"] == "hello"
        else:
            assert socket.closed_with is not None, "the handshake was refused"
    finally:
        await socket.close()


async def test_trusted_origins_and_a_proxys_https_follow_djangos_csrf_settings(tree, tokens, fresh_layer, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://neta.example", "https://*.corp.example"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    cases = [
        (b"https://neta.example", [], True),
        (b"https://chat.corp.example", [], True),
        (b"https://neta.example:8443", [], False),
        (b"http://neta.example", [], False),
        (b"http://chat.corp.example", [], False),
        # Behind a TLS proxy the handshake is https: the http origin is no longer its own.
        (b"https://testserver", [(b"x-forwarded-proto", b"https")], True),
        (b"http://testserver", [(b"x-forwarded-proto", b"https")], False),
    ]
    from channels.testing import WebsocketCommunicator

    from tests.support.sockets import application

    for origin, extra, accepted in cases:
        headers = [(b"host", b"testserver"), (b"origin", origin), (b"authorization", f"Token {tokens.read_write}".encode()), *extra]
        communicator = WebsocketCommunicator(application(), f"/ws/sessions/{tree.session_id}/", headers=headers)
        connected, _ = await communicator.connect(timeout=10)
        try:
            if accepted:
                assert connected and (await communicator.receive_json_from(10))["type"] == "hello", origin
            else:
                assert not connected, origin
        finally:
            await communicator.disconnect()


async def test_a_session_cookie_counts_only_while_it_is_valid(owner, tree, cookie_for, fresh_layer):
    """The cookie's user is checked once at the handshake, as Django checks a request: an
    unknown or garbled session key, or a session whose password hash went stale (the user
    changed their password elsewhere), is nobody (4401)."""
    cookie = await sync_to_async(cookie_for)("owner")
    socket = await Socket.connect(tree.session_id, cookie=cookie)
    assert (await socket.recv())["type"] == "hello"
    await socket.close()
    for garbage in (b"sessionid=nosuchsession", b"sessionid=", b"sessionid=%ff%00;;==", b"other=1"):
        socket = await Socket.connect(tree.session_id, cookie=garbage)
        assert await socket.recv() == {"type": "__closed__", "code": 4401}, garbage
        await socket.close()

    def change_password():
        owner.set_password("a new password 1234")
        owner.save()

    await sync_to_async(change_password)()
    socket = await Socket.connect(tree.session_id, cookie=cookie)
    assert await socket.recv() == {"type": "__closed__", "code": 4401}
    await socket.close()


async def test_a_token_wins_over_a_session_cookie(tree, tokens, cookie_for, fresh_layer):
    """An outsider's browser cookie with the owner's token: the token's user (and its rights)."""
    socket = await Socket.connect(tree.session_id, token=tokens.read_only, cookie=await sync_to_async(cookie_for)("outsider"))
    hello = await socket.recv()
    assert hello["type"] == "hello" and hello["readOnly"] is True
    await socket.close()
    socket = await Socket.connect(tree.session_id, token="neta_not_a_token", cookie=await sync_to_async(cookie_for)("owner"))
    assert await socket.recv() == {"type": "__closed__", "code": 4401}
    await socket.close()
