"""Branch-summary rules on their own: collection edge cases, budgets, the
request and result shapes, and Pi's ``/tree`` leaf rule (Pi's exact behaviour
is proven in test_branch_summary_oracle.py and test_branch_summary_fixtures.py)."""

from __future__ import annotations

import pytest

from sessions_tree.branch_summary import (
    BRANCH_SUMMARY_PREAMBLE,
    BRANCH_SUMMARY_PROMPT,
    branch_summary_budget,
    branch_summary_request,
    branch_summary_result,
    collect_entries_for_branch_summary,
    navigation_target,
    prepare_branch_entries,
)
from sessions_tree.compaction import FileOps
from sessions_tree.path import CycleError, MissingLeafError, index_by_id
from tests.sessions_tree.pi_sessions import SessionBuilder


def tree():
    """root user -> reply -> (a: user, tool call, result, reply) | (b: custom message, reply)."""
    b = SessionBuilder(9)
    u1 = b.user("start")
    r1 = b.say("ok")
    ua = b.user("branch a")
    b.step("write", {"path": "a.py", "content": "x"}, "written")
    ra = b.say("a done")
    b.branch_from(r1["id"])
    cm = b.custom_message(
        "note",
        [
            {"type": "text", "text": "from "},
            {"type": "image", "data": "x", "mimeType": "image/png"},
            {"type": "text", "text": "ext"},
        ],
    )
    rb = b.say("b done")
    ids = {"u1": u1["id"], "r1": r1["id"], "ua": ua["id"], "ra": ra["id"], "cm": cm["id"], "rb": rb["id"]}
    return b.entries, ids


def ids_of(entries):
    return [e["id"] for e in entries]


# --------------------------------------------------------------------------- collection


def test_collect_goes_from_the_old_leaf_back_to_the_common_ancestor():
    entries, at = tree()
    collected = collect_entries_for_branch_summary(entries, at["ra"], at["rb"])
    assert ids_of(collected)[0] == at["ua"] and ids_of(collected)[-1] == at["ra"]
    assert [e["message"]["role"] for e in collected] == ["user", "assistant", "toolResult", "assistant"]
    # An index works as well as the entry list.
    assert collect_entries_for_branch_summary(index_by_id(entries), at["ra"], at["rb"]) == collected


def test_nothing_to_collect_without_an_old_leaf_or_towards_a_descendant():
    entries, at = tree()
    assert collect_entries_for_branch_summary(entries, None, at["ra"]) == []
    assert collect_entries_for_branch_summary(entries, at["r1"], at["ra"]) == []  # target below the old leaf
    assert collect_entries_for_branch_summary(entries, at["ra"], at["ra"]) == []


def test_going_back_up_collects_below_the_target():
    entries, at = tree()
    assert ids_of(collect_entries_for_branch_summary(entries, at["ra"], at["r1"]))[0] == at["ua"]
    assert ids_of(collect_entries_for_branch_summary(entries, at["ra"], at["u1"]))[0] == at["r1"]


def test_separate_roots_collect_the_whole_old_path():
    entries, at = tree()
    b = SessionBuilder(10)
    other = b.user("another root")
    collected = collect_entries_for_branch_summary([*entries, *b.entries], at["rb"], other["id"])
    assert ids_of(collected)[0] == at["u1"]


def test_unknown_ids_and_cycles_are_errors():
    entries, at = tree()
    with pytest.raises(MissingLeafError):
        collect_entries_for_branch_summary(entries, at["ra"], "nope")
    with pytest.raises(MissingLeafError):
        collect_entries_for_branch_summary(entries, "nope", at["ra"])
    looped = [{**e, "parentId": at["ra"]} if e["id"] == at["u1"] else e for e in entries]
    with pytest.raises(CycleError):
        collect_entries_for_branch_summary(looped, at["ra"], at["rb"])


# --------------------------------------------------------------------------- preparation


def test_tool_results_and_non_message_entries_are_not_summarized():
    entries, at = tree()
    b = SessionBuilder(11)
    b.branch_from(at["ra"])
    b.label(at["ra"], "x")
    b.model_change("openai", "gpt-5.1")
    b.custom("mode", {})
    b.session_info("name")
    b.subagent_result("done")
    collected = collect_entries_for_branch_summary([*entries, *b.entries], b.leaf, at["rb"])
    messages, file_ops = prepare_branch_entries(collected, 0)
    assert [m["role"] for m in messages] == ["user", "assistant", "assistant"]
    assert file_ops.file_lists() == ([], ["a.py"])


