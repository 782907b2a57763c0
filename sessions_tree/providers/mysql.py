"""The ``mysql`` provider: entries as ``SessionEntry`` rows through the Django ORM.

Runs on MySQL/MariaDB in production and on SQLite in the embedded default. The
payload column holds each entry's exact JSON text, so exports are byte for byte.
Writers serialize on the session row (``SELECT … FOR UPDATE``); the leaf, the
revision, the counters and the event log change in the same transaction as the
rows. Rows are immutable once completed, so each process keeps an index that it
tops up with ``seq > last seen``.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

from django.db import connections
from django.db.models import BinaryField, F, Func

from infra.prepared import insert, update_rows
from sessions_tree.index import (
    INDEXES,
    PAUSE_FROM_ENTRIES,
    Record,
    SessionIndex,
    gc_paused,
    parse_stored,
    record_from_entry,
)
from sessions_tree.limits import MAX_ID_CHARS, max_entry_bytes
from sessions_tree.models import (
    AgentSession,
    EntryStatus,
    SessionEntry,
    SessionProviderKind,
)
from sessions_tree.providers.base import PendingEntry, SessionTreeProvider

_FIELDS = ("seq", "entry_id", "parent_entry_id", "type", "payload", "status", "shadowed")
_BINARY_CAST = {"mysql": "CAST(%(expressions)s AS BINARY)", "sqlite": "CAST(%(expressions)s AS BLOB)"}
_EXPORT_PAGE = 500
_FETCH_BATCH = 250  # small enough that parsing starts while the server still sends (1k rows: 6.6 -> 5 ms)


def _record(seq: int, entry_id: str, parent_id: str | None, kind: str, payload: bytes | str, shadowed) -> Record:
    """The index record of one row."""
    if shadowed:  # the row's entry_id is "<id>~<seq>": the entry knows its own id
        record = record_from_entry(parse_stored(payload), payload)
        assert record is not None, "stored rows are entries"
        record.seq = seq
        return record
    return Record(entry_id, parent_id, kind, payload, None, seq)


@contextlib.contextmanager
def _cursor(connection):
    """A cursor that streams the result on MySQL (``SSCursor``), a plain one elsewhere.

    Either way it goes through Django's wrappers, so errors are translated and
    the query is logged and counted like any other.
    """
    if connection.vendor != "mysql":
        with connection.cursor() as cursor:
            yield cursor
        return
    from django.db.backends.mysql.base import CursorWrapper  # mysqlclient is optional (the mysql extra): loaded with the first streamed read
    from MySQLdb.cursors import SSCursor  # mysqlclient is optional (the mysql extra): loaded with the first streamed read

    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw = connection.connection.cursor(SSCursor)
    cursor = connection._prepare_cursor(CursorWrapper(raw))
    try:
        yield cursor
    finally:
        cursor.close()  # reads what is left of the result, freeing the connection


def _id_column(value) -> str | None:
    """A derived id column: the id, or None when it is no id the column can hold."""
    return value if isinstance(value, str) and len(value) <= MAX_ID_CHARS else None


def entry_row(meta: AgentSession, seq: int, pending: PendingEntry, *, status: str = EntryStatus.COMPLETED) -> SessionEntry:
    entry = pending.entry
    message = entry.get("message") if entry.get("type") == "message" else None
    return SessionEntry(
        session=meta,
        entry_id=entry["id"],
        parent_entry_id=_id_column(entry.get("parentId")),
        seq=seq,
        type=str(entry.get("type"))[:64],
        role=str(message.get("role"))[:32] if isinstance(message, dict) and message.get("role") else "",
        target_entry_id=_id_column(entry.get("targetId")),
        first_kept_entry_id=_id_column(entry.get("firstKeptEntryId")),
        timestamp=str(entry.get("timestamp") or "")[:40],
        status=status,
        payload=pending.raw,
    )


def _batches(rows: list[SessionEntry], *, most: int = 1000) -> Iterator[list[SessionEntry]]:
    """``rows`` in INSERTs that each stay under the server's packet limit.

    One statement carries a batch's payloads with quotes and backslashes escaped;
    a batch holds at most what one largest entry could take (twice its bytes).
    """
    budget = 2 * max_entry_bytes()
    batch: list[SessionEntry] = []
    size = 0
    for row in rows:
        text = row.payload
        cost = len(text.encode("utf-8")) + text.count('"') + text.count("\\") + text.count("'") + 512
        if batch and (size + cost > budget or len(batch) >= most):
            yield batch
            batch, size = [], 0
        batch.append(row)
        size += cost
    if batch:
        yield batch


class MysqlProvider(SessionTreeProvider):
    kind = SessionProviderKind.MYSQL.value

    def _cache_key(self, meta: AgentSession) -> tuple[str, str, str]:
        return ("mysql", self.using, meta.session_id)

    def _store_create(self, meta: AgentSession, header_raw: str, records: list[PendingEntry]) -> None:
        rows = []
        seen: dict[str, int] = {}
        for seq, pending in enumerate(records, start=1):
            row = entry_row(meta, seq, pending)
            previous = seen.get(row.entry_id)
            if previous is not None:
                # Pi's index is last-wins: the earlier line steps aside under a unique key.
                shadow = rows[previous - 1]
                shadow.entry_id = f"{shadow.entry_id}~{shadow.seq}"
                shadow.shadowed = True
            seen[row.entry_id] = seq
            rows.append(row)
        for batch in _batches(rows):
            SessionEntry.objects.using(self.using).bulk_create(batch)
        meta.last_seq = len(rows)
        AgentSession.objects.using(self.using).filter(pk=meta.pk).update(last_seq=meta.last_seq)

    def _store_delete(self, meta: AgentSession) -> None:
        SessionEntry.objects.using(self.using).filter(session=meta).delete()
        self._forget_index(meta)

    def _store_lock(self, meta: AgentSession, *, shared: bool = False):
        # The session row's FOR UPDATE lock (taken in _change) serializes writers.
        return contextlib.nullcontext()

    def _write_locked(self, session_id: str, meta):
        return contextlib.nullcontext()  # no query: _change's SELECT ... FOR UPDATE finds (or misses) the row

    def _store_index(self, meta: AgentSession) -> SessionIndex:
        key = self._cache_key(meta)
        index = INDEXES.get_or_add(key, lambda: SessionIndex(source_key=meta.pk), lambda ix: ix.source_key == meta.pk)
        # While an entry is in flight its row is the newest (nothing is appended after
        # it), and the index leaves it out until it is finalized.
        newest = meta.last_seq - 1 if meta.in_flight_entry_id else meta.last_seq
        with index.lock:
            if index.position >= newest:
                return index  # ``last_seq`` is the newest committed row of ``meta``'s revision: nothing to read
            with gc_paused(large=index.position == 0 or newest - index.position >= PAUSE_FROM_ENTRIES):
                if index.position == 0:
                    self._load_newest_first(meta, index)
                else:
                    self._top_up(meta, index)
        INDEXES.grew(key, index)
        return index

    def _top_up(self, meta: AgentSession, index: SessionIndex) -> None:
        """Add the rows committed since the index last looked, oldest first."""
        # Closed explicitly: stopping early must still finish the (streaming) result.
        with contextlib.closing(self._fetch(meta, after=index.position)) as batches:
            for seq, entry_id, parent_id, kind, payload, status, shadowed in itertools.chain.from_iterable(batches):
                if status == EntryStatus.IN_FLIGHT:
                    break  # finalized later; nothing is appended after it meanwhile
                index.add(_record(seq, entry_id, parent_id, kind, payload, shadowed))
                index.position = seq

    def _load_newest_first(self, meta: AgentSession, index: SessionIndex) -> None:
        """Read a whole session into an empty index, newest row first.

        Going backwards from the persisted leaf, each row that is the parent the
        walk waits for is on the active path: its payload is parsed as it arrives
        (the context needs it next), while the server is still sending the rest
        (a streaming cursor on MySQL). The other rows keep their JSON text.
        """
        records: list[Record] = []
        path: list[Record] = []
        wanted = meta.leaf_entry_id
        in_flight, loads = EntryStatus.IN_FLIGHT.value, parse_stored
        for batch in self._fetch(meta, newest_first=True):
            for seq, entry_id, parent_id, kind, payload, status, shadowed in batch:
                if status == in_flight:
                    # The newest row; it joins the index once finalized (as _top_up stops at it).
                    records.clear()
                    path.clear()
                    wanted = parent_id if entry_id == meta.leaf_entry_id else meta.leaf_entry_id
                    continue
                if shadowed:
                    record = _record(seq, entry_id, parent_id, kind, payload, shadowed)
                elif entry_id == wanted:
                    record = Record(entry_id, parent_id, kind, payload, loads(payload), seq)
                    path.append(record)
                    wanted = parent_id
                else:
                    record = Record(entry_id, parent_id, kind, payload, None, seq)
                records.append(record)
        records.reverse()
        stored, by_id, first_child = index.records, index.by_id, index.first_child
        stored.extend(records)
        for record in records:  # SessionIndex.add, inlined
            by_id[record.id] = record
            first_child.setdefault(record.parent_id, record.id)
        index.position = records[-1].seq if records else 0
        if path and wanted is None:  # the walk reached the root: the index's own walk would find the same path
            path.reverse()
            index.remember_path(path)

    def _fetch(self, meta: AgentSession, *, after: int = 0, newest_first: bool = False) -> Iterator[list[tuple]]:
        """Batches of (seq, entry_id, parent_entry_id, type, payload, status, shadowed):
        the rows after ``after`` up to ``meta.last_seq``, in ``seq`` order (or newest
        first), the payload as UTF-8 bytes, in one query.

        The ORM writes the query; the rows come straight from the cursor, without
        the ORM's per-row value converters (the columns need none: ``shadowed``
        is only tested for truth). Bytes, not text: the driver does not decode
        megabytes of JSON only for the parser to encode them again. On MySQL the
        cursor streams (``SSCursor``): rows are handled while the server sends.
        """
        connection = connections[self.using]
        cast = _BINARY_CAST.get(connection.vendor)
        rows = SessionEntry.objects.using(self.using).filter(session_id=meta.pk, seq__gt=after, seq__lte=meta.last_seq)
        rows = rows.order_by("-seq" if newest_first else "seq")
        if cast is None:
            rows = rows.values_list(*_FIELDS)
        else:
            rows = rows.annotate(payload_bytes=Func(F("payload"), template=cast, output_field=BinaryField()))
            rows = rows.values_list("seq", "entry_id", "parent_entry_id", "type", "payload_bytes", "status", "shadowed")
        sql, params = rows.query.get_compiler(using=self.using).as_sql()
        with _cursor(connection) as cursor:
            cursor.execute(sql, params)
            while batch := cursor.fetchmany(_FETCH_BATCH):
                yield batch

    def export_lines(self, session_id: str) -> Iterator[str]:
        """The session as Pi v3 JSONL lines, rows read a page at a time (constant memory;
        the connection is free between pages, so a slow download holds nothing)."""
        meta = self.get_session(session_id)
        yield meta.header + "\n"
        after = 0
        while True:
            page = list(
                SessionEntry.objects.using(self.using)
                .filter(session_id=meta.pk, seq__gt=after, seq__lte=meta.last_seq)
                .exclude(status=EntryStatus.IN_FLIGHT)
                .order_by("seq")
                .values_list("seq", "payload")[:_EXPORT_PAGE]
            )
            for seq, payload in page:
                yield payload + "\n"
            if len(page) < _EXPORT_PAGE:
                return
            after = page[-1][0]

    def _visible_records(self, meta: AgentSession, index: SessionIndex) -> list[Record]:
        records = index.records
        if records and records[-1].seq > meta.last_seq:
            # Rows committed after ``meta`` was read belong to a later revision.
            return [r for r in records if r.seq <= meta.last_seq]
        return records

    # The row writes go through ``_store_write``: in a change made on the caller's copy of
    # the meta row they run after its conditional UPDATE (the row lock first).

    def _store_append(self, meta: AgentSession, index: SessionIndex, pending: list[PendingEntry]) -> None:
        rows = []
        for item in pending:
            meta.last_seq += 1
            rows.append(entry_row(meta, meta.last_seq, item))

        def write() -> None:
            SessionEntry.objects.using(self.using).bulk_create(rows)
            self._index_own(index, rows)

        self._store_write(write)

    def _index_own(self, index: SessionIndex, rows: list[SessionEntry]) -> None:
        with index.lock:
            if index.position == rows[0].seq - 1:
                for row in rows:
                    record = Record(row.entry_id, row.parent_entry_id, row.type, row.payload)
                    record.seq = row.seq
                    index.add(record)
                    index.position = row.seq

    def _store_append_and_begin(self, meta: AgentSession, index: SessionIndex, appended: list[PendingEntry], pending: PendingEntry) -> None:
        rows = []
        for item in appended:
            meta.last_seq += 1
            rows.append(entry_row(meta, meta.last_seq, item))
        meta.last_seq += 1
        in_flight = entry_row(meta, meta.last_seq, pending, status=EntryStatus.IN_FLIGHT)

        def write() -> None:
            insert([*rows, in_flight], using=self.using)  # one INSERT, its SQL kept
            if rows:
                self._index_own(index, rows)

        self._store_write(write)

    def _store_in_flight_begin(self, meta: AgentSession, pending: PendingEntry) -> None:
        meta.last_seq += 1
        row = entry_row(meta, meta.last_seq, pending, status=EntryStatus.IN_FLIGHT)
        self._store_write(lambda: row.save(using=self.using))

    def _store_in_flight_end(self, meta: AgentSession, index: SessionIndex, pending: PendingEntry, status: str) -> None:
        seq = meta.last_seq

        def write() -> None:
            # The in-flight row is the newest (``last_seq``): one UPDATE (prepared), and the index
            # learns it from what we hold.
            condition = {"session": meta.pk, "entry_id": pending.entry["id"], "seq": seq, "status": EntryStatus.IN_FLIGHT}
            if update_rows(SessionEntry, condition, {"payload": pending.raw, "status": status}, using=self.using):
                row = entry_row(meta, seq, pending, status=status)
            else:  # a row stored otherwise (an older version's, or a repair's)
                row = SessionEntry.objects.using(self.using).filter(session=meta, entry_id=pending.entry["id"]).get()
                row.payload = pending.raw
                row.status = status
                row.save(using=self.using, update_fields=["payload", "status"])
            self._index_own(index, [row])

        self._store_write(write)
