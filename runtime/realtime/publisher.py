"""Publishing to the realtime gateway: tree events and streaming events → session groups.

Two producers feed the Channels layer, from whatever process does the work (the
web process with the inline backend, a Celery worker with the celery backend):

* ``publish_tree_event`` — registered with ``sessions_tree.events.add_publisher``,
  called after commit for every tree event;
* ``ChannelsStreamSink`` — installed with ``runtime.realtime.sinks.set_default_sink``,
  called by the turn loop for every (already coalesced) streaming event.

Both are called from synchronous code in arbitrary threads and must never block
the write path. They hand messages to one *sender* per process that owns an
event loop and a FIFO queue, so messages leave in the order they were produced:

* with a cross-process layer (Redis) the sender runs its own daemon thread and
  loop (started lazily, restarted after a fork: Celery's prefork children);
* with the in-memory layer only consumers in this process can listen, and the
  layer's queues belong to the server's event loop, so the sender runs on that
  loop (``bind_server_loop`` is called by every consumer on connect). With no
  consumer there is nobody to tell and messages are dropped.

The layer is a lossy doorbell: ordering and completeness come from revisions
and the event log. Payloads stay small: a tree event larger than
``NETA_REALTIME_INLINE_BYTES`` travels as a reference (session, revision) and
the consumer reads it from the event log; oversized streaming deltas are split
and other oversized streaming fields are left out (``omitted`` names them).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import logging
import os
import threading
import time

from django.conf import settings
from django.db import transaction

from runtime.realtime.groups import (
    forget_stream_key,
    group_name,
    session_key,
    stream_session_key,
    token_group,
    user_group,
)
from runtime.realtime.messages import (
    DELETED_MESSAGE,
    RECHECK_MESSAGE,
    WITHDRAWN_MESSAGE,
    stream_messages,
    tree_message,
)
from runtime.realtime.sinks import default_sink, set_default_sink
from sessions_tree.events import SESSION_DELETED, add_publisher

logger = logging.getLogger(__name__)


_QUEUE_LIMIT = 10_000


_LOG_SECONDS = 10.0


_BATCH = 500  # the most messages a cross-process layer is handed at once (``group_send_many``)


def _gather_seconds() -> float:
    return settings.NETA_REALTIME_GATHER_MS / 1000


class _Sender:
    """A FIFO of (group, message) delivered on one event loop.

    Producers (any thread) append to a deque and wake the loop only when no wake-up is
    pending: a burst of events costs one wake-up, not one each. On the loop, the
    in-process layer takes each message at once (``group_send_now``: a plain call). A
    cross-process layer (Redis) is handed what is pending at most once every ``gather``
    seconds: a message after a quiet spell leaves at once, what the process's turns produce
    within ``gather`` of the last hand-over waits for the next and leaves with it, one round
    trip for the lot (a node streaming hundreds of replies sends tens of pipelines a second,
    not a command per delta), in the order produced, from a draining task.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, layer, gather: float | None = None):
        self.loop = loop
        self.layer = layer
        self.pid = os.getpid()
        self.direct = hasattr(type(layer), "group_send_now")  # the in-process layer (a Redis layer proxies attributes to its loop)
        self.many = hasattr(type(layer), "group_send_many")  # a layer that sends a backlog in one round trip
        self.gather = 0.0 if self.direct or not self.many else (_gather_seconds() if gather is None else gather)
        self.queue: asyncio.Queue | None = None
        self.pending: collections.deque[tuple[str, dict]] = collections.deque()
        self.scheduled = False
        self.pumped_at = float("-inf")  # the loop's time of the last hand-over
        self.dropped = 0
        self.sent = 0
        self.logged_at = 0.0
        self.logged_dropped = 0
        loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        self.queue = asyncio.Queue(maxsize=_QUEUE_LIMIT)
        if not self.direct:
            self.task = self.loop.create_task(self._drain())

    def submit(self, items: list[tuple[str, dict]]) -> bool:
        if self.loop.is_closed():
            return False
        if len(self.pending) >= _QUEUE_LIMIT:
            for _ in items:
                self._lost("queue full", None)  # the doorbell is lossy; the event log is not
            return True
        self.pending.extend(items)
        if not self.scheduled:
            # Cleared by _pump before it takes anything: an item appended after that
            # point is either taken by this pump or schedules the next one.
            self.scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._pump_later if self.gather else self._pump)
            except RuntimeError:  # the loop closed meanwhile
                self.scheduled = False
                return False
        return True

    def _pump_later(self) -> None:
        wait = self.pumped_at + self.gather - self.loop.time()
        if wait > 0:
            self.loop.call_later(wait, self._pump)
        else:
            self._pump()

    def _pump(self) -> None:
        self.scheduled = False
        self.pumped_at = self.loop.time()
        pending = self.pending
        while pending:
            group, message = pending.popleft()
            if self.direct:
                try:
                    self.layer.group_send_now(group, message)
                    self.sent += 1
                except Exception as exc:
                    self._lost(f"group_send to {group}", exc)
                continue
            try:
                self.queue.put_nowait((group, message))
            except asyncio.QueueFull:
                self._lost("queue full", None)

    def _lost(self, reason: str, exc: BaseException | None) -> None:
        """Count a message that did not leave; log at most every 10 s (an outage is not a log flood)."""
        self.dropped += 1
        now = time.monotonic()
        if now - self.logged_at >= _LOG_SECONDS:
            logger.warning(
                "realtime publisher: %d messages not sent since the last report (%d in all, %d sent); last: %s%s",
                self.dropped - self.logged_dropped, self.dropped, self.sent, reason, f": {exc!r}" if exc else "",
            )  # fmt: skip
            self.logged_at, self.logged_dropped = now, self.dropped

    async def _drain(self) -> None:
        # Never ends on an error: a layer error (Redis away, ChannelFull) costs those messages only.
        # What queued up meanwhile (producers are many threads, the loop one) goes out together
        # when the layer can send several in one round trip, in the same order.
        queue = self.queue
        while True:
            group, message = await queue.get()
            batch = [(group, message)]
            if self.many:
                while len(batch) < _BATCH and not queue.empty():
                    batch.append(queue.get_nowait())
            try:
                if len(batch) == 1:
                    await self.layer.group_send(group, message)
                else:
                    await self.layer.group_send_many(batch)
                self.sent += len(batch)
            except Exception as exc:
                for item in batch:
                    self._lost(f"group_send to {item[0]}", exc)
            finally:
                for _ in batch:
                    queue.task_done()

    async def _drained(self) -> None:
        self._pump()  # whatever is pending (a wake-up may still be on its way)
        await self.queue.join()

    def flush(self, timeout: float) -> bool:
        """Wait (from another thread) until everything submitted so far has left."""
        if self.loop.is_closed():
            return False
        future = asyncio.run_coroutine_threadsafe(self._drained(), self.loop)
        try:
            future.result(timeout)
            return True
        except Exception:
            future.cancel()
            return False


