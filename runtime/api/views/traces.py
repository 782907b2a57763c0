"""A run's trace: ``GET /api/runs/{runId}/trace/`` (docs/api.md, docs/runtime.md "Traces").

Spans of kind ``turn`` (the run), ``model_call`` (each call, a failover's attempts each),
``tool_call`` and ``subagent`` (each child), with their times, parent and attributes; a
subagent child's model calls are ``model_call`` spans under its ``subagent`` span (and a
grandchild's span under its parent child's). With ``?include=request`` each model call
carries the body it sent, rebuilt from its record: the messages from its context's entry in
the tree, the system prompt and tools from their blobs, the request's other fields as
recorded, through the same ``build_params`` the call used. A child's call has no such body
(its messages lived in the child's process): ``request`` is null and ``requestUnavailable``
says why, and its recorded parts (``system``, ``tools``, ``settings``) come instead.
"""

from __future__ import annotations

import dataclasses
import json

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from runtime import llm
from runtime.agents.specs import model_spec
from runtime.api.views.base import READ_ERRORS
from runtime.errors import RuntimeInputError
from runtime.llm.bodies import request_body
from runtime.llm.spec import ModelSpec
from runtime.models import (
    AgentRun,
    Blob,
    ModelCall,
    ModelConfig,
    SubprocessRun,
    ToolCallRecord,
)
from runtime.runs.turn import llm_messages
from runtime.sessions.access import reads_all_sessions, visible_sessions
from sessions_tree.providers import provider_for_session
from sessions_tree.providers.base import ROOT


def _iso(value):
    return value.isoformat() if value else None


def rebuilt_request(call: ModelCall) -> llm.LlmRequest:
    """The request ``call`` sent, from its record (the tree holds its messages)."""
    blobs = dict(Blob.objects.filter(digest__in=[call.system_digest, call.tools_digest, call.messages_digest]).values_list("digest", "text"))
    if call.messages_digest:  # a summary's or a title's messages: not a path of the tree
        messages = json.loads(blobs.get(call.messages_digest) or "[]")
    else:
        provider = provider_for_session(call.session_id)
        messages = llm_messages(provider.build_context(call.session_id, call.context_leaf_id or ROOT).messages)
    return llm.LlmRequest(
        system_prompt=blobs.get(call.system_digest, ""),
        messages=messages,
        tools=json.loads(blobs.get(call.tools_digest) or "[]"),
        **call.settings,
    )


CHILD_REQUEST_UNAVAILABLE = "a subagent's messages lived in its process: the request's system prompt, tools and settings are recorded, its messages are not"


def rebuilt_body(call: ModelCall) -> dict | None:
    """The body ``call`` sent, or None when its model is gone (the request's parts remain)
    or a subagent child made it (its messages are not in the tree)."""
    if call.subprocess_run_id is not None:
        return None
    spec = recorded_spec(call)
    if spec is None:  # a record from before specs were kept: the model's row as it is today
        config = ModelConfig.objects.filter(name=call.model).first()
        if config is None:
            return None
        spec = model_spec(config)
    return request_body(spec, rebuilt_request(call))


def recorded_spec(call: ModelCall) -> ModelSpec | None:
    """The model as ``call`` used it (its spec, recorded without the key), or None."""
    text = Blob.objects.filter(digest=call.spec_digest).values_list("text", flat=True).first() if call.spec_digest else None
    if not text:
        return None
    known = {f.name for f in dataclasses.fields(ModelSpec)}
    return ModelSpec(**{k: v for k, v in json.loads(text).items() if k in known})


def recorded_parts(call: ModelCall) -> dict:
    """What ``call``'s record holds of its request without the tree: system prompt, tools, settings."""
    blobs = dict(Blob.objects.filter(digest__in=[call.system_digest, call.tools_digest]).values_list("digest", "text"))
    return {"system": blobs.get(call.system_digest), "tools": json.loads(blobs[call.tools_digest]) if call.tools_digest in blobs else None, "settings": call.settings}


