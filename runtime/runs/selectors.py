"""Reading runs: the active run of a session and its state as clients see it."""

from __future__ import annotations

from django.db.models import Count, F, Sum, Value
from django.db.models.functions import Coalesce, NullIf, Substr, TruncDate

from runtime.models import ACTIVE_RUN_STATUSES, AgentRun, RunStatus


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


# --------------------------------------------------------------------------- the console's overview


def runs_by_status(*, since) -> dict[str, int]:
    """How many runs were created since ``since``, per status (every status listed, 0 included)."""
    counts = dict(AgentRun.objects.filter(created_at__gte=since).values_list("status").annotate(n=Count("id")).order_by())
    return {status: counts.get(status, 0) for status in RunStatus.values}


def active_runs(limit: int = 20) -> list[AgentRun]:
    """Queued and running runs, oldest first, without their blobs."""
    return list(
        AgentRun.objects.filter(status__in=ACTIVE_RUN_STATUSES)
        .select_related("agent", "user")
        .only(*RUN_ROW_FIELDS)
        .order_by("created_at")[:limit]
    )


def failing_runs(*, since, limit: int = 10) -> list[AgentRun]:
    """The latest failed or lost runs since ``since`` with the start of their error (``error_first``:
    cut in the database, the column may be long)."""
    return list(
        AgentRun.objects.filter(created_at__gte=since, status__in=(RunStatus.FAILED, RunStatus.LOST))
        .select_related("agent", "user")
        .only(*RUN_ROW_FIELDS)
        .annotate(error_first=Substr("error", 1, 300))
        .order_by("-created_at")[:limit]
    )


#: The columns a run's row in a console list needs (never the prompt, images or error).
RUN_ROW_FIELDS = (
    "run_id", "session_id", "status", "model_name", "created_at", "started_at", "finished_at", "input_tokens",
    "output_tokens", "cost", "agent__name", "agent__model_id", "user__username", "cancelled_by_id",
)


def usage_by_day(*, since, by: str) -> list[dict]:
    """Tokens and cost per day since ``since``, per ``by`` (``agent``, ``model`` or ``user``), for
    the console's overview. A run's model is its override, else its agent's model."""
    key = {
        "agent": F("agent__name"),
        "model": Coalesce(NullIf(F("model_name"), Value("")), F("agent__model__name")),
        "user": Coalesce(F("user__username"), Value("(no user)")),
    }[by]
    rows = (
        AgentRun.objects.filter(created_at__gte=since)
        .annotate(day=TruncDate("created_at"), key=key)
        .values("day", "key")
        .annotate(
            runs=Count("id"),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            cost=Sum("cost"),
        )
        .order_by("-day", "-cost", "key")
    )
    return list(rows)
