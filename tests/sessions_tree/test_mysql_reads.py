"""How the mysql provider reads rows on MariaDB: a streaming cursor, batch by batch."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from sessions_tree.index import INDEXES, SessionIndex
from sessions_tree.providers import get_provider
from sessions_tree.providers import mysql as mysql_provider
from tests.support.entries import assistant_message, user_message

pytestmark = pytest.mark.django_db(databases="__all__")


@pytest.fixture
def provider(mysql_alias):
    INDEXES.clear()
    yield get_provider("mysql", using=mysql_alias)
    INDEXES.clear()


def test_a_top_up_that_stops_at_the_in_flight_row_of_a_full_batch_leaves_the_connection_usable(provider, monkeypatch):
    sid = provider.create_session(cwd="/w").session_id
    for text in ("one", "two", "three"):
        provider.append_message(sid, user_message(text))
    provider.begin_in_flight(sid, assistant_message("streaming"))
    monkeypatch.setattr(mysql_provider, "_FETCH_BATCH", 3)  # seq 2, 3 and the in-flight 4: one full batch
    meta = provider.get_session(sid)
    index = SessionIndex(source_key=meta.pk)
    index.position = 1
    provider._top_up(meta, index)
    assert [r.seq for r in index.records] == [2, 3] and index.position == 3
    assert provider.get_session(sid).in_flight_entry_id is not None  # the connection takes the next query


def test_a_cold_read_is_one_streamed_query_in_batches(provider, monkeypatch):
    sid = provider.create_session(cwd="/w").session_id
    for i in range(7):
        provider.append_message(sid, user_message(f"q{i}"))
    monkeypatch.setattr(mysql_provider, "_FETCH_BATCH", 2)
    INDEXES.clear()
    with CaptureQueriesContext(connections[provider.using]) as queries:
        ctx = provider.build_context(sid)
    assert [m["content"][0]["text"] for m in ctx.messages] == [f"q{i}" for i in range(7)]
    reads = [q["sql"] for q in queries if "sessions_tree_sessionentry" in q["sql"]]
    assert len(reads) == 1 and "ORDER BY" in reads[0] and "DESC" in reads[0]
    index = INDEXES.get(provider._cache_key(provider.get_session(sid)))
    assert all(r._entry is not None for r in index.records)  # the active path was parsed as it arrived
