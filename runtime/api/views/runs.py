"""Runs: prompting and aborting a session's run, and the runs list."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    extend_schema,
    extend_schema_view,
)
from rest_framework import status, viewsets
from rest_framework.response import Response

from runtime.api import serializers as S
from runtime.api.pagination import (
    RunCursorPagination,
)
from runtime.api.views.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    SessionApi,
    entry_field,
    parse,
)
from runtime.models import AgentRun
from runtime.runs.prompts import queued_inputs, run_abort, session_continue, session_prompt, session_regenerate
from runtime.runs.questions import answer_question, decide_approval, waiting_run
from runtime.sessions.access import reads_all_sessions, visible_sessions
from runtime.subagents import child_approvals


class SessionPromptApi(SessionApi):
    @extend_schema(
        summary="Send a prompt (starts a run, or is queued on the active one)",
        request=S.PromptInput,
        responses={202: S.PromptOut, **WRITE_ERRORS},
    )
    def post(self, request, session_id: str):
        meta = self.meta
        data = parse(S.PromptInput, request.data)
        with entry_field("fromEntryId"):
            outcome = session_prompt(
                session_id=meta.session_id,
                text=data["text"],
                actor=request.user,
                images=[dict(i) for i in data.get("images") or []],
                documents=[dict(d) for d in data.get("documents") or []],
                from_entry_id=data.get("fromEntryId") or None,
                mode=data["mode"],
                model_name=data.get("model") or None,
                thinking_level=data.get("thinkingLevel") or None,
                meta=meta,
            )
        # The run as committed: re-reading it could find it gone (finished, then deleted with its session).
        run = outcome.run
        body = {"run": S.RunOut(run).data, "queuedAs": outcome.queued_as, "editorText": outcome.editor_text}
        return Response(body, status=status.HTTP_202_ACCEPTED)


class SessionRegenerateApi(SessionApi):
    @extend_schema(
        summary="Answer a user message again (a sibling answer, no new user message)",
        request=S.RegenerateInput,
        responses={202: S.RegenerateOut, **WRITE_ERRORS},
    )
    def post(self, request, session_id: str):
        meta = self.meta
        data = parse(S.RegenerateInput, request.data)
        with entry_field("entryId"):
            run = session_regenerate(
                session_id=meta.session_id, entry_id=data["entryId"], actor=request.user, model_name=data.get("model") or None
            )
        return Response({"run": S.RunOut(run).data}, status=status.HTTP_202_ACCEPTED)


class SessionContinueApi(SessionApi):
    @extend_schema(
        summary="Continue an answer cut at the output limit (a run that goes on from it)",
        request=S.ContinueInput,
        responses={202: S.RegenerateOut, **WRITE_ERRORS},
    )
    def post(self, request, session_id: str):
        meta = self.meta
        data = parse(S.ContinueInput, request.data)
        with entry_field("entryId"):
            run = session_continue(session_id=meta.session_id, entry_id=data["entryId"], actor=request.user)
        return Response({"run": S.RunOut(run).data}, status=status.HTTP_202_ACCEPTED)


class SessionQueuedApi(SessionApi):
    @extend_schema(summary="The prompts queued on the active run, not in the tree yet", request=None, responses={200: OpenApiTypes.OBJECT, **READ_ERRORS})
    def get(self, request, session_id: str):
        meta = self.meta
        return Response({"inputs": queued_inputs(meta.session_id)})


class SessionAbortApi(SessionApi):
    @extend_schema(summary="Abort the active run (cooperative)", request=None, responses={200: S.AbortOut, **WRITE_ERRORS})
    def post(self, request, session_id: str):
        meta = self.meta
        run = run_abort(session_id=meta.session_id, actor=request.user)
        if run is not None:
            run = AgentRun.objects.select_related("agent").get(pk=run.pk)
        return Response({"run": S.RunOut(run).data if run is not None else None})


class SessionAnswerApi(SessionApi):
    @extend_schema(
        summary="Answer the question (ask_user) the session's run waits on; the run goes on",
        request=S.AnswerInput,
        responses={200: S.AnswerOut, **WRITE_ERRORS},
    )
    def post(self, request, session_id: str):
        meta = self.meta
        data = parse(S.AnswerInput, request.data)
        run = answer_question(session_id=meta.session_id, tool_call_id=data["toolCallId"], answer=data["answer"], actor=request.user)
        run = AgentRun.objects.select_related("agent").get(pk=run.pk)
        return Response({"run": S.RunOut(run).data})


class SessionApproveApi(SessionApi):
    @extend_schema(
        summary="Allow or deny the tool call the session's run (or, with subagentRunId, one of its subagent children) waits on",
        request=S.ApproveInput,
        responses={200: S.ApproveOut, **WRITE_ERRORS},
    )
    def post(self, request, session_id: str):
        meta = self.meta
        data = parse(S.ApproveInput, request.data)
        if data["subagentRunId"] is not None:
            row = child_approvals.decide(
                session_id=meta.session_id, subagent_run_id=data["subagentRunId"], tool_call_id=data["toolCallId"], decision=data["decision"],
                scope=data["scope"], prefix=data["prefix"], note=data["note"], actor=request.user,
            )  # fmt: skip
            return Response({"approval": child_approvals.describe(row)})
        run = decide_approval(
            session_id=meta.session_id, tool_call_id=data["toolCallId"], decision=data["decision"], scope=data["scope"],
            prefix=data["prefix"], note=data["note"], actor=request.user,
        )  # fmt: skip
        run = AgentRun.objects.select_related("agent").get(pk=run.pk)
        return Response({"run": S.RunOut(run).data})


class SessionApprovalsApi(SessionApi):
    @extend_schema(
        summary="The tool calls of the session that wait for a person: its run's own, and its subagent children's (each child named)",
        responses={200: S.SessionApprovalsOut, **READ_ERRORS},
    )
    def get(self, request, session_id: str):
        meta = self.meta
        out = []
        run = waiting_run(meta.session_id)
        if run is not None and (run.question or {}).get("kind") == "approval":
            out.append({**run.question, "status": "pending", "subagent": None})
        out += [child_approvals.describe(row) for row in child_approvals.pending(meta.session_id)]
        return Response({"approvals": out})


@extend_schema_view(
    list=extend_schema(summary="Runs on the sessions you may read", parameters=[S.RunListQuery], responses={200: S.RunOut(many=True), **READ_ERRORS}),
    retrieve=extend_schema(summary="One run", responses={200: S.RunOut, **READ_ERRORS}),
)
class RunViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = S.RunOut
    lookup_field = "run_id"
    lookup_value_regex = r"[0-9a-fA-F-]{32,36}"
    pagination_class = RunCursorPagination

    def get_queryset(self):
        qs = AgentRun.objects.select_related("agent")
        user = self.request.user
        if not reads_all_sessions(user):
            qs = qs.filter(session_id__in=visible_sessions(user).values("session_id"))
        if self.action == "list":
            query = parse(S.RunListQuery, self.request.query_params)
            if "session" in query:
                qs = qs.filter(session_id=query["session"])
            if "status" in query:
                qs = qs.filter(status=query["status"])
        return qs
