"""Importing Pi session files into a provider, and exporting sessions as Pi files.

Import follows Pi's loader: tolerant parsing (malformed lines skipped and
counted), v1/v2 files migrated in memory, and the leaf at the last entry line.
A file without a valid header, or with a header field or an entry the store
cannot hold safely (``limits``), is refused whole: nothing is imported and the
source is never touched. Entries of a current (v3) file keep their exact bytes,
so ``export(import(f))`` reproduces every valid entry line of ``f`` — except the
lines repaired on the way in (a lone surrogate, an overflowing number), which
the import report lists.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from sessions_tree import jsonl
from sessions_tree.clean import clean_value, cleaning_reasons
from sessions_tree.errors import InvalidEntry, InvalidSessionFile, SessionIdTaken
from sessions_tree.ids import new_session_id
from sessions_tree.limits import check_entry_ids, check_entry_size, check_header
from sessions_tree.migration import migrate_to_current
from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider, provider_for_session
from sessions_tree.providers.base import PendingEntry
from sessions_tree.providers.file import fsync_dir, write_all

MAX_REPORTED_LINES = 100


def read_session_file(path: Path) -> tuple[dict, str, list[PendingEntry], dict]:
    """(header, header line, entries, diagnostics) of a Pi file, migrated to v3.

    What the store could not hold is repaired here and reported under
    ``diagnostics["import"]``: a lone surrogate becomes U+FFFD and a number that
    overflows (``1e400``) becomes ``null``, as ``JSON.stringify`` writes it (the
    line is then stored re-serialized: ``repairedLines``). Lines Pi skips
    (``NaN``, damaged JSON) and lines that are no entry are skipped
    (``skippedLines``). Parent cycles are kept and reported (``cycles``); reads
    show them as diagnostics. An entry whose id does not fit the id columns or
    whose JSON is over ``NETA_MAX_ENTRY_BYTES`` refuses the whole file.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidSessionFile(f"{path}: cannot read ({exc.strerror or exc})") from exc
    # Node decodes invalid UTF-8 as U+FFFD; so do we.
    text = data.decode("utf-8", errors="replace")
    parsed = jsonl.parse_session_text(text)
    if parsed.header is None:
        reason = parsed.header_error or "no session header"
        raise InvalidSessionFile(f"{path}: not a Pi session file ({reason})")
    header, entries, migrated = migrate_to_current(parsed.header, parsed.entries, positions=parsed.positions)
    if migrated:
        header_raw = jsonl.dumps(header)
        raws = [jsonl.dumps(e) for e in entries]
    else:
        header_raw = parsed.header_line or jsonl.dumps(header)
        raws = list(parsed.raw_lines)
    line_numbers = parsed.line_numbers if len(parsed.line_numbers) == len(entries) else [None] * len(entries)
    header_repairs = cleaning_reasons(header)
    if header_repairs:
        header = clean_value(header)
        header_raw = jsonl.dumps(header)
    check_header(header)
    pending: list[PendingEntry] = []
    skipped: list[dict] = [{"line": d.line, "kind": d.kind, "message": d.message} for d in parsed.diagnostics]
    repaired: list[dict] = []
    for entry, raw, line in zip(entries, raws, line_numbers):
        where = f"line {line}: " if line is not None else ""
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not isinstance(entry.get("type"), str):
            skipped.append({"line": line, "kind": "not_an_entry", "message": "no string 'id' and 'type'"})
            continue
        reasons = cleaning_reasons(entry)
        if reasons:
            entry = clean_value(entry)
            raw = jsonl.dumps(entry)
            repaired.append({"line": line, "kinds": sorted(reasons)})
        try:
            check_entry_ids(entry, where=where)
            check_entry_size(raw, where=where)
        except InvalidEntry as exc:
            raise InvalidSessionFile(f"{path}: {exc}", field=f"line{line}.{exc.field}" if line else exc.field) from None
        pending.append(PendingEntry(entry, raw))
    skipped.sort(key=lambda d: d["line"] or 0)
    report = {
        "source": str(path),
        "fileVersion": parsed.file_version,
        "migrated": migrated,
        "skippedLines": skipped[:MAX_REPORTED_LINES],
        "skippedLineCount": len(skipped),
        "skippedEntries": sum(1 for d in skipped if d["kind"] == "not_an_entry"),
        "repairedLines": repaired[:MAX_REPORTED_LINES],
        "repairedLineCount": len(repaired),
    }
    if header_repairs:
        report["repairedHeader"] = sorted(header_repairs)
    cycles = find_cycles(p.entry for p in pending)
    if cycles:
        report["cycles"] = [cycle[:50] for cycle in cycles[:20]]  # bounded: the first 50 ids of the first 20
    return header, header_raw, pending, {"import": report}


