"""The provider contract (docs/sessions.md) and everything both providers share.

A provider stores entries; the session's meta (leaf, revision, counters) and its
event log live in ``AgentSession``/``SessionEvent`` rows for both. Every change
runs the same way:

1. take the provider's write lock (file provider: ``flock`` on the session file;
   mysql provider: the session row's ``SELECT … FOR UPDATE``),
2. read the meta and bring the in-process index up to date,
3. build the entries (ids checked against every id in the session),
4. store them durably (file: one whole line each, then ``fdatasync``),
5. in the same DB transaction: move the leaf, bump ``revision``, update the
   counters, record one tree event per revision,
6. publish the events after commit.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import orjson
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from sessions_tree import entries as E
from sessions_tree import events as ev
from sessions_tree import jsonl
from sessions_tree import tree_events as te
from sessions_tree.acting import current_actor_id, run_also_in_change
from sessions_tree.branch_summary import navigation_target
from sessions_tree.clean import clean_value
from sessions_tree.context import SessionContext, context_from_path
from sessions_tree.errors import (
    EntryNotFound,
    InvalidEntry,
    ResyncNeeded,
    SessionBusy,
    SessionIdTaken,
    SessionNotFound,
)
from sessions_tree.ids import new_entry_id, new_session_id, now_iso
from sessions_tree.index import INDEXES, Record, SessionIndex
from sessions_tree.limits import (
    MAX_TITLE_CHARS,
    check_entry_ids,
    check_entry_size,
    check_header,
)
from sessions_tree.models import AgentSession, SessionEvent
from infra.prepared import P, Prepared, insert, update_rows
from sessions_tree.path import PathError
from sessions_tree.snapshot import build_snapshot, session_summary
from sessions_tree.tree import label_state

logger = logging.getLogger(__name__)

T = TypeVar("T")
MISSING = object()
# The leaf before the first entry (Pi's resetLeaf); as the CLI spells it.
ROOT = "@root"
# Keys Pi writes before id/parentId/timestamp for these types.
_LATE_ID_TYPES = {"custom", "custom_message"}


@dataclass
class PendingEntry:
    entry: dict
    raw: str


class _Events(list):
    """A change's tree events, with the JSON of the entries they carry where the change
    made it already (``raws``, by the event's id): the event log stores each event with
    its entry's text as it was written, not a second serialization of it. The event is
    kept beside its text, so an id is never another (later) event's."""

    __slots__ = ("raws",)

    def __init__(self):
        super().__init__()
        self.raws: dict[int, tuple[dict, str]] = {}

    def entry_raw(self, event: dict) -> str | None:
        known = self.raws.get(id(event))
        return known[1] if known is not None and known[0] is event else None


def pending_entry(entry: dict) -> PendingEntry:
    """An entry made ready to store: cleaned (``clean.clean_value``), serialized, size-checked.

    Every append path goes through here, so no lone surrogate or non-finite
    number is ever stored, and no entry is larger than ``NETA_MAX_ENTRY_BYTES``.
    """
    entry = clean_value(entry)
    raw = jsonl.dumps(entry)
    check_entry_size(raw)
    return PendingEntry(entry, raw)


def _event_json(event: dict, entry_raw: str | None) -> str:
    """The event log's payload: the event's JSON, its entry's part taken as written."""
    if entry_raw is None:
        return jsonl.dumps(event)
    payload = dict(event)
    payload["entry"] = orjson.Fragment(entry_raw)
    return jsonl.dumps(payload)


# The meta row: every read and write starts here (no ordering: the id is unique).
_META_ANY = Prepared(lambda: AgentSession.objects.filter(session_id=P("sid")).order_by())
_META = Prepared(lambda: AgentSession.objects.filter(session_id=P("sid"), provider=P("kind")).order_by())
_META_LOCKED = Prepared(lambda: AgentSession.objects.select_for_update().filter(session_id=P("sid"), provider=P("kind")).order_by())


def load_meta_any(session_id: str, using: str = "default") -> AgentSession | None:
    """The meta row of ``session_id`` whatever its provider, through the same prepared
    statement as the providers' reads (no query building, no ordering), or None."""
    rows = _META_ANY.all(using=using, sid=session_id)
    return rows[0] if rows else None


class SessionTreeProvider:
    """Tree semantics over a storage backend. Subclasses implement the ``_store_*`` hooks."""

    kind = ""
    # True when the store's write lock alone excludes every other writer of a session
    # (then ``_change`` keeps the store's own writes out of the DB transaction).
    _store_locks_writers = False

    def __init__(self, using: str = "default"):
        self.using = using
        self._local = threading.local()  # per thread: the store writes a hinted change defers

    def _store_write(self, op: Callable[[], None]) -> None:
        """A store write that is a database statement (the mysql store's rows): at once, or,
        in a change made on the caller's copy of the row, after the row's conditional UPDATE
        (``_commit``), so the row lock still comes before any entry row's."""
        deferred = getattr(self._local, "deferred", None)
        if deferred is None:
            op()
        else:
            deferred.append(op)

    # ------------------------------------------------------------------ storage hooks

    def _store_create(self, meta: AgentSession, header_raw: str, records: list[PendingEntry]) -> None:
        raise NotImplementedError

    def _store_delete(self, meta: AgentSession) -> None:
        raise NotImplementedError

    def _store_lock(self, meta: AgentSession, *, shared: bool = False) -> contextlib.AbstractContextManager:
        raise NotImplementedError

    def write_lock(self, session_id: str) -> contextlib.AbstractContextManager:
        """The store's write lock for ``session_id`` (``_change`` locks the meta row inside it).

        Callers that also lock rows of their own (the runtime's session row) take
        this first: the store's lock comes before any row lock.
        """
        return self._store_lock(self.get_session(session_id))

    def _write_locked(self, session_id: str, meta: AgentSession | None) -> contextlib.AbstractContextManager:
        """``write_lock`` for the provider's own writes: with a caller's ``meta`` (the
        session as the caller last saw it) the lock is taken without reading the row again."""
        return self._store_lock(meta) if meta is not None else self.write_lock(session_id)

    def _store_index(self, meta: AgentSession) -> SessionIndex:
        """The session's index, brought up to date with the store."""
        raise NotImplementedError

    def _store_append(self, meta: AgentSession, index: SessionIndex, pending: list[PendingEntry]) -> None:
        """Store entries durably, in order (the caller holds the write lock)."""
        raise NotImplementedError

    def _store_in_flight_begin(self, meta: AgentSession, pending: PendingEntry) -> None:
        """Record that an entry is in flight (the meta row already holds its payload)."""

    def _store_append_and_begin(self, meta: AgentSession, index: SessionIndex, appended: list[PendingEntry], pending: PendingEntry) -> None:
        """``_store_append(appended)`` (if any), then ``_store_in_flight_begin(pending)``."""
        if appended:
            self._store_append(meta, index, appended)
        self._store_in_flight_begin(meta, pending)

    def _store_in_flight_end(self, meta: AgentSession, index: SessionIndex, pending: PendingEntry, status: str) -> None:
        self._store_append(meta, index, [pending])

    def _store_recovery_needed(self, meta: AgentSession) -> bool:
        """Under the write lock, with the locked meta row: did a dead writer leave something to repair?"""
        return False

    def _store_recover(self, meta: AgentSession, index: SessionIndex, emit: Callable) -> bool:
        """Under the write lock, in a transaction: repair what a dead writer left behind.

        Emits events for what it adopts; returns True when ``meta`` changed.
        """
        return False

    def _visible_records(self, meta: AgentSession, index: SessionIndex) -> list[Record]:
        """The records that belong to ``meta``'s revision (stored order)."""
        return index.records

    def _cache_key(self, meta: AgentSession) -> tuple:
        """The key of this session's index in the process-wide ``INDEXES`` cache."""
        raise NotImplementedError

    def _forget_index(self, meta: AgentSession) -> None:
        """Drop the cached index (after a failed write)."""
        INDEXES.pop(self._cache_key(meta))

    # ------------------------------------------------------------------ sessions

    def create_session(
        self,
        *,
        cwd: str = "",
        session_id: str | None = None,
        user=None,
        agent: str = "",
        title: str = "",
        metadata: dict | None = None,
        parent_session: str | None = None,
        parent_session_id: str | None = None,
        timestamp: str | None = None,
    ) -> AgentSession:
        header = E.session_header(
            session_id=session_id or new_session_id(),
            timestamp=timestamp or now_iso(),
            cwd=cwd,
            parent_session=parent_session,
        )
        return self.create_from_entries(
            header=header,
            header_raw=jsonl.dumps(header),
            pending=[],
            leaf_id=None,
            user=user,
            agent=agent,
            title=title,
            metadata=metadata,
            parent_session_id=parent_session_id,
        )

    def create_from_entries(
        self,
        *,
        header: dict,
        header_raw: str,
        pending: list[PendingEntry],
        leaf_id: str | None,
        user=None,
        agent: str = "",
        title: str = "",
        metadata: dict | None = None,
        parent_session_id: str | None = None,
        diagnostics: dict | None = None,
    ) -> AgentSession:
        """A new session from a parsed header and entries (imports, forks, ``create_session``).

        ``header_raw`` and each ``PendingEntry.raw`` are stored byte for byte;
        ``leaf_id`` is the leaf to persist. Every entry passes the kernel's limits
        (``sessions_tree.limits``); an id already taken raises ``SessionIdTaken``.
        """
        check_header(header)
        if clean_value(header) is not header:  # a lone surrogate in cwd or parentSession
            header = clean_value(header)
            header_raw = jsonl.dumps(header)
        for p in pending:
            check_entry_ids(p.entry)
            check_entry_size(p.raw)
        session_id = header["id"]
        if AgentSession.objects.using(self.using).filter(session_id=session_id).exists():
            raise SessionIdTaken(_("a session with id %(session_id)s already exists") % {"session_id": session_id}, field="header.id")
        meta = AgentSession(
            session_id=session_id,
            provider=self.kind,
            header=header_raw,
            cwd=header.get("cwd") or "",
            parent_session_id=parent_session_id,
            agent=agent,
            user=user,
            title=title,
            metadata=metadata or {},
            leaf_entry_id=leaf_id,
            revision=1 if pending else 0,
            diagnostics=diagnostics or {},
        )
        _count_all(meta, [p.entry for p in pending])
        if not title:
            name = _last_session_name(p.entry for p in pending)
            meta.title = name or ""
        meta.title = meta.title[:MAX_TITLE_CHARS]
        try:
            with transaction.atomic(using=self.using):
                meta.save(using=self.using)
                self._store_create(meta, header_raw, pending)
        except IntegrityError:
            if AgentSession.objects.using(self.using).filter(session_id=session_id).exists():
                # Another writer created the same id between the check and the insert.
                raise SessionIdTaken(_("a session with id %(session_id)s already exists") % {"session_id": session_id}, field="header.id") from None
            raise
        return meta

    def get_session(self, session_id: str) -> AgentSession:
        return self._load_meta(session_id, for_update=False)

    def _load_meta(self, session_id: str, *, for_update: bool) -> AgentSession:
        """The meta row, read with one prepared statement (``for_update``: locked)."""
        rows = (_META_LOCKED if for_update else _META).all(using=self.using, sid=session_id, kind=self.kind)
        if rows:
            return rows[0]
        raise SessionNotFound(_("no %(self_kind)s session %(session_id)r") % {"self_kind": self.kind, "session_id": session_id})

    def update_session(self, session_id: str, **changes) -> AgentSession:
        allowed = {"title", "status", "metadata", "agent", "user"}
        unknown = set(changes) - allowed
        if unknown:
            raise InvalidEntry(_("cannot update %(join_sorted_unknown)s (allowed: %(join_sorted_allowed)s)") % {"join_sorted_unknown": ', '.join(sorted(unknown)), "join_sorted_allowed": ', '.join(sorted(allowed))})
        title = changes.get("title")
        if title is not None and (not isinstance(title, str) or len(title) > MAX_TITLE_CHARS):
            raise InvalidEntry(_("title: must be a string of at most %(max_title_chars)s characters") % {"max_title_chars": MAX_TITLE_CHARS}, field="title")
        if "title" in changes:
            changes["title"] = clean_value(changes["title"])
        with self.write_lock(session_id):
            with self._change(session_id) as (meta, index, emit):
                before = session_summary(meta)
                for key, value in changes.items():
                    setattr(meta, key, value)
                after = session_summary(meta)
                shown = {key: value for key, value in after.items() if before.get(key) != value}
                if shown:
                    # What a snapshot shows changed: one more revision, one event.
                    emit(te.session_updated, session=shown)
                else:
                    meta.save(using=self.using)
        return meta

    def delete_session(self, session_id: str) -> None:
        """Delete the session; after commit the publishers get a ``session_deleted`` notice."""
        meta = self.get_session(session_id)
        with self._store_lock(meta):
            with transaction.atomic(using=self.using):
                meta = self._meta_for_update(session_id)
                pk = meta.pk
                self._store_delete(meta)
                meta.delete(using=self.using)
                transaction.on_commit(lambda: ev.publish_session_deleted(session_id, pk), using=self.using)
        self._forget_index(meta)

    # ------------------------------------------------------------------ reads

    def list_entries(self, session_id: str, *, offset: int = 0, limit: int | None = None) -> list[dict]:
        meta, records = self._read(session_id)
        chosen = records[offset : None if limit is None else offset + limit]
        return [r.entry for r in chosen]

    def get_entry(self, session_id: str, entry_id: str) -> dict:
        meta, records = self._read(session_id)
        index = self._store_index(meta)
        record = index.by_id.get(entry_id)
        if record is None:
            raise EntryNotFound(_("entry %(entry_id)r not found in session %(session_id)s") % {"entry_id": entry_id, "session_id": session_id})
        return record.entry

    def get_active_path(self, session_id: str, leaf_id: str | None = None, *, meta: AgentSession | None = None) -> list[dict]:
        """Entries root→leaf (default: the persisted leaf; ``ROOT``: none).

        ``meta``: the session as the caller holds it (kept current by the writes it was
        passed to), instead of reading the row again."""
        meta = meta or self.get_session(session_id)
        index = self._store_index(meta)
        leaf = self._chosen_leaf(meta, index, leaf_id)
        try:
            return self._path_entries(meta, index, leaf)
        except PathError as exc:  # a parent cycle: a stored session Neta did not write
            raise InvalidEntry(str(exc), field="leafId") from None

    def active_path_reported(self, session_id: str) -> tuple[list[str], dict | None]:
        """Ids root→persisted leaf, and what is wrong with the path (a parent cycle), if anything.

        Unlike ``get_active_path`` this never refuses: a loop gives the path up to
        the entry whose parent would repeat it, and the problem (the snapshot's
        ``pathError``).
        """
        meta = self.get_session(session_id)
        index = self._store_index(meta)
        leaf = self._leaf(meta, index)
        if leaf is None:
            return [], None
        if leaf == meta.in_flight_entry_id and meta.in_flight_payload:
            parent = jsonl.loads(meta.in_flight_payload).get("parentId")
            above, problem = index.path_ids_reported(parent) if parent in index.by_id else ([], None)
            return [*above, leaf], problem
        return index.path_ids_reported(leaf)

    def build_context(self, session_id: str, leaf_id: str | None = None, *, meta: AgentSession | None = None) -> SessionContext:
        """Pi's context at ``leaf_id`` (default: the persisted leaf; ``ROOT``: the empty root).

        ``meta`` as for ``get_active_path``."""
        meta = meta or self.get_session(session_id)
        index = self._store_index(meta)
        leaf = self._chosen_leaf(meta, index, leaf_id)
        try:
            if leaf is not None and leaf == meta.in_flight_entry_id:
                return context_from_path(self._path_entries(meta, index, leaf))
            if leaf is not None and leaf not in index.by_id:
                raise EntryNotFound(_("entry %(leaf)r not found in session %(session_id)s") % {"leaf": leaf, "session_id": session_id})
            return index.context(leaf)
        except PathError as exc:  # a parent cycle: a stored session Neta did not write
            raise InvalidEntry(str(exc), field="leafId") from None

    def _chosen_leaf(self, meta: AgentSession, index: SessionIndex, leaf_id: str | None) -> str | None:
        if leaf_id is None:
            return self._leaf(meta, index)
        return None if leaf_id == ROOT else leaf_id

    def session_source(self, session_id: str) -> tuple[dict, list[dict], str | None]:
        """(header, entries in stored order, leaf) — what Pi would load, plus Neta's leaf."""
        meta, records = self._read(session_id)
        return jsonl.loads(meta.header), [r.entry for r in records], meta.leaf_entry_id

    def export_lines(self, session_id: str) -> Iterator[str]:
        """The session as Pi v3 JSONL lines (with "\\n"): entries byte for byte as stored."""
        meta, records = self._read(session_id)
        yield meta.header + "\n"
        for record in records:
            yield record.raw_text + "\n"

    def get_snapshot(self, session_id: str, *, entry_limit: int | None = None) -> dict:
        limit = entry_limit or settings.NETA_SNAPSHOT_ENTRY_LIMIT
        meta, records = self._read(session_id)
        index = self._store_index(meta)
        leaf = self._leaf(meta, index)  # the persisted leaf (Pi's, if a damaged file lost its line)
        return build_snapshot(meta, index, records, limit=limit, leaf=leaf, context=self._context_stats(meta, index))

    def events_since(self, session_id: str, revision: int) -> list[dict]:
        """Tree events after ``revision``, in order; ``ResyncNeeded`` if the log is too short."""
        meta = self.get_session(session_id)
        if revision > meta.revision or revision < 0:
            raise ResyncNeeded(_("revision %(revision)s is not a revision of session %(session_id)s (at %(meta_revision)s)") % {"revision": revision, "session_id": session_id, "meta_revision": meta.revision})
        if revision == meta.revision:
            return []
        rows = list(
            SessionEvent.objects.using(self.using)
            .filter(session=meta, revision__gt=revision)
            .order_by("revision")
            .values_list("revision", "payload")
        )
        if not rows or rows[0][0] != revision + 1:
            raise ResyncNeeded(_("the event log of session %(session_id)s no longer reaches back to revision %(revision)s") % {"session_id": session_id, "revision": revision})
        return [jsonl.loads(payload) for _, payload in rows]

    def get_diagnostics(self, session_id: str) -> dict:
        """What went wrong with the session's storage: what writes repaired (the meta
        row's ``diagnostics``) and, under ``read``, what reading skips or cannot use."""
        meta = self.get_session(session_id)
        with self._store_lock(meta, shared=True):
            meta = self.get_session(session_id)
            index = self._store_index(meta)
            report = dict(meta.diagnostics or {})
            read = {**index.diagnostics, **self._store_read_diagnostics(meta, index)}
            if meta.leaf_entry_id is not None and self._leaf(meta, index) != meta.leaf_entry_id:
                read["missingLeaf"] = meta.leaf_entry_id
            if read:
                report["read"] = read
        return report

    def _store_read_diagnostics(self, meta: AgentSession, index: SessionIndex) -> dict:
        """Store-specific findings of reading (the caller holds the shared lock)."""
        return {}

    def _leaf(self, meta: AgentSession, index: SessionIndex) -> str | None:
        """The persisted leaf; Pi's leaf (the last entry) if the leaf's line is gone from a damaged file."""
        leaf = meta.leaf_entry_id
        if leaf is None or leaf in index.by_id or leaf == meta.in_flight_entry_id:
            return leaf
        visible = self._visible_records(meta, index)
        return visible[-1].id if visible else None

    def _read(self, session_id: str) -> tuple[AgentSession, list[Record]]:
        """Meta and the records of exactly its revision."""
        meta = self.get_session(session_id)
        with self._store_lock(meta, shared=True):
            meta = self.get_session(session_id)
            index = self._store_index(meta)
            return meta, self._visible_records(meta, index)

    def _path_entries(self, meta: AgentSession, index: SessionIndex, leaf: str | None) -> list[dict]:
        if leaf is None:
            return []
        in_flight = None
        if leaf == meta.in_flight_entry_id and meta.in_flight_payload:
            in_flight = jsonl.loads(meta.in_flight_payload)
            leaf = in_flight.get("parentId")
            if leaf is None:
                return [in_flight]
        if leaf not in index.by_id:
            raise EntryNotFound(_("entry %(leaf)r not found in session %(meta_session_id)s") % {"leaf": leaf, "meta_session_id": meta.session_id})
        path = index.path_entries(leaf)
        return [*path, in_flight] if in_flight is not None else path

    def _context_stats(self, meta: AgentSession, index: SessionIndex) -> dict:
        """What the client shows about the context at the new leaf (model, thinking, tokens)."""
        try:
            leaf = self._leaf(meta, index)
            if meta.in_flight_entry_id and leaf == meta.in_flight_entry_id and meta.in_flight_payload:
                in_flight = jsonl.loads(meta.in_flight_payload)
                parent = in_flight.get("parentId")
                if parent is not None and parent not in index.by_id:
                    raise EntryNotFound(_("entry %(parent)r not found") % {"parent": parent})
                model, thinking_level, tokens = index.context_stats(parent, then=[in_flight])
            else:
                model, thinking_level, tokens = index.context_stats(leaf)
        except (PathError, EntryNotFound, KeyError):
            return {"model": None, "thinkingLevel": "off", "tokenEstimate": 0}
        return {"model": model, "thinkingLevel": thinking_level, "tokenEstimate": tokens}

    # ------------------------------------------------------------------ public reads for other layers

    def index_for(self, session_id: str) -> SessionIndex:
        """The session's index (every entry, all branches), up to date with the store.

        Read-only for callers: ``by_id``, ``entry_map()``, ``path_ids()`` and friends.
        """
        return self._store_index(self.get_session(session_id))

    def navigation_target(self, session_id: str, entry_id: str) -> tuple[str | None, str | None]:
        """Where Pi's ``/tree`` rule puts the leaf when ``entry_id`` is selected, and the
        editor text it hands back: a user message or custom message -> its parent
        (None: before the first entry) and its text; anything else -> the entry, no
        text. ``EntryNotFound`` when the session has no such entry.
        """
        index = self.index_for(session_id)
        if entry_id not in index.by_id:
            raise EntryNotFound(_("entry %(entry_id)r not found in session %(session_id)s") % {"entry_id": entry_id, "session_id": session_id})
        return navigation_target(index.entry_map(), entry_id)

    def context_stats(self, session_id: str) -> dict:
        """What clients show about the context at the persisted leaf:
        ``{model, thinkingLevel, tokenEstimate}`` (the ``context`` of every tree event)."""
        meta = self.get_session(session_id)
        return self._context_stats(meta, self._store_index(meta))

    # ------------------------------------------------------------------ appends

    def append_entry(self, session_id: str, entry: dict) -> dict:
        """Append an entry of any type (unknown types are stored as they are).

        ``id``, ``parentId`` and ``timestamp`` are filled in when absent; the leaf
        moves to the new entry.
        """
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str) or not entry["type"]:
            raise InvalidEntry(_("an entry is a JSON object with a string 'type'"))
        if entry["type"] == "session":
            raise InvalidEntry(_("'session' is the header type, not an entry type"))

        def build(parent_id, new_id):
            built = _with_tree_keys(entry, new_id, parent_id)
            check_entry_ids(built)
            return built

        return self._append_one(session_id, build)

    def _append_built(self, session_id: str, builder: Callable, *, meta_hint: AgentSession | None = None, **fields) -> dict:
        """Append ``builder(id=, parent_id=, timestamp=, **fields)`` (an ``entries`` builder) at
        the leaf; on the caller's copy of the row when it gives one (``_change``)."""
        return self._append_one(
            session_id, lambda parent, new_id: builder(id=new_id, parent_id=parent, timestamp=now_iso(), **fields), meta_hint=meta_hint
        )

    def append_message(
        self,
        session_id: str,
        message: dict,
        *,
        meta: AgentSession | None = None,
        also: Callable[[dict], None] | None = None,
    ) -> dict:
        """Append a message at the leaf.

        ``meta``: the caller's copy of the session row: the write lock is taken
        without reading it again, and it is brought up to date with the change.
        ``also(entry)``: the caller's own writes, in the change's transaction.
        """
        _check_message(message)
        return self._append_one(
            session_id,
            lambda parent, new_id: E.message_entry(id=new_id, parent_id=parent, timestamp=now_iso(), message=message),
            meta_hint=meta,
            also=also,
        )

    def append_thinking_level_change(self, session_id: str, thinking_level: str, *, meta: AgentSession | None = None) -> dict:
        return self._append_built(session_id, E.thinking_level_change_entry, meta_hint=meta, thinking_level=thinking_level)

    def append_model_change(self, session_id: str, *, provider: str, model_id: str, meta: AgentSession | None = None) -> dict:
        return self._append_built(session_id, E.model_change_entry, meta_hint=meta, provider=provider, model_id=model_id)

    def append_compaction(
        self,
        session_id: str,
        *,
        summary: str,
        first_kept_entry_id: str,
        tokens_before: int,
        details=None,
        from_hook: bool | None = None,
    ) -> dict:
        return self._append_built(
            session_id,
            E.compaction_entry,
            summary=summary,
            first_kept_entry_id=first_kept_entry_id,
            tokens_before=tokens_before,
            details=details,
            from_hook=from_hook,
        )

    def append_branch_summary(
        self, session_id: str, *, from_entry_id: str | None, summary: str, details=None, from_hook: bool | None = None
    ) -> dict:
        """Pi's ``branchWithSummary``: the summary becomes a child of ``from_entry_id`` and the leaf."""
        return self._append_one(
            session_id,
            lambda parent, new_id: E.branch_summary_entry(
                id=new_id,
                parent_id=parent,
                timestamp=now_iso(),
                from_id=parent if parent is not None else "root",
                summary=summary,
                details=details,
                from_hook=from_hook,
            ),
            parent_override=from_entry_id,
        )

    def append_label_change(self, session_id: str, *, target_id: str, label: str | None = None) -> dict:
        def build(parent, new_id, index: SessionIndex):
            if target_id not in index.by_id:
                raise EntryNotFound(_("cannot label %(target_id)r: no such entry in session %(session_id)s") % {"target_id": target_id, "session_id": session_id})
            return E.label_entry(
                id=new_id, parent_id=parent, timestamp=now_iso(), target_id=target_id, label=label if label else None
            )

        return self._append_one(session_id, build, wants_index=True)

    def append_session_info(self, session_id: str, *, name: str, meta: AgentSession | None = None) -> dict:
        """``meta``: the caller's copy of the row (written on, and brought up to date: ``_change``)."""
        if not isinstance(name, str):
            raise InvalidEntry(_("name: must be a string"), field="name")
        if len(name.strip()) > MAX_TITLE_CHARS:
            raise InvalidEntry(_("name: longer than %(max_title_chars)s characters") % {"max_title_chars": MAX_TITLE_CHARS}, field="name")
        return self._append_built(session_id, E.session_info_entry, meta_hint=meta, name=name.strip())

    def append_custom_entry(self, session_id: str, *, custom_type: str, data=MISSING) -> dict:
        kwargs = {} if data is MISSING else {"data": data}
        return self._append_built(session_id, E.custom_entry, custom_type=custom_type, **kwargs)

    def append_custom_message(
        self, session_id: str, *, custom_type: str, content, display: bool = True, details=None
    ) -> dict:
        return self._append_built(
            session_id, E.custom_message_entry, custom_type=custom_type, content=content, display=display, details=details
        )

    def append_subagent_batch(self, session_id: str, *, batch_id: str, mode: str, runs: list) -> dict:
        return self._append_built(session_id, E.subagent_batch_entry, batch_id=batch_id, mode=mode, runs=runs)

    def append_subagent_result(
        self,
        session_id: str,
        *,
        batch_id: str,
        run_id: str,
        agent: str,
        status: str,
        content,
        details=None,
        is_error: bool = False,
        metadata: dict | None = None,
    ) -> dict:
        return self._append_built(
            session_id,
            E.subagent_result_entry,
            batch_id=batch_id,
            run_id=run_id,
            agent=agent,
            status=status,
            content=content,
            details=details,
            is_error=is_error,
            metadata=metadata,
        )

    # ------------------------------------------------------------------ in-flight entries

    def begin_in_flight(
        self,
        session_id: str,
        message: dict,
        *,
        before: list[dict] = (),
        meta: AgentSession | None = None,
        also: Callable[[list[dict]], None] | None = None,
    ) -> dict:
        """Open the streaming entry: a ``message`` entry that only this call's owner may update.

        The leaf moves to it; no other entry can be appended until it is finalized.
        ``before``: messages appended at the leaf first, in the same write (one
        revision and one event each; a turn's prompt and its reply's entry).
        ``meta`` as for ``append_message``; ``also(entries)`` gets the stored
        ``before`` entries and the in-flight entry, inside the transaction.
        """
        _check_message(message)
        for item in before:
            _check_message(item)
        stored: list[dict] = []

        def write(trust: bool) -> dict:
            with self._write_locked(session_id, meta), self._change(session_id, meta, also and (lambda: also(stored)), trust_hint=trust) as (meta_row, index, emit):
                if meta_row.in_flight_entry_id:
                    raise SessionBusy(
                        _("session %(session_id)s has entry %(meta_row_in_flight_entry_id)s in flight; finalize it first") % {"session_id": session_id, "meta_row_in_flight_entry_id": meta_row.in_flight_entry_id}
                    )
                taken = _TakenIds(index, meta_row)
                parent = self._leaf(meta_row, index)
                appended: list[PendingEntry] = []
                for item in before:
                    new_id = new_entry_id(_Also(taken, appended))
                    appended.append(pending_entry(E.message_entry(id=new_id, parent_id=parent, timestamp=now_iso(), message=item)))
                    parent = new_id
                if appended:
                    self._add_at_leaf(meta_row, index, emit, appended, store=False)
                new_id = new_entry_id(_Also(taken, appended))
                pending = pending_entry(E.message_entry(id=new_id, parent_id=parent, timestamp=now_iso(), message=message))
                entry = pending.entry
                meta_row.in_flight_entry_id = new_id
                meta_row.in_flight_payload = pending.raw
                meta_row.leaf_entry_id = new_id
                self._store_append_and_begin(meta_row, index, appended, pending)
                emit(te.in_flight_added, entry=entry, leaf_id=new_id, raw=pending.raw)
                stored[:] = [*(p.entry for p in appended), entry]
            return stored[-1]

        return self._hinted(meta, write)

    def begin_in_flight_batch(self, session_id: str, *, batch_id: str, mode: str, runs: list, metadata: dict | None = None) -> dict:
        """Open a ``subagent_batch`` entry as the in-flight entry (a delegate call while its
        children run): the leaf moves to it, rebuilt contexts and compaction see what is
        running. ``update_in_flight_fields`` checkpoints it, ``finalize_in_flight(…, fields=…)``
        stores it."""
        with self._write_locked(session_id, None):
            with self._change(session_id) as (meta, index, emit):
                if meta.in_flight_entry_id:
                    raise SessionBusy(_("session %(session_id)s has entry %(meta_in_flight_entry_id)s in flight; finalize it first") % {"session_id": session_id, "meta_in_flight_entry_id": meta.in_flight_entry_id})
                new_id = new_entry_id(_TakenIds(index, meta))
                pending = pending_entry(
                    E.subagent_batch_entry(
                        id=new_id, parent_id=self._leaf(meta, index), timestamp=now_iso(),
                        batch_id=batch_id, mode=mode, runs=runs, metadata=metadata,
                    )
                )  # fmt: skip
                entry = pending.entry
                meta.in_flight_entry_id = new_id
                meta.in_flight_payload = pending.raw
                meta.leaf_entry_id = new_id
                self._store_append_and_begin(meta, index, [], pending)
                emit(te.in_flight_added, entry=entry, leaf_id=new_id, raw=pending.raw)
        return entry

    def update_in_flight_fields(self, session_id: str, entry_id: str, fields: dict) -> dict:
        """Checkpoint an in-flight Neta entry (``subagent_batch``): top-level ``fields`` replaced."""
        with self._write_locked(session_id, None):
            with self._change(session_id) as (meta, index, emit):
                current = self._in_flight(meta, entry_id)
                _check_neta_fields(current, fields)
                pending = pending_entry({**current, **fields})
                entry = pending.entry
                meta.in_flight_payload = pending.raw
                emit(te.entry_updated, entry=entry, in_flight=True, raw=pending.raw)
        return entry

    def update_in_flight_entry(self, session_id: str, entry_id: str, message: dict, *, meta: AgentSession | None = None) -> dict:
        _check_message(message)

        def write(trust: bool) -> dict:
            with self._write_locked(session_id, meta), self._change(session_id, meta, trust_hint=trust) as (meta_row, index, emit):
                current = self._in_flight(meta_row, entry_id)
                pending = pending_entry({**current, "message": message})
                entry = pending.entry
                meta_row.in_flight_payload = pending.raw
                emit(te.entry_updated, entry=entry, in_flight=True, raw=pending.raw)
            return entry

        return self._hinted(meta, write)

    def finalize_in_flight(
        self,
        session_id: str,
        entry_id: str,
        message: dict | None = None,
        *,
        status: str = "completed",
        fields: dict | None = None,
        meta: AgentSession | None = None,
        also: Callable[[dict], None] | None = None,
    ) -> dict:
        """Store the in-flight entry as a completed (or ``aborted``/``failed``) entry.

        Without ``message`` the last checkpoint is kept; for ``aborted``/``failed``
        an assistant message gets Pi's ``stopReason`` (``aborted``/``error``).
        An in-flight Neta entry (``subagent_batch``) takes ``fields`` instead of a
        message (top-level keys replaced); without them its checkpoint is stored.
        ``meta`` and ``also(entry)`` as for ``append_message``.
        """
        if status not in ("completed", "aborted", "failed"):
            raise InvalidEntry(_("status must be completed, aborted or failed, not %(status)r") % {"status": status})
        if message is not None:
            _check_message(message)
        stored: list[dict] = []

        def write(trust: bool) -> dict:
            with self._write_locked(session_id, meta), self._change(session_id, meta, also and (lambda: also(stored[0])), trust_hint=trust) as (meta_row, index, emit):
                current = self._in_flight(meta_row, entry_id)
                if current.get("type") != "message":
                    if message is not None:
                        raise InvalidEntry(_("the in-flight entry %(entry_id)r is a %(current_get_type)r entry, not a message") % {"entry_id": entry_id, "current_get_type": current.get('type')})
                    _check_neta_fields(current, fields or {})
                    pending = pending_entry({**current, **(fields or {})})
                else:
                    if fields:
                        raise InvalidEntry(_("fields are for in-flight Neta entries; a message entry takes a message"))
                    final_message = dict(message if message is not None else current["message"])
                    if status != "completed" and final_message.get("role") == "assistant":
                        stop = "aborted" if status == "aborted" else "error"
                        if final_message.get("stopReason") not in ("aborted", "error"):
                            final_message["stopReason"] = stop
                    pending = pending_entry({**current, "message": final_message})
                entry = pending.entry
                _count(meta_row, index, entry)
                self._store_in_flight_end(meta_row, index, pending, status)
                meta_row.in_flight_entry_id = None
                meta_row.in_flight_payload = ""
                emit(te.entry_updated, entry=entry, in_flight=False, raw=pending.raw)
                stored[:] = [entry]
            return stored[0]

        return self._hinted(meta, write)

    def get_in_flight(self, session_id: str) -> dict | None:
        meta = self.get_session(session_id)
        return jsonl.loads(meta.in_flight_payload) if meta.in_flight_entry_id else None

    def _in_flight(self, meta: AgentSession, entry_id: str) -> dict:
        if meta.in_flight_entry_id != entry_id or not meta.in_flight_payload:
            raise EntryNotFound(_("entry %(entry_id)r is not in flight in session %(meta_session_id)s") % {"entry_id": entry_id, "meta_session_id": meta.session_id})
        return jsonl.loads(meta.in_flight_payload)

    # ------------------------------------------------------------------ leaf

    def switch_leaf(self, session_id: str, entry_id: str) -> AgentSession:
        with self.write_lock(session_id):
            with self._change(session_id) as (meta, index, emit):
                if entry_id not in index.by_id:
                    raise EntryNotFound(_("entry %(entry_id)r not found in session %(session_id)s") % {"entry_id": entry_id, "session_id": session_id})
                try:
                    index.path_ids(entry_id)
                except PathError as exc:
                    raise InvalidEntry(str(exc)) from exc
                previous = meta.leaf_entry_id
                meta.leaf_entry_id = entry_id
                emit(te.leaf_changed, leaf_id=entry_id, previous_leaf_id=previous)
        return meta

    def reset_leaf(self, session_id: str) -> AgentSession:
        """Leaf before the first entry: the next append starts a new root."""
        with self.write_lock(session_id):
            with self._change(session_id) as (meta, index, emit):
                previous = meta.leaf_entry_id
                meta.leaf_entry_id = None
                emit(te.leaf_changed, leaf_id=None, previous_leaf_id=previous)
        return meta

    def navigate(self, session_id: str, entry_id: str | None) -> tuple[str | None, str | None]:
        """Pi's ``/tree`` move without a summary, in one write: the leaf goes to
        ``navigation_target(entry_id)`` (``None``: before the first entry).

        Returns ``(new leaf, editor text)``. One ``leaf_changed`` event when the
        leaf moves, none when it is already there. Continue-from (a prompt from
        another entry) and switch-leaf both move the leaf through here.
        """
        with self.write_lock(session_id):
            with self._change(session_id) as (meta, index, emit):
                new_leaf, editor_text = None, None
                if entry_id is not None:
                    if entry_id not in index.by_id:
                        raise EntryNotFound(_("entry %(entry_id)r not found in session %(session_id)s") % {"entry_id": entry_id, "session_id": session_id})
                    new_leaf, editor_text = navigation_target(index.entry_map(), entry_id)
                if new_leaf is not None:
                    try:
                        index.path_ids(new_leaf)
                    except PathError as exc:
                        raise InvalidEntry(str(exc)) from exc
                previous = meta.leaf_entry_id
                if new_leaf != previous:
                    meta.leaf_entry_id = new_leaf
                    emit(te.leaf_changed, leaf_id=new_leaf, previous_leaf_id=previous)
        return new_leaf, editor_text

    # ------------------------------------------------------------------ forks

    def create_branched_session(self, session_id: str, leaf_id: str, *, user=MISSING, agent: str | None = None) -> AgentSession:
        """A new session holding the root→``leaf_id`` path (ids kept) and the labels on it.

        Unlike Pi 0.73.1, label entries inside the path are left out *with* their
        child re-parented to the label's parent, so every parent link stays intact.
        """
        meta, records = self._read(session_id)
        index = self._store_index(meta)
        if leaf_id not in index.by_id:
            raise EntryNotFound(_("entry %(leaf_id)r not found in session %(session_id)s") % {"leaf_id": leaf_id, "session_id": session_id})
        try:
            path = index.path_entries(leaf_id)
        except PathError as exc:
            raise InvalidEntry(str(exc), field="entryId") from None
        pending: list[PendingEntry] = []
        parent_of_skipped: dict[str, str | None] = {}
        for entry in path:
            if entry.get("type") == "label":
                parent_of_skipped[entry["id"]] = parent_of_skipped.get(entry.get("parentId"), entry.get("parentId"))
                continue
            parent = entry.get("parentId")
            if parent in parent_of_skipped:
                fixed = dict(entry)
                fixed["parentId"] = parent_of_skipped[parent]
                pending.append(PendingEntry(fixed, jsonl.dumps(fixed)))
            else:
                pending.append(PendingEntry(entry, index.by_id[entry["id"]].raw_text))
        path_ids = {p.entry["id"] for p in pending}
        taken = set(path_ids)
        previous = pending[-1].entry["id"] if pending else None
        for target, (label, timestamp) in label_state(r.entry for r in records).items():
            if target not in path_ids:
                continue
            new_id = new_entry_id(taken)
            taken.add(new_id)
            entry = E.label_entry(id=new_id, parent_id=previous, timestamp=timestamp, target_id=target, label=label)
            pending.append(PendingEntry(entry, jsonl.dumps(entry)))
            previous = new_id
        header = E.session_header(
            session_id=new_session_id(),
            timestamp=now_iso(),
            cwd=meta.cwd,
            parent_session=meta.session_file or meta.session_id,
        )
        return self.create_from_entries(
            header=header,
            header_raw=jsonl.dumps(header),
            pending=pending,
            leaf_id=previous,
            user=meta.user if user is MISSING else user,
            agent=meta.agent if agent is None else agent,
            metadata={"forkedFrom": {"sessionId": meta.session_id, "entryId": leaf_id}},
            parent_session_id=meta.session_id,
        )

    # ------------------------------------------------------------------ the write path

    def _meta_for_update(self, session_id: str) -> AgentSession:
        return self._load_meta(session_id, for_update=True)

    @contextlib.contextmanager
    def _change(
        self,
        session_id: str,
        hint: AgentSession | None = None,
        also: Callable[[], None] | None = None,
        *,
        trust_hint: bool = False,
    ):
        """One transaction: lock the meta row, let the caller change things, bump revision per event.

        The caller holds the store's write lock. If the store says a dead writer
        left something behind, that is repaired first, in a transaction of its
        own (so that the repair stands even when the caller's change fails), and
        the change starts again from the repaired state.

        ``hint``: the caller's copy of the meta row, brought up to date with the
        committed change (so the caller's next read or write need not read it again).
        ``also``: the caller's own writes, run inside the same transaction (they commit
        with the change, or not at all).

        ``trust_hint``: make the change on a copy of ``hint`` instead of reading the row:
        the row's UPDATE is conditional on what the copy says (revision, size, in-flight
        entry) and takes the row lock itself, so a change costs no read. When the row
        moved on meanwhile (another writer), the change is either carried onto the row as
        it is (only fields the change does not touch moved: a rename, a status) or given
        up before anything was stored (``_StaleHint``: the caller makes it again from a
        fresh read, ``_hinted``). The file store finds an append by another writer before
        it writes (its size is not the copy's); the mysql store defers its row writes
        until the conditional UPDATE has taken the lock (``_store_write``).

        A store whose write lock alone serializes every writer of the session
        (``_store_locks_writers``: the file provider's ``flock``) reads the meta and
        writes its file before the transaction, which then only holds the meta
        update and the event rows: SQLite's database-wide writer lock is not held
        across a file's ``fdatasync``. A failure between the two leaves a durable
        line the meta does not acknowledge, which the next write adopts (as a crash
        there always did).
        """
        events = _Events()
        meta_box: list[AgentSession] = []
        for attempt in range(3):
            trusted = hint if trust_hint and attempt == 0 else None
            try:
                if self._store_locks_writers:
                    meta = _copy_of(trusted) if trusted is not None else self._load_meta(session_id, for_update=False)
                    before = _values_of(meta) if trusted is not None else None
                    meta_box[:] = [meta]
                    if attempt < 2 and self._store_recovery_needed(meta):
                        raise _RecoverFirst
                    index = self._store_index(meta)
                    yield meta, index, self._emitter(session_id, meta.revision, events)
                    with transaction.atomic(using=self.using):
                        self._commit(meta, index, events, before=before)
                        if also is not None:
                            also()
                        run_also_in_change()
                elif trusted is not None:
                    meta = _copy_of(trusted)
                    before = _values_of(meta)
                    meta_box[:] = [meta]
                    index = self._store_index(meta)
                    self._local.deferred = deferred = []
                    try:
                        yield meta, index, self._emitter(session_id, meta.revision, events)
                    finally:
                        self._local.deferred = None
                    with transaction.atomic(using=self.using):
                        self._commit(meta, index, events, before=before, deferred=deferred)
                        if also is not None:
                            also()
                        run_also_in_change()
                else:
                    with transaction.atomic(using=self.using):
                        meta = self._meta_for_update(session_id)
                        meta_box[:] = [meta]
                        if attempt < 2 and self._store_recovery_needed(meta):
                            raise _RecoverFirst
                        index = self._store_index(meta)
                        yield meta, index, self._emitter(session_id, meta.revision, events)
                        self._commit(meta, index, events)
                        if also is not None:
                            also()
                        run_also_in_change()
                INDEXES.grew(self._cache_key(meta), index)  # what the change appended counts against the budget
                if hint is not None and hint is not meta:
                    _copy_meta(meta, hint)
                return
            except _RecoverFirst:
                self._recover(session_id)
            except _StaleHint:
                raise  # nothing was stored and the index was not touched
            except BaseException:
                if meta_box:
                    self._forget_index(meta_box[0])
                raise

    def _hinted(self, hint: AgentSession | None, write: Callable[[bool], T]) -> T:
        """``write(trust_hint)``: on the caller's copy of the row when there is one, again
        from a fresh read if the copy turned out stale (``_change``)."""
        if hint is None:
            return write(False)
        try:
            return write(True)
        except _StaleHint:
            return write(False)

    def _recover(self, session_id: str) -> None:
        events = _Events()
        meta = None
        try:
            with transaction.atomic(using=self.using):
                meta = self._meta_for_update(session_id)
                index = self._store_index(meta)
                if self._store_recover(meta, index, self._emitter(session_id, meta.revision, events)):
                    self._commit(meta, index, events, save_without_events=True)
        except BaseException:
            if meta is not None:
                self._forget_index(meta)
            raise

    @staticmethod
    def _emitter(session_id: str, base_revision: int, events: _Events) -> Callable:
        """``emit(constructor, **fields)``: one event of the change, built by its constructor
        (``sessions_tree.tree_events``) with the session and the next revision."""

        def emit(build: Callable[..., dict], *, raw: str | None = None, **fields) -> None:
            event = build(session_id=session_id, revision=base_revision + len(events) + 1, **fields)
            events.append(event)
            if raw is not None:  # the JSON of fields["entry"], as the write made it
                events.raws[id(event)] = (event, raw)

        return emit

    def _commit(
        self,
        meta: AgentSession,
        index: SessionIndex,
        events: _Events,
        *,
        save_without_events: bool = False,
        before: dict | None = None,
        deferred: list[Callable[[], None]] = (),
    ) -> None:
        """Inside the change's transaction: bump the revision, save the meta, log and publish the events.

        ``before``: the change was made on the caller's copy of the row, as it was then
        (``_change``): the row is written by a conditional UPDATE of what changed, then
        the store writes ``deferred`` until now."""
        if not events:
            if save_without_events:
                meta.save(using=self.using)
            for op in deferred:
                op()
            return
        meta.revision = events[-1]["revision"]
        if before is None:
            context = self._context_stats(meta, index)
            meta.save(using=self.using)
        else:
            self._save_on_copy(meta, before, events)
            for op in deferred:
                op()
            context = self._context_stats(meta, index)
        for event in events:
            event["context"] = context
        self._record_events(meta, events)
        session_id, session_pk = meta.session_id, meta.pk
        transaction.on_commit(lambda: ev.publish(session_id, events, session_pk=session_pk), using=self.using)

    def _save_on_copy(self, meta: AgentSession, before: dict, events: list[dict]) -> None:
        """The row's UPDATE of a change made on a copy: only the fields that changed, only
        if the row still is what the copy was (one statement, which takes the row lock).
        Otherwise, under the row's lock: when the row moved only in fields the change did
        not touch, the change is carried onto it (its events renumbered after the row's
        revision); else ``_StaleHint`` when nothing is stored yet (the mysql store), or
        ``SessionBusy`` when the file already holds the lines (the next write adopts them,
        as after a writer that died before its commit)."""
        changed = {name: getattr(meta, name) for name in _META_FIELDS if getattr(meta, name) != before[name]}
        meta.updated_at = changed["updated_at"] = timezone.now()
        condition = {"pk": meta.pk, "revision": before["revision"], "last_seq": before["last_seq"], "in_flight_entry_id": before["in_flight_entry_id"]}
        if update_rows(AgentSession, condition, changed, using=self.using):
            return
        if not self._store_locks_writers:
            raise _StaleHint  # nothing stored yet: made again from a read
        fresh = self._meta_for_update(meta.session_id)
        moved = [name for name in _TREE_FIELDS if getattr(fresh, name) != before[name]]
        if moved:
            raise SessionBusy(_("session %(meta_session_id)s changed while this write was made (%(join_moved)s); try again") % {"meta_session_id": meta.session_id, "join_moved": ', '.join(moved)})
        shift = fresh.revision - before["revision"]
        for event in events:
            event["revision"] += shift
        for name, value in changed.items():
            setattr(fresh, name, value)
        fresh.revision = events[-1]["revision"]
        fresh.save(using=self.using)
        _copy_meta(fresh, meta)

    def _record_events(self, meta: AgentSession, events: _Events) -> None:
        actor_id = current_actor_id()  # who the services said acts (sessions_tree.acting)
        insert(
            [
                SessionEvent(session_id=meta.pk, revision=e["revision"], type=e["type"], payload=_event_json(e, events.entry_raw(e)), actor_id=actor_id)
                for e in events
            ],
            using=self.using,
        )
        keep = settings.NETA_EVENT_LOG_SIZE
        last = events[-1]["revision"]
        # Prune in steps rather than on every write.
        if last % 64 < len(events) or last <= len(events):
            SessionEvent.objects.using(self.using).filter(session=meta, revision__lte=last - keep).delete()

    def _append_one(
        self,
        session_id: str,
        build: Callable,
        *,
        parent_override: str | None | object = MISSING,
        wants_index: bool = False,
        meta_hint: AgentSession | None = None,
        also: Callable[[dict], None] | None = None,
    ) -> dict:
        stored: list[dict] = []

        def write(trust: bool) -> dict:
            with self._write_locked(session_id, meta_hint):
                with self._change(session_id, meta_hint, also and (lambda: also(stored[0])), trust_hint=trust) as (meta, index, emit):
                    if meta.in_flight_entry_id:
                        raise SessionBusy(
                            _("session %(session_id)s has entry %(meta_in_flight_entry_id)s in flight; finalize it first") % {"session_id": session_id, "meta_in_flight_entry_id": meta.in_flight_entry_id}
                        )
                    if parent_override is MISSING:
                        parent = self._leaf(meta, index)
                    else:
                        parent = parent_override
                        if parent is not None and parent not in index.by_id:
                            raise EntryNotFound(_("entry %(parent)r not found in session %(session_id)s") % {"parent": parent, "session_id": session_id})
                    new_id = new_entry_id(_TakenIds(index, meta))
                    pending = pending_entry(build(parent, new_id, index) if wants_index else build(parent, new_id))
                    self._add_at_leaf(meta, index, emit, [pending])
                    stored[:] = [pending.entry]
            return stored[0]

        return self._hinted(meta_hint, write)

    def _add_at_leaf(
        self, meta: AgentSession, index: SessionIndex, emit: Callable, pending: list[PendingEntry], *, store: bool = True
    ) -> None:
        """Store ``pending`` (each the child of the one before), count them, move the leaf
        to the last one; one event each. ``store=False``: the caller stores them."""
        _count(meta, index, pending[0].entry)
        for item in pending[1:]:  # a chain: each the first child of the entry before (no new tip, no root)
            _count_kind(meta, item.entry)
        if store:
            self._store_append(meta, index, pending)
        for item in pending:
            entry = item.entry
            meta.leaf_entry_id = entry["id"]
            emit(te.entry_appended, entry=entry, leaf_id=entry["id"], raw=item.raw)


