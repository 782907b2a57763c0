"""Task backends: where a run's turn body executes (docs/runtime.md, "Backends").

``inline``: a thread pool inside the web process (the embedded default).
``celery``: a Celery worker, the task enqueued after commit. Same code path:
both end in ``runtime.runs.turn.execute_run(run_id)``.

A run records the process that owns it (host, pid and the process's start time):
the submitting process while an inline run waits for a thread, the executing one
once claimed. The reaper (``runtime/runs/reaper.py``) uses it to tell a run whose
process is gone from one whose process is only slow.
"""

from __future__ import annotations

import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from infra import db_threads
from runtime.crash_points import crash_point
from runtime.models import AgentRun, RunStatus
from runtime.runs.lifecycle import record_submission

HOST = socket.gethostname()


_executor: ThreadPoolExecutor | None = None


_executor_lock = threading.Lock()


_cancels: dict[str, threading.Event] = {}


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, ``/proc/<pid>/stat`` field 22), or None
    where there is no ``/proc`` or no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[
        1
    ].split()  # the command name (field 2) may hold spaces
    return int(fields[19])


@lru_cache(maxsize=1)
def _own_identity(pid: int) -> dict:
    return {"host": HOST, "pid": pid, "process_started": process_start_time(pid)}


def this_process() -> dict:
    """The identity recorded on runs this process owns (recomputed after a fork)."""
    return _own_identity(os.getpid())


def process_gone(host: str, pid: int | None, started: int | None) -> bool:
    """True only when certain: ``pid`` on ``host`` (this host) no longer runs, or runs as a
    different process (another start time: the pid was reused). Other hosts: False."""
    if not host or host != HOST or not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc (macOS): ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    tail = stat.rsplit(")", 1)[1].split()
    if tail[0] in ("Z", "X"):  # a zombie or dead process runs nothing
        return True
    return started is not None and int(tail[19]) != started


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = db_threads.executor("neta-run", settings.NETA_INLINE_WORKERS)
        return _executor


def _owner(backend: str) -> dict:
    """Who owns a run handed to ``backend``: this process for the inline backend, nobody yet
    for Celery (the worker that claims it)."""
    return this_process() if backend == "inline" else {"host": "", "pid": None, "process_started": None}


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
        from runtime.runs.tasks import (
            run_agent_turn,  # a cycle: the task calls back into this module
        )

        run_agent_turn.delay_on_commit(run_id)
    elif start:
        event = _cancels.setdefault(run_id, threading.Event())
        transaction.on_commit(lambda: _pool().submit(_inline_job, run_id, event))
    return True


def _inline_job(run_id: str, event: threading.Event) -> None:
    from runtime.runs.turn import (
        execute_run,  # a cycle: the turn loop reads this module's process identity
    )

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


def record_receiver(run_id: str) -> None:
    """A Celery worker child took the task of queued ``run_id``: record it as the run's owner
    until it claims the run, so a child killed in between is seen as gone at once."""

    AgentRun.objects.filter(run_id=run_id, status=RunStatus.QUEUED).update(
        **this_process()
    )
