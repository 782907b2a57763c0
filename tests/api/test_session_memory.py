"""Creating sessions does not leave objects behind (memory per session).

A process that creates sessions over REST holds, after a full collection, what its
caches hold (the index cache here, cleared) and nothing per session: no request,
serializer or loaded index is kept for ever. A session's first load once froze every
object the collector tracked (``gc.freeze``), the garbage cycles requests had left
among them, into the permanent generation, where no collection frees them: ~280
objects and ~85 KB of RSS per session created, never returned.

Requests go through Django's WSGI handler as a server sends them: the test client
connects signal receivers on every request (a ``weakref.finalize`` each), which
would be counted here and which no server does."""

from __future__ import annotations

import gc
import io
import json

import pytest
from django.core.handlers.wsgi import WSGIHandler

from runtime.api.tokens import api_token_create
from sessions_tree.index import INDEXES

pytestmark = pytest.mark.django_db(transaction=True)  # commits run their on_commit callbacks, as served


def tracked_objects() -> int:
    """Every object the collector tracks, the permanent generation (``gc.freeze``) included."""
    INDEXES.clear()
    gc.collect()
    return len(gc.get_objects()) + gc.get_freeze_count()


class Server:
    def __init__(self, token: str):
        self.handler = WSGIHandler()
        self.token = token

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else b""
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "testserver",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "testserver",
            "HTTP_AUTHORIZATION": f"Token {self.token}",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(data)),
            "wsgi.input": io.BytesIO(data),
            "wsgi.url_scheme": "http",
            "wsgi.errors": io.StringIO(),
        }
        status = []
        response = self.handler(environ, lambda s, headers, exc_info=None: status.append(s))
        try:
            payload = b"".join(response)
        finally:
            response.close()
        return int(status[0].split()[0]), json.loads(payload)

    def create(self, n: int) -> None:
        for i in range(n):
            code, made = self.request("POST", "/api/sessions/", {"title": f"s{i}"})
            assert code == 201, made
            code, tree = self.request("GET", f"/api/sessions/{made['sessionId']}/")  # the tree read: its index loaded
            assert code == 200 and tree["entryCount"] >= 1, tree


def test_creating_sessions_keeps_no_objects_per_session(agent, owner):
    server = Server(api_token_create(user=owner, name="memory").secret)
    server.create(20)  # warm: imports, serializers, URL resolvers, prepared statements
    before = tracked_objects()
    server.create(150)
    after = tracked_objects()
    # With the freeze: ~40,000 more. Bounded caches (urllib's urlsplit, SQLite's
    # statements) may still fill a little.
    assert after - before < 150 * 2, f"{after - before} objects more after 150 sessions"
