"""A run's trace to OpenTelemetry (docs/runtime.md, "OpenTelemetry"), off unless the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set.

When the run stops executing, its records (``traces.py``) become spans with the GenAI
semantic conventions: ``invoke_agent <agent>`` for the run, a ``chat <model>`` child per
model call, ``execute_tool <tool>`` per tool call and ``invoke_agent <child agent>`` per
subagent child (its own model calls ``chat`` spans under it), with their recorded start and
end times. The official SDK's batching span
processor sends them from a thread of its own through a bounded queue: exporting never slows
or fails a turn, and a collector that is down only logs. Prompts and answers go along only
with ``NETA_OTEL_CAPTURE_CONTENT``.
"""

from __future__ import annotations

import json
import logging
import threading

from django.conf import settings

from runtime.models import ModelCall, SubprocessRun, ToolCallRecord

logger = logging.getLogger(__name__)

# The GenAI conventions' provider names, by the LLM layer's provider kind.
PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "openai-responses": "openai", "openai-compatible": "openai", "scripted": "neta.scripted"}
_provider = None
_lock = threading.Lock()


def _tracer():
    """The process's tracer, made on first use (the SDK loads only where export is on)."""
    global _provider
    with _lock:
        if _provider is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,  # the SDK loads only where export is on
            )
            from opentelemetry.sdk.resources import (
                Resource,  # the SDK loads only where export is on
            )
            from opentelemetry.sdk.trace import (
                TracerProvider,  # the SDK loads only where export is on
            )
            from opentelemetry.sdk.trace.export import (
                BatchSpanProcessor,  # the SDK loads only where export is on
            )

            provider = TracerProvider(resource=Resource.create({"service.name": "neta"}))
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            _provider = provider
        return _provider.get_tracer("neta.runtime")


def flush(timeout_ms: int = 5000) -> None:
    """Send what is queued now (tests, and a process about to exit)."""
    if _provider is not None:
        _provider.force_flush(timeout_ms)


def reset() -> None:
    """Forget the process's exporter (its endpoint is read again on next use)."""
    global _provider
    with _lock:
        if _provider is not None:
            _provider.shutdown()
        _provider = None


def _ns(moment) -> int | None:
    return int(moment.timestamp() * 1_000_000_000) if moment else None


def export_run(run, calls: list[ModelCall], tools: list[ToolCallRecord]) -> None:
    """The spans of ``run``'s latest execution (its calls and tool calls just recorded). Never raises."""
    if not settings.NETA_OTEL_ENABLED:
        return
    try:
        _export(run, calls, tools)
    except Exception:  # noqa: BLE001 - observability never fails a run
        logger.exception("run %s: exporting its spans failed", run.run_id)


def _export(run, calls, tools) -> None:
    from opentelemetry import trace  # loaded with the tracer above

    tracer = _tracer()
    agent = run.agent.name
    start = calls[0].started_at if calls else run.started_at
    root = tracer.start_span(
        f"invoke_agent {agent}",
        start_time=_ns(start or run.created_at),
        attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent, "gen_ai.conversation.id": run.session_id,
            "neta.run.id": str(run.run_id), "neta.run.status": run.status,
            "gen_ai.usage.input_tokens": int(run.input_tokens), "gen_ai.usage.output_tokens": int(run.output_tokens),
        },
    )  # fmt: skip
    if settings.NETA_OTEL_CAPTURE_CONTENT and run.prompt:
        root.set_attribute("gen_ai.input.messages", json.dumps([{"role": "user", "parts": [{"type": "text", "content": run.prompt}]}], ensure_ascii=False))
    context = trace.set_span_in_context(root)
    end = start
    for call in calls:
        _chat_span(tracer, call, context)
        end = max(end, call.finished_at) if end and call.finished_at else (call.finished_at or end)
    for tool in tools:
        span = tracer.start_span(
            f"execute_tool {tool.tool}", context=context, start_time=_ns(tool.started_at),
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool.tool, "gen_ai.tool.call.id": tool.tool_call_id, "neta.tool.outcome": tool.outcome},
        )  # fmt: skip
        if tool.outcome == "error":
            span.set_status(trace.Status(trace.StatusCode.ERROR))
        span.end(end_time=_ns(tool.finished_at))
        end = max(end, tool.finished_at) if end else tool.finished_at
    child_calls: dict[int, list[ModelCall]] = {}
    for call in ModelCall.objects.filter(run=run, subprocess_run__isnull=False).order_by("started_at", "pk"):
        child_calls.setdefault(call.subprocess_run_id, []).append(call)
    for child in SubprocessRun.objects.filter(parent_run=run, started_at__isnull=False):
        usage = child.usage or {}
        span = tracer.start_span(
            f"invoke_agent {child.agent}", context=context, start_time=_ns(child.started_at),
            attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": child.agent, "neta.subagent.status": child.status,
                "gen_ai.usage.input_tokens": int(usage.get("input") or 0), "gen_ai.usage.output_tokens": int(usage.get("output") or 0),
            },
        )  # fmt: skip
        for call in child_calls.get(child.pk, ()):  # the child's model calls, under its span
            _chat_span(tracer, call, trace.set_span_in_context(span))
        span.end(end_time=_ns(child.ended_at or end))
    if run.error:
        root.set_status(trace.Status(trace.StatusCode.ERROR, run.error[:500]))
    root.end(end_time=_ns(run.finished_at or end))


def _chat_span(tracer, call: ModelCall, context) -> None:
    """A model call's ``chat`` span under ``context`` (the run's span, or a subagent child's)."""
    from opentelemetry import trace  # loaded with the tracer above

    usage = call.usage or {}
    span = tracer.start_span(
        f"chat {call.model_id or call.model}",
        context=context,
        start_time=_ns(call.started_at),
        attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDERS.get(_kind(call), call.provider or "unknown"),
            "gen_ai.request.model": call.model_id or call.model, "gen_ai.response.model": call.model_id or call.model,
            "gen_ai.usage.input_tokens": int(usage.get("input") or 0), "gen_ai.usage.output_tokens": int(usage.get("output") or 0),
            "gen_ai.response.finish_reasons": [call.stop_reason or "unknown"], "server.address": call.endpoint or "",
            "neta.model": call.model, "neta.cost_usd": float(call.cost),
        },
    )  # fmt: skip
    if call.first_token_at:
        span.add_event("first_token", timestamp=_ns(call.first_token_at))
    if call.error:
        span.set_status(trace.Status(trace.StatusCode.ERROR, call.error[:500]))
        span.set_attribute("error.type", "model_error")
    span.end(end_time=_ns(call.finished_at))


def _kind(call: ModelCall) -> str:
    return {"anthropic-messages": "anthropic", "openai-completions": "openai", "openai-responses": "openai-responses", "scripted": "scripted"}.get(call.api, "")