def model_call_span(call: ModelCall, parent: str, *, include_request: bool) -> dict:
    ttft = round((call.first_token_at - call.started_at).total_seconds() * 1000) if call.first_token_at else None
    attributes = {
        "model": call.model, "provider": call.provider, "api": call.api, "endpoint": call.endpoint, "purpose": call.purpose,
        "stopReason": call.stop_reason, "usage": call.usage, "cost": str(call.cost), "timeToFirstTokenMs": ttft,
        "error": call.error, "entryId": call.entry_id, "contextEntryId": call.context_leaf_id,
    }  # fmt: skip
    if call.subprocess_run_id is not None:
        attributes["subagentRunId"] = str(call.subprocess_run.run_id)
        attributes["contextSeq"] = call.context_seq
    if include_request:
        attributes["request"] = rebuilt_body(call)
        if call.subprocess_run_id is not None:
            attributes["requestUnavailable"] = CHILD_REQUEST_UNAVAILABLE
            attributes["recorded"] = recorded_parts(call)
    return {"id": f"model_call:{call.pk}", "kind": "model_call", "name": call.model, "parent": parent,
            "start": _iso(call.started_at), "end": _iso(call.finished_at), "attributes": attributes}  # fmt: skip


def run_spans(run: AgentRun, *, include_request: bool = False) -> list[dict]:
    spans = [
        {
            "id": str(run.run_id), "kind": "turn", "name": run.agent.name, "parent": None,
            "start": _iso(run.started_at or run.created_at), "end": _iso(run.finished_at),
            "attributes": {
                "status": run.status, "model": run.answered_model, "firstTokenAt": _iso(run.first_token_at),
                "usage": {"input": run.input_tokens, "output": run.output_tokens, "cacheRead": run.cache_read_tokens, "cacheWrite": run.cache_write_tokens},
                "cost": str(run.cost), "error": run.error,
            },
        }
    ]  # fmt: skip
    for call in ModelCall.objects.filter(run=run, subprocess_run__isnull=True).order_by("started_at", "pk"):
        spans.append(model_call_span(call, str(run.run_id), include_request=include_request))
    for tool in ToolCallRecord.objects.filter(run=run).order_by("started_at", "pk"):
        spans.append({"id": f"tool_call:{tool.pk}", "kind": "tool_call", "name": tool.tool, "parent": str(run.run_id),
                      "start": _iso(tool.started_at), "end": _iso(tool.finished_at),
                      "attributes": {"toolCallId": tool.tool_call_id, "argumentsSize": tool.arguments_size, "outcome": tool.outcome}})  # fmt: skip
    children = list(SubprocessRun.objects.filter(parent_run=run).select_related("parent_subprocess").order_by("created_at", "pk"))
    calls: dict[int, list[ModelCall]] = {}
    for call in ModelCall.objects.filter(run=run, subprocess_run__isnull=False).select_related("subprocess_run").order_by("started_at", "pk"):
        calls.setdefault(call.subprocess_run_id, []).append(call)
    for child in children:
        parent = str(child.parent_subprocess.run_id) if child.parent_subprocess_id else str(run.run_id)
        spans.append({"id": str(child.run_id), "kind": "subagent", "name": child.agent, "parent": parent,
                      "start": _iso(child.started_at or child.created_at), "end": _iso(child.ended_at),
                      "attributes": {"status": child.status, "usage": child.usage, "error": child.error, "toolCallId": child.tool_call_id}})  # fmt: skip
        spans += [model_call_span(call, str(child.run_id), include_request=include_request) for call in calls.get(child.pk, ())]
    return spans


class RunTraceApi(APIView):
    @extend_schema(
        summary="The run's spans: the turn, its model calls (with their rebuilt request on ?include=request), tool calls and subagents",
        parameters=[OpenApiParameter("include", OpenApiTypes.STR, enum=["request"])],
        responses={200: OpenApiTypes.OBJECT, **READ_ERRORS},
    )
    def get(self, request, run_id):
        runs = AgentRun.objects.select_related("agent")
        if not reads_all_sessions(request.user):
            runs = runs.filter(session_id__in=visible_sessions(request.user).values("session_id"))
        run = runs.filter(run_id=run_id).first()
        if run is None:
            raise Http404
        include = request.query_params.get("include") or ""
        if include not in ("", "request"):
            raise RuntimeInputError("include", "must be request")
        return Response({"runId": str(run.run_id), "spans": run_spans(run, include_request=include == "request")})
