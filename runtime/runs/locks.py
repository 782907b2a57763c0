"""The session row: found, and locked for the rest of a transaction (the one lock order)."""

from __future__ import annotations

from sessions_tree.errors import SessionNotFound
from sessions_tree.models import AgentSession


def session_or_not_found(session_id: str) -> AgentSession:
    meta = AgentSession.objects.filter(session_id=session_id).first()
    if meta is None:
        raise SessionNotFound(f"no session {session_id!r}")
    return meta


def lock_session(meta: AgentSession) -> AgentSession:
    """Lock ``meta``'s row (by primary key) for the rest of the transaction and read it again.

    The lock that serializes a session's prompts with its deletion. On
    MySQL/MariaDB it is the row's ``SELECT … FOR UPDATE``. SQLite has no row locks, but
    every transaction there begins ``IMMEDIATE`` (``neta/env.py``), holding the database's
    write lock from its first statement, so this read already excludes every other writer.
    A session deleted meanwhile (or deleted and imported again under the same id, a new
    row) raises ``SessionNotFound``.
    """
    locked = AgentSession.objects.select_for_update().filter(pk=meta.pk, session_id=meta.session_id).first()
    if locked is None:
        raise SessionNotFound(f"no session {meta.session_id!r}")
    return locked