def find_cycles(entries) -> list[list[str]]:
    """Parent cycles among ``entries`` (Pi's last-wins index), each as its ids, child first."""
    parent: dict[str, str | None] = {}
    for entry in entries:
        p = entry.get("parentId")
        parent[entry["id"]] = p if isinstance(p, str) else None
    state: dict[str, int] = {}  # 1: on the walk being made, 2: done
    cycles: list[list[str]] = []
    for start in parent:
        walk: list[str] = []
        node: str | None = start
        while node is not None and node in parent and node not in state:
            state[node] = 1
            walk.append(node)
            node = parent[node]
        if node is not None and state.get(node) == 1:
            cycles.append(walk[walk.index(node) :])
        for done in walk:
            state[done] = 2
    return cycles


def last_whole_entry(entries) -> str | None:
    """The id of the last entry (Pi's last-wins index, file order) whose path to the root
    meets no parent cycle; ``None`` if there is none. Linear: each entry is judged once."""
    parent: dict[str, str | None] = {}
    for entry in entries:
        p = entry.get("parentId")
        parent.pop(entry["id"], None)  # last wins, and keeps the last position
        parent[entry["id"]] = p if isinstance(p, str) else None
    whole: dict[str, bool] = {}
    for start in parent:
        walk: list[str] = []
        on_walk: set[str] = set()
        node: str | None = start
        verdict = True
        while node is not None and node in parent:
            if node in whole:
                verdict = whole[node]
                break
            if node in on_walk:
                verdict = False
                break
            on_walk.add(node)
            walk.append(node)
            node = parent[node]
        for seen in walk:
            whole[seen] = verdict
    return next((entry_id for entry_id in reversed(list(parent)) if whole.get(entry_id)), None)


def import_session_file(
    path: Path,
    *,
    provider_kind: str = "file",
    using: str = "default",
    user=None,
    agent: str = "",
    source_name: str | None = None,
    leaf_off_cycles: bool = False,
) -> AgentSession:
    """Import a Pi file. A header id that is already taken (by anyone) is replaced by a
    fresh UUIDv7, and ``diagnostics["import"]["idChanged"]`` says so; entries keep their bytes.
    ``source_name``: what the report calls the file (default: its path). ``leaf_off_cycles``:
    when the last entry's path runs into a parent cycle (no context can be built from it), the
    leaf is the last entry whose path is whole instead (none: the session starts a new root),
    reported as ``leafMoved``; the cyclic entries stay in the file as they were."""
    header, header_raw, pending, diagnostics = read_session_file(path)
    if source_name is not None:
        diagnostics["import"]["source"] = source_name
    provider = get_provider(provider_kind, using=using)
    leaf = pending[-1].entry["id"] if pending else None  # Pi: the last entry line
    if leaf_off_cycles and diagnostics["import"].get("cycles"):
        whole = last_whole_entry(p.entry for p in pending)
        if whole != leaf:
            diagnostics["import"]["leafMoved"] = {"from": leaf, "to": whole, "why": "the last entry's path runs into a parent cycle"}
            leaf = whole
    for attempt in range(3):
        try:
            return provider.create_from_entries(
                header=header,
                header_raw=header_raw,
                pending=pending,
                leaf_id=leaf,
                user=user,
                agent=agent,
                diagnostics=diagnostics,
            )
        except SessionIdTaken:
            if attempt == 2:
                raise
            original = diagnostics["import"].get("idChanged", {}).get("from", header["id"])
            header = {**header, "id": new_session_id()}
            header_raw = jsonl.dumps(header)
            diagnostics["import"]["idChanged"] = {"from": original, "to": header["id"]}
    raise AssertionError("unreachable")  # pragma: no cover


def export_lines(session_id: str, *, using: str = "default") -> Iterable[str]:
    return provider_for_session(session_id, using=using).export_lines(session_id)


EXPORT_WRITE_BYTES = 1 << 20


def export_session(session_id: str, destination: Path, *, using: str = "default") -> Path:
    """Write the session's Pi file to ``destination``, streamed (memory stays constant in the
    session's size): lines go to a temp file beside it a megabyte at a time, then fsync and
    rename, so a reader sees the old file or the whole new one, never half."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = destination.with_name(f".{destination.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    lines = iter(export_lines(session_id, using=using))
    first = next(lines, None)  # an unknown session fails before a file is made
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            buffer: list[bytes] = []
            size = 0
            for line in itertools.chain([first] if first is not None else [], lines):
                data = line.encode("utf-8")
                buffer.append(data)
                size += len(data)
                if size >= EXPORT_WRITE_BYTES:
                    write_all(fd, b"".join(buffer))
                    buffer, size = [], 0
            write_all(fd, b"".join(buffer))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, destination)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(destination.parent)
    return destination
