"""One error shape for the whole API.

Every error response is::

    {"error": {"code": "<machine code>", "message": "<for people>", "fields": {"<field>": ["…"]}}}

``fields`` is present when the error is about named input fields. Kernel and
runtime errors carry their own code (``session_busy``, ``entry_not_found`` …)
and map to a status here; views name the field an entry id came from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.defaults import server_error as html_server_error
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from runtime.errors import RuntimeInputError
from runtime.runs.summaries import NothingToCompact, SummaryCancelled, SummaryFailed
from sessions_tree.errors import (
    EntryNotFound,
    InvalidEntry,
    InvalidSessionFile,
    ResyncNeeded,
    SessionBusy,
    SessionNotFound,
    SessionTreeError,
)

logger = logging.getLogger(__name__)

KERNEL_STATUS = {
    SessionNotFound: status.HTTP_404_NOT_FOUND,
    EntryNotFound: status.HTTP_400_BAD_REQUEST,  # always an input naming a missing entry
    SessionBusy: status.HTTP_409_CONFLICT,
    InvalidEntry: status.HTTP_400_BAD_REQUEST,
    InvalidSessionFile: status.HTTP_400_BAD_REQUEST,
    ResyncNeeded: status.HTTP_410_GONE,
}

DRF_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
    exceptions.ParseError: "parse_error",
    exceptions.ValidationError: "invalid",
}


class ApiError(exceptions.APIException):
    """An error a view raises with an explicit code, status and optional field."""

    def __init__(self, code: str, message: str, *, status_code: int = 400, field: str | None = None):
        super().__init__(message)
        self.code, self.status_code, self.field = code, status_code, field


class FieldError(Exception):
    """A kernel/runtime error about a named input field (views wrap errors in this)."""

    def __init__(self, field: str, error: Exception):
        super().__init__(str(error))
        self.field, self.error = field, error


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    body = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    return {"error": body}


def _flatten(detail, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested validation detail as {"a.b[0].c": ["msg"]}."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int):  # an item of a list field
                path = f"{prefix}[{key}]"
            else:
                name = "" if key == "non_field_errors" else str(key)
                path = f"{prefix}.{name}" if prefix and name else (prefix or name)
            for k, v in _flatten(value, path).items():
                out.setdefault(k, []).extend(v)
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            out[prefix or "body"] = [str(item) for item in detail]
        else:
            for i, item in enumerate(detail):
                for k, v in _flatten(item, f"{prefix}[{i}]").items():
                    out.setdefault(k, []).extend(v)
    else:
        out[prefix or "body"] = [str(detail)]
    return out


@dataclass
class ErrorInfo:
    status: int
    code: str
    message: str
    fields: dict | None = None
    headers: dict | None = None

    def body(self) -> dict:
        return error_body(self.code, self.message, self.fields)


def _summary_error(exc) -> ErrorInfo | None:
    """Compaction / branch-summary failures."""
    if isinstance(exc, NothingToCompact):
        return ErrorInfo(409, "nothing_to_compact", str(exc))
    if isinstance(exc, SummaryCancelled):
        return ErrorInfo(409, "summary_cancelled", str(exc))
    if isinstance(exc, SummaryFailed):
        return ErrorInfo(502, "summary_failed", str(exc))
    return None


def classify(exc: BaseException) -> ErrorInfo | None:
    """Status, code, message and fields for an error; None for an unexpected one."""
    field = None
    if isinstance(exc, FieldError):
        field, exc = exc.field, exc.error
    if isinstance(exc, Http404):
        return ErrorInfo(404, "not_found", str(exc) or _("not found"))
    if isinstance(exc, DjangoPermissionDenied):
        return ErrorInfo(403, "permission_denied", str(exc) or _("permission denied"))
    if isinstance(exc, RequestDataTooBig):
        return ErrorInfo(413, "too_large", _("the request body is too large"))
    if isinstance(exc, SuspiciousOperation):
        return ErrorInfo(400, "bad_request", str(exc))
    if isinstance(exc, ApiError):
        fields = {exc.field: [str(exc.detail)]} if exc.field else None
        return ErrorInfo(exc.status_code, exc.code, str(exc.detail), fields)
    if isinstance(exc, RuntimeInputError):
        message = str(exc).split(": ", 1)[-1]
        return ErrorInfo(400, "invalid", str(exc), {exc.field: [message]})
    if isinstance(exc, SessionTreeError):
        status_code = getattr(exc, "http_status", None) or next((s for cls, s in KERNEL_STATUS.items() if isinstance(exc, cls)), 400)
        if isinstance(exc, EntryNotFound) and field is None:
            status_code = 404
        fields = {field: [str(exc)]} if field else None
        return ErrorInfo(status_code, exc.code, str(exc), fields)
    summary = _summary_error(exc)
    if summary is not None:
        return summary
    if isinstance(exc, RecursionError):
        # The parser bounds request nesting; anything else nested past Python's
        # recursion limit is still the input's shape, not a server fault.
        return ErrorInfo(400, "too_deep", _("the input is nested too deeply to process"))
    if isinstance(exc, exceptions.APIException):
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = "%d" % exc.wait
        code = next((c for cls, c in DRF_CODES.items() if isinstance(exc, cls)), "error")
        if isinstance(exc, exceptions.PermissionDenied) and str(exc.detail).startswith("CSRF Failed"):
            code = "csrf_failed"
        if isinstance(exc, exceptions.ValidationError):
            fields = _flatten(exc.detail)
            name, messages = next(iter(fields.items()))
            message = f"{name}: {messages[0]}" if name != "body" else messages[0]
            return ErrorInfo(exc.status_code, code, message, fields, headers)
        return ErrorInfo(exc.status_code, code, str(exc.detail), None, headers)
    return None


def api_exception_handler(exc, context):
    """DRF's ``EXCEPTION_HANDLER``: everything becomes the one error shape."""
    info = classify(exc)
    set_rollback()
    if isinstance(exc, RecursionError):
        logger.warning("RecursionError answered 400", exc_info=exc)
    if info is None:
        logger.error("unhandled API error", exc_info=exc)
        info = ErrorInfo(500, "server_error", _("internal error (logged on the server)"))
    return Response(info.body(), status=info.status, headers=info.headers or None)


@csrf_exempt  # a token client sends no CSRF token: its POST to a wrong path is a 404, not the CSRF page
def api_not_found(request, *args, **kwargs):
    """Unknown paths under /api/: the same shape as every other error."""
    return JsonResponse(error_body("not_found", _("no API endpoint at %(path)s") % {"path": request.path}), status=404)


def server_error(request, *args, **kwargs):
    """``handler500``: what escapes every other handler (middleware, a renderer) still
    answers in the one shape under /api/ (in OpenAI's under /v1/); pages keep Django's HTML page."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("server_error", _("internal error (logged on the server)")), status=500)
    if request.path.startswith("/v1/"):  # the OpenAI-compatible endpoints: OpenAI's shape (runtime/openai_api/errors.py)
        body = {"error": {"message": "internal error (logged on the server)", "type": "server_error", "param": None, "code": "server_error"}}
        return JsonResponse(body, status=500)

    return html_server_error(request, *args, **kwargs)
