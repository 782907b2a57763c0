"""Integration tokens: create (shown once), authenticate, revoke, rotate.

A token is ``neta_`` followed by 43 url-safe characters (256 random bits). The
database keeps only its SHA-256 digest and a short prefix for lists; nothing
that could be turned back into the token. ``last_used_at`` is written at most
once a minute per token, so reads do not turn into writes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from audit.services import record
from runtime.models import ApiToken, TokenScope
from runtime.realtime.publisher import withdraw_token
from infra.prepared import P, Prepared

TOKEN_PREFIX = "neta_"
PREFIX_CHARS = 12
LAST_USED_RESOLUTION = dt.timedelta(seconds=60)
MAX_TOKEN_DAYS = 3650


class TokenInvalid(Exception):
    """The presented token is unknown, malformed, revoked or expired (the message says which)."""


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str  # the token itself: shown once, never stored


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _token_values(token: ApiToken) -> dict:
    return {
        "user_id": token.user_id, "name": token.name, "prefix": token.prefix, "scope": token.scope,
        "expires_at": token.expires_at, "revoked_at": token.revoked_at,
    }  # fmt: skip


def api_token_create(*, user, read_only: bool = False, days: int | None = None, name: str = "", created_by=None) -> IssuedToken:
    """A new token for ``user``; ``days`` (1..3650) makes it expire, None: never. ``created_by``
    acts (the audit log names them)."""
    if days is not None and (not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= MAX_TOKEN_DAYS):
        raise ValueError(f"days: must be a whole number from 1 to {MAX_TOKEN_DAYS}")
    expires_at = timezone.now() + dt.timedelta(days=days) if days else None
    return _issue(user=user, read_only=read_only, expires_at=expires_at, name=name, created_by=created_by, action="token.create")


def may_issue_for(actor, user) -> bool:
    """May ``actor`` receive a secret that acts as ``user``? For themselves, for an account
    without console rights, or — for a staff or superuser account — only a superuser (a token
    is the account: issuing one for a superuser would make its holder one). ``actor`` None: the
    command line (``manage.py token_create``)."""
    if actor is None or getattr(actor, "is_superuser", False) or getattr(actor, "pk", None) == user.pk:
        return True
    return not (user.is_staff or user.is_superuser)


def _issue(*, user, read_only: bool, expires_at, name: str, created_by, action: str, before=None) -> IssuedToken:
    if user is None or not getattr(user, "pk", None):
        raise ValueError("user: a saved user is required")
    if not may_issue_for(created_by, user):
        raise PermissionDenied(f"a token for the staff account {user} acts as it: only a superuser (or {user} itself) may issue or rotate one")
    if not user.is_active:
        raise ValueError(f"user: {user} is inactive")
    if not isinstance(name, str) or len(name) > 100:
        raise ValueError("name: at most 100 characters")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=raw[:PREFIX_CHARS],
            digest=token_digest(raw),
            scope=TokenScope.READ_ONLY if read_only else TokenScope.READ_WRITE,
            expires_at=expires_at,
            created_by=created_by,
        )
        record(actor=created_by, action=action, target=token, before=before, after=_token_values(token))
    return IssuedToken(token=token, secret=raw)


def api_token_revoke(*, token: ApiToken, actor=None) -> ApiToken:
    """Revoke ``token`` (idempotent: the first revocation time is kept); the sockets
    opened with it close (4401) once this commits (an ``update`` sends no ``post_save``)."""
    with transaction.atomic():
        if ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()):
            before = _token_values(token)
            token.refresh_from_db()
            record(actor=actor, action="token.revoke", target=token, before={"revoked_at": before["revoked_at"]}, after={"revoked_at": token.revoked_at})
        else:
            token.refresh_from_db()
    withdraw_token(token.pk, "token revoked")
    return token


def api_token_rotate(*, token: ApiToken, actor=None) -> IssuedToken:
    """Replace ``token`` by a new one for the same user, name, scope and expiry: the old one
    is revoked (its sockets close) in the transaction that creates the new one, whose secret
    is returned once. A revoked or expired token is not rotated (create a new one)."""
    with transaction.atomic():
        old = ApiToken.objects.select_for_update().select_related("user").get(pk=token.pk)
        problem = token_problem(old)
        if problem is not None:
            raise ValueError(f"token: {problem}; a token that cannot be used is not rotated")
        ApiToken.objects.filter(pk=old.pk).update(revoked_at=timezone.now())
        old.refresh_from_db()
        issued = _issue(
            user=old.user, read_only=old.read_only, expires_at=old.expires_at, name=old.name, created_by=actor,
            action="token.rotate", before={**_token_values(old), "id": old.pk},
        )  # fmt: skip
    withdraw_token(old.pk, "token rotated")
    token.refresh_from_db()
    return issued


def token_problem(token: ApiToken, *, now: dt.datetime | None = None) -> str | None:
    """Why ``token`` (with its user) may not be used now, or None when it may."""
    now = now or timezone.now()
    if token.revoked_at is not None:
        return "token revoked"
    if token.expires_at is not None and token.expires_at <= now:
        return "token expired"
    if not token.user.is_active:
        return "user inactive"
    return None


def api_token_authenticate(raw: str) -> ApiToken:
    """The usable token for ``raw`` (with its user), or ``TokenInvalid``."""
    if not isinstance(raw, str) or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        raise TokenInvalid("malformed token")
    token = _TOKEN_BY_DIGEST.first(digest=token_digest(raw))
    if token is None:
        raise TokenInvalid("unknown token")
    now = timezone.now()
    problem = token_problem(token, now=now)
    if problem is not None:
        raise TokenInvalid(problem)
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


_TOKEN_BY_DIGEST = Prepared(lambda: ApiToken.objects.select_related("user").filter(digest=P("digest")).order_by("pk")[:1])


def token_from_header(value: str | bytes | None) -> str | None:
    """The token in an ``Authorization: Token <t>`` (or ``Bearer <t>``) header, if any.

    None when the header is absent or names another scheme; ``TokenInvalid``
    when it names ours but is malformed.
    """
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin1")
    parts = value.split()
    if not parts or parts[0].lower() not in ("token", "bearer"):
        return None  # another scheme (Basic, …): not ours
    if len(parts) != 2:
        raise TokenInvalid("malformed Authorization header: expected 'Token <token>'")
    return parts[1]
