"""Streaming events: the ephemeral projection of an in-flight entry (docs/realtime.md).

The turn loop emits them through one ``StreamSink``; the realtime gateway plugs
in a sink that publishes to the session's Channels group, tests plug in an
``InMemorySink``. Deltas are coalesced (``NETA_STREAM_RATE`` messages per second
per stream at most, fewer when the process streams more than ``NETA_STREAM_BUDGET``
messages a second in all: ``StreamBudget``): a client that misses some recovers the
text from the in-flight entry in the next snapshot or tree event.

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


class StreamBudget:
    """The delta messages one process may stream a second, shared by its busy streams.

    Every delta message costs the same on its way to the sockets (the layer, the
    consumer, a websocket frame) whatever it holds, and a process has one event loop
    to send them: with many streams at once a fixed rate per stream would spend it on
    frames instead of turns. Each stream's interval between messages is at least
    ``streams / per_second``, where ``streams`` is how many streamed a delta in the last
    second (counted at most every ``RECOUNT`` seconds). The text is the same, in fewer,
    larger deltas. ``per_second`` 0: no budget (each stream keeps its own rate).
    """

    WINDOW = 1.0
    RECOUNT = 0.25

    def __init__(self, per_second: int):
        self.per_second = per_second
        self._seen: dict[int, float] = {}  # stream (its coalescer's id) -> its last delta message
        self._interval = 0.0
        self._counted = float("-inf")
        self._lock = threading.Lock()

    def interval(self, stream: int, now: float) -> float:
        """Note that ``stream`` sent a delta message at ``now``; the least interval between
        one stream's messages at the moment."""
        if not self.per_second:
            return 0.0
        self._seen[stream] = now
        if now - self._counted >= self.RECOUNT and self._lock.acquire(blocking=False):
            try:
                cutoff = now - self.WINDOW
                for key, at in list(self._seen.items()):
                    if at < cutoff:
                        self._seen.pop(key, None)
                self._interval = len(self._seen) / self.per_second
                self._counted = now
            finally:
                self._lock.release()
        return self._interval

    def streams(self) -> int:
        return len(self._seen)


_budget: StreamBudget | None = None


_budget_lock = threading.Lock()


def process_budget() -> StreamBudget:
    """The process's ``StreamBudget`` (``NETA_STREAM_BUDGET``), made on first use: one, however
    many threads start their first turns at once (a runs worker on a threads pool)."""
    global _budget
    if _budget is None:
        from django.conf import (
            settings,  # the sinks' types load without Django (the subagent child's stream events)
        )

        with _budget_lock:
            if _budget is None:
                _budget = StreamBudget(settings.NETA_STREAM_BUDGET)
    return _budget


class Coalescer:
    """Merges consecutive deltas of one stream; flushes at most ``rate`` times per second,
    and less often while the process's ``budget`` is shared by many streams.

    A non-delta event flushes what is pending first, so order is preserved.
    """

    DELTA_TYPES = COALESCED_TYPES
    MAX_READ_PACE = 1.0  # seconds: what an end of a model call may wait to be read

    def __init__(
        self,
        sink: StreamSink,
        session_id: str,
        *,
        rate: int = 20,
        budget: StreamBudget | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.sink = sink
        self.session_id = session_id
        self.interval = 1.0 / max(1, rate)
        self.budget = budget
        self.clock = clock
        self._pending: dict | None = None
        self._pending_key: tuple | None = None
        self._last_flush = 0.0
        self._wait = self.interval  # the interval now: the rate's, or the budget's share if longer
        self.emitted = 0

    def emit(self, event: dict) -> None:
        kind = event["type"]
        if kind not in self.DELTA_TYPES or event.get("final"):
            self.flush()
            self._send(event)
            return
        # Which stream a delta continues (the pending one's key is kept with it).
        key = (kind, event.get("entryId"), event.get("contentIndex"), event.get("kind"), event.get("toolCallId"))
        pending = self._pending
        if pending is not None and key == self._pending_key:
            if kind == "tool_result_streamed":
                pending.update(event)  # accumulated partials: the latest wins
            else:
                pending["delta"] += event.get("delta", "")
        else:
            self.flush()
            self._pending, self._pending_key = dict(event), key
        if self.clock() - self._last_flush >= self._wait:
            self.flush()

    def read_pace(self) -> float:
        """How long the model's stream may gather between two reads: 0 while this stream
        flushes at its own rate; while the process's budget holds it back (many streams at
        once), the budget's interval, at most ``MAX_READ_PACE``: reading more often would
        only wake the thread for deltas that wait here anyway."""
        return min(self._wait, self.MAX_READ_PACE) if self._wait > self.interval else 0.0

    def flush(self) -> None:
        if self._pending is not None:
            event, self._pending = self._pending, None
            self._send(event)
            now = self._last_flush = self.clock()
            if self.budget is not None:
                self._wait = max(self.interval, self.budget.interval(id(self), now))

    def _send(self, event: dict) -> None:
        self.emitted += 1
        self.sink.emit(self.session_id, event)
