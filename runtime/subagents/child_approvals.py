"""A subagent child's tool calls that wait for a person (docs/subagents.md, "Approvals").

The child decides which of its calls wait (its envelope's ``approval`` block, the rules of
``runtime.runs.approvals``) and sends each as an ``approval_request``. Its supervisor
hands it to :func:`wait_for_decision`, in a thread of its own: the request becomes a
:class:`~runtime.models.SubagentApproval` row of the parent session, and the thread polls
the row until a person decides it (:func:`decide`: REST ``POST
/api/sessions/{id}/approve/`` with ``subagentRunId``, the socket's ``approve``), it
expires, or the child is stopped. The row is the truth, so the decision may come from any
process (a web process, another host) and a page reloaded, or a web process restarted,
meanwhile still lists and decides it.

* The wait counts within the child's budget: its wall clock goes on (a request expires at
  the latest when the child's time is up), while its heartbeats (phase ``approval``) keep
  the host's idle limit from taking it for stalled.
* "Allow for this session" holds at once for the other children of the same parent run
  (checked here before a request is made, and for one already waiting) and, once the batch
  is written, for the whole session (a ``neta.approval`` entry: :func:`decision_entries`).
* A request nobody decides within ``NETA_ASK_USER_TIMEOUT_SECONDS`` is denied (the
  waiting thread, and the reaper's round for a request whose waiter is gone); a child
  that is cancelled or ends takes its pending requests with it (``cancelled``).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from infra.db_threads import release as release_connection
from runtime.errors import RuntimeInputError
from runtime.models import (
    ACTIVE_SUBPROCESS_STATUSES,
    SubagentApproval,
    SubagentApprovalStatus,
    SubprocessRun,
)
from runtime.runs import approvals
from runtime.runs.questions import QuestionNotFound, audit_decision

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.25  # how often a waiting request reads its row (its pooled connection given back between reads)
RULE_POLLS = 4  # … and every this many reads, the session rules its siblings were given meanwhile
CHILDS_END_GRACE_SECONDS = 5.0  # a request cut short by the child's end waits this long for the child to stop
Status = SubagentApprovalStatus


def _granted_by(run: SubprocessRun, name: str, arguments: dict) -> SubagentApproval | None:
    """The "allow for this session" decision, taken for a child of the same parent run, that
    lets this call run (not yet in the tree: the batch writes them when it ends)."""
    rows = SubagentApproval.objects.filter(subprocess_run__parent_run_id=run.parent_run_id, status=Status.ALLOWED, scope="session", tool=name)
    return next((row for row in rows if approvals.Rule(tool=row.tool, prefix=row.prefix).allows(name, arguments)), None)


def wait_for_decision(run: SubprocessRun, envelope, event: dict, *, stop: threading.Event) -> dict:
    """The host's answer to a child's ``approval_request``: ``{decision, text, scope, prefix}``.
    Blocks until the request is decided, expires or ``stop`` is set (the child is stopped)."""
    call_id = str(event.get("toolCallId") or "")[:200]
    name = str(event.get("name") or "")[:64]
    request = event.get("request") if isinstance(event.get("request"), dict) else {}
    arguments = request.get("arguments") if isinstance(request.get("arguments"), dict) else {}
    if _granted_by(run, name, arguments) is not None:
        return {"decision": "allow"}
    timeout = float(envelope.approval.timeout_seconds)
    expires = asked_until = timezone.now() + dt.timedelta(seconds=timeout)
    if envelope.deadline is not None:  # never past the child's own end
        expires = min(expires, dt.datetime.fromtimestamp(envelope.deadline / 1000, tz=dt.UTC))
    started = SubprocessRun.objects.filter(pk=run.pk).values_list("started_at", flat=True).first()
    if started is not None:
        expires = min(expires, started + dt.timedelta(seconds=float(envelope.limits.wall_clock_seconds)))
    # Cut short by the child's end: when it comes, the child's own clock stops it a moment
    # later (it started its clock after this row's started_at), and its end must say so.
    at_childs_end = expires < asked_until
    row, _created = SubagentApproval.objects.get_or_create(
        subprocess_run=run,
        tool_call_id=call_id,
        defaults={
            "session_id": run.session_id, "tool": name, "expires_at": expires,
            "request": {**request, "toolCallId": call_id, "tool": name, "timeoutSeconds": int(timeout)},
        },
    )  # fmt: skip
    polls = 0
    while row.status == Status.PENDING:
        polls += 1
        if stop.is_set():
            _settle(row, Status.CANCELLED)
        elif timezone.now() >= row.expires_at:
            _settle(row, Status.EXPIRED)
            if at_childs_end:  # a denial now would let the child answer past its budget
                release_connection()
                stop.wait(CHILDS_END_GRACE_SECONDS)
        elif polls % RULE_POLLS == 0 and (rule := _granted_by(run, name, arguments)) is not None:
            # A sibling's "allow for this session", given while this one waited, covers it too.
            SubagentApproval.objects.filter(pk=row.pk, status=Status.PENDING).update(
                status=Status.ALLOWED, decided_by=rule.decided_by, decided_at=timezone.now(), note=""
            )
        else:
            release_connection()  # a wait may last an hour: no connection held meanwhile
            time.sleep(POLL_SECONDS)
        row.refresh_from_db()
    return answer_for(row)


def _settle(row: SubagentApproval, status: str) -> bool:
    """pending → ``status`` (expired, cancelled), once."""
    return bool(SubagentApproval.objects.filter(pk=row.pk, status=Status.PENDING).update(status=status, decided_at=timezone.now()))


def answer_for(row: SubagentApproval) -> dict:
    """What the child is told for a settled request."""
    if row.status == Status.ALLOWED:
        return {"decision": "allow", "scope": row.scope, "prefix": row.prefix}
    if row.status == Status.CANCELLED:
        return {"decision": "deny", "text": "Tool call aborted: the subagent was stopped before it could run."}
    return {"decision": "deny", "text": approvals.denial_text(question_of(row))}


def question_of(row: SubagentApproval) -> dict:
    """The row as ``runtime.runs.approvals`` reads a settled request (``decision_data``, ``denial_text``)."""
    outcome = {Status.ALLOWED: "allowed", Status.DENIED: "denied", Status.EXPIRED: "expired"}.get(row.status, row.status)
    at = int(row.decided_at.timestamp() * 1000) if row.decided_at else None
    return {
        **(row.request or {}),
        "toolCallId": row.tool_call_id, "tool": row.tool, "outcome": outcome, "scope": row.scope, "prefix": row.prefix,
        "note": row.note, "decidedBy": row.decided_by or None, "decidedAt": at, "expiredAt": at,
    }  # fmt: skip


def decide(*, session_id: str, subagent_run_id, tool_call_id, decision, scope="once", prefix="", note="", actor=None) -> SubagentApproval:
    """Settle a child's request of the session. ``QuestionNotFound`` when none waits on that
    call; ``RuntimeInputError`` naming the field for a decision that cannot be taken.
    Nothing is written for a refused decision; the second of two decisions is refused."""
    if not isinstance(tool_call_id, str) or not tool_call_id:
        raise RuntimeInputError("toolCallId", _("must be a non-empty string"))
    if decision not in approvals.DECISIONS:
        raise RuntimeInputError("decision", _("must be one of %(choices)s") % {"choices": ", ".join(approvals.DECISIONS)})
    if scope not in approvals.SCOPES:
        raise RuntimeInputError("scope", _("must be one of %(choices)s") % {"choices": ", ".join(approvals.SCOPES)})
    if not isinstance(prefix, str) or len(prefix) > approvals.MAX_PREFIX:
        raise RuntimeInputError("prefix", _("must be a string of at most %(n)d characters") % {"n": approvals.MAX_PREFIX})
    if not isinstance(note, str) or len(note) > approvals.MAX_NOTE:
        raise RuntimeInputError("note", _("must be a string of at most %(n)d characters") % {"n": approvals.MAX_NOTE})
    row = (
        SubagentApproval.objects.filter(session_id=session_id, subprocess_run__run_id=subagent_run_id, tool_call_id=tool_call_id, status=Status.PENDING)
        .select_related("subprocess_run")
        .first()
    )
    if row is None:
        raise QuestionNotFound(tool_call_id)
    prefix = prefix.strip()
    if prefix and (decision != "allow" or scope != "session" or row.tool != "bash"):
        raise RuntimeInputError("prefix", _("only for allowing bash commands for the session"))
    if prefix and not str((row.request or {}).get("command") or "").lstrip().startswith(prefix):
        raise RuntimeInputError("prefix", _("the command waiting for approval does not start with it"))
    with transaction.atomic():
        updated = SubagentApproval.objects.filter(pk=row.pk, status=Status.PENDING).update(
            status=Status.ALLOWED if decision == "allow" else Status.DENIED,
            scope=scope if decision == "allow" else "once",
            prefix=prefix,
            note=note.strip(),
            decided_by=actor.get_username() if actor is not None else "",
            decided_at=timezone.now(),
        )
        if updated:
            settled = {**question_of(row), "outcome": "allowed" if decision == "allow" else "denied", "scope": scope if decision == "allow" else "once", "prefix": prefix, "note": note.strip()}
            audit_decision(actor, session_id, settled, subagentRunId=str(row.subprocess_run.run_id))
    if not updated:  # another tab, the expiry or a cancel got there first
        raise QuestionNotFound(tool_call_id)
    row.refresh_from_db()
    return row


def pending(session_id: str) -> list[SubagentApproval]:
    """The session's children's requests that wait, oldest first (their run rows joined)."""
    return list(
        SubagentApproval.objects.filter(session_id=session_id, status=Status.PENDING, subprocess_run__status__in=ACTIVE_SUBPROCESS_STATUSES)
        .select_related("subprocess_run")
        .order_by("created_at", "pk")
    )


def describe(row: SubagentApproval) -> dict:
    """A request as the API, the socket and the page show it: the call, and the child named."""
    child = row.subprocess_run
    return {
        **(row.request or {}),
        "kind": "approval",
        "toolCallId": row.tool_call_id,
        "tool": row.tool,
        "status": row.status,
        "createdAt": int(row.created_at.timestamp() * 1000),
        "expiresAt": int(row.expires_at.timestamp() * 1000),
        "decidedBy": row.decided_by or None,
        "subagent": {
            "runId": str(child.run_id), "agent": child.agent, "task": child.task[:200], "taskIndex": child.task_index,
            "depth": child.depth, "batchId": child.batch_id,
        },
    }  # fmt: skip


def cancel_pending(run: SubprocessRun) -> int:
    """A child stopped or ended: its requests stop waiting (``cancelled``)."""
    return SubagentApproval.objects.filter(subprocess_run=run, status=Status.PENDING).update(status=Status.CANCELLED, decided_at=timezone.now())


def reap() -> list[SubprocessRun]:
    """The reaper's round: a request past its time is denied (``expired``), one whose child
    is no longer out is ``cancelled`` (its waiter went with it). Returns no runs (it ends none)."""
    now = timezone.now()
    expired = SubagentApproval.objects.filter(status=Status.PENDING, expires_at__lte=now).update(status=Status.EXPIRED, decided_at=now)
    gone = (
        SubagentApproval.objects.filter(status=Status.PENDING)
        .exclude(subprocess_run__status__in=ACTIVE_SUBPROCESS_STATUSES)
        .update(status=Status.CANCELLED, decided_at=now)
    )
    if expired or gone:
        logger.info("subagent approvals: %d expired, %d cancelled with their child", expired, gone)
    return []


def decision_entries(rows: list[SubprocessRun]) -> list[dict]:
    """The ``neta.approval`` entries' data for the decided requests of a batch's children
    (every depth), in the order they were asked; marks them written."""
    settled = list(
        SubagentApproval.objects.filter(subprocess_run__in=_subtree(rows), recorded=False)
        .exclude(status=Status.PENDING)
        .select_related("subprocess_run")
        .order_by("created_at", "pk")
    )
    out = []
    for row in settled:
        child = row.subprocess_run
        data = approvals.decision_data(question_of(row))
        if row.status == Status.CANCELLED:
            data["cancelled"] = True
        data["subagent"] = {"runId": str(child.run_id), "agent": child.agent, "task": child.task[:200], "depth": child.depth}
        out.append(data)
    SubagentApproval.objects.filter(pk__in=[r.pk for r in settled]).update(recorded=True)
    return out


def _subtree(rows: list[SubprocessRun]) -> list[int]:
    ids, frontier = [r.pk for r in rows], [r.pk for r in rows]
    while frontier:
        frontier = list(SubprocessRun.objects.filter(parent_subprocess_id__in=frontier).values_list("pk", flat=True))
        ids += frontier
    return ids
