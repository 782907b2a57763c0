"""Integration tokens over the API: list, create, revoke, rotate (the secret shown once).

A user manages their own tokens; staff holding the token permissions (a superuser) manage
anyone's. Another user's token looks like a missing one. A read-only token cannot write.
"""

from __future__ import annotations
from django.utils.translation import gettext as _

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime.api import serializers as S
from runtime.api.errors import ApiError
from runtime.api.tokens import api_token_create, api_token_revoke, api_token_rotate
from runtime.api.views.base import READ_ERRORS, WRITE_ERRORS, parse
from runtime.models import ApiToken

MAX_LISTED = 500


def _manages_all(user, action: str) -> bool:
    return user.is_superuser or (user.is_staff and user.has_perm(f"runtime.{action}_apitoken"))


def _tokens(user, action: str = "view"):
    qs = ApiToken.objects.select_related("user")
    return qs if _manages_all(user, action) else qs.filter(user=user)


def _token(request, token_id: int, action: str) -> ApiToken:
    token = _tokens(request.user, action).filter(pk=token_id).first()
    if token is None:
        raise ApiError("not_found", _("no token %(token_id)s") % {"token_id": token_id}, status_code=404)
    return token


class TokenListApi(APIView):
    @extend_schema(summary="Your integration tokens (staff: everyone's), newest first", responses={200: S.TokenOut(many=True), **READ_ERRORS})
    def get(self, request):
        return Response(S.TokenOut(_tokens(request.user)[:MAX_LISTED], many=True).data)

    @extend_schema(summary="Create a token for yourself (its secret is in this answer only)", request=S.TokenCreateInput, responses={201: S.TokenIssuedOut, **WRITE_ERRORS})
    def post(self, request):
        data = parse(S.TokenCreateInput, request.data)
        issued = api_token_create(
            user=request.user, read_only=data["readOnly"], days=data.get("days"), name=data.get("name") or "", created_by=request.user
        )
        return Response({"token": S.TokenOut(issued.token).data, "secret": issued.secret}, status=status.HTTP_201_CREATED)


class TokenRevokeApi(APIView):
    @extend_schema(summary="Revoke a token (its sockets close)", request=None, responses={200: S.TokenOut, **WRITE_ERRORS})
    def post(self, request, token_id: int):
        token = api_token_revoke(token=_token(request, token_id, "change"), actor=request.user)
        return Response(S.TokenOut(token).data)


class TokenRotateApi(APIView):
    @extend_schema(
        summary="Rotate a token: a new secret (in this answer only) for the same user, name, scope and expiry; the old one stops working",
        request=None, responses={201: S.TokenIssuedOut, **WRITE_ERRORS},
    )  # fmt: skip
    def post(self, request, token_id: int):
        token = _token(request, token_id, "change")
        try:
            issued = api_token_rotate(token=token, actor=request.user)
        except ValueError as exc:
            raise ApiError("conflict", str(exc), status_code=409) from exc
        return Response({"token": S.TokenOut(issued.token).data, "secret": issued.secret}, status=status.HTTP_201_CREATED)
