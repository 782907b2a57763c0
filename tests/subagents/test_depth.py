"""Depth above 1: a child below max depth delegates through ``proxy_request``; the host
re-checks the call against the stored envelope and runs grandchildren (real processes,
inline backend, real database)."""

from __future__ import annotations

import hashlib
import threading

import pytest

from runtime.models import RunStatus, SubprocessEvent, SubprocessRun
from runtime.runs.prompts import run_abort
from runtime.subagents.envelope import parse_envelope
from runtime.subagents.host import delegate_from_child
from tests.subagents.host_helpers import (
    Parent,
    alive,
    delegating,
    ls_then,
    make_agent,
    policy,
    script,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)

DELEGATES = {"delegate_task", "delegate_parallel", "delegate_chain"}
LEAF_ANSWER = "The leaf saw notes.txt. ✓"



def middle(tool: str = "delegate_task", arguments: dict | None = None) -> dict:
    """A child that delegates once (to ``leaf``), then answers."""
    arguments = arguments or {"agent": "leaf", "task": "list the workspace, delegate if you can"}
    return script(default={"replies": [[{"text": "Asking a leaf."}, {"tool_call": {"name": tool, "arguments": arguments}}], [{"text": "Middle done."}]]})


def tree_of(workspace, leaf_rules: dict, *, max_depth: int = 2, middle_rules: dict | None = None) -> Parent:
    make_agent("leaf", leaf_rules, workspace=workspace)
    make_agent("middle", middle_rules or middle(), workspace=workspace)
    boss = make_agent(
        "boss", delegating("delegate_task", {"agent": "middle", "task": "delegate deeper"}), workspace=workspace,
        subagent_policy=policy("middle", "leaf", max_depth=max_depth),
    )  # fmt: skip
    return Parent(boss)


def granted(row: SubprocessRun) -> dict[str, str]:
    return {t["name"]: t["route"] for t in row.envelope["toolPolicy"]["tools"]}


