"""Session write services: start, create, rename, hand over, set status, label, fork, import,
switch the leaf, compact, delete.

Views, consumers and commands call these; every read and write of an existing session goes
through the store the session names (``provider_for_session``).

Every write takes the acting user, ``actor=`` (the owner, or staff acting on another user's
session; None from the command line), and does its writes ``acting_as(actor)``: the tree
events it records name that user in ``SessionEvent.actor`` (docs/runtime.md, "Who did it").
A deletion, which removes the event log with the session, says who in the
``runtime.sessions.audit`` log.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from django.db import transaction
from django.utils.translation import gettext as _

from audit.context import current_via
from audit.services import audited, record
from runtime.agents.selectors import agent_by_name, agent_for_session
from runtime.agents.workspaces import delete_session_directories, new_session_workspace
from runtime.errors import RuntimeInputError, non_empty
from runtime.models import (
    Agent,
    AgentRun,
    RunInput,
)
from runtime.runs.locks import lock_session, session_or_not_found
from runtime.runs.reaper import reap_session
from runtime.runs.selectors import active_run
from runtime.runs.summaries import compact_session, switch_leaf
from sessions_tree.acting import acting_as, also_in_change
from sessions_tree.errors import InvalidEntry, SessionBusy, SessionNotFound
from sessions_tree.models import AgentSession, SessionStatus
from sessions_tree.pi_files import import_session_file
from sessions_tree.providers import (
    SESSION_PROVIDER_KINDS,
    get_provider,
    provider_for_session,
    resolve_session_provider_kind,
)

audit = logging.getLogger("runtime.sessions.audit")

SESSION_TARGET = "sessions_tree.agentsession"  # the audit log's target type for a session (its id: the session id)


def _audit(actor, action: str, session_id: str, *, before=None, after=None, label: str = "", fields=()):
    """Record a staff write to a session in the transaction of the tree change it makes
    (``also_in_change``); ``fields`` are read from the session row first, as ``before``."""
    if not audited(actor, current_via() or "cli"):
        return contextlib.nullcontext()
    if fields:
        row = AgentSession.objects.filter(session_id=session_id).values(*{"title", *fields}).first() or {}
        label = label or row.get("title", "")
        before = {**{k: row.get(k) for k in fields}, **(before or {})}

    def write():
        record(actor=actor, action=action, target=(SESSION_TARGET, session_id, label), before=before, after=after)

    return also_in_change(write)


def session_start(*, agent: Agent, user=None, title: str = "") -> AgentSession:
    """A new session for ``agent`` owned by ``user`` (who also acts: a session is started by
    its owner), opened like Pi's SDK: model and thinking level first."""
    with acting_as(user):
        return _session_start(agent=agent, user=user, title=title)


def _session_start(*, agent: Agent, user, title: str) -> AgentSession:
    provider = get_provider(resolve_session_provider_kind(agent))
    session_id, cwd = new_session_workspace(agent, user)  # the Pi cwd: where this session's tools work
    meta = provider.create_session(session_id=session_id, cwd=str(cwd), user=user, agent=agent.name, title=title)
    model = agent.model
    # Written on the row just made, which each write brings up to date: no read of it.
    provider.append_model_change(meta.session_id, provider=model.provider_name or model.provider_kind, model_id=model.model_id, meta=meta)
    provider.append_thinking_level_change(meta.session_id, agent.thinking_level, meta=meta)
    return meta


def session_for_agent(*, agent: Agent, user=None, new: bool = False) -> AgentSession:
    """The session a user lands in: the last one when the agent restores sessions (and ``new``
    is not asked for), else a new one. "New" reuses the user's untouched session of the agent
    (no message, no title) when there is one, so opening the page, switching agents or
    pressing "New session" never leaves a trail of empty sessions behind."""
    mine = AgentSession.objects.filter(agent=agent.name, user=user, status="active")
    if agent.restore_last_session and not new:
        last = mine.order_by("-updated_at", "-pk").first()
        if last is not None:
            return last
    if user is not None:
        empty = mine.filter(message_count=0, title="").order_by("-updated_at", "-pk").first()
        if empty is not None:
            return empty
    return session_start(agent=agent, user=user)


def session_switch_leaf(
    *, session_id: str, entry_id: str | None, actor, summarize: bool = False, instructions: str | None = None
) -> dict:

    meta = AgentSession.objects.filter(session_id=session_id).first()
    if meta is None:
        raise SessionNotFound(f"no session {session_id!r}")
    if active_run(session_id) is not None:
        raise SessionBusy("a run is active: abort it or wait before moving the leaf")
    after = {"leaf_entry_id": entry_id, "summarize": bool(summarize)}
    with acting_as(actor), _audit(actor, "session.switch_leaf", session_id, fields=("leaf_entry_id",), after=after):
        return switch_leaf(session_id, entry_id, agent=agent_for_session(meta), summarize_branch=summarize, instructions=instructions)


