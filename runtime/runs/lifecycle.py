"""One run lifecycle: every transition of a run and of its queued inputs, one function each.

States: ``queued`` → ``running`` → ``completed`` | ``failed`` | ``aborted`` | ``lost``;
``running`` → ``waiting`` (an ``ask_user`` question; no process holds it) → ``queued``
(answered or expired: ``resume``) | ``aborted``;
``queued`` → ``aborted`` (an abort before it started) | ``failed`` (never started, or its
claim failed). A queued input (``RunInput``: a follow-up or a steer) is ``queued`` on an
active run until the turn loop ``consume``s it (or the reaper carries it on).

Each transition is a conditional UPDATE (``filter(pk=…, status__in=allowed_from)``): when
it changes no row the transition did not happen (another process got there first) and the
function says so — False or None — instead of writing over what it found. Each one sends
the run's ``run_state`` streaming event through the sink (the default one: the gateway's)
after its transaction commits, never before and never for an attempt that rolled back, so
every tab sees queued → running → done, an abort of a queued run and a reaped run.

Nothing else writes ``AgentRun.status`` (``tests/runtime/test_lifecycle.py`` scans the
source). The lock order is ``runtime/runs/locks.py``'s: the session row by primary key,
then the run rows by primary key, then the inputs; transactions are retried whole on a
deadlock or lock wait timeout (``retry_on_deadlock``).

Who calls what: ``create_run``/``queue_input`` the prompt (``runs/prompts.py``) and the
reaper; ``record_submission`` the backends (a first submission or a resubmission);
``claim``, ``next_input``, ``consume``, ``finish`` and ``fail_unclaimed`` the turn loop
(``runs/turn.py``); ``abort`` the abort service (``runs/prompts.py::run_abort``, acting
user as ``actor``); ``take_over``, ``lose`` and ``fail_queued`` the reaper.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from audit.services import record
from infra.prepared import P, Prepared, insert, update_rows
from runtime.crash_points import fault_point
from runtime.models import (
    ACTIVE_RUN_STATUSES,
    AgentRun,
    RunInput,
    RunInputKind,
    RunStatus,
)
from runtime.realtime import stream_events
from runtime.realtime.sinks import StreamSink, default_sink
from runtime.runs.locks import lock_session_id, lock_session_key, retry_on_deadlock
from sessions_tree.models import AgentSession
from toolcatalog import catalog_version

logger = logging.getLogger(__name__)

TERMINAL_RUN_STATUSES = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.ABORTED, RunStatus.LOST)
FINISHED_BY_THE_LOOP = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.ABORTED)


# --------------------------------------------------------------------------- events




def _announce(session_id: str, run_id, state: str, error: str = "", sink: StreamSink | None = None) -> None:
    """Send the run's state once the current transaction commits (at once in autocommit)."""
    event = stream_events.run_state(run_id=run_id, state=str(state), error=error)

    def send() -> None:
        try:
            (sink or default_sink()).emit(session_id, event)
        except Exception:  # a missing channel layer never undoes a transition
            logger.exception("could not announce the state of run %s", run_id)

    transaction.on_commit(send)


def _transition(run_pk: int, allowed_from, *, where: dict | None = None, **fields) -> bool:
    """The one conditional UPDATE of a run's state (``where``: further conditions on the
    row, e.g. its owner): True when it happened."""
    return bool(update_rows(AgentRun, {"pk": run_pk, "status__in": tuple(allowed_from), **(where or {})}, fields))


def _undelivered_note(run_pk: int, status: str) -> str:
    """A run ending failed or aborted with prompts queued on it says how many were not run."""
    waiting = RunInput.objects.filter(run_id=run_pk, consumed=False).count()
    return f"{waiting} queued prompt(s) not run: the run ended {status}" if waiting else ""


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def abort_text(run: AgentRun, actor, when: str = "") -> str:
    """Who stopped the run, as its error says it: the run's own user, staff by name, or
    nobody named (a command, a test)."""
    if actor is None:
        who = "aborted"
    elif run.user_id is not None and actor.pk == run.user_id:
        who = "aborted by the user"
    else:
        who = f"aborted by staff {actor.get_username()}"
    return f"{who}{when}"


