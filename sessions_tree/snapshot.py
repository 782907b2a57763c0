"""Snapshots: one session as a client needs it, at one revision (docs/sessions.md, docs/realtime.md).

A snapshot never ships more than ``limit`` full entries: the newest entries in
stored order plus the newest part of the active path. ``page`` says how many
there are in all and whether anything was left out; clients page the rest in
through the entries endpoint. ``apply_event`` moves a snapshot forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessions_tree import jsonl
from sessions_tree.events import ROOT_KEY
from sessions_tree.tree import labels as compute_labels

if TYPE_CHECKING:  # pragma: no cover
    from sessions_tree.index import Record, SessionIndex
    from sessions_tree.models import AgentSession


def session_summary(meta: AgentSession) -> dict:
    return {
        "sessionId": meta.session_id,
        "provider": meta.provider,
        "title": meta.title,
        "cwd": meta.cwd,
        "agent": meta.agent,
        "status": meta.status,
        "leafEntryId": meta.leaf_entry_id,
        "parentSessionId": meta.parent_session_id,
    }


def build_snapshot(
    meta: AgentSession,
    index: SessionIndex,
    records: list[Record],
    *,
    limit: int,
    leaf: str | None,
    context: dict,
) -> dict:
    """The snapshot of ``meta``'s revision. The provider passes what only it knows:
    ``leaf`` (the persisted leaf, or Pi's if a damaged file lost its line) and
    ``context`` (its context stats); this module never imports the providers."""
    in_flight = jsonl.loads(meta.in_flight_payload) if meta.in_flight_entry_id and meta.in_flight_payload else None
    path_error = None  # a parent cycle above the leaf: the path up to it, and what loops
    if leaf is None:
        path_ids: list[str] = []
    elif in_flight is not None and leaf == in_flight["id"]:
        parent = in_flight.get("parentId")
        above, path_error = index.path_ids_reported(parent) if parent in index.by_id else ([], None)
        path_ids = [*above, leaf]
    else:
        path_ids, path_error = index.path_ids_reported(leaf)
    path_truncated = len(path_ids) > limit
    shown_path = path_ids[-limit:] if path_truncated else path_ids

    total = len(records)
    if total <= limit:
        chosen = records
    else:
        wanted = {r.id for r in records[-limit:]}
        wanted.update(shown_path)
        chosen = [r for r in records if r.id in wanted]
    entries = [r.entry for r in chosen]

    children: dict[str, list[str]] = {}
    for record in chosen:
        key = record.parent_id if record.parent_id is not None else ROOT_KEY
        siblings = children.setdefault(key, [])
        if record.id not in siblings:
            siblings.append(record.id)

    label_entries = [r.entry for r in records if r.type == "label"]
    summary = session_summary(meta)
    summary["leafEntryId"] = leaf
    return {
        "session": summary,
        "revision": meta.revision,
        "leafId": leaf,
        "entries": entries,
        "activePath": shown_path,
        "childrenByParentId": children,
        "labelsByEntryId": compute_labels(label_entries),
        "inFlight": in_flight,
        "runtimeContext": context,
        "pathError": path_error,
        "page": {
            "totalEntries": total,
            "includedEntries": len(entries),
            "truncated": len(entries) < total,
            "activePathLength": len(path_ids),
            "activePathTruncated": path_truncated,
            "limit": limit,
        },
    }
