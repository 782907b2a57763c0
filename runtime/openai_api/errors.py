"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``.

The status codes are the REST API's (docs/api.md, "Errors"); ``type`` follows the status as
OpenAI's clients expect it (their SDKs pick an exception class by status and read the body),
``param`` names the request parameter at fault (``input[1].content[0].image_url``,
``messages[2].role``, ``temperature``…), ``code`` is Neta's machine code or OpenAI's where one
exists (``model_not_found``, ``invalid_api_key``, ``rate_limit_exceeded``,
``previous_response_not_found``).
"""

from __future__ import annotations

import logging

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import set_rollback

from runtime.api.errors import classify

logger = logging.getLogger(__name__)

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    410: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}

# Neta's codes that OpenAI's clients know by another name.
CODES = {"authentication_failed": "invalid_api_key", "not_authenticated": "invalid_api_key", "throttled": "rate_limit_exceeded"}


class OpenAIError(Exception):
    """An error the OpenAI endpoints answer with ``status``; ``param`` names the parameter."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.headers = status, message, param, code, headers


def invalid(param: str | None, message: str, code: str = "invalid_value") -> OpenAIError:
    """A 400 about ``param``: the message names it."""
    return OpenAIError(400, f"{param}: {message}" if param else message, param=param, code=code)


def unsupported(param: str, message: str) -> OpenAIError:
    """A 400 for a parameter Neta cannot honour."""
    return OpenAIError(400, f"{param}: {message}", param=param, code="unsupported_parameter")


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict:
    kind = TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(exc: OpenAIError) -> JsonResponse:
    response = JsonResponse(error_body(exc.status, exc.message, param=exc.param, code=exc.code), status=exc.status)
    for name, value in (exc.headers or {}).items():
        response[name] = value
    return response


# What a Neta input field is called in an OpenAI request (runtime errors name Neta's fields).
PARAMS = {"text": "input", "images": "input", "agent": "model", "thinkingLevel": "reasoning", "fromEntryId": None, "entryId": None}


def as_openai(exc: BaseException, *, params: dict | None = None) -> OpenAIError | None:
    """``exc`` (an ``OpenAIError``, or anything the REST API classifies) as an ``OpenAIError``;
    None for an unexpected error."""
    if isinstance(exc, OpenAIError):
        return exc
    info = classify(exc)
    if info is None:
        return None
    param = None
    if info.fields:
        field = next(iter(info.fields))
        names = {**PARAMS, **(params or {})}
        head = field.split("[", 1)[0].split(".", 1)[0]
        param = names.get(head, field) if head in names else field
    headers = info.headers or None
    if isinstance(exc, exceptions.NotAuthenticated) or isinstance(exc, exceptions.AuthenticationFailed):
        headers = {"WWW-Authenticate": "Bearer"}
    message = info.message
    if info.status == 401 and info.code == "not_authenticated":
        message = "no API key: send a Neta API token as 'Authorization: Bearer neta_…'"
    return OpenAIError(info.status, message, param=param, code=CODES.get(info.code, info.code), headers=headers)


def exception_handler(exc, context):
    """The OpenAI views' DRF exception handler: every error in OpenAI's shape."""
    set_rollback()
    error = as_openai(exc, params=getattr(context.get("view"), "error_params", None))
    if error is None:
        logger.error("unhandled OpenAI endpoint error", exc_info=exc)
        error = OpenAIError(500, "internal error (logged on the server)", code="server_error")
    return Response(error_body(error.status, error.message, param=error.param, code=error.code), status=error.status, headers=error.headers)


@csrf_exempt  # a token client sends no CSRF token: its POST to a wrong path is a 404, not a 403
def not_found(request, *args, **kwargs):
    """Unknown paths under /v1/."""
    return error_response(OpenAIError(404, f"no endpoint at {request.method} {request.path}", code="unknown_url"))