# --------------------------------------------------------------------------- queued


def create_run(
    meta: AgentSession,
    *,
    agent,
    user=None,
    user_id: int | None = None,
    prompt: str,
    images=None,
    from_entry_id: str = "",
    model_name: str = "",
    prompt_entry_id: str = "",
    instructions: str = "",
    sampling: dict | None = None,
    backend: str | None = None,
    submission: dict | None = None,
    sink: StreamSink | None = None,
) -> AgentRun:
    """created → ``queued``, for ``user`` (or the user ``user_id``: who prompted). The caller
    holds ``meta``'s row lock (``lock_session``): no other run of the session is active.
    ``prompt_entry_id``: the prompt is already in the tree (a regenerated answer).
    ``instructions`` and ``sampling``: this run's additions to the system prompt and its
    sampling parameters (an OpenAI client's).
    ``submission``: its first submission's columns (its backend among them), written with
    it (``backends.first_submission``)."""
    run = AgentRun(
        session_id=meta.session_id,
        agent=agent,
        user_id=getattr(user, "pk", None) or user_id,
        prompt=prompt,
        images=images or [],
        from_entry_id=from_entry_id or "",
        model_name=model_name or "",
        prompt_entry_id=prompt_entry_id or "",
        instructions=instructions or "",
        sampling=sampling or {},
        status=RunStatus.QUEUED,
        **{"backend": backend or settings.NETA_TASK_BACKEND, **(submission or {})},
    )
    insert([run])
    _announce(run.session_id, run.run_id, RunStatus.QUEUED, sink=sink)
    return run


def queue_input(
    run: AgentRun, *, kind: str, text: str, images=None, user=None, user_id: int | None = None, sink: StreamSink | None = None
) -> RunInput | None:
    """A follow-up or steer ``queued`` on active ``run``; None when the run is no longer
    active. The caller holds the session's row lock, under which a run only stops being
    active through ``finish``/``abort``/``lose``/``fail_queued`` (all of them lock it too)."""
    status = AgentRun.objects.filter(pk=run.pk, status__in=ACTIVE_RUN_STATUSES).values_list("status", flat=True).first()
    if status is None:
        return None
    # ``user`` sent it (staff may queue on someone else's run): the entry it becomes names them.
    item = RunInput.objects.create(run=run, kind=kind, text=text, images=images or [], user_id=getattr(user, "pk", None) or user_id)
    _announce(run.session_id, run.run_id, status, sink=sink)
    return item


def record_submission(run: AgentRun, *, backend: str, owner: dict, sink: StreamSink | None = None) -> bool:
    """``queued`` → ``queued``, handed to ``backend`` (a first submission or a resubmission):
    of two reapers resubmitting one run, one wins (the count must be the one they read)."""
    resubmitted = run.submissions > 0
    if not AgentRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED, submissions=run.submissions).update(
        backend=backend, submitted_at=timezone.now(), submissions=F("submissions") + 1, **owner
    ):
        return False
    run.backend, run.submissions = backend, run.submissions + 1
    if resubmitted:
        _announce(run.session_id, run.run_id, RunStatus.QUEUED, sink=sink)
    return True


# --------------------------------------------------------------------------- running


def claim(run_id, *, worker: str, owner: dict, sink: StreamSink | None = None) -> AgentRun | None:
    """``queued`` → ``running`` for this worker: one conditional UPDATE by primary key, in
    autocommit (one row, one lock: it cannot close a cycle). None when the run was not
    queued (claimed elsewhere, aborted, gone). Errors go to the caller, which records them
    (``fail_unclaimed``).

    Two queries: the run (with its agent and model, and the tool catalog's version, which
    lets the run take the catalog this process keeps: ``toolcatalog.catalog_version``), then
    the UPDATE; the returned copy carries what the UPDATE wrote. What the read saw cannot
    change while the run is queued except through a transition the UPDATE's condition
    refuses (an abort) or fields the UPDATE sets itself (the owner)."""
    fault_point("claim")
    run = _RUN_TO_CLAIM.first(run_id=run_id)
    if run is None:
        return None
    now = timezone.now()
    fields = {"status": RunStatus.RUNNING, "started_at": now, "heartbeat_at": now, "worker": worker, **owner}
    claimed = retry_on_deadlock(lambda: _transition(run.pk, [RunStatus.QUEUED], **fields), what=f"claim of run {run_id}", atomic=False)
    if not claimed:
        return None
    for name, value in fields.items():
        setattr(run, name, value)
    _announce(run.session_id, run.run_id, RunStatus.RUNNING, sink=sink)
    return run


