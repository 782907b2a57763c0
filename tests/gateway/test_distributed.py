"""The gateway across processes, with real parts: two Daphne servers and one
Celery worker sharing MariaDB, Redis and the sessions directory (the shared
``distributed`` deployment, tests/support/harness.py).

A client subscribes on server 1, a prompt is posted to server 2, the run
executes on the worker; the client receives every tree event in revision order
and the streamed text, and its snapshot (before + events) equals one fetched
fresh. A second client on server 2 sees the very same events, and a command
sent over server 1's socket reaches the client on server 2.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from sessions_tree.events import TREE_EVENT_TYPES, apply_events
from tests.support.deployment import Deployment

pytestmark = [pytest.mark.slow, pytest.mark.mariadb]

TERMINAL = ("completed", "aborted", "failed", "lost")


class Client:
    def __init__(self, cluster: Deployment, server: int, session_id: str):
        self.cluster, self.server, self.session_id = cluster, server, session_id
        self.frames: list[dict] = []

    async def __aenter__(self):
        import websockets

        self.ws = await websockets.connect(
            self.cluster.ws_url(self.server, self.session_id),
            additional_headers={"Authorization": f"Token {self.cluster.token}"},
            origin=self.cluster.origin(self.server),
            max_size=None,
        )
        hello = await self.recv()
        assert hello["type"] == "hello"
        return self

    async def __aexit__(self, *exc):
        await self.ws.close()

    async def send(self, frame: dict) -> None:
        await self.ws.send(json.dumps(frame))

    async def recv(self, timeout: float = 30) -> dict:
        frame = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
        self.frames.append(frame)
        return frame

    async def until(self, predicate, timeout: float = 60) -> dict:
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.recv(timeout)
                if predicate(frame):
                    return frame

    def tree_events(self) -> list[dict]:
        return [f for f in self.frames if f.get("type") in TREE_EVENT_TYPES]

    async def wait_revision(self, revision: int) -> None:
        if not any(e["revision"] >= revision for e in self.tree_events()):
            await self.until(lambda f: f.get("type") in TREE_EVENT_TYPES and f["revision"] >= revision)


def text_of(entry: dict) -> str:
    return "".join(b.get("text", "") for b in entry["message"]["content"] if b.get("type") == "text")


def test_two_servers_and_a_worker(distributed):
    asyncio.run(_scenario(distributed))


async def _scenario(cluster: Deployment):
    status, session = cluster.http(1, "post", "/api/sessions/", {"title": "distributed"})
    assert status == 201, session
    sid = session["sessionId"]
    async with Client(cluster, 0, sid) as first, Client(cluster, 1, sid) as second:
        await first.send({"type": "subscribe", "requestId": "s"})
        before = (await first.until(lambda f: f["type"] == "snapshot"))["snapshot"]
        await first.until(lambda f: f["type"] == "subscribed")
        await second.send({"type": "subscribe", "sinceRevision": before["revision"], "requestId": "s"})
        await second.until(lambda f: f["type"] == "subscribed")

        # The prompt goes to server 2; the run executes on the Celery worker.
        status, body = cluster.http(1, "post", f"/api/sessions/{sid}/prompt/", {"text": "please use a tool"})
        assert status == 202, body
        assert body["run"]["backend"] == "celery"
        final = await first.until(lambda f: f.get("type") == "run_state" and f["state"] in TERMINAL)
        assert final["state"] == "completed", final

        status, after = cluster.http(1, "get", f"/api/sessions/{sid}/snapshot/")
        assert status == 200
        await first.wait_revision(after["revision"])
        events = first.tree_events()
        assert [e["revision"] for e in events] == list(range(before["revision"] + 1, after["revision"] + 1))
        assert apply_events(before, events) == after

        # Streamed text from the worker, through Redis, to server 1: every assistant
        # entry's deltas add up to its stored text.
        assistants = [e["entry"] for e in events if e.get("inFlight") is False]
        assert len(assistants) == 2
        for entry in assistants:
            streamed = "".join(
                f["delta"] for f in first.frames
                if f.get("type") == "assistant_stream_delta" and f["entryId"] == entry["id"] and f["kind"] == "text"
            )  # fmt: skip
            assert streamed == text_of(entry) and streamed
        assert any(f.get("type") == "tool_call_completed" for f in first.frames)

        status, run = cluster.http(1, "get", f"/api/runs/{body['run']['runId']}/")
        assert run["status"] == "completed" and run["backend"] == "celery"

        # A command over server 1's socket; its event reaches the client on server 2 too.
        target = after["activePath"][-3]
        await first.send({"type": "switch_leaf", "entryId": target, "requestId": "sw"})
        ack = await first.until(lambda f: f.get("requestId") == "sw" and f["type"] in ("ack", "error"))
        assert ack["type"] == "ack", ack
        status, latest = cluster.http(0, "get", f"/api/sessions/{sid}/snapshot/")
        await second.wait_revision(latest["revision"])
        await first.wait_revision(latest["revision"])
        assert second.tree_events() == first.tree_events()
        assert apply_events(before, second.tree_events()) == latest
        assert latest["leafId"] == target