_META_FIELDS = tuple(f.attname for f in AgentSession._meta.concrete_fields)
# What a change to the tree reads from the row: a write on a stale copy of these is refused.
_TREE_FIELDS = (
    "leaf_entry_id", "root_entry_id", "in_flight_entry_id", "in_flight_payload", "last_seq",
    "entry_count", "message_count", "tip_count", "compaction_count", "branch_summary_count", "label_count",
)  # fmt: skip
_MUTABLE_FIELDS = tuple(f.attname for f in AgentSession._meta.concrete_fields if f.get_internal_type() == "JSONField")


def _values_of(meta: AgentSession) -> dict:
    """The row's values as ``meta`` holds them (JSON fields copied: changes mutate them)."""
    values = {name: getattr(meta, name) for name in _META_FIELDS}
    for name in _MUTABLE_FIELDS:
        if values[name]:
            values[name] = copy.deepcopy(values[name])
    return values


def _copy_of(meta: AgentSession) -> AgentSession:
    """A copy of the caller's row to change (the caller's own copy is updated only after the commit)."""
    twin = copy.copy(meta)
    twin._state = copy.copy(meta._state)
    for name in _MUTABLE_FIELDS:
        value = getattr(meta, name)
        setattr(twin, name, copy.deepcopy(value) if value else type(value)())
    return twin


