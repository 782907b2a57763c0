"""The socket protocol (docs/realtime.md): subscribe with or without sinceRevision,
replay from the log, the distinct resync error, strict revision order with
gaps filled from the log, heartbeats, large events by reference, and every
malformed frame answered with an error while the socket stays usable."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from runtime.models import AgentRun
from runtime.realtime.stream_events import STREAM_EVENTS_VERSION
from runtime.sessions.selectors import session_snapshot
from sessions_tree import events as ev
from sessions_tree.events import apply_events
from sessions_tree.models import AgentSession, SessionEvent
from sessions_tree.providers import get_provider
from sessions_tree.tree_events import TREE_EVENTS_VERSION
from tests.support.sockets import Socket, api, command, rest
from tests.support.entries import user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def provider():
    return get_provider("file")


async def revision_of(session_id: str) -> int:
    return await sync_to_async(lambda: AgentSession.objects.get(session_id=session_id).revision)()


async def opened(tree, tokens) -> Socket:
    socket = await Socket.connect(tree.session_id, token=tokens.read_write)
    assert (await socket.recv())["type"] == "hello"
    return socket


async def test_hello_says_the_protocol_and_the_event_shapes_versions(tree, tokens, fresh_layer, settings):
    socket = await Socket.connect(tree.session_id, token=tokens.read_write)
    try:
        hello = await socket.recv()
        assert hello == {
            "type": "hello",
            "protocol": 1,
            "eventVersions": {"tree": TREE_EVENTS_VERSION, "stream": STREAM_EVENTS_VERSION},
            "sessionId": tree.session_id,
            "revision": await revision_of(tree.session_id),
            "readOnly": False,
            "heartbeatSeconds": settings.NETA_WS_HEARTBEAT_SECONDS,
            "commands": ["subscribe", "prompt", "regenerate", "abort", "switch_leaf", "answer", "approve", "ping"],
        }
        assert TREE_EVENTS_VERSION == 1 and STREAM_EVENTS_VERSION == 1  # what docs/realtime.md says
    finally:
        await socket.close()


async def test_subscribe_without_a_revision_sends_the_snapshot_then_live_events(tree, tokens, fresh_layer):
    socket = await opened(tree, tokens)
    try:
        await socket.send({"type": "subscribe", "requestId": 1})
        snapshot_frame = await socket.recv()
        assert snapshot_frame["type"] == "snapshot" and snapshot_frame["requestId"] == 1
        snapshot = snapshot_frame["snapshot"]
        assert snapshot == await sync_to_async(session_snapshot)(tree.session_id)
        assert await socket.recv() == {"type": "subscribed", "requestId": 1, "revision": snapshot["revision"], "replayed": 0}
        client = await api(tokens.read_write)
        await rest(client, "post", f"/api/sessions/{tree.session_id}/labels/", {"entryId": tree.ids["u1"], "label": "x"})
        event = await socket.recv()
        assert event["type"] == ev.ENTRY_ADDED and event["revision"] == snapshot["revision"] + 1
        assert apply_events(snapshot, [event]) == await sync_to_async(session_snapshot)(tree.session_id)
    finally:
        await socket.close()


async def test_resume_replays_exactly_the_missing_events_from_the_log(tree, tokens, fresh_layer):
    socket = await opened(tree, tokens)
    try:
        current = await revision_of(tree.session_id)
        reply = await command(socket, {"type": "subscribe", "sinceRevision": 2})
        replayed = socket.tree_events()
        assert [e["revision"] for e in replayed] == list(range(3, current + 1))
        assert replayed == await sync_to_async(provider().events_since)(tree.session_id, 2)
        assert reply["revision"] == current and reply["replayed"] == current - 2
    finally:
        await socket.close()


async def test_a_log_that_no_longer_reaches_back_gives_the_distinct_resync_error(tree, tokens, fresh_layer):
    await sync_to_async(lambda: SessionEvent.objects.filter(session__session_id=tree.session_id, revision__lte=4).delete())()
    socket = await opened(tree, tokens)
    try:
        reply = await command(socket, {"type": "subscribe", "sinceRevision": 1})
        assert reply["type"] == "error" and reply["code"] == "resync_needed"
        # A revision from the future is just as unusable.
        reply = await command(socket, {"type": "subscribe", "sinceRevision": 10_000})
        assert reply["code"] == "resync_needed"
        # Not subscribed now: live events are not forwarded until the client resubscribes.
        client = await api(tokens.read_write)
        await rest(client, "post", f"/api/sessions/{tree.session_id}/labels/", {"entryId": tree.ids["u1"], "label": "x"})
        assert (await command(socket, {"type": "ping"}))["type"] == "pong"
        assert socket.tree_events() == []
        # The way out: a fresh snapshot.
        reply = await command(socket, {"type": "subscribe", "sinceRevision": None})
        assert reply["revision"] == await revision_of(tree.session_id)
    finally:
        await socket.close()


async def test_events_are_forwarded_in_revision_order_and_a_lost_doorbell_is_filled_from_the_log(tree, tokens, fresh_layer, settings):
    from runtime.realtime.publisher import publish_tree_event

    settings.NETA_WS_HEARTBEAT_SECONDS = 1
    socket = await opened(tree, tokens)
    try:
        start = await revision_of(tree.session_id)
        await command(socket, {"type": "subscribe", "sinceRevision": start})
        # Two changes whose doorbells are lost (the publisher is off), then one that rings.
        ev.remove_publisher(publish_tree_event)
        try:
            for name in ("one", "two"):
                await sync_to_async(provider().append_message)(tree.session_id, user_message(name))
        finally:
            ev.add_publisher(publish_tree_event)
        await sync_to_async(provider().append_message)(tree.session_id, user_message("three"))
        events = await socket.recv_until(lambda f: f.get("revision") == start + 3 and f["type"] in ev.TREE_EVENT_TYPES)
        tree_events = [f for f in events if f["type"] in ev.TREE_EVENT_TYPES]
        assert [e["revision"] for e in tree_events] == [start + 1, start + 2, start + 3]
        # A lost last doorbell: the heartbeat notices the revision moved and catches up.
        ev.remove_publisher(publish_tree_event)
        try:
            await sync_to_async(provider().append_message)(tree.session_id, user_message("four"))
        finally:
            ev.add_publisher(publish_tree_event)
        frames = await socket.recv_until(lambda f: f.get("revision") == start + 4 and f["type"] in ev.TREE_EVENT_TYPES, timeout=10)
        assert any(f["type"] == "heartbeat" for f in frames)
        assert [e["revision"] for e in socket.tree_events()] == [start + 1, start + 2, start + 3, start + 4]
    finally:
        await socket.close()


async def test_large_events_travel_by_reference_and_arrive_whole(tree, tokens, fresh_layer, settings):
    from channels.layers import get_channel_layer

    settings.NETA_REALTIME_INLINE_BYTES = 2048
    layer = get_channel_layer()
    sent: list[dict] = []
    original = layer.group_send_now  # how the publisher delivers on the in-process layer

    def spy(group, message):
        sent.append(message)
        return original(group, message)

    layer.group_send_now = spy
    socket = await opened(tree, tokens)
    try:
        start = await revision_of(tree.session_id)
        await command(socket, {"type": "subscribe", "sinceRevision": start})
        big = "x" * 50_000
        entry = await sync_to_async(provider().append_message)(tree.session_id, user_message(big))
        frames = await socket.recv_until(lambda f: f.get("type") == ev.ENTRY_ADDED)
        assert frames[-1]["entry"] == entry and frames[-1]["revision"] == start + 1
        assert sent and all(len(str(m)) < 4096 for m in sent), "a large event went through the layer inline"
        assert sent[-1]["event"] is None and sent[-1]["revision"] == start + 1
    finally:
        layer.group_send_now = original
        await socket.close()


BAD_FRAMES = [
    ("not json at all", "invalid_json"),
    ("[1, 2, 3]", "invalid_frame"),
    ('"subscribe"', "invalid_frame"),
    ("{}", "invalid_frame"),
    ('{"type": 7}', "invalid_frame"),
    ('{"type": "explode"}', "unknown_command"),
    ('{"type": "subscribe", "sinceRevision": "3"}', "invalid_frame"),
    ('{"type": "subscribe", "sinceRevision": -1}', "invalid_frame"),
    ('{"type": "subscribe", "sinceRevision": true}', "invalid_frame"),
    ('{"type": "ping", "requestId": {"a": 1}}', "invalid_frame"),
    ('{"type": "prompt"}', "invalid"),
    ('{"type": "prompt", "text": 5}', "invalid"),
    ('{"type": "prompt", "text": "   "}', "invalid"),
    ('{"type": "prompt", "text": "hi", "mode": "shout"}', "invalid"),
    ('{"type": "prompt", "text": "hi", "images": "no"}', "invalid"),
    ('{"type": "prompt", "text": "hi", "fromEntryId": "nope0000"}', "entry_not_found"),
    ('{"type": "prompt", "text": "hi", "thinkingLevel": "extreme"}', "invalid"),
    ('{"type": "regenerate"}', "invalid"),
    ('{"type": "regenerate", "entryId": 12}', "invalid"),
    ('{"type": "regenerate", "entryId": "nope0000"}', "entry_not_found"),
    ('{"type": "switch_leaf"}', "invalid"),
    ('{"type": "switch_leaf", "entryId": 12}', "invalid"),
    ('{"type": "switch_leaf", "entryId": "nope0000"}', "entry_not_found"),
    ('{"type": "switch_leaf", "entryId": null, "summarize": "maybe"}', "invalid"),
]


async def test_every_malformed_frame_gets_an_error_and_nothing_reaches_the_store(tree, tokens, fresh_layer, settings):
    settings.NETA_WS_MAX_FRAME_BYTES = 4096
    socket = await opened(tree, tokens)
    try:
        before = await sync_to_async(provider().get_snapshot)(tree.session_id)
        frames = [*BAD_FRAMES, ('{"type": "prompt", "text": "' + "y" * 5000 + '"}', "frame_too_large")]
        for text, code in frames:
            await socket.send(text)
            reply = await socket.recv()
            assert reply["type"] == "error" and reply["code"] == code, (text[:80], reply)
            assert reply["message"]
            # Still usable.
            assert (await command(socket, {"type": "ping", "requestId": "alive"}))["type"] == "pong"
        await socket.communicator.send_to(bytes_data=b"\x00\x01")
        reply = await socket.recv()
        assert reply["code"] == "binary_frame"
        assert (await command(socket, {"type": "ping"}))["type"] == "pong"
        assert await sync_to_async(provider().get_snapshot)(tree.session_id) == before
        assert not await sync_to_async(AgentRun.objects.exists)()
    finally:
        await socket.close()


async def test_errors_name_the_field_and_echo_the_request_id(tree, tokens, fresh_layer):
    socket = await opened(tree, tokens)
    try:
        reply = await command(socket, {"type": "prompt", "text": "", "requestId": "p1"})
        assert reply["requestId"] == "p1" and "text" in reply["fields"]
        reply = await command(socket, {"type": "switch_leaf", "entryId": "nope0000", "requestId": 9})
        assert reply["requestId"] == 9 and reply["code"] == "entry_not_found" and "entryId" in reply["fields"]
        reply = await command(socket, {"type": "regenerate", "entryId": tree.ids["a1"], "requestId": "r1"})  # an answer
        assert reply["requestId"] == "r1" and reply["code"] == "invalid" and "entryId" in reply["fields"], reply
    finally:
        await socket.close()


async def test_a_deleted_session_closes_its_sockets_at_the_next_heartbeat(tree, tokens, fresh_layer, settings):
    settings.NETA_WS_HEARTBEAT_SECONDS = 1
    socket = await opened(tree, tokens)
    try:
        client = await api(tokens.read_write)
        assert (await rest(client, "delete", f"/api/sessions/{tree.session_id}/")).status_code == 204
        frames = await socket.recv_until(lambda f: f["type"] == "__closed__", timeout=10)
        assert frames[-1]["code"] == 4404
        assert any(f.get("code") == "session_not_found" for f in frames)
    finally:
        await socket.close()


async def test_a_snapshot_over_the_frame_limit_is_refused_with_a_pointer_to_rest(tree, tokens, fresh_layer, settings):
    settings.NETA_WS_MAX_FRAME_BYTES = 2048  # the tree's snapshot is bigger than this
    socket = await opened(tree, tokens)
    try:
        reply = await command(socket, {"type": "subscribe", "requestId": 7})
        assert reply["type"] == "error" and reply["code"] == "snapshot_too_large" and reply["requestId"] == 7
        assert f"/api/sessions/{tree.session_id}/snapshot/" in reply["message"]
        # The way the page does it: the snapshot over HTTP, then subscribe from its revision.
        client = await api(tokens.read_write)
        snapshot = (await rest(client, "get", f"/api/sessions/{tree.session_id}/snapshot/")).json()
        reply = await command(socket, {"type": "subscribe", "sinceRevision": snapshot["revision"]})
        assert reply["type"] == "subscribed" and reply["revision"] == snapshot["revision"]
    finally:
        await socket.close()


async def test_the_heartbeats_check_reads_a_gap_in_the_same_call(tree, owner):
    """What the heartbeat runs in one database call: the rights, the revision, the run's
    state and, when the socket is behind, the events it missed (or the resync it needs)."""
    from runtime.gateway.consumers import Binding, _heartbeat_check
    from sessions_tree.errors import ResyncNeeded

    def check():
        meta = AgentSession.objects.get(session_id=tree.session_id)
        binding = Binding(session_id=tree.session_id, session_pk=meta.pk, user_pk=owner.pk, token_pk=None)
        current, _, gap = _heartbeat_check(binding, meta.revision - 2)
        assert current == meta.revision
        assert [e["revision"] for e in gap] == [meta.revision - 1, meta.revision]
        assert gap == provider().events_since(tree.session_id, meta.revision - 2)
        assert _heartbeat_check(binding, meta.revision)[2] is None  # not behind: nothing read
        assert _heartbeat_check(binding, None)[2] is None  # not subscribed: nothing read
        SessionEvent.objects.filter(session=meta, revision__lte=4).delete()
        assert isinstance(_heartbeat_check(binding, 1)[2], ResyncNeeded)

    await sync_to_async(check)()
