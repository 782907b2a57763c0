"""The in-process channel layer of the embedded mode."""

from __future__ import annotations

import asyncio
import collections
import logging
import time

logger = logging.getLogger(__name__)


_DROP_LOG_SECONDS = 10.0


def note_dropped(layer) -> None:
    """A socket's queue was full and a message was dropped: count it (``layer.dropped``)
    and say so at most every 10 s."""
    layer.dropped += 1
    now = time.monotonic()
    if now - layer._drop_logged_at >= _DROP_LOG_SECONDS:
        logger.warning(
            "channel layer: %d messages dropped from full socket queues (capacity %d), %d in all",
            layer.dropped - layer._dropped_logged, layer.capacity, layer.dropped,
        )  # fmt: skip
        layer._drop_logged_at, layer._dropped_logged = now, layer.dropped


def _in_memory_base():
    from channels.layers import (
        InMemoryChannelLayer,  # channels loads Django's async stack: only where a layer is made
    )

    return InMemoryChannelLayer


class InProcessChannelLayer(_in_memory_base()):
    """Channels' in-memory layer, made to scale with the number of sockets.

    The stock layer scans every channel for expired messages on every receive
    and every group send (O(sockets) per message, O(sockets²) per broadcast),
    deep-copies each message for each member, makes a new queue for every
    receive (and drops it whenever it runs empty), and checks every name against
    its pattern on every call. Here expiry runs at most every ``clean_interval``
    seconds, a group send is a plain loop, members get a shallow copy (nested
    values are shared and must be treated as read-only: the gateway's consumers
    never modify what they receive), a channel keeps its queue while its consumer
    listens (idle empty ones go with the expiry sweep), and names are checked once,
    when a queue or group is made.

    Everything here runs on the server's event loop: the publisher delivers with
    ``group_send_now`` (no task hop per message) and the socket takes what is
    already queued with ``receive_nowait`` (``runtime.gateway.consumers``).
    """

    def __init__(self, *, clean_interval: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.dropped = self._dropped_logged = 0
        self._drop_logged_at = 0.0
        self.clean_interval = clean_interval
        self._cleaned_at = 0.0
        self._waiting: collections.Counter[str] = collections.Counter()  # channel → receives waiting on it

    def _clean_expired(self):
        now = time.monotonic()
        if now - self._cleaned_at >= self.clean_interval:
            self._cleaned_at = now
            super()._clean_expired()
            # Queues nobody listens on and nothing waits in (a closed socket's): dropped. A
            # consumer between two receives gets a new one on its next (sends make it too).
            for channel in [c for c, q in self.channels.items() if q.empty() and c not in self._waiting]:
                del self.channels[channel]

    def _queue(self, channel) -> asyncio.Queue:
        queue = self.channels.get(channel)
        if queue is None:
            self.require_valid_channel_name(channel)
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        return queue

    def _put(self, channel, message) -> None:
        try:
            self._queue(channel).put_nowait((time.time() + self.expiry, dict(message)))
        except asyncio.QueueFull:
            from channels.exceptions import (
                ChannelFull,  # loaded only when a queue is full
            )

            raise ChannelFull(channel) from None

    async def send(self, channel, message):
        assert isinstance(message, dict), "message is not a dict"
        self._put(channel, message)

    async def receive(self, channel):
        self._clean_expired()  # before this receive counts as waiting: the sweep may drop an idle queue
        queue = self._queue(channel)
        self._waiting[channel] += 1
        try:
            _, message = await queue.get()
        finally:
            self._waiting[channel] -= 1
            if not self._waiting[channel]:
                del self._waiting[channel]
        return message

    def receive_nowait(self, channel) -> dict | None:
        """The next message already queued for ``channel``, or None (never waits)."""
        queue = self.channels.get(channel)
        if queue is None or queue.empty():
            return None
        return queue.get_nowait()[1]

    async def group_send(self, group, message):
        self.group_send_now(group, message)

    def group_send_now(self, group, message) -> None:
        """``group_send`` without a coroutine: on the layer's loop, from its own code."""
        from channels.exceptions import ChannelFull  # loaded only when a queue is full

        assert isinstance(message, dict), "message is not a dict"
        members = self.groups.get(group)
        if members is None:
            self.require_valid_group_name(group)  # a group with members was checked when joined
            return
        self._clean_expired()
        for channel in list(members):
            try:
                self._put(channel, message)
            except ChannelFull:
                note_dropped(self)  # a stuck consumer loses doorbells; the event log fills its gap
