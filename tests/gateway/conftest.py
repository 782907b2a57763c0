"""Websocket tests: the real ASGI stack (origin check, cookie/token auth, router,
consumer), the in-memory channel layer, the inline backend and the scripted model."""

from __future__ import annotations

import asyncio

import orjson
import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client
from rest_framework.test import APIClient

from sessions_tree.events import TREE_EVENT_TYPES
from tests.api.builders import build_tree, default_agent, owner_tokens

HOST = b"testserver"  # the handshake's Host header (what a browser sends)
ORIGIN = b"http://testserver"
TERMINAL_RUN_STATES = ("completed", "aborted", "failed", "lost")


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def agent(transactional_db, sessions_dir, tmp_path, settings):
    settings.NETA_WORKSPACE_DIR = tmp_path / "workspace"
    settings.NETA_TASK_BACKEND = "inline"
    return default_agent()


@pytest.fixture
def tree(owner, agent):
    return build_tree(owner, agent)


@pytest.fixture
def tokens(owner):
    return owner_tokens(owner)


@pytest_asyncio.fixture
async def fresh_layer():
    layer = get_channel_layer()
    await layer.flush()
    yield layer
    await layer.flush()


def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


@pytest.fixture
def cookie_for(owner, outsider, staff):
    made = {}

    def make(actor: str) -> bytes:
        if actor not in made:
            made[actor] = session_cookie({"owner": owner, "outsider": outsider, "staff": staff}[actor])
        return made[actor]

    return make


def application():
    from neta.asgi import application as app

    return app


class Socket:
    """A websocket client on the full ASGI application."""

    def __init__(self, communicator: WebsocketCommunicator):
        self.communicator = communicator
        self.frames: list[dict] = []  # everything received, in order
        self.closed_with: int | None = None

    @classmethod
    async def connect(
        cls,
        session_id: str,
        *,
        token: str | None = None,
        cookie: bytes | None = None,
        origin: bytes | None = ORIGIN,
        host: bytes | None = HOST,
        path: str | None = None,
    ):
        headers = []
        if host is not None:
            headers.append((b"host", host))
        if origin is not None:
            headers.append((b"origin", origin))
        if token is not None:
            headers.append((b"authorization", f"Token {token}".encode()))
        if cookie is not None:
            headers.append((b"cookie", cookie))
        communicator = WebsocketCommunicator(application(), path or f"/ws/sessions/{session_id}/", headers=headers)
        socket = cls(communicator)
        connected, code = await communicator.connect(timeout=10)
        if not connected:
            socket.closed_with = code
        return socket

    async def send(self, frame) -> None:
        if isinstance(frame, (dict, list)):
            await self.communicator.send_to(text_data=orjson.dumps(frame).decode())
        else:
            await self.communicator.send_to(text_data=frame)

    async def recv(self, timeout: float = 10) -> dict:
        message = await self.communicator.receive_output(timeout)
        if message["type"] == "websocket.close":
            self.closed_with = message.get("code")
            return {"type": "__closed__", "code": self.closed_with}
        frame = orjson.loads(message["text"])
        self.frames.append(frame)
        return frame

    async def recv_until(self, predicate, timeout: float = 20) -> list[dict]:
        """Frames up to and including the first one ``predicate`` accepts."""
        got = []
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"timed out; last frames: {got[-10:]}")
            try:
                frame = await self.recv(remaining)
            except (TimeoutError, asyncio.TimeoutError):
                raise AssertionError(f"timed out waiting; last frames: {got[-10:]}") from None
            got.append(frame)
            if predicate(frame):
                return got

    async def close(self) -> None:
        await self.communicator.disconnect()

    def tree_events(self) -> list[dict]:
        return [f for f in self.frames if f.get("type") in TREE_EVENT_TYPES]


async def command(socket: Socket, frame: dict, timeout: float = 20) -> dict:
    request_id = frame.setdefault("requestId", f"c{id(frame)}")
    await socket.send(frame)
    frames = await socket.recv_until(lambda f: f.get("requestId") == request_id and f["type"] in ("ack", "error", "subscribed", "pong", "snapshot"), timeout)
    reply = frames[-1]
    if reply["type"] == "snapshot":  # subscribe without sinceRevision: the snapshot, then subscribed
        frames = await socket.recv_until(lambda f: f.get("requestId") == request_id and f["type"] == "subscribed", timeout)
        return frames[-1]
    return reply


def _api(user_or_token) -> APIClient:
    client = APIClient()
    if isinstance(user_or_token, str):
        client.credentials(HTTP_AUTHORIZATION=f"Token {user_or_token}")
    else:
        client.force_login(user_or_token)
    return client


async def api(user_or_token) -> APIClient:
    """A REST client for a user (session login) or a token, made from async code."""
    return await sync_to_async(_api, thread_sensitive=False)(user_or_token)


async def rest(client: APIClient, method: str, path: str, data=None, **kwargs):
    """A REST call from async test code (in a worker thread, like Daphne runs sync views)."""
    return await sync_to_async(getattr(client, method), thread_sensitive=False)(path, data, **kwargs)


async def run_finished(socket: Socket, timeout: float = 30) -> dict:
    frames = await socket.recv_until(lambda f: f.get("type") == "run_state" and f.get("state") in TERMINAL_RUN_STATES, timeout)
    return frames[-1]
