"""Questions to the user (the ``ask_user`` tool): answer one, expire the overdue ones.

A run that asks parks in the ``waiting`` state (``turn._park`` → ``lifecycle.wait``):
no thread, no Celery slot. ``answer_question`` (REST ``POST /api/sessions/{id}/answer/``,
the socket's ``answer`` command) checks the answer against the question, stores it on
the run and makes it ``queued`` again in one conditional UPDATE (``lifecycle.resume``),
then hands it to its backend like any prompt; the turn that claims it writes the answer
as the tool's result and goes on. ``expire_questions`` (each reaper round) does the same
with an "expired" result for questions older than ``NETA_ASK_USER_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils.translation import gettext as _

from audit.services import record
from runtime.errors import RuntimeInputError
from runtime.models import AgentRun, RunStatus
from runtime.runs import lifecycle
from runtime.runs.backends import submit_run
from runtime.runs.selectors import runs_with_status
from runtime.runs.approvals import DECISIONS, MAX_NOTE, MAX_PREFIX, SCOPES
from sessions_tree.ids import now_ms
from sessions_tree.models import AgentSession
from toolcatalog.builtins.ask_user import check_answer

logger = logging.getLogger(__name__)


class QuestionNotFound(RuntimeInputError):
    """No question of the session waits on that tool call (never asked, answered already, expired)."""

    def __init__(self, tool_call_id: str):
        super().__init__("toolCallId", f"no question waits for an answer on tool call {tool_call_id!r}")


def waiting_run(session_id: str) -> AgentRun | None:
    return AgentRun.objects.filter(session_id=session_id, status=RunStatus.WAITING).order_by("created_at", "pk").first()


def answer_question(*, session_id: str, tool_call_id: Any, answer: Any, actor=None, start: bool = True) -> AgentRun:
    """Answer the question the session's run waits on; the run is resumed. ``QuestionNotFound``
    for a tool call nobody waits on, ``RuntimeInputError`` (field ``answer``) for an answer
    the question does not take. Nothing is written for a refused answer."""
    if not isinstance(tool_call_id, str) or not tool_call_id:
        raise RuntimeInputError("toolCallId", _("must be a non-empty string"))
    run = waiting_run(session_id)
    question = (run.question or {}) if run is not None else {}
    if run is None or question.get("toolCallId") != tool_call_id or question.get("kind") == "approval":
        raise QuestionNotFound(tool_call_id)  # an approval is decided, not answered (runs/approvals.py)
    try:
        text, selected = check_answer(run.question, answer)
    except ValueError as exc:
        raise RuntimeInputError("answer", str(exc)) from None
    settled = {
        **run.question,
        "outcome": "answered",
        "answer": answer,
        "answerText": text,
        "selected": selected,
        "answeredBy": actor.get_username() if actor is not None else None,
        "answeredAt": now_ms(),
    }
    return _resume(run, settled, tool_call_id=tool_call_id, start=start)


def _resume(run: AgentRun, settled: dict, *, tool_call_id: str, start: bool) -> AgentRun:
    """Resume ``run`` with its question ``settled`` and hand it to its backend; the second of
    two answers (another tab, the expiry, an abort meanwhile) gets ``QuestionNotFound``."""
    with transaction.atomic():
        if not lifecycle.resume(run, settled, tool_call_id=tool_call_id):
            raise QuestionNotFound(tool_call_id)
        submit_run(run, start=start)
    run.refresh_from_db()
    return run


def expire_questions(*, session_id: str | None = None, start: bool = True, found: list[AgentRun] | None = None) -> list[AgentRun]:
    """Resume every run whose question is older than its timeout, with an "expired" result.
    ``found``: the session's active runs as the caller just read them (no read here)."""
    now = now_ms()
    expired = []
    for run in runs_with_status(RunStatus.WAITING, session_id=session_id, found=found):
        question = run.question or {}
        if int(question.get("expiresAt") or 0) > now:
            continue
        settled = {**question, "outcome": "expired", "expiredAt": now}
        with transaction.atomic():
            if not lifecycle.resume(run, settled, tool_call_id=question.get("toolCallId") or ""):
                continue
            submit_run(run, start=start)
        logger.info("question of run %s expired after %s s", run.run_id, question.get("timeoutSeconds"))
        expired.append(run)
    return expired


def decide_approval(
    *, session_id: str, tool_call_id: Any, decision: Any, scope: Any = "once", prefix: Any = "", note: Any = "", actor=None, start: bool = True
) -> AgentRun:
    """Settle the approval request the session's run waits on and resume the run.
    ``QuestionNotFound`` when no request waits on that call; ``RuntimeInputError`` naming the
    field for a decision that cannot be taken. Nothing is written for a refused decision."""
    if not isinstance(tool_call_id, str) or not tool_call_id:
        raise RuntimeInputError("toolCallId", "must be a non-empty string")
    if decision not in DECISIONS:
        raise RuntimeInputError("decision", f"must be one of {', '.join(DECISIONS)}")
    if scope not in SCOPES:
        raise RuntimeInputError("scope", f"must be one of {', '.join(SCOPES)}")
    if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX:
        raise RuntimeInputError("prefix", f"must be a string of at most {MAX_PREFIX} characters")
    if not isinstance(note, str) or len(note) > MAX_NOTE:
        raise RuntimeInputError("note", f"must be a string of at most {MAX_NOTE} characters")
    run = waiting_run(session_id)
    question = (run.question or {}) if run is not None else {}
    if run is None or question.get("kind") != "approval" or question.get("toolCallId") != tool_call_id:
        raise QuestionNotFound(tool_call_id)
    prefix = prefix.strip()
    if prefix and (decision != "allow" or scope != "session" or question.get("tool") != "bash"):
        raise RuntimeInputError("prefix", "only for allowing bash commands for the session")
    if prefix and not str(question.get("command") or "").lstrip().startswith(prefix):
        raise RuntimeInputError("prefix", "the command waiting for approval does not start with it")
    settled = {
        **question,
        "outcome": "allowed" if decision == "allow" else "denied",
        "scope": scope if decision == "allow" else "once",
        "prefix": prefix,
        "note": note.strip(),
        "decidedBy": actor.get_username() if actor is not None else None,
        "decidedAt": now_ms(),
    }
    with transaction.atomic():
        resumed = _resume(run, settled, tool_call_id=tool_call_id, start=start)
        audit_decision(actor, session_id, settled)
    return resumed


def audit_decision(actor, session_id: str, settled: dict, **extra) -> None:
    """A staff member's decision in the audit log, targeting the session (a user's own
    decisions are its tree's ``neta.approval`` entries, as their other writes are)."""
    after = {k: settled.get(k) for k in ("toolCallId", "tool", "scope", "prefix", "note", "command") if settled.get(k)}
    record(actor=actor, action="approval.decide", target=(AgentSession._meta.label_lower, session_id),
           after={"decision": "allow" if settled.get("outcome") == "allowed" else "deny", **after, **extra})  # fmt: skip
