"""verify_action through the gateway (STYLE.md, after Zulip's test_events):

snapshot before (REST) → the action (a socket command or a REST call) → the
tree events the socket delivered → ``apply_events(before, events)`` equals a
snapshot fetched fresh afterwards. Runs execute for real: inline backend,
scripted model, the Channels publisher and stream sink installed by the app.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from sessions_tree.events import TREE_EVENT_TYPES, apply_events
from tests.support.rules import SLOW_TEXT
from tests.support.services import FIXTURES
from tests.support.sockets import Socket, api, command, rest, run_finished

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def is_tree_event(frame: dict) -> bool:
    return frame.get("type") in TREE_EVENT_TYPES


async def wait_for_revision(socket: Socket, revision: int, start: int = 0) -> None:
    """Until the socket has delivered the tree event of ``revision`` (it may already have)."""
    if any(is_tree_event(f) and f["revision"] >= revision for f in socket.frames[start:]):
        return
    await socket.recv_until(lambda f: is_tree_event(f) and f["revision"] >= revision)


class Verifier:
    def __init__(self, socket: Socket, client, session_id: str):
        self.socket, self.client, self.session_id = socket, client, session_id

    async def snapshot(self) -> dict:
        response = await rest(self.client, "get", f"/api/sessions/{self.session_id}/snapshot/")
        assert response.status_code == 200
        return response.json()

    async def __call__(self, action, *, run: bool = False, expect_events: bool = True):
        before = await self.snapshot()
        reply = await command(self.socket, {"type": "subscribe", "sinceRevision": before["revision"]})
        assert reply["type"] == "subscribed" and reply["revision"] == before["revision"]
        start = len(self.socket.frames)
        result = await action()
        if run:
            state = await run_finished(self.socket)
            result = (result, state)
        after = await self.snapshot()
        if after["revision"] > before["revision"]:
            await wait_for_revision(self.socket, after["revision"], start)
        frames = self.socket.frames[start:]
        events = [f for f in frames if is_tree_event(f)]
        assert [e["revision"] for e in events] == list(range(before["revision"] + 1, after["revision"] + 1))
        assert bool(events) is expect_events
        assert apply_events(before, events) == after
        return result, events, frames, after


async def setup(tree, tokens, owner):
    socket = await Socket.connect(tree.session_id, token=tokens.read_write)
    assert (await socket.recv())["type"] == "hello"
    client = await api(owner)
    return socket, client, Verifier(socket, client, tree.session_id)


def streamed_text(frames: list[dict], entry_id: str) -> str:
    return "".join(
        f["delta"] for f in frames if f.get("type") == "assistant_stream_delta" and f["entryId"] == entry_id and f["kind"] == "text"
    )


def final_text(entry: dict) -> str:
    return "".join(b.get("text", "") for b in entry["message"]["content"] if b.get("type") == "text")


async def test_prompt_over_the_socket(tree, tokens, owner, fresh_layer):
    socket, client, verify = await setup(tree, tokens, owner)
    try:
        async def prompt():
            return await command(socket, {"type": "prompt", "text": "what is here?"})

        (ack, state), events, frames, after = await verify(prompt, run=True)
        assert ack["type"] == "ack" and ack["result"]["queuedAs"] is None and state["state"] == "completed"
        kinds = [(e["type"], e.get("inFlight")) for e in events]
        assert kinds[0] == ("session_entry_added", None)  # the user entry
        assert ("session_entry_added", True) in kinds and kinds[-1] == ("session_entry_updated", False)
        reply = events[-1]["entry"]
        assert final_text(reply) == "You said: what is here?"
        # The streamed deltas add up to the stored text.
        assert streamed_text(frames, reply["id"]) == final_text(reply)
        assert after["leafId"] == reply["id"] and after["inFlight"] is None
    finally:
        await socket.close()


async def test_a_tool_round_over_the_socket(tree, tokens, owner, fresh_layer):
    socket, client, verify = await setup(tree, tokens, owner)
    try:
        async def prompt():
            return await command(socket, {"type": "prompt", "text": "please use a tool"})

        (_, state), events, frames, after = await verify(prompt, run=True)
        assert state["state"] == "completed"
        roles = [e["entry"]["message"]["role"] for e in events if e.get("inFlight") is False or e["type"] == "session_entry_added" and not e.get("inFlight")]
        assert roles == ["user", "assistant", "toolResult", "assistant"]
        assert any(f["type"] == "tool_call_completed" and f["toolCall"]["name"] == "ls" for f in frames)
    finally:
        await socket.close()


async def test_abort_over_the_socket(tree, tokens, owner, fresh_layer):
    socket, client, verify = await setup(tree, tokens, owner)
    try:
        async def prompt_then_abort():
            await command(socket, {"type": "prompt", "text": "talk slowly"})
            await socket.recv_until(lambda f: f.get("type") == "assistant_stream_delta")
            return await command(socket, {"type": "abort"})

        (ack, state), events, frames, after = await verify(prompt_then_abort, run=True)
        assert ack["type"] == "ack" and state["state"] == "aborted"
        final = events[-1]["entry"]["message"]
        assert final["stopReason"] == "aborted"
        assert 0 < len(final_text(events[-1]["entry"])) < len(SLOW_TEXT)
    finally:
        await socket.close()


async def test_switch_leaf_without_summary_over_the_socket(tree, tokens, owner, fresh_layer):
    socket, client, verify = await setup(tree, tokens, owner)
    try:
        async def switch():
            return await command(socket, {"type": "switch_leaf", "entryId": tree.ids["u2"]})

        ack, events, _, after = await verify(switch)
        # A user message as target: the leaf goes to its parent, its text back to the editor.
        assert ack["result"] == {"leafId": tree.ids["a1"], "editorText": "second question", "summaryEntryId": None}
        assert [e["type"] for e in events] == ["session_leaf_changed"] and after["leafId"] == tree.ids["a1"]
    finally:
        await socket.close()


async def test_switch_leaf_with_summary_over_the_socket(tree, tokens, owner, fresh_layer):
    socket, client, verify = await setup(tree, tokens, owner)
    try:
        async def switch():
            return await command(socket, {"type": "switch_leaf", "entryId": tree.ids["a2"], "summarize": True})

        ack, events, _, after = await verify(switch)
        assert [e["type"] for e in events] == ["session_branch_summary_added"]
        summary = events[0]["entry"]
        assert ack["result"]["summaryEntryId"] == summary["id"] == after["leafId"]
        assert summary["parentId"] == tree.ids["a2"] and "summarized" in summary["summary"]
    finally:
        await socket.close()


async def test_label_over_rest(tree, tokens, owner, fresh_layer):
    socket, client, verify = await setup(tree, tokens, owner)
    try:
        async def label():
            return await rest(client, "post", f"/api/sessions/{tree.session_id}/labels/", {"entryId": tree.ids["a1"], "label": "fork point"})

        response, events, _, after = await verify(label)
        assert response.status_code == 201
        assert after["labelsByEntryId"] == {tree.ids["a1"]: "fork point"}
    finally:
        await socket.close()


async def test_compact_over_rest(tree, tokens, owner, agent, fresh_layer):
    agent.compaction_keep_recent_tokens = 1
    await sync_to_async(agent.save)()
    socket, client, verify = await setup(tree, tokens, owner)
    try:
        async def compact():
            return await rest(client, "post", f"/api/sessions/{tree.session_id}/compact/", {"instructions": "keep it short"})

        response, events, _, after = await verify(compact)
        assert response.status_code == 201, response.content
        assert [e["type"] for e in events] == ["session_compaction_added"]
        assert after["leafId"] == response.json()["entry"]["id"]
    finally:
        await socket.close()


async def test_fork_over_rest(tree, tokens, owner, fresh_layer):
    socket, client, verify = await setup(tree, tokens, owner)
    try:
        async def fork():
            return await rest(client, "post", f"/api/sessions/{tree.session_id}/fork/", {"entryId": tree.ids["a2"]})

        # Forking changes nothing in the source session: no events, same snapshot.
        response, _, _, _ = await verify(fork, expect_events=False)
        assert response.status_code == 201
        fork_id = response.json()["sessionId"]
        # The fork is a session of its own: its socket snapshot equals its REST snapshot,
        # and actions on it verify the same way.
        fork_socket = await Socket.connect(fork_id, token=tokens.read_write)
        try:
            assert (await fork_socket.recv())["type"] == "hello"
            await fork_socket.send({"type": "subscribe", "sinceRevision": None})
            snapshot = (await fork_socket.recv())["snapshot"]
            assert snapshot == (await rest(client, "get", f"/api/sessions/{fork_id}/snapshot/")).json()
            ids = tree.ids
            assert snapshot["activePath"][-4:] == [ids["u1"], ids["a1"], ids["u2"], ids["a2"]] and snapshot["leafId"] == ids["a2"]
            verify_fork = Verifier(fork_socket, client, fork_id)

            async def switch():
                return await command(fork_socket, {"type": "switch_leaf", "entryId": tree.ids["a1"]})

            ack, events, _, after = await verify_fork(switch)
            assert ack["type"] == "ack", ack
            assert after["leafId"] == tree.ids["a1"]
        finally:
            await fork_socket.close()
    finally:
        await socket.close()


async def test_import_over_rest(owner, tokens, agent, fresh_layer):
    client = await api(owner)
    with (FIXTURES / "02-branches.jsonl").open("rb") as fh:
        response = await rest(client, "post", "/api/sessions/import/", {"file": fh}, format="multipart")
    assert response.status_code == 201, response.content
    session_id = response.json()["sessionId"]
    socket = await Socket.connect(session_id, token=tokens.read_write)
    try:
        assert (await socket.recv())["type"] == "hello"
        await socket.send({"type": "subscribe"})
        snapshot = (await socket.recv())["snapshot"]
        assert snapshot == (await rest(client, "get", f"/api/sessions/{session_id}/snapshot/")).json()
        # The imported tree takes new work like any other session.
        verify = Verifier(socket, client, session_id)

        async def prompt():
            return await command(socket, {"type": "prompt", "text": "continue"})

        (_, state), events, _, _ = await verify(prompt, run=True)
        assert state["state"] == "completed" and events[0]["entry"]["parentId"] == snapshot["leafId"]
    finally:
        await socket.close()


async def test_a_dropped_socket_resumes_without_loss(tree, tokens, owner, fresh_layer):
    """The client drops mid-stream, reconnects with the last revision it saw, and
    ends with every tree event exactly once and the full text."""
    client = await api(owner)
    before = (await rest(client, "get", f"/api/sessions/{tree.session_id}/snapshot/")).json()
    first = await Socket.connect(tree.session_id, token=tokens.read_write)
    await first.recv()
    await command(first, {"type": "subscribe", "sinceRevision": before["revision"]})
    response = await rest(client, "post", f"/api/sessions/{tree.session_id}/prompt/", {"text": "answer slowly"})
    assert response.status_code == 202
    await first.recv_until(lambda f: f.get("type") == "assistant_stream_delta")
    await first.close()  # dropped mid-stream
    seen = first.tree_events()
    last = seen[-1]["revision"]
    assert any(e.get("inFlight") for e in seen), "the in-flight entry was announced before the drop"

    second = await Socket.connect(tree.session_id, token=tokens.read_write)
    try:
        await second.recv()
        reply = await command(second, {"type": "subscribe", "sinceRevision": last})
        assert reply["type"] == "subscribed"
        await run_finished(second)
        after = (await rest(client, "get", f"/api/sessions/{tree.session_id}/snapshot/")).json()
        await wait_for_revision(second, after["revision"])
        events = seen + second.tree_events()
        assert [e["revision"] for e in events] == list(range(before["revision"] + 1, after["revision"] + 1))
        assert apply_events(before, events) == after
        assert final_text(events[-1]["entry"]) == SLOW_TEXT
    finally:
        await second.close()
