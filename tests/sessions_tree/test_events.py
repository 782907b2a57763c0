"""verify_action: snapshot before + the events an action publishes == snapshot after.

Every operation of the provider contract is checked on every provider, with the
events captured from the publisher (after commit) and, independently, read back
from the event log.
"""

from __future__ import annotations

import copy

import pytest

from sessions_tree import events as ev
from sessions_tree import tree_events
from sessions_tree.errors import ResyncNeeded
from sessions_tree.events import RevisionGap, apply_event, apply_events
from tests.support.entries import assistant_message, tool_result, user_message

pytestmark = pytest.mark.django_db(databases="__all__")


@pytest.fixture
def published():
    seen: list[tuple[str, dict]] = []

    def publisher(session_id, event):
        seen.append((session_id, event))

    ev.add_publisher(publisher)
    yield seen
    ev.remove_publisher(publisher)


def verify_action(provider, session_id, action, published, django_capture_on_commit_callbacks):
    before = provider.get_snapshot(session_id)
    frozen = copy.deepcopy(before)
    published.clear()
    with django_capture_on_commit_callbacks(using=provider.using, execute=True):
        result = action()
    events = [e for sid, e in published if sid == session_id]
    assert events, "the action published no event"
    assert [e["revision"] for e in events] == list(range(before["revision"] + 1, before["revision"] + 1 + len(events)))
    assert all(e["type"] in ev.TREE_EVENT_TYPES for e in events)
    # Each event has exactly the keys its declaration names (sessions_tree/tree_events.py).
    assert [tree_events.shape_errors(e) for e in events] == [[] for _ in events]
    after = provider.get_snapshot(session_id)
    assert apply_events(before, events) == after
    assert before == frozen, "apply_event modified its input"
    # The event log holds the same events, for gap filling.
    assert provider.events_since(session_id, before["revision"]) == events
    return result, events


def test_every_operation_verifies(provider, published, django_capture_on_commit_callbacks):
    sid = provider.create_session(cwd="/w").session_id

    def check(action):
        return verify_action(provider, sid, action, published, django_capture_on_commit_callbacks)

    u1, events = check(lambda: provider.append_message(sid, user_message("hi")))
    assert [e["type"] for e in events] == [ev.ENTRY_ADDED]
    check(lambda: provider.append_model_change(sid, provider="openai", model_id="gpt-x"))
    check(lambda: provider.append_thinking_level_change(sid, "medium"))
    a1, _ = check(lambda: provider.append_message(sid, assistant_message("", tool_calls=[("c1", "read", {"path": "a.py"})])))
    check(lambda: provider.append_message(sid, tool_result("c1", "read", "print(1)")))
    label, _ = check(lambda: provider.append_label_change(sid, target_id=u1["id"], label="start"))
    check(lambda: provider.append_label_change(sid, target_id=u1["id"], label=None))
    check(lambda: provider.append_session_info(sid, name="renamed"))
    assert provider.get_snapshot(sid)["session"]["title"] == "renamed"
    check(lambda: provider.append_custom_entry(sid, custom_type="state", data=[1, 2]))
    check(lambda: provider.append_custom_message(sid, custom_type="note", content=[{"type": "text", "text": "n"}], display=False))
    _, events = check(lambda: provider.switch_leaf(sid, a1["id"]))
    assert [e["type"] for e in events] == [ev.LEAF_CHANGED]
    summary, events = check(lambda: provider.append_branch_summary(sid, from_entry_id=u1["id"], summary="went elsewhere"))
    assert [e["type"] for e in events] == [ev.BRANCH_SUMMARY_ADDED]
    kept = provider.get_snapshot(sid)["activePath"][0]
    _, events = check(lambda: provider.append_compaction(sid, summary="sum", first_kept_entry_id=kept, tokens_before=99))
    assert [e["type"] for e in events] == [ev.COMPACTION_ADDED]
    check(lambda: provider.reset_leaf(sid))
    check(lambda: provider.append_message(sid, user_message("new root")))
    entry, events = check(lambda: provider.begin_in_flight(sid, assistant_message("")))
    assert events[0]["inFlight"] is True
    check(lambda: provider.update_in_flight_entry(sid, entry["id"], assistant_message("partial")))
    _, events = check(lambda: provider.finalize_in_flight(sid, entry["id"], assistant_message("final")))
    assert [e["type"] for e in events] == [ev.ENTRY_UPDATED] and events[0]["inFlight"] is False
    entry2 = provider.begin_in_flight(sid, assistant_message(""))
    check(lambda: provider.finalize_in_flight(sid, entry2["id"], status="aborted"))
    check(lambda: provider.append_subagent_batch(sid, batch_id="b", mode="single", runs=[]))
    check(lambda: provider.switch_leaf(sid, label["id"]))
    _, events = check(lambda: provider.update_session(sid, title="Renamed by hand", status="archived"))
    assert [e["type"] for e in events] == [ev.SESSION_UPDATED]
    assert events[0]["session"] == {"title": "Renamed by hand", "status": "archived"}
    revision = provider.get_session(sid).revision
    provider.update_session(sid, metadata={"k": 1})  # not in a snapshot: no revision, no event
    assert provider.get_session(sid).revision == revision


