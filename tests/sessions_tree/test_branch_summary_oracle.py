"""Neta's branch summaries against Pi's own code, on a generated tree.

For every navigation (old leaf -> target) Pi's ``collectEntriesForBranchSummary``,
``prepareBranchEntries`` and ``generateBranchSummary`` run on the file (one node
process, see ``test_compaction_oracle.PI_BATCH_DRIVER``) and Neta's
:mod:`sessions_tree.branch_summary` on the same file: the collected entries, the
messages within the budget, the file lists, the request and the stored summary
must be equal.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from sessions_tree.branch_summary import (
    branch_summary_budget,
    branch_summary_request,
    branch_summary_result,
    collect_entries_for_branch_summary,
    prepare_branch_entries,
)
from sessions_tree.jsonl import parse_session_text
from tests.sessions_tree.pi_sessions import SessionBuilder, as_js, prose, random_turn, run_pi_batch


def build_tree() -> tuple[SessionBuilder, dict]:
    rng = random.Random(77)
    b = SessionBuilder(0x42)
    b.start()
    first_user = b.user("Speed up the importer.")
    b.step("read", {"path": "src/importer.py"}, prose(rng, 80))
    b.say("It parses every row twice.")
    fork = b.leaf
    at = {"first_user": first_user["id"], "fork": fork}

    # a: a plain tool-heavy branch
    for _ in range(3):
        random_turn(b, rng, steps=3, result_words=120)
    at["a"] = b.leaf

    # b: a branch summary (with details), a compaction, a huge tool result, a label
    b.branch_from(fork)
    b.branch_summary("Left branch a.", details={"readFiles": ["notes.md", "src/😀.py"], "modifiedFiles": ["src/a.py"]})
    b_user = b.user("Try streaming instead.")
    at["b_user"] = b_user["id"]
    b.step("edit", {"path": "src/importer.py", "edits": []}, "ok")
    b.say("Streaming works.")
    b.compaction(
        "## Goal\nStreaming importer", b_user["id"], 5000, details={"readFiles": ["old.md"], "modifiedFiles": []}
    )
    random_turn(b, rng, steps=2, result_words=100)
    b.user("Show the full log.")
    b.step("bash", {"command": "cat import.log"}, "row ok ✓\n" * 6000)
    b.say("All rows imported.")
    b.label(b.leaf, "streaming")
    at["b"] = b.leaf

    # c: custom messages, bash runs, an extension's summary (details ignored), unknown types
    b.branch_from(fork)
    b.custom_message("reminder", "Remember the CSV dialect.", display=True)
    b.say("Noted.")
    b.branch_summary("Hook summary.", details={"readFiles": ["hook.md"], "modifiedFiles": ["hook.py"]}, from_hook=True)
    b.bash("wc -l data.csv", "100000 data.csv")
    b.bash("cat secrets", "x", exclude=True)
    b.subagent_result("scout: 3 candidate files")
    b.custom("mode", {"x": 1})
    b.model_change("openai", "gpt-5.1")
    b.user([{"type": "text", "text": "Use the ！ and 😀 paths."}])
    c1 = b.tool_call("write", {"path": "src/！.py", "content": "x"})
    c2 = b.tool_call("read", {"path": "src/😀.py"})
    c3 = b.tool_call("edit", {"path": "src/z.py", "edits": []})
    b.assistant([{"type": "text", "text": "Three at once."}, c1, c2, c3])
    b.tool_result(c1, "written")
    b.tool_result(c2, "read")
    b.tool_result(c3, "edited")
    b.say("Done.")
    at["c"] = b.leaf

    # d: a large branch summary below small messages (the 90 % rule)
    b.branch_from(fork)
    b.branch_summary("long summary " * 615, details={"readFiles": ["d.md"], "modifiedFiles": []})
    b.user("x" * 240)
    b.say("y" * 160)
    at["d"] = b.leaf

    # e: only tool results and a label (nothing to summarize)
    b.branch_from(fork)
    call = {"id": "toolu_orphan", "name": "read"}
    b.tool_result(call, "orphan 1")
    b.tool_result(call, "orphan 2")
    b.label(b.leaf, "orphans")
    at["e"] = b.leaf

    # a second root
    b.branch_from(None)
    b.user("Unrelated question.")
    b.say("Unrelated answer.")
    at["root2"] = b.leaf
    return b, at


TREE, AT = build_tree()


@dataclass
class Nav:
    name: str
    old: str
    target: str
    context_window: int | None = None
    reserve: int | None = None
    instructions: str | None = None
    replace: bool | None = None

    def job(self, file: str) -> dict:
        return {
            "kind": "branch",
            "file": file,
            "oldLeaf": AT.get(self.old, self.old),
            "target": AT.get(self.target, self.target),
            "contextWindow": self.context_window,
            "reserveTokens": self.reserve,
            "customInstructions": self.instructions,
            "replaceInstructions": self.replace,
        }


D_TAIL = 100  # estimated tokens of branch d's user + assistant messages
NAVS = [
    Nav("a-to-b", "a", "b"),
    Nav("b-to-a", "b", "a"),
    Nav("b-to-c", "b", "c"),
    Nav("c-to-a-instructions", "c", "a", instructions="Focus on the CSV dialect."),
    Nav("c-to-a-replace", "c", "a", instructions="Only list the files.", replace=True),
    Nav("c-to-a-replace-without-text", "c", "a", replace=True),
    Nav("b-to-fork", "b", "fork"),
    Nav("b-to-its-user-message", "b", "b_user"),
    Nav("b-to-first-user", "b", "first_user"),
    Nav("fork-to-a-descendant", "fork", "a"),
    Nav("a-to-itself", "a", "a"),
    Nav("root2-to-a", "root2", "a"),
    Nav("a-to-root2", "a", "root2"),
    Nav("e-to-a-no-content", "e", "a"),
    Nav("b-small-window", "b", "a", context_window=20000),
    Nav("b-tiny-budget", "b", "a", context_window=16384 + 60),
    Nav("b-negative-budget-unlimited", "b", "a", context_window=10000),
    Nav("b-unknown-window", "b", "a", context_window=0),
    Nav("c-budget-stops-at-the-tool-calls", "c", "a", context_window=16384 + 10),
    Nav("a-reserve-4000", "a", "c", context_window=6000, reserve=4000),
    Nav("d-summary-fits-under-90-percent", "d", "a", context_window=16384 + 2200),
    Nav("d-summary-dropped-over-90-percent", "d", "a", context_window=16384 + D_TAIL + 5),
]


@pytest.fixture(scope="module")
def pi_navs(oracle, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("branch-oracle")
    file = TREE.write(folder / "tree.jsonl")
    results = run_pi_batch(oracle, [nav.job(str(file)) for nav in NAVS], folder)
    for nav, result in zip(NAVS, results, strict=True):
        assert "error" not in result, f"{nav.name}: {result['error']}"
    return {"file": file, **{nav.name: r for nav, r in zip(NAVS, results, strict=True)}}


@pytest.mark.oracle
@pytest.mark.parametrize("nav", NAVS, ids=[n.name for n in NAVS])
def test_branch_summary_equals_pis(nav, pi_navs):
    pi = pi_navs[nav.name]
    entries = parse_session_text(pi_navs["file"].read_text(encoding="utf-8")).entries
    job = nav.job("")
    collected = collect_entries_for_branch_summary(entries, job["oldLeaf"], job["target"])
    assert [e["id"] for e in collected] == pi["entryIds"]

    window = 200000 if nav.context_window is None else nav.context_window
    budget = branch_summary_budget(window, *([nav.reserve] if nav.reserve is not None else []))
    assert budget == pi["budget"]
    messages, file_ops = prepare_branch_entries(collected, budget)
    assert as_js(messages) == pi["messages"]
    read_files, modified_files = file_ops.file_lists()
    assert {"readFiles": read_files, "modifiedFiles": modified_files} == pi["fileOps"]

    requests = [{k: v for k, v in c.items() if k != "reply"} for c in pi["requests"]]
    if messages:
        request = branch_summary_request(
            messages, custom_instructions=nav.instructions, replace_instructions=bool(nav.replace)
        )
        assert [request.to_pi()] == requests
        reply = pi["requests"][0]["reply"]
    else:
        assert requests == []
        reply = None
    stored = pi["result"]
    expected = {
        "summary": stored["summary"],
        "details": {"readFiles": stored.get("readFiles") or [], "modifiedFiles": stored.get("modifiedFiles") or []},
    }
    assert branch_summary_result(reply, file_ops) == expected


@pytest.mark.oracle
def test_the_navigations_cover_what_they_claim(pi_navs):
    assert pi_navs["fork-to-a-descendant"]["entryIds"] == [] and pi_navs["a-to-itself"]["entryIds"] == []
    assert pi_navs["e-to-a-no-content"]["result"] == {"summary": "No content to summarize"}
    assert pi_navs["root2-to-a"]["commonAncestorId"] is None
    full, small = pi_navs["b-to-a"]["messages"], pi_navs["b-tiny-budget"]["messages"]
    assert 0 < len(small) < len(full)
    assert pi_navs["b-negative-budget-unlimited"]["messages"] == full
    d_fit, d_drop = (
        pi_navs["d-summary-fits-under-90-percent"]["messages"],
        pi_navs["d-summary-dropped-over-90-percent"]["messages"],
    )
    assert [m["role"] for m in d_fit] == ["branchSummary", "user", "assistant"]
    assert [m["role"] for m in d_drop] == ["user", "assistant"]
    roles = {m["role"] for m in pi_navs["b-to-a"]["messages"]}
    assert {"branchSummary", "compactionSummary", "user", "assistant"} <= roles and "toolResult" not in roles
    # The message that overflows the budget is left out, but its files still count.
    stopped = pi_navs["c-budget-stops-at-the-tool-calls"]
    assert [m["role"] for m in stopped["messages"]] == ["assistant"]
    assert (
        stopped["fileOps"]["modifiedFiles"] == ["src/z.py", "src/！.py"]
        and "src/😀.py" in stopped["fileOps"]["readFiles"]
    )
    assert "hook.py" not in pi_navs["c-to-a-instructions"]["fileOps"]["modifiedFiles"]
    assert pi_navs["c-to-a-replace"]["requests"][0]["userText"].endswith("</conversation>\n\nOnly list the files.")
