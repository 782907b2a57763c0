"""Session tree providers: ``get_provider("file" | "mysql")`` (docs/sessions.md)."""

from __future__ import annotations
from django.utils.translation import gettext as _

import logging

from sessions_tree.errors import SessionNotFound
from sessions_tree.models import AgentSession, SessionProviderKind
from sessions_tree.providers.base import SessionTreeProvider, load_meta_any
from sessions_tree.providers.file import FileProvider
from sessions_tree.providers.mysql import MysqlProvider

logger = logging.getLogger(__name__)

SESSION_PROVIDER_KINDS = (SessionProviderKind.FILE.value, SessionProviderKind.MYSQL.value)
_CLASSES = {SessionProviderKind.FILE.value: FileProvider, SessionProviderKind.MYSQL.value: MysqlProvider}


def get_provider(kind: str, *, using: str = "default") -> SessionTreeProvider:
    """The provider for ``kind`` (``file`` or ``mysql``) on database alias ``using``."""
    try:
        cls = _CLASSES[kind]
    except KeyError:
        raise ValueError(f"unknown session provider {kind!r} (use one of: {', '.join(SESSION_PROVIDER_KINDS)})") from None
    return cls(using=using)


def resolve_session_provider_kind(agent_config) -> str:
    """The provider kind an agent config asks for: ``file`` (default) or ``mysql``.

    Accepts a mapping or an object with ``session_provider``; anything else falls
    back to ``file`` with a warning.
    """
    if agent_config is None:
        return SessionProviderKind.FILE.value
    if isinstance(agent_config, dict):
        value = agent_config.get("session_provider", agent_config.get("sessionProvider"))
    else:
        value = getattr(agent_config, "session_provider", None)
    if value in (None, ""):
        return SessionProviderKind.FILE.value
    if isinstance(value, str) and value.strip().lower() in SESSION_PROVIDER_KINDS:
        return value.strip().lower()
    logger.warning("unknown session provider %r in agent config; using 'file'", value)
    return SessionProviderKind.FILE.value


def provider_for_session(session_id: str, *, using: str = "default") -> SessionTreeProvider:
    """The provider that holds ``session_id``."""
    kind = AgentSession.objects.using(using).filter(session_id=session_id).values_list("provider", flat=True).first()
    if kind is None:
        raise SessionNotFound(_("no session %(session_id)r") % {"session_id": session_id})
    return get_provider(kind, using=using)


def open_session(session_id: str, *, using: str = "default") -> tuple[SessionTreeProvider, AgentSession]:
    """The provider that holds ``session_id`` and the session's meta row, in one read."""
    meta = load_meta_any(session_id, using=using)
    if meta is None:
        raise SessionNotFound(_("no session %(session_id)r") % {"session_id": session_id})
    return get_provider(meta.provider, using=using), meta


def session_source(session_id: str, *, using: str = "default") -> tuple[dict, list[dict], str | None]:
    """(header, entries, leaf) of a stored session, for ``session_context`` and exports."""
    return provider_for_session(session_id, using=using).session_source(session_id)


__all__ = [
    "FileProvider",
    "MysqlProvider",
    "SESSION_PROVIDER_KINDS",
    "SessionTreeProvider",
    "get_provider",
    "open_session",
    "provider_for_session",
    "resolve_session_provider_kind",
    "session_source",
]
