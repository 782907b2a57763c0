"""The shape of every streaming event, declared once (the protocol: docs/realtime.md).

Streaming events are the ephemeral projection of an in-flight entry and of a run's
state: never a source of truth, never logged. Each type is a ``TypedDict`` below with
one constructor; the turn loop, the run lifecycle and the reaper build events only
through the constructors, and ``STREAM_EVENT_SHAPES`` is the one list of types — the
sinks, the coalescer, the channel-layer messages and the browser's twin list
(``static/chat/store.js``, held to this one by ``tests/chat/test_stream_types.py``)
all follow it. Adding a type is a change here (a declaration, an entry in
``STREAM_EVENT_SHAPES``, a constructor) plus the browser's list.

``STREAM_EVENTS_VERSION`` goes up when a field is renamed, removed or changes meaning
(adding an optional field does not); the socket's ``hello`` frame says it.

Two keys are added on the way, not by the constructors: ``omitted`` (the channel layer
left a field too large for it out, ``runtime/realtime/messages.py``) and, on socket
frames only with ``NETA_REALTIME_TRACE``, ``emittedAt``.

No ``from __future__ import annotations`` here: ``TypedDict`` only sees
``NotRequired`` in evaluated annotations (Python 3.11).
"""

from typing import Any, Literal, NotRequired, TypedDict

STREAM_EVENTS_VERSION = 1

# A tool's streamed output is its last this many characters.
TOOL_OUTPUT_TAIL_CHARS = 8000


class _StreamEvent(TypedDict):
    type: str
    # Names the fields the channel layer left out because they were too large
    # (e.g. ``["toolCall.arguments"]``); added in transit, any type may carry it.
    omitted: NotRequired[list[str]]


class AssistantStreamStart(_StreamEvent):
    """The run opened the in-flight assistant entry ``entryId`` and streams into it."""

    type: Literal["assistant_stream_start"]
    entryId: str
    runId: str


class AssistantStreamDelta(_StreamEvent):
    """Text or thinking appended to block ``contentIndex``; ``offset`` is where the
    delta starts in that block, so a client can merge it with a checkpoint."""

    type: Literal["assistant_stream_delta"]
    entryId: str
    contentIndex: int
    kind: Literal["text", "thinking"]
    offset: int
    delta: str


class AssistantStreamEnd(_StreamEvent):
    """The assistant message ended (Pi's ``stopReason``); the entry is stored."""

    type: Literal["assistant_stream_end"]
    entryId: str
    stopReason: str | None
    runId: str


class ToolCallStarted(_StreamEvent):
    type: Literal["tool_call_started"]
    entryId: str
    contentIndex: int
    toolCallId: str | None
    name: str | None


class ToolCallDelta(_StreamEvent):
    """A piece of the tool call's JSON arguments, as the model streams them."""

    type: Literal["tool_call_delta"]
    entryId: str
    contentIndex: int
    delta: str


class ToolCallCompleted(_StreamEvent):
    """The whole tool call block (``{type, id, name, arguments}``)."""

    type: Literal["tool_call_completed"]
    entryId: str
    contentIndex: int
    toolCall: dict[str, Any]


class ToolResultStreamed(_StreamEvent):
    """A tool's output so far (its tail, ``truncated`` when longer), and once more when
    it finished (``final``, ``isError``)."""

    type: Literal["tool_result_streamed"]
    toolCallId: str
    text: str
    truncated: NotRequired[bool]
    final: NotRequired[bool]
    isError: NotRequired[bool]


class SessionContextStats(_StreamEvent):
    """What the model's reply says it used (its usage), after each assistant message."""

    type: Literal["session_context_stats"]
    tokens: int
    contextWindow: int
    model: str


class RunState(_StreamEvent):
    """A run's state changed (``queued``, ``running``, ``completed``, ``failed``,
    ``aborted``, ``lost``); ``error`` says why it ended, when it did not complete."""

    type: Literal["run_state"]
    runId: str
    state: str
    error: str | None


class RunNote(_StreamEvent):
    """Something the run did on its own that its user should know, also kept in the run's
    ``notes`` (runtime/runs/notes.py): ``kind`` ``failover`` ("answered by X after Y failed:
    reason"), ``retry`` (a call made again after its stream broke: "X failed: reason; retry
    1/3 in 2 s") or ``thinking`` (the level clamped to what the model accepts)."""

    type: Literal["run_note"]
    runId: str
    kind: str
    text: str


