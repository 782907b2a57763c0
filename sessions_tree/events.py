"""Tree events: the durable facts a session's revisions are made of (docs/realtime.md).

Every change to a tree or a leaf produces exactly one event carrying the
revision it creates. ``apply_event`` is the one pure function that moves a
snapshot forward; the browser store implements the same function, and tests
prove ``apply(snapshot_before, events) == snapshot_after`` for every operation.

Publishing: providers record events in ``SessionEvent`` inside the change's
transaction and hand them to the registered publishers after commit. The
realtime gateway registers the Channels publisher; tests register a list.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable

from sessions_tree import tree_events
# The type names and each event's shape are declared once, in ``tree_events``; the names
# are re-exported here for the readers of events (``ev.ENTRY_ADDED``).
from sessions_tree.tree_events import (  # noqa: F401 - re-exported
    BRANCH_SUMMARY_ADDED,
    COMPACTION_ADDED,
    ENTRY_ADDED,
    ENTRY_UPDATED,
    LEAF_CHANGED,
    SESSION_DELETED,
    SESSION_UPDATED,
    TREE_EVENT_TYPES,
    TREE_EVENTS_VERSION,
)

logger = logging.getLogger(__name__)

ROOT_KEY = "root"  # childrenByParentId key for entries whose parentId is null

Publisher = Callable[[str, dict], None]
_publishers: list[Publisher] = []


def add_publisher(publisher: Publisher) -> None:
    """Register ``publisher(session_id, event)``, called after commit for every event."""
    if publisher not in _publishers:
        _publishers.append(publisher)


def remove_publisher(publisher: Publisher) -> None:
    if publisher in _publishers:
        _publishers.remove(publisher)


def publish(session_id: str, events: list[dict], *, session_pk: int | None = None) -> None:
    """Hand ``events`` to every publisher (called after commit). ``session_pk``: the key of
    the row the events were committed to, when the caller knows it; a publisher that sets
    ``takes_session_pk = True`` on itself is called with it as a keyword (so it need not
    look the row up once per event)."""
    for event in events:
        for publisher in list(_publishers):
            try:
                if getattr(publisher, "takes_session_pk", False):
                    publisher(session_id, event, session_pk=session_pk)
                else:
                    publisher(session_id, event)
            except Exception:  # a broken doorbell never breaks a write
                logger.exception("event publisher %r failed for %s", publisher, session_id)


def publish_session_deleted(session_id: str, session_pk: int) -> None:
    """Tell the publishers that the row ``session_pk`` holding ``session_id`` was deleted
    (called after commit). A publisher that only wants tree events skips it by type."""
    publish(session_id, [tree_events.session_deleted(session_id=session_id, session_pk=session_pk)])


# --- applying events to snapshots ---------------------------------------------------------


def apply_events(snapshot: dict, events: list[dict]) -> dict:
    for event in events:
        snapshot = apply_event(snapshot, event)
    return snapshot


def apply_event(snapshot: dict, event: dict) -> dict:
    """The snapshot after ``event``. Pure: the input snapshot is not modified.

    Events at or below the snapshot's revision are ignored (the client's buffered
    events from before its snapshot); a gap raises ``RevisionGap``.
    """
    revision = event["revision"]
    if revision <= snapshot["revision"]:
        return snapshot
    if revision != snapshot["revision"] + 1:
        raise RevisionGap(snapshot["revision"], revision)
    snap = copy.copy(snapshot)
    kind = event["type"]
    if kind in (ENTRY_ADDED, BRANCH_SUMMARY_ADDED, COMPACTION_ADDED):
        entry = event["entry"]
        if event.get("inFlight"):
            snap["inFlight"] = entry
        else:
            _add_entry(snap, entry)
        _set_leaf(snap, event["leafId"], entry)
    elif kind == ENTRY_UPDATED:
        entry = event["entry"]
        if event.get("inFlight"):
            snap["inFlight"] = entry
        else:
            snap["inFlight"] = None
            _add_entry(snap, entry)
    elif kind == LEAF_CHANGED:
        _set_leaf(snap, event["leafId"], None)
    elif kind == SESSION_UPDATED:
        snap["session"] = {**snap["session"], **event["session"]}
    else:
        raise ValueError(f"unknown tree event type {kind!r}")
    if "context" in event:
        snap["runtimeContext"] = {**snap.get("runtimeContext", {}), **event["context"]}
    snap["revision"] = revision
    return snap


class RevisionGap(Exception):
    def __init__(self, have: int, got: int):
        super().__init__(f"revision gap: snapshot at {have}, event at {got}")
        self.have, self.got = have, got


def _add_entry(snap: dict, entry: dict) -> None:
    snap["entries"] = [*snap["entries"], entry]
    page = dict(snap["page"])
    page["totalEntries"] += 1
    page["includedEntries"] += 1
    snap["page"] = page
    parent_key = entry.get("parentId") if isinstance(entry.get("parentId"), str) else ROOT_KEY
    children = dict(snap["childrenByParentId"])
    siblings = children.get(parent_key, [])
    if entry["id"] not in siblings:
        children[parent_key] = [*siblings, entry["id"]]
    snap["childrenByParentId"] = children
    if entry.get("type") == "label":
        labels = dict(snap["labelsByEntryId"])
        target, label = entry.get("targetId"), entry.get("label")
        if label:
            labels[target] = label
        else:
            labels.pop(target, None)
        snap["labelsByEntryId"] = labels
    elif entry.get("type") == "session_info":
        name = entry.get("name")
        session = dict(snap["session"])
        session["title"] = name.strip() if isinstance(name, str) else ""
        snap["session"] = session


def _set_leaf(snap: dict, leaf_id: str | None, appended: dict | None) -> None:
    old_path = snap["activePath"]
    if leaf_id is None:
        path: list[str] = []
        truncated = False
    elif appended is not None and appended["id"] == leaf_id and (
        (appended.get("parentId") is None and not old_path)
        or (old_path and old_path[-1] == appended.get("parentId"))
    ):
        path = [*old_path, leaf_id]
        truncated = snap["page"].get("activePathTruncated", False)
    else:
        path, truncated = _walk_snapshot(snap, leaf_id)
    snap["activePath"] = path
    page = dict(snap["page"])
    if leaf_id is None:
        page["activePathLength"] = 0
    elif path[-1:] == [leaf_id] and len(path) == len(old_path) + 1 and path[:-1] == old_path:
        page["activePathLength"] = page.get("activePathLength", len(old_path)) + 1
    else:
        page["activePathLength"] = len(path)
    page["activePathTruncated"] = truncated
    snap["page"] = page
    session = dict(snap["session"])
    session["leafEntryId"] = leaf_id
    snap["session"] = session
    snap["leafId"] = leaf_id


def _walk_snapshot(snap: dict, leaf_id: str) -> tuple[list[str], bool]:
    by_id = {e["id"]: e for e in snap["entries"]}
    in_flight = snap.get("inFlight")
    if in_flight is not None:
        by_id[in_flight["id"]] = in_flight
    path: list[str] = []
    seen: set[str] = set()
    cursor: str | None = leaf_id
    while cursor is not None:
        entry = by_id.get(cursor)
        if entry is None or cursor in seen:
            # Outside the snapshot's window: the client pages it in when needed.
            return list(reversed(path)), snap["page"].get("truncated", False)
        seen.add(cursor)
        path.append(cursor)
        parent = entry.get("parentId")
        cursor = parent if isinstance(parent, str) and parent != cursor else None
    return list(reversed(path)), False
