"""Runtime reads that combine the kernel's view with the runtime's own state."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.models import ACTIVE_RUN_STATUSES, Agent, AgentRun
from sessions_tree.models import AgentSession
from sessions_tree.providers import provider_for_session


def run_state(session_id: str) -> dict:
    """``{state: idle|queued|running, runId}`` of the session's active run."""
    run = AgentRun.objects.filter(session_id=session_id, status__in=ACTIVE_RUN_STATUSES).order_by("created_at").first()
    if run is None:
        return {"state": "idle", "runId": None}
    return {"state": run.status, "runId": str(run.run_id)}


def session_snapshot(session_id: str, *, entry_limit: int | None = None) -> dict:
    """The kernel's snapshot with the runtime's part of ``runtimeContext`` filled in:
    ``contextWindow`` (the agent's model) and ``runState``.

    Tree events keep ``model``/``thinkingLevel``/``tokenEstimate`` current; the run
    state moves with ``run_state`` streaming events.
    """
    provider = provider_for_session(session_id)
    snapshot = provider.get_snapshot(session_id, entry_limit=entry_limit)
    agent_name = snapshot["session"].get("agent")
    agent = Agent.objects.select_related("model").filter(name=agent_name).first() if agent_name else None
    context = dict(snapshot["runtimeContext"])
    context["contextWindow"] = agent.model.context_window if agent is not None else None
    context["runState"] = run_state(session_id)
    snapshot["runtimeContext"] = context
    return snapshot


# --------------------------------------------------------------------------- who may do what with a session
#
# The one rule (docs/api.md, "Access"); the REST API, the socket and the pages ask it.
#
# * Everyone reads, writes and deletes their own sessions.
# * A superuser reads, writes and deletes every session.
# * A staff user who is not a superuser reads other users' sessions with Django's
#   ``sessions_tree.view_agentsession`` (or ``change_agentsession``, which implies
#   viewing, as in the admin), writes them (prompt, abort, switch leaf, label,
#   rename/archive, compact, fork) with ``change_agentsession`` and deletes them
#   with ``delete_agentsession``.
# * Nobody else sees another user's session (it answers like a missing one).
# * An inactive user has no access; a read-only token only reads, on top of all that.

VIEW_PERM = "sessions_tree.view_agentsession"
CHANGE_PERM = "sessions_tree.change_agentsession"
DELETE_PERM = "sessions_tree.delete_agentsession"


@dataclass(frozen=True)
class Access:
    read: bool = False
    write: bool = False
    delete: bool = False

    def allows(self, need: str) -> bool:
        return getattr(self, need)


NO_ACCESS = Access()
FULL_ACCESS = Access(read=True, write=True, delete=True)


def _active(user) -> bool:
    return user is not None and user.is_authenticated and user.is_active


def reads_all_sessions(user) -> bool:
    """Whether ``user`` may read every user's sessions."""
    if not _active(user):
        return False
    return user.is_superuser or (user.is_staff and (user.has_perm(VIEW_PERM) or user.has_perm(CHANGE_PERM)))


def access_to_others_sessions(user) -> Access:
    """What ``user`` may do with sessions owned by someone else."""
    if not _active(user):
        return NO_ACCESS
    if user.is_superuser:
        return FULL_ACCESS
    if not user.is_staff:
        return NO_ACCESS
    change = user.has_perm(CHANGE_PERM)
    read = change or user.has_perm(VIEW_PERM)
    return Access(read=read, write=read and change, delete=read and user.has_perm(DELETE_PERM))


def session_access(user, meta, *, token=None) -> Access:
    """What ``user`` (authenticated by ``token``, if any) may do with the session ``meta``.

    ``meta`` is an ``AgentSession`` (only ``user_id`` is read) or None (no such
    session: no access).
    """
    if meta is None or not _active(user):
        return NO_ACCESS
    access = FULL_ACCESS if meta.user_id == user.pk else access_to_others_sessions(user)
    if token is not None and getattr(token, "read_only", False):
        access = Access(read=access.read)
    return access


def visible_sessions(user):
    """The sessions ``user`` may read (a queryset)."""
    qs = AgentSession.objects.all()
    if not _active(user):
        return qs.none()
    return qs if reads_all_sessions(user) else qs.filter(user=user)
