"""v1 -> v2 -> v3 migration on load (format doc §4), without mutating the input."""

from __future__ import annotations

import copy
import json
import re

import pytest

from sessions_tree.jsonl import parse_session_text
from sessions_tree.migration import migrate_to_current
from sessions_tree.path import get_path
from tests.support.services import FIXTURES

HEX8 = re.compile(r"[0-9a-f]{8}")


def header(**fields):
    return {"type": "session", **fields, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"}


def msg(text, **extra):
    return {"type": "message", **extra, "timestamp": "2025-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1}}


def test_current_files_are_untouched():
    h, entries = header(version=3), [msg("a", id="x", parentId=None)]
    out_h, out_entries, changed = migrate_to_current(h, entries)
    assert (out_h, out_entries, changed) == (h, entries, False)
    assert out_h is h and out_entries is entries
    assert migrate_to_current(header(version=4), [])[2] is False


def test_v1_gets_a_fresh_chain_and_version_appended():
    h = header()
    entries = [msg("a"), msg("b", id="old1", parentId="zzz"), {"type": "label", "targetId": "x", "timestamp": "t"}]
    before = copy.deepcopy((h, entries))
    out_h, out, changed = migrate_to_current(h, entries)
    assert changed and (h, entries) == before  # input not mutated
    assert list(out_h) == ["type", "id", "timestamp", "cwd", "version"] and out_h["version"] == 3
    ids = [e["id"] for e in out]
    assert all(HEX8.fullmatch(i) for i in ids) and len(set(ids)) == 3 and "old1" not in ids
    assert [e["parentId"] for e in out] == [None, ids[0], ids[1]]
    # New keys go last; an existing "id" keeps its position.
    assert list(out[0]) == ["type", "timestamp", "message", "id", "parentId"]
    assert list(out[1]) == ["type", "id", "parentId", "timestamp", "message"]
    assert [e["id"] for e in get_path(out, ids[2])] == ids


def test_v1_first_kept_index_counts_parsed_lines_with_header():
    h = header(version=1)
    entries = [
        msg("one"),
        msg("two"),
        {"type": "compaction", "summary": "s", "firstKeptEntryIndex": 2, "tokensBefore": 1, "timestamp": "t"},
        {"type": "compaction", "summary": "to header", "firstKeptEntryIndex": 0, "tokensBefore": 1, "timestamp": "t"},
        {"type": "compaction", "summary": "forward", "firstKeptEntryIndex": 7, "firstKeptEntryId": "stale", "tokensBefore": 1, "timestamp": "t"},
        {"type": "compaction", "summary": "forward with id", "firstKeptEntryIndex": 8, "tokensBefore": 1, "timestamp": "t"},
        msg("late, no id"),
        msg("late, own id", id="own"),
        {"type": "compaction", "summary": "string index", "firstKeptEntryIndex": "1", "tokensBefore": 1, "timestamp": "t"},
    ]
    _, out, _ = migrate_to_current(h, entries)
    assert out[2]["firstKeptEntryId"] == out[1]["id"] and "firstKeptEntryIndex" not in out[2]
    assert list(out[2])[-1] == "firstKeptEntryId"
    assert "firstKeptEntryId" not in out[3]  # the header is never a kept entry
    assert "firstKeptEntryId" not in out[4]  # target not yet migrated: Pi assigns undefined
    assert out[5]["firstKeptEntryId"] == "own"  # target's id at that moment (its old one)
    assert out[8]["firstKeptEntryIndex"] == "1" and "firstKeptEntryId" not in out[8]


def test_v1_positions_account_for_extra_header_lines():
    text = "\n".join(json.dumps(x) for x in [
        header(), msg("one"), header(), msg("two"),
        {"type": "compaction", "summary": "s", "firstKeptEntryIndex": 3, "tokensBefore": 1, "timestamp": "t"},
    ])
    parsed = parse_session_text(text)
    _, out, _ = migrate_to_current(parsed.header, parsed.entries, positions=parsed.positions)
    assert out[2]["firstKeptEntryId"] == out[1]["id"]  # index 3 is "two", not the compaction


def test_v2_renames_hook_messages_only():
    hook = {"type": "message", "id": "a", "parentId": None, "timestamp": "t",
            "message": {"role": "hookMessage", "customType": "h", "content": "x", "display": True, "timestamp": 1}}
    other = {"type": "message", "id": "b", "parentId": "a", "timestamp": "t", "message": {"role": "user", "content": "y"}}
    h = header(version=2)
    out_h, out, changed = migrate_to_current(h, [hook, other])
    assert changed and out_h["version"] == 3 and list(out_h)[1] == "version"
    assert out[0]["message"] == {"role": "custom", "customType": "h", "content": "x", "display": True, "timestamp": 1}
    assert out[1] is other and hook["message"]["role"] == "hookMessage"


@pytest.mark.parametrize(
    ("version", "v1", "changed"),
    [("2", False, True), ("3", False, False), ("", True, True), (None, True, True), ([3], False, False),
     ({}, False, True), ("abc", False, True), (2.5, False, True), (True, True, True)],
)
def test_version_compares_like_javascript(version, v1, changed):
    h = header(version=version)
    entries = [msg("a", id="keep", parentId=None)]
    out_h, out, did = migrate_to_current(h, entries)
    assert did is changed
    assert (out[0]["id"] != "keep") is v1


def test_legacy_fixtures_migrate():
    parsed = parse_session_text((FIXTURES / "legacy-v1.jsonl").read_text())
    h, out, changed = migrate_to_current(parsed.header, parsed.entries, positions=parsed.positions)
    assert changed and h["version"] == 3 and len(out) == 10
    comp = next(e for e in out if e["type"] == "compaction")
    assert comp["firstKeptEntryId"] == out[6]["id"]  # firstKeptEntryIndex 7 = 7th entry after the header