# --- subagents (docs/subagents.md): sent by the subagent host (runtime/subagents/), never by the turn loop --
# ``runId`` is the parent run, ``subagentRunId`` the child (``GET /api/subagent-runs/{id}/``).


class SubagentRunStarted(_StreamEvent):
    """A child of the delegate call ``toolCallId`` (task ``taskIndex``) started as process ``pid``."""

    type: Literal["subagent_run_started"]
    runId: str  # the parent run
    subagentRunId: str
    batchId: str
    batchEntryId: str | None  # the in-flight subagent_batch entry
    toolCallId: str
    taskIndex: int
    agent: str
    depth: int
    pid: int | None


class SubagentEvent(_StreamEvent):
    """Events ``firstSeq``..``seq`` of a child's JSONL stream as one (consecutive
    ``assistant_delta`` of one turn merged; long strings cut): ``event`` is the last one,
    ``{v, runId, seq, ts, type, …}``. Replay: ``GET /api/subagent-runs/{id}/events/?afterSeq=``."""

    type: Literal["subagent_event"]
    runId: str  # the parent run
    subagentRunId: str
    batchId: str
    taskIndex: int
    firstSeq: int
    seq: int
    event: dict[str, Any]


class SubagentRunCompleted(_StreamEvent):
    """A child ended: ``status`` completed, partial, failed, cancelled, timed_out or lost;
    ``errorCode`` / ``error`` say why when it did not complete."""

    type: Literal["subagent_run_completed"]
    runId: str  # the parent run
    subagentRunId: str
    batchId: str
    taskIndex: int
    agent: str
    status: str
    errorCode: str | None
    error: str | None
    usage: dict[str, Any]
    eventCount: int


# type name → its declaration: the one list of streaming event types.
STREAM_EVENT_SHAPES: dict[str, type] = {
    "assistant_stream_start": AssistantStreamStart,
    "assistant_stream_delta": AssistantStreamDelta,
    "assistant_stream_end": AssistantStreamEnd,
    "tool_call_started": ToolCallStarted,
    "tool_call_delta": ToolCallDelta,
    "tool_call_completed": ToolCallCompleted,
    "tool_result_streamed": ToolResultStreamed,
    "session_context_stats": SessionContextStats,
    "run_state": RunState,
    "run_note": RunNote,
    "subagent_run_started": SubagentRunStarted,
    "subagent_event": SubagentEvent,
    "subagent_run_completed": SubagentRunCompleted,
}
STREAM_EVENT_TYPES = frozenset(STREAM_EVENT_SHAPES)
SUBAGENT_STREAM_EVENT_TYPES = frozenset({"subagent_run_started", "subagent_event", "subagent_run_completed"})
RESERVED_STREAM_EVENT_TYPES = SUBAGENT_STREAM_EVENT_TYPES  # the turn loop itself never sends these

# Merged by the coalescer (``sinks.Coalescer``): consecutive ones of one stream become one
# message (deltas concatenate; tool output: the latest wins). A ``final`` one is never held.
COALESCED_TYPES = ("assistant_stream_delta", "tool_call_delta", "tool_result_streamed")
# Split by the channel layer when too large: their ``delta`` concatenates.
SPLIT_TYPES = ("assistant_stream_delta", "tool_call_delta")


def fields_of(shape: type) -> dict[str, list[str]]:
    """``{"required": [...], "optional": [...]}`` of a declaration, sorted."""
    return {"required": sorted(shape.__required_keys__), "optional": sorted(shape.__optional_keys__)}


STREAM_EVENT_FIELDS: dict[str, dict[str, list[str]]] = {name: fields_of(shape) for name, shape in STREAM_EVENT_SHAPES.items()}


def shape_errors(event: dict) -> list[str]:
    """What is wrong with ``event`` against its declaration: an unknown type, a required
    key missing (and not named in ``omitted``), a key not declared. Empty when it fits
    (used by tests)."""
    shape = STREAM_EVENT_SHAPES.get(event.get("type"))
    if shape is None:
        return [f"unknown type {event.get('type')!r}"]
    left_out = set(event.get("omitted") or ())
    errors = [f"{event['type']}: missing {key!r}" for key in sorted(shape.__required_keys__ - set(event) - left_out)]
    declared = shape.__required_keys__ | shape.__optional_keys__
    errors += [f"{event['type']}: undeclared {key!r}" for key in sorted(set(event) - declared)]
    return errors