_RUN_TO_CLAIM = Prepared(
    lambda: AgentRun.objects.select_related("agent", "agent__model")
    .annotate(catalog_version=catalog_version.current_version())
    .filter(run_id=P("run_id", AgentRun._meta.get_field("run_id")))[:1]
)


def fail_unclaimed(run_id, *, worker: str, error: str, sink: StreamSink | None = None) -> bool:
    """A claim that raised: ``queued`` (or ``running`` for this very worker, when it raised
    after the UPDATE) → ``failed`` with the reason, so it is never left queued behind an
    acknowledged task."""

    def work() -> tuple[bool, AgentRun | None]:
        run = AgentRun.objects.filter(run_id=run_id).first()
        if run is None:
            return False, None
        lock_session_id(run.session_id)
        done = bool(
            AgentRun.objects.filter(pk=run.pk)
            .filter(Q(status=RunStatus.QUEUED) | Q(status=RunStatus.RUNNING, worker=worker))
            .update(status=RunStatus.FAILED, error=_join(error, _undelivered_note(run.pk, RunStatus.FAILED)), finished_at=timezone.now())
        )
        if done:
            run.refresh_from_db(fields=["status", "error"])
            _announce(run.session_id, run.run_id, run.status, run.error, sink=sink)
        return done, run

    done, _ = retry_on_deadlock(work, what=f"recording the failed claim of run {run_id}")
    return done


def pending_inputs(run: AgentRun, kind: str | None = None) -> list[RunInput]:
    """The inputs queued on ``run`` and not consumed yet, oldest first (of ``kind``, if given)."""
    qs = RunInput.objects.filter(run_id=run.pk, consumed=False)
    if kind is not None:
        qs = qs.filter(kind=kind)
    return list(qs.order_by("id"))


def consume(run: AgentRun, item: RunInput, *, sink: StreamSink | None = None) -> bool:
    """A queued input of running ``run`` → consumed (it is in the tree now). False when it
    was consumed already (the reaper carried it on). One conditional UPDATE by key."""
    done = bool(RunInput.objects.filter(pk=item.pk, run_id=run.pk, consumed=False).update(consumed=True))
    if done:
        item.consumed = True
        _announce(run.session_id, run.run_id, RunStatus.RUNNING, sink=sink)
    return done


def next_input(
    run: AgentRun,
    *,
    or_complete: bool = False,
    sink: StreamSink | None = None,
    meta: AgentSession | None = None,
    fields: dict | None = None,
) -> RunInput | None:
    """The next queued input of running ``run``. Without ``or_complete`` only a read (no
    lock, no transaction: it decides nothing). With ``or_complete``, when there is none
    the run becomes ``completed`` in the same transaction, under the session's row lock
    that a prompt takes to queue on it: a prompt either queues before (and is returned
    here) or finds the run done and starts a new one. ``meta``: the caller's copy of the
    session row (its key: the lock is one query); ``fields``: the run's bookkeeping the
    caller still owes it (usage, rounds), written by the completing UPDATE."""
    if not or_complete:
        return _NEXT_INPUT.first(run=run.pk)

    def work() -> RunInput | None:
        key = _lock(run.session_id, meta)
        item = _NEXT_INPUT.first(run=run.pk)
        if item is None:
            _finish_locked(run, RunStatus.COMPLETED, "", sink, key, fields)
        return item

    return retry_on_deadlock(work, what=f"the next input of run {run.run_id}")


_NEXT_INPUT = Prepared(lambda: RunInput.objects.filter(run_id=P("run"), consumed=False).order_by("id")[:1])
_STEERED_OR_CANCELLED = Prepared(
    lambda: AgentRun.objects.filter(pk=P("run"))
    .annotate(steered=Exists(RunInput.objects.filter(run_id=OuterRef("pk"), consumed=False, kind=RunInputKind.STEER)))
    .values_list("steered", "cancel_requested")[:1]
)


