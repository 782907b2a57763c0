"""Celery tasks: thin, named, JSON arguments, calling the runtime's code."""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections

from runtime.crash_points import crash_point
from runtime.models import AgentRun, RunStatus
from runtime.runs.backends import RUN_TASK
from runtime.runs.process import this_process
from runtime.runs.reaper import reap_stale_runs as reap
from runtime.runs.turn import execute_run


@shared_task(name=RUN_TASK, acks_late=True, ignore_result=True)
def run_agent_turn(run_id: str) -> None:

    close_old_connections()  # the task thread keeps its connection (neta/celery.py): drop a broken one
    record_receiver(run_id)  # the run's owner until it is claimed: a kill in between is seen at once
    crash_point("claim")  # test-only: a worker killed between taking the task and claiming the run
    execute_run(run_id)


@shared_task(name="runtime.reap_stale_runs", ignore_result=True)
def reap_stale_runs() -> int:

    return len(reap())


def record_receiver(run_id: str) -> None:
    """A Celery worker child took the task of queued ``run_id``: record it as the run's owner
    until it claims the run, so a child killed in between is seen as gone at once."""
    AgentRun.objects.filter(run_id=run_id, status=RunStatus.QUEUED).update(**this_process())
