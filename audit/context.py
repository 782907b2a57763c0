"""Which door a write came through, and its request id, for the audit rows written meanwhile.

The middleware sets both for each HTTP request (``/admin/`` → console, ``/api/`` → api); the
websocket consumer sets ``socket``; nothing set means a command or a task (``cli``).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import uuid
from collections.abc import Iterator

_via: contextvars.ContextVar[str | None] = contextvars.ContextVar("audit_via", default=None)
_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("audit_request_id", default="")

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def clean_request_id(value) -> str:
    """A client's ``X-Request-ID`` if it is a plain token of at most 64 characters, else a new one."""
    if isinstance(value, str) and _SAFE_ID.match(value):
        return value
    return uuid.uuid4().hex


@contextlib.contextmanager
def audit_context(*, via: str, request_id: str = "") -> Iterator[None]:
    """Audit rows written inside the block say ``via`` and ``request_id``; nests."""
    t1 = _via.set(via)
    t2 = _request_id.set(request_id)
    try:
        yield
    finally:
        _request_id.reset(t2)
        _via.reset(t1)


def current_via() -> str | None:
    return _via.get()


def current_request_id() -> str:
    return _request_id.get()
