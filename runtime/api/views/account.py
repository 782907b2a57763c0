"""The caller: who they are, and the CSRF cookie for browser clients."""

from __future__ import annotations

from django.middleware.csrf import get_token
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.utils import (
    extend_schema,
)
from rest_framework import permissions
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime.api import serializers as S
from drf_spectacular.types import OpenApiTypes

from runtime.agents.instructions import settings_data, user_settings_update
from runtime.api.views.base import ERROR, parse
from runtime.models import ApiToken


class MeApi(APIView):
    @extend_schema(summary="Who the API sees (user, staff, token scope)", responses={200: S.MeOut, 401: ERROR})
    def get(self, request):
        token = request.auth if isinstance(request.auth, ApiToken) else None
        return Response(
            {
                "username": request.user.get_username(),
                "isStaff": request.user.is_staff,
                "auth": "token" if token else "session",
                "tokenScope": token.scope if token else None,
            }
        )


@method_decorator(ensure_csrf_cookie, name="get")
class CsrfApi(APIView):
    permission_classes = [permissions.AllowAny]
    authentication_classes = []

    @extend_schema(summary="Set the CSRF cookie for browser clients and return the token", responses={200: S.CsrfOut})
    def get(self, request):
        return Response({"csrfToken": get_token(request)})


class SettingsApi(APIView):
    """The caller's own settings on the chat page (docs/chat.md, "Settings")."""

    @extend_schema(summary="Your settings (custom instructions)", responses={200: OpenApiTypes.OBJECT, 401: ERROR})
    def get(self, request):
        return Response(settings_data(request.user))

    @extend_schema(summary="Change your custom instructions (added to the system prompt of your runs)", request=S.SettingsInput, responses={200: OpenApiTypes.OBJECT, 400: ERROR, 401: ERROR, 403: ERROR})
    def put(self, request):
        data = parse(S.SettingsInput, request.data)
        user_settings_update(request.user, custom_instructions=data["customInstructions"])
        return Response(settings_data(request.user))
