"""Subagent runs: a session's list, one run, its event log (replay by ``seq``), cancel.

Same authorization as the session the run belongs to (``sessions/access.py``): a run of a
session the caller may not read answers 404 like a missing one; cancelling needs write.
"""

from __future__ import annotations
from django.utils.translation import gettext as _

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime.api.errors import ApiError
from runtime.api.views.base import (
    ERROR,
    READ_ERRORS,
    WRITE_ERRORS,
    SessionApi,
    parse,
    session_or_404,
)
from runtime.models import SubprocessEvent, SubprocessRun
from runtime.subagents.services import subprocess_run_cancel

MAX_EVENTS_PAGE = 500
MAX_RUNS_LIST = 500


class SubagentRunOut(serializers.Serializer):
    runId = serializers.CharField(source="run_id")
    sessionId = serializers.CharField(source="session_id")
    batchId = serializers.CharField(source="batch_id")
    batchEntryId = serializers.CharField(source="batch_entry_id")
    parentRunId = serializers.CharField(source="parent_run.run_id")
    toolCallId = serializers.CharField(source="tool_call_id")
    taskIndex = serializers.IntegerField(source="task_index")
    mode = serializers.CharField()
    depth = serializers.IntegerField()
    parentSubagentRunId = serializers.SerializerMethodField()
    agent = serializers.CharField()
    status = serializers.CharField()
    pid = serializers.IntegerField(allow_null=True)
    workerHost = serializers.CharField(source="worker_host")
    createdAt = serializers.DateTimeField(source="created_at")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    endedAt = serializers.DateTimeField(source="ended_at", allow_null=True)
    heartbeatAt = serializers.DateTimeField(source="heartbeat_at", allow_null=True)
    exitCode = serializers.IntegerField(source="exit_code", allow_null=True)
    exitSignal = serializers.CharField(source="exit_signal")
    errorCode = serializers.CharField(source="error_code")
    error = serializers.CharField()
    usage = serializers.JSONField()
    counts = serializers.JSONField()
    eventCount = serializers.IntegerField(source="event_count")
    cancelRequested = serializers.BooleanField(source="cancel_requested")
    cancelledBy = serializers.CharField(source="cancelled_by")

    def get_parentSubagentRunId(self, run) -> str | None:
        """The child run that delegated this one (a grandchild), else null."""
        return str(run.parent_subprocess.run_id) if run.parent_subprocess_id else None


class SubagentRunDetailOut(SubagentRunOut):
    task = serializers.CharField()
    finalText = serializers.CharField(source="final_text")
    limits = serializers.JSONField()
    deniedTools = serializers.JSONField(source="denied_tools")
    stderrTail = serializers.CharField(source="stderr_tail")
    noise = serializers.JSONField()


class SubagentEventOut(serializers.Serializer):
    seq = serializers.IntegerField()
    type = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    payload = serializers.JSONField()


class SubagentEventsOut(serializers.Serializer):
    runId = serializers.CharField()
    status = serializers.CharField()
    events = SubagentEventOut(many=True)
    nextAfterSeq = serializers.IntegerField()
    hasMore = serializers.BooleanField()


class StrictQuery(serializers.Serializer):
    """Paging parameters: a bad value or a parameter the endpoint does not know is a 400
    (a misspelt ``limit`` silently ignored would page wrong without a word)."""

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields))
        problems = {name: "unknown query parameter" for name in unknown}
        for name in set(self.initial_data) & set(self.fields):
            if str(self.initial_data.get(name)).strip() == "":  # DRF would take the default
                problems[name] = "must not be empty"
        if problems:
            raise serializers.ValidationError(problems)
        return attrs


class SubagentRunsQuery(StrictQuery):
    limit = serializers.IntegerField(min_value=1, max_value=MAX_RUNS_LIST, default=MAX_RUNS_LIST)
    offset = serializers.IntegerField(min_value=0, default=0)


class SubagentEventsQuery(StrictQuery):
    afterSeq = serializers.IntegerField(min_value=0, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_EVENTS_PAGE, default=200)


def _run_for(request, run_id: str, need: str) -> SubprocessRun:
    try:
        run = SubprocessRun.objects.select_related("parent_run", "parent_subprocess").filter(run_id=run_id).first()
    except Exception:  # a malformed uuid: the same answer as a missing run
        run = None
    if run is None:
        raise ApiError("subagent_run_not_found", _("no subagent run %(run_id)r") % {"run_id": run_id}, status_code=404)
    try:
        session_or_404(request, run.session_id, need)
    except ApiError as exc:
        if exc.status_code == 404:
            raise ApiError("subagent_run_not_found", _("no subagent run %(run_id)r") % {"run_id": run_id}, status_code=404) from None
        raise
    return run


class SessionSubagentRunsApi(SessionApi):
    @extend_schema(
        summary="The subagent runs of a session (oldest first; grandchildren too, with parentSubagentRunId)",
        parameters=[SubagentRunsQuery],
        responses={200: SubagentRunOut(many=True), **READ_ERRORS, 400: ERROR},
    )
    def get(self, request, session_id: str):
        meta = self.meta
        query = parse(SubagentRunsQuery, request.query_params)
        runs = (
            SubprocessRun.objects.select_related("parent_run", "parent_subprocess")
            .filter(session_id=meta.session_id)
            .order_by("created_at", "task_index", "pk")
        )
        offset = query["offset"]
        return Response(SubagentRunOut(runs[offset : offset + query["limit"]], many=True).data)


class SubagentRunApi(APIView):  # by run id: ``_run_for`` checks the run's session
    @extend_schema(summary="One subagent run, with its full final text", responses={200: SubagentRunDetailOut, **READ_ERRORS})
    def get(self, request, run_id: str):
        return Response(SubagentRunDetailOut(_run_for(request, run_id, "read")).data)


class SubagentRunEventsApi(APIView):  # by run id: ``_run_for`` checks the run's session
    @extend_schema(
        summary="A subagent run's events after afterSeq (replay, bounded pages)",
        parameters=[SubagentEventsQuery],
        responses={200: SubagentEventsOut, **READ_ERRORS, 400: ERROR},
    )
    def get(self, request, run_id: str):
        run = _run_for(request, run_id, "read")
        query = parse(SubagentEventsQuery, request.query_params)
        after, limit = query["afterSeq"], query["limit"]
        events = list(SubprocessEvent.objects.filter(run=run, seq__gt=after).order_by("seq")[: limit + 1])
        more = len(events) > limit
        events = events[:limit]
        body = {
            "runId": str(run.run_id),
            "status": run.status,
            "events": SubagentEventOut(events, many=True).data,
            "nextAfterSeq": events[-1].seq if events else after,
            "hasMore": more,
        }
        return Response(body)


class SubagentRunCancelApi(APIView):  # by run id: ``_run_for`` checks the run's session
    @extend_schema(summary="Cancel a subagent run (queued: never starts; running: cancel → SIGTERM 3 s → SIGKILL 8 s)", request=None, responses={200: SubagentRunOut, **WRITE_ERRORS})
    def post(self, request, run_id: str):
        run = _run_for(request, run_id, "write")
        who = getattr(request.user, "username", "") or "api"
        run = subprocess_run_cancel(run, by=f"user {who} (api)", actor=request.user)
        return Response(SubagentRunOut(run).data)
