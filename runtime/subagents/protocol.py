"""The JSONL protocol between a subagent child and its host (docs/subagents.md, "Events").

Child → host, one JSON object a line on stdout, every event with ``v, runId, seq, ts, type``:

==================  ==========================================================================
``run_start``       ``agent, depth, pid, tools`` — the child parsed its envelope and starts
``heartbeat``       ``phase`` (model | tool | proxy | idle), ``usage``, ``counts``
``assistant_delta`` ``turn, kind`` (text | thinking), ``delta`` — coalesced, not one per token
``assistant_message`` ``turn, message`` (a Pi AssistantMessage, text capped), ``stopReason``
``model_call``      ``turn, call, blobs`` — one model call as it happened (after its
                    ``assistant_message``): ``call`` holds what its trace record needs
                    (:data:`MODEL_CALL_FIELDS`), ``blobs`` the texts of its system prompt and
                    tools by digest, each sent once per run (the host stores them and drops them
                    from the event)
``tool_call``       ``turn, toolCallId, name, arguments, route``
``tool_result``     ``toolCallId, name, isError, preview, truncated, chars, details`` (bounded)
``proxy_request``   ``requestId, toolCallId, name, arguments`` — the host runs it and answers
``approval_request`` ``requestId, toolCallId, name, request`` — the call waits for a person; the
                    host answers with ``approval_response``
``text_part``       ``field`` (finalText | partialText), ``text`` — one piece of a terminal event's
                    text too long for one line; the terminal event that follows names the field
                    in ``textParts`` and carries it empty, the host joins the pieces back
``run_end``         terminal: ``status`` (completed | partial), ``finalText``, ``stopReason``,
                    ``usage``, ``counts``
``run_error``       terminal: ``code`` (:data:`ERROR_CODES`), ``message``, ``partialText``,
                    ``usage``, ``counts``
==================  ==========================================================================

Exactly one terminal event per run: the child writes it when it can, the host writes a
synthetic one (``"synthetic": true``) when the child could not (crash, stall, kill).

Host → child, on stdin after the envelope line: ``{"v":1,"type":"cancel","reason":...}`` and
``{"v":1,"type":"proxy_response","requestId":...,"result":{"content":[...],"isError":...}}`` and
``{"v":1,"type":"approval_response","requestId":...,"decision":"allow"|"deny","text":...,"scope":...,"prefix":...}``.

Lines that are not protocol (not JSON, not an object, a bad event) are never dropped
silently: :class:`NoiseLog` keeps a bounded sample and counts all of them.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from typing import IO, Any

PROTOCOL_VERSION = 1

EVENT_TYPES = (
    "run_start",
    "heartbeat",
    "assistant_delta",
    "assistant_message",
    "model_call",
    "tool_call",
    "tool_result",
    "proxy_request",
    "approval_request",
    "text_part",
    "run_end",
    "run_error",
)
TERMINAL_TYPES = ("run_end", "run_error")
RUN_END_STATUSES = ("completed", "partial")
BUDGET_CODES = ("budget_turns", "budget_tool_calls", "budget_tokens", "budget_cost", "budget_wall_clock")
ERROR_CODES = (
    "llm_error",
    "tool_error",
    *BUDGET_CODES,
    "stalled",
    "cancelled",
    "protocol_error",
    "child_crash",
    "bad_envelope",
    "spawn_failed",
)
HOST_MESSAGE_TYPES = ("cancel", "proxy_response", "approval_response")
HEARTBEAT_PHASES = ("starting", "model", "tool", "proxy", "approval", "finishing")
APPROVAL_DECISIONS = ("allow", "deny")

#: Bounds. A line longer than MAX_LINE_BYTES is cut and reported as noise.
MAX_LINE_BYTES = 1024 * 1024
#: The writer splits a text longer than this (characters) over several events: a character
#: is at most 6 bytes in a JSON line (``\\u001f``), so a piece stays well under MAX_LINE_BYTES.
PART_CHARS = 96 * 1024
PART_FIELDS = ("finalText", "partialText")
PREVIEW_CHARS = 2000
MAX_MESSAGE_TEXT_CHARS = 256 * 1024
#: A model call's system prompt or tools travel in its event up to this size (JSON bytes);
#: a larger one goes by digest alone (its trace record cannot show it).
MAX_BLOB_BYTES = 256 * 1024
#: ``model_call.call``: model (the configured name), modelId, provider, api, endpoint;
#: startedAt, firstTokenAt, finishedAt (epoch ms); stopReason, usage, error; settings (the
#: request's other fields); systemDigest, toolsDigest; contextSeq (the seq of the child's
#: last event before the call: its context is the task and what its events up to there carry).
MODEL_CALL_FIELDS = (
    "model", "modelId", "provider", "api", "endpoint", "startedAt", "firstTokenAt", "finishedAt", "stopReason", "usage", "error",
    "settings", "systemDigest", "toolsDigest", "contextSeq",
)  # fmt: skip
NOISE_KEEP_LINES = 50
NOISE_KEEP_CHARS = 500
STDERR_TAIL_BYTES = 16 * 1024

_REQUIRED = {
    "run_end": {"status": str, "finalText": str, "stopReason": str},
    "run_error": {"code": str, "message": str},
    "assistant_delta": {"delta": str},
    "tool_call": {"toolCallId": str, "name": str},
    "tool_result": {"toolCallId": str, "name": str, "isError": bool},
    "proxy_request": {"requestId": str, "name": str},
    "approval_request": {"requestId": str, "toolCallId": str, "name": str, "request": dict},
    "text_part": {"field": str, "text": str},
    "heartbeat": {"phase": str},
    "model_call": {"call": dict},
}


class ProtocolError(ValueError):
    """A line that is not a valid protocol message; the message says why."""


def now_ms() -> int:
    return int(time.time() * 1000)


def encode_line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")


def preview(text: str, limit: int = PREVIEW_CHARS) -> tuple[str, bool]:
    """``text`` bounded to about ``limit`` characters: head and tail around a marker."""
    if len(text) <= limit:
        return text, False
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n… [{cut} characters not shown] …\n{text[-tail:]}", True


# --------------------------------------------------------------------------- child side


class EventWriter:
    """Writes events with ``v, runId, seq, ts``; thread-safe; nothing after the terminal event.

    ``emit`` returns the event written, or None when the run already ended (a heartbeat
    racing the terminal event is dropped, by design). A second terminal event raises.
    """

    def __init__(self, stream: IO[bytes], run_id: str):
        self._stream = stream
        self.run_id = run_id
        self._seq = 0
        self._lock = threading.Lock()
        self.terminal: dict | None = None

    @property
    def seq(self) -> int:
        return self._seq

    def emit(self, type_: str, **payload: Any) -> dict | None:
        if type_ not in EVENT_TYPES:
            raise ProtocolError(f"unknown event type {type_!r}")
        with self._lock:
            if self.terminal is not None:
                if type_ in TERMINAL_TYPES:
                    raise ProtocolError(f"the run already ended with {self.terminal['type']}")
                return None
            if type_ == "assistant_delta" and len(payload.get("delta") or "") > PART_CHARS:
                delta = payload["delta"]
                for start in range(0, len(delta), PART_CHARS):
                    event = self._write(type_, {**payload, "delta": delta[start : start + PART_CHARS]})
                return event
            if type_ in TERMINAL_TYPES:
                long_fields = [f for f in PART_FIELDS if isinstance(payload.get(f), str) and len(payload[f]) > PART_CHARS]
                if long_fields:
                    for field in long_fields:
                        text = payload[field]
                        for start in range(0, len(text), PART_CHARS):
                            self._write("text_part", {"field": field, "text": text[start : start + PART_CHARS]})
                    payload = {**payload, **{f: "" for f in long_fields}, "textParts": long_fields}
            return self._write(type_, payload)

    def _write(self, type_: str, payload: dict) -> dict:
        self._seq += 1
        event = {"v": PROTOCOL_VERSION, "runId": self.run_id, "seq": self._seq, "ts": now_ms(), "type": type_, **payload}
        if type_ in TERMINAL_TYPES:
            self.terminal = event
        try:
            self._stream.write(encode_line(event))
            self._stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the host is gone; the child notices on stdin and stops
        return event


def check_host_message(obj: Any) -> dict:
    """A host → child message, validated; raises ProtocolError."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"a host message is a JSON object, got {type(obj).__name__}")
    if obj.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(f"host message version {obj.get('v')!r}; this child speaks {PROTOCOL_VERSION}")
    kind = obj.get("type")
    if kind not in HOST_MESSAGE_TYPES:
        raise ProtocolError(f"unknown host message type {kind!r}; known: {', '.join(HOST_MESSAGE_TYPES)}")
    if kind == "cancel":
        reason = obj.get("reason", "cancelled")
        if reason != "cancelled" and reason not in BUDGET_CODES:
            raise ProtocolError(f"cancel.reason must be 'cancelled' or a budget code, got {reason!r}")
    elif kind == "approval_response":
        if not isinstance(obj.get("requestId"), str) or not obj["requestId"]:
            raise ProtocolError("approval_response.requestId must be a non-empty string")
        if obj.get("decision") not in APPROVAL_DECISIONS:
            raise ProtocolError(f"approval_response.decision must be one of {', '.join(APPROVAL_DECISIONS)}, got {obj.get('decision')!r}")
        if not isinstance(obj.get("text", ""), str) or not isinstance(obj.get("prefix", ""), str) or obj.get("scope", "once") not in ("once", "session"):
            raise ProtocolError("approval_response: text and prefix are strings, scope is once or session")
    else:
        if not isinstance(obj.get("requestId"), str) or not obj["requestId"]:
            raise ProtocolError("proxy_response.requestId must be a non-empty string")
        result = obj.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("content"), list):
            raise ProtocolError("proxy_response.result must be an object with a content list")
    return obj


