"""Channel-layer payloads stay small: deltas split, big fields left out, big tree events by reference."""

from __future__ import annotations

import contextlib
import os
import threading

from runtime.realtime.groups import group_name
from runtime.realtime.messages import encoded_size, stream_messages, tree_message


def test_stream_messages_split_deltas_and_leave_out_big_fields():
    delta = {"type": "assistant_stream_delta", "entryId": "e1", "contentIndex": 0, "kind": "text", "delta": "é" * 10_000}
    parts = stream_messages("s1", delta, limit=2048)
    assert len(parts) > 1 and all(encoded_size(p) < 2048 for p in parts)
    assert "".join(p["event"]["delta"] for p in parts) == delta["delta"]
    # Each piece says where it starts in its block, so a client placing deltas by offset keeps them all.
    placed = stream_messages("s1", {**delta, "offset": 5}, limit=2048)
    text = "?" * 5
    for part in placed:
        event = part["event"]
        assert event["offset"] == len(text)
        text = text[: event["offset"]] + event["delta"]
    assert text == "?" * 5 + delta["delta"]
    call = {"type": "tool_call_completed", "entryId": "e1", "contentIndex": 1, "toolCall": {"type": "toolCall", "id": "c1", "name": "write", "arguments": {"content": "z" * 10_000}}}
    (small,) = stream_messages("s1", call, limit=2048)
    assert small["event"]["toolCall"] == {"type": "toolCall", "id": "c1", "name": "write"}
    assert small["event"]["omitted"] == ["toolCall.arguments"] and encoded_size(small) < 2048
    event = {"type": "session_entry_added", "revision": 3, "entry": {"id": "x", "text": "q" * 5000}}
    assert tree_message("s1", event, limit=2048)["event"] is None
    assert tree_message("s1", event, limit=100_000)["event"] == event


def test_group_names_are_valid_for_any_session_id():
    import re

    valid = re.compile(r"^[A-Za-z0-9_.-]{1,99}$")
    assert group_name("01a22c22-635d-777d-85d6-7ffdd746f9ed") == "neta.session.01a22c22-635d-777d-85d6-7ffdd746f9ed"
    odd = [group_name(s) for s in ("a b/c", "é" * 80, "x" * 65)]
    assert all(valid.match(g) for g in odd) and len(set(odd)) == 3


def submit_while_the_loop_is_busy(loop, sender) -> None:
    """Three producers submit 300 messages each to group ``g`` while the sender's loop is held
    busy, so they queue up; the loop is released once all are submitted."""
    blocked, release = threading.Event(), threading.Event()
    loop.call_soon_threadsafe(lambda: (blocked.set(), release.wait(5)))  # the loop is busy meanwhile
    assert blocked.wait(5)
    producers = [
        threading.Thread(target=lambda p=p: [sender.submit([("g", {"type": "m", "p": p, "n": n})]) for n in range(300)])
        for p in range(3)
    ]  # fmt: skip
    for producer in producers:
        producer.start()
    for producer in producers:
        producer.join()
    release.set()


def test_the_in_process_layer_delivers_to_every_member_and_drops_only_for_a_full_one():
    import asyncio

    from runtime.realtime.layer import InProcessChannelLayer

    async def scenario():
        layer = InProcessChannelLayer(capacity=2, expiry=60, clean_interval=0)  # every call sweeps
        members = [await layer.new_channel() for _ in range(3)]
        for channel in members:
            await layer.group_add("g", channel)
        await layer.send(members[0], {"type": "filler"})
        await layer.send(members[0], {"type": "filler"})  # member 0 is now full
        message = {"type": "tree.event", "event": {"revision": 1}}
        await layer.group_send("g", message)
        got = [await layer.receive(c) for c in members[1:]]
        assert got == [message, message] and got[0] is not message  # each member has its own copy
        assert [(await layer.receive(members[0]))["type"] for _ in range(2)] == ["filler", "filler"]
        await layer.group_discard("g", members[1])
        await layer.group_send("g", {"type": "tree.event", "event": {"revision": 2}})
        assert (await layer.receive(members[2]))["event"]["revision"] == 2
        assert members[1] not in layer.channels  # nobody listens on it: its empty queue went
        waiting = asyncio.ensure_future(layer.receive(members[2]))
        await asyncio.sleep(0)
        await layer.group_send("g", {"type": "tree.event", "event": {"revision": 3}})  # sweeps, and sends
        assert (await waiting)["event"]["revision"] == 3  # a listening member's queue stays

    asyncio.run(scenario())


