"""Reading runs: the active run of a session and its state as clients see it."""

from __future__ import annotations

from runtime.models import ACTIVE_RUN_STATUSES, AgentRun


def active_run(session_id: str) -> AgentRun | None:
    """The session's oldest queued or running run.

    Never a locking read (it would lock other sessions' runs through the status index):
    a decision that must hold takes the session's row lock first (``runs/locks.py``),
    under which the answer stays true until the transaction ends."""
    return AgentRun.objects.filter(session_id=session_id, status__in=ACTIVE_RUN_STATUSES).order_by("created_at").first()


def run_state(session_id: str) -> dict:
    """``{state: idle|queued|running, runId}`` of the session's active run."""
    run = active_run(session_id)
    if run is None:
        return {"state": "idle", "runId": None}
    return {"state": run.status, "runId": str(run.run_id)}
