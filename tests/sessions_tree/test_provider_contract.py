"""The provider contract (docs/sessions.md), run against every provider.

The same scenarios run on the file provider, the mysql provider on SQLite and the
mysql provider on the real MariaDB server (fixture ``provider``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from sessions_tree import jsonl
from sessions_tree.errors import (
    EntryNotFound,
    InvalidEntry,
    SessionBusy,
    SessionNotFound,
)
from sessions_tree.ids import iso_to_ms
from sessions_tree.models import AgentSession, SessionEntry
from sessions_tree.providers.base import ROOT
from tests.support.services import REPO
from tests.support.entries import assistant_message, forget_process_caches, user_message

pytestmark = pytest.mark.django_db(databases="__all__")


def ids(entries):
    return [e["id"] for e in entries]


def roles(ctx):
    return [m["role"] for m in ctx.messages]


def session_with_an_abandoned_branch(provider, question: str, answer: str):
    """A session whose leaf is back on ``answer`` after a user message that went nowhere:
    (session id, the question's entry, the answer's entry)."""
    sid = provider.create_session(cwd="/w").session_id
    u1 = provider.append_message(sid, user_message(question))
    a1 = provider.append_message(sid, assistant_message(answer))
    provider.append_message(sid, user_message("abandoned"))
    provider.switch_leaf(sid, a1["id"])
    return sid, u1, a1


def test_create_append_and_leaf(provider):
    meta = provider.create_session(cwd="/home/u/proj")
    assert meta.session_id and meta.leaf_entry_id is None
    assert provider.build_context(meta.session_id).messages == []

    first = provider.append_message(meta.session_id, user_message("hello"))
    assert first["type"] == "message" and first["parentId"] is None
    assert len(first["id"]) == 8 and int(first["id"], 16) >= 0
    second = provider.append_message(meta.session_id, assistant_message("hi there"))
    assert second["parentId"] == first["id"]

    meta = provider.get_session(meta.session_id)
    assert meta.leaf_entry_id == second["id"]
    assert meta.root_entry_id == first["id"]
    assert meta.entry_count == 2 and meta.message_count == 2 and meta.tip_count == 1
    assert meta.revision == 2
    assert ids(provider.list_entries(meta.session_id)) == [first["id"], second["id"]]
    assert ids(provider.get_active_path(meta.session_id)) == [first["id"], second["id"]]

    ctx = provider.build_context(meta.session_id)
    assert roles(ctx) == ["user", "assistant"]
    assert ctx.source_entry_ids == [first["id"], second["id"]]
    assert ctx.model == {"provider": "anthropic", "modelId": "claude-test"}
    assert ctx.thinking_level == "off"


def test_entries_are_stored_losslessly(provider):
    meta = provider.create_session(cwd="/w")
    odd = {
        "type": "neta_experiment",
        "weird": {"b": 1, "a": [1.5, -0.0, 1e-7, 5.0, "ü 🎉"]},
        "zeta": None,
        "alpha": True,
    }
    stored = provider.append_entry(meta.session_id, odd)
    assert list(stored)[:4] == ["type", "id", "parentId", "timestamp"]
    assert list(stored)[4:] == ["weird", "zeta", "alpha"]
    forget_process_caches()
    again = provider.list_entries(meta.session_id)[0]
    assert again == stored
    line = "".join(provider.export_lines(meta.session_id)).splitlines()[1]
    assert line == jsonl.dumps(stored)
    assert '"a":[1.5,0,1e-7,5,"ü 🎉"]' in line
    # Unknown types are transparent to the context but sit on the path.
    assert provider.build_context(meta.session_id).messages == []
    assert ids(provider.get_active_path(meta.session_id)) == [stored["id"]]


def test_append_entry_rejects_bad_input_without_writing(provider):
    meta = provider.create_session(cwd="/w")
    for bad in ({}, {"type": ""}, {"type": "session"}, "text", {"type": "x", "id": ""}):
        with pytest.raises(InvalidEntry):
            provider.append_entry(meta.session_id, bad)
    with pytest.raises(InvalidEntry):
        provider.append_message(meta.session_id, {"content": "no role"})
    assert provider.list_entries(meta.session_id) == []
    assert provider.get_session(meta.session_id).revision == 0
    with pytest.raises(SessionNotFound):
        provider.append_message("no-such-session", user_message("x"))


def test_branching_keeps_siblings(provider):
    meta = provider.create_session(cwd="/w")
    sid = meta.session_id
    u1 = provider.append_message(sid, user_message("one"))
    a1 = provider.append_message(sid, assistant_message("answer one"))
    u2 = provider.append_message(sid, user_message("two"))
    provider.append_message(sid, assistant_message("answer two"))

    provider.switch_leaf(sid, a1["id"])
    u2b = provider.append_message(sid, user_message("two, differently"))
    a2b = provider.append_message(sid, assistant_message("answer two b"))

    entries = provider.list_entries(sid)
    assert len(entries) == 6
    children_of_a1 = [e["id"] for e in entries if e["parentId"] == a1["id"]]
    assert children_of_a1 == [u2["id"], u2b["id"]]
    assert ids(provider.get_active_path(sid)) == [u1["id"], a1["id"], u2b["id"], a2b["id"]]
    assert [m["content"][0]["text"] for m in provider.build_context(sid).messages] == [
        "one",
        "answer one",
        "two, differently",
        "answer two b",
    ]
    # The old branch is still there and can be made active again.
    old_leaf = [e for e in entries if e["parentId"] == u2["id"]][0]
    provider.switch_leaf(sid, old_leaf["id"])
    assert provider.build_context(sid).messages[-1]["content"][0]["text"] == "answer two"
    assert provider.get_session(sid).tip_count == 2
    # Context at an explicit leaf does not move the persisted leaf.
    assert len(provider.build_context(sid, u1["id"]).messages) == 1
    assert provider.build_context(sid, ROOT).messages == [] and provider.get_active_path(sid, ROOT) == []
    assert len(provider.build_context(sid, None).messages) == 4  # None: the persisted leaf
    assert provider.get_session(sid).leaf_entry_id == old_leaf["id"]
    with pytest.raises(EntryNotFound):
        provider.switch_leaf(sid, "deadbeef")
    with pytest.raises(EntryNotFound):
        provider.build_context(sid, "deadbeef")


def test_branch_summary_is_pis_branch_with_summary(provider):
    sid = provider.create_session(cwd="/w").session_id
    u1 = provider.append_message(sid, user_message("start"))
    a1 = provider.append_message(sid, assistant_message("ok"))
    provider.append_message(sid, user_message("explore"))
    summary = provider.append_branch_summary(sid, from_entry_id=a1["id"], summary="We explored X.", details={"readFiles": [], "modifiedFiles": []}, from_hook=False)
    assert summary["parentId"] == a1["id"] and summary["fromId"] == a1["id"]
    assert list(summary) == ["type", "id", "parentId", "timestamp", "fromId", "summary", "details", "fromHook"]
    meta = provider.get_session(sid)
    assert meta.leaf_entry_id == summary["id"] and meta.branch_summary_count == 1
    ctx = provider.build_context(sid)
    assert roles(ctx) == ["user", "assistant", "branchSummary"]
    assert ctx.messages[-1]["summary"] == "We explored X."
    assert ctx.source_entry_ids == [u1["id"], a1["id"], summary["id"]]

    at_root = provider.append_branch_summary(sid, from_entry_id=None, summary="from the top")
    assert at_root["parentId"] is None and at_root["fromId"] == "root"
    assert roles(provider.build_context(sid)) == ["branchSummary"]
    with pytest.raises(EntryNotFound):
        provider.append_branch_summary(sid, from_entry_id="nope0000", summary="x")


def test_compaction_context(provider):
    sid = provider.create_session(cwd="/w").session_id
    provider.append_message(sid, user_message("old question"))
    provider.append_message(sid, assistant_message("old answer"))
    kept = provider.append_message(sid, user_message("kept question"))
    provider.append_message(sid, assistant_message("kept answer"))
    compaction = provider.append_compaction(sid, summary="## Goal\nstuff", first_kept_entry_id=kept["id"], tokens_before=1234, details={"readFiles": ["a.py"], "modifiedFiles": []}, from_hook=False)
    assert list(compaction) == ["type", "id", "parentId", "timestamp", "summary", "firstKeptEntryId", "tokensBefore", "details", "fromHook"]
    after = provider.append_message(sid, user_message("new question"))
    ctx = provider.build_context(sid)
    assert roles(ctx) == ["compactionSummary", "user", "assistant", "user"]
    assert ctx.messages[0]["tokensBefore"] == 1234
    assert ctx.source_entry_ids[0] == compaction["id"]
    assert ctx.source_entry_ids[1] == kept["id"] and ctx.source_entry_ids[-1] == after["id"]
    assert provider.get_session(sid).compaction_count == 1


def test_labels_set_change_clear(provider):
    sid = provider.create_session(cwd="/w").session_id
    u1 = provider.append_message(sid, user_message("a"))
    a1 = provider.append_message(sid, assistant_message("b"))
    label = provider.append_label_change(sid, target_id=u1["id"], label="start")
    assert label["targetId"] == u1["id"] and label["label"] == "start" and label["parentId"] == a1["id"]
    assert provider.get_session(sid).leaf_entry_id == label["id"]  # labels are tree nodes (Pi)
    provider.append_label_change(sid, target_id=a1["id"], label="answer")
    provider.append_label_change(sid, target_id=u1["id"], label="beginning")
    assert provider.get_snapshot(sid)["labelsByEntryId"] == {u1["id"]: "beginning", a1["id"]: "answer"}
    cleared = provider.append_label_change(sid, target_id=u1["id"], label=None)
    assert "label" not in cleared
    assert provider.get_snapshot(sid)["labelsByEntryId"] == {a1["id"]: "answer"}
    with pytest.raises(EntryNotFound):
        provider.append_label_change(sid, target_id="00000000", label="x")
    # Labels add nothing to the context.
    assert roles(provider.build_context(sid)) == ["user", "assistant"]


def test_reset_leaf_starts_a_new_root(provider):
    sid = provider.create_session(cwd="/w").session_id
    first = provider.append_message(sid, user_message("a"))
    provider.reset_leaf(sid)
    assert provider.get_session(sid).leaf_entry_id is None
    assert provider.build_context(sid).messages == []
    assert provider.build_context(sid).model is None
    second_root = provider.append_message(sid, user_message("b"))
    assert second_root["parentId"] is None
    assert provider.get_session(sid).tip_count == 2
    assert ids(provider.get_active_path(sid)) == [second_root["id"]]
    assert provider.get_session(sid).root_entry_id == first["id"]


def test_settings_entries_and_session_info(provider):
    sid = provider.create_session(cwd="/w").session_id
    provider.append_model_change(sid, provider="openai", model_id="gpt-test")
    provider.append_thinking_level_change(sid, "high")
    info = provider.append_session_info(sid, name="  My session  ")
    assert info["name"] == "My session"
    ctx = provider.build_context(sid)
    assert ctx.messages == [] and ctx.thinking_level == "high"
    assert ctx.model == {"provider": "openai", "modelId": "gpt-test"}
    assert provider.get_session(sid).title == "My session"
    custom = provider.append_custom_entry(sid, custom_type="ext-state", data={"k": 1})
    assert list(custom) == ["type", "customType", "data", "id", "parentId", "timestamp"]
    cm = provider.append_custom_message(sid, custom_type="note", content="remember", display=True)
    assert list(cm)[:5] == ["type", "customType", "content", "display", "id"]
    ctx = provider.build_context(sid)
    assert ctx.messages == [
        {"role": "custom", "customType": "note", "content": "remember", "display": True, "timestamp": iso_to_ms(cm["timestamp"])}
    ]
    assert ctx.source_entry_ids == [cm["id"]]


def test_subagent_entries_are_stored_and_ignored_by_context(provider):
    sid = provider.create_session(cwd="/w").session_id
    provider.append_message(sid, user_message("delegate"))
    batch = provider.append_subagent_batch(sid, batch_id="b1", mode="parallel", runs=[{"runId": "r1", "agent": "scout", "task": "look"}])
    result = provider.append_subagent_result(sid, batch_id="b1", run_id="r1", agent="scout", status="completed", content=[{"type": "text", "text": "found it"}])
    assert batch["type"] == "subagent_batch" and result["type"] == "subagent_result"
    assert result["parentId"] == batch["id"]
    assert roles(provider.build_context(sid)) == ["user"]
    snapshot = provider.get_snapshot(sid)
    assert snapshot["activePath"][-2:] == [batch["id"], result["id"]]
    assert [e["type"] for e in snapshot["entries"]][-2:] == ["subagent_batch", "subagent_result"]


def test_in_flight_entry_lifecycle(provider):
    sid = provider.create_session(cwd="/w").session_id
    user = provider.append_message(sid, user_message("stream please"))
    file_size = Path(provider.get_session(sid).session_file).stat().st_size if provider.kind == "file" else None

    entry = provider.begin_in_flight(sid, assistant_message("", stop_reason="stop"))
    assert entry["parentId"] == user["id"]
    meta = provider.get_session(sid)
    assert meta.leaf_entry_id == entry["id"] and meta.in_flight_entry_id == entry["id"]
    for text in ("Hel", "Hello", "Hello, world"):
        provider.update_in_flight_entry(sid, entry["id"], assistant_message(text))
    # Streaming never rewrites (or grows) the file.
    if file_size is not None:
        assert Path(meta.session_file).stat().st_size == file_size
    assert provider.get_in_flight(sid)["message"]["content"][0]["text"] == "Hello, world"
    snapshot = provider.get_snapshot(sid)
    assert snapshot["inFlight"]["id"] == entry["id"]
    assert snapshot["activePath"] == [user["id"], entry["id"]]
    assert ids(provider.list_entries(sid)) == [user["id"]]
    assert roles(provider.build_context(sid)) == ["user", "assistant"]

    with pytest.raises(SessionBusy):
        provider.append_message(sid, user_message("not now"))
    with pytest.raises(EntryNotFound):
        provider.update_in_flight_entry(sid, "ffffffff", assistant_message("x"))

    final = provider.finalize_in_flight(sid, entry["id"], assistant_message("Hello, world!"))
    assert final["id"] == entry["id"] and final["message"]["content"][0]["text"] == "Hello, world!"
    meta = provider.get_session(sid)
    assert meta.in_flight_entry_id is None and meta.leaf_entry_id == entry["id"]
    assert ids(provider.list_entries(sid)) == [user["id"], entry["id"]]
    with pytest.raises(EntryNotFound):  # completed entries are immutable
        provider.update_in_flight_entry(sid, entry["id"], assistant_message("changed"))
    if provider.kind == "mysql":
        assert SessionEntry.objects.using(provider.using).get(session=meta, entry_id=entry["id"]).status == "completed"
    provider.append_message(sid, user_message("next"))


def test_crashed_in_flight_entry_is_finalized_as_aborted_later(provider):
    sid = provider.create_session(cwd="/w").session_id
    provider.append_message(sid, user_message("go"))
    entry = provider.begin_in_flight(sid, assistant_message(""))
    provider.update_in_flight_entry(sid, entry["id"], assistant_message("partial ans"))
    forget_process_caches()  # the process that streamed is gone
    final = provider.finalize_in_flight(sid, entry["id"], status="aborted")
    assert final["message"]["stopReason"] == "aborted"
    assert final["message"]["content"][0]["text"] == "partial ans"
    assert provider.list_entries(sid)[-1]["message"]["stopReason"] == "aborted"
    if provider.kind == "mysql":
        row = SessionEntry.objects.using(provider.using).get(session__session_id=sid, entry_id=entry["id"])
        assert row.status == "aborted"
    with pytest.raises(InvalidEntry):
        provider.finalize_in_flight(sid, entry["id"], status="weird")


def test_a_process_that_starts_while_an_entry_is_in_flight_reads_the_same_session(provider):
    sid, u1, a1 = session_with_an_abandoned_branch(provider, "first", "one")
    u2 = provider.append_message(sid, user_message("second"))
    entry = provider.begin_in_flight(sid, assistant_message(""))
    provider.update_in_flight_entry(sid, entry["id"], assistant_message("partial"))
    forget_process_caches()  # a new process: nothing of this session in memory
    assert roles(provider.build_context(sid)) == ["user", "assistant", "user", "assistant"]
    assert provider.build_context(sid).messages[-1]["content"][0]["text"] == "partial"
    assert ids(provider.get_active_path(sid)) == [u1["id"], a1["id"], u2["id"], entry["id"]]
    assert ids(provider.list_entries(sid))[-1] == u2["id"]  # not stored until finalized
    provider.finalize_in_flight(sid, entry["id"], assistant_message("complete"))
    assert provider.build_context(sid).messages[-1]["content"][0]["text"] == "complete"  # the same index, topped up
    assert ids(provider.list_entries(sid))[-1] == entry["id"]
    assert provider.build_context(sid, u1["id"]).messages == [u1["message"]]
    forget_process_caches()
    assert provider.build_context(sid).messages[-1]["content"][0]["text"] == "complete"
    assert len(provider.list_entries(sid)) == 5


def test_create_branched_session(provider):
    sid = provider.create_session(cwd="/home/u/proj").session_id
    u1 = provider.append_message(sid, user_message("one"))
    a1 = provider.append_message(sid, assistant_message("two"))
    label = provider.append_label_change(sid, target_id=u1["id"], label="first")
    u2 = provider.append_message(sid, user_message("three"))
    provider.switch_leaf(sid, a1["id"])
    provider.append_message(sid, user_message("other branch"))
    provider.append_label_change(sid, target_id=a1["id"], label="reply")

    fork = provider.create_branched_session(sid, u2["id"])
    assert fork.session_id != sid and fork.parent_session_id == sid
    header = json.loads(fork.header)
    assert header["type"] == "session" and header["version"] == 3 and header["cwd"] == "/home/u/proj"
    assert header["parentSession"] == (provider.get_session(sid).session_file or sid)
    entries = provider.list_entries(fork.session_id)
    copied = [e for e in entries if e["type"] != "label"]
    assert ids(copied) == [u1["id"], a1["id"], u2["id"]]
    # The label entry on the path is left out with its child re-parented: no dangling parent.
    assert copied[2]["parentId"] == a1["id"]
    known = {e["id"] for e in entries}
    assert all(e["parentId"] is None or e["parentId"] in known for e in entries)
    labels = [e for e in entries if e["type"] == "label"]
    assert [(l["targetId"], l["label"]) for l in labels] == [(u1["id"], "first"), (a1["id"], "reply")]
    assert labels[0]["timestamp"] == label["timestamp"]
    assert fork.leaf_entry_id == labels[-1]["id"]
    assert [m["content"][0]["text"] for m in provider.build_context(fork.session_id).messages] == ["one", "two", "three"]
    # The source is untouched.
    assert len(provider.list_entries(sid)) == 6
    with pytest.raises(EntryNotFound):
        provider.create_branched_session(sid, "abcdef01")


def test_delete_session(provider):
    meta = provider.create_session(cwd="/w")
    provider.append_message(meta.session_id, user_message("bye"))
    meta = provider.get_session(meta.session_id)
    provider.delete_session(meta.session_id)
    with pytest.raises(SessionNotFound):
        provider.get_session(meta.session_id)
    assert not AgentSession.objects.using(provider.using).filter(session_id=meta.session_id).exists()
    if provider.kind == "file":
        assert not Path(meta.session_file).exists()
    else:
        assert not SessionEntry.objects.using(provider.using).filter(session_id=meta.pk).exists()


def test_snapshot_shape(provider):
    sid = provider.create_session(cwd="/w").session_id
    u1 = provider.append_message(sid, user_message("a"))
    a1 = provider.append_message(sid, assistant_message("b"))
    snapshot = provider.get_snapshot(sid)
    assert snapshot["revision"] == 2 and snapshot["leafId"] == a1["id"]
    assert snapshot["activePath"] == [u1["id"], a1["id"]]
    assert snapshot["childrenByParentId"] == {"root": [u1["id"]], u1["id"]: [a1["id"]]}
    assert snapshot["inFlight"] is None
    assert snapshot["runtimeContext"]["model"] == {"provider": "anthropic", "modelId": "claude-test"}
    assert snapshot["runtimeContext"]["tokenEstimate"] == 15
    assert snapshot["page"] == {
        "totalEntries": 2,
        "includedEntries": 2,
        "truncated": False,
        "activePathLength": 2,
        "activePathTruncated": False,
        "limit": settings.NETA_SNAPSHOT_ENTRY_LIMIT,
    }
    json.dumps(snapshot)  # plain JSON


def test_snapshot_of_a_large_session_is_trimmed_and_says_so(provider):
    sid = provider.create_session(cwd="/w").session_id
    made = [provider.append_message(sid, user_message(f"m{i}")) for i in range(30)]
    provider.switch_leaf(sid, made[3]["id"])
    snapshot = provider.get_snapshot(sid, entry_limit=10)
    page = snapshot["page"]
    assert page["totalEntries"] == 30 and page["truncated"] is True
    included = ids(snapshot["entries"])
    assert included[-10:] == ids(made[-10:])
    assert all(i in included for i in snapshot["activePath"])  # the active path is always shipped
    assert page["includedEntries"] == len(included) == 14


def _run_in_new_process(provider, session_id: str) -> dict:
    """Build the context in a fresh Python process that reads only what is stored."""
    db = settings.DATABASES[provider.using]
    if "sqlite" in db["ENGINE"]:
        url = f"sqlite:///{db['NAME']}"
    else:
        url = f"mysql://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = {**os.environ, "NETA_DATABASE_URL": url, "NETA_SESSIONS_DIR": str(settings.NETA_SESSIONS_DIR)}
    env.pop("NETA_TEST_MYSQL_URL", None)
    code = (
        "import django, json, sys; django.setup();"
        "from sessions_tree.providers import get_provider;"
        f"p = get_provider({provider.kind!r});"
        f"m = p.get_session({session_id!r}); c = p.build_context({session_id!r});"
        "print(json.dumps({'leaf': m.leaf_entry_id, 'ids': list(c.source_entry_ids), 'messages': list(c.messages)}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_leaf_and_contents_survive_a_new_process(provider):
    sid, u1, a1 = session_with_an_abandoned_branch(provider, "persist me ✓", "done")
    seen = _run_in_new_process(provider, sid)
    assert seen["leaf"] == a1["id"]
    assert seen["ids"] == [u1["id"], a1["id"]]
    assert seen["messages"] == provider.build_context(sid).messages
