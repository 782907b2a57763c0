"""The ``file`` provider: one Pi-compatible JSONL file per session.

``<NETA_SESSIONS_DIR>/<cwd-slug>/<timestamp>_<session-id>.jsonl``; the header is
written once at creation, then every append writes one whole line and calls
``fdatasync`` before it is acknowledged. The file is never rewritten for normal
work (an in-flight entry lives in the meta row until it is finalized) and there
are no side files.

Writers hold ``flock(LOCK_EX)`` on the file across the append and the leaf
update; readers that need a consistent (file, revision) pair hold ``LOCK_SH``.
``flock`` locks belong to the open file description, so — unlike POSIX record
locks — closing another descriptor of the same file does not drop them.

A torn last line (a writer killed mid-line) is repaired under the lock before
the next append: a fragment that is a whole JSON object gets its newline, any
other fragment is cut off and kept in the session's diagnostics.

The meta row records what was acknowledged: ``last_seq`` is the file size after
the last acknowledged write, ``entry_count`` the entries it holds. Reads show
those entries. A writer killed after ``fdatasync`` but before its commit leaves
a complete line nobody acknowledged; Pi reads it, so the next write adopts it
(counted, logged as an event, in its own transaction). A file found shorter than
acknowledged is reported (``fileShrank``) and counted again.

Every line is parsed when it is first read (a damaged line is skipped, like Pi's
``JSON.parse`` skips it, and counted in the read diagnostics); the parsed value
is kept only for the entries on the path to the persisted leaf.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import threading
from pathlib import Path

import orjson
from django.conf import settings
from django.utils.translation import gettext as _

from sessions_tree import jsonl
from sessions_tree import tree_events as te
from sessions_tree.errors import InvalidSessionFile
from sessions_tree.index import (
    INDEXES,
    PAUSE_FROM_BYTES,
    Record,
    SessionIndex,
    gc_paused,
    record_from_entry,
    record_from_line,
)
from sessions_tree.models import AgentSession, SessionProviderKind
from sessions_tree.providers.base import (
    PendingEntry,
    SessionTreeProvider,
    count_indexed,
    recount,
)

MAX_KEPT_FRAGMENT = 64 * 1024


MAX_NAME_BYTES = 255  # one path component on Linux and macOS


def cwd_slug(cwd: str) -> str:
    """Pi's folder name for a working directory: ``/home/u/proj`` → ``--home-u-proj--``.

    A slug longer than a file name may be (Pi would fail to create it) keeps its
    first 200 bytes and gets a hash of the whole ``cwd``: one folder per cwd still.
    """
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    slug = "--" + trimmed.replace("/", "-").replace("\\", "-").replace(":", "-").replace("\0", "-") + "--"
    encoded = slug.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_NAME_BYTES:
        return slug
    digest = hashlib.sha256(cwd.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    head = encoded[:200].decode("utf-8", "ignore")
    return f"{head}-{digest}--"


def session_file_name(timestamp: str, session_id: str) -> str:
    return f"{timestamp.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``path`` through a temp file + fsync + rename: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


class FileProvider(SessionTreeProvider):
    kind = SessionProviderKind.FILE.value
    _store_locks_writers = True  # every writer of a session holds its file's flock

    def __init__(self, using: str = "default", sessions_dir: Path | None = None):
        super().__init__(using)
        self._sessions_dir = sessions_dir

    @property
    def sessions_dir(self) -> Path:
        return Path(self._sessions_dir or settings.NETA_SESSIONS_DIR)

    # ------------------------------------------------------------------ creation / deletion

    def session_path(self, cwd: str, timestamp: str, session_id: str) -> Path:
        """Where a new session's file goes; refused unless it resolves inside the sessions folder.

        The header fields were checked already (``limits.check_header``); this is
        the second line of defence, for the folder and for the file.
        """
        root = Path(os.path.realpath(self.sessions_dir))
        folder = Path(os.path.realpath(root / cwd_slug(cwd or "/")))
        name = session_file_name(timestamp, session_id)
        path = Path(os.path.realpath(folder / name))
        if folder.parent != root or path.parent != folder or len(name.encode("utf-8")) > MAX_NAME_BYTES:
            raise InvalidSessionFile(
                _("header: the session file would not be a file of its own folder inside the sessions directory"),
                field="header",
            )
        return path

    def _store_create(self, meta: AgentSession, header_raw: str, records: list[PendingEntry]) -> None:
        header = jsonl.loads(header_raw)
        path = self.session_path(meta.cwd, header.get("timestamp") or "", meta.session_id)
        lines = [header_raw, *(p.raw for p in records)]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        if path.exists():
            raise InvalidSessionFile(_("the session file %(path_name)s already exists") % {"path_name": path.name}, field="header.id")
        atomic_write(path, data)
        meta.session_file = str(path)
        meta.last_seq = len(data)
        AgentSession.objects.using(self.using).filter(pk=meta.pk).update(
            session_file=meta.session_file, last_seq=meta.last_seq
        )

    def _store_delete(self, meta: AgentSession) -> None:
        path = Path(meta.session_file)
        path.unlink(missing_ok=True)
        INDEXES.pop(self._cache_key(meta))

    # ------------------------------------------------------------------ locking and reading

    @contextlib.contextmanager
    def _store_lock(self, meta: AgentSession, *, shared: bool = False):
        path = meta.session_file
        if path in _locks.exclusive:
            # This thread holds the write lock already (a service took it before its
            # transaction, then calls a provider method): flock belongs to the open file,
            # so locking through a second descriptor would wait on ourselves.
            yield _locks.fds[path]
            return
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND if not shared else os.O_RDONLY)
        except FileNotFoundError:
            raise InvalidSessionFile(_("session file %(path)s of session %(meta_session_id)s is missing") % {"path": path, "meta_session_id": meta.session_id}) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            _locks.fds[path] = fd
            if not shared:
                _locks.exclusive.add(path)
            yield fd
        finally:
            _locks.exclusive.discard(path)
            _locks.fds.pop(path, None)
            os.close(fd)  # closing the description releases the flock

    def _store_index(self, meta: AgentSession) -> SessionIndex:
        path = meta.session_file
        cache_key = self._cache_key(meta)
        index = INDEXES.get_or_add(cache_key, SessionIndex, lambda ix: True)
        grew = False
        with index.lock:
            fd = _locks.fds.get(path)
            own = fd is None
            if own:
                fd = os.open(path, os.O_RDONLY)
            try:
                st = os.fstat(fd)
                key = (st.st_dev, st.st_ino)
                if index.source_key != key or st.st_size < index.position:
                    fresh = SessionIndex(source_key=key)
                    INDEXES.replace(cache_key, fresh)
                    index = fresh
                if st.st_size > index.position:
                    _read_new_lines(fd, index, st.st_size, meta)
                    grew = True
            finally:
                if own:
                    os.close(fd)
        if grew:
            INDEXES.grew(cache_key, index)
        return index

    def export_lines(self, session_id: str):
        """The session as Pi v3 JSONL lines, read from the file in chunks (constant memory).

        Only the bytes reads show are read (the acknowledged ``last_seq``, or the index's
        position past it), and they are never rewritten
        (appends go after them, a torn tail is cut after them), so no lock is held while
        the caller consumes the lines. The lines are the ones reads show: the same parser
        skips what the index skips.
        """
        meta = self.get_session(session_id)
        with self._store_lock(meta, shared=True):
            meta = self.get_session(session_id)
            # What reads show: the complete lines the index has parsed (a file damaged or
            # adopted after a crash can hold whole lines past the acknowledged size).
            size = max(meta.last_seq, self._store_index(meta).position)
        yield meta.header + "\n"
        scratch = SessionIndex()
        with open(meta.session_file, "rb") as handle:
            done, carry, first = 0, b"", True
            while done < size:
                block = handle.read(min(EXPORT_CHUNK, size - done))
                if not block:
                    break  # the file was cut behind our back: export what is there
                done += len(block)
                data = carry + block
                end = data.rfind(b"\n")
                if end < 0:
                    carry = data
                    continue
                data, carry = data[: end + 1], data[end + 1 :]
                offset = 0
                if first and data.startswith(b"\xef\xbb\xbf"):
                    data, offset = data[3:], 3
                first = False
                _index_lines(scratch, data, offset, _DROP_PARSED)
                for record in scratch.records:
                    yield record.raw_text + "\n"
                scratch.records.clear()
                scratch.by_id.clear()
                scratch.first_child.clear()

    def _cache_key(self, meta: AgentSession) -> tuple[str, str]:
        return ("file", meta.session_file)

    # ------------------------------------------------------------------ writing

    def _visible_records(self, meta: AgentSession, index: SessionIndex) -> list[Record]:
        records = index.records
        if len(records) > meta.entry_count and meta.last_seq:
            # Lines a writer made durable but died before committing: the next
            # write adopts them (``_store_recover``); until then they have no revision.
            return records[: meta.entry_count]
        return records

    def _store_recovery_needed(self, meta: AgentSession) -> bool:
        # Every acknowledged write leaves the file exactly ``last_seq`` bytes long.
        fd = _locks.fds[meta.session_file]
        return meta.last_seq == 0 or os.fstat(fd).st_size != meta.last_seq

    def _store_recover(self, meta: AgentSession, index: SessionIndex, emit) -> bool:
        """Repair the tail a killed writer left, then adopt the lines it made durable.

        ``last_seq`` is the file size of the last acknowledged write and
        ``entry_count`` the number of entries it acknowledged. A writer that dies
        between ``fdatasync`` and its commit leaves a complete line the meta row
        does not know. Pi reads that line, so Neta keeps it too: it is counted and
        gets an event like any append, but the leaf stays where the acknowledged
        history put it. If it is the finalized copy of the entry in flight, the
        entry is finalized now. A file shorter than acknowledged (cut behind
        Neta's back) is reported and counted again.
        """
        fd = _locks.fds[meta.session_file]
        found = os.fstat(fd).st_size
        changed = self._repair_tail(fd, meta, index)
        size = os.fstat(fd).st_size
        if size > index.position:
            _read_new_lines(fd, index, size, meta)
        if meta.last_seq == 0:  # a session from before sizes were recorded
            meta.last_seq = index.position
            return True
        if found < meta.last_seq:
            # Acknowledged bytes are gone (the file was cut behind our back): say so,
            # and count what is left.
            shrank = meta.diagnostics.setdefault("fileShrank", [])
            shrank.append({"acknowledgedSize": meta.last_seq, "size": found})
            del shrank[:-20]
            recount(meta, index.records)
            meta.last_seq = index.position
            return True
        if index.position == meta.last_seq:
            return changed
        adopted = index.records[meta.entry_count :]
        for record in adopted:
            entry = record.entry
            count_indexed(meta, index, record)
            if record.id == meta.in_flight_entry_id:
                meta.in_flight_entry_id = None
                meta.in_flight_payload = ""
                emit(te.entry_updated, entry=entry, in_flight=False, recovered=True)
            else:
                emit(te.entry_appended, entry=entry, leaf_id=meta.leaf_entry_id, recovered=True)
        if adopted:
            recovered = meta.diagnostics.setdefault("adoptedEntries", [])
            recovered.extend(r.id for r in adopted)
            del recovered[:-100]
        meta.last_seq = index.position
        return True

    def _store_read_diagnostics(self, meta: AgentSession, index: SessionIndex) -> dict:
        fd = _locks.fds[meta.session_file]
        pending = os.fstat(fd).st_size - index.position
        if pending > 0:  # nobody is writing (we hold the shared lock): a torn last line
            return {"unterminatedTail": {"offset": index.position, "length": pending}}
        return {}

    def _store_append(self, meta: AgentSession, index: SessionIndex, pending: list[PendingEntry]) -> None:
        fd = _locks.fds[meta.session_file]
        self._repair_tail(fd, meta, index)  # done by _store_recover already; cheap to check
        data = "".join(p.raw + "\n" for p in pending).encode("utf-8")
        write_all(fd, data)
        os.fdatasync(fd)
        # Our own lines: index them now (the lock guarantees nobody wrote in between).
        size = os.fstat(fd).st_size
        _read_new_lines(fd, index, size, meta)
        meta.last_seq = index.position

    def _repair_tail(self, fd: int, meta: AgentSession, index: SessionIndex) -> bool:
        """Give a whole last entry its newline, or cut off a torn fragment (kept in the diagnostics)."""
        size = os.fstat(fd).st_size
        if size == 0:
            return False
        if os.pread(fd, 1, size - 1) == b"\n":
            return False
        # Find the start of the torn line.
        start = size
        chunk = 64 * 1024
        while start > 0:
            lo = max(0, start - chunk)
            block = os.pread(fd, start - lo, lo)
            cut = block.rfind(b"\n")
            if cut >= 0:
                start = lo + cut + 1
                break
            start = lo
        fragment = os.pread(fd, size - start, start)
        if record_from_line(fragment.strip()) is not None:
            write_all(fd, b"\n")  # a whole entry that only lacked its newline
            os.fdatasync(fd)
            return True
        os.ftruncate(fd, start)
        os.fdatasync(fd)
        torn = meta.diagnostics.setdefault("tornTails", [])
        torn.append(
            {
                "offset": start,
                "length": len(fragment),
                "fragmentBase64": base64.b64encode(fragment[:MAX_KEPT_FRAGMENT]).decode("ascii"),
                "truncated": len(fragment) > MAX_KEPT_FRAGMENT,
            }
        )
        del torn[:-20]  # keep the last twenty
        if index.position > start:  # pragma: no cover - the index never reads past a newline
            self._forget_index(meta)
        return True

    def _store_in_flight_end(self, meta, index, pending, status) -> None:
        self._store_append(meta, index, [pending])


class _Locks(threading.local):
    def __init__(self):
        self.fds: dict[str, int] = {}
        self.exclusive: set[str] = set()  # paths whose fd above holds LOCK_EX


_locks = _Locks()


def _read_new_lines(fd: int, index: SessionIndex, size: int, meta: AgentSession) -> None:
    """Index the complete lines between ``index.position`` and ``size``."""
    start = index.position
    data = os.pread(fd, size - start, start)
    end = data.rfind(b"\n")
    if end < 0:
        return  # only a torn or in-progress line
    data = data[: end + 1]
    position = start + end + 1
    offset = start  # where the current line starts in the file
    if start == 0 and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
        offset = 3
    # A first read keeps the parsed entries on the path to the persisted leaf (the
    # context needs them next); lines appended since the last read are kept whole.
    want = meta.leaf_entry_id if start == 0 else _KEEP_ALL
    with gc_paused(large=len(data) >= PAUSE_FROM_BYTES):
        _index_lines(index, data, offset, want)
    index.position = position


_KEEP_ALL = object()
_DROP_PARSED = object()  # an id no entry has: parse each line, keep none (exports)
EXPORT_CHUNK = 1 << 20


def _index_lines(index: SessionIndex, data: bytes, offset: int, want) -> None:
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: nothing
    first_line_no = index.lines_seen + 1
    diagnostics = index.diagnostics
    i = 0
    if not index.header_seen:
        while i < len(lines):
            raw = lines[i].strip()
            i += 1
            if not raw:
                continue
            try:
                header = jsonl.loads(raw)
            except ValueError:
                index.note_malformed(first_line_no + i - 1)
                continue
            index.header_seen = True
            if isinstance(header, dict) and header.get("type") == "session" and isinstance(header.get("id"), str):
                break
            diagnostics["badHeader"] = True  # reported, never "repaired" by wiping the file
            i -= 1  # the line is read again as an entry below
            break
    # Backwards, so that the path to ``want`` is met leaf first (parents are stored
    # before their children): those entries keep their parsed value, and the path
    # is handed to the index for the context that comes next.
    records: list[Record | None] = [None] * len(lines)
    keep_all = want is _KEEP_ALL
    path: list[Record] = []
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    for k in range(len(lines) - 1, i - 1, -1):
        raw = lines[k].strip()
        if not raw:
            continue
        # record_from_line, inlined for the common case (a valid entry line).
        try:
            obj = loads(raw)
        except decode_error:
            record = record_from_line(raw, keep=True)
            if record is not None and record.raw is not raw:
                diagnostics["invalidUtf8Lines"] = diagnostics.get("invalidUtf8Lines", 0) + 1
        else:
            kind = obj.get("type") if type(obj) is dict else None
            entry_id = obj.get("id") if kind is not None else None
            if type(kind) is str and kind != "session" and type(entry_id) is str:
                parent = obj.get("parentId")
                record = Record(entry_id, parent if type(parent) is str else None, kind, raw, obj)
            else:
                record = record_from_entry(obj, raw)
        if record is None:
            records[k] = _SKIPPED if raw.startswith(b'{"type":"session"') else _MALFORMED
            continue
        if record.id == want:
            want = record.parent_id
            path.append(record)
        elif not keep_all:
            record.drop_parsed()
        records[k] = record
    stored, by_id, first_child = index.records, index.by_id, index.first_child
    for k in range(i):
        offset += len(lines[k]) + 1
    for k in range(i, len(lines)):
        offset += len(lines[k]) + 1
        record = records[k]
        if record is None:
            continue
        if record is _MALFORMED:
            index.note_malformed(first_line_no + k)
        elif record is _SKIPPED:
            diagnostics["extraHeaders"] = diagnostics.get("extraHeaders", 0) + 1
        else:
            record.seq = offset  # stable order, and the acknowledged size after this line
            stored.append(record)  # SessionIndex.add, inlined
            by_id[record.id] = record
            first_child.setdefault(record.parent_id, record.id)
    index.lines_seen += len(lines)
    if path and want is None and not keep_all:  # the walk reached a root
        path.reverse()
        index.remember_path(path)


_MALFORMED = Record("", None, "", b"")
_SKIPPED = Record("", None, "", b"")