def test_a_burst_from_a_thread_arrives_whole_and_in_order_with_few_wake_ups():
    """The publisher's sender wakes the server's loop once per burst, not once per message,
    and the in-process layer takes each message at once, in the order it was produced."""
    import asyncio

    from runtime.realtime.layer import InProcessChannelLayer
    from runtime.realtime.publisher import _Sender

    loop = asyncio.new_event_loop()
    wake_ups = []
    call_soon_threadsafe = loop.call_soon_threadsafe

    def counted(callback, *args):
        wake_ups.append(callback)
        return call_soon_threadsafe(callback, *args)

    loop.call_soon_threadsafe = counted
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        layer = InProcessChannelLayer(capacity=10_000, expiry=60)
        channel = asyncio.run_coroutine_threadsafe(layer.new_channel(), loop).result(5)
        asyncio.run_coroutine_threadsafe(layer.group_add("g", channel), loop).result(5)
        sender = _Sender(loop, layer)
        submit_while_the_loop_is_busy(loop, sender)
        assert sender.flush(timeout=5)

        async def take_all():
            got = []
            while (message := layer.receive_nowait(channel)) is not None:
                got.append(message)
            return got

        got = asyncio.run_coroutine_threadsafe(take_all(), loop).result(5)
        assert len(got) == 900 and sender.sent == 900 and sender.dropped == 0
        for p in range(3):
            assert [m["n"] for m in got if m["p"] == p] == list(range(300))  # each producer's order kept
        pumps = [w for w in wake_ups if getattr(w, "__name__", "") == "_pump"]
        assert 1 <= len(pumps) <= 3  # 900 messages while the loop was busy: a wake-up per burst, not 900
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


@contextlib.contextmanager
def redis_group(name: str):
    """(loop, layer, take, senders): the deployed layer (Redis) on an event loop of its own in a
    thread, with a socket's channel in group ``g``; ``take(n)`` receives n messages on it (5 s
    each at most); the senders a test appends are stopped at the end."""
    import asyncio

    from runtime.realtime.redis_layer import RedisFanoutLayer
    from tests.support.services import REDIS_URL, redis_available, require

    require(redis_available(), f"Redis is not reachable at {REDIS_URL}")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    layer = RedisFanoutLayer(hosts=[REDIS_URL], prefix=f"neta_test_{name}_{os.getpid()}", capacity=2000)
    senders: list = []
    try:
        channel = asyncio.run_coroutine_threadsafe(layer.new_channel(), loop).result(5)
        asyncio.run_coroutine_threadsafe(layer.group_add("g", channel), loop).result(5)

        def take(count: int) -> list[dict]:
            async def receive():
                return [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(count)]

            return asyncio.run_coroutine_threadsafe(receive(), loop).result(30)

        yield loop, layer, take, senders
    finally:

        async def close():
            for sender in senders:
                sender.task.cancel()  # its drain task waits on the queue forever
            await layer.flush()

        asyncio.run_coroutine_threadsafe(close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_a_backlog_goes_to_redis_in_one_round_trip_whole_and_in_order():
    """With the deployed layer (Redis), what queued up while the publisher's loop was busy
    is sent as one pipeline: every message arrives, each producer's in its order."""
    from runtime.realtime.publisher import _Sender

    with redis_group("backlog") as (loop, layer, take, senders):
        sender = _Sender(loop, layer)
        senders.append(sender)
        assert sender.many
        sent_at_once = []
        many = layer.group_send_many

        async def counted(items):
            sent_at_once.append(len(items))
            await many(items)

        layer.group_send_many = counted
        submit_while_the_loop_is_busy(loop, sender)
        assert sender.flush(timeout=10)
        got = take(900)
        assert sender.sent == 900 and sender.dropped == 0
        for p in range(3):
            assert [m["n"] for m in got if m["p"] == p] == list(range(300))  # each producer's order kept
        assert sent_at_once and sum(sent_at_once) >= 800 and max(sent_at_once) <= 500  # a pipeline per 500 at most, not a command each


def test_a_steady_trickle_leaves_for_redis_in_gathered_pipelines():
    """Turns stream at their own pace, not in bursts: with the deployed layer the sender hands
    what is pending to Redis at most once every ``gather`` seconds, one pipeline for what came
    meanwhile, so a node's messages cost tens of round trips a second, not one each. All
    arrive, in order; a message after a quiet spell is not held for the gather."""
    import time

    from runtime.realtime.publisher import _Sender

    with redis_group("gather") as (loop, layer, take, senders):
        sender = _Sender(loop, layer, gather=0.02)
        senders.append(sender)
        round_trips = []
        many, one = layer.group_send_many, layer.group_send

        async def counted_many(items):
            round_trips.append(len(items))
            await many(items)

        async def counted_one(group, message):
            round_trips.append(1)
            await one(group, message)

        layer.group_send_many, layer.group_send = counted_many, counted_one

        def produce(p):
            for n in range(100):
                sender.submit([("g", {"type": "m", "p": p, "n": n})])
                time.sleep(0.002)

        producers = [threading.Thread(target=produce, args=(p,)) for p in range(3)]
        for producer in producers:
            producer.start()
        for producer in producers:
            producer.join()
        assert sender.flush(timeout=10)
        got = take(300)
        assert sender.sent == 300 and sender.dropped == 0 and sum(round_trips) == 300
        for p in range(3):
            assert [m["n"] for m in got if m["p"] == p] == list(range(100))
        assert len(round_trips) <= 40, round_trips  # ~0.25 s of messages in 20 ms gathers (at once: ~300)

        quiet = _Sender(loop, layer, gather=60.0)  # a minute's gather: the first message still leaves at once
        senders.append(quiet)
        quiet.submit([("g", {"type": "m", "p": 9, "n": 0})])
        assert take(1)[0]["p"] == 9
