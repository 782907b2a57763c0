"""SDK clients, built once per (kind, base URL, key) over one shared HTTP pool.

Building an `httpx2.Client` costs ~150 ms (TLS context); an SDK client on top of an
existing one costs well under 1 ms. So one pooled HTTP client serves every SDK
client, and SDK clients are cached. SDK-level retries are off (`max_retries=0`): the
provider layer retries itself, with its own rules (`retry.py`). Timeouts are passed
per request.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx2

_lock = threading.Lock()
_http: httpx2.Client | None = None
_clients: dict[tuple, object] = {}
_MAX_CLIENTS = 64


def shared_http_client() -> httpx2.Client:
    import httpx2  # loaded with the first wire call: a scripted-only process (the subagent child) never pays ~0.2 s

    global _http
    with _lock:
        if _http is None:
            _http = httpx2.Client(
                timeout=httpx2.Timeout(600.0, connect=10.0),
                limits=httpx2.Limits(max_connections=200, max_keepalive_connections=50),
                follow_redirects=True,
            )
        return _http


def request_timeout(options: dict) -> httpx2.Timeout:
    """`timeout` (whole-read seconds, default 600) and `connect_timeout` (default 10)."""
    import httpx2  # loaded with the first wire call: a scripted-only process (the subagent child) never pays ~0.2 s

    total = options.get("timeout", 600.0)
    connect = options.get("connect_timeout", 10.0)
    for name, value in (("timeout", total), ("connect_timeout", connect)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"option {name!r} must be a positive number of seconds, got {value!r}")
    return httpx2.Timeout(float(total), connect=float(connect))


def cached_client(key: tuple, build):
    with _lock:
        client = _clients.get(key)
    if client is not None:
        return client
    http = shared_http_client()
    client = build(http)
    with _lock:
        if len(_clients) >= _MAX_CLIENTS:
            _clients.pop(next(iter(_clients)))
        return _clients.setdefault(key, client)


def anthropic_client(*, base_url: str | None, api_key: str):
    import anthropic

    def build(http):
        return anthropic.Anthropic(api_key=api_key, base_url=base_url or None, max_retries=0, http_client=http)

    return cached_client(("anthropic", base_url, api_key), build)


def openai_client(*, base_url: str | None, api_key: str):
    import openai

    def build(http):
        return openai.OpenAI(api_key=api_key, base_url=base_url or None, max_retries=0, http_client=http)

    return cached_client(("openai", base_url, api_key), build)