# --- constructors (a run id may be given as the UUID: it travels as a string) -----------------


def assistant_stream_start(*, entry_id: str, run_id) -> AssistantStreamStart:
    return {"type": "assistant_stream_start", "entryId": entry_id, "runId": str(run_id)}


def assistant_stream_delta(*, entry_id: str, content_index: int, kind: str, offset: int, delta: str) -> AssistantStreamDelta:
    return {
        "type": "assistant_stream_delta",
        "entryId": entry_id,
        "contentIndex": content_index,
        "kind": kind,
        "offset": offset,
        "delta": delta,
    }


def assistant_stream_end(*, entry_id: str, stop_reason: str | None, run_id) -> AssistantStreamEnd:
    return {"type": "assistant_stream_end", "entryId": entry_id, "stopReason": stop_reason, "runId": str(run_id)}


def tool_call_started(*, entry_id: str, content_index: int, tool_call_id: str | None, name: str | None) -> ToolCallStarted:
    return {"type": "tool_call_started", "entryId": entry_id, "contentIndex": content_index, "toolCallId": tool_call_id, "name": name}


def tool_call_delta(*, entry_id: str, content_index: int, delta: str) -> ToolCallDelta:
    return {"type": "tool_call_delta", "entryId": entry_id, "contentIndex": content_index, "delta": delta}


def tool_call_completed(*, entry_id: str, content_index: int, tool_call: dict) -> ToolCallCompleted:
    return {"type": "tool_call_completed", "entryId": entry_id, "contentIndex": content_index, "toolCall": tool_call}


def tool_result_progress(*, tool_call_id: str, text: str) -> ToolResultStreamed:
    """A running tool's output so far: its tail, and whether it was cut."""
    return {
        "type": "tool_result_streamed",
        "toolCallId": tool_call_id,
        "text": text[-TOOL_OUTPUT_TAIL_CHARS:],
        "truncated": len(text) > TOOL_OUTPUT_TAIL_CHARS,
    }


def tool_result_final(*, tool_call_id: str, text: str, is_error: bool) -> ToolResultStreamed:
    """The tool's finished output (its tail; the whole result is in the tree)."""
    return {"type": "tool_result_streamed", "toolCallId": tool_call_id, "text": text[-TOOL_OUTPUT_TAIL_CHARS:], "final": True, "isError": is_error}


def session_context_stats(*, tokens: int, context_window: int, model: str) -> SessionContextStats:
    return {"type": "session_context_stats", "tokens": tokens, "contextWindow": context_window, "model": model}


def run_state(*, run_id, state: str, error: str | None) -> RunState:
    """``error`` empty or None travels as null."""
    return {"type": "run_state", "runId": str(run_id), "state": state, "error": error or None}


def run_note(*, run_id, kind: str, text: str) -> RunNote:
    return {"type": "run_note", "runId": str(run_id), "kind": kind, "text": text}


def subagent_run_started(
    *, run_id, subagent_run_id, batch_id: str, batch_entry_id: str | None, tool_call_id: str, task_index: int, agent: str, depth: int, pid: int | None
) -> SubagentRunStarted:
    return {
        "type": "subagent_run_started", "runId": str(run_id), "subagentRunId": str(subagent_run_id), "batchId": batch_id,
        "batchEntryId": batch_entry_id or None, "toolCallId": tool_call_id, "taskIndex": task_index, "agent": agent,
        "depth": depth, "pid": pid,
    }  # fmt: skip


def subagent_event(*, run_id, subagent_run_id, batch_id: str, task_index: int, first_seq: int, seq: int, event: dict) -> SubagentEvent:
    return {
        "type": "subagent_event", "runId": str(run_id), "subagentRunId": str(subagent_run_id), "batchId": batch_id,
        "taskIndex": task_index, "firstSeq": first_seq, "seq": seq, "event": event,
    }  # fmt: skip


def subagent_run_completed(
    *, run_id, subagent_run_id, batch_id: str, task_index: int, agent: str, status: str, error_code: str | None, error: str | None,
    usage: dict, event_count: int,
) -> SubagentRunCompleted:
    return {
        "type": "subagent_run_completed", "runId": str(run_id), "subagentRunId": str(subagent_run_id), "batchId": batch_id,
        "taskIndex": task_index, "agent": agent, "status": status, "errorCode": error_code or None, "error": error or None,
        "usage": usage, "eventCount": event_count,
    }  # fmt: skip