def test_events_carry_the_context_stats(provider, published, django_capture_on_commit_callbacks):
    sid = provider.create_session(cwd="/w").session_id
    provider.append_message(sid, user_message("x" * 40))
    _, events = verify_action(
        provider, sid, lambda: provider.append_message(sid, assistant_message("ok")), published, django_capture_on_commit_callbacks
    )
    assert events[0]["context"] == {
        "model": {"provider": "anthropic", "modelId": "claude-test"},
        "thinkingLevel": "off",
        "tokenEstimate": 15,
    }


def test_apply_ignores_old_events_and_detects_gaps(provider):
    sid = provider.create_session(cwd="/w").session_id
    before = provider.get_snapshot(sid)
    for i in range(3):
        provider.append_message(sid, user_message(str(i)))
    events = provider.events_since(sid, 0)
    assert [e["revision"] for e in events] == [1, 2, 3]
    after = apply_events(before, events)
    assert apply_event(after, events[0]) is after  # already applied: ignored
    with pytest.raises(RevisionGap):
        apply_event(before, events[1])
    assert provider.events_since(sid, 3) == []
    with pytest.raises(ResyncNeeded):
        provider.events_since(sid, 4)


def test_event_log_is_bounded_and_says_when_it_no_longer_reaches_back(provider, settings):
    settings.NETA_EVENT_LOG_SIZE = 10
    sid = provider.create_session(cwd="/w").session_id
    for i in range(140):
        provider.append_message(sid, user_message(str(i)))
    from sessions_tree.models import SessionEvent

    kept = SessionEvent.objects.using(provider.using).filter(session__session_id=sid).count()
    assert kept < 80  # pruned in steps, never unbounded
    with pytest.raises(ResyncNeeded):
        provider.events_since(sid, 1)
    recent = provider.events_since(sid, 135)
    assert [e["revision"] for e in recent] == [136, 137, 138, 139, 140]


def test_the_tree_event_constructors_keep_the_stored_key_order():
    """``SessionEvent.payload`` is the event's JSON: the keys keep the order they always had."""
    te = tree_events
    common = {"session_id": "s", "revision": 1}
    built = [
        te.entry_appended(**common, entry={"type": "message"}, leaf_id="a"),
        te.entry_appended(**common, entry={"type": "compaction"}, leaf_id="a", recovered=True),
        te.in_flight_added(**common, entry={}, leaf_id="a"),
        te.entry_updated(**common, entry={}, in_flight=False, recovered=True),
        te.leaf_changed(**common, leaf_id=None, previous_leaf_id="a"),
        te.session_updated(**common, session={"title": "t"}),
        te.session_deleted(session_id="s", session_pk=3),
    ]
    assert [(e["type"], list(e)) for e in built] == [
        (ev.ENTRY_ADDED, ["type", "sessionId", "revision", "entry", "leafId"]),
        (ev.COMPACTION_ADDED, ["type", "sessionId", "revision", "entry", "leafId", "recovered"]),
        (ev.ENTRY_ADDED, ["type", "sessionId", "revision", "entry", "leafId", "inFlight"]),
        (ev.ENTRY_UPDATED, ["type", "sessionId", "revision", "entry", "inFlight", "recovered"]),
        (ev.LEAF_CHANGED, ["type", "sessionId", "revision", "leafId", "previousLeafId"]),
        (ev.SESSION_UPDATED, ["type", "sessionId", "revision", "session"]),
        (ev.SESSION_DELETED, ["type", "sessionId", "sessionPk"]),
    ]


