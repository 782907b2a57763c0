"""Reads that pick one run of a session say which (no implicit order).

A session's active run is its oldest queued or running one; two runs created in the
same instant (the clock's resolution, a restore, a copy) are told apart by their id.
Without that tie-break the database returns them in the order of the index it walks
(``(session_id, status)``: a newer ``queued`` run before an older ``running`` one), and
the prompt, the abort, the reaper and the socket could each name a different run."""

from __future__ import annotations

import pytest
from django.utils import timezone

from runtime.gateway.consumers import Binding, _run_state
from runtime.models import AgentRun, RunStatus
from runtime.runs.questions import waiting_run
from runtime.runs.selectors import active_run, run_state
from sessions_tree.models import AgentSession
from tests.support.builders import build_tree

pytestmark = pytest.mark.django_db


def same_instant(*runs: AgentRun) -> None:
    AgentRun.objects.filter(pk__in=[r.pk for r in runs]).update(created_at=timezone.now())


def test_the_active_run_is_the_oldest_by_id_when_created_in_the_same_instant(owner, agent):
    tree = build_tree(owner, agent)
    older = AgentRun.objects.create(session_id=tree.session_id, agent=agent, user=owner, status=RunStatus.RUNNING)
    newer = AgentRun.objects.create(session_id=tree.session_id, agent=agent, user=owner, status=RunStatus.QUEUED)
    same_instant(older, newer)

    assert active_run(tree.session_id) == older
    assert run_state(tree.session_id) == {"state": "running", "runId": str(older.run_id)}
    meta = AgentSession.objects.get(session_id=tree.session_id)
    binding = Binding(session_id=tree.session_id, session_pk=meta.pk, user_pk=owner.pk, token_pk=None)
    assert _run_state(binding)["runId"] == str(older.run_id)  # the socket names the same run


def test_the_waiting_run_is_the_oldest_by_id_when_created_in_the_same_instant(owner, agent):
    tree = build_tree(owner, agent)
    runs = [AgentRun.objects.create(session_id=tree.session_id, agent=agent, user=owner, status=RunStatus.WAITING) for _ in range(3)]
    same_instant(*runs)
    assert waiting_run(tree.session_id) == runs[0]