def test_a_child_below_max_depth_delegates_and_its_grandchild_reports_back(workspace):
    # The leaf tries to delegate too: at max depth it has no delegate tool, so the call is refused in the child.
    leaf = script(default={"replies": [[{"tool_call": {"name": "delegate_task", "arguments": {"agent": "leaf", "task": "deeper"}}}], [{"text": LEAF_ANSWER}]]})
    parent = tree_of(workspace, leaf)
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED, run.error
    child = SubprocessRun.objects.get(parent_run=run, depth=1)
    grandchild = SubprocessRun.objects.get(parent_run=run, depth=2)
    assert SubprocessRun.objects.filter(parent_run=run).count() == 2
    assert (child.status, grandchild.status) == ("completed", "completed")
    # The child (depth 1 of 2) got the delegate tools as proxy tools and the policy snapshot; the grandchild none.
    assert {n: r for n, r in granted(child).items() if n in DELEGATES} == dict.fromkeys(DELEGATES, "main-process-proxy")
    assert child.envelope["delegation"]["rootAgent"] == "boss" and child.envelope["delegation"]["policy"]["max_depth"] == 2
    assert not DELEGATES & set(granted(grandchild)) and grandchild.envelope["delegation"] == {}
    assert all("max subagent depth 2" in d["reason"] for d in grandchild.denied_tools if d["name"] in DELEGATES)
    # Its own row: below the child, in the top-level run and the same batch entry; its own process.
    assert grandchild.parent_subprocess_id == child.pk and grandchild.batch_entry_id == child.batch_entry_id
    assert grandchild.tool_call_id.startswith(child.run_id.hex + "/")
    assert grandchild.pid and grandchild.pid != child.pid
    assert grandchild.envelope["parentRunId"] == str(child.run_id)
    # The child asked through proxy_request and read the grandchild's full answer as its tool result.
    events = list(SubprocessEvent.objects.filter(run=child).order_by("seq"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    proxied = [e.payload for e in events if e.type == "proxy_request"]
    assert [p["name"] for p in proxied] == ["delegate_task"]
    result = next(e.payload for e in events if e.type == "tool_result")
    assert not result["isError"] and LEAF_ANSWER in result["preview"]
    # The leaf's own delegate call was refused inside its process (no grant), never reaching the host.
    leaf_call = next(e.payload for e in SubprocessEvent.objects.filter(run=grandchild, type="tool_call"))
    assert leaf_call["route"] == "refused"
    # The tree keeps the one batch of the top-level call; the grandchild appears inside it.
    assert parent.types() == ["user", "assistant", "subagent_batch", "subagent_result", "toolResult", "assistant"]
    batch, result_entry = parent.path()[2], parent.path()[3]
    record = batch["metadata"]["runs"][0]
    assert record["depth"] == 1 and [g["runId"] for g in record["subagents"]] == [str(grandchild.run_id)]
    assert record["subagents"][0]["status"] == "completed" and record["subagents"][0]["subagents"] == []
    listed = result_entry["content"]["results"][0]["subagents"]
    assert [(g["agent"], g["depth"], g["status"]) for g in listed] == [("leaf", 2, "completed")]
    assert listed[0]["sha256"] == hashlib.sha256(LEAF_ANSWER.encode()).hexdigest()
    # Usage of both levels rolls up into the top-level run.
    run.refresh_from_db()
    assert run.input_tokens >= (child.usage["input"] + grandchild.usage["input"])


def test_at_max_depth_the_host_refuses_a_delegate_proxy_call_anyway(workspace):
    parent = tree_of(workspace, ls_then(LEAF_ANSWER), max_depth=1)
    run = parent.prompt()
    child = SubprocessRun.objects.get(parent_run=run)
    # max_depth 1: the child got no delegate tool, asked anyway, and the call was refused in the child.
    assert not DELEGATES & set(granted(child)) and child.envelope["delegation"] == {}
    call = SubprocessEvent.objects.get(run=child, type="tool_call").payload
    assert call["route"] == "refused" and not SubprocessEvent.objects.filter(run=child, type="proxy_request").exists()
    assert SubprocessRun.objects.filter(parent_run=run).count() == 1
    event = {"name": "delegate_task", "toolCallId": "forged", "requestId": "r1", "arguments": {"agent": "leaf", "task": "x"}}
    # A proxy request reaching the host all the same (a forged line) is refused: no policy in the envelope …
    answer = delegate_from_child(child, parse_envelope(child.envelope), event, sink=parent.sink, cancel=threading.Event())
    assert answer["isError"] and "may not delegate" in answer["content"][0]["text"]
    # … and even with a policy snapshot, the row's depth decides, not the envelope's claims.
    forged = parse_envelope({**child.envelope, "delegation": {"rootAgent": "boss", "policy": policy("leaf", max_depth=1)}})
    answer = delegate_from_child(child, forged, event, sink=parent.sink, cancel=threading.Event())
    assert answer["isError"] and "maximum subagent depth (1)" in answer["content"][0]["text"]
    # An agent off the list is refused too.
    forged = parse_envelope({**child.envelope, "delegation": {"rootAgent": "boss", "policy": policy("leaf", max_depth=3)}})
    answer = delegate_from_child(child, forged, {**event, "arguments": {"agent": "boss", "task": "x"}}, sink=parent.sink, cancel=threading.Event())
    assert answer["isError"] and "may not delegate to" in answer["content"][0]["text"]
    assert SubprocessRun.objects.filter(parent_run=run).count() == 1


def test_parent_abort_reaches_running_grandchildren(workspace):
    slow = script(default={"replies": [[{"pause_ms": 60000}, {"text": "never"}]]})
    two = {"tasks": [{"agent": "leaf", "task": "a"}, {"agent": "leaf", "task": "b"}]}
    parent = tree_of(workspace, slow, middle_rules=middle("delegate_parallel", two))
    thread, holder, run = parent.start()
    wait_for(lambda: SubprocessRun.objects.filter(parent_run=run, depth=2, status="running", pid__isnull=False).count() == 2, what="two running grandchildren")
    run_abort(session_id=parent.session_id)
    thread.join(60)
    assert not thread.is_alive() and holder[0].status == RunStatus.ABORTED
    rows = list(SubprocessRun.objects.filter(parent_run=run))
    assert len(rows) == 3 and {r.status for r in rows} == {"cancelled"}
    assert all(f"parent run {run.run_id} aborted" in r.cancelled_by for r in rows)
    assert not any(alive(r.pid) for r in rows)
    for row in rows:  # every one ends with one recorded terminal event
        types = list(SubprocessEvent.objects.filter(run=row).order_by("seq").values_list("type", flat=True))
        assert types.count("run_error") + types.count("run_end") == 1 and types[-1] in ("run_error", "run_end")
    batch = parent.path()[2]
    assert batch["metadata"]["state"] == "cancelled"
    assert {g["status"] for g in batch["metadata"]["runs"][0]["subagents"]} == {"cancelled"}


@pytest.mark.parametrize("per_session", [1, 2])
def test_a_child_waiting_on_its_grandchildren_lends_its_session_slot(workspace, per_session):
    # Two middles at once, each delegating two leaves in parallel: depth 2 with a session limit
    # of 1 or 2. Without lending, the middles hold every slot while they wait for leaves that can
    # never claim one (a deadlock until the middles' wall clock).
    two = {"tasks": [{"agent": "leaf", "task": "first"}, {"agent": "leaf", "task": "second"}]}
    make_agent("leaf", ls_then(LEAF_ANSWER), workspace=workspace)
    make_agent("middle", middle("delegate_parallel", two), workspace=workspace)
    both = {"tasks": [{"agent": "middle", "task": "one"}, {"agent": "middle", "task": "two"}]}
    boss = make_agent(
        "boss", delegating("delegate_parallel", both), workspace=workspace,
        subagent_policy=policy("middle", "leaf", max_depth=2, max_concurrency_per_session=per_session,
                               child_budget={"wall_clock_seconds": 120}),
    )  # fmt: skip
    parent = Parent(boss)
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED, run.error
    rows = list(SubprocessRun.objects.filter(parent_run=run))
    assert len(rows) == 6 and {r.status for r in rows} == {"completed"}, [(r.depth, r.status, r.error_code) for r in rows]
    leaves = [r for r in rows if r.depth == 2]
    middles = [r for r in rows if r.depth == 1]
    assert all(r.final_text == LEAF_ANSWER for r in leaves) and all(r.final_text == "Middle done." for r in middles)
    # What held a slot at each moment: the leaves, and a middle only while it had no leaf out
    # (before its delegate call and after its leaves ended) — never more than the limit.
    spans = [(r.started_at, r.ended_at) for r in leaves]
    for m in middles:
        mine = [r for r in leaves if r.parent_subprocess_id == m.pk]
        spans += [(m.started_at, min(r.created_at for r in mine)), (max(r.ended_at for r in mine), m.ended_at)]
    for t, _ in spans:
        assert sum(1 for a, b in spans if a <= t < b) <= per_session


def test_the_lent_slot_goes_to_the_descendants_only(workspace):
    from runtime.subagents import services

    parent = tree_of(workspace, ls_then(LEAF_ANSWER), max_depth=2)
    run = parent.prompt()
    top = services.subprocess_runs_create(
        parent_run=run, batch_id="b1", tool_call_id="call-a", mode="parallel", parent_entry_id="", depth=1,
        tasks=[{"agent": "middle", "task": "m"}, {"agent": "middle", "task": "sibling"}],
    )  # fmt: skip
    assert services.subprocess_run_claim(top[0].run_id, max_per_session=1)
    below = services.subprocess_runs_create(
        parent_run=run, batch_id="b2", tool_call_id=f"{top[0].run_id.hex}/c1", mode="single", parent_entry_id="", depth=2,
        tasks=[{"agent": "leaf", "task": "l"}], parent_subprocess=top[0],
    )  # fmt: skip
    assert services.subprocess_run_claim(top[1].run_id, max_per_session=1) is False  # a sibling still sees the slot taken
    leaf = services.subprocess_run_claim(below[0].run_id, max_per_session=1)  # the waiting middle lends it to its leaf
    assert leaf and leaf.status == "starting"
    assert services.subprocess_run_claim(top[1].run_id, max_per_session=1) is False  # middle + leaf: still full for others
    SubprocessRun.objects.filter(pk=below[0].pk).update(status="completed")
    # The leaf is done: the middle works again and holds its slot.
    assert services.subprocess_run_claim(top[1].run_id, max_per_session=1) is False


LOOPING_LEAF = script(default={"reply": [{"pause_ms": 400}, {"text": "Working."}, {"tool_call": {"name": "ls", "arguments": {"path": "."}}}]})


@pytest.mark.parametrize(
    "budget, code, key",
    [
        ({"max_turns": 6}, "budget_turns", "turns"),
        ({"max_tool_calls": 6}, "budget_tool_calls", "toolCalls"),
        ({"max_tokens": 9000}, "budget_tokens", "tokens"),
        ({"max_cost": 0.009}, "budget_cost", "cost"),
        ({"wall_clock_seconds": 6}, "budget_wall_clock", None),
    ],
)
def test_a_batch_budget_counts_the_whole_subtree_and_says_which_budget_stopped_it(workspace, budget, code, key):
    # A middle delegates to two leaves that would call ls forever (their own budgets are the
    # defaults, far away): only the batch budget, summed over the middle and its leaves, stops them.
    two = {"tasks": [{"agent": "leaf", "task": "a"}, {"agent": "leaf", "task": "b"}]}
    make_agent("leaf", LOOPING_LEAF, workspace=workspace)
    make_agent("middle", middle("delegate_parallel", two), workspace=workspace)
    boss = make_agent(
        "boss", delegating("delegate_task", {"agent": "middle", "task": "delegate deeper"}), workspace=workspace,
        subagent_policy=policy("middle", "leaf", max_depth=2, batch_budget=budget),
    )  # fmt: skip
    parent = Parent(boss)
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED, run.error
    rows = list(SubprocessRun.objects.filter(parent_run=run))
    assert len(rows) == 3
    # Never "completed": each one ends partial, with the budget as its error code and stop reason.
    assert {(r.status, r.error_code) for r in rows} == {("partial", code)}, [(r.depth, r.status, r.error_code, r.cancelled_by) for r in rows]
    # Stopped by the host (or, for the wall clock, often by the child itself: the call's deadline is in its envelope).
    assert all(r.cancelled_by.startswith(f"batch budget: {code}") or (code == "budget_wall_clock" and not r.cancelled_by) for r in rows)
    for row in rows:
        end = SubprocessEvent.objects.filter(run=row).order_by("-seq").first()
        assert (end.type, end.payload["status"], end.payload["stopReason"]) == ("run_end", "partial", code)
        assert not alive(row.pid)
    leaves = [r for r in rows if r.depth == 2]
    assert all(r.final_text.startswith("Working.") for r in leaves)  # the partial text is kept
    batch = parent.path()[2]
    assert batch["metadata"]["state"] == "budget_stopped" and batch["metadata"]["budgetStop"]["code"] == code
    text = next(e for e in parent.path() if e["type"] == "message" and e["message"]["role"] == "toolResult")["message"]["content"][0]["text"]
    assert f"batch budget: {code}" in text and ": partial (" + code in text
    if key is not None:  # the middle alone never reached it: the leaves' spending counted
        from runtime.subagents.host import subtree_spent

        mid = next(r for r in rows if r.depth == 1)
        limit = next(iter(budget.values()))
        assert subtree_spent([mid])[key] >= limit
        alone = {"turns": mid.counts.get("turns", 0), "toolCalls": mid.counts.get("toolCalls", 0),
                 "tokens": mid.usage.get("totalTokens", 0), "cost": (mid.usage.get("cost") or {}).get("total", 0)}  # fmt: skip
        assert alone[key] < limit