def _copy_meta(source: AgentSession, target: AgentSession) -> None:
    """``target`` (a caller's copy of the row) as ``source`` was committed."""
    for name in _META_FIELDS:
        setattr(target, name, getattr(source, name))


class _RecoverFirst(Exception):
    """Raised inside ``_change`` (before the caller's code runs) to repair the store first."""


class _StaleHint(Exception):
    """The caller's copy of the row was stale and nothing was stored: make the change again from a read."""


class _TakenIds:
    """Every id in the session (all branches) plus the in-flight one."""

    def __init__(self, index: SessionIndex, meta: AgentSession):
        self.index, self.meta = index, meta

    def __contains__(self, entry_id: str) -> bool:
        return entry_id in self.index.by_id or entry_id == self.meta.in_flight_entry_id


class _Also:
    """Taken ids plus the ids of entries built in this change but not stored yet."""

    def __init__(self, taken, pending: list[PendingEntry]):
        self.taken, self.pending = taken, pending

    def __contains__(self, entry_id: str) -> bool:
        return entry_id in self.taken or any(p.entry["id"] == entry_id for p in self.pending)


def _with_tree_keys(entry: dict, new_id: str, parent_id: str | None) -> dict:
    """``entry`` with id/parentId/timestamp where Pi puts them (caller's values win)."""
    entry_id = entry.get("id", new_id)
    if not isinstance(entry_id, str) or not entry_id:
        raise InvalidEntry(_("'id' must be a non-empty string"))
    tree = {"id": entry_id, "parentId": entry.get("parentId", parent_id), "timestamp": entry.get("timestamp") or now_iso()}
    rest = {k: v for k, v in entry.items() if k not in tree and k != "type"}
    if entry["type"] in _LATE_ID_TYPES:
        return {"type": entry["type"], **rest, **tree}
    return {"type": entry["type"], **tree, **rest}


