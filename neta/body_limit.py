"""Request bodies over the API's limits are refused as they arrive (HTTP 413).

Django's ASGI handler reads a whole body (into a temporary file) before any view or
upload handler sees it, so a 300 MB import used to arrive in full before its 413.
This wraps the HTTP application: for ``/api/`` paths, a ``Content-Length`` over the
limit is answered at once without reading the body, and a body without one (chunked)
is counted as it comes and cut off (413) as soon as it is over (the OpenAI-compatible
endpoints under ``/v1/`` alike). The limits:
``NETA_IMPORT_MAX_BYTES`` (plus 1 MiB for the multipart framing and the other fields)
for ``/api/sessions/import/``, ``NETA_API_MAX_BODY_BYTES`` for the rest of the API.
"""

from __future__ import annotations

import json

from django.conf import settings

IMPORT_PATH = "/api/sessions/import/"
MULTIPART_SLACK = 1024 * 1024


def body_limit(path: str) -> int | None:
    if not path.startswith(("/api/", "/v1/")):
        return None
    if path == IMPORT_PATH:
        return settings.NETA_IMPORT_MAX_BYTES + MULTIPART_SLACK
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _body(limit: int, path: str = "") -> bytes:
    message = f"the request body is larger than {limit} bytes"
    error = {"code": "too_large", "message": message}
    if path.startswith("/v1/"):  # OpenAI's shape (runtime/openai_api/errors.py)
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": "too_large"}
    return json.dumps({"error": error}).encode()


def refusal(limit: int, path: str = "") -> bytes:
    """The raw HTTP/1.1 413 answer (``neta.serve`` writes it before the body arrives)."""
    body = _body(limit, path)
    head = f"HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


_LINE_REASONS = {414: ("URI Too Long", "uri_too_long", "the request's URL (its query string included) is longer than the server reads"),
                 431: ("Request Header Fields Too Large", "headers_too_large", "the request's headers are larger than the server reads")}


def line_refusal(status: int, request_start: bytes) -> bytes:
    """The raw HTTP/1.1 answer to a request line (414) or headers (431) too long to read:
    the API's JSON error when ``request_start`` (the request line's first bytes, or its path)
    names an ``/api/`` path, else plain text."""
    reason, code, message = _LINE_REASONS[status]
    target = request_start.split(b" ", 2)[1] if request_start.count(b" ") >= 1 and not request_start.startswith(b"/") else request_start
    if target.startswith(b"/api/"):
        body, kind = json.dumps({"error": {"code": code, "message": message}}).encode(), "application/json"
    elif target.startswith(b"/v1/"):  # OpenAI's shape (runtime/openai_api/errors.py)
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": code}
        body, kind = json.dumps({"error": error}).encode(), "application/json"
    else:
        body, kind = f"{status} {reason}: {message}\n".encode(), "text/plain; charset=utf-8"
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


async def _refuse(send, limit: int, path: str = "") -> None:
    body = _body(limit, path)
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        limit = body_limit(scope.get("path", "")) if scope["type"] == "http" else None
        if limit is None:
            return await self.app(scope, receive, send)
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1  # Daphne answers a malformed length itself; leave it to Django
                if declared > limit:
                    return await _refuse(send, limit, scope.get("path", ""))
        state = {"received": 0, "over": False, "started": False}

        async def counted_receive():
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    state["over"] = True
                    return {"type": "http.disconnect"}  # Django stops reading and answers nothing
            return message

        async def tracked_send(message):
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        await self.app(scope, counted_receive, tracked_send)
        if state["over"] and not state["started"]:
            await _refuse(send, limit, scope.get("path", ""))
