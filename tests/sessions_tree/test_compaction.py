"""Compaction rules on their own: edge cases, errors, and invariants of the cut
point over random paths (Pi's exact behaviour is proven in
test_compaction_oracle.py and test_compaction_fixtures.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_tree.compaction import (
    ALREADY_COMPACTED,
    NOTHING_TO_COMPACT,
    CompactionSettings,
    FileOps,
    compaction_blocked_reason,
    compaction_requests,
    compaction_result,
    context_tokens_from_usage,
    file_operations_suffix,
    find_cut_point,
    prepare_compaction,
    serialize_conversation,
    should_compact,
    summary_reasoning,
    threshold_context_tokens,
)
from sessions_tree.context import context_from_path, estimate_tokens
from sessions_tree.entries import compaction_entry
from sessions_tree.ids import ms_to_iso
from tests.sessions_tree.pi_sessions import SessionBuilder


def session(turns: int = 6, words: int = 200) -> SessionBuilder:
    b = SessionBuilder(5)
    b.start()
    for t in range(turns):
        b.user(f"turn {t}: " + "please " * 20)
        b.step("read", {"path": f"src/m{t}.py"}, "line of code\n" * words)
        b.step("edit", {"path": f"src/m{t}.py", "edits": []}, "ok")
        b.say(f"turn {t} done")
    return b


# --------------------------------------------------------------------------- refusals


def test_an_empty_path_has_nothing_to_compact():
    assert prepare_compaction([], CompactionSettings()) is None
    assert compaction_blocked_reason([]) == NOTHING_TO_COMPACT


def test_a_compaction_leaf_is_already_compacted():
    b = session(2)
    path = list(b.entries)
    fields = compaction_result(prepare_compaction(path), {"history": "s"})
    b.compaction(fields["summary"], fields["firstKeptEntryId"], fields["tokensBefore"], details=fields["details"])
    assert prepare_compaction(b.entries) is None
    assert compaction_blocked_reason(b.entries) == ALREADY_COMPACTED
    # One more entry after it and compaction is possible again.
    b.user("more")
    assert compaction_blocked_reason(b.entries) is None


def test_id_less_entries_cannot_be_cut_at():
    # An unmigrated (v1) entry has no id: Pi refuses, so does Neta.
    path = [{"type": "message", "message": {"role": "user", "content": "hi", "timestamp": 1}}]
    assert prepare_compaction(path) is None
    assert compaction_blocked_reason(path) == NOTHING_TO_COMPACT


def test_a_small_session_still_prepares_an_empty_summary_request():
    b = SessionBuilder(1)
    b.user("hello")
    prep = prepare_compaction(b.entries)
    assert prep.first_kept_entry_id == b.entries[0]["id"]
    assert prep.messages_to_summarize == [] and not prep.is_split_turn
    [request] = compaction_requests(prep)
    assert request.user_text.startswith("<conversation>\n\n</conversation>\n\nThe messages above are a conversation")


def test_only_tool_results_keep_everything_and_summarize_nothing():
    b = SessionBuilder(2)
    call = {"id": "t1", "name": "read"}
    for i in range(3):
        b.tool_result(call, "x" * 4000)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=10))
    assert prep.cut_point.first_kept_entry_index == 0
    assert (prep.is_split_turn, prep.messages_to_summarize, prep.turn_prefix_messages) == (False, [], [])


# --------------------------------------------------------------------------- the cut point


ROLES = ["user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary", "compactionSummary"]
OTHER_TYPES = [
    "label",
    "model_change",
    "thinking_level_change",
    "custom",
    "custom_message",
    "branch_summary",
    "session_info",
    "subagent_result",
]


@st.composite
def paths(draw):
    kinds = draw(
        st.lists(st.one_of(st.sampled_from(ROLES), st.sampled_from(OTHER_TYPES).map(lambda t: "@" + t)), max_size=40)
    )
    entries = []
    for i, kind in enumerate(kinds):
        base = {
            "id": f"{i:08x}",
            "parentId": f"{i - 1:08x}" if i else None,
            "timestamp": ms_to_iso(1_700_000_000_000 + i),
        }
        size = draw(st.integers(0, 400))
        if kind.startswith("@"):
            entry = {"type": kind[1:], **base}
            if kind == "@branch_summary":
                entry.update(fromId="root", summary="s" * size)
            elif kind == "@custom_message":
                entry.update(customType="c", content="c" * size, display=True)
        elif kind in ("user", "custom"):
            entry = {"type": "message", **base, "message": {"role": kind, "content": "u" * size, "timestamp": 1}}
        elif kind == "assistant":
            message = {
                "role": "assistant",
                "content": [{"type": "text", "text": "a" * size}],
                "stopReason": "stop",
                "timestamp": 1,
            }
            entry = {"type": "message", **base, "message": message}
        elif kind == "toolResult":
            message = {
                "role": "toolResult",
                "toolCallId": "t",
                "toolName": "read",
                "content": [{"type": "text", "text": "r" * size}],
                "isError": False,
                "timestamp": 1,
            }
            entry = {"type": "message", **base, "message": message}
        elif kind == "bashExecution":
            entry = {
                "type": "message",
                **base,
                "message": {"role": kind, "command": "ls", "output": "o" * size, "exitCode": 0, "timestamp": 1},
            }
        else:
            entry = {"type": "message", **base, "message": {"role": kind, "summary": "s" * size, "timestamp": 1}}
        entries.append(entry)
    return entries


def is_tool_result(entry: dict) -> bool:
    return entry["type"] == "message" and entry["message"]["role"] == "toolResult"


def is_cut_point(entry: dict) -> bool:
    return entry["type"] in ("branch_summary", "custom_message") or (
        entry["type"] == "message" and not is_tool_result(entry)
    )


@settings(max_examples=300, deadline=None)
@given(path=paths(), keep=st.integers(0, 3000), data=st.data())
def test_the_cut_is_never_a_tool_result_and_the_ranges_partition_the_path(path, keep, data):
    start = data.draw(st.integers(0, len(path)))
    cut = find_cut_point(path, start, len(path), keep)
    has_cut_point = any(is_cut_point(e) for e in path[start:])
    if not has_cut_point:
        assert cut.first_kept_entry_index == start and not cut.is_split_turn
        return
    kept = path[cut.first_kept_entry_index]
    assert start <= cut.first_kept_entry_index < len(path)
    assert not is_tool_result(kept)
    if cut.is_split_turn:
        assert start <= cut.turn_start_index <= cut.first_kept_entry_index
        turn_start = path[cut.turn_start_index]
        assert turn_start["type"] in ("branch_summary", "custom_message") or turn_start["message"]["role"] in (
            "user",
            "bashExecution",
        )
    else:
        assert cut.turn_start_index == -1
    # A cut that is not itself a cut point was moved back over non-message
    # entries only, up to the next cut point.
    if not is_cut_point(kept):
        nxt = next(i for i in range(cut.first_kept_entry_index, len(path)) if is_cut_point(path[i]))
        assert all(e["type"] not in ("message", "compaction") for e in path[cut.first_kept_entry_index : nxt])


@settings(max_examples=200, deadline=None)
@given(path=paths(), keep=st.integers(0, 3000))
def test_prepared_messages_are_the_context_before_the_cut(path, keep):
    prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=keep))
    if prep is None:
        assert not path
        return
    cut = prep.cut_point
    # Everything before the cut is summarized: history, then the turn prefix.
    summarized = prep.messages_to_summarize + prep.turn_prefix_messages
    expected_sources = [
        e for e in path[: cut.first_kept_entry_index] if e["type"] in ("message", "custom_message", "branch_summary")
    ]
    assert len(summarized) == len(expected_sources)
    # After compacting, the model sees the summary, then the context from the cut.
    entry = compaction_entry(
        id="ffffffff",
        parent_id=path[-1]["id"],
        timestamp=ms_to_iso(1_800_000_000_000),
        summary="S",
        first_kept_entry_id=prep.first_kept_entry_id,
        tokens_before=prep.tokens_before,
    )
    ctx = context_from_path([*path, entry])
    assert ctx.messages[0]["role"] == "compactionSummary"
    assert ctx.source_entry_ids[1:] == [
        e["id"]
        for e in path[cut.first_kept_entry_index :]
        if e["type"] in ("message", "custom_message") or (e["type"] == "branch_summary" and e["summary"])
    ]


def test_find_cut_point_rejects_a_bad_range():
    with pytest.raises(ValueError, match="bad range"):
        find_cut_point([], 1, 0, 10)
    with pytest.raises(ValueError, match="bad range"):
        find_cut_point([{"type": "label"}], 0, 2, 10)


def test_a_huge_trailing_tool_result_keeps_everything():
    b = session(3)
    b.user("dump it")
    b.step("bash", {"command": "cat big.log"}, "x" * 400_000)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=1000))
    # The sum passes 1000 at the tool result and no cut point follows it: Pi keeps
    # from the first cut point, i.e. everything.
    assert prep.messages_to_summarize == []
    assert prep.first_kept_entry_id == b.entries[0]["id"]


def test_the_cut_moves_back_over_settings_and_labels_before_it():
    b = session(2)
    before = len(b.entries)
    b.model_change("openai", "gpt-5.1")
    b.label(b.entries[0]["id"], "x")
    last_user = b.user("final question " * 10)
    b.say("final answer")
    prep = prepare_compaction(
        b.entries, CompactionSettings(keep_recent_tokens=estimate_tokens(last_user["message"]) + 2)
    )
    assert prep.first_kept_entry_id == b.entries[before]["id"]  # the model_change, not the user message
    # Pi's quirk, kept: the cut entry is not a user message, so Pi looks back for
    # a turn start, finds the previous (complete) turn and calls it a split turn.
    assert prep.is_split_turn
    assert b.entries[prep.cut_point.turn_start_index]["message"]["content"][0]["text"].startswith("turn 1:")


# --------------------------------------------------------------------------- requests and result


def test_previous_summary_switches_to_the_update_prompt_and_carries_files():
    b = session(4)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=200))
    first = compaction_result(prep, {k: "FIRST" for k in (r.kind for r in compaction_requests(prep))})
    b.compaction(first["summary"], first["firstKeptEntryId"], first["tokensBefore"], details=first["details"])
    b.user("next")
    b.step("read", {"path": "docs/new.md"}, "doc")
    b.say("ok")
    prep2 = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=5))
    assert prep2.previous_summary == first["summary"]
    history = compaction_requests(prep2)[0]
    assert (
        f"<previous-summary>\n{first['summary']}\n</previous-summary>\n\nThe messages above are NEW"
        in history.user_text
    )
    read_files, modified_files = prep2.file_ops.file_lists()
    assert set(first["details"]["modifiedFiles"]) <= set(modified_files)


def test_custom_instructions_reasoning_and_max_tokens():
    b = session(3)
    prep = prepare_compaction(b.entries, CompactionSettings(reserve_tokens=1000, keep_recent_tokens=100))
    requests = compaction_requests(prep, custom_instructions="Mind the tests.", reasoning="high")
    assert requests[0].user_text.endswith("error messages.\n\nAdditional focus: Mind the tests.")
    assert [r.max_tokens for r in requests] == [800, 500][: len(requests)]
    assert {r.reasoning for r in requests} == {"high"}
    assert {r.reasoning for r in compaction_requests(prep, reasoning="off")} == {None}
    assert compaction_requests(prep, custom_instructions="")[0].user_text.endswith("error messages.")
    with pytest.raises(TypeError):
        compaction_requests(prep, reasoning=3)
    assert requests[0].llm_messages(5) == [
        {"role": "user", "content": [{"type": "text", "text": requests[0].user_text}], "timestamp": 5}
    ]


def test_summary_reasoning_needs_a_reasoning_model_and_a_level():
    assert summary_reasoning(True, "medium") == "medium"
    assert summary_reasoning(False, "medium") is None
    assert summary_reasoning(True, "off") is None
    assert summary_reasoning(True, None) is None


def test_compaction_result_wants_exactly_the_requested_replies():
    b = session(3)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=100))
    kinds = [r.kind for r in compaction_requests(prep)]
    assert kinds == ["history", "turn_prefix"]  # the last turn is split
    with pytest.raises(ValueError, match="missing \\['turn_prefix'\\]"):
        compaction_result(prep, {"history": "h"})
    with pytest.raises(ValueError, match="unexpected \\['branch'\\]"):
        compaction_result(prep, {"history": "h", "turn_prefix": "p", "branch": "b"})
    with pytest.raises(TypeError):
        compaction_result(prep, {"history": "h", "turn_prefix": None})
    result = compaction_result(prep, {"history": "H", "turn_prefix": "P"})
    assert result["summary"].startswith("H\n\n---\n\n**Turn Context (split turn):**\n\nP\n\n<read-files>\n")
    assert list(result) == ["summary", "firstKeptEntryId", "tokensBefore", "details"]


# --------------------------------------------------------------------------- file operations


def test_file_ops_follow_pis_rules_and_javascript_sorting():
    ops = FileOps()
    calls = [
        ("read", {"path": "src/！.py"}),
        ("read", {"path": "src/😀.py"}),
        ("read", {"path": "b.py"}),
        ("edit", {"path": "b.py"}),
        ("write", {"path": "a.py"}),
        ("read", {"file_path": "ignored.py"}),
        ("bash", {"path": "ignored-tool.py"}),
        ("read", {"path": ""}),
        ("read", {"path": 7}),
    ]
    ops.add_from_message(
        {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": str(i), "name": n, "arguments": a} for i, (n, a) in enumerate(calls)
            ],
        }
    )
    ops.add_from_message(
        {"role": "user", "content": [{"type": "toolCall", "name": "read", "arguments": {"path": "user.py"}}]}
    )
    ops.add_from_details({"readFiles": ["prev.md", 3], "modifiedFiles": ["prev.py", None]})
    # UTF-16 order: U+1F600 (a surrogate pair, 0xD83D...) sorts before U+FF01.
    assert ops.file_lists() == (["prev.md", "src/😀.py", "src/！.py"], ["a.py", "b.py", "prev.py"])
    assert file_operations_suffix(*ops.file_lists()) == (
        "\n\n<read-files>\nprev.md\nsrc/😀.py\nsrc/！.py\n</read-files>"
        "\n\n<modified-files>\na.py\nb.py\nprev.py\n</modified-files>"
    )
    assert file_operations_suffix([], []) == ""
    assert file_operations_suffix([], ["x"]) == "\n\n<modified-files>\nx\n</modified-files>"


# --------------------------------------------------------------------------- serialization


def test_serialize_conversation_parts_and_truncation():
    messages = [
        {"role": "user", "content": "plain"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "x", "mimeType": "image/png"},
                {"type": "text", "text": "b"},
            ],
        },
        {"role": "user", "content": ""},
        {"role": "assistant", "content": []},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t1"},
                {"type": "text", "text": "x1"},
                {"type": "thinking", "thinking": "t2"},
                {"type": "toolCall", "id": "c", "name": "edit", "arguments": {"path": "p", "2": [1.0, None], "1": "ü"}},
                {"type": "text", "text": "x2"},
                {"type": "toolCall", "id": "d", "name": "ls", "arguments": {}},
            ],
        },
        {"role": "toolResult", "content": [{"type": "text", "text": "r" * 2000}]},
        {"role": "toolResult", "content": [{"type": "text", "text": "r" * 1999 + "😀"}]},
        {"role": "toolResult", "content": []},
    ]
    text = serialize_conversation(messages)
    assert text.split("\n\n")[:6] == [
        "[User]: plain",
        "[User]: ab",
        "[Assistant thinking]: t1\nt2",
        "[Assistant]: x1\nx2",
        '[Assistant tool calls]: edit(1="ü", 2=[1,null], path="p"); ls()',
        "[Tool result]: " + "r" * 2000,
    ]
    # 2001 UTF-16 units: cut inside the surrogate pair, as JavaScript's slice does.
    assert text.endswith("[Tool result]: " + "r" * 1999 + "\ud83d" + "\n\n[... 1 more characters truncated]")


# --------------------------------------------------------------------------- thresholds


def test_should_compact_is_strictly_above_window_minus_reserve():
    s = CompactionSettings(reserve_tokens=16384)
    assert not should_compact(200000 - 16384, 200000, s)
    assert should_compact(200000 - 16384 + 1, 200000, s)
    assert not should_compact(10**9, 200000, CompactionSettings(enabled=False))


def test_settings_are_validated():
    with pytest.raises(ValueError):
        CompactionSettings(reserve_tokens=-1)
    with pytest.raises(TypeError):
        CompactionSettings(keep_recent_tokens=True)
    with pytest.raises(TypeError):
        CompactionSettings(enabled="yes")
    assert CompactionSettings().to_pi() == {"enabled": True, "reserveTokens": 16384, "keepRecentTokens": 20000}


def test_threshold_tokens_follow_pis_auto_check():
    b = session(2)
    last = b.entries[-1]["message"]
    ctx = context_from_path(b.entries).messages
    assert threshold_context_tokens(last, path_entries=b.entries, context_messages=ctx) == last["usage"]["totalTokens"]
    assert context_tokens_from_usage({"totalTokens": 0, "input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4}) == 10
    # An error reply has no usable usage: estimate from the last good one.
    error = {
        "role": "assistant",
        "content": [],
        "usage": {"totalTokens": 0},
        "stopReason": "error",
        "timestamp": b.clock + 10,
    }
    tokens = threshold_context_tokens(error, path_entries=b.entries, context_messages=[*ctx, error])
    assert tokens == last["usage"]["totalTokens"]
    assert threshold_context_tokens(error, path_entries=b.entries, context_messages=[error]) is None
    # After a compaction, replies from before it are stale.
    b.compaction("S", b.entries[-1]["id"], 10)
    assert threshold_context_tokens(last, path_entries=b.entries, context_messages=ctx) is None
    fresh = {**last, "timestamp": b.clock + 5000}
    assert threshold_context_tokens(fresh, path_entries=b.entries, context_messages=ctx) == last["usage"]["totalTokens"]
    late_error = {**error, "timestamp": b.clock + 5000}
    assert threshold_context_tokens(late_error, path_entries=b.entries, context_messages=[*ctx, late_error]) is None
