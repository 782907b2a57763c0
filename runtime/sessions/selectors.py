"""Reading sessions: the snapshot a client starts from, the revision a write answers with.

(Who may read or write a session is ``runtime.sessions.access``.)"""

from __future__ import annotations

from runtime.models import Agent
from runtime.runs.selectors import run_state
from sessions_tree.models import AgentSession
from sessions_tree.providers import provider_for_session


def current_revision(session_id: str) -> int:
    """The session's revision now (0 when it is gone): what a write answers with, so the
    client knows which tree event its change became."""
    return AgentSession.objects.filter(session_id=session_id).values_list("revision", flat=True).first() or 0


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
