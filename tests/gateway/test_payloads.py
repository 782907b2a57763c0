"""Channel-layer payloads stay small: deltas split, big fields left out, big tree events by reference."""

from __future__ import annotations

from runtime.realtime.groups import group_name
from runtime.realtime.messages import encoded_size, stream_messages, tree_message


def test_stream_messages_split_deltas_and_leave_out_big_fields():
    delta = {"type": "assistant_stream_delta", "entryId": "e1", "contentIndex": 0, "kind": "text", "delta": "é" * 10_000}
    parts = stream_messages("s1", delta, limit=2048)
    assert len(parts) > 1 and all(encoded_size(p) < 2048 for p in parts)
    assert "".join(p["event"]["delta"] for p in parts) == delta["delta"]
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


def test_the_in_process_layer_delivers_to_every_member_and_drops_only_for_a_full_one():
    import asyncio

    from runtime.realtime.layer import InProcessChannelLayer

    async def scenario():
        layer = InProcessChannelLayer(capacity=2, expiry=60)
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
        assert members[1] not in layer.channels

    asyncio.run(scenario())
