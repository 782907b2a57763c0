"""The process-wide cache of session indexes: bounded, least recently used out first."""

from __future__ import annotations

import pytest

from sessions_tree.index import INDEXES, IndexCache, Record, SessionIndex
from tests.support.entries import assistant_message, user_message

pytestmark = pytest.mark.django_db(databases="__all__")


def index_of(n: int) -> SessionIndex:
    index = SessionIndex()
    for i in range(n):
        index.add(Record(f"e{i}", f"e{i - 1}" if i else None, "message", b"{}"))
    return index


def load(cache: IndexCache, key: str, n: int) -> SessionIndex:
    """What a provider does: add an index for ``key``, read ``n`` entries into it, report."""
    index = cache.get_or_add(key, lambda: index_of(n), lambda ix: True)
    cache.grew(key, index)
    return index


def test_least_recently_used_indexes_go_first_when_over_budget():
    cache = IndexCache(lambda: 10)
    a = load(cache, "a", 4)
    load(cache, "b", 4)
    assert cache.get("a") is a  # used: b is now the oldest
    load(cache, "c", 4)
    assert "b" not in cache and "a" in cache and "c" in cache
    assert cache.stats() == {"sessions": 2, "entries": 8, "limit": 10, "evictions": 1}


def test_the_index_used_last_stays_however_large():
    cache = IndexCache(lambda: 10)
    load(cache, "small", 3)
    big = load(cache, "big", 50)
    assert "small" not in cache and cache.get("big") is big
    assert cache.stats()["entries"] == 50


def test_growth_of_a_cached_index_is_counted_once():
    cache = IndexCache(lambda: 100)
    index = load(cache, "s", 10)
    cache.grew("s", index)
    index.add(Record("x", None, "message", b"{}"))
    cache.grew("s", index)
    assert cache.stats()["entries"] == 11
    cache.replace("s", index_of(2))
    assert cache.stats()["entries"] == 0  # counted again when it reads
    cache.pop("s")
    assert len(cache) == 0 and cache.stats()["entries"] == 0


def test_an_index_rejected_by_keep_is_replaced():
    cache = IndexCache(lambda: 100)
    first = cache.get_or_add("s", lambda: SessionIndex(source_key=1), lambda ix: ix.source_key == 1)
    assert cache.get_or_add("s", lambda: SessionIndex(source_key=2), lambda ix: ix.source_key == 1) is first
    second = cache.get_or_add("s", lambda: SessionIndex(source_key=2), lambda ix: ix.source_key == 2)
    assert second is not first and cache.get("s") is second


def test_sessions_dropped_from_the_cache_read_back_whole(provider, settings):
    settings.NETA_INDEX_CACHE_ENTRIES = 5
    INDEXES.clear()
    sessions = []
    for s in range(4):
        sid = provider.create_session(cwd="/w").session_id
        for i in range(3):
            provider.append_message(sid, user_message(f"s{s} q{i}"))
            provider.append_message(sid, assistant_message(f"s{s} a{i}"))
        sessions.append(sid)
        provider.build_context(sid)
    stats = INDEXES.stats()
    assert stats["sessions"] == 1 and stats["evictions"] >= 3  # six entries each: only the last one fits
    for s, sid in enumerate(sessions):
        texts = [m["content"][0]["text"] for m in provider.build_context(sid).messages]
        assert texts == [f"s{s} {kind}{i}" for i in range(3) for kind in ("q", "a")]
    # A session dropped between two writes takes the second one where the first left off.
    provider.append_message(sessions[0], user_message("after"))
    provider.build_context(sessions[1])
    provider.append_message(sessions[0], user_message("again"))
    assert [m["content"][0]["text"] for m in provider.build_context(sessions[0]).messages][-2:] == ["after", "again"]


def test_small_indexes_are_bounded_by_count_too():
    """Empty sessions cost no entries, so the entry budget alone would keep them all."""
    cache = IndexCache(lambda: 1000, lambda: 3)
    for key in "abcde":
        load(cache, key, 0)
    assert len(cache) == 3 and "a" not in cache and "b" not in cache and "e" in cache
    assert cache.stats()["evictions"] == 2


def test_the_collector_is_paused_for_large_loads_only():
    """A large load pauses the collector (and collects the young generation first); a small
    one — what a turn appended — leaves it alone: no collection of its own."""
    import gc

    from sessions_tree.index import gc_paused

    collections = []

    def count(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.collect(0)  # the young generation empty: the few objects below cannot start a collection
    gc.callbacks.append(count)
    try:
        with gc_paused(large=False):
            assert gc.isenabled()
        assert collections == []
        with gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled() and collections and collections[0] == 0
    finally:
        gc.callbacks.remove(count)
