"""Task backends: where a run's turn body executes (docs/runtime.md, "Backends").

``inline``: a thread pool inside the web process (the embedded default).
``celery``: a Celery worker, the task enqueued after commit. Same code path:
both end in ``runtime.runs.turn.execute_run(run_id)``.

A run records the process that owns it (``runtime/runs/process.py``): for the inline
backend this process from its submission on; for Celery, nobody until a worker takes it.
The Celery task is sent by name (``RUN_TASK``), so this module does not import the task
module that imports it back.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from celery import current_app
from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from infra import db_threads
from infra.prepared import P, Prepared
from runtime.crash_points import crash_point
from runtime.runs.lifecycle import record_submission
from runtime.models import AgentRun
from runtime.runs.process import host_queue, nobody, this_process
from runtime.runs.turn import execute_run

# The Celery task a queued run is sent to (runtime/runs/tasks.py registers it under this name).
RUN_TASK = "runtime.run_agent_turn"

_executor: ThreadPoolExecutor | None = None


_executor_lock = threading.Lock()


_cancels: dict[str, threading.Event] = {}


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = db_threads.executor("neta-run", settings.NETA_INLINE_WORKERS)
        return _executor


def _owner(backend: str) -> dict:
    """Who owns a run handed to ``backend``: this process for the inline backend, nobody yet
    for Celery (the worker that claims it)."""
    return this_process() if backend == "inline" else nobody()


def first_submission(backend: str | None = None) -> dict:
    """The columns of a run's first submission to ``backend`` (default: the configured one),
    for ``lifecycle.create_run`` to write with the run itself; then ``submit_run(run,
    recorded=True)`` hands it over without an UPDATE of its own."""
    backend = backend or settings.NETA_TASK_BACKEND
    return {"backend": backend, "submitted_at": timezone.now(), "submissions": 1, **_owner(backend)}


def submit_run(run, *, backend: str | None = None, start: bool = True, recorded: bool = False) -> bool:
    """Hand queued ``run`` to ``backend`` (default: its own) once the transaction commits.

    Records the submission (time, count; for the inline backend this process as the
    run's owner) with a conditional UPDATE: of two reapers re-submitting one run, one
    wins. ``start=False`` records an inline submission without starting it here (a
    short-lived process such as ``runtime_reap``): the server's reaper takes it over
    once this process has exited. ``recorded``: the run was created with its first
    submission (``first_submission``). Returns False when the run was no longer queued.
    """

    backend = backend or run.backend
    if not recorded and not record_submission(run, backend=backend, owner=_owner(backend)):
        return False
    run_id = str(run.run_id)
    if backend == "celery":
        queue = affinity_queue(run)
        transaction.on_commit(lambda: current_app.send_task(RUN_TASK, args=[run_id], queue=queue))
    elif start:
        event = _cancels.setdefault(run_id, threading.Event())
        transaction.on_commit(lambda: _pool().submit(_inline_job, run_id, event))
    return True


def affinity_queue(run) -> str | None:
    """The Celery queue of the host that ran the session's last turn (its workspace is on
    that host's disk), or None: the deployment's runs queue, any worker (the session's first
    turn, ``NETA_SESSION_AFFINITY=false``, or a run submitted again by the reaper, whose
    host may be gone for good). One read, by the session's runs."""
    if not settings.NETA_SESSION_AFFINITY or (run.submissions or 1) > 1:
        return None
    host = _LAST_HOST.first(session=run.session_id, pk=run.pk)
    return host_queue(settings.CELERY_TASK_DEFAULT_QUEUE, host) if host else None


# The host of the session's last started run but this one (a kept statement: one per prompt).
_LAST_HOST = Prepared(
    lambda: AgentRun.objects.filter(session_id=P("session"), started_at__isnull=False)
    .exclude(pk=P("pk"))
    .exclude(host="")
    .order_by("-pk")
    .values_list("host", flat=True)[:1]
)


def _inline_job(run_id: str, event: threading.Event) -> None:
    _reuse_connections()  # a pooled thread may hold a connection that went stale
    try:
        crash_point("claim")
        execute_run(run_id, cancel=event)
    finally:
        _cancels.pop(run_id, None)
        _reuse_connections()


def _reuse_connections() -> None:
    """A pool thread keeps its database connection from one run to the next, whatever
    ``NETA_DB_CONN_MAX_AGE`` says (``infra.db_threads``): one that is broken, or left in
    a transaction, is closed, and the next use health-checks the rest."""
    close_old_connections()


def cancel_local(run_id) -> None:
    """Wake a run executing in this process at once (others see the DB flag within ~0.25 s)."""
    event = _cancels.get(str(run_id))
    if event is not None:
        event.set()

