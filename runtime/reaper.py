"""The reaper: runs whose worker stopped beating are finalized as lost.

A run's heartbeat is written every second while it runs. When it is older than
``NETA_RUN_STALE_SECONDS`` the worker is taken for dead: the run becomes
``lost`` and its in-flight entry is stored as ``aborted`` with the content of
its last checkpoint, plus an aborted result for every tool call in it, so the
tree stays valid and auditable.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.utils import timezone

from runtime.models import AgentRun, RunStatus
from sessions_tree.providers import provider_for_session

logger = logging.getLogger(__name__)


def reap_stale_runs(*, stale_seconds: int | None = None, session_id: str | None = None) -> list[AgentRun]:
    stale = stale_seconds if stale_seconds is not None else settings.NETA_RUN_STALE_SECONDS
    cutoff = timezone.now() - dt.timedelta(seconds=stale)
    candidates = AgentRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=cutoff)
    if session_id is not None:
        candidates = candidates.filter(session_id=session_id)
    reaped = []
    for run in candidates:
        taken = AgentRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).update(
            status=RunStatus.LOST,
            finished_at=timezone.now(),
            error=f"worker {run.worker or '?'} stopped responding (no heartbeat since {run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC)",
        )
        if not taken:
            continue
        finalize_abandoned_entry(run.session_id)
        run.refresh_from_db()
        reaped.append(run)
        logger.warning("reaped lost run %s of session %s", run.run_id, run.session_id)
    return reaped


def reap_session(session_id: str) -> list[AgentRun]:
    """Before a new prompt: reap this session's stale run, if any."""
    return reap_stale_runs(session_id=session_id)


def finalize_abandoned_entry(session_id: str) -> dict | None:
    """Store a dangling in-flight entry as aborted (its last checkpoint) and close its tool calls."""
    from toolcatalog.protocol import ToolResult

    provider = provider_for_session(session_id)
    entry = provider.get_in_flight(session_id)
    if entry is None:
        return None
    final = provider.finalize_in_flight(session_id, entry["id"], status="aborted")
    for block in final["message"].get("content") or []:
        if block.get("type") == "toolCall":
            result = ToolResult.error("Tool call aborted: the worker running it was lost.")
            provider.append_message(session_id, result.to_pi_tool_result(block.get("id") or "", block.get("name") or ""))
    return final
