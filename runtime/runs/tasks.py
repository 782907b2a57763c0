"""Celery tasks: thin, named, JSON arguments, calling the runtime's code."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import DatabaseError, close_old_connections, connection

from infra.db_threads import keep_connections, release
from infra.prepared import update_rows
from runtime.crash_points import crash_point, fault_point
from runtime.models import AgentRun, RunStatus
from runtime.runs.backends import RUN_TASK
from runtime.runs.process import this_process
from runtime.runs.reaper import reap_stale_runs as reap
from runtime.runs.turn import execute_run

logger = logging.getLogger(__name__)

# A task that could not reach the database before it claimed its run is sent again after
# these many seconds (then the last one again), at most RECEIVE_RETRIES times: the run is
# still queued and untouched, so nothing is done twice; only if the database stays out of
# reach that long does the reaper's claim period decide (docs/runtime.md).
RECEIVE_BACKOFF = (0.2, 0.5, 1, 2, 5)
RECEIVE_RETRIES = 30


@shared_task(bind=True, name=RUN_TASK, acks_late=True, ignore_result=True)
def run_agent_turn(self, run_id: str) -> None:

    keep_connections()  # a pool thread (``-P threads``) or a child's one thread: see infra/db_threads.py
    try:
        close_old_connections()  # drop a broken connection
        fault_point("receive")  # test-only: the database out of reach for a moment (NETA_TEST_FAULT_AT)
        record_receiver(run_id)  # the run's owner until it is claimed: a kill in between is seen at once
    except DatabaseError as exc:
        connection.close()
        retries = self.request.retries
        logger.warning("run %s: the database is out of reach before the claim (%s); sending it again", run_id, exc)
        raise self.retry(exc=exc, countdown=RECEIVE_BACKOFF[min(retries, len(RECEIVE_BACKOFF) - 1)], max_retries=RECEIVE_RETRIES) from None
    crash_point("claim")  # test-only: a worker killed between taking the task and claiming the run
    try:
        execute_run(run_id)
    finally:
        release()  # a pooled connection goes back while the thread waits for its next task


@shared_task(name="runtime.reap_stale_runs", ignore_result=True)
def reap_stale_runs() -> int:

    return len(reap())


def record_receiver(run_id: str) -> None:
    """A Celery worker took the task of queued ``run_id``: record its process as the run's
    owner until it claims the run, so a process killed in between is seen as gone at once."""
    update_rows(AgentRun, {"run_id": run_id, "status": RunStatus.QUEUED}, this_process())  # a kept statement: one per task
