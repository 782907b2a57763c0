"""The gateway under a real Daphne (served as `make run` serves it: ``python -m
neta.serve``), with the real Redis channel layer, through real websocket handshakes
(the shared ``distributed`` deployment, tests/support/harness.py):

* the Origin check compares scheme, host and port (another port of the same host
  is refused with HTTP 403);
* a frame over ``NETA_WS_MAX_FRAME_BYTES`` (1.5 MiB against the default 1 MiB)
  reaches the gateway, which answers ``frame_too_large`` and keeps the socket
  open; only a frame over Daphne's bound (4 × the limit) drops the connection;
* revoking a token or deactivating a user in *another process* (a management
  shell) closes the sockets Daphne holds (4401), through Redis; deleting the
  session closes its sockets (4404).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.deployment import Deployment
from tests.support.services import free_port

pytestmark = [pytest.mark.slow]

MIB = 1024 * 1024


@pytest.fixture
def server(distributed):
    """The shared distributed deployment: its heartbeat is off (a socket that closes was
    closed by the withdrawal's message); each test acts as a user of its own."""
    return distributed


def in_another_process(cluster: Deployment, code: str, **env: str) -> str:
    """Run ``code`` in a fresh Python process of the deployment (like `manage.py shell -c`)."""
    return cluster.python("import os\n" + code, env=env)


NEW_TOKEN = """
from django.contrib.auth import get_user_model
from runtime.api.tokens import api_token_create
user, _ = get_user_model().objects.get_or_create(username=os.environ["USERNAME_"])
print(api_token_create(user=user).secret)
"""


def new_token(cluster: Deployment, username: str = "alice") -> str:
    return in_another_process(cluster, NEW_TOKEN, USERNAME_=username).strip().splitlines()[-1]


def new_session(cluster: Deployment, token: str) -> str:
    status, body = cluster.http(0, "post", "/api/sessions/", {"title": "daphne"}, token=token)
    assert status == 201, body
    return body["sessionId"]


async def connect(cluster: Deployment, session_id: str, token: str, *, origin: str | None = None):
    import websockets

    return await websockets.connect(
        cluster.ws_url(0, session_id),
        additional_headers={"Authorization": f"Token {token}"},
        origin=origin or cluster.origin(0),
        max_size=None,
    )


async def recv(ws, timeout: float = 30) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def close_code(ws, timeout: float = 30) -> tuple[int, list[dict]]:
    """Read until the server closes; (close code, frames before it)."""
    import websockets

    frames = []
    try:
        async with asyncio.timeout(timeout):
            while True:
                frames.append(json.loads(await ws.recv()))
    except websockets.ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd else None, frames


def test_the_origin_must_match_scheme_host_and_port(server):
    import websockets

    token = new_token(server)
    sid = new_session(server, token)
    port = server.ports[0]

    async def scenario():
        ws = await connect(server, sid, token)
        assert (await recv(ws))["type"] == "hello"
        await ws.close()
        other_port = free_port()
        for origin in (f"http://127.0.0.1:{other_port}", "http://127.0.0.1", f"https://127.0.0.1:{port}", f"http://localhost:{port}"):
            with pytest.raises(websockets.InvalidStatus) as refused:
                await connect(server, sid, token, origin=origin)
            assert refused.value.response.status_code == 403, origin

    asyncio.run(scenario())


def test_a_frame_over_the_limit_is_answered_and_the_socket_stays_open(server):
    import websockets

    token = new_token(server)
    sid = new_session(server, token)

    async def scenario():
        ws = await connect(server, sid, token)
        assert (await recv(ws))["type"] == "hello"
        big = json.dumps({"type": "prompt", "text": "x" * (3 * MIB // 2), "requestId": "big"})
        assert len(big) > 1.5 * MIB
        await ws.send(big)
        reply = await recv(ws)
        assert reply["type"] == "error" and reply["code"] == "frame_too_large"  # (not parsed: no requestId)
        await ws.send(json.dumps({"type": "ping", "requestId": "after"}))
        assert await recv(ws) == {"type": "pong", "requestId": "after"}
        # Over Daphne's bound (4 × the limit): autobahn drops the connection (no close frame).
        try:
            await ws.send("x" * (4 * MIB + 1))
        except websockets.ConnectionClosed:
            pass  # dropped while it was still being sent
        code, frames = await close_code(ws)
        assert frames == [] and code in (None, 1009)

    asyncio.run(scenario())


REVOKE = """
from runtime.models import ApiToken
from runtime.api.tokens import api_token_revoke, token_digest
api_token_revoke(token=ApiToken.objects.get(digest=token_digest(os.environ["TOKEN_"])))
"""

DEACTIVATE = """
from django.contrib.auth import get_user_model
user = get_user_model().objects.get(username=os.environ["USERNAME_"])
user.is_active = False
user.save()
"""


def test_revoking_a_token_in_another_process_closes_its_sockets(server):
    token = new_token(server)
    sid = new_session(server, token)

    async def scenario():
        ws = await connect(server, sid, token)
        assert (await recv(ws))["type"] == "hello"
        await asyncio.to_thread(in_another_process, server, REVOKE, TOKEN_=token)
        code, frames = await close_code(ws)
        assert code == 4401
        assert frames[-1]["type"] == "error" and frames[-1]["code"] == "authentication_failed"

    asyncio.run(scenario())


def test_deactivating_a_user_in_another_process_closes_their_sockets(server):
    token = new_token(server, "bob")
    sid = new_session(server, token)

    async def scenario():
        sockets = [await connect(server, sid, token) for _ in range(2)]
        for ws in sockets:
            assert (await recv(ws))["type"] == "hello"
        await asyncio.to_thread(in_another_process, server, DEACTIVATE, USERNAME_="bob")
        for ws in sockets:
            code, _ = await close_code(ws)
            assert code == 4401

    asyncio.run(scenario())


def test_deleting_a_session_closes_its_sockets(server):
    token = new_token(server, "carol")
    sid = new_session(server, token)

    async def scenario():
        ws = await connect(server, sid, token)
        assert (await recv(ws))["type"] == "hello"
        status, _ = await asyncio.to_thread(server.http, 0, "delete", f"/api/sessions/{sid}/", token=token)
        assert status == 204
        code, frames = await close_code(ws)
        assert code == 4404 and frames[-1]["code"] == "session_not_found"

    asyncio.run(scenario())


def test_neta_serve_raises_daphnes_websocket_limits_and_the_command_line_wins(settings):
    from daphne.cli import CommandLineInterface

    from neta.serve import daphne_argv

    parser = CommandLineInterface().parser
    args = parser.parse_args(daphne_argv(["neta.asgi:application"]))
    assert args.websocket_max_message_size == args.websocket_max_frame_size == 4 * settings.NETA_WS_MAX_FRAME_BYTES
    args = parser.parse_args(daphne_argv(["--websocket-max-message-size", "2048", "neta.asgi:application"]))
    assert args.websocket_max_message_size == 2048


def test_post_bodies_reach_the_api_unparsed_by_twisted(server):
    """Twisted no longer reads form fields Daphne never uses (neta.serve): a malformed
    multipart body is the API's JSON 4xx, not Twisted's empty 400, and JSON prompts work."""
    import urllib.error
    import urllib.request

    token = new_token(server, "formless")
    session_id = new_session(server, token)

    def post(content_type: str, body: bytes) -> tuple[int, bytes]:
        request = urllib.request.Request(
            server.url(0, f"/api/sessions/{session_id}/prompt/"), data=body, method="POST",
            headers={"Authorization": f"Token {token}", "Content-Type": content_type},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    status, body = post("multipart/form-data; boundary=x", b"not a multipart body")
    assert 400 <= status < 500 and json.loads(body)["error"]["code"], (status, body)
    status, body = post("application/json; charset=utf-8", b'{"text": "hi"}')
    assert status == 202, body
    assert json.loads(body)["run"]["sessionId"] == session_id


def _partial_upload(cluster: Deployment, path: str, declared: int, *, chunked: bool = False) -> tuple[int | None, bytes]:
    """Send headers declaring ``declared`` bytes (or chunked), then 1 MiB of body, and
    read: the answer must come without the rest of the body (None: it never came)."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(cluster.url(0, path))
    conn = socket.create_connection((url.hostname, url.port), timeout=20)
    try:
        length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {declared}"
        conn.sendall(
            (
                f"POST {path} HTTP/1.1\r\nHost: {url.hostname}:{url.port}\r\nAuthorization: Token {cluster.token}\r\n"
                f"Content-Type: multipart/form-data; boundary=b\r\n{length}\r\n\r\n"
            ).encode()
        )
        piece = b'--b\r\nContent-Disposition: form-data; name="file"; filename="s.jsonl"\r\n\r\n' + b"x" * MIB
        try:
            for _ in range(declared // len(piece) + 1 if chunked else 1):
                conn.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed while we were still sending
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                data = conn.recv(65536)
                if not data:
                    break
                answer += data
        except (TimeoutError, socket.timeout, ConnectionResetError):
            return None, answer
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else None
        return status, answer
    finally:
        conn.close()


@pytest.mark.parametrize("path, declared", [("/api/sessions/import/", 300 * MIB), ("/api/sessions/x/prompt/", 200 * MIB)])
def test_a_body_declared_over_the_limit_is_refused_before_it_arrives(server, path, declared):
    status, answer = _partial_upload(server, path, declared)
    assert status == 413, answer
    assert b'"too_large"' in answer or b"too_large" in answer


def test_a_chunked_upload_over_the_limit_is_stopped_as_it_arrives(server):
    # NETA_IMPORT_MAX_BYTES is 200 MiB here; a chunked body names no length: counted as it comes.
    status, answer = _partial_upload(server, "/api/sessions/import/", 210 * MIB, chunked=True)
    assert status == 413, answer
