"""Replaying the branch summaries Pi itself wrote (``pi-oracle/fixtures/02-branches``).

Pi navigated twice with a summary: back to the ``iterative`` assistant reply
(leaf = the target), then to the first user message (leaf = its parent, with
custom instructions). Pi does not store the old leaf or the target; they are
recovered from the file (the old leaf is the line before the summary: Pi's leaf
then was the last appended entry) and from how generate.mjs navigated.
``02-branches.summarizer-calls.json`` has Pi's requests and replies.
"""

from __future__ import annotations

import json

import pytest

from sessions_tree.branch_summary import (
    branch_summary_budget,
    branch_summary_request,
    branch_summary_result,
    collect_entries_for_branch_summary,
    navigation_target,
    prepare_branch_entries,
)
from sessions_tree.jsonl import parse_session_text
from sessions_tree.path import get_path
from tests.support.services import FIXTURES

SESSION = parse_session_text((FIXTURES / "02-branches.jsonl").read_text(encoding="utf-8"))
CALLS = json.loads((FIXTURES / "02-branches.summarizer-calls.json").read_text(encoding="utf-8"))
ENTRIES = SESSION.entries
BY_ID = {e["id"]: e for e in ENTRIES}
SUMMARIES = [(i, e) for i, e in enumerate(ENTRIES) if e["type"] == "branch_summary"]
INSTRUCTIONS = [None, "Focus on decisions about the algorithm."]  # generate.mjs's navigate() options


def navigation(n: int) -> tuple[str, str, dict]:
    """(old leaf, target, stored summary entry) of Pi's n-th summarized navigation."""
    index, summary = SUMMARIES[n]
    old_leaf = ENTRIES[index - 1]["id"]
    attach = summary["parentId"]
    if n == 0:
        target = attach  # an assistant reply: the leaf is the target itself
    else:
        # A user message: the leaf is its parent, so the target is the user
        # message below the attach point on the old leaf's path.
        old_path = get_path(ENTRIES, old_leaf)
        target = next(e["id"] for e in old_path if e.get("parentId") == attach)
        assert BY_ID[target]["message"]["role"] == "user"
    return old_leaf, target, summary


def test_the_fixture_has_two_summarized_navigations():
    assert len(SUMMARIES) == len(CALLS) == 2


@pytest.mark.parametrize("n", [0, 1])
def test_navigation_target_gives_the_attach_point_pi_used(n):
    _, target, summary = navigation(n)
    new_leaf, editor_text = navigation_target(ENTRIES, target)
    assert new_leaf == summary["parentId"] == summary["fromId"]
    if n == 0:
        assert editor_text is None
    else:
        assert editor_text == "fib_sequence(35) takes seconds. Make it fast."


@pytest.mark.parametrize("n", [0, 1])
def test_collect_prepare_and_request_equal_pis(n):
    old_leaf, target, _ = navigation(n)
    entries = collect_entries_for_branch_summary(ENTRIES, old_leaf, target)
    # The abandoned branch runs from below the common ancestor to the old leaf (a label).
    assert entries[-1]["id"] == old_leaf and entries[-1]["type"] == "label"
    messages, _ = prepare_branch_entries(entries, branch_summary_budget(200000))  # generate.mjs's model window
    request = branch_summary_request(messages, custom_instructions=INSTRUCTIONS[n])
    call = CALLS[n]
    assert request.to_pi() == {k: call[k] for k in ("systemPrompt", "userText", "maxTokens")}
    assert "reasoning" not in call and request.reasoning is None


@pytest.mark.parametrize("n", [0, 1])
def test_pis_reply_gives_the_stored_summary_and_details(n):
    old_leaf, target, summary = navigation(n)
    entries = collect_entries_for_branch_summary(ENTRIES, old_leaf, target)
    _, file_ops = prepare_branch_entries(entries, branch_summary_budget(200000))
    result = branch_summary_result(CALLS[n]["reply"], file_ops)
    assert result == {"summary": summary["summary"], "details": summary["details"]}
    assert summary["fromHook"] is False


def test_the_second_summary_carries_the_first_ones_files():
    # The second abandoned branch contains the first summary: its modified file
    # (fib.py) is carried over from its details, cli.py comes from a tool call.
    old_leaf, target, summary = navigation(1)
    entries = collect_entries_for_branch_summary(ENTRIES, old_leaf, target)
    assert SUMMARIES[0][1] in entries
    _, file_ops = prepare_branch_entries(entries, branch_summary_budget(200000))
    assert file_ops.file_lists() == ([], ["src/fibcli/cli.py", "src/fibcli/fib.py"])
