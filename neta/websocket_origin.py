"""The websocket handshake's Origin check: the same rule as Django's CSRF origin check.

A browser sends ``Origin`` with every websocket handshake and the cookie with it,
so the Origin is what stops another site (or another port of this host: a
different origin) from opening a socket as the signed-in user. The handshake is
accepted when its ``Origin`` is

* exactly ``<scheme>://<host>`` of the handshake itself: ``https`` when the
  socket is secure (``wss``, or ``SECURE_PROXY_SSL_HEADER`` says so), else
  ``http``; the host as Django's ``request.get_host()`` gives it (the ``Host``
  header with its port, validated against ``ALLOWED_HOSTS``, or
  ``X-Forwarded-Host`` with ``USE_X_FORWARDED_HOST``), or
* one of ``CSRF_TRUSTED_ORIGINS`` (exactly, or a ``*.`` pattern's subdomain with
  the same scheme and port).

Scheme, host and port all count, as in ``CsrfViewMiddleware``. Anything else
(another port, another scheme, ``null``, no Origin) is refused before the
application sees it (HTTP 403).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest
from django.http.request import is_same_domain


class HandshakeRequest(HttpRequest):
    """Just enough of an ``HttpRequest`` for ``get_host()`` and ``is_secure()``, built
    from a websocket scope (so Django's own host, proxy and port rules apply)."""

    def __init__(self, scope: dict):
        super().__init__()
        self._secure_socket = scope.get("scheme") == "wss"
        for name, value in scope.get("headers") or []:
            key = "HTTP_" + name.decode("latin1").upper().replace("-", "_")
            value = value.decode("latin1")
            self.META[key] = f"{self.META[key]},{value}" if key in self.META else value
        server = scope.get("server") or ("unknown", "0")  # as Django's ASGIRequest does
        self.META["SERVER_NAME"], self.META["SERVER_PORT"] = str(server[0]), str(server[1])

    def _get_scheme(self) -> str:
        return "https" if self._secure_socket else "http"


def origin_allowed(scope: dict) -> bool:
    """Whether the handshake in ``scope`` comes from an origin this site trusts."""
    request = HandshakeRequest(scope)
    origin = request.META.get("HTTP_ORIGIN")
    if not origin or "," in origin:
        return False
    try:
        good = f"{'https' if request.is_secure() else 'http'}://{request.get_host()}"
    except DisallowedHost:
        good = None
    if origin == good:
        return True
    trusted = settings.CSRF_TRUSTED_ORIGINS
    if origin in {o for o in trusted if "*" not in o}:
        return True
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    return any(
        is_same_domain(parsed.netloc, pattern.netloc.lstrip("*"))
        for pattern in (urlsplit(o) for o in trusted if "*" in o)
        if pattern.scheme == parsed.scheme
    )


class OriginValidator:
    """ASGI middleware for websockets: refuse the handshake unless ``origin_allowed``."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            raise ValueError("OriginValidator is for websocket connections only")
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
