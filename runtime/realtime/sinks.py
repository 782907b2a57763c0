"""Streaming events: the ephemeral projection of an in-flight entry (DESIGN §6).

The turn loop emits them through one ``StreamSink``; the realtime gateway plugs
in a sink that publishes to the session's Channels group, tests plug in an
``InMemorySink``. Deltas are coalesced (``NETA_STREAM_RATE`` messages per second
per stream at most): a client that misses some recovers the text from the
in-flight entry in the next snapshot or tree event.

Event types and their shapes: ``runtime/realtime/stream_events.py`` (the one list,
``STREAM_EVENT_TYPES``, re-exported here).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from runtime.realtime.stream_events import COALESCED_TYPES, STREAM_EVENT_TYPES  # noqa: F401 - re-exported


class StreamSink(Protocol):
    def emit(self, session_id: str, event: dict) -> None: ...


class NullSink:
    def emit(self, session_id: str, event: dict) -> None:
        return None


class InMemorySink:
    """Keeps every event (thread-safe); for tests and the terminal client."""

    def __init__(self, on_event: Callable[[str, dict], None] | None = None):
        self.events: list[tuple[str, dict]] = []
        self._lock = threading.Lock()
        self._on_event = on_event

    def emit(self, session_id: str, event: dict) -> None:
        with self._lock:
            self.events.append((session_id, event))
        if self._on_event is not None:
            self._on_event(session_id, event)

    def of_type(self, kind: str) -> list[dict]:
        with self._lock:
            return [e for _, e in self.events if e["type"] == kind]


_sink: StreamSink = NullSink()


def set_default_sink(sink: StreamSink) -> StreamSink:
    """Install the process-wide sink (the gateway does this); returns the previous one."""
    global _sink
    previous, _sink = _sink, sink
    return previous


def default_sink() -> StreamSink:
    return _sink


_run_row: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("stream_run_row", default=None)


@contextlib.contextmanager
def streaming_row(session_id: str, session_pk: int) -> Iterator[None]:
    """Within (a run's turn, in its thread): the streaming events of ``session_id`` belong
    to the session row ``session_pk``, the one the run writes to; the publisher tags them
    with it instead of looking the row up (``runtime.realtime.groups.stream_session_key``)."""
    token = _run_row.set((session_id, session_pk))
    try:
        yield
    finally:
        _run_row.reset(token)


def bound_row(session_id: str) -> int | None:
    """The row key ``streaming_row`` bound for ``session_id`` here, else None."""
    bound = _run_row.get()
    return bound[1] if bound is not None and bound[0] == session_id else None


class Coalescer:
    """Merges consecutive deltas of one stream; flushes at most ``rate`` times per second.

    A non-delta event flushes what is pending first, so order is preserved.
    """

    DELTA_TYPES = COALESCED_TYPES

    def __init__(self, sink: StreamSink, session_id: str, *, rate: int = 20, clock: Callable[[], float] = time.monotonic):
        self.sink = sink
        self.session_id = session_id
        self.interval = 1.0 / max(1, rate)
        self.clock = clock
        self._pending: dict | None = None
        self._last_flush = 0.0
        self.emitted = 0

    def _key(self, event: dict) -> tuple:
        return (event["type"], event.get("entryId"), event.get("contentIndex"), event.get("kind"), event.get("toolCallId"))

    def emit(self, event: dict) -> None:
        if event["type"] not in self.DELTA_TYPES or event.get("final"):
            self.flush()
            self._send(event)
            return
        pending = self._pending
        if pending is not None and self._key(pending) == self._key(event):
            if event["type"] == "tool_result_streamed":
                pending.update(event)  # accumulated partials: the latest wins
            else:
                pending["delta"] += event.get("delta", "")
        else:
            self.flush()
            self._pending = dict(event)
        if self.clock() - self._last_flush >= self.interval:
            self.flush()

    def flush(self) -> None:
        if self._pending is not None:
            event, self._pending = self._pending, None
            self._send(event)
            self._last_flush = self.clock()

    def _send(self, event: dict) -> None:
        self.emitted += 1
        self.sink.emit(self.session_id, event)