def steer_or_cancel(run: AgentRun) -> tuple[list[RunInput], bool]:
    """After a round of tool calls, in one read: the steering inputs queued on ``run``
    (oldest first) and whether an abort was asked for. The steers themselves are read
    only when there are some."""
    steered, cancel = _STEERED_OR_CANCELLED.first(run=run.pk) or (False, False)
    return (pending_inputs(run, RunInputKind.STEER) if steered else []), bool(cancel)


def finish(
    run: AgentRun,
    status: str,
    *,
    error: str = "",
    abort_when: str | None = None,
    sink: StreamSink | None = None,
    meta: AgentSession | None = None,
    fields: dict | None = None,
) -> bool:
    """``running`` → ``completed`` | ``failed`` | ``aborted``. With ``abort_when`` (an
    abort) the error is who aborted it (``abort_text``) followed by ``abort_when``.
    A failed or aborted run with prompts still queued says how many were not run.
    ``meta`` and ``fields`` as for ``next_input``."""
    if status not in FINISHED_BY_THE_LOOP:
        raise ValueError(f"the turn loop does not finish a run as {status!r}")

    def work() -> bool:
        key = _lock(run.session_id, meta)
        text = error
        if abort_when is not None:
            row = AgentRun.objects.select_related("cancelled_by").get(pk=run.pk)
            text = abort_text(row, row.cancelled_by, abort_when)
        return _finish_locked(run, status, text, sink, key, fields)

    return retry_on_deadlock(work, what=f"finishing run {run.run_id} as {status}")


def _lock(session_id: str, meta: AgentSession | None) -> int | None:
    """The session's row lock (``locks.py``): by the key of the caller's copy (one query), or
    found by id."""
    if meta is not None:
        return lock_session_key(meta.pk, session_id)
    locked = lock_session_id(session_id)
    return locked.pk if locked is not None else None


def _finish_locked(run: AgentRun, status: str, error: str, sink: StreamSink | None, session_pk: int | None, fields: dict | None = None) -> bool:
    fault_point("finish", run=run.pk, session=session_pk or 0)
    if status != RunStatus.COMPLETED:
        error = _join(error, _undelivered_note(run.pk, status))
    now = timezone.now()
    done = _transition(run.pk, [RunStatus.RUNNING], **{**(fields or {}), "status": status, "error": error, "finished_at": now, "in_flight_entry_id": ""})
    if done:
        run.status, run.error, run.finished_at, run.in_flight_entry_id = status, error, now, ""
        _announce(run.session_id, run.run_id, status, error, sink=sink)
    return done


# --------------------------------------------------------------------------- waiting


def wait(run: AgentRun, question: dict, *, sink: StreamSink | None = None) -> bool:
    """``running`` → ``waiting`` on ``question`` (an ``ask_user`` call): the loop returns
    and the run holds no thread or worker until ``resume``. Under the session's row lock,
    so an abort or an answer sees either state, never one in between."""

    def work() -> bool:
        lock_session_id(run.session_id)
        now = timezone.now()
        done = _transition(
            run.pk, [RunStatus.RUNNING], where={"cancel_requested": False},
            status=RunStatus.WAITING, question=question, waiting_since=now, in_flight_entry_id="", worker="",
        )
        if done:
            run.status, run.question, run.waiting_since = RunStatus.WAITING, question, now
            _announce(run.session_id, run.run_id, RunStatus.WAITING, sink=sink)
        return done

    return retry_on_deadlock(work, what=f"parking run {run.run_id} on a question")


def resume(run: AgentRun, settled: dict, *, tool_call_id: str, sink: StreamSink | None = None) -> bool:
    """``waiting`` on ``tool_call_id`` → ``queued`` with the question ``settled`` (its
    ``outcome``: answered / expired, and the answer): the caller submits it and the turn,
    once it claims the run, writes the answer as the tool's result. Of two answers (two
    tabs, an answer and the expiry) one wins; the other is told False."""

    def work() -> bool:
        lock_session_id(run.session_id)
        done = bool(
            AgentRun.objects.filter(
                pk=run.pk, status=RunStatus.WAITING, question__toolCallId=tool_call_id, cancel_requested=False
            ).update(status=RunStatus.QUEUED, question=settled, waiting_since=None, submissions=0, submitted_at=None)
        )
        if done:
            run.status, run.question, run.submissions = RunStatus.QUEUED, settled, 0
            _announce(run.session_id, run.run_id, RunStatus.QUEUED, sink=sink)
        return done

    return retry_on_deadlock(work, what=f"resuming run {run.run_id}")