_FIXED_KEYS = frozenset({"type", "id", "parentId", "timestamp", "batchId"})


def _check_neta_fields(current: dict, fields) -> None:
    """What may change in an in-flight Neta entry: anything but its identity."""
    if current.get("type") not in E.NETA_ENTRY_TYPES:
        raise InvalidEntry(_("only Neta entries (%(join_sorted_e_neta_entry_types)s) take fields, not %(current_get_type)r") % {"join_sorted_e_neta_entry_types": ', '.join(sorted(E.NETA_ENTRY_TYPES)), "current_get_type": current.get('type')})
    if not isinstance(fields, dict):
        raise InvalidEntry(_("fields must be a JSON object"))
    fixed = sorted(set(fields) & _FIXED_KEYS)
    if fixed:
        raise InvalidEntry(_("fields cannot change %(join_fixed)s") % {"join_fixed": ', '.join(fixed)})


def _check_message(message) -> None:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise InvalidEntry(_("a message is a JSON object with a string 'role'"))


def _count(meta: AgentSession, index: SessionIndex, entry: dict) -> None:
    """Update the counters for one new entry; call it before the index knows the entry."""
    parent = entry.get("parentId")
    parent_known = isinstance(parent, str) and parent in index.by_id
    if not parent_known or parent in index.first_child:
        meta.tip_count += 1  # a new root, or a new sibling: one more branch tip
    _count_kind(meta, entry)
    if meta.root_entry_id is None and not parent_known:
        meta.root_entry_id = entry["id"]


