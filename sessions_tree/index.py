"""An in-process index of one session's entries, refreshed incrementally.

Both providers keep one ``SessionIndex`` per session and per process: the file
provider feeds it the bytes appended to the file since it last looked, the mysql
provider the rows whose ``seq`` is above the last one it saw. Completed entries
are immutable, so an index only ever grows (a rewrite — migration, repair —
starts a new one).

Records hold the entry's stored JSON text and the few fields the tree needs;
the entry itself is parsed again only when asked for (usually: the entries on
the active path), so the index stays close to the size of the file.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field

import orjson
from django.conf import settings

from sessions_tree import jsonl
from sessions_tree.clean import clean_value
from sessions_tree.context import (
    SessionContext,
    context_from_path,
    estimate_context_tokens,
    estimate_context_usage,
    extend_context,
)
from sessions_tree.path import CycleError, PathError, walk_path


def parse_stored(raw: bytes | str):
    """A stored entry's JSON text, parsed as ``JSON.parse`` does, made safe to show.

    orjson refuses what the store must never hand out (lone-surrogate escapes,
    numbers that overflow to Infinity); what only the tolerant parser reads is
    cleaned (``clean.clean_value``). The stored bytes stay as they are: exports
    give them back exactly.
    """
    try:
        return _orjson_loads(raw)
    except _JSONDecodeError:
        return clean_value(jsonl.loads(raw))


# A load that leaves at least this many new objects the collector tracks is frozen out of
# its generations afterwards (a session of some thousands of entries); smaller ones are not.
FREEZE_AFTER_OBJECTS = 50_000


# Loads smaller than these are left to the collector as it runs (``gc_paused(large=False)``).
PAUSE_FROM_BYTES = 256 * 1024
PAUSE_FROM_ENTRIES = 500


@contextlib.contextmanager
def gc_paused(large: bool = True):
    """Pause the cyclic garbage collector while loading many objects at once.

    Reading a large session creates hundreds of thousands of long-lived,
    acyclic objects; every few hundred allocations the collector would walk
    them all again (it made cold opens 2-3x slower). Reference counting still
    frees everything; the collector runs again afterwards.

    A *large* load (``FREEZE_AFTER_OBJECTS`` new tracked objects or more) then
    freezes the collector's generations (``gc.freeze``) instead of letting the
    next collections walk what it loaded once more (a third of a cold open of a
    linear 10k session). A freeze also makes the garbage cycles other requests
    and threads have left, not yet collected, permanent; so small loads — a new
    session, the entries appended since the last read — never freeze (freezing on
    every load kept ~280 objects and ~85 KB per session created over REST, never
    returned: tests/api/test_session_memory.py), and before a large one the young generation is
    collected first (cheap: it holds at most a few hundred objects then). What a
    large load can still freeze is the older garbage pending at that moment: a
    bounded amount per large cold open, not per request.

    ``large=False`` (the caller knows the load is small: the lines a turn appended, a
    short path) does nothing: the pause's young-generation collection would cost more
    than the collector's own passes over a few hundred objects (it ran several times a
    turn, ~0.3 ms each).
    """
    if not large or not gc.isenabled():
        yield
        return
    gc.collect(0)
    gc.disable()
    try:
        yield
    finally:
        if gc.get_count()[0] >= FREEZE_AFTER_OBJECTS:
            gc.freeze()
        gc.enable()


class Record:
    """One stored entry: its tree links plus its JSON text, parsed on demand."""

    __slots__ = ("id", "parent_id", "type", "raw", "seq", "_entry")

    def __init__(
        self, entry_id: str, parent_id: str | None, entry_type: str, raw: bytes | str, entry: dict | None = None, seq: int = 0
    ):
        self.id = entry_id
        self.seq = seq
        self.parent_id = parent_id
        self.type = entry_type
        self.raw = raw
        self._entry = entry

    @property
    def entry(self) -> dict:
        if self._entry is None:
            try:
                self._entry = parse_stored(self.raw)
            except ValueError as exc:
                # A row changed behind the store's back (the file provider never indexes
                # a line that does not parse): shown as what its columns say, marked.
                self._entry = {
                    "type": self.type,
                    "id": self.id,
                    "parentId": self.parent_id,
                    "netaUnreadable": f"the stored JSON does not parse ({exc})"[:300],
                }
        return self._entry

    def drop_parsed(self) -> None:
        """Forget the parsed entry (it is parsed again from ``raw`` when asked for)."""
        self._entry = None

    @property
    def raw_text(self) -> str:
        return self.raw.decode("utf-8") if isinstance(self.raw, bytes) else self.raw


def record_from_line(raw: bytes, *, keep: bool = False) -> Record | None:
    """A record for one stripped line of a session file, or None when it is not a JSON entry.

    Every line is parsed in full: a line whose start looks like an entry may be
    damaged further on (a NUL run, garbage, a torn line glued to the next), and
    Pi skips such a line, so Neta must too. The parsed entry is kept only when
    ``keep`` (the caller knows it will be needed); otherwise it is parsed again
    when asked for. Bytes that are not UTF-8 become U+FFFD first, as Node reads
    the file; the record then holds the repaired text.
    """
    try:
        obj = _orjson_loads(raw)
    except _JSONDecodeError:
        try:
            obj = clean_value(jsonl.loads(raw))
        except ValueError:
            try:
                raw.decode("utf-8")
                return None
            except UnicodeDecodeError:
                text = raw.decode("utf-8", errors="replace")
            try:
                obj = clean_value(jsonl.loads(text))
            except ValueError:
                return None
            raw = text.encode("utf-8")
    if type(obj) is not dict:
        return None
    kind = obj.get("type")
    entry_id = obj.get("id")
    if type(kind) is not str or kind == "session" or type(entry_id) is not str:
        return record_from_entry(obj, raw)
    parent_id = obj.get("parentId")
    return Record(entry_id, parent_id if type(parent_id) is str else None, kind, raw, obj if keep else None)


_orjson_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError


def record_from_entry(obj, raw: bytes | str) -> Record | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str) or obj["type"] == "session":
        return None
    entry_id = obj.get("id")
    if not isinstance(entry_id, str):
        return None
    parent_id = obj.get("parentId")
    return Record(entry_id, parent_id if isinstance(parent_id, str) else None, obj["type"], raw, obj)


class EntryMap(Mapping):
    """A read-only ``{id: entry}`` view of an index (last line wins), parsing on access."""

    def __init__(self, by_id: dict[str, Record]):
        self._by_id = by_id

    def __getitem__(self, entry_id: str) -> dict:
        return self._by_id[entry_id].entry

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)


@dataclass
class SessionIndex:
    """Entries of one session in stored order, with Pi's last-wins id index."""

    records: list[Record] = field(default_factory=list)
    by_id: dict[str, Record] = field(default_factory=dict)
    # The first child of each parent (None: the roots), in stored order: enough to
    # tell a new branch from a continued one, without a list per entry.
    first_child: dict[str | None, str] = field(default_factory=dict)
    # Where the source has been read up to: a byte offset (file) or a seq (mysql).
    position: int = 0
    # Identity of the source (file: (device, inode)).
    source_key: object = None
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    # What reading found wrong: malformed lines (1-based line numbers), extra headers, a bad header.
    diagnostics: dict = field(default_factory=dict)
    lines_seen: int = 0
    header_seen: bool = False
    _context_leaf: str | None = None
    _context: SessionContext | None = None
    _context_tokens: int | None = None  # Pi's estimateContextTokens of ``_context``
    _remembered_path: list[Record] | None = None  # see remember_path
    _stats: tuple | None = None  # (leaf, model, thinking level, tokens), see context_stats

    def add(self, record: Record) -> None:
        self.records.append(record)
        self.by_id[record.id] = record
        self.first_child.setdefault(record.parent_id, record.id)

    def note_malformed(self, line_no: int) -> None:
        self.diagnostics["malformedCount"] = self.diagnostics.get("malformedCount", 0) + 1
        lines = self.diagnostics.setdefault("malformedLines", [])
        if len(lines) < 100:
            lines.append(line_no)

    def parent_of(self, entry_id: str) -> str | None:
        return self.by_id[entry_id].parent_id

    def path_records(self, leaf_id: str, *, strict: bool = False) -> list[Record]:
        """The records from the root to ``leaf_id`` (Pi's walk: an unknown parent ends it).

        A tight loop over the index; an unknown leaf, ``strict`` mode and a cycle
        go through :func:`~sessions_tree.path.walk_path` for its errors.
        """
        by_id = self.by_id
        remembered, self._remembered_path = self._remembered_path, None
        if remembered is not None and remembered[-1].id == leaf_id and not strict:
            return remembered
        record = by_id.get(leaf_id)
        if record is None or strict:
            return [by_id[i] for i in walk_path(leaf_id, self.parent_of, strict=strict)]
        out = [record]
        limit = len(by_id)
        parent = record.parent_id
        while parent is not None:
            record = by_id.get(parent)
            if record is None:
                break
            out.append(record)
            if len(out) > limit:  # longer than the session: a cycle; walk_path says where
                walk_path(leaf_id, self.parent_of)
                raise AssertionError(f"a cycle above {leaf_id!r} that walk_path did not find")  # pragma: no cover
            parent = record.parent_id
        out.reverse()
        return out

    def remember_path(self, path: list[Record]) -> None:
        """Keep a root-to-leaf path found while reading, for the next ``path_records`` of its leaf.

        The reader found it by following parent ids backwards through the file; it
        is the index's own walk only if every record on it is the one ``by_id``
        holds for its id (a later duplicate line would win), which is checked here.
        """
        by_id = self.by_id
        if all(by_id.get(r.id) is r for r in path):
            self._remembered_path = path

    def path_ids(self, leaf_id: str, *, strict: bool = False) -> list[str]:
        return [r.id for r in self.path_records(leaf_id, strict=strict)]

    def path_ids_reported(self, leaf_id: str) -> tuple[list[str], dict | None]:
        """``path_ids(leaf_id)``, or, when the parent links loop, the path up to the entry
        whose parent would repeat it, with ``{"kind": "cycle", "ids", "message"}``."""
        try:
            return self.path_ids(leaf_id), None
        except CycleError as exc:
            seen: set[str] = set()
            ids: list[str] = []
            cursor: str | None = leaf_id
            while cursor is not None and cursor in self.by_id and cursor not in seen:
                seen.add(cursor)
                ids.append(cursor)
                cursor = self.by_id[cursor].parent_id
            ids.reverse()
            return ids, {"kind": "cycle", "ids": [str(i) for i in exc.ids[:50]], "message": str(exc)}
        except PathError as exc:
            return [], {"kind": "path", "message": str(exc)}

    def path_entries(self, leaf_id: str) -> list[dict]:
        records = self.path_records(leaf_id)
        with gc_paused(large=sum(1 for r in records if r._entry is None) >= PAUSE_FROM_ENTRIES):
            return [r._entry if r._entry is not None else r.entry for r in records]

    def entry_map(self) -> EntryMap:
        return EntryMap(self.by_id)

    def entries(self) -> list[dict]:
        return [r.entry for r in self.records]

    def context(self, leaf_id: str | None) -> SessionContext:
        """Pi's context at ``leaf_id``; reuses the last one when the leaf only moved forward."""
        if leaf_id is None:
            return context_from_path([])
        with self.lock:
            cached_leaf, cached = self._context_leaf, self._context
            new = self._entries_since(cached_leaf, leaf_id) if cached is not None else None
            extended = (extend_context(cached, new) if new else cached) if new is not None else None
            if extended is not None:  # None: unrelated leaf, or a compaction among the new entries
                if extended is not cached and self._context_tokens is not None:
                    self._context_tokens = _tokens_after(self._context_tokens, extended.messages[len(cached.messages) :])
                self._context_leaf, self._context = leaf_id, extended
                return extended
            result = context_from_path(self.path_entries(leaf_id))
            self._context_leaf, self._context, self._context_tokens = leaf_id, result, None
            return result

    def _entries_since(self, ancestor: str | None, leaf_id: str) -> list[dict] | None:
        """The entries after ``ancestor`` down to ``leaf_id`` (root first), if ``ancestor``
        is at most 256 steps above the leaf; None otherwise."""
        if ancestor is None or ancestor not in self.by_id:
            return None
        new: list[dict] = []
        cursor: str | None = leaf_id
        for _ in range(256):
            if cursor is None or cursor == ancestor:
                break
            record = self.by_id.get(cursor)
            if record is None:
                break
            new.append(record.entry)
            cursor = record.parent_id
        if cursor != ancestor:
            return None
        new.reverse()
        return new

    def context_stats(self, leaf_id: str | None, then: list[dict] | None = None) -> tuple[dict | None, object, int]:
        """(model, thinking level, Pi's token estimate) of the context at ``leaf_id``
        (followed by ``then``, entries not in the index, e.g. the one in flight).

        What every change reports; kept up to date from the entries that are new
        since the last call, without building (or copying) the whole message list.
        """
        if then:
            model, thinking, tokens = self.context_stats(leaf_id)
            part = extend_context(SessionContext([], thinking, model, []), then)
            if part is not None:
                return part.model, part.thinking_level, _tokens_after(tokens, part.messages)
            path = self.path_entries(leaf_id) if leaf_id is not None else []
            ctx = context_from_path([*path, *then])
            return ctx.model, ctx.thinking_level, estimate_context_tokens(ctx.messages)
        if leaf_id is None:
            empty = context_from_path([])
            return empty.model, empty.thinking_level, 0
        with self.lock:
            if self._stats is not None:
                stats_leaf, model, thinking, tokens = self._stats
                if stats_leaf == leaf_id:
                    return model, thinking, tokens
                new = self._entries_since(stats_leaf, leaf_id)
                part = extend_context(SessionContext([], thinking, model, []), new) if new is not None else None
                if part is not None:  # None: unrelated leaf, or a compaction among the new entries
                    self._stats = (leaf_id, part.model, part.thinking_level, _tokens_after(tokens, part.messages))
                    return self._stats[1:]
            ctx, tokens = self.context_tokens(leaf_id)
            self._stats = (leaf_id, ctx.model, ctx.thinking_level, tokens)
            return self._stats[1:]

    def context_tokens(self, leaf_id: str | None) -> tuple[SessionContext, int]:
        """The context at ``leaf_id`` and Pi's token estimate of it, kept up to date
        incrementally as the leaf moves forward (O(new messages), not O(context))."""
        ctx = self.context(leaf_id)
        with self.lock:
            if ctx is self._context and self._context_tokens is not None:
                return ctx, self._context_tokens
            tokens = estimate_context_tokens(ctx.messages)
            if ctx is self._context:
                self._context_tokens = tokens
            return ctx, tokens


