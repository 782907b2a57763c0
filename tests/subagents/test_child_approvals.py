"""Approvals for a subagent child's own calls: a child's call that needs approval waits in
the parent session (its API, its socket), the child named; allow runs it, deny reaches the
child's model as the tool result; "allow for this session" holds for the child's later
calls and, through the tree, for the next delegation; plan-only refuses; an unanswered
request expires as a denial; cancelling the batch cancels it; a read-only token cannot
decide. Real child processes, the scripted model, the inline backend, a real database."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from rest_framework.test import APIClient

from runtime.api.tokens import api_token_create
from runtime.models import RunStatus, SubagentApproval, SubprocessEvent, SubprocessRun
from runtime.runs import approvals
from runtime.runs.prompts import run_abort
from runtime.runs.questions import decide_approval
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start
from runtime.subagents import child_approvals
from runtime.subagents.child import PLAN_ONLY_TEXT, Child
from runtime.subagents.envelope import parse_envelope
from runtime.subagents.services import subprocess_run_cancel
from toolcatalog.protocol import Tool, ToolManifest, register_tool
from tests.subagents.host_helpers import Parent, delegating, make_agent, policy, script, wait_for
from tests.support.sockets import Socket, command

pytestmark = pytest.mark.django_db(transaction=True)

ONE = {"tasks": [{"agent": "helper", "task": "make the file"}]}
MAKE = "echo made > made.txt && echo made"


def bash_then_answer(*commands: str) -> dict:
    """A child that runs each command with bash, one call a turn, then answers with the last result."""
    calls = [[{"tool_call": {"name": "bash", "id": f"call_{i}", "arguments": {"command": c}}}] for i, c in enumerate(commands)]
    return script(default={"replies": [*calls, [{"text": "Child says: {{result}}"}]]})


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw")


def parent_for(workspace, owner, child_rules, *, child_mode="ask_changes", parent_mode="auto", tasks=ONE, provider="file") -> Parent:
    make_agent("helper", child_rules, workspace=workspace, tool_policy={"approval": child_mode})
    boss = make_agent(
        "boss", delegating("delegate_parallel", tasks, after="Boss done."), workspace=workspace, provider=provider,
        subagent_policy=policy("helper"), tool_policy={"approval": parent_mode},
    )  # fmt: skip
    parent = Parent(boss)
    parent.session_id = session_start(agent=boss, user=owner).session_id
    return parent


def client_for(owner, *, read_only=False) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + api_token_create(user=owner, read_only=read_only).secret)
    return client


def pending_request(run) -> SubagentApproval:
    return wait_for(lambda: SubagentApproval.objects.filter(subprocess_run__parent_run=run, status="pending").first(), what="a pending child request")


def child_of(run) -> SubprocessRun:
    return SubprocessRun.objects.get(parent_run=run)


def child_cwd(row: SubprocessRun) -> Path:
    return Path(row.envelope["runtimeConfig"]["cwd"])


def child_results(row: SubprocessRun) -> list[dict]:
    return [e.payload for e in SubprocessEvent.objects.filter(run=row, type="tool_result").order_by("seq")]


def decisions(parent: Parent) -> list[dict]:
    return [e["data"] for e in parent.path() if e["type"] == "custom" and e.get("customType") == approvals.DECISION_TYPE]


def test_a_childs_call_waits_in_the_parent_session_named_and_allow_runs_it(workspace, owner):
    parent = parent_for(workspace, owner, bash_then_answer(MAKE))
    thread, holder, run = parent.start()
    request = pending_request(run)
    child = child_of(run)
    assert not (child_cwd(child) / "made.txt").exists()  # it waits: nothing ran
    # The child says it waits (its heartbeat phase), and the host's idle limit leaves it alone.
    wait_for(lambda: SubprocessEvent.objects.filter(run=child, type="heartbeat", payload__phase="approval").exists(), what="an approval heartbeat")

    listed = client_for(owner, read_only=True).get(f"/api/sessions/{parent.session_id}/approvals/")
    assert listed.status_code == 200
    [item] = listed.json()["approvals"]
    assert item["tool"] == "bash" and item["command"] == MAKE and item["cwd"] == str(child_cwd(child)) and item["mode"] == "ask_changes"
    assert item["subagent"]["agent"] == "helper" and item["subagent"]["runId"] == str(child.run_id) and item["subagent"]["task"] == "make the file"

    body = {"toolCallId": request.tool_call_id, "decision": "allow", "subagentRunId": str(child.run_id)}
    refused = client_for(owner, read_only=True).post(f"/api/sessions/{parent.session_id}/approve/", body, format="json")
    assert refused.status_code == 403
    assert SubagentApproval.objects.get(pk=request.pk).status == "pending"
    wrong = client_for(owner).post(f"/api/sessions/{parent.session_id}/approve/", {**body, "toolCallId": "call_nope"}, format="json")
    assert wrong.status_code == 400 and "toolCallId" in str(wrong.json())

    allowed = client_for(owner).post(f"/api/sessions/{parent.session_id}/approve/", body, format="json")
    assert allowed.status_code == 200 and allowed.json()["approval"]["status"] == "allowed"
    again = client_for(owner).post(f"/api/sessions/{parent.session_id}/approve/", body, format="json")
    assert again.status_code == 400  # decided once

    thread.join(60)
    assert holder[0].status == RunStatus.COMPLETED
    child.refresh_from_db()
    assert child.status == "completed" and "made" in child.final_text
    assert (child_cwd(child) / "made.txt").read_text() == "made\n"
    assert client_for(owner).get(f"/api/sessions/{parent.session_id}/approvals/").json()["approvals"] == []
    [entry] = decisions(parent)
    assert entry["decision"] == "allow" and entry["by"] == "alice" and entry["tool"] == "bash" and entry["command"] == MAKE
    assert entry["subagent"]["agent"] == "helper" and entry["subagent"]["runId"] == str(child.run_id)
    # The entry is after the batch's results and before the call's result; the model never reads it.
    types = parent.types()
    assert types.index("custom") > types.index("subagent_result") and types.index("custom") < types.index("toolResult")


def test_the_consoles_subagent_run_page_shows_its_decided_requests(workspace, owner, admin_client):
    parent = parent_for(workspace, owner, bash_then_answer(MAKE))
    thread, holder, run = parent.start()
    request = pending_request(run)
    child_approvals.decide(
        session_id=parent.session_id, subagent_run_id=request.subprocess_run.run_id, tool_call_id=request.tool_call_id,
        decision="deny", note="a build is running", actor=owner,
    )  # fmt: skip
    thread.join(60)
    page = admin_client.get(f"/admin/runtime/subprocessrun/{child_of(run).pk}/change/").content.decode()
    section = page[page.index("inline-group") :]
    assert "call_0" in section and "denied" in section and "a build is running" in section and "alice" in section


@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_deny_reaches_the_childs_model_as_the_tool_result_and_it_goes_on(workspace, owner, provider):
    parent = parent_for(workspace, owner, bash_then_answer(MAKE), provider=provider)
    thread, holder, run = parent.start()
    request = pending_request(run)
    child_approvals.decide(
        session_id=parent.session_id, subagent_run_id=request.subprocess_run.run_id, tool_call_id=request.tool_call_id,
        decision="deny", note="not in my workspace", actor=owner,
    )  # fmt: skip
    thread.join(60)
    assert holder[0].status == RunStatus.COMPLETED
    child = child_of(run)
    assert child.status == "completed"
    assert "Not run: alice denied this call. Their note: not in my workspace" in child.final_text  # the model read it and answered
    [result] = child_results(child)
    assert result["isError"] and "alice denied" in result["preview"]
    assert not (child_cwd(child) / "made.txt").exists()
    [entry] = decisions(parent)
    assert entry["decision"] == "deny" and entry["note"] == "not in my workspace" and entry["subagent"]["agent"] == "helper"


def test_allow_for_the_session_holds_for_the_childs_later_calls_and_the_next_delegation(workspace, owner):
    parent = parent_for(workspace, owner, bash_then_answer("echo one", "echo two"))
    thread, holder, run = parent.start()
    request = pending_request(run)
    assert request.request["command"] == "echo one"
    child_approvals.decide(
        session_id=parent.session_id, subagent_run_id=request.subprocess_run.run_id, tool_call_id=request.tool_call_id,
        decision="allow", scope="session", prefix="echo ", actor=owner,
    )  # fmt: skip
    thread.join(60)
    assert holder[0].status == RunStatus.COMPLETED
    child = child_of(run)
    assert child.final_text.strip() == "Child says: two"  # the second call ran without asking
    assert SubagentApproval.objects.filter(subprocess_run=child).count() == 1
    [entry] = decisions(parent)
    assert entry["scope"] == "session" and entry["prefix"] == "echo"
    # The next prompt's child gets the rule in its envelope (read from the tree) and asks nothing.
    second = parent.prompt("please delegate again")
    assert second.status == RunStatus.COMPLETED
    later = SubprocessRun.objects.get(parent_run=second)
    assert later.envelope["approval"]["rules"] == [{"tool": "bash", "prefix": "echo"}]
    assert later.status == "completed" and later.final_text.strip() == "Child says: two"
    assert not SubagentApproval.objects.filter(subprocess_run=later).exists()


def test_allow_for_the_session_on_one_child_lets_a_waiting_sibling_run_too(workspace, owner):
    two = {"tasks": [{"agent": "helper", "task": "first"}, {"agent": "helper", "task": "second"}]}
    parent = parent_for(workspace, owner, bash_then_answer("echo hi"), tasks=two)
    thread, holder, run = parent.start()

    def both():
        rows = list(SubagentApproval.objects.filter(subprocess_run__parent_run=run, status="pending").order_by("subprocess_run__task_index"))
        return rows if len(rows) == 2 else None

    waiting = wait_for(both, what="both children waiting")
    first, second = waiting
    child_approvals.decide(
        session_id=parent.session_id, subagent_run_id=first.subprocess_run.run_id, tool_call_id=first.tool_call_id,
        decision="allow", scope="session", actor=owner,
    )  # fmt: skip
    thread.join(60)
    assert holder[0].status == RunStatus.COMPLETED
    second.refresh_from_db()
    assert (second.status, second.decided_by, second.scope) == ("allowed", "alice", "once")
    assert [r.status for r in SubprocessRun.objects.filter(parent_run=run)] == ["completed", "completed"]
    assert sorted((d["scope"], d["decision"]) for d in decisions(parent)) == [("once", "allow"), ("session", "allow")]


def test_the_stricter_of_the_childs_mode_and_the_sessions_holds(workspace, owner):
    # The child agent says auto; the parent session runs ask_changes: the child asks. (The
    # delegation itself waits for approval in the parent's own ask mode, as before.)
    parent = parent_for(workspace, owner, bash_then_answer(MAKE), child_mode="auto", parent_mode="ask_changes")
    thread, holder, run = parent.start()
    wait_for(lambda: RunStatus.WAITING == type(run).objects.get(pk=run.pk).status, what="the delegation waiting")
    [own] = client_for(owner).get(f"/api/sessions/{parent.session_id}/approvals/").json()["approvals"]
    assert own["tool"] == "delegate_parallel" and own["subagent"] is None  # the run's own request, listed too
    thread.join(60)  # the parked run's execution ended; it resumes as a new one
    decide_approval(
        session_id=parent.session_id, tool_call_id=type(run).objects.get(pk=run.pk).question["toolCallId"], decision="allow", actor=owner, start=False
    )
    resumed = threading.Thread(target=lambda: _execute_and_close(run, parent.sink))
    resumed.start()
    request = pending_request(run)
    assert request.request["mode"] == "ask_changes"
    assert child_of(run).envelope["approval"]["mode"] == "ask_changes"
    child_approvals.decide(
        session_id=parent.session_id, subagent_run_id=request.subprocess_run.run_id, tool_call_id=request.tool_call_id, decision="allow", actor=owner
    )
    resumed.join(60)
    assert type(run).objects.get(pk=run.pk).status == RunStatus.COMPLETED
    assert (child_cwd(child_of(run)) / "made.txt").exists()


def _execute_and_close(run, sink) -> None:
    from django.db import connection  # this thread's own connection, closed when it ends

    try:
        execute_run(run.run_id, sink=sink)
    finally:
        connection.close()


def test_a_plan_only_child_refuses_its_changing_calls(workspace, owner):
    parent = parent_for(workspace, owner, bash_then_answer(MAKE), child_mode="plan_only")
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED
    child = child_of(run)
    assert child.envelope["approval"]["mode"] == "plan_only"
    assert child.final_text == "Child says: " + PLAN_ONLY_TEXT
    assert not (child_cwd(child) / "made.txt").exists()
    assert not SubagentApproval.objects.exists()
    # The changing tools are not even offered to the child's model (what the child's loop leaves out).
    as_child = Child(parse_envelope(child.envelope), writer=None, stdin=None)
    hidden = {name for name in as_child.tools if as_child._hidden_in_plan_mode(name)}
    assert {"bash", "write", "edit"} <= hidden and not {"ls", "read", "grep"} & hidden
    # A Child built inside this process leaves its schema checks alone (the child process defers them).
    with pytest.raises(Exception, match="objekt"):
        register_tool(_BadSchema())


class _BadSchema(Tool):
    name = "test_bad_schema_after_child"
    label = description = "A tool whose schema is not one"
    parameters = {"type": "objekt"}
    manifest = ToolManifest(kind="extension")

    def execute(self, ctx, args):
        raise AssertionError("never registered")


def test_the_wait_counts_within_the_childs_wall_clock(workspace, owner):
    make_agent("helper", bash_then_answer(MAKE), workspace=workspace, tool_policy={"approval": "ask_changes"})
    boss = make_agent(
        "boss", delegating("delegate_parallel", ONE, after="Boss done."), workspace=workspace,
        subagent_policy=policy("helper", child_budget={"wall_clock_seconds": 3}),
    )  # fmt: skip
    parent = Parent(boss)
    parent.session_id = session_start(agent=boss, user=owner).session_id
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED
    child = child_of(run)
    request = SubagentApproval.objects.get(subprocess_run=child)
    assert (request.expires_at - child.started_at).total_seconds() <= 3  # never past the child's own end
    assert request.status in ("expired", "cancelled")
    assert (child.status, child.error_code) == ("partial", "budget_wall_clock") and not (child_cwd(child) / "made.txt").exists()


def test_an_unanswered_request_expires_as_a_denial(workspace, owner, settings):
    settings.NETA_ASK_USER_TIMEOUT_SECONDS = 1
    parent = parent_for(workspace, owner, bash_then_answer(MAKE))
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED
    child = child_of(run)
    assert "nobody approved this call" in child.final_text
    assert SubagentApproval.objects.get(subprocess_run=child).status == "expired"
    [entry] = decisions(parent)
    assert entry["decision"] == "deny" and entry["expired"] is True
    assert not (child_cwd(child) / "made.txt").exists()


def test_the_reaper_expires_an_overdue_request_and_cancels_one_whose_child_is_gone(workspace, owner):
    from django.utils import timezone  # only this test moves a request's clock

    parent = parent_for(workspace, owner, bash_then_answer(MAKE))
    thread, holder, run = parent.start()
    request = pending_request(run)
    SubagentApproval.objects.filter(pk=request.pk).update(expires_at=timezone.now())
    child_approvals.reap()
    assert SubagentApproval.objects.get(pk=request.pk).status == "expired"
    thread.join(60)
    assert "nobody approved this call" in child_of(run).final_text


def test_cancelling_the_batch_cancels_its_requests(workspace, owner):
    parent = parent_for(workspace, owner, bash_then_answer(MAKE))
    thread, holder, run = parent.start()
    request = pending_request(run)
    run_abort(session_id=parent.session_id)
    thread.join(60)
    assert holder[0].status == RunStatus.ABORTED
    assert SubagentApproval.objects.get(pk=request.pk).status == "cancelled"
    assert child_of(run).status == "cancelled"
    assert not (child_cwd(child_of(run)) / "made.txt").exists()
    assert client_for(owner).get(f"/api/sessions/{parent.session_id}/approvals/").json()["approvals"] == []


def test_cancelling_the_child_cancels_its_request(workspace, owner):
    parent = parent_for(workspace, owner, bash_then_answer(MAKE))
    thread, holder, run = parent.start()
    request = pending_request(run)
    subprocess_run_cancel(request.subprocess_run, by="user alice (api)")
    thread.join(60)
    assert SubagentApproval.objects.get(pk=request.pk).status == "cancelled"
    assert child_of(run).status == "cancelled"
    with pytest.raises(Exception) as refused:
        child_approvals.decide(
            session_id=parent.session_id, subagent_run_id=request.subprocess_run.run_id, tool_call_id=request.tool_call_id, decision="allow", actor=owner
        )
    assert "toolCallId" in str(refused.value)


def test_a_childs_request_is_decided_over_the_socket(workspace, owner):
    parent = parent_for(workspace, owner, bash_then_answer(MAKE))
    thread, holder, run = parent.start()
    request = pending_request(run)
    token = api_token_create(user=owner).secret
    reader = api_token_create(user=owner, read_only=True).secret
    frame = {"type": "approve", "toolCallId": request.tool_call_id, "decision": "allow", "subagentRunId": str(request.subprocess_run.run_id)}

    async def decide(secret: str) -> dict:
        socket = await Socket.connect(parent.session_id, token=secret)
        try:
            assert (await socket.recv())["type"] == "hello"
            return await command(socket, dict(frame))
        finally:
            await socket.close()

    refused = async_to_sync(decide)(reader)
    assert refused["type"] == "error" and SubagentApproval.objects.get(pk=request.pk).status == "pending"
    ack = async_to_sync(decide)(token)
    assert ack["type"] == "ack" and ack["result"] == {"subagentRunId": str(request.subprocess_run.run_id), "toolCallId": request.tool_call_id, "status": "allowed"}
    thread.join(60)
    assert holder[0].status == RunStatus.COMPLETED and (child_cwd(child_of(run)) / "made.txt").exists()


def test_a_grandchilds_request_waits_in_the_top_session_named_with_its_depth(workspace, owner):
    make_agent("leaf", bash_then_answer(MAKE), workspace=workspace, tool_policy={"approval": "ask_changes"})
    make_agent("middle", script(default={"replies": [
        [{"tool_call": {"name": "delegate_task", "arguments": {"agent": "leaf", "task": "make the file deeper"}}}], [{"text": "Middle got: {{result}}"}]]}),
        workspace=workspace)  # fmt: skip
    boss = make_agent(
        "boss", delegating("delegate_task", {"agent": "middle", "task": "delegate deeper"}), workspace=workspace,
        subagent_policy=policy("middle", "leaf", max_depth=2),
    )  # fmt: skip
    parent = Parent(boss)
    parent.session_id = session_start(agent=boss, user=owner).session_id
    thread, holder, run = parent.start()
    request = pending_request(run)
    leaf = request.subprocess_run
    assert leaf.depth == 2 and leaf.agent == "leaf"
    middle = SubprocessRun.objects.get(parent_run=run, depth=1)
    assert middle.envelope["approval"]["mode"] == "auto" and leaf.envelope["approval"]["mode"] == "ask_changes"
    [item] = client_for(owner).get(f"/api/sessions/{parent.session_id}/approvals/").json()["approvals"]
    assert item["subagent"]["depth"] == 2 and item["subagent"]["agent"] == "leaf"
    allowed = client_for(owner).post(
        f"/api/sessions/{parent.session_id}/approve/", {"toolCallId": item["toolCallId"], "decision": "allow", "subagentRunId": str(leaf.run_id)}, format="json"
    )
    assert allowed.status_code == 200
    thread.join(60)
    assert holder[0].status == RunStatus.COMPLETED
    leaf.refresh_from_db()
    assert leaf.status == "completed" and (child_cwd(leaf) / "made.txt").exists()
    [entry] = decisions(parent)
    assert entry["subagent"] == {"runId": str(leaf.run_id), "agent": "leaf", "task": "make the file deeper", "depth": 2}


@pytest.mark.oracle
def test_pi_reads_a_session_with_a_childs_decision_as_neta_does(workspace, owner, oracle, tmp_path):
    import json  # only this test reads the oracle's answer
    import subprocess  # only this test runs the oracle

    from sessions_tree.pi_files import export_session  # only this test exports
    from sessions_tree.pi_view import DEFAULT  # only this test compares the views
    from tests.support.entries import pi_view_of_file  # only this test compares the views

    parent = parent_for(workspace, owner, bash_then_answer(MAKE))
    thread, holder, run = parent.start()
    request = pending_request(run)
    child_approvals.decide(
        session_id=parent.session_id, subagent_run_id=request.subprocess_run.run_id, tool_call_id=request.tool_call_id, decision="allow", actor=owner
    )
    thread.join(60)
    assert holder[0].status == RunStatus.COMPLETED
    path = export_session(parent.session_id, tmp_path / "exported.jsonl")
    done = subprocess.run([str(oracle), "context", str(path)], capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout == pi_view_of_file(path, DEFAULT, False)
    pi = json.loads(done.stdout)
    assert [m["role"] for m in pi["messages"]] == ["user", "assistant", "toolResult", "assistant"]  # the decision is no message