# --------------------------------------------------------------------------- abort


@dataclass
class AbortOutcome:
    run: AgentRun | None
    stopped: bool  # True: a queued (or waiting) run was aborted at once; False: a running one was asked to stop (or nothing to do)
    was_waiting: bool = False  # it waited on a question: the caller closes the open tool call


def _audit_abort(actor, run: AgentRun, was: str) -> None:
    """A staff abort in the audit log, in the abort's transaction."""
    record(
        actor=actor, action="run.abort", target=("runtime.agentrun", run.run_id, f"run of session {run.session_id}"),
        before={"status": was}, after={"status": run.status, "cancel_requested": run.cancel_requested},
    )  # fmt: skip


def abort(*, session_id: str | None = None, run: AgentRun | None = None, actor=None, sink: StreamSink | None = None) -> AbortOutcome:
    """Abort the session's active run (or ``run``): ``queued`` → ``aborted`` at once; a
    ``running`` run gets its ``cancel_requested`` flag (the loop stops at its next check and
    ``finish``es it ``aborted``) and ``cancelled_by`` = ``actor``. Under the session's row
    lock, so a queued run is not aborted while its prompt's transaction still decides."""
    sid = session_id if session_id is not None else run.session_id

    def work() -> AbortOutcome:
        lock_session_id(sid)
        target = run
        if target is None:
            target = AgentRun.objects.filter(session_id=sid, status__in=ACTIVE_RUN_STATUSES).order_by("created_at", "pk").first()
        if target is None:
            return AbortOutcome(None, False)
        actor_pk = actor.pk if actor is not None else None
        # Queued or waiting on a question: it holds no thread, so it ends here and now.
        for status, when, extra in (
            (RunStatus.QUEUED, " before it started", {}),
            (RunStatus.WAITING, " while it waited for an answer", {"waiting_since": None}),
        ):
            if _transition(
                target.pk,
                [status],
                status=RunStatus.ABORTED,
                cancel_requested=True,
                cancelled_by_id=actor_pk,
                error=_join(abort_text(target, actor, when), _undelivered_note(target.pk, RunStatus.ABORTED)),
                finished_at=timezone.now(),
                **extra,
            ):
                target.refresh_from_db()
                _announce(target.session_id, target.run_id, target.status, target.error, sink=sink)
                _audit_abort(actor, target, status)
                return AbortOutcome(target, True, was_waiting=status == RunStatus.WAITING)
        # Running: ask it to stop (the first actor to ask is the one recorded).
        asked = AgentRun.objects.filter(pk=target.pk, status=RunStatus.RUNNING, cancel_requested=False).update(
            cancel_requested=True, cancelled_by_id=actor_pk
        )
        target.refresh_from_db()
        if asked:
            _audit_abort(actor, target, RunStatus.RUNNING)
        return AbortOutcome(target, False)

    return retry_on_deadlock(work, what=f"aborting the run of session {sid}")


# --------------------------------------------------------------------------- the reaper's


def take_over(run: AgentRun, owner: dict) -> bool:
    """The reaper makes this process the owner of running ``run`` (heartbeat fresh) before
    closing its entries: of two reapers one wins, and one that dies midway leaves a run
    the next round reaps again. Not a change of state: the run stays ``running``, so a
    prompt arriving meanwhile queues on it instead of starting a run on an open tree."""
    return bool(
        AgentRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING, heartbeat_at=run.heartbeat_at, pid=run.pid).update(
            heartbeat_at=timezone.now(), **owner
        )
    )


