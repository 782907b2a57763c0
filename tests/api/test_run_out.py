"""A run's JSON (``RunOut``) is DRF's own representation, with its fields built once per class."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.utils import timezone
from rest_framework import serializers

from runtime.api import serializers as S
from runtime.models import AgentRun, RunStatus


def drf(run: AgentRun) -> dict:
    """What the plain ModelSerializer makes of ``run`` (fields built for this instance)."""
    return serializers.ModelSerializer.to_representation(S.RunOut(run), run)


def test_a_run_reads_as_drf_writes_it_queued_and_finished(owner, agent):
    queued = AgentRun.objects.create(session_id="s-1", agent=agent, user=owner, prompt="hi", status=RunStatus.QUEUED)
    now = timezone.now()
    done = AgentRun.objects.create(
        session_id="s-1", agent=agent, prompt="two", status=RunStatus.FAILED, error="boom", from_entry_id="e1",
        model_name="m", rounds=3, input_tokens=10, output_tokens=5, cost=Decimal("0.001250"),
        started_at=now - dt.timedelta(seconds=3), finished_at=now, question={"toolCallId": "t", "questions": []},
        notes=[{"kind": "failover", "text": "x"}], cancel_requested=True,
    )  # fmt: skip
    for run in (queued, done, AgentRun.objects.select_related("agent").get(pk=done.pk)):
        out = S.RunOut(run).data
        assert out == drf(run)
        assert list(out) == list(drf(run))  # the same keys in the same order
    out = S.RunOut(done).data
    assert out["startedAt"] is not None and out["cost"] == Decimal("0.001250") and out["agent"] == agent.name
    assert S.RunOut(queued).data["startedAt"] is None and S.RunOut(queued).data["runId"] == str(queued.run_id)
    assert S.RunOut([queued, done], many=True).data == [drf(queued), drf(done)]
