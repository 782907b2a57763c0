"""A ``subagent_batch`` entry as the in-flight entry (the subagent host's dispatch), on every
provider: open, checkpoint, finalize with fields, abandon (the reaper), bad input refused."""

from __future__ import annotations

import pytest

from sessions_tree.errors import EntryNotFound, InvalidEntry, SessionBusy
from sessions_tree.jsonl import dumps
from tests.support.entries import assistant_message, user_message

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

RUNS = [{"runId": "r1", "taskIndex": 0, "agent": "scout", "task": "look", "status": "queued"}]


def _open(provider):
    sid = provider.create_session(cwd="/w").session_id
    provider.append_message(sid, user_message("delegate please"))
    call = provider.append_message(sid, assistant_message("", tool_calls=[("c1", "delegate_task", {"agent": "scout", "task": "look"})], stop_reason="toolUse"))
    batch = provider.begin_in_flight_batch(sid, batch_id="b1", mode="single", runs=RUNS, metadata={"state": "running"})
    return sid, call, batch


def test_batch_lifecycle(provider):
    sid, call, batch = _open(provider)
    assert batch["type"] == "subagent_batch" and batch["parentId"] == call["id"] and batch["batchId"] == "b1"
    meta = provider.get_session(sid)
    assert meta.in_flight_entry_id == batch["id"] == meta.leaf_entry_id
    assert provider.get_snapshot(sid)["inFlight"]["runs"] == RUNS
    with pytest.raises(SessionBusy):
        provider.append_message(sid, user_message("not now"))
    running = [{**RUNS[0], "status": "running"}]
    provider.update_in_flight_fields(sid, batch["id"], {"runs": running})
    assert provider.get_in_flight(sid)["runs"] == running
    final = provider.finalize_in_flight(sid, batch["id"], fields={"runs": running, "metadata": {"state": "finished", "finalResults": []}})
    assert final["metadata"] == {"state": "finished", "finalResults": []} and final["id"] == batch["id"]
    result = provider.append_subagent_result(
        sid, batch_id="b1", run_id="r1", agent="scout", status="completed", content={"results": [{"finalText": "found"}]},
        metadata={"processEvents": []},
    )  # fmt: skip
    provider.append_message(sid, {"role": "toolResult", "toolCallId": "c1", "toolName": "delegate_task", "content": [{"type": "text", "text": "found"}], "isError": False, "timestamp": 1})
    stored = provider.list_entries(sid)
    assert [e["type"] for e in stored][-4:] == ["message", "subagent_batch", "subagent_result", "message"]
    assert stored[-2] == result and dumps(stored[-3]) == dumps(final)  # stored as returned, key order kept
    # Pi's context rule: the two Neta entries add nothing; the call meets its result.
    assert [m["role"] for m in provider.build_context(sid).messages] == ["user", "assistant", "toolResult"]


def test_an_abandoned_batch_is_stored_from_its_checkpoint(provider):
    sid, _, batch = _open(provider)
    provider.update_in_flight_fields(sid, batch["id"], {"runs": [{**RUNS[0], "status": "running"}]})
    final = provider.finalize_in_flight(sid, batch["id"], status="aborted")  # what the reaper does
    assert final["runs"][0]["status"] == "running" and provider.get_session(sid).in_flight_entry_id is None


def test_bad_batch_updates_are_refused(provider):
    sid, _, batch = _open(provider)
    with pytest.raises(InvalidEntry):
        provider.update_in_flight_fields(sid, batch["id"], {"id": "deadbeef"})
    with pytest.raises(InvalidEntry):
        provider.finalize_in_flight(sid, batch["id"], assistant_message("a message for a batch"))
    with pytest.raises(EntryNotFound):
        provider.update_in_flight_fields(sid, "ffffffff", {"runs": []})
    assert provider.get_in_flight(sid)["runs"] == RUNS  # nothing changed
    provider.finalize_in_flight(sid, batch["id"])
    message = provider.begin_in_flight(sid, assistant_message(""))
    with pytest.raises(InvalidEntry):
        provider.update_in_flight_fields(sid, message["id"], {"runs": []})
    with pytest.raises(InvalidEntry):
        provider.finalize_in_flight(sid, message["id"], fields={"runs": []})
