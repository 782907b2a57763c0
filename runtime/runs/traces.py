"""What a run did, recorded as it happened (docs/runtime.md, "Traces"): a ``ModelCall`` row per
model call (a failover's attempts each), a ``ToolCallRecord`` per tool call, kept by the turn and written
when the run stops executing (it ends, waits, or fails): one INSERT for its model calls, one
for its tool calls, and one for blobs this process has not stored yet.

A model call's exact request is stored by reference: the entry its context ends at (the
messages are that entry's path), the blobs of its system prompt and tool definitions (stored
once per text, ``Blob``), and the request's other fields. ``NETA_TRACE_RETENTION_DAYS`` prunes
older records (the reaper's round).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

from infra.prepared import insert
from runtime.llm.bodies import digest, request_settings, tools_text
from runtime.models import Blob, ModelCall, ToolCallRecord

logger = logging.getLogger(__name__)

_stored: set[str] = set()  # digests of the blobs this process stored (or found stored)
_stored_lock = threading.Lock()


@dataclass
class Attempt:
    """One model's attempt at a call: who, with what, from when."""

    model: str
    model_id: str
    provider: str
    api: str
    endpoint: str
    request: object  # the LlmRequest
    context_leaf_id: str
    started: dt.datetime = field(default_factory=timezone.now)
    first_token: dt.datetime | None = None
    spec: str = ""  # spec_text of the model called


