"""The distributed channel layer: channels_redis' pub/sub layer with one bounded queue per socket
(docs/realtime.md, "Channel layers")."""

from __future__ import annotations

import asyncio

from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer
from channels_redis.utils import _wrap_close

from runtime.realtime.layer import note_dropped


class SocketQueue(asyncio.Queue):
    """One socket's pending messages: at most ``capacity``; when full the *oldest* is
    dropped (never the sender's problem, never an exception). The gateway's messages
    are doorbells: a dropped tree event is refilled from the event log by the next
    one or the next heartbeat, a dropped ``run_state`` is re-sent by the heartbeat."""

    def __init__(self, capacity: int, owner):
        super().__init__()
        self.capacity = capacity
        self.owner = owner

    def put_nowait(self, item):
        if self.qsize() >= self.capacity:
            self.get_nowait()
            note_dropped(self.owner)
        super().put_nowait(item)


class _FanoutLoopLayer(RedisPubSubLoopLayer):
    """channels_redis' per-event-loop pub/sub layer with bounded queues per socket."""

    def __init__(self, *args, capacity: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.capacity = capacity

    async def _subscribe_to_channel(self, channel):
        self.channels[channel] = SocketQueue(self.capacity, self.channel_layer)
        await self._get_shard(channel).subscribe(channel)

    async def group_send_many(self, items: list[tuple[str, dict]]) -> None:
        """``group_send`` of each (group, message), in order: one pipeline of ``PUBLISH``es per
        shard (one round trip, one connection from the pool) instead of a command each."""
        by_shard: dict = {}
        for group, message in items:
            channel = self._get_group_channel_name(group)
            by_shard.setdefault(self._get_shard(channel), []).append((channel, self.channel_layer.serialize(message)))
        for shard, publishes in by_shard.items():
            async with shard._lock:  # as channels_redis' own publish
                shard._ensure_redis()
                pipe = shard._redis.pipeline(transaction=False)
                for channel, data in publishes:
                    pipe.publish(channel, data)
                await pipe.execute()


class RedisFanoutLayer(RedisPubSubChannelLayer):
    """The distributed layer: Redis pub/sub (``channels_redis.pubsub``), one bounded queue per socket.

    A group message is one ``PUBLISH``; Redis pushes it once to every process with a
    member, and the process fans it out to its sockets' queues. Nothing is stored in
    Redis, so there is no ``expiry`` (a message is delivered now or never) and no
    ``group_expiry`` (a group's members are the live subscriptions of live processes:
    a killed server's sockets leave with its connection). ``capacity`` bounds each
    socket's queue, not the process's (docs/realtime.md, "Channel layers").
    """

    def __init__(self, *args, capacity: int = 1000, **kwargs):
        # Set before anything else: the base class proxies unknown attributes to its loop layer.
        self.capacity, self.dropped, self._dropped_logged, self._drop_logged_at = capacity, 0, 0, 0.0
        super().__init__(*args, **kwargs)

    async def group_send_many(self, items: list[tuple[str, dict]]) -> None:
        """Several group messages at once (the publisher's backlog): see ``_FanoutLoopLayer``."""
        await self._get_layer().group_send_many(items)

    def _get_layer(self):
        loop = asyncio.get_running_loop()
        layer = self._layers.get(loop)
        if layer is None:
            layer = _FanoutLoopLayer(*self._args, **self._kwargs, channel_layer=self, capacity=self.capacity)
            self._layers[loop] = layer
            _wrap_close(self, loop)
        return layer
