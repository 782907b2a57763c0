"""Websocket clients for the gateway tests.

``Socket``: a client on the full ASGI application in this process (origin check, cookie or
token auth, router, consumer), through Channels' ``WebsocketCommunicator``. ``Watcher``: a
client of a real server (``tests/support/deployment.py``) over a real socket, recording
every frame in the background.
"""

from __future__ import annotations

import asyncio
import json

import orjson
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from rest_framework.test import APIClient

from sessions_tree.events import TREE_EVENT_TYPES

HOST = b"testserver"  # the handshake's Host header (what a browser sends)
ORIGIN = b"http://testserver"
TERMINAL_RUN_STATES = ("completed", "aborted", "failed", "lost")


def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


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


class Watcher:
    """One websocket client of a real server (``cluster``: a ``Deployment``) that records every
    frame in the background."""

    def __init__(self, cluster, server: int, session_id: str):
        self.cluster, self.server, self.session_id = cluster, server, session_id
        self.frames: list[dict] = []
        self.closed: int | None = None
        self.changed = asyncio.Event()

    async def open(self, since_revision: int | None = None) -> dict | None:
        import websockets

        for attempt in range(5):
            try:
                self.ws = await websockets.connect(
                    self.cluster.ws_url(self.server, self.session_id),
                    additional_headers={"Authorization": f"Token {self.cluster.token}"},
                    origin=self.cluster.origin(self.server),
                    max_size=None,
                    ping_interval=None,
                )
                break
            except websockets.InvalidMessage:
                # Daphne drops a handshake its application has not answered within 5 s (a
                # storm of 40 connects on two busy cores): a client tries again, as the page does.
                if attempt == 4:
                    raise
                await asyncio.sleep(0.5 * (attempt + 1))
        self.reader = asyncio.create_task(self._read())
        await self.ws.send(json.dumps({"type": "subscribe", "sinceRevision": since_revision}))
        await self.until(lambda f: f["type"] == "subscribed")
        snapshots = [f["snapshot"] for f in self.frames if f["type"] == "snapshot"]
        return snapshots[0] if snapshots else None

    async def _read(self) -> None:
        import websockets

        try:
            async for raw in self.ws:
                self.frames.append(json.loads(raw))
                self.changed.set()
        except websockets.ConnectionClosed:
            pass
        self.closed = self.ws.close_code if self.ws.close_code is not None else -1
        self.changed.set()

    async def until(self, predicate, timeout: float = 90) -> dict:
        async with asyncio.timeout(timeout):
            seen = 0
            while True:
                for frame in self.frames[seen:]:
                    if predicate(frame):
                        return frame
                seen = len(self.frames)
                assert self.closed is None, f"socket closed ({self.closed})"
                self.changed.clear()
                await self.changed.wait()

    async def close(self) -> None:
        await self.ws.close()
        await self.reader

    def tree_events(self) -> list[dict]:
        return [f for f in self.frames if f.get("type") in TREE_EVENT_TYPES]

    def terminal_states(self) -> dict[str, str]:
        return {f["runId"]: f["state"] for f in self.frames if f.get("type") == "run_state" and f["state"] in TERMINAL_RUN_STATES}

    def count(self, kind: str) -> int:
        return sum(1 for f in self.frames if f.get("type") == kind)