def session_compact(*, session_id: str, actor, instructions: str | None = None) -> dict:

    meta = AgentSession.objects.filter(session_id=session_id).first()
    if meta is None:
        raise SessionNotFound(f"no session {session_id!r}")
    if active_run(session_id) is not None:
        raise SessionBusy("a run is active: abort it or wait before compacting")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidEntry("instructions must be a string")
    after = {"instructions": instructions}
    with acting_as(actor), _audit(actor, "session.compact", session_id, fields=("leaf_entry_id", "entry_count"), after=after):
        return compact_session(session_id, agent=agent_for_session(meta), instructions=instructions)


MAX_TITLE = 500


MAX_LABEL = 200


def clean_title(title) -> str:
    """A session title as the services take it (forms validate with this too)."""
    return non_empty("title", title, MAX_TITLE).strip()


def session_create(*, actor, agent_name: str | None = None, title: str | None = None) -> AgentSession:
    """A new session for the agent (its provider, model and thinking level), owned by ``actor``,
    who must be allowed to use it (an agent they may not use is answered as unknown)."""
    agent = agent_by_name(agent_name, for_user=actor)
    name = clean_title(title) if title is not None else None
    meta = session_start(agent=agent, user=actor)
    if name is not None:
        # Pi's way to name a session: a session_info entry (the title mirrors it).
        with acting_as(actor):
            get_provider(meta.provider).append_session_info(meta.session_id, name=name, meta=meta)
    return meta


def session_rename(*, session_id: str, title: str, actor) -> dict:
    """Append a ``session_info`` entry (Pi's /name); returns the entry."""
    clean = clean_title(title)
    with acting_as(actor), _audit(actor, "session.rename", session_id, fields=("title",), after={"title": clean}):
        return provider_for_session(session_id).append_session_info(session_id, name=clean)


def agent_for_session_change(*, meta: AgentSession, agent_name) -> Agent:
    """The enabled agent ``agent_name``, if it may take ``meta`` over (forms validate with this).

    The session keeps its store, so the agent must use the same session provider (runs and
    summaries open the session through their agent's provider).
    """
    if not isinstance(agent_name, str) or not agent_name.strip():
        raise RuntimeInputError("agent", _("must be the name of an agent"))
    agent = agent_by_name(agent_name)
    kind = resolve_session_provider_kind(agent)
    if kind != meta.provider:
        raise RuntimeInputError(
            "agent", _("agent %(agent_name)r keeps its sessions with the %(kind)s provider; this one is stored by %(meta_provider)s") % {"agent_name": agent.name, "kind": kind, "meta_provider": meta.provider}
        )
    return agent


def session_set_agent(*, session_id: str, agent_name: str, actor) -> AgentSession:
    """Hand the session to another enabled agent; one revision and a ``session_updated`` event.

    Its next run uses that agent's model, tools and prompt; a run already active keeps its agent.
    """
    meta = session_or_not_found(session_id)
    agent = agent_for_session_change(meta=meta, agent_name=agent_name)
    audit_row = _audit(actor, "session.set_agent", session_id, label=meta.title, before={"agent": meta.agent}, after={"agent": agent.name})
    with acting_as(actor), audit_row:
        return get_provider(meta.provider).update_session(session_id, agent=agent.name)


def session_set_status(*, session_id: str, status: str, actor) -> AgentSession:
    if status not in SessionStatus.values:
        raise RuntimeInputError("status", _("must be one of %(join_sessionstatus_values)s") % {"join_sessionstatus_values": ', '.join(SessionStatus.values)})
    with acting_as(actor), _audit(actor, "session.set_status", session_id, fields=("status",), after={"status": status}):
        return provider_for_session(session_id).update_session(session_id, status=status)


def session_delete(*, session_id: str, actor) -> None:
    """Delete the session with everything stored for it, in one transaction.

    What goes: its entries (the JSONL file, or the ``SessionEntry`` rows), its meta row and
    event log, its runs and their queued inputs, and (after commit) its per-session workspace
    directory ``<workspace>/sessions/<id>/``. Refused (``SessionBusy``, 409) while a run
    is queued or running; a session that is gone raises ``SessionNotFound`` (404). Serialized
    with ``session_prompt`` on the session row, so an accepted prompt is never deleted
    before its run has finished.

    The event log goes with the session, so who deleted it is written to the
    ``runtime.sessions.audit`` log (one INFO line: session, owner, actor).
    """

    meta = session_or_not_found(session_id)
    # A run whose worker died is not active: it does not hold the session, and the prompts
    # it never delivered are not carried into a new run (the session is going).
    reap_session(session_id, deleting=True)
    provider = get_provider(meta.provider)
    # The providers' lock order: the store's write lock (file: flock), then the row.
    with provider.write_lock(session_id), transaction.atomic():
        lock_session(meta)
        if active_run(session_id) is not None:  # under the row lock: no lock on the runs themselves
            raise SessionBusy("a run is active: abort it before deleting the session")
        runs = AgentRun.objects.filter(session_id=session_id)
        before = {
            "title": meta.title, "user_id": meta.user_id, "agent": meta.agent, "provider": meta.provider,
            "entry_count": meta.entry_count, "session_file": meta.session_file if meta.provider == "file" else "",
            "runs": runs.count(),
        }  # fmt: skip
        RunInput.objects.filter(run__session_id=session_id).delete()
        runs.delete()
        provider.delete_session(session_id)
        record(actor=actor, action="session.delete", target=(SESSION_TARGET, session_id, meta.title), before=before)
    transaction.on_commit(lambda: delete_session_directories(meta))
    audit.info(
        "session %s deleted by %s (owner %s)", session_id, _who(actor), _who_id(meta.user_id),
        extra={"session_id": session_id, "actor_id": getattr(actor, "pk", None), "owner_id": meta.user_id},
    )


