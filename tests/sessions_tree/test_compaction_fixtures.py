"""Replaying the compactions Pi itself wrote (``pi-oracle/fixtures/03-compaction``).

``03-compaction.summarizer-calls.json`` records, for each compaction entry in the
file, the settings Pi used, its preparation, every summarizer request and the
model's reply. At the entry before each compaction Neta must prepare the same
thing, ask the same questions, and - fed Pi's replies - produce exactly the
compaction entry Pi stored.
"""

from __future__ import annotations

import json

import pytest

from sessions_tree.compaction import (
    CompactionSettings,
    compaction_blocked_reason,
    compaction_requests,
    compaction_result,
    prepare_compaction,
    summary_reasoning,
)
from sessions_tree.context import context_from_path
from sessions_tree.jsonl import parse_session_text
from sessions_tree.path import get_path
from tests.support.services import FIXTURES

SESSION = parse_session_text((FIXTURES / "03-compaction.jsonl").read_text(encoding="utf-8"))
CALLS = json.loads((FIXTURES / "03-compaction.summarizer-calls.json").read_text(encoding="utf-8"))
BY_ID = {e["id"]: e for e in SESSION.entries}


def prepared(record: dict):
    entry = BY_ID[record["entryId"]]
    path = get_path(SESSION.entries, entry["parentId"])
    settings = CompactionSettings(
        enabled=record["settings"]["enabled"],
        reserve_tokens=record["settings"]["reserveTokens"],
        keep_recent_tokens=record["settings"]["keepRecentTokens"],
    )
    return entry, path, prepare_compaction(path, settings)


def test_the_fixture_has_two_compactions_the_second_a_split_turn_update():
    assert [r["preparation"]["isSplitTurn"] for r in CALLS] == [False, True]
    assert [r["preparation"]["previousSummary"] for r in CALLS] == [False, True]
    assert [len(r["calls"]) for r in CALLS] == [1, 2]
    assert [e["id"] for e in SESSION.entries if e["type"] == "compaction"] == [r["entryId"] for r in CALLS]


@pytest.mark.parametrize("record", CALLS, ids=lambda r: r["entryId"])
def test_preparation_equals_pis(record):
    _, _, prep = prepared(record)
    pi = record["preparation"]
    assert prep.first_kept_entry_id == pi["firstKeptEntryId"]
    assert prep.is_split_turn is pi["isSplitTurn"]
    assert prep.tokens_before == pi["tokensBefore"]
    assert (prep.previous_summary is not None) is pi["previousSummary"]
    assert len(prep.messages_to_summarize) == pi["messagesToSummarize"]
    assert len(prep.turn_prefix_messages) == pi["turnPrefixMessages"]
    assert prep.settings.to_pi() == record["settings"]


@pytest.mark.parametrize("record", CALLS, ids=lambda r: r["entryId"])
def test_requests_equal_pis_byte_for_byte(record):
    _, path, prep = prepared(record)
    thinking = context_from_path(path).thinking_level  # "high" in this session
    requests = compaction_requests(prep, reasoning=summary_reasoning(True, thinking))
    assert [r.kind for r in requests] == (["history", "turn_prefix"] if prep.is_split_turn else ["history"])
    assert [r.to_pi() for r in requests] == [
        {k: call[k] for k in ("systemPrompt", "userText", "maxTokens", "reasoning")} for call in record["calls"]
    ]


@pytest.mark.parametrize("record", CALLS, ids=lambda r: r["entryId"])
def test_pis_replies_give_the_stored_compaction_entry(record):
    entry, _, prep = prepared(record)
    requests = compaction_requests(prep, reasoning="high")
    replies = {r.kind: call["reply"] for r, call in zip(requests, record["calls"], strict=True)}
    result = compaction_result(prep, replies)
    assert result == {k: entry[k] for k in ("summary", "firstKeptEntryId", "tokensBefore", "details")}
    assert entry["fromHook"] is False


def test_the_leaf_after_each_compaction_is_already_compacted():
    for record in CALLS:
        path = get_path(SESSION.entries, record["entryId"])
        assert prepare_compaction(path, CompactionSettings()) is None
        assert compaction_blocked_reason(path) == "Already compacted"


def test_the_kept_context_after_the_second_compaction_starts_at_its_first_kept_entry():
    # What the next model call sees: the summary, then the kept entries from the cut.
    record = CALLS[1]
    entry = BY_ID[record["entryId"]]
    ctx = context_from_path(get_path(SESSION.entries, entry["id"]))
    assert ctx.source_entry_ids[0] == entry["id"]
    assert ctx.source_entry_ids[1] == record["preparation"]["firstKeptEntryId"]
