"""``record``: the one way to write the audit log (docs/console.md, "Audit log")."""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from audit.context import current_request_id, current_via
from audit.models import AuditEntry, Via

Target = models.Model | tuple


def _target(target: Target) -> tuple[str, str, str]:
    if isinstance(target, models.Model):
        return target._meta.label_lower, str(getattr(target, "audit_id", target.pk)), str(target)[:200]
    if isinstance(target, tuple) and len(target) in (2, 3):
        kind, ident = str(target[0]), str(target[1])
        return kind, ident, str(target[2] if len(target) == 3 else "")[:200]
    raise TypeError(f"an audit target is a model instance or (type, id[, label]), not {target!r}")


def audited(actor, via: str) -> bool:
    """Whether a write by ``actor`` through ``via`` is recorded: every console write, every
    write by staff (or a superuser) through the API or the socket, and every write with no
    user (a command). A user's writes to their own sessions are in the session's event log."""
    if via in (Via.CONSOLE, Via.CLI) or actor is None or getattr(actor, "pk", None) is None:
        return True
    return bool(getattr(actor, "is_staff", False) or getattr(actor, "is_superuser", False))


def _jsonable(value: Any) -> Any:
    # Round-trip through the encoder the column uses: datetimes, Decimals and UUIDs become strings
    # now, so what is stored is what a later read returns.
    return None if value is None else json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def record(
    *,
    actor,
    action: str,
    target: Target,
    before: dict | None = None,
    after: dict | None = None,
    via: str | None = None,
    request_id: str | None = None,
) -> AuditEntry | None:
    """Write one audit row (call it inside the change's transaction; bulk actions call it once
    per object). ``action`` is ``<thing>.<verb>`` (``session.rename``, ``token.revoke``);
    ``target`` a model instance or ``(type, id[, label])``; ``via`` defaults to the request's
    door (console / api / socket), else ``cli``; ``request_id`` to the request's id.
    Returns the row, or None when the write is not audited (a non-staff user's own write)."""
    via = via or current_via() or Via.CLI
    if via not in Via.values:
        raise ValueError(f"via must be one of {', '.join(Via.values)}")
    if not audited(actor, via):
        return None
    kind, ident, label = _target(target)
    user = actor if getattr(actor, "pk", None) is not None else None
    return AuditEntry.objects.create(
        actor=user,
        actor_name=user.get_username() if user is not None else "",
        action=action,
        target_type=kind,
        target_id=ident,
        target_repr=label,
        before=_jsonable(before),
        after=_jsonable(after),
        via=via,
        request_id=request_id if request_id is not None else current_request_id(),
    )


def changed_fields(before: dict, after: dict) -> tuple[dict, dict]:
    """Only the keys whose values differ, from both sides."""
    keys = [k for k in {**before, **after} if before.get(k) != after.get(k)]
    return {k: before.get(k) for k in keys}, {k: after.get(k) for k in keys}
