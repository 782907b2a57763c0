"""Permissions: signed in, and read-only tokens only read."""

from __future__ import annotations

from rest_framework import permissions

from runtime.models import ApiToken


def is_read_only_token(auth) -> bool:
    return isinstance(auth, ApiToken) and auth.read_only


class ApiAccess(permissions.BasePermission):
    """An authenticated, active user; a read-only token may only use safe methods."""

    message = "this token is read-only"

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated and user.is_active):
            return False
        if request.method in permissions.SAFE_METHODS:
            return True
        return not is_read_only_token(request.auth)