def _tokens_after(tokens: int, new_messages: list) -> int:
    """``estimate_context_tokens(old + new_messages)`` from ``tokens`` of the old messages.

    Pi counts the last assistant message that reports usage (not aborted/error)
    plus estimates of what follows it. If that message is among the new ones,
    the old part no longer matters; otherwise the new messages are estimated and added.
    """
    if not new_messages:
        return tokens
    usage = estimate_context_usage(new_messages)
    if usage.last_usage_index is not None:
        return usage.tokens
    return tokens + usage.trailing_tokens


class IndexCache:
    """The session indexes one process keeps, bounded, least recently used out first.

    Both providers keep theirs here (keys carry the provider), so one budget,
    ``NETA_INDEX_CACHE_ENTRIES`` entries across all cached sessions, bounds the
    memory a long-running process spends on them. An index that is dropped is
    only forgotten: whoever holds it keeps using it, and the next read of its
    session loads it again from the store. The index used last is never dropped,
    however large it is.
    """

    def __init__(self, limit: Callable[[], int], sessions: Callable[[], int] | None = None):
        self._limit = limit
        # Also at most this many indexes: an index of an empty or tiny session costs
        # ~1-2 KB that the entry budget does not see (a process creating sessions
        # all day would keep every one).
        self._sessions = sessions
        self._items: OrderedDict[Hashable, SessionIndex] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self._total = 0
        self.lock = threading.Lock()
        self.evictions = 0

    def get(self, key: Hashable) -> SessionIndex | None:
        with self.lock:
            index = self._items.get(key)
            if index is not None:
                self._items.move_to_end(key)
            return index

    def get_or_add(self, key: Hashable, make: Callable[[], SessionIndex], keep: Callable[[SessionIndex], bool]) -> SessionIndex:
        """The index under ``key`` if ``keep`` accepts it, else a new one from ``make``."""
        with self.lock:
            index = self._items.get(key)
            if index is not None and keep(index):
                self._items.move_to_end(key)
                return index
            self._set(key, make())
            return self._items[key]

    def replace(self, key: Hashable, index: SessionIndex) -> None:
        with self.lock:
            self._set(key, index)

    def pop(self, key: Hashable) -> None:
        with self.lock:
            self._items.pop(key, None)
            self._total -= self._sizes.pop(key, 0)

    def clear(self) -> None:
        with self.lock:
            self._items.clear()
            self._sizes.clear()
            self._total = 0

    def grew(self, key: Hashable, index: SessionIndex) -> None:
        """``index`` (under ``key``) has read more entries: count them, then drop the
        least recently used indexes while the cache is over its budget."""
        with self.lock:
            if self._items.get(key) is not index:
                return  # replaced or dropped meanwhile
            size = len(index.records)
            self._total += size - self._sizes.get(key, 0)
            self._sizes[key] = size
            limit = self._limit()
            while self._total > limit and len(self._items) > 1:
                oldest = next(iter(self._items))
                if oldest == key:  # pragma: no cover - ``key`` was just used, so it is never first
                    break
                del self._items[oldest]
                self._total -= self._sizes.pop(oldest, 0)
                self.evictions += 1

    def stats(self) -> dict:
        with self.lock:
            return {"sessions": len(self._items), "entries": self._total, "limit": self._limit(), "evictions": self.evictions}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def _set(self, key: Hashable, index: SessionIndex) -> None:
        self._items[key] = index
        self._items.move_to_end(key)
        self._total -= self._sizes.pop(key, 0)
        most = self._sessions() if self._sessions is not None else None
        while most is not None and len(self._items) > max(1, most):
            oldest = next(iter(self._items))
            del self._items[oldest]
            self._total -= self._sizes.pop(oldest, 0)
            self.evictions += 1


def _cache_limit() -> int:
    return settings.NETA_INDEX_CACHE_ENTRIES


def _cache_sessions() -> int:
    return settings.NETA_INDEX_CACHE_SESSIONS


INDEXES = IndexCache(_cache_limit, _cache_sessions)
