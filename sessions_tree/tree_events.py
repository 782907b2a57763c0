"""The shape of every tree event, declared once (the protocol: docs/realtime.md).

A tree event is one revision of a session: ``{type, sessionId, revision, ...fields}``,
plus ``context`` (the session's context stats after the change) which the provider
adds to every event of a change when it commits. Each type is a ``TypedDict`` below
and has one constructor; the providers build events only through the constructors
(``emit(tree_events.entry_added, entry=…, leaf_id=…)``), ``apply_event``
(``sessions_tree/events.py``) and the browser's ``applyEvent``
(``static/chat/tree_events.js``) read them. ``TREE_EVENT_FIELDS`` is what the
declarations say, read by the tests that hold the browser's twin list
(``tests/chat/test_stream_types.py``) and the providers' output to it.

``TREE_EVENTS_VERSION`` goes up when a field is renamed, removed or changes meaning
(adding an optional field does not); the socket's ``hello`` frame says it.

Key order is part of the stored form (``SessionEvent.payload`` is the event's JSON):
the constructors build the dicts in the order the wire has always had.

No ``from __future__ import annotations`` here: ``TypedDict`` only sees
``NotRequired`` in evaluated annotations (Python 3.11).
"""

from typing import Any, Literal, NotRequired, TypedDict

TREE_EVENTS_VERSION = 1

ENTRY_ADDED = "session_entry_added"
ENTRY_UPDATED = "session_entry_updated"
LEAF_CHANGED = "session_leaf_changed"
BRANCH_SUMMARY_ADDED = "session_branch_summary_added"
COMPACTION_ADDED = "session_compaction_added"
# The session's own fields a snapshot shows (title, status, agent) changed.
SESSION_UPDATED = "session_updated"
# Not a tree event (no revision, not logged, not applied to snapshots): a notice to the
# publishers that the session's row is gone. The realtime gateway closes the session's
# sockets with it.
SESSION_DELETED = "session_deleted"


class _TreeEvent(TypedDict):
    type: str
    sessionId: str
    revision: int
    # The session's context stats after the change (``provider.context_stats``), set on
    # every event of a change at commit; absent only from an event not yet committed.
    context: NotRequired[dict[str, Any]]


class EntryAdded(_TreeEvent):
    """An entry was appended and the leaf moved to it. ``inFlight``: the entry is the
    streaming one (``snapshot.inFlight``), not yet in ``entries``. ``recovered``: a line
    a killed writer left in the file, adopted (the leaf stays where it was)."""

    type: Literal["session_entry_added"]
    entry: dict[str, Any]
    leafId: str | None
    inFlight: NotRequired[bool]
    recovered: NotRequired[bool]


class BranchSummaryAdded(_TreeEvent):
    """A ``branch_summary`` entry was appended; the leaf moved to it."""

    type: Literal["session_branch_summary_added"]
    entry: dict[str, Any]
    leafId: str | None
    recovered: NotRequired[bool]


class CompactionAdded(_TreeEvent):
    """A ``compaction`` entry was appended; the leaf moved to it."""

    type: Literal["session_compaction_added"]
    entry: dict[str, Any]
    leafId: str | None
    recovered: NotRequired[bool]


class EntryUpdated(_TreeEvent):
    """The in-flight entry was checkpointed (``inFlight`` true) or finalized (false: it
    joins ``entries``)."""

    type: Literal["session_entry_updated"]
    entry: dict[str, Any]
    inFlight: bool
    recovered: NotRequired[bool]


class LeafChanged(_TreeEvent):
    """The leaf moved without an append (``leafId`` null: before the first entry)."""

    type: Literal["session_leaf_changed"]
    leafId: str | None
    previousLeafId: str | None


class SessionUpdated(_TreeEvent):
    """The session's own fields a snapshot shows changed: only those, in ``session``."""

    type: Literal["session_updated"]
    session: dict[str, Any]


class SessionDeleted(TypedDict):
    """The notice (not a tree event) that the row ``sessionPk`` holding ``sessionId`` is gone."""

    type: Literal["session_deleted"]
    sessionId: str
    sessionPk: int


