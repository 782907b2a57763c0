"""The subagent streaming events, built from a run row (a projection, never the truth: docs/realtime.md).

``subagent_run_started``, ``subagent_event`` (coalesced: consecutive ``assistant_delta``
events of one run and turn travel as one), ``subagent_run_completed``; their shapes are
declared with the others in ``runtime/realtime/stream_events.py``. The truth is the
tree (batch and result entries) and the event table (``GET /api/subagent-runs/{id}/events/``);
a client that misses some replays from there by ``seq``.
"""

from __future__ import annotations

from runtime.realtime import stream_events as E
from runtime.subagents.protocol import preview

EVENT_PREVIEW_CHARS = 2000  # an event's long strings are cut for the socket (the table keeps them)


def run_started(run, *, pid: int | None) -> dict:
    return E.subagent_run_started(
        run_id=run.parent_run.run_id, subagent_run_id=run.run_id, batch_id=run.batch_id, batch_entry_id=run.batch_entry_id or None,
        tool_call_id=run.tool_call_id, task_index=run.task_index, agent=run.agent, depth=run.depth, pid=pid,
    )  # fmt: skip


def run_completed(run) -> dict:
    return E.subagent_run_completed(
        run_id=run.parent_run.run_id, subagent_run_id=run.run_id, batch_id=run.batch_id, task_index=run.task_index, agent=run.agent,
        status=run.status, error_code=run.error_code or None, error=run.error or None, usage=run.usage or {}, event_count=run.event_count,
    )  # fmt: skip


def _bounded(value, depth: int = 0):
    if isinstance(value, str):
        return preview(value, EVENT_PREVIEW_CHARS)[0]
    if isinstance(value, dict) and depth < 6:
        return {k: _bounded(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list) and depth < 6:
        return [_bounded(v, depth + 1) for v in value[:50]]
    return value


def child_event(run, event: dict, *, first_seq: int | None = None) -> dict:
    """One (possibly merged) child event for the socket; ``firstSeq``..``seq`` is what it covers."""
    return E.subagent_event(
        run_id=run.parent_run.run_id, subagent_run_id=run.run_id, batch_id=run.batch_id, task_index=run.task_index,
        first_seq=first_seq if first_seq is not None else event["seq"], seq=event["seq"], event=_bounded(event),
    )  # fmt: skip


class EventCoalescer:
    """Merges consecutive ``assistant_delta`` events of one run (same turn and kind)."""

    def __init__(self, run, emit):
        self.run = run
        self.emit = emit
        self._pending: dict | None = None
        self._first_seq: int | None = None

    def add(self, event: dict) -> None:
        if event.get("type") == "assistant_delta":
            pending = self._pending
            if pending is not None and (pending.get("turn"), pending.get("kind")) == (event.get("turn"), event.get("kind")):
                pending["delta"] += event.get("delta", "")
                pending["seq"], pending["ts"] = event["seq"], event["ts"]
                return
            self.flush()
            self._pending, self._first_seq = dict(event), event["seq"]
            return
        self.flush()
        self.emit(child_event(self.run, event))

    def flush(self) -> None:
        if self._pending is not None:
            event, first = self._pending, self._first_seq
            self._pending = self._first_seq = None
            self.emit(child_event(self.run, event, first_seq=first))
