"""Importing Pi session files into a provider, and exporting sessions as Pi files.

Import follows Pi's loader: tolerant parsing (malformed lines skipped and
counted), v1/v2 files migrated in memory, and the leaf at the last entry line.
A file without a valid header is refused whole: nothing is imported and the
source is never touched. Entries of a current (v3) file keep their exact bytes,
so ``export(import(f))`` reproduces every valid entry line of ``f``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sessions_tree import jsonl
from sessions_tree.errors import InvalidSessionFile
from sessions_tree.migration import migrate_to_current
from sessions_tree.models import AgentSession
from sessions_tree.providers import get_provider, provider_for_session
from sessions_tree.providers.base import PendingEntry


def read_session_file(path: Path) -> tuple[dict, str, list[PendingEntry], dict]:
    """(header, header line, entries, diagnostics) of a Pi file, migrated to v3."""
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
    pending: list[PendingEntry] = []
    skipped = 0
    for entry, raw in zip(entries, raws):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not isinstance(entry.get("type"), str):
            skipped += 1
            continue
        pending.append(PendingEntry(entry, raw))
    diagnostics = {
        "import": {
            "source": str(path),
            "fileVersion": parsed.file_version,
            "migrated": migrated,
            "skippedLines": [{"line": d.line, "kind": d.kind, "message": d.message} for d in parsed.diagnostics[:100]],
            "skippedLineCount": len(parsed.diagnostics),
            "skippedEntries": skipped,
        }
    }
    return header, header_raw, pending, diagnostics


def import_session_file(path: Path, *, provider_kind: str = "file", using: str = "default", user=None, agent: str = "") -> AgentSession:
    header, header_raw, pending, diagnostics = read_session_file(path)
    provider = get_provider(provider_kind, using=using)
    leaf = pending[-1].entry["id"] if pending else None  # Pi: the last entry line
    return provider._create_from(
        header=header,
        header_raw=header_raw,
        pending=pending,
        leaf_id=leaf,
        user=user,
        agent=agent,
        diagnostics=diagnostics,
    )


def export_lines(session_id: str, *, using: str = "default") -> Iterable[str]:
    return provider_for_session(session_id, using=using).export_lines(session_id)


def export_session(session_id: str, destination: Path, *, using: str = "default") -> Path:
    from sessions_tree.providers.file import atomic_write

    data = "".join(export_lines(session_id, using=using)).encode("utf-8")
    atomic_write(Path(destination), data)
    return Path(destination)
