"""Who is calling: integration tokens (REST and websockets) and browser sessions.

REST: ``ApiTokenAuthentication`` reads ``Authorization: Token <token>`` (or
``Bearer``); browsers use Django's session with CSRF (DRF's
``SessionAuthentication``). Websockets: ``SocketAuthMiddleware`` resolves the
caller once at the handshake: the token the handshake carries, else the session
cookie's user.
"""

from __future__ import annotations

from importlib import import_module

from channels.auth import get_user
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.cookie import parse_cookie
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from runtime.api.tokens import TokenInvalid, api_token_authenticate, token_from_header


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        try:
            raw = token_from_header(authentication.get_authorization_header(request))
            if raw is None:
                return None
            token = api_token_authenticate(raw)
        except TokenInvalid as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "runtime.api.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "Integration token: `Authorization: Token neta_…` (created with `manage.py token_create`).",
        }


@database_sync_to_async
def _token_user(raw: str):
    token = api_token_authenticate(raw)
    return token.user, token


class SocketAuthMiddleware:
    """ASGI middleware for websockets: who opens the socket, resolved once at the handshake.

    A token in ``Authorization`` wins: ``scope["api_token"]`` is the token, a bad one
    leaves an anonymous user and ``scope["auth_error"]`` saying why (the consumer closes
    with 4401). Without one, the browser's session cookie names the user. Channels'
    ``AuthMiddlewareStack`` did the latter lazily and wrapped the socket's ``send`` for
    good: its session wrapper saves sessions on HTTP responses only, and cost every frame
    a lazy-object lookup.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") == "websocket":
            headers = dict(scope.get("headers") or [])
            scope = dict(scope)
            scope["api_token"] = None
            try:
                raw = token_from_header(headers.get(b"authorization"))
                if raw is not None:
                    scope["user"], scope["api_token"] = await _token_user(raw)
                else:
                    key = parse_cookie(headers.get(b"cookie", b"").decode("latin-1")).get(settings.SESSION_COOKIE_NAME)
                    # Channels' rule: the session's user, its auth hash checked (the store reads lazily)
                    session = import_module(settings.SESSION_ENGINE).SessionStore(key) if key else None
                    scope["user"] = await get_user({"session": session}) if session is not None else AnonymousUser()
            except TokenInvalid as exc:
                scope["user"] = AnonymousUser()
                scope["auth_error"] = str(exc)
        return await self.app(scope, receive, send)
