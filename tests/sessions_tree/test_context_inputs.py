"""The inputs of a context: ids, timestamps and entries as Pi makes them.

Entry builders are checked against lines Pi itself wrote (the fixtures):
rebuilding each entry with the builder and ``jsonl.dumps`` gives the same bytes.
Timestamps are checked against node's ``Date``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_tree import entries as E
from sessions_tree.context import date_ms
from sessions_tree.ids import (
    iso_to_ms,
    ms_to_iso,
    new_entry_id,
    new_session_id,
    now_iso,
    now_ms,
)
from sessions_tree.jsonl import dumps, parse_session_text
from tests.support.services import FIXTURES, require

# --------------------------------------------------------------------------- ids


def test_session_ids_are_ordered_uuid7():
    before = now_ms()
    ids = [new_session_id() for _ in range(5000)]
    after = now_ms()
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for text in ids[:50]:
        u = uuid.UUID(text)
        assert u.version == 7 and u.variant == uuid.RFC_4122 and str(u) == text
        assert before <= u.int >> 80 <= after + 1  # the embedded Unix milliseconds


class _Taken:
    def __init__(self, collisions: int):
        self.left = collisions

    def __contains__(self, _):
        self.left -= 1
        return self.left >= 0


def test_entry_ids_are_eight_hex_and_avoid_taken_ones():
    ids = {new_entry_id(()) for _ in range(2000)}
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids) and len(ids) > 1990
    assert re.fullmatch(r"[0-9a-f]{8}", new_entry_id(_Taken(99)))  # the 100th try still counts
    fallback = new_entry_id(_Taken(100))
    assert uuid.UUID(fallback).version == 4 and len(fallback) == 36
    taken = {new_entry_id(()) for _ in range(50)}
    assert new_entry_id(taken) not in taken


def test_now_iso_is_to_iso_string():
    before = now_ms()
    text = now_iso()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", text)
    assert before <= iso_to_ms(text) <= now_ms()
    assert ms_to_iso(0) == "1970-01-01T00:00:00.000Z"
    assert ms_to_iso(-1) == "1969-12-31T23:59:59.999Z"


# --------------------------------------------------------------------------- timestamps vs node

_NODE_DATES = r"""
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const t = (v) => { const x = new Date(v).getTime(); return Number.isNaN(x) ? null : x; };
process.stdout.write(JSON.stringify({
  parse: input.strings.map((s) => { const x = Date.parse(s); return Number.isNaN(x) ? null : x; }),
  values: input.values.map(t),
  iso: input.ms.map((m) => new Date(m).toISOString()),
}));
"""

FIXED_STRINGS = [
    "2025-06-02T09:14:05.120Z", "2025-06-02T09:14:05Z", "2025-06-02T09:14Z", "2025-06-02", "2025-06", "2025",
    "2025-06-02T09:14:05.1Z", "2025-06-02T09:14:05.123456Z", "2025-06-02T09:14:05.120+02:00",
    "2025-06-02T09:14:05.120-0230", "2025-02-30", "2024-02-29T00:00:00Z", "2025-13-01", "2025-06-02T24:00:00Z",
    "2025-06-02T24:00:01Z", "+002025-06-02T00:00:00Z", "-000001-01-01T00:00:00Z", "-000000-01-01T00:00:00Z",
    "2025-06-02t09:14:05z", "2025-06-02 09:14:05Z", "2025-06-02T09:14:05.120", "-271821-04-20T00:00:00Z",
    "-271821-04-19T23:59:59.999Z", "+275760-09-13T00:00:00.000Z", "+275760-09-13T00:00:00.001Z",
    "2025-06-02T09:60:00Z", "2025-06-00", "abc", "", "2025-06-02T09:14:05.120Z ", "2025-06-02T09:14:05.Z",
]


def _iso_like():
    """ISO date-time strings, in range or not. Left out: date-only strings with an
    impossible month/day and space separators with odd offsets, which V8 hands to
    its legacy parser (not reproduced; see ``iso_to_ms``)."""
    two = st.integers(0, 99).map(lambda n: f"{n:02d}")
    year = st.one_of(st.integers(0, 9999).map(lambda n: f"{n:04d}"), st.integers(0, 300000).map(lambda n: f"+{n:06d}"))
    time = st.tuples(st.sampled_from(["T", "t"]), two, two, st.one_of(st.just(""), two.map(lambda s: ":" + s)),
                     st.one_of(st.just(""), st.integers(0, 10**7).map(lambda n: "." + str(n))),
                     st.sampled_from(["Z", "z", "", "+01:00", "-23:59", "+24:00", "+0530"]))
    date_time = st.tuples(year, two, two, time).map(lambda p: f"{p[0]}-{p[1]}-{p[2]}" + "".join(p[3]))
    date_only = st.tuples(year, st.integers(1, 12), st.integers(1, 31)).map(lambda p: f"{p[0]}-{p[1]:02d}-{p[2]:02d}")
    return st.one_of(date_time, date_only)


@settings(max_examples=3, deadline=None)
@given(
    st.lists(_iso_like(), min_size=100, max_size=100),
    st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**16), 10**16)), min_size=50, max_size=50),
    st.lists(st.integers(-(10**12) * 62, 10**12 * 253), min_size=50, max_size=50),
)
def test_timestamps_match_node(strings, values, ms):
    require(shutil.which("node") is not None, "node is not installed")
    strings = FIXED_STRINGS + strings
    values = values + [None, True, False, 1.9, -1.9, 8.64e15, 8.64e15 + 1, -0.0]
    payload = json.dumps({"strings": strings, "values": values, "ms": ms})
    done = subprocess.run(["node", "-e", _NODE_DATES], input=payload.encode(), capture_output=True, check=True)
    node = json.loads(done.stdout)
    assert [iso_to_ms(s) for s in strings] == node["parse"]
    assert [date_ms(v) for v in values] == node["values"]
    assert [ms_to_iso(m) for m in ms] == node["iso"]


# --------------------------------------------------------------------------- builders vs Pi's own lines


def _rebuild(entry: dict) -> dict:
    base = {"id": entry["id"], "parent_id": entry["parentId"], "timestamp": entry["timestamp"]}
    kind = entry["type"]
    if kind == "message":
        return E.message_entry(**base, message=entry["message"])
    if kind == "thinking_level_change":
        return E.thinking_level_change_entry(**base, thinking_level=entry["thinkingLevel"])
    if kind == "model_change":
        return E.model_change_entry(**base, provider=entry["provider"], model_id=entry["modelId"])
    if kind == "compaction":
        return E.compaction_entry(**base, summary=entry["summary"], first_kept_entry_id=entry["firstKeptEntryId"],
                                  tokens_before=entry["tokensBefore"], details=entry.get("details"),
                                  from_hook=entry.get("fromHook"))
    if kind == "branch_summary":
        return E.branch_summary_entry(**base, from_id=entry["fromId"], summary=entry["summary"],
                                      details=entry.get("details"), from_hook=entry.get("fromHook"))
    if kind == "custom":
        return E.custom_entry(**base, custom_type=entry["customType"], data=entry.get("data", E.MISSING))
    if kind == "custom_message":
        return E.custom_message_entry(**base, custom_type=entry["customType"], content=entry["content"],
                                      display=entry["display"], details=entry.get("details"))
    if kind == "label":
        return E.label_entry(**base, target_id=entry["targetId"], label=entry.get("label"))
    if kind == "session_info":
        return E.session_info_entry(**base, name=entry["name"])
    raise AssertionError(kind)


PI_WRITTEN = ["01-linear.jsonl", "02-branches.jsonl", "03-compaction.jsonl", "04-misc.jsonl", "05-fork.jsonl"]


@pytest.mark.parametrize("name", PI_WRITTEN)
def test_builders_reproduce_pi_lines_byte_for_byte(name):
    parsed = parse_session_text((FIXTURES / name).read_text(encoding="utf-8"))
    h = parsed.header
    header = E.session_header(session_id=h["id"], timestamp=h["timestamp"], cwd=h["cwd"],
                              parent_session=h.get("parentSession"), version=h["version"])
    assert dumps(header) == parsed.header_line
    for entry, raw in zip(parsed.entries, parsed.raw_lines, strict=True):
        assert dumps(_rebuild(entry)) == raw
        assert dumps(entry) == raw  # and what Pi wrote survives a parse + dump unchanged


def test_builders_cover_every_pi_type_in_the_fixtures():
    seen = set()
    for name in PI_WRITTEN:
        seen |= {e["type"] for e in parse_session_text((FIXTURES / name).read_text()).entries}
    assert seen == E.PI_ENTRY_TYPES


def test_optional_fields_and_neta_types():
    base = {"id": "a", "parent_id": None, "timestamp": "t"}
    assert list(E.custom_entry(**base, custom_type="c")) == ["type", "customType", "id", "parentId", "timestamp"]
    assert E.custom_entry(**base, custom_type="c", data=None)["data"] is None
    assert "label" not in E.label_entry(**base, target_id="x")
    assert E.label_entry(**base, target_id="x", label="")["label"] == ""
    assert E.session_info_entry(**base, name="\u3000 name \n")["name"] == "name"
    assert list(E.subagent_batch_entry(**base, batch_id="b", mode="chain", runs=[])) == [
        "type", "id", "parentId", "timestamp", "batchId", "mode", "runs"]
    result = E.subagent_result_entry(**base, batch_id="b", run_id="r", agent="scout", status="failed", content=[])
    assert list(result) == ["type", "id", "parentId", "timestamp", "batchId", "runId", "agent", "status", "content", "isError"]
    assert E.ENTRY_TYPES == E.PI_ENTRY_TYPES | {"subagent_batch", "subagent_result"}
    assert "parentSession" not in E.session_header(session_id="s", timestamp="t", cwd="/")


@pytest.mark.parametrize(
    "call",
    [
        lambda: E.message_entry(id=1, parent_id=None, timestamp="t", message={}),
        lambda: E.message_entry(id="a", parent_id=5, timestamp="t", message={}),
        lambda: E.message_entry(id="a", parent_id=None, timestamp=123, message={}),
        lambda: E.message_entry(id="a", parent_id=None, timestamp="t", message="text"),
        lambda: E.label_entry(id="a", parent_id=None, timestamp="t", target_id=None),
        lambda: E.custom_message_entry(id="a", parent_id=None, timestamp="t", custom_type="c", content=5, display=True),
    ],
)
def test_builders_reject_wrong_types(call):
    with pytest.raises(TypeError):
        call()


def test_random_entry_ids_do_not_collide_in_a_big_session():
    rng_ids: set[str] = set()
    for _ in range(20_000):
        rng_ids.add(new_entry_id(rng_ids))
    assert len(rng_ids) == 20_000