def cancel_message(reason: str = "cancelled") -> dict:
    return {"v": PROTOCOL_VERSION, "type": "cancel", "reason": reason}


def proxy_response_message(request_id: str, result: dict[str, Any]) -> dict:
    return {"v": PROTOCOL_VERSION, "type": "proxy_response", "requestId": request_id, "result": result}


def approval_response_message(request_id: str, *, decision: str, text: str = "", scope: str = "once", prefix: str = "") -> dict:
    """The host's answer to ``approval_request``: ``text`` is a denied call's tool result."""
    return {"v": PROTOCOL_VERSION, "type": "approval_response", "requestId": request_id, "decision": decision, "text": text, "scope": scope, "prefix": prefix}


# --------------------------------------------------------------------------- host side


def check_event(obj: Any, *, run_id: str | None = None, last_seq: int = 0) -> dict:
    """A child → host event, validated (shape, run, order); raises ProtocolError."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"an event is a JSON object, got {type(obj).__name__}")
    if obj.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(f"event version {obj.get('v')!r}; this host speaks {PROTOCOL_VERSION}")
    kind = obj.get("type")
    if kind not in EVENT_TYPES:
        raise ProtocolError(f"unknown event type {kind!r}")
    if run_id is not None and obj.get("runId") != run_id:
        raise ProtocolError(f"event for run {obj.get('runId')!r}, expected {run_id!r}")
    seq = obj.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq <= last_seq:
        raise ProtocolError(f"seq must be an integer above {last_seq}, got {seq!r}")
    ts = obj.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise ProtocolError(f"ts must be an integer (epoch ms), got {ts!r}")
    for key, typ in _REQUIRED.get(kind, {}).items():
        if not isinstance(obj.get(key), typ):
            raise ProtocolError(f"{kind}.{key} must be a {typ.__name__}, got {obj.get(key)!r}")
    if kind == "text_part" and obj["field"] not in PART_FIELDS:
        raise ProtocolError(f"text_part.field must be one of {', '.join(PART_FIELDS)}, got {obj['field']!r}")
    parts = obj.get("textParts")
    if parts is not None and (kind not in TERMINAL_TYPES or not isinstance(parts, list) or not set(parts) <= set(PART_FIELDS)):
        raise ProtocolError(f"textParts must be a list of {', '.join(PART_FIELDS)} on a terminal event, got {parts!r}")
    if kind == "run_end" and obj["status"] not in RUN_END_STATUSES:
        raise ProtocolError(f"run_end.status must be one of {', '.join(RUN_END_STATUSES)}, got {obj['status']!r}")
    if kind == "run_error" and obj["code"] not in ERROR_CODES:
        raise ProtocolError(f"run_error.code must be one of {', '.join(ERROR_CODES)}, got {obj['code']!r}")
    return obj


class TextParts:
    """The host's side of ``text_part``: collects the pieces and puts them back into the
    terminal event that names their field in ``textParts``."""

    def __init__(self):
        self._parts: dict[str, list[str]] = {}

    def add(self, event: dict) -> None:
        self._parts.setdefault(event["field"], []).append(event["text"])

    def partial(self, field: str) -> str:
        return "".join(self._parts.get(field, ()))

    def complete(self, terminal: dict) -> dict:
        """``terminal`` with its long texts whole again (``textParts`` dropped)."""
        fields = terminal.get("textParts")
        if not fields:
            return terminal
        out = {k: v for k, v in terminal.items() if k != "textParts"}
        for field in fields:
            out[field] = self.partial(field)
        return out


class LineReader:
    """Splits a byte stream into lines, bounded: a line over ``max_line`` bytes is cut there
    (returned with ``oversized=True``) and the rest of it up to the next newline is skipped."""

    def __init__(self, max_line: int = MAX_LINE_BYTES):
        self.max_line = max_line
        self._buf = bytearray()
        self._skipping = False

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        out: list[tuple[bytes, bool]] = []
        self._buf += data
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                if len(self._buf) > self.max_line:
                    if not self._skipping:
                        out.append((bytes(self._buf[: self.max_line]), True))
                        self._skipping = True
                    self._buf.clear()
                return out
            line = bytes(self._buf[:nl])
            del self._buf[: nl + 1]
            if self._skipping:
                self._skipping = False
                continue
            if len(line) > self.max_line:
                out.append((line[: self.max_line], True))
            else:
                out.append((line, False))

    def close(self) -> list[tuple[bytes, bool]]:
        """What is left without a final newline."""
        rest = bytes(self._buf)
        self._buf.clear()
        if not rest or self._skipping:
            return []
        return [(rest, False)]


class NoiseLog:
    """Lines that were not protocol: the first :data:`NOISE_KEEP_LINES` kept (each cut to
    :data:`NOISE_KEEP_CHARS`), all of them counted."""

    def __init__(self, keep: int = NOISE_KEEP_LINES):
        self.keep = keep
        self.lines: list[dict[str, Any]] = []
        self.count = 0
        self.bytes = 0

    def add(self, line: bytes, reason: str) -> dict[str, Any]:
        self.count += 1
        self.bytes += len(line)
        text = line.decode("utf-8", "replace")
        item = {"line": text[:NOISE_KEEP_CHARS], "reason": reason, "truncated": len(text) > NOISE_KEEP_CHARS}
        if len(self.lines) < self.keep:
            self.lines.append(item)
        return item

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "bytes": self.bytes, "kept": list(self.lines)}


class ByteTail:
    """The last ``limit`` bytes of a stream (stderr)."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES):
        self.limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self._chunks.append(data)
        self._size += len(data)
        while self._size - len(self._chunks[0]) >= self.limit:
            self._size -= len(self._chunks.popleft())

    def text(self) -> str:
        data = b"".join(self._chunks)[-self.limit :]
        return data.decode("utf-8", "replace")


def decode_line(line: bytes, *, oversized: bool, run_id: str | None, last_seq: int) -> tuple[dict | None, str]:
    """(event, "") for a valid event line, else (None, why it is noise)."""
    if oversized:
        return None, f"line longer than {MAX_LINE_BYTES} bytes (cut)"
    stripped = line.strip()
    if not stripped:
        return None, "empty line"
    try:
        obj = json.loads(stripped)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"not JSON: {exc}"
    try:
        return check_event(obj, run_id=run_id, last_seq=last_seq), ""
    except ProtocolError as exc:
        return None, str(exc)