def count_indexed(meta: AgentSession, index: SessionIndex, record: Record) -> None:
    """``_count`` for an entry the index already holds (one adopted after a crash)."""
    parent = record.parent_id
    parent_known = parent is not None and parent in index.by_id
    if not parent_known or index.first_child.get(parent, record.id) != record.id:
        meta.tip_count += 1
    _count_kind(meta, record.entry)
    if meta.root_entry_id is None and not parent_known:
        meta.root_entry_id = record.id


def _count_kind(meta: AgentSession, entry: dict) -> None:
    meta.entry_count += 1
    kind = entry.get("type")
    if kind == "message":
        meta.message_count += 1
    elif kind == "compaction":
        meta.compaction_count += 1
    elif kind == "branch_summary":
        meta.branch_summary_count += 1
    elif kind == "label":
        meta.label_count += 1
    elif kind == "session_info":
        name = entry.get("name")
        meta.title = name.strip()[:MAX_TITLE_CHARS] if isinstance(name, str) else ""


def _count_all(meta: AgentSession, entries: list[dict]) -> None:
    ids = {e.get("id") for e in entries}
    parents = {e.get("parentId") for e in entries}
    for entry in entries:
        _count_kind(meta, entry)
    meta.tip_count = sum(1 for i in ids if i not in parents)
    for entry in entries:
        if entry.get("parentId") not in ids:
            meta.root_entry_id = entry.get("id")
            break


def recount(meta: AgentSession, records: list[Record]) -> None:
    """Counters (and root, title) from scratch, from the records a store holds."""
    meta.entry_count = len(records)
    meta.message_count = meta.compaction_count = meta.branch_summary_count = meta.label_count = 0
    field = {"message": "message_count", "compaction": "compaction_count", "branch_summary": "branch_summary_count", "label": "label_count"}
    ids = {r.id for r in records}
    parents = {r.parent_id for r in records}
    for record in records:
        name = field.get(record.type)
        if name is not None:
            setattr(meta, name, getattr(meta, name) + 1)
    meta.tip_count = sum(1 for i in ids if i not in parents)
    meta.root_entry_id = next((r.id for r in records if r.parent_id not in ids), None)
    infos = [r for r in records if r.type == "session_info"]
    if infos:
        name = infos[-1].entry.get("name")
        meta.title = clean_value(name.strip()[:MAX_TITLE_CHARS]) if isinstance(name, str) else ""


def _last_session_name(entries) -> str | None:
    name = None
    for entry in entries:
        if entry.get("type") == "session_info":
            value = entry.get("name")
            name = value.strip() if isinstance(value, str) else ""
    return name
