"""Writes made on the caller's copy of the session row (``meta=``: the turn loop's way).

Such a write reads no row: it changes the row by a conditional UPDATE on what the copy
says. Another writer in between (a rename, an append) must neither be overwritten nor
make the tree wrong: the write is carried onto the row, or made again from a read.
"""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from tests.support.entries import assistant_message, user_message

pytestmark = pytest.mark.django_db(databases="__all__")


def meta_reads(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT") and "sessions_tree_agentsession" in q["sql"]]


def test_writes_on_a_copy_read_no_row_and_keep_what_other_writers_did(provider):
    meta = provider.create_session(cwd="/w")
    sid = meta.session_id
    copy = provider.get_session(sid)
    first = provider.append_message(sid, user_message("one"), meta=copy)
    with CaptureQueriesContext(connections[provider.using]) as captured:
        second = provider.append_message(sid, user_message("two"), meta=copy)
    assert meta_reads(captured) == [] and second["parentId"] == first["id"]

    # A rename moves the revision, not the tree: the write keeps the rename.
    provider.update_session(sid, title="renamed")
    third = provider.append_message(sid, user_message("three"), meta=copy)
    row = provider.get_session(sid)
    assert third["parentId"] == second["id"] and row.title == "renamed"
    assert (copy.revision, copy.title, copy.leaf_entry_id) == (row.revision, "renamed", third["id"])

    # Another writer appends: the next write on the copy follows that entry.
    other = provider.append_message(sid, user_message("other"))
    fourth = provider.append_message(sid, user_message("four"), meta=copy)
    assert fourth["parentId"] == other["id"]

    # A streamed reply on the copy, with a rename between its checkpoint and its end.
    entry = provider.begin_in_flight(sid, assistant_message(""), meta=copy)
    provider.update_in_flight_entry(sid, entry["id"], assistant_message("part"), meta=copy)
    provider.update_session(sid, title="again")
    provider.finalize_in_flight(sid, entry["id"], assistant_message("whole"), meta=copy)

    row = provider.get_session(sid)
    assert (row.title, row.in_flight_entry_id, row.leaf_entry_id, row.entry_count) == ("again", None, entry["id"], 6)
    assert copy.revision == row.revision
    path = provider.get_active_path(sid)
    assert [e["id"] for e in path] == [first["id"], second["id"], third["id"], other["id"], fourth["id"], entry["id"]]
    assert path[-1]["message"]["content"][0]["text"] == "whole"
    events = provider.events_since(sid, 0)
    assert [e["revision"] for e in events] == list(range(1, row.revision + 1))  # one event per revision, none twice