def _who(user) -> str:
    return f"user {user.pk} ({user.get_username()})" if getattr(user, "pk", None) else "the command line (no user)"


def _who_id(user_id) -> str:
    return f"user {user_id}" if user_id else "none"  # its per-session workspace directory (docs/runtime.md)


def session_deletion_summary(*, session_id: str) -> dict:
    """What ``session_delete`` would remove (for a confirmation page), and whether it may now."""
    meta = session_or_not_found(session_id)
    runs = AgentRun.objects.filter(session_id=session_id)
    return {
        "session": meta,
        "entries": meta.entry_count,
        "file": meta.session_file if meta.provider == "file" else "",
        "events": meta.events.count(),
        "runs": runs.count(),
        "queued_inputs": RunInput.objects.filter(run__session_id=session_id).count(),
        "active_run": active_run(session_id),
    }


def session_label(*, session_id: str, entry_id: str, label: str | None, actor) -> dict:
    """Set (or with ``None``/"" clear) the label of an entry; returns the label entry."""
    if not isinstance(entry_id, str) or not entry_id:
        raise RuntimeInputError("entryId", _("must be an entry id"))
    if label is not None and (not isinstance(label, str) or len(label) > MAX_LABEL):
        raise RuntimeInputError("label", _("must be a string of at most %(max_label)s characters, or null") % {"max_label": MAX_LABEL})
    label = label.strip() if label else None
    with acting_as(actor), _audit(actor, "session.label", session_id, after={"entry_id": entry_id, "label": label or None}):
        return provider_for_session(session_id).append_label_change(session_id, target_id=entry_id, label=label or None)


def session_fork(*, session_id: str, entry_id: str, actor) -> AgentSession:
    """A new session holding the root→``entry_id`` path (Pi's fork), owned by ``actor``."""
    if not isinstance(entry_id, str) or not entry_id:
        raise RuntimeInputError("entryId", _("must be an entry id"))
    parent_title = AgentSession.objects.filter(session_id=session_id).values_list("title", flat=True).first() or ""
    with acting_as(actor):
        provider = provider_for_session(session_id)
        fork = provider.create_branched_session(session_id, entry_id, user=actor)
        # Named after its parent ("<title> (fork)"), as a rename would: a session_info entry.
        # The fork's leaf stays where the copied path ends: the name is its child.
        if parent_title:
            get_provider(fork.provider).append_session_info(fork.session_id, name=fork_title(parent_title))
            fork = AgentSession.objects.get(pk=fork.pk)
    if audited(actor, current_via() or "cli"):
        with transaction.atomic():
            after = {"session_id": fork.session_id, "entry_id": entry_id, "provider": fork.provider}
            record(actor=actor, action="session.fork", target=(SESSION_TARGET, session_id, fork.title), after=after)
    return fork


def fork_title(title: str) -> str:
    """What a fork of a session called ``title`` is called."""
    suffix = " (fork)"
    return title[: MAX_TITLE - len(suffix)].rstrip() + suffix


def session_import(
    *, path: Path, actor, agent_name: str | None = None, provider_kind: str | None = None, source_name: str | None = None
) -> AgentSession:
    """Import a Pi session file for ``actor`` (its owner). A file that is not a Pi session is refused whole.

    A header id that is already stored (whoever owns it) is replaced by a fresh one,
    so an import never tells whether an id exists; ``diagnostics["import"]`` (the
    import report: ``idChanged``, skipped and repaired lines, cycles) says what happened. A file
    whose last entry's path runs into a parent cycle gets the last whole entry as its leaf
    (``leafMoved``), so the session takes prompts.
    """
    agent = agent_by_name(agent_name)
    kind = provider_kind or resolve_session_provider_kind(agent)
    if kind not in SESSION_PROVIDER_KINDS:
        raise RuntimeInputError("provider", _("must be one of %(join_session_provider_kinds)s") % {"join_session_provider_kinds": ', '.join(SESSION_PROVIDER_KINDS)})
    with acting_as(actor):
        meta = import_session_file(path, provider_kind=kind, user=actor, agent=agent.name, source_name=source_name, leaf_off_cycles=True)
    if audited(actor, current_via() or "cli"):
        with transaction.atomic():
            after = {"agent": agent.name, "provider": kind, "source": source_name or "", "entry_count": meta.entry_count}
            record(actor=actor, action="session.import", target=(SESSION_TARGET, meta.session_id, meta.title), after=after)
    return meta
