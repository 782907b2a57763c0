"""Who is calling: integration tokens (REST and websockets) and browser sessions.

REST: ``ApiTokenAuthentication`` reads ``Authorization: Token <token>`` (or
``Bearer``); browsers use Django's session with CSRF (DRF's
``SessionAuthentication``). Websockets: ``TokenAuthMiddleware`` sits inside
``AuthMiddlewareStack`` and, when the handshake carries a token, replaces the
cookie user with the token's user.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser
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


class TokenAuthMiddleware:
    """ASGI middleware for websockets: a token in the handshake wins over the session cookie.

    Sets ``scope["api_token"]`` to the token; a bad token leaves an anonymous
    user and ``scope["auth_error"]`` saying why (the consumer closes with 4401).
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") == "websocket":
            header = dict(scope.get("headers") or []).get(b"authorization")
            scope = dict(scope)
            scope["api_token"] = None
            try:
                raw = token_from_header(header)
                if raw is not None:
                    scope["user"], scope["api_token"] = await _token_user(raw)
            except TokenInvalid as exc:
                scope["user"] = AnonymousUser()
                scope["auth_error"] = str(exc)
        return await self.app(scope, receive, send)