class EventPublisher:
    """Where this process's realtime messages go (one instance per process)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sender: _Sender | None = None
        self._server_loop: asyncio.AbstractEventLoop | None = None

    def _layer(self):
        from channels.layers import (  # channels loads with the first publish, not with every importer
            DEFAULT_CHANNEL_LAYER,
            channel_layers,
            get_channel_layer,
        )

        layer = channel_layers.backends.get(DEFAULT_CHANNEL_LAYER)
        if layer is not None:
            return layer
        # Channels makes the layer on first use without a lock: two threads publishing at once
        # would each make one, and the sender of the one replace the other's (messages lost).
        with _layer_lock:
            return get_channel_layer()

    def prepare(self) -> None:
        """Make the channel layer and, for a cross-process layer, the sender now, before
        threads publish (a Celery worker at start-up; a pool's threads then share them)."""
        self._current_sender()

    @staticmethod
    def _in_process_layer(layer) -> bool:
        from channels.layers import InMemoryChannelLayer  # as above

        return isinstance(layer, InMemoryChannelLayer)

    def bind_server_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called by consumers: the loop that owns the in-memory layer's queues."""
        if self._server_loop is loop:
            return
        with self._lock:
            self._server_loop = loop
            layer = self._layer()
            if layer is not None and self._in_process_layer(layer):
                self._sender = _Sender(loop, layer)

    def _current_sender(self) -> _Sender | None:
        sender = self._sender
        layer = self._layer()
        if sender is not None and sender.pid == os.getpid() and not sender.loop.is_closed() and sender.layer is layer:
            return sender
        with self._lock:
            sender = self._sender
            if sender is not None and sender.pid == os.getpid() and not sender.loop.is_closed() and sender.layer is layer:
                return sender
            if layer is None:
                return None
            if self._in_process_layer(layer):
                loop = self._server_loop
                if loop is None or loop.is_closed():
                    self._sender = None
                    return None  # no consumer in this process: nobody to tell
                self._sender = _Sender(loop, layer)
            else:
                self._sender = _Sender(_background_loop(), layer)
            return self._sender

    def send(self, items: list[tuple[str, dict]], sender: _Sender | None = None) -> None:
        sender = sender or self._current_sender()
        if sender is not None:
            sender.submit(items)

    def stats(self) -> dict:
        """This process's sender: messages sent and messages lost (queue full, layer errors)."""
        sender = self._sender
        return {"sent": sender.sent if sender else 0, "dropped": sender.dropped if sender else 0}

    def publish_tree_event(self, session_id: str, event: dict, session_pk: int | None = None) -> None:
        """``session_pk``: the key of the row the event was committed to (the provider's
        commit passes it); without it, the row that holds ``session_id`` now (a query)."""
        sender = self._current_sender()
        if sender is None:
            return
        if event.get("type") == SESSION_DELETED:
            forget_stream_key(session_id)
            message = {"type": DELETED_MESSAGE, "sessionId": session_id, "sessionKey": event.get("sessionPk")}
            self.send([(group_name(session_id), message)], sender)
            return
        key = session_pk if session_pk is not None else session_key(session_id)
        self.send([(group_name(session_id), tree_message(session_id, event, key=key))], sender)

    def publish_stream_event(self, session_id: str, event: dict) -> None:
        sender = self._current_sender()
        if sender is None:
            return
        group = group_name(session_id)
        key = stream_session_key(session_id)
        self.send([(group, m) for m in stream_messages(session_id, event, key=key)], sender)

    def withdraw(self, groups: list[str], *, code: str, message: str) -> None:
        """Close every socket in ``groups`` with 4401, after the current transaction commits."""
        self._after_commit(groups, {"type": WITHDRAWN_MESSAGE, "code": code, "message": message})

    def recheck(self, groups: list[str]) -> None:
        """Make every socket in ``groups`` check its rights, after the current transaction commits."""
        self._after_commit(groups, {"type": RECHECK_MESSAGE})

    def _after_commit(self, groups: list[str], payload: dict) -> None:
        if groups:
            transaction.on_commit(lambda: self.send([(group, payload) for group in groups]))


_bg_lock = threading.Lock()


_layer_lock = threading.Lock()


_bg: tuple[int, asyncio.AbstractEventLoop] | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    """This process's publishing loop (a daemon thread; recreated after a fork)."""
    global _bg
    with _bg_lock:
        if _bg is not None and _bg[0] == os.getpid() and not _bg[1].is_closed():
            return _bg[1]
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="neta-realtime-publisher", daemon=True)
        thread.start()
        if _bg is None:
            # A short-lived process (a management command revoking a token) still rings its doorbells.
            atexit.register(_flush_at_exit)
        _bg = (os.getpid(), loop)
        return loop


