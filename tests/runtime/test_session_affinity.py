"""Which Celery queue a session's run goes to (docs/deploy.md, "Several hosts"): the queue of
the host that started the session's last run, so its workspace is on that host's disk."""

from __future__ import annotations

import pytest
from django.utils import timezone

from runtime.models import AgentRun
from runtime.runs.backends import affinity_queue
from tests.support.rules import rules

pytestmark = pytest.mark.django_db


def _run(agent, session_id: str, *, host: str = "", started: bool = True, submissions: int = 1) -> AgentRun:
    return AgentRun.objects.create(
        session_id=session_id, agent=agent, backend="celery", status="completed" if started else "queued", host=host,
        started_at=timezone.now() if started else None, submissions=submissions,
    )  # fmt: skip


def test_a_run_goes_to_the_queue_of_the_host_of_the_sessions_last_started_run(settings, make_agent):
    settings.NETA_SESSION_AFFINITY = True
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    agent = make_agent(rules())
    first = _run(agent, "s1", started=False)
    assert affinity_queue(first) is None  # the session's first run: any worker
    _run(agent, "s1", host="host-a")
    _run(agent, "s1", host="host-b")
    _run(agent, "s1", host="")  # a run no worker started on a host (an inline one)
    _run(agent, "s2", host="host-c")  # another session's
    _run(agent, "s1", host="host-d", started=False)  # never started: its host held no workspace
    now = _run(agent, "s1", started=False)
    assert affinity_queue(now) == f"{queue}.host.host-b"
    # A run submitted again (by the reaper: its host may be gone for good) goes to any worker,
    # and so does every run when affinity is off.
    assert affinity_queue(_run(agent, "s1", started=False, submissions=2)) is None
    settings.NETA_SESSION_AFFINITY = False
    assert affinity_queue(now) is None