def test_nothing_but_tool_results_gives_no_content_to_summarize():
    b = SessionBuilder(12)
    b.tool_result({"id": "t", "name": "read"}, "orphan")
    messages, file_ops = prepare_branch_entries(b.entries, 1000)
    assert messages == []
    with pytest.raises(ValueError, match="No content to summarize"):
        branch_summary_request(messages)
    assert branch_summary_result(None, file_ops) == {
        "summary": "No content to summarize",
        "details": {"readFiles": [], "modifiedFiles": []},
    }


def test_earlier_summaries_pass_their_files_on_unless_made_by_an_extension():
    b = SessionBuilder(13)
    b.branch_summary("pi", details={"readFiles": ["r.md"], "modifiedFiles": ["m.py"]})
    b.branch_summary("hook", details={"readFiles": ["hook.md"], "modifiedFiles": ["hook.py"]}, from_hook=True)
    b.compaction("c", "x", 1, details={"readFiles": ["compaction.md"], "modifiedFiles": []})  # not used by Pi here
    messages, file_ops = prepare_branch_entries(b.entries, 0)
    assert [m["role"] for m in messages] == ["branchSummary", "branchSummary", "compactionSummary"]
    assert file_ops.file_lists() == (["r.md"], ["m.py"])


def test_budget_keeps_the_newest_messages():
    b = SessionBuilder(14)
    for i in range(5):
        b.user(f"{i}" * 400)  # 100 tokens each
    messages, _ = prepare_branch_entries(b.entries, 250)
    assert [m["content"][0]["text"][0] for m in messages] == ["3", "4"]
    assert len(prepare_branch_entries(b.entries, 0)[0]) == 5
    assert len(prepare_branch_entries(b.entries, -5)[0]) == 5  # a non-positive budget is no limit, as in Pi


def test_branch_summary_budget():
    assert branch_summary_budget(200000) == 200000 - 16384
    assert branch_summary_budget(None) == branch_summary_budget(0) == 128000 - 16384
    assert branch_summary_budget(50000, 1000) == 49000


# --------------------------------------------------------------------------- request and result


def test_request_instructions_extend_or_replace_the_prompt():
    messages = [{"role": "user", "content": "hi", "timestamp": 1}]
    plain = branch_summary_request(messages)
    assert plain.user_text == "<conversation>\n[User]: hi\n</conversation>\n\n" + BRANCH_SUMMARY_PROMPT
    assert (plain.kind, plain.max_tokens, plain.reasoning) == ("branch", 2048, None)
    assert branch_summary_request(messages, custom_instructions="Files only.").user_text.endswith(
        BRANCH_SUMMARY_PROMPT + "\n\nAdditional focus: Files only."
    )
    assert branch_summary_request(
        messages, custom_instructions="Files only.", replace_instructions=True
    ).user_text.endswith("</conversation>\n\nFiles only.")
    assert branch_summary_request(messages, replace_instructions=True).user_text == plain.user_text


def test_result_has_the_preamble_and_file_lists():
    ops = FileOps(read={"r.md"}, written={"w.py"}, edited={"r.md"})
    result = branch_summary_result("## Goal\nX", ops)
    assert result == {
        "summary": BRANCH_SUMMARY_PREAMBLE + "## Goal\nX\n\n<modified-files>\nr.md\nw.py\n</modified-files>",
        "details": {"readFiles": [], "modifiedFiles": ["r.md", "w.py"]},
    }
    assert branch_summary_result("", FileOps())["summary"] == BRANCH_SUMMARY_PREAMBLE
    with pytest.raises(TypeError):
        branch_summary_result(b"bytes", FileOps())


# --------------------------------------------------------------------------- the /tree leaf rule


def test_navigation_target_follows_pis_tree_rule():
    entries, at = tree()
    assert navigation_target(entries, at["u1"]) == (None, "start")  # a root user message: leaf before the first entry
    assert navigation_target(entries, at["ua"]) == (at["r1"], "branch a")
    assert navigation_target(entries, at["cm"]) == (at["r1"], "from ext")  # text blocks joined, images dropped
    assert navigation_target(entries, at["rb"]) == (at["rb"], None)
    b = SessionBuilder(15)
    b.branch_from(at["rb"])
    label = b.label(at["rb"], "x")
    string_custom = b.custom_message("c", "plain text")
    merged = [*entries, *b.entries]
    assert navigation_target(index_by_id(merged), label["id"]) == (label["id"], None)
    assert navigation_target(merged, string_custom["id"]) == (label["id"], "plain text")
    with pytest.raises(MissingLeafError, match="Entry nope not found"):
        navigation_target(entries, "nope")
