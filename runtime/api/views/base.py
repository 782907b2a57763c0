"""What every API view shares: the error schemas, the session lookup with its access check,
input parsing."""

from __future__ import annotations
from django.utils.translation import gettext as _

import contextlib

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    inline_serializer,
)
from rest_framework import permissions, serializers
from rest_framework.views import APIView

from runtime.api.errors import ApiError, FieldError
from runtime.models import ApiToken
from runtime.runs.locks import session_or_none
from runtime.sessions.access import session_access
from sessions_tree.errors import EntryNotFound
from sessions_tree.models import AgentSession

ERROR = inline_serializer(
    "Error",
    fields={
        "error": inline_serializer(
            "ErrorBody",
            fields={
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False),
            },
        )
    },
)


READ_ERRORS = {401: ERROR, 403: ERROR, 404: ERROR}


WRITE_ERRORS = {400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR}


SESSION_ID = OpenApiParameter("session_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="Session id")


def required_access(request) -> str:
    """What a request needs of its session: reads read, DELETE deletes, every other write writes."""
    if request.method in permissions.SAFE_METHODS:
        return "read"
    return "delete" if request.method == "DELETE" else "write"


def session_or_404(request, session_id: str, need: str | None = None) -> AgentSession:
    """The session, if the caller may do ``need`` (default: what the method needs) with it.

    A session the caller may not read answers 404 exactly like a missing one; one
    they may read but not write (or delete) answers 403.
    """
    meta = session_or_none(session_id)
    token = request.auth if isinstance(request.auth, ApiToken) else None
    access = session_access(request.user, meta, token=token)
    if not access.read:
        raise ApiError("session_not_found", _("no session %(session_id)r") % {"session_id": session_id}, status_code=404)
    need = need or required_access(request)
    if not access.allows(need):
        verb = "delete" if need == "delete" else "change"
        raise ApiError("permission_denied", _("you may read this session but not %(verb)s it") % {"verb": verb}, status_code=403)
    return meta


def parse(serializer_cls, data) -> dict:
    serializer = serializer_cls(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


@contextlib.contextmanager
def entry_field(name: str):
    """Report a missing entry as an error about input field ``name``."""
    try:
        yield
    except EntryNotFound as exc:
        raise FieldError(name, exc) from exc


class SessionApi(APIView):
    """Base for per-session endpoints (``<session_id>`` in the URL). Before any handler runs,
    ``initial`` finds the session and checks the caller's access to it — what the method needs
    (``required_access``: read, write, delete) unless ``session_needs`` says otherwise for a
    method — so a handler cannot forget it; the handler reads the session as ``self.meta``. A
    session the caller may not read is 404 exactly like a missing one; read-only access to a
    write is 403."""

    session_needs: dict[str, str] = {}
    meta: AgentSession

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authentication, permissions, throttles first
        need = self.session_needs.get(request.method) or required_access(request)
        self.meta = session_or_404(request, kwargs["session_id"], need=need)


def safe_filename(value: str) -> str:
    """``value`` as a file name part (exports, the import report): letters, digits, ``-_.``."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in value)[:80] or "session"
