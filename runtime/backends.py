"""Task backends: where a run's turn body executes (DESIGN §5).

``inline``: a thread pool inside the web process (the embedded default).
``celery``: a Celery worker, the task enqueued after commit. Same code path:
both end in ``runtime.turn.execute_run(run_id)``.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import transaction

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()
_cancels: dict[str, threading.Event] = {}


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=settings.NETA_INLINE_WORKERS, thread_name_prefix="neta-run")
        return _executor


def submit_run(run) -> None:
    """Start ``run`` once the surrounding transaction commits."""
    run_id = str(run.run_id)
    if run.backend == "celery":
        from runtime.tasks import run_agent_turn

        run_agent_turn.delay_on_commit(run_id)
        return
    event = _cancels.setdefault(run_id, threading.Event())
    transaction.on_commit(lambda: _pool().submit(_inline_job, run_id, event))


def _inline_job(run_id: str, event: threading.Event) -> None:
    from django.db import close_old_connections

    from runtime.turn import execute_run

    close_old_connections()  # a pooled thread may hold a connection that went stale
    try:
        execute_run(run_id, cancel=event)
    finally:
        _cancels.pop(run_id, None)
        close_old_connections()


def cancel_local(run_id) -> None:
    """Wake a run executing in this process at once (others see the DB flag within ~0.25 s)."""
    event = _cancels.get(str(run_id))
    if event is not None:
        event.set()
