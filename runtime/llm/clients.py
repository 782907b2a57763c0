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
from urllib.parse import urlsplit

from .options import WIRE_KINDS

if TYPE_CHECKING:
    import httpx2

_lock = threading.Lock()
_http: httpx2.Client | None = None
_clients: dict[tuple, object] = {}
_MAX_CLIENTS = 64

#: Each provider's own API, used when a model names no base URL. Passed to the SDKs explicitly:
#: left empty, they would follow ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` from the
#: environment, and a key would go wherever that says.
DEFAULT_BASE_URLS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
}
_OPENAI_ORIGIN = ("https", "api.openai.com", 443)


def default_base_url(provider_kind: str) -> str | None:
    return DEFAULT_BASE_URLS.get(provider_kind)


def endpoint_origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of ``url``: two endpoints on one origin are one server."""
    parts = urlsplit(url or "")
    scheme = (parts.scheme or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or (443 if scheme == "https" else 80)


def shared_http_client() -> httpx2.Client:
    import httpx2  # loaded with the first wire call: a scripted-only process (the subagent child) never pays ~0.2 s

    from .transport import Urllib3Transport, use_for  # it imports httpx2 and urllib3: loaded with them, as above

    global _http
    with _lock:
        if _http is None:
            _http = httpx2.Client(
                timeout=httpx2.Timeout(600.0, connect=10.0),
                limits=httpx2.Limits(max_connections=200, max_keepalive_connections=50),
                # A streamed event costs a fraction of httpcore's read through urllib3 (transport.py).
                transport=Urllib3Transport(max_connections=200) if use_for() else None,
                # A redirect would carry the key (x-api-key is not an Authorization header,
                # which httpx drops across origins) to a host the model does not name.
                follow_redirects=False,
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


def load_sdks(kinds: set[str] | None = None) -> list[str]:
    """Load the providers' SDKs and the shared HTTP client now: a runs worker's start-up calls
    it, so that the first burst of turns does not wait, thread after thread, on the import
    lock for ~1 s of module loading each SDK costs a busy process.

    ``kinds``: the provider kinds of the enabled models (None: every kind). An SDK no enabled
    model uses is not loaded (~1.2 s of CPU each on a small machine); a model of its kind
    enabled later loads it with its first client. Returns the SDKs loaded."""
    loaded = []
    if kinds is None or "anthropic" in kinds:
        import anthropic  # noqa: F401 - loaded here on purpose (see above)

        loaded.append("anthropic")
    if kinds is None or kinds & (set(WIRE_KINDS) - {"anthropic"}):  # every other wire kind speaks OpenAI's SDK
        import openai  # noqa: F401 - loaded here on purpose (see above)

        loaded.append("openai")
    shared_http_client()
    return loaded


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
    import anthropic  # the SDK (~0.3 s) loads with the first client of its kind, not at start-up

    url = base_url or DEFAULT_BASE_URLS["anthropic"]

    def build(http):
        return anthropic.Anthropic(api_key=api_key, base_url=url, max_retries=0, http_client=http)

    return cached_client(("anthropic", url, api_key), build)


def openai_client(*, base_url: str | None, api_key: str):
    """An OpenAI SDK client for ``base_url`` (OpenAI's own API when empty). The organization and
    project the SDK reads from ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID`` go to OpenAI only, never
    to another OpenAI-style endpoint."""
    import openai  # the SDK (~0.4 s) loads with the first client of its kind, not at start-up

    url = base_url or DEFAULT_BASE_URLS["openai"]

    def build(http):
        client = openai.OpenAI(api_key=api_key, base_url=url, max_retries=0, http_client=http)
        if endpoint_origin(url) != _OPENAI_ORIGIN:
            client.organization = None
            client.project = None
        return client

    return cached_client(("openai", url, api_key), build)


def raw_events(stream, events_class=None):
    """An SDK stream (``anthropic`` or ``openai``), made to yield each event's JSON object
    instead of building its pydantic model: the models cost more than all the rest of the
    layer's work on an event. With ``events_class`` (`sse.AnthropicEvents`,
    `sse.OpenAIChatEvents`) the events are also parsed from the response's bytes by
    `sse.py` instead of the SDK's line-by-line decoder, each SDK's handling of error events
    kept; without it, the SDK parses and hands over the data as it is (``cast_to``
    ``object``). The request, its status check and read failures stay the SDK's. A stream
    with neither (another SDK version) yields its models: the decoders take both."""
    response = getattr(stream, "response", None)
    if events_class is not None and hasattr(response, "iter_bytes"):
        return events_class(stream)
    if hasattr(stream, "_cast_to"):
        stream._cast_to = object
    return stream