def lose(run: AgentRun, notes: list[str], *, owner: dict, deleting: bool = False, sink: StreamSink | None = None) -> tuple[bool, AgentRun | None]:
    """``running`` (taken over by this process) → ``lost``, and the prompts it accepted and
    never delivered carried on, in order: into a new run (returned, to be submitted), or
    onto the session's active run; recorded as not run when the session is gone or
    ``deleting``. Returns (whether it happened, the new run)."""

    def work() -> tuple[bool, AgentRun | None]:
        meta = lock_session_id(run.session_id)
        if not _transition(
            run.pk,
            [RunStatus.RUNNING],
            where={"pid": owner["pid"], "host": owner["host"]},  # still ours: taken over by this process
            status=RunStatus.LOST,
            finished_at=timezone.now(),
            in_flight_entry_id="",
        ):
            return False, None
        gone = "the session is being deleted" if deleting else "the session no longer exists"
        carried, note = _carry_prompts(run, None if deleting else meta, gone=gone, sink=sink)
        error = _join(*notes, note)
        AgentRun.objects.filter(pk=run.pk).update(error=error)
        run.status, run.error = RunStatus.LOST, error
        _announce(run.session_id, run.run_id, RunStatus.LOST, error, sink=sink)
        return True, carried

    return retry_on_deadlock(work, what=f"reaping run {run.run_id}")


def _carry_prompts(run: AgentRun, meta: AgentSession | None, *, gone: str, sink: StreamSink | None) -> tuple[AgentRun | None, str]:
    inputs = pending_inputs(run)
    prompts = [(i.text, i.images, i.user_id) for i in inputs]  # each keeps who sent it
    own = not run.prompt_entry_id and bool(run.prompt)
    if own:  # died before its own prompt reached the tree
        prompts.insert(0, (run.prompt, run.images, run.user_id))
    if not prompts:
        return None, ""
    RunInput.objects.filter(pk__in=[i.pk for i in inputs], consumed=False).update(consumed=True)
    if meta is None:
        return None, f"{len(prompts)} accepted prompt(s) not run: {gone}"
    current = AgentRun.objects.filter(session_id=run.session_id, status__in=ACTIVE_RUN_STATUSES).order_by("created_at", "pk").first()
    if current is not None:
        for text, images, user_id in prompts:
            queue_input(current, kind=RunInputKind.FOLLOW_UP, text=text, images=images, user_id=user_id, sink=sink)
        return None, f"{len(prompts)} accepted prompt(s) queued on run {current.run_id}"
    (text, images, user_id), rest = prompts[0], prompts[1:]
    # The run's own prompt keeps its instructions and sampling parameters (they were given with it).
    options = {"instructions": run.instructions, "sampling": run.sampling} if own else {}
    carried = create_run(meta, agent=run.agent, user_id=user_id, prompt=text, images=images, model_name=run.model_name, sink=sink, **options)
    for text, images, user_id in rest:
        RunInput.objects.create(run=carried, kind=RunInputKind.FOLLOW_UP, text=text, images=images, user_id=user_id)
    return carried, f"{len(prompts)} accepted prompt(s) carried into run {carried.run_id}"


def fail_queued(run: AgentRun, why: str, *, sink: StreamSink | None = None) -> bool:
    """``queued`` → ``failed``: nothing could run it (the reaper, after its last submission)."""

    def work() -> bool:
        lock_session_id(run.session_id)
        error = _join(f"never started: {why}, after {run.submissions} submissions", _undelivered_note(run.pk, RunStatus.FAILED))
        done = bool(
            AgentRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED, submissions=run.submissions).update(
                status=RunStatus.FAILED, finished_at=timezone.now(), error=error
            )
        )
        if done:
            run.status, run.error = RunStatus.FAILED, error
            _announce(run.session_id, run.run_id, RunStatus.FAILED, error, sink=sink)
        return done

    return retry_on_deadlock(work, what=f"failing queued run {run.run_id}")


__all__ = [
    "AbortOutcome",
    "abort",
    "abort_text",
    "claim",
    "consume",
    "create_run",
    "fail_queued",
    "fail_unclaimed",
    "finish",
    "lose",
    "next_input",
    "pending_inputs",
    "queue_input",
    "record_submission",
    "resume",
    "steer_or_cancel",
    "take_over",
    "wait",
]
