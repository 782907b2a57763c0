"""Reading runs: the active run of a session and its state as clients see it."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Count, Prefetch
from django.db.models.functions import Substr

from runtime.models import ACTIVE_RUN_STATUSES, Agent, AgentRun, RunStatus
from infra.prepared import P, Prepared


def active_run(session_id: str) -> AgentRun | None:
    """The session's oldest queued or running run.

    Never a locking read (it would lock other sessions' runs through the status index):
    a decision that must hold takes the session's row lock first (``runs/locks.py``),
    under which the answer stays true until the transaction ends."""
    return _ACTIVE_RUN.first(session=session_id)


_ACTIVE_RUN = Prepared(
    lambda: AgentRun.objects.filter(session_id=P("session"), status__in=ACTIVE_RUN_STATUSES).order_by("created_at", "pk")[:1]
)


def runs_with_status(status: str, *, session_id: str | None = None, found: list[AgentRun] | None = None):
    """The runs in ``status`` (of ``session_id``, if given), oldest first: picked from
    ``found`` when the caller has just read the session's active runs, else queried."""
    if found is not None:
        return [r for r in found if r.status == status]
    runs = AgentRun.objects.filter(status=status)
    if session_id is not None:
        runs = runs.filter(session_id=session_id)
    return runs.order_by("created_at", "pk")


def run_state(session_id: str) -> dict:
    """``{state: idle|queued|running, runId}`` of the session's active run."""
    run = active_run(session_id)
    if run is None:
        return {"state": "idle", "runId": None}
    return {"state": run.status, "runId": str(run.run_id)}


# --------------------------------------------------------------------------- the console's overview


def runs_by_status(*, since) -> dict[str, int]:
    """How many runs were created since ``since``, per status (every status listed, 0 included)."""
    counts = dict(AgentRun.objects.filter(created_at__gte=since).values_list("status").annotate(n=Count("id")).order_by())
    return {status: counts.get(status, 0) for status in RunStatus.values}


def _run_rows(queryset):
    """A console list's runs: the row columns only, the agent and user prefetched (two small
    queries) rather than joined: a join lets the database start from the agents and sort
    every run, where the runs' ``created_at`` index alone yields the page."""
    return queryset.only(*RUN_ROW_FIELDS).prefetch_related(
        Prefetch("agent", queryset=Agent.objects.only("id", "name", "model_id")),
        Prefetch("user", queryset=get_user_model().objects.only("id", "username")),
    )


def active_runs(limit: int = 20) -> list[AgentRun]:
    """Queued and running runs, oldest first, without their blobs."""
    return list(_run_rows(AgentRun.objects.filter(status__in=ACTIVE_RUN_STATUSES)).order_by("created_at", "pk")[:limit])


def failing_runs(*, since, limit: int = 10) -> list[AgentRun]:
    """The latest failed or lost runs since ``since`` with the start of their error (``error_first``:
    cut in the database, the column may be long)."""
    return list(
        _run_rows(AgentRun.objects.filter(created_at__gte=since, status__in=(RunStatus.FAILED, RunStatus.LOST)))
        .annotate(error_first=Substr("error", 1, 300))
        .order_by("-created_at")[:limit]
    )


#: The columns a run's row in a console list needs (never the prompt, images or error).
RUN_ROW_FIELDS = (
    "run_id", "session_id", "status", "model_name", "created_at", "started_at", "finished_at", "input_tokens",
    "output_tokens", "cost", "agent_id", "user_id", "cancelled_by_id",
)
