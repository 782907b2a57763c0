"""Load-time migration of older session files to version 3 (pi-session-format.md §4).

- version missing (or null) counts as 1; the comparison follows JavaScript (a
  string ``"2"`` is 2);
- v1 -> v2: every entry gets a fresh ``id`` and ``parentId`` = the previous
  entry's new id (a chain, whatever ids it had); a compaction's numeric
  ``firstKeptEntryIndex`` (index among the file's parsed lines, header = 0)
  becomes ``firstKeptEntryId`` of that line when the line is an entry that
  already has an id at that moment (an earlier entry, or a later one that had an
  ``id`` of its own); the index key is removed;
- v2 -> v3: ``message`` entries whose ``message.role`` is ``hookMessage`` get
  role ``custom``;
- the header's ``version`` keeps its key position (appended when missing).

Nothing is mutated: changed entries are copies, unchanged ones are returned as
they are. One difference from Pi: new v1 ids are checked against each other
(Pi's v1 migration never fills its collision set).
"""

from __future__ import annotations

import math
import re

from sessions_tree.ids import new_entry_id
from sessions_tree.jsonl import js_to_string, js_trim

__all__ = ["CURRENT_VERSION", "migrate_to_current"]

CURRENT_VERSION = 3

_DECIMAL = re.compile(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)", re.ASCII)
_RADIX = re.compile(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)", re.ASCII)


def _js_number(value) -> float:
    """JavaScript ``Number(value)`` for JSON values (NaN where JavaScript gives NaN)."""
    if value is True or value is False:
        return float(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if value is None:
        return 0.0
    if isinstance(value, list):
        value = js_to_string(value)
    if isinstance(value, str):
        text = js_trim(value)
        if not text:
            return 0.0
        if _DECIMAL.fullmatch(text):
            return float(text.replace("Infinity", "inf"))
        if _RADIX.fullmatch(text):
            return float(int(text, 0))
    return math.nan


def migrate_to_current(header: dict, entries: list[dict], *, positions: list[int] | None = None):
    """``(header, entries, changed)`` brought to version 3 as Pi does on load.

    ``positions[i]`` is the index of ``entries[i]`` among the parsed lines of the
    file (header = 0; see :attr:`sessions_tree.jsonl.ParsedSession.positions`),
    used for v1 ``firstKeptEntryIndex``; by default entries follow the header
    directly (``1, 2, ...``).
    """
    raw_version = header.get("version")
    version = _js_number(1 if raw_version is None else raw_version)
    if version >= CURRENT_VERSION:
        return header, entries, False
    header = dict(header)
    if version < 2:
        header["version"] = 2
        entries = _v1_to_v2(entries, positions)
    if version < 3:
        header["version"] = 3
        entries = _v2_to_v3(entries)
    return header, entries, True


def _v1_to_v2(entries: list[dict], positions: list[int] | None) -> list[dict]:
    if positions is None:
        positions = list(range(1, len(entries) + 1))
    at_position = {p: i for i, p in enumerate(positions)}
    current = list(entries)  # the state Pi's in-place loop would see
    taken: set[str] = set()
    previous = None
    for i, original in enumerate(entries):
        entry = dict(original)
        new_id = new_entry_id(taken)
        taken.add(new_id)
        entry["id"] = new_id
        entry["parentId"] = previous
        previous = new_id
        current[i] = entry
        if entry.get("type") == "compaction" and "firstKeptEntryIndex" in entry:
            index = entry["firstKeptEntryIndex"]
            if isinstance(index, (int, float)) and not isinstance(index, bool):
                target = None
                if isinstance(index, int) or index.is_integer():
                    j = at_position.get(int(index))
                    target = current[j] if j is not None else None
                if target is not None:
                    if "id" in target:
                        entry["firstKeptEntryId"] = target["id"]
                    else:
                        entry.pop("firstKeptEntryId", None)  # Pi assigns undefined
                del entry["firstKeptEntryIndex"]
    return current


def _v2_to_v3(entries: list[dict]) -> list[dict]:
    out = entries
    for i, entry in enumerate(entries):
        if entry.get("type") != "message":
            continue
        message = entry.get("message")
        if isinstance(message, dict) and message.get("role") == "hookMessage":
            if out is entries:
                out = list(entries)
            copy = dict(entry)
            copy["message"] = {**message, "role": "custom"}
            out[i] = copy
    return out
