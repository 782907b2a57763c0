"""Writes of the subagent records: ``SubprocessRun`` and ``SubprocessEvent`` (docs/subagents.md).

The database is the truth. A run row goes ``queued`` → ``starting`` (claimed by one
supervisor: a conditional UPDATE, so a redelivered Celery message is a no-op) →
``running`` (the child said ``run_start``) → one terminal status, written once
(``subprocess_run_finish`` only moves a run that is not terminal yet). A parent that
cancels sets ``cancel_requested``; the supervisor polls it. A queued run that is cancelled
never starts.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from audit.services import record
from runtime.models import (
    ACTIVE_SUBPROCESS_STATUSES,
    AgentRun,
    RunStatus,
    SubprocessEvent,
    SubprocessRun,
    SubprocessStatus,
)
from runtime.runs.process import process_gone, this_process
from sessions_tree.models import AgentSession

logger = logging.getLogger(__name__)

TERMINAL_STATUSES = (
    SubprocessStatus.COMPLETED,
    SubprocessStatus.PARTIAL,
    SubprocessStatus.FAILED,
    SubprocessStatus.CANCELLED,
    SubprocessStatus.TIMED_OUT,
    SubprocessStatus.LOST,
)
FAILED_STATUSES = (SubprocessStatus.FAILED, SubprocessStatus.CANCELLED, SubprocessStatus.TIMED_OUT, SubprocessStatus.LOST)


def subprocess_runs_create(
    *, parent_run: AgentRun, batch_id: str, tool_call_id: str, mode: str, parent_entry_id: str, tasks: list[dict], depth: int,
    parent_subprocess: SubprocessRun | None = None, backend: str | None = None,
) -> list[SubprocessRun]:  # fmt: skip
    """The rows of one delegate call, idempotent on ``(parent run, tool call id, task index)``:
    a replayed call gets the rows it made the first time (and so never spawns twice).

    A grandchild's rows have the top-level run as ``parent_run`` and the child that
    delegated as ``parent_subprocess`` (its tool call id is prefixed with that child's run id)."""
    rows = []
    for index, task in enumerate(tasks):
        existing = SubprocessRun.objects.filter(parent_run=parent_run, tool_call_id=tool_call_id, task_index=index).first()
        if existing is None:
            try:
                with transaction.atomic():
                    existing = SubprocessRun.objects.create(
                        session_id=parent_run.session_id,
                        parent_run=parent_run,
                        parent_entry_id=parent_entry_id,
                        batch_id=batch_id,
                        tool_call_id=tool_call_id,
                        task_index=index,
                        mode=mode,
                        depth=depth,
                        agent=task["agent"],
                        task=task["task"],
                        parent_subprocess=parent_subprocess,
                        backend=backend or settings.NETA_TASK_BACKEND,
                    )
            except IntegrityError:  # a concurrent replay made it first
                existing = SubprocessRun.objects.get(parent_run=parent_run, tool_call_id=tool_call_id, task_index=index)
        rows.append(existing)
    return rows


def subprocess_run_prepare(run: SubprocessRun, *, envelope: dict, limits: dict, denied_tools: list, batch_entry_id: str) -> None:
    SubprocessRun.objects.filter(pk=run.pk, status=SubprocessStatus.QUEUED).update(
        envelope=envelope, limits=limits, denied_tools=denied_tools, batch_entry_id=batch_entry_id
    )


def subprocess_run_claim(run_id, *, max_per_session: int) -> SubprocessRun | None | bool:
    """Take a queued run for this process: ``queued → starting``, under the session row's lock
    so that no more than ``max_per_session`` children of the session run at once.

    Returns the claimed row, ``None`` when it is not claimable (taken, cancelled, finished),
    ``False`` when the session is at its limit (try again later)."""
    with transaction.atomic():
        run = SubprocessRun.objects.filter(run_id=run_id).first()
        if run is None or run.status != SubprocessStatus.QUEUED:
            return None
        AgentSession.objects.select_for_update().filter(session_id=run.session_id).first()
        if session_slots_busy(run) >= max_per_session:
            return False
        me = this_process()
        now = timezone.now()
        claimed = SubprocessRun.objects.filter(pk=run.pk, status=SubprocessStatus.QUEUED, cancel_requested=False).update(
            status=SubprocessStatus.STARTING,
            started_at=now,
            heartbeat_at=now,
            worker_host=me["host"],
            worker_pid=me["pid"],
            worker_started=me["process_started"],
        )
    if not claimed:
        return None
    return SubprocessRun.objects.get(pk=run.pk)


RUNNING_STATUSES = (SubprocessStatus.STARTING, SubprocessStatus.RUNNING, SubprocessStatus.CANCELLING)


def ancestors_of(run: SubprocessRun) -> list[int]:
    """The pks of the children that delegated ``run`` (its parent child, that one's, …)."""
    out: list[int] = []
    pk = run.parent_subprocess_id
    while pk is not None and pk not in out and len(out) < 16:
        out.append(pk)
        pk = SubprocessRun.objects.filter(pk=pk).values_list("parent_subprocess_id", flat=True).first()
    return out


def session_slots_busy(run: SubprocessRun) -> int:
    """The session's slots taken, as ``run``'s claim sees them: every child of the session
    whose process is out (starting, running, cancelling), except ``run``'s own ancestors that
    are waiting on their delegate call (they have an active child of their own): such a
    child is blocked in a ``proxy_request`` until its descendants end, so it *lends* its slot
    to them — a tree deeper than the session limit never deadlocks on itself. The slot is
    lent to its descendants only: a sibling or another batch still sees it taken."""
    taken = SubprocessRun.objects.filter(session_id=run.session_id, status__in=RUNNING_STATUSES)
    ancestors = ancestors_of(run)
    if not ancestors:
        return taken.count()
    lending = set(
        SubprocessRun.objects.filter(pk__in=ancestors, status__in=RUNNING_STATUSES, children__status__in=ACTIVE_SUBPROCESS_STATUSES)
        .values_list("pk", flat=True)
        .distinct()
    )
    return taken.exclude(pk__in=lending).count()


def subprocess_run_take_unclaimed(run: SubprocessRun) -> bool:
    """``queued → starting`` for a run nobody will claim (its submission failed), so the
    caller can record its end; False when someone claimed it meanwhile."""
    return bool(SubprocessRun.objects.filter(pk=run.pk, status=SubprocessStatus.QUEUED).update(status=SubprocessStatus.STARTING))


def subprocess_run_started(run: SubprocessRun, *, pid: int | None) -> None:
    SubprocessRun.objects.filter(pk=run.pk, status=SubprocessStatus.STARTING).update(status=SubprocessStatus.RUNNING, pid=pid, heartbeat_at=timezone.now())
    SubprocessRun.objects.filter(pk=run.pk, pid__isnull=True).update(pid=pid)


BUDGET_CANCEL_PREFIX = "batch budget: "


def subprocess_run_beat(run: SubprocessRun, *, usage: dict | None = None, counts: dict | None = None) -> bool:
    """Heartbeat (with the usage and counts the child reached so far: the batch budget reads
    them); returns whether a cancel was requested."""
    fields = {"heartbeat_at": timezone.now()}
    if usage:
        fields["usage"] = usage
    if counts:
        fields["counts"] = counts
    SubprocessRun.objects.filter(pk=run.pk, status__in=ACTIVE_SUBPROCESS_STATUSES).update(**fields)
    return SubprocessRun.objects.filter(pk=run.pk, cancel_requested=True).exists()


def cancel_reason(cancelled_by: str) -> str:
    """What the child is told: a budget code for a batch-budget stop (it ends ``partial``), else ``cancelled``."""
    if cancelled_by.startswith(BUDGET_CANCEL_PREFIX):
        return cancelled_by[len(BUDGET_CANCEL_PREFIX) :].split()[0]
    return "cancelled"


def subprocess_events_record(run: SubprocessRun, events: list[dict]) -> None:
    """A batch of events (``seq`` unique per run: a repeat is ignored)."""
    if not events:
        return
    SubprocessEvent.objects.bulk_create(
        [SubprocessEvent(run=run, seq=e["seq"], type=e["type"], payload=e) for e in events], ignore_conflicts=True
    )
    SubprocessRun.objects.filter(pk=run.pk).update(event_count=F("event_count") + len(events))


def status_for_terminal(terminal: dict) -> tuple[str, str]:
    """(run status, error code) for a terminal event."""
    if terminal["type"] == "run_end":
        if terminal.get("status") == "completed":
            return SubprocessStatus.COMPLETED, ""
        # partial: the error code says which budget stopped it
        reason = str(terminal.get("stopReason") or "")
        return SubprocessStatus.PARTIAL, reason if reason.startswith("budget_") else ""
    code = terminal.get("code") or "child_crash"
    if code == "cancelled":
        return SubprocessStatus.CANCELLED, code
    if code in ("stalled", "budget_wall_clock"):
        return SubprocessStatus.TIMED_OUT, code
    return SubprocessStatus.FAILED, code


def subprocess_run_finish(run: SubprocessRun, *, terminal: dict, exit_code=None, exit_signal=None, stderr_tail: str = "", noise=None, cancelled_by: str = "") -> bool:
    """Write the one terminal state (only for a run that has none yet); roll its usage up
    into the parent run. Returns whether this call wrote it."""
    status, code = status_for_terminal(terminal)
    text = terminal.get("finalText") if terminal["type"] == "run_end" else terminal.get("partialText")
    usage = terminal.get("usage") or {}
    updated = SubprocessRun.objects.filter(pk=run.pk, status__in=ACTIVE_SUBPROCESS_STATUSES).update(
        status=status,
        error_code=code,
        error="" if terminal["type"] == "run_end" else str(terminal.get("message") or ""),
        final_text=text or "",
        usage=usage,
        counts=terminal.get("counts") or {},
        exit_code=exit_code,
        exit_signal=exit_signal or "",
        stderr_tail=(stderr_tail or "")[-16000:],
        noise=noise or {},
        cancelled_by=cancelled_by or "",
        ended_at=timezone.now(),
    )
    if updated and usage:
        cost = Decimal(str((usage.get("cost") or {}).get("total", 0) or 0))
        AgentRun.objects.filter(pk=run.parent_run_id).update(
            input_tokens=F("input_tokens") + int(usage.get("input") or 0),
            output_tokens=F("output_tokens") + int(usage.get("output") or 0),
            cache_read_tokens=F("cache_read_tokens") + int(usage.get("cacheRead") or 0),
            cache_write_tokens=F("cache_write_tokens") + int(usage.get("cacheWrite") or 0),
            cost=F("cost") + cost,
        )
    return bool(updated)


def subprocess_run_cancel(run: SubprocessRun, *, by: str, actor=None) -> SubprocessRun:
    """Ask a child to stop. A queued one is cancelled at once (it never starts); a running
    one is told by its supervisor (stdin ``cancel`` → SIGTERM +3 s → SIGKILL +8 s).
    ``actor`` (staff in the console or the API) is recorded in the audit log."""
    now = timezone.now()
    with transaction.atomic():
        was = run.status
        budget = by.startswith(BUDGET_CANCEL_PREFIX)
        queued = SubprocessRun.objects.filter(pk=run.pk, status=SubprocessStatus.QUEUED).update(
            status=SubprocessStatus.CANCELLED, cancel_requested=True, cancelled_by=by, ended_at=now,
            error_code=cancel_reason(by) if budget else "cancelled",
            error=f"stopped before it started: {by}" if budget else "cancelled before it started",
        )  # fmt: skip
        asked = queued or SubprocessRun.objects.filter(
            pk=run.pk, status__in=(SubprocessStatus.STARTING, SubprocessStatus.RUNNING)
        ).update(status=SubprocessStatus.CANCELLING, cancel_requested=True, cancelled_by=by)
        run.refresh_from_db()
        if asked and actor is not None:
            record(
                actor=actor, action="subagent_run.cancel", target=(SubprocessRun._meta.label_lower, run.run_id, f"{run.agent} task {run.task_index}"),
                before={"status": was}, after={"status": run.status, "cancelled_by": by},
            )  # fmt: skip
    subprocess_runs_cancel_descendants(run, by=by)
    return run


def cascade_reason(run: SubprocessRun, by: str) -> str:
    """Why ``run``'s children are stopped when ``run`` was stopped ``by`` someone: the same
    reason, marked as passed down once."""
    return f"{by} (via subagent {run.run_id.hex[:8]})"[:200] if by and "(via subagent" not in by else by


def subprocess_runs_cancel_descendants(run: SubprocessRun, *, by: str) -> int:
    """The cancel cascade below ``run``: every active grandchild (and below) is asked to
    stop too, recorded with who started the cancel."""
    below = list(SubprocessRun.objects.filter(parent_subprocess=run, status__in=ACTIVE_SUBPROCESS_STATUSES))
    why = cascade_reason(run, by)
    for child in below:
        subprocess_run_cancel(child, by=why)
    return len(below)


def subprocess_runs_cancel_for_parent(parent_run_pk: int, *, by: str) -> int:
    runs = list(SubprocessRun.objects.filter(parent_run_id=parent_run_pk, status__in=ACTIVE_SUBPROCESS_STATUSES))
    for run in runs:
        subprocess_run_cancel(run, by=by)
    return len(runs)


def streamed_text(row: SubprocessRun) -> str:
    """What a child wrote as its answer so far, from its recorded events: each turn's text
    (the whole message once it ended, else its streamed deltas), joined as the child joins
    them. For a child that ended without a final text of its own (lost, or still out)."""
    texts: dict[int, str] = {}
    events = SubprocessEvent.objects.filter(run=row, type__in=("assistant_delta", "assistant_message")).order_by("seq")
    for event in events.only("type", "payload"):
        p = event.payload or {}
        turn = p.get("turn")
        if not isinstance(turn, int):
            continue
        if event.type == "assistant_delta" and p.get("kind") == "text":
            texts[turn] = texts.get(turn, "") + str(p.get("delta") or "")
        elif event.type == "assistant_message":
            content = (p.get("message") or {}).get("content") or []
            texts[turn] = "".join(str(b.get("text") or "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return "\n\n".join(t for _, t in sorted(texts.items()) if t)


def subprocess_runs_reap(*, stale_seconds: float | None = None) -> list[SubprocessRun]:
    """Children whose supervisor is gone (its process on this host no longer runs, or its
    heartbeat went stale) end ``lost``: a synthetic terminal event is recorded, the usage
    they reported is kept. Returns the runs it changed."""
    stale = stale_seconds if stale_seconds is not None else settings.NETA_RUN_STALE_SECONDS
    cutoff = timezone.now() - dt.timedelta(seconds=stale)
    lost = []
    for run in SubprocessRun.objects.filter(status__in=(SubprocessStatus.STARTING, SubprocessStatus.RUNNING, SubprocessStatus.CANCELLING)):
        gone = process_gone(run.worker_host, run.worker_pid, run.worker_started)
        if not gone and not (run.heartbeat_at is not None and run.heartbeat_at < cutoff):
            continue
        why = "its supervising process is gone" if gone else f"no heartbeat from its supervisor for {stale:g} s"
        last = SubprocessEvent.objects.filter(run=run).order_by("-seq").first()
        terminal = {
            "v": 1, "runId": run.run_id.hex, "seq": (last.seq if last else 0) + 1, "ts": int(timezone.now().timestamp() * 1000),
            "type": "run_error", "code": "child_crash", "message": f"lost: {why}", "partialText": "", "synthetic": True,
        }  # fmt: skip
        with transaction.atomic():
            # The error code says "lost"; the error says why (the result's title shows both).
            updated = SubprocessRun.objects.filter(pk=run.pk, status=run.status).update(
                status=SubprocessStatus.LOST, error_code="lost", error=why, ended_at=timezone.now(), final_text=streamed_text(run)
            )
            if updated:
                subprocess_events_record(run, [terminal])
        if updated:
            run.refresh_from_db()
            lost.append(run)
            logger.warning("subagent run %s of session %s lost: %s", run.run_id, run.session_id, why)
    orphans = SubprocessRun.objects.filter(status__in=ACTIVE_SUBPROCESS_STATUSES, cancel_requested=False).exclude(
        parent_run__status__in=(RunStatus.QUEUED, RunStatus.RUNNING)
    )
    for run in orphans:  # the parent run ended (lost, aborted) while this child was still out
        subprocess_run_cancel(run, by=f"parent run {run.parent_run.run_id} ended ({run.parent_run.status})")
    stranded = SubprocessRun.objects.filter(status__in=ACTIVE_SUBPROCESS_STATUSES, cancel_requested=False, parent_subprocess__isnull=False).exclude(
        parent_subprocess__status__in=ACTIVE_SUBPROCESS_STATUSES
    )
    for run in stranded:  # the child that delegated it ended (or was lost) first
        subprocess_run_cancel(run, by=f"parent subagent {run.parent_subprocess.run_id} ended ({run.parent_subprocess.status})")
    return lost


# --------------------------------------------------------------------------- in-process wakeups

_done_events: dict[str, threading.Event] = {}
_done_lock = threading.Lock()


def done_event(run_id: str) -> threading.Event:
    """Set in this process when ``run_id`` ends here (embedded backend: no polling delay)."""
    with _done_lock:
        return _done_events.setdefault(str(run_id), threading.Event())


def forget_done_event(run_id: str) -> None:
    with _done_lock:
        _done_events.pop(str(run_id), None)
