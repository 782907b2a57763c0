"""The in-process channel layer of the embedded mode."""

from __future__ import annotations

import asyncio
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
    from channels.layers import InMemoryChannelLayer

    return InMemoryChannelLayer


class InProcessChannelLayer(_in_memory_base()):
    """Channels' in-memory layer, made to scale with the number of sockets.

    The stock layer scans every channel for expired messages on every receive
    and every group send (O(sockets) per message, O(sockets²) per broadcast)
    and deep-copies each message for each member. Here expiry runs at most
    every ``clean_interval`` seconds, a group send is a plain loop, and members
    get a shallow copy: nested values are shared and must be treated as
    read-only (the gateway's consumers never modify what they receive).
    """

    def __init__(self, *, clean_interval: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.dropped = self._dropped_logged = 0
        self._drop_logged_at = 0.0
        self.clean_interval = clean_interval
        self._cleaned_at = 0.0

    def _clean_expired(self):
        now = time.monotonic()
        if now - self._cleaned_at >= self.clean_interval:
            self._cleaned_at = now
            super()._clean_expired()

    async def send(self, channel, message):
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        try:
            queue.put_nowait((time.time() + self.expiry, dict(message)))
        except asyncio.QueueFull:
            from channels.exceptions import ChannelFull

            raise ChannelFull(channel) from None

    async def group_send(self, group, message):
        from channels.exceptions import ChannelFull

        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            try:
                await self.send(channel, message)
            except ChannelFull:
                note_dropped(self)  # a stuck consumer loses doorbells; the event log fills its gap