TreeEvent = EntryAdded | BranchSummaryAdded | CompactionAdded | EntryUpdated | LeafChanged | SessionUpdated

# type name → its declaration: the one list of tree event types.
TREE_EVENT_SHAPES: dict[str, type] = {
    ENTRY_ADDED: EntryAdded,
    ENTRY_UPDATED: EntryUpdated,
    LEAF_CHANGED: LeafChanged,
    BRANCH_SUMMARY_ADDED: BranchSummaryAdded,
    COMPACTION_ADDED: CompactionAdded,
    SESSION_UPDATED: SessionUpdated,
}
TREE_EVENT_TYPES = frozenset(TREE_EVENT_SHAPES)


def fields_of(shape: type) -> dict[str, list[str]]:
    """``{"required": [...], "optional": [...]}`` of a declaration, sorted."""
    return {"required": sorted(shape.__required_keys__), "optional": sorted(shape.__optional_keys__)}


TREE_EVENT_FIELDS: dict[str, dict[str, list[str]]] = {name: fields_of(shape) for name, shape in TREE_EVENT_SHAPES.items()}


# --- constructors (``session_id`` and ``revision`` come from the provider's change) --------


def entry_appended(
    *, session_id: str, revision: int, entry: dict, leaf_id: str | None, recovered: bool = False
) -> EntryAdded | BranchSummaryAdded | CompactionAdded:
    """The event of an appended entry; its type follows the entry's (a branch summary or a
    compaction has its own)."""
    event: dict = {
        "type": added_type_for_entry(entry),
        "sessionId": session_id,
        "revision": revision,
        "entry": entry,
        "leafId": leaf_id,
    }
    if recovered:
        event["recovered"] = True
    return event


def in_flight_added(*, session_id: str, revision: int, entry: dict, leaf_id: str | None) -> EntryAdded:
    """The streaming entry was opened; the leaf moved to it."""
    return {"type": ENTRY_ADDED, "sessionId": session_id, "revision": revision, "entry": entry, "leafId": leaf_id, "inFlight": True}


def entry_updated(*, session_id: str, revision: int, entry: dict, in_flight: bool, recovered: bool = False) -> EntryUpdated:
    event: EntryUpdated = {"type": ENTRY_UPDATED, "sessionId": session_id, "revision": revision, "entry": entry, "inFlight": in_flight}
    if recovered:
        event["recovered"] = True
    return event


def leaf_changed(*, session_id: str, revision: int, leaf_id: str | None, previous_leaf_id: str | None) -> LeafChanged:
    return {"type": LEAF_CHANGED, "sessionId": session_id, "revision": revision, "leafId": leaf_id, "previousLeafId": previous_leaf_id}


def session_updated(*, session_id: str, revision: int, session: dict) -> SessionUpdated:
    return {"type": SESSION_UPDATED, "sessionId": session_id, "revision": revision, "session": session}


def session_deleted(*, session_id: str, session_pk: int) -> SessionDeleted:
    return {"type": SESSION_DELETED, "sessionId": session_id, "sessionPk": session_pk}


def added_type_for_entry(entry: dict) -> str:
    if entry.get("type") == "branch_summary":
        return BRANCH_SUMMARY_ADDED
    if entry.get("type") == "compaction":
        return COMPACTION_ADDED
    return ENTRY_ADDED


def shape_errors(event: dict, shapes: dict[str, type] | None = None) -> list[str]:
    """What is wrong with ``event`` against its declaration: an unknown type, a required
    key missing, a key not declared. Empty when it fits (used by tests and checks)."""
    shapes = TREE_EVENT_SHAPES if shapes is None else shapes
    shape = shapes.get(event.get("type"))
    if shape is None:
        return [f"unknown type {event.get('type')!r}"]
    errors = [f"{event['type']}: missing {key!r}" for key in sorted(shape.__required_keys__ - set(event))]
    declared = shape.__required_keys__ | shape.__optional_keys__
    errors += [f"{event['type']}: undeclared {key!r}" for key in sorted(set(event) - declared)]
    return errors
