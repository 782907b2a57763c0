"""What the session store accepts: header fields, ids, entry sizes.

Every session is created through ``create_from_entries`` (new sessions, imports,
forks), and every entry through one of the append paths; both check here, for
both providers, before anything is written (no file, no folder, no row):

- header ``id``: 1-64 characters of ``A-Z a-z 0-9 _ -`` (UUIDs, Pi's ids). It
  names the session file and fits the id columns;
- header ``timestamp``: a string of at most 64 characters of ``A-Z a-z 0-9 : . + _ -``
  (ISO times), or absent; it is the first part of the file name;
- header ``cwd``: a string of at most 4096 characters without NUL (only a folder
  name is derived from it, with every separator replaced);
- header ``parentSession``: absent, or a string of at most 4096 characters without NUL;
- entry ``id``: a string of 1-64 characters without NUL; ``parentId`` absent,
  null or such a string (the id columns hold 64);
- an entry's JSON text is at most ``NETA_MAX_ENTRY_BYTES`` bytes of UTF-8.

Failures raise :class:`InvalidSessionFile` (header) or :class:`InvalidEntry`
(entries), with ``field`` naming what was wrong.
"""

from __future__ import annotations

import re

from django.conf import settings

from sessions_tree.errors import InvalidEntry, InvalidSessionFile

__all__ = [
    "MAX_ID_CHARS",
    "MAX_TITLE_CHARS",
    "check_entry_ids",
    "check_entry_size",
    "check_header",
    "max_entry_bytes",
]

MAX_ID_CHARS = 64  # the id columns (AgentSession.session_id, SessionEntry.parent_entry_id …)
MAX_TITLE_CHARS = 500  # AgentSession.title
MAX_PATH_CHARS = 4096
MAX_TIMESTAMP_CHARS = 64
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)
_TIMESTAMP = re.compile(r"[A-Za-z0-9:.+_-]{0,64}", re.ASCII)


def max_entry_bytes() -> int:
    return settings.NETA_MAX_ENTRY_BYTES


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_session_id(value, *, field: str = "header.id") -> str:
    if not isinstance(value, str) or _SESSION_ID.fullmatch(value) is None:
        raise InvalidSessionFile(
            f"{field}: a session id is 1-{MAX_ID_CHARS} characters of A-Z, a-z, 0-9, '_' and '-', not {_describe(value)}",
            field=field,
        )
    return value


def _check_path_like(header: dict, key: str, *, required: bool) -> None:
    field = f"header.{key}"
    if key not in header or header[key] is None:
        if required:
            raise InvalidSessionFile(f"{field}: missing", field=field)
        return
    value = header[key]
    if not isinstance(value, str):
        raise InvalidSessionFile(f"{field}: must be a string, not {type(value).__name__}", field=field)
    if len(value) > MAX_PATH_CHARS:
        raise InvalidSessionFile(f"{field}: longer than {MAX_PATH_CHARS} characters", field=field)
    if "\0" in value:
        raise InvalidSessionFile(f"{field}: contains a NUL character", field=field)


def check_header(header) -> None:
    """Refuse a header whose fields could not be stored safely (see the module docstring)."""
    if not isinstance(header, dict):
        raise InvalidSessionFile("header: must be a JSON object", field="header")
    check_session_id(header.get("id"))
    timestamp = header.get("timestamp")
    if timestamp is not None:
        if not isinstance(timestamp, str):
            raise InvalidSessionFile(
                f"header.timestamp: must be a string, not {type(timestamp).__name__}", field="header.timestamp"
            )
        if _TIMESTAMP.fullmatch(timestamp) is None:
            raise InvalidSessionFile(
                f"header.timestamp: at most {MAX_TIMESTAMP_CHARS} characters of A-Z, a-z, 0-9 and ':.+_-' "
                f"(an ISO time), not {_describe(timestamp)}",
                field="header.timestamp",
            )
    _check_path_like(header, "cwd", required=False)
    _check_path_like(header, "parentSession", required=False)


def _bad_id(value) -> str | None:
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if len(value) > MAX_ID_CHARS:
        return f"is longer than {MAX_ID_CHARS} characters"
    if "\0" in value:
        return "contains a NUL character"
    return None


def check_entry_ids(entry: dict, *, where: str = "") -> None:
    """``id`` and ``parentId`` fit the id columns (``where``: e.g. ``"line 7: "``)."""
    problem = _bad_id(entry.get("id"))
    if problem:
        raise InvalidEntry(f"{where}id {problem}", field="id")
    parent = entry.get("parentId")
    if parent is not None and isinstance(parent, str):
        problem = _bad_id(parent)
        if problem:
            raise InvalidEntry(f"{where}parentId {problem}", field="parentId")


def check_entry_size(raw: str, *, where: str = "") -> None:
    limit = max_entry_bytes()
    # Characters first: only a text that may be too long is encoded to count bytes.
    if len(raw) * 4 > limit:
        size = len(raw.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise InvalidEntry(
                f"{where}the entry is {size} bytes of JSON, over the limit of {limit} (NETA_MAX_ENTRY_BYTES)",
                field="entry",
            )
