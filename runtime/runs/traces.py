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
import hashlib
import json
import logging
import threading
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runtime.models import Blob, ModelCall, ToolCallRecord

REFERENCED = ("system_prompt", "messages", "tools")
logger = logging.getLogger(__name__)  # the request's fields stored by reference

_stored: set[str] = set()  # digests of the blobs this process stored (or found stored)
_stored_lock = threading.Lock()


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def tools_text(tools: list[dict]) -> str:
    return json.dumps(tools, ensure_ascii=False, separators=(",", ":"))


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


def attempt(candidate, request, context_leaf_id: str) -> Attempt:
    spec = candidate.spec
    host = urlsplit(spec.base_url or "").hostname or ""
    return Attempt(candidate.name, spec.model_id, spec.provider_name, spec.api, host, request, context_leaf_id or "")


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
        other = {k: v for k, v in asdict(request).items() if k not in REFERENCED}
        system, tools = request.system_prompt, tools_text(request.tools)
        blobs[digest(system)], blobs[digest(tools)] = system, tools
        usage = (final.get("usage") or {}) if last else {}
        stop = final.get("stopReason") or "" if last else "error"
        rows.append(
            ModelCall(
                run=run, session_id=session_id, purpose=purpose, model=item.model, model_id=item.model_id, provider=item.provider, api=item.api,
                endpoint=item.endpoint, context_leaf_id=item.context_leaf_id, entry_id=entry_id if last else "",
                system_digest=digest(system), tools_digest=digest(tools), settings=other,
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
        item = Attempt(name, spec.model_id, spec.provider_name, spec.api, urlsplit(spec.base_url or "").hostname or "", request, "", started)
        record_model_calls(pending, run, session_id, [item], final=final, entry_id="", purpose=purpose)
        messages = json.dumps(request.messages, ensure_ascii=False, separators=(",", ":"))
        pending.calls[0].messages_digest = digest(messages)
        pending.blobs[digest(messages)] = messages
        write(pending)
    except Exception:  # noqa: BLE001 - observability never fails the call it records
        logger.exception("recording a %s call failed", purpose)


def tool_record(run, call_id: str, name: str, arguments, started: dt.datetime, outcome: str) -> ToolCallRecord:
    size = len(json.dumps(arguments, ensure_ascii=False, default=str)) if arguments else 0
    return ToolCallRecord(run=run, tool_call_id=call_id, tool=name, arguments_size=size, started_at=started, finished_at=timezone.now(), outcome=outcome)


def write(pending: Pending) -> None:
    """Write what ``pending`` holds (and forget it): the blobs this process has not stored yet
    (a blob stored already is left as it is), the model calls, the tool calls."""
    unknown = {d: t for d, t in pending.blobs.items() if d not in _stored}
    with transaction.atomic():
        if unknown:
            Blob.objects.bulk_create([Blob(digest=d, text=t) for d, t in unknown.items()], ignore_conflicts=True)
        if pending.calls:
            ModelCall.objects.bulk_create(pending.calls)
        if pending.tools:
            ToolCallRecord.objects.bulk_create(pending.tools)
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
