"""A canary HTTP server on loopback: it answers every request and keeps what it received.

A test points a configuration at it (a model's base URL, an MCP server's URL) and then
counts: how many requests arrived, and whether any carried a secret the test planted.
``redirect_to`` makes it answer 307 to another URL (a redirect that would carry a key)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Canary:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.redirect_to: str | None = None
        canary = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                canary.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body})
                if canary.redirect_to:
                    self.send_response(307)
                    self.send_header("Location", canary.redirect_to + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                payload = json.dumps({"error": {"message": "canary", "type": "invalid_request_error"}}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _record

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def received(self, secret: str) -> int:
        """How many requests carried ``secret`` anywhere (path, headers, body)."""
        needle = secret.encode()
        return sum(
            1
            for r in self.requests
            if needle in r["path"].encode() or needle in r["body"] or any(needle in f"{k}: {v}".encode() for k, v in r["headers"].items())
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