def spec_text(spec) -> str:
    """The model as a call used it, as JSON: every field of its ``ModelSpec`` but the key."""
    fields = {k: v for k, v in vars(spec).items() if k != "api_key"}
    return json.dumps(fields, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def attempt(candidate, request, context_leaf_id: str) -> Attempt:
    spec = candidate.spec
    host = urlsplit(spec.base_url or "").hostname or ""
    return Attempt(candidate.name, spec.model_id, spec.provider_name, spec.api, host, request, context_leaf_id or "", spec=spec_text(spec))


@dataclass
class Pending:
    """A run's records not written yet (``write``)."""

    calls: list = field(default_factory=list)
    tools: list = field(default_factory=list)
    blobs: dict = field(default_factory=dict)


def record_model_calls(pending: Pending, run, session_id: str, attempts: list[Attempt], *, final: dict, entry_id: str, purpose: str = "turn") -> None:
    """The reply's attempts as ``ModelCall`` rows: the last one answered (or failed) with
    ``final``; the ones before it gave the call up to the next model."""
    now = timezone.now()
    rows, blobs = pending.calls, pending.blobs
    for index, item in enumerate(attempts):
        last = index == len(attempts) - 1
        request = item.request
        other = request_settings(request)
        system, tools = request.system_prompt, tools_text(request.tools)
        blobs[digest(system)], blobs[digest(tools)] = system, tools
        if item.spec:
            blobs[digest(item.spec)] = item.spec
        usage = (final.get("usage") or {}) if last else {}
        stop = final.get("stopReason") or "" if last else "error"
        rows.append(
            ModelCall(
                run=run, session_id=session_id, purpose=purpose, model=item.model, model_id=item.model_id, provider=item.provider, api=item.api,
                endpoint=item.endpoint, context_leaf_id=item.context_leaf_id, entry_id=entry_id if last else "",
                system_digest=digest(system), tools_digest=digest(tools), spec_digest=digest(item.spec) if item.spec else "", settings=other,
                started_at=item.started, first_token_at=item.first_token,
                finished_at=attempts[index + 1].started if not last else now, stop_reason=stop, usage=usage,
                cost=Decimal(str((usage.get("cost") or {}).get("total", 0) or 0)),
                error=(final.get("errorMessage") or "") if last else "another model took the call (the run's notes say why)",
            )  # fmt: skip
        )


def record_direct(*, run, session_id: str, purpose: str, name: str, spec, request, final: dict, started: dt.datetime) -> None:
    """A call made outside a turn's reply (a compaction's or branch summary's summary, a title):
    written at once, its messages (which are not a path of the tree) as a blob of their own.
    Never raises: a record that cannot be written is logged."""
    try:
        pending = Pending()
        item = Attempt(name, spec.model_id, spec.provider_name, spec.api, urlsplit(spec.base_url or "").hostname or "", request, "", started, spec=spec_text(spec))
        record_model_calls(pending, run, session_id, [item], final=final, entry_id="", purpose=purpose)
        messages = json.dumps(request.messages, ensure_ascii=False, separators=(",", ":"))
        pending.calls[0].messages_digest = digest(messages)
        pending.blobs[digest(messages)] = messages
        write(pending)
    except Exception:  # noqa: BLE001 - observability never fails the call it records
        logger.exception("recording a %s call failed", purpose)


def record_child_calls(row, events: list[dict], blobs: dict) -> None:
    """A subagent child's ``model_call`` events (runtime/subagents/protocol.py) as ``ModelCall``
    rows of the run that started its batch, linked to the child (``row``) and its context
    position; the texts it sent along as blobs, each only under its own digest (a child names
    no text it did not send). What is not of the expected type is left empty. Never raises."""
    try:
        pending = Pending()
        pending.blobs = {d: t for d, t in (blobs or {}).items() if isinstance(t, str) and digest(t) == d}
        pending.calls = [_child_call(row, event) for event in events]
        write(pending)
    except Exception:  # noqa: BLE001 - observability never fails the child it records
        logger.exception("subagent %s: recording its model calls failed", row.run_id)


def _child_call(row, event: dict) -> ModelCall:
    call = event.get("call") if isinstance(event.get("call"), dict) else {}

    def text(key: str, limit: int) -> str:
        value = call.get(key)
        return value[:limit] if isinstance(value, str) else ""

    def moment(value) -> dt.datetime | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        try:
            return dt.datetime.fromtimestamp(value / 1000, tz=dt.UTC)
        except (OverflowError, OSError, ValueError):
            return None

    def hexdigest(key: str) -> str:
        value = text(key, 64)
        return value if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else ""

    usage = call.get("usage") if isinstance(call.get("usage"), dict) else {}
    try:
        cost = Decimal(str((usage.get("cost") or {}).get("total", 0) or 0)).quantize(Decimal("0.000001"))
    except (ArithmeticError, AttributeError, ValueError):
        cost = Decimal(0)
    seq = call.get("contextSeq")
    return ModelCall(
        run_id=row.parent_run_id, subprocess_run=row, session_id=row.session_id, purpose="turn",
        model=text("model", 64), model_id=text("modelId", 200), provider=text("provider", 64), api=text("api", 32), endpoint=text("endpoint", 255),
        context_seq=seq if isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq < 2**31 else None,
        system_digest=hexdigest("systemDigest"), tools_digest=hexdigest("toolsDigest"),
        settings=call.get("settings") if isinstance(call.get("settings"), dict) else {},
        started_at=moment(call.get("startedAt")) or moment(event.get("ts")) or timezone.now(),
        first_token_at=moment(call.get("firstTokenAt")), finished_at=moment(call.get("finishedAt")) or moment(event.get("ts")),
        stop_reason=text("stopReason", 16), usage=usage, cost=cost if abs(cost) < 10**8 else Decimal(0), error=text("error", 10_000),
    )  # fmt: skip


def tool_record(run, call_id: str, name: str, arguments, started: dt.datetime, outcome: str) -> ToolCallRecord:
    size = len(json.dumps(arguments, ensure_ascii=False, default=str)) if arguments else 0
    return ToolCallRecord(run=run, tool_call_id=call_id, tool=name, arguments_size=size, started_at=started, finished_at=timezone.now(), outcome=outcome)


def write(pending: Pending) -> None:
    """Write what ``pending`` holds (and forget it): the blobs this process has not stored yet
    (a blob stored already is left as it is), the model calls, the tool calls.

    Each INSERT commits on its own, blobs first: a call is never stored before the texts it
    names, and one INSERT failing leaves what came before it (a blob no call names yet is
    what a pruned call leaves too). A transaction around them (``bulk_create`` opens one
    each) would add a ``BEGIN`` and a ``COMMIT`` to every turn for no reader's gain."""
    unknown = {d: t for d, t in pending.blobs.items() if d not in _stored}
    if unknown:
        insert([Blob(digest=d, text=t) for d, t in unknown.items()], ignore_conflicts=True)
    insert(pending.calls)
    insert(pending.tools)
    with _stored_lock:
        _stored.update(unknown)
    pending.calls, pending.tools, pending.blobs = [], [], {}


def prune(now: dt.datetime | None = None) -> int:
    """Delete model- and tool-call records older than ``NETA_TRACE_RETENTION_DAYS`` (0: keep all)."""
    days = settings.NETA_TRACE_RETENTION_DAYS
    if not days:
        return 0
    cutoff = (now or timezone.now()) - dt.timedelta(days=days)
    removed = ModelCall.objects.filter(started_at__lt=cutoff).delete()[0]
    removed += ToolCallRecord.objects.filter(started_at__lt=cutoff).delete()[0]
    return removed
