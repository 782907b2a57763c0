"""What travels on the channel layer: tree and streaming events as layer messages, kept small
and always encodable."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import orjson
from django.conf import settings

from runtime.encodable import renderable
from runtime.realtime.stream_events import (
    SPLIT_TYPES,  # streaming types whose large ``delta`` is split
)

TREE_MESSAGE = "tree.event"


STREAM_MESSAGE = "stream.event"


# The session's row was deleted: its sockets send ``session_not_found`` and close (4404).
DELETED_MESSAGE = "session.deleted"


# A user was deactivated or a token revoked: their sockets close (4401).
WITHDRAWN_MESSAGE = "access.withdrawn"


# A user's roles or permissions changed: their sockets check their rights again now.
RECHECK_MESSAGE = "access.recheck"


ALWAYS_KEPT = frozenset({"type", "sessionId", "entryId", "runId", "contentIndex", "toolCallId", "kind", "name", "state", "stopReason"})


def inline_limit() -> int:
    return int(getattr(settings, "NETA_REALTIME_INLINE_BYTES", 64 * 1024))


def encoded_size(value: Any) -> int:
    return len(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


# orjson (and msgpack, Redis's encoding) refuse lone surrogates and nesting past 254
# levels; a model's reply may stream them (stored entries are normalized on append).
CARRY_DEPTH = 200


def carriable(event: dict) -> dict:
    """``event`` itself when JSON over UTF-8 carries it, else the REST renderer's
    repaired copy (U+FFFD, deep parts cut): a streaming or tree event must never fail
    the producer (a run) nor be lost to the layer."""
    try:
        orjson.dumps(event, option=orjson.OPT_NON_STR_KEYS)
        return event
    except (TypeError, orjson.JSONEncodeError):
        copy = renderable(event, limit=CARRY_DEPTH)
        try:
            orjson.dumps(copy, option=orjson.OPT_NON_STR_KEYS)
            return copy
        except (TypeError, orjson.JSONEncodeError):  # integers past 64 bits: as JavaScript reads them
            return json.loads(json.dumps(copy), parse_int=_js_int)


def _js_int(text: str) -> int | float | None:
    value = int(text)
    if -(2**63) <= value < 2**64:
        return value
    number = float(text)
    return number if math.isfinite(number) else None


def tree_message(session_id: str, event: dict, *, key: int | None = None, limit: int | None = None) -> dict:
    """The layer message for one tree event: inline when small, else a reference.

    ``emittedAt`` (epoch seconds) is when the producer handed it over; consumers
    forward it only when ``NETA_REALTIME_TRACE`` is on (benchmarks, diagnostics).
    """
    limit = inline_limit() if limit is None else limit
    event = carriable(event)
    message = {
        "type": TREE_MESSAGE,
        "sessionId": session_id,
        "sessionKey": key,
        "revision": event["revision"],
        "event": event,
        "emittedAt": time.time(),
    }
    if encoded_size(event) > limit:
        message["event"] = None  # the consumer reads it from the event log
        message["eventType"] = event.get("type")
    return message


def stream_messages(session_id: str, event: dict, *, key: int | None = None, limit: int | None = None) -> list[dict]:
    """The layer messages for one streaming event (several when a delta is split)."""
    limit = inline_limit() if limit is None else limit
    now = time.time()
    event = carriable(event)
    if encoded_size(event) <= limit:
        return [{"type": STREAM_MESSAGE, "sessionId": session_id, "sessionKey": key, "event": event, "emittedAt": now}]
    if event.get("type") in SPLIT_TYPES and isinstance(event.get("delta"), str):
        # Deltas concatenate, so a large one is sent as consecutive smaller ones, each saying
        # where it starts in its block (``offset``) when the delta did.
        step = max(1, limit // 8)  # a char is at most 6 bytes JSON-escaped; keep room for the rest
        text = event["delta"]
        offset = event.get("offset")
        placed = isinstance(offset, int) and not isinstance(offset, bool)
        return [
            {
                "type": STREAM_MESSAGE, "sessionId": session_id, "sessionKey": key, "emittedAt": now,
                "event": {**event, "delta": text[i : i + step], **({"offset": offset + i} if placed else {})},
            }  # fmt: skip
            for i in range(0, len(text), step)
        ]
    small: dict = {}
    omitted: list[str] = []
    budget = max(256, limit // 16)
    for key, value in event.items():
        if key in ALWAYS_KEPT or encoded_size(value) <= budget:
            small[key] = value
        elif key == "toolCall" and isinstance(value, dict):
            small[key] = {k: value[k] for k in ("type", "id", "name") if k in value}
            omitted.append("toolCall.arguments")
        else:
            omitted.append(key)
    small["omitted"] = omitted
    return [{"type": STREAM_MESSAGE, "sessionId": session_id, "sessionKey": key, "event": small, "emittedAt": now}]