def _flush_at_exit() -> None:
    sender = event_publisher._sender
    if sender is not None and sender.pid == os.getpid() and _bg is not None and sender.loop is _bg[1]:
        sender.flush(timeout=2.0)


event_publisher = EventPublisher()


def publish_tree_event(session_id: str, event: dict, session_pk: int | None = None) -> None:
    """The kernel's publisher (``sessions_tree.events.add_publisher``): tree events and
    the ``session_deleted`` notice. It takes the committing row's key from the provider's
    commit (``takes_session_pk``): one lookup per event less (several per turn)."""
    event_publisher.publish_tree_event(session_id, event, session_pk)


publish_tree_event.takes_session_pk = True  # type: ignore[attr-defined]


def withdraw_user(user_pk: int, reason: str = "user inactive") -> None:
    """The user was deactivated (or deleted): close their sockets (4401)."""
    event_publisher.withdraw([user_group(user_pk)], code="authentication_failed", message=reason)


def withdraw_token(token_pk: int, reason: str = "token revoked") -> None:
    """The token was revoked (or deleted): close the sockets opened with it (4401)."""
    event_publisher.withdraw([token_group(token_pk)], code="authentication_failed", message=reason)


class ChannelsStreamSink:
    """The runtime's streaming sink (``runtime.realtime.sinks.set_default_sink``)."""

    def emit(self, session_id: str, event: dict) -> None:
        event_publisher.publish_stream_event(session_id, event)


def recheck_users(user_pks) -> None:
    """These users' roles or permissions changed: their sockets re-check their rights now."""
    event_publisher.recheck([user_group(pk) for pk in user_pks])


def install() -> None:
    """Register both producers (``RuntimeConfig.ready``): tree events after commit, and the
    streaming sink of the turn loop."""

    add_publisher(publish_tree_event)
    if not isinstance(default_sink(), ChannelsStreamSink):
        set_default_sink(ChannelsStreamSink())
