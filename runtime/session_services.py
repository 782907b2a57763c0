"""Session services the API and the gateway offer besides the runtime's own.

Create, rename, archive, delete, label, fork and import: keyword-only
``session_<action>`` functions taking the acting user where it matters. Each
change is one kernel call, so it commits (and publishes its tree event) as one
transaction or not at all.
"""

from __future__ import annotations

from pathlib import Path

from runtime.models import Agent
from runtime.services import RuntimeInputError, active_run, default_agent, session_start
from sessions_tree.errors import SessionBusy, SessionTreeError
from sessions_tree.models import AgentSession, SessionStatus
from sessions_tree.pi_files import import_session_file, read_session_file
from sessions_tree.providers import PROVIDER_KINDS, get_provider, provider_for_session, resolve_session_provider_kind

MAX_TITLE = 500
MAX_LABEL = 200


class SessionExists(SessionTreeError):
    """An import names a session id that is already stored."""

    code = "session_exists"
    http_status = 409


def agent_by_name(name: str | None) -> Agent:
    """The enabled agent called ``name`` (default: the default agent)."""
    if not name:
        return default_agent()
    agent = Agent.objects.select_related("model").filter(name=name, enabled=True).first()
    if agent is None:
        raise RuntimeInputError("agent", f"no enabled agent named {name!r}")
    return agent


def _clean_title(title) -> str:
    if not isinstance(title, str) or not title.strip():
        raise RuntimeInputError("title", "must be a non-empty string")
    if len(title) > MAX_TITLE:
        raise RuntimeInputError("title", f"is longer than {MAX_TITLE} characters")
    return title.strip()


def session_create(*, user, agent_name: str | None = None, title: str | None = None) -> AgentSession:
    """A new session for the agent (its provider, model and thinking level), owned by ``user``."""
    agent = agent_by_name(agent_name)
    clean_title = _clean_title(title) if title is not None else None
    meta = session_start(agent=agent, user=user)
    if clean_title is not None:
        # Pi's way to name a session: a session_info entry (the title mirrors it).
        get_provider(meta.provider).append_session_info(meta.session_id, name=clean_title)
    return AgentSession.objects.get(pk=meta.pk)


def session_rename(*, session_id: str, title: str) -> dict:
    """Append a ``session_info`` entry (Pi's /name); returns the entry."""
    clean = _clean_title(title)
    return provider_for_session(session_id).append_session_info(session_id, name=clean)


def session_set_status(*, session_id: str, status: str) -> AgentSession:
    if status not in SessionStatus.values:
        raise RuntimeInputError("status", f"must be one of {', '.join(SessionStatus.values)}")
    return provider_for_session(session_id).update_session(session_id, status=status)


def session_delete(*, session_id: str) -> None:
    """Delete the session and its stored entries (refused while a run is active)."""
    provider = provider_for_session(session_id)
    if active_run(session_id) is not None:
        raise SessionBusy("a run is active: abort it before deleting the session")
    provider.delete_session(session_id)


def session_label(*, session_id: str, entry_id: str, label: str | None) -> dict:
    """Set (or with ``None``/"" clear) the label of an entry; returns the label entry."""
    if not isinstance(entry_id, str) or not entry_id:
        raise RuntimeInputError("entryId", "must be an entry id")
    if label is not None and (not isinstance(label, str) or len(label) > MAX_LABEL):
        raise RuntimeInputError("label", f"must be a string of at most {MAX_LABEL} characters, or null")
    label = label.strip() if label else None
    return provider_for_session(session_id).append_label_change(session_id, target_id=entry_id, label=label or None)


def session_fork(*, session_id: str, entry_id: str, user) -> AgentSession:
    """A new session holding the root→``entry_id`` path (Pi's fork), owned by ``user``."""
    if not isinstance(entry_id, str) or not entry_id:
        raise RuntimeInputError("entryId", "must be an entry id")
    return provider_for_session(session_id).create_branched_session(session_id, entry_id, user=user)


def session_import(*, path: Path, user, agent_name: str | None = None, provider_kind: str | None = None) -> AgentSession:
    """Import a Pi session file for ``user``. A file that is not a Pi session is refused whole."""
    agent = agent_by_name(agent_name)
    kind = provider_kind or resolve_session_provider_kind(agent)
    if kind not in PROVIDER_KINDS:
        raise RuntimeInputError("provider", f"must be one of {', '.join(PROVIDER_KINDS)}")
    header, *_ = read_session_file(path)
    if AgentSession.objects.filter(session_id=header["id"]).exists():
        raise SessionExists(f"a session with id {header['id']} already exists")
    return import_session_file(path, provider_kind=kind, user=user, agent=agent.name)
