"""The consumer's receive loop (runtime/gateway/dispatch.py): order, one at a time, clean exit."""

from __future__ import annotations

import asyncio

import pytest

from runtime.gateway.dispatch import serve

pytestmark = pytest.mark.asyncio


class Source:
    def __init__(self, name: str):
        self.name = name
        self.queue: asyncio.Queue = asyncio.Queue()
        self.reads = 0
        self.cancelled = 0

    async def __call__(self):
        self.reads += 1
        try:
            return await self.queue.get()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


class Done(Exception):
    pass


async def test_messages_are_dispatched_one_at_a_time_in_the_order_they_arrived():
    client, layer = Source("client"), Source("layer")
    seen, running = [], []

    async def dispatch(message):
        running.append(message)
        assert len(running) == 1, "two dispatches at once"
        await asyncio.sleep(0.01 if message == "c1" else 0)  # a slow one: the others wait their turn
        seen.append(message)
        running.remove(message)
        if message == "stop":
            raise Done

    loop = asyncio.create_task(serve((client.__call__, layer.__call__), dispatch))
    await asyncio.sleep(0)
    client.queue.put_nowait("c1")
    await asyncio.sleep(0.002)  # c1 is being dispatched
    layer.queue.put_nowait("l1")
    client.queue.put_nowait("c2")  # read only once c1 was dispatched
    layer.queue.put_nowait("l2")
    await asyncio.sleep(0.05)
    layer.queue.put_nowait("stop")
    with pytest.raises(Done):
        await asyncio.wait_for(loop, 5)
    assert seen == ["c1", "l1", "c2", "l2", "stop"]
    # each source read once per message; the client's read pending at the end was cancelled
    assert (client.reads, layer.reads) == (3, 3)
    assert client.cancelled == 1 and layer.cancelled == 0  # the layer's next read was never started


async def test_a_receive_that_fails_ends_the_loop_with_its_error_and_cancels_the_others():
    client = Source("client")

    async def broken():
        await asyncio.sleep(0.01)
        raise ConnectionError("layer away")

    async def dispatch(message):
        raise AssertionError("nothing to dispatch")

    with pytest.raises(ConnectionError, match="layer away"):
        await asyncio.wait_for(serve((client.__call__, broken), dispatch), 5)
    assert client.cancelled == 1


async def test_a_burst_is_dispatched_without_waiting_between_messages():
    layer = Source("layer")
    for i in range(100):
        layer.queue.put_nowait(i)
    seen = []

    async def dispatch(message):
        seen.append(message)
        if message == 99:
            raise Done

    with pytest.raises(Done):
        await asyncio.wait_for(serve((layer.__call__,), dispatch), 5)
    assert seen == list(range(100))