def test_a_commit_hands_its_rows_key_to_publishers_that_take_it(provider, django_capture_on_commit_callbacks):
    """The realtime publisher tags each tree event with the committing row's key; the commit
    passes it (no lookup per event), publishers that do not ask for it get the two arguments."""
    from sessions_tree.models import AgentSession

    keyed: list[tuple[str, int, int | None]] = []
    plain: list[tuple[str, int]] = []

    def keyed_publisher(session_id, event, session_pk=None):
        keyed.append((session_id, event["revision"], session_pk))

    keyed_publisher.takes_session_pk = True

    def plain_publisher(session_id, event):
        plain.append((session_id, event["revision"]))

    ev.add_publisher(keyed_publisher)
    ev.add_publisher(plain_publisher)
    try:
        sid = provider.create_session(cwd="/w").session_id
        row = AgentSession.objects.using(provider.using).get(session_id=sid)
        keyed.clear(), plain.clear()
        with django_capture_on_commit_callbacks(using=provider.using, execute=True):
            provider.append_message(sid, user_message("hi"))
        assert keyed and [k[:2] for k in keyed] == plain
        assert {k[2] for k in keyed} == {row.pk}
        ev.publish(sid, [{"type": ev.LEAF_CHANGED, "revision": 99, "leafId": None}])  # a caller without the key
        assert keyed[-1] == (sid, 99, None) and plain[-1] == (sid, 99)
    finally:
        ev.remove_publisher(keyed_publisher)
        ev.remove_publisher(plain_publisher)


def test_the_event_log_stores_each_entry_as_it_was_written(provider, published, django_capture_on_commit_callbacks):
    """The log's payload takes an entry's JSON from its write (no second serialization):
    byte for byte what serializing the published event gives, for every path that writes
    an entry, with the values whose JSON is not Python's (floats, integral floats, a lone
    surrogate, non-ASCII)."""
    from sessions_tree import jsonl
    from sessions_tree.models import SessionEvent

    sid = provider.create_session(cwd="/w").session_id
    odd = assistant_message("naïve \ud800 ✓ 1e21")
    odd["usage"]["cost"] = {"input": 0.1 + 0.2, "output": 5.0, "total": 1e-7}
    published.clear()
    with django_capture_on_commit_callbacks(using=provider.using, execute=True):
        provider.append_message(sid, user_message("first"))
        entry = provider.begin_in_flight(sid, odd, before=[user_message("prompt ✓")])
        provider.update_in_flight_entry(sid, entry["id"], odd)
        provider.finalize_in_flight(sid, entry["id"], odd)
    events = [e for s, e in published if s == sid]
    assert [e["type"] for e in events] == [ev.ENTRY_ADDED, ev.ENTRY_ADDED, ev.ENTRY_ADDED, ev.ENTRY_UPDATED, ev.ENTRY_UPDATED]
    stored = dict(
        SessionEvent.objects.using(provider.using).filter(session__session_id=sid).values_list("revision", "payload")
    )
    for event in events:
        assert stored[event["revision"]] == jsonl.dumps(event)
    assert '"input":0.30000000000000004' in stored[events[-1]["revision"]]
    assert '"total":1e-7' in stored[events[-1]["revision"]] and '"output":5,' in stored[events[-1]["revision"]]
