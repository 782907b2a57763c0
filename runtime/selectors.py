"""Runtime reads that combine the kernel's view with the runtime's own state."""

from __future__ import annotations

from runtime.models import ACTIVE_RUN_STATUSES, Agent, AgentRun
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
