"""Tool approvals in the turn loop: each mode decides each kind of tool as documented; a call
that needs approval parks the run (``waiting``, like a question) with the exact call; Allow and
Deny resume it, the decision is a tree entry the model never reads, "allow for this session"
rules are read back from the tree (a fork keeps them, a new session does not); plan-only
refuses and hides the changing tools; an expired request is a denial. Scripted model, real
stores, a real bash."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEntry
from runtime.api.tokens import api_token_create
from runtime.errors import RuntimeInputError
from runtime.models import AgentRun, RunStatus
from runtime.runs import approvals, backends
from runtime.runs.prompts import session_prompt
from runtime.runs.questions import (
    QuestionNotFound,
    answer_question,
    decide_approval,
    expire_questions,
)
from runtime.runs.turn import PLAN_ONLY_TEXT, execute_run
from runtime.sessions.permissions import session_approvals, session_set_permission_mode
from runtime.sessions.services import session_fork, session_start
from sessions_tree.models import AgentSession
from sessions_tree.providers import provider_for_session
from tests.support.driver import wait_status
from tests.support.rules import rules
from tests.support.services import wait_until
from toolcatalog.protocol import get_tool

pytestmark = pytest.mark.django_db(transaction=True)

TWO_COMMANDS = {
    "match": {"contains": "run two commands"},
    "replies": [
        [{"text": "Running."}, {"tool_call": {"name": "bash", "id": "call_a", "arguments": {"command": "echo first > first.txt && echo one"}}},
         {"tool_call": {"name": "ls", "id": "call_b", "arguments": {}}}],
        [{"text": "Done: {{result}}"}],
    ],
}  # fmt: skip
ECHO = {
    "match": {"contains": "echo again"},
    "replies": [[{"tool_call": {"name": "bash", "id": "call_e", "arguments": {"command": "echo again"}}}], [{"text": "Said: {{result}}"}]],
}


def policy(mode: str) -> dict:
    return {"approval": mode}


def path(session_id: str) -> list[dict]:
    return provider_for_session(session_id).get_active_path(session_id)


def results(session_id: str) -> dict[str, dict]:
    return {e["message"]["toolCallId"]: e["message"] for e in path(session_id) if e.get("type") == "message" and e["message"]["role"] == "toolResult"}


def decisions(session_id: str) -> list[dict]:
    return [e["data"] for e in path(session_id) if e.get("type") == "custom" and e.get("customType") == approvals.DECISION_TYPE]


def test_each_mode_decides_each_kind_of_tool(settings):
    settings.NETA_WEB_FETCH_ALLOW = ["docs.example.org"]
    calls = {
        "read": {"path": "a.txt"}, "ls": {}, "grep": {"pattern": "x"}, "todo": {"todos": []}, "ask_user": {"question": "?"},
        "bash": {"command": "ls"}, "write": {"path": "a", "content": ""}, "edit": {"path": "a", "edits": []},
        "web_fetch": {"url": "https://example.com/"}, "web_search": {"query": "x"},
    }  # fmt: skip
    trusted_fetch = {"url": "https://docs.example.org/page"}
    asked = {}
    for mode in ("auto", "ask_changes", "ask_all"):
        asked[mode] = sorted(name for name, args in calls.items() if approvals.needs_approval(mode, get_tool(name), name, args, ()))
    assert asked["auto"] == []
    assert asked["ask_changes"] == ["bash", "edit", "web_fetch", "write"]
    assert asked["ask_all"] == ["bash", "edit", "grep", "ls", "read", "web_fetch", "web_search", "write"]  # never todo, ask_user
    assert not approvals.needs_approval("ask_changes", get_tool("web_fetch"), "web_fetch", trusted_fetch, ())
    refused = sorted(name for name, args in calls.items() if name not in approvals.NEVER_ASK and approvals.refused_in_plan_mode(get_tool(name), args))
    assert refused == ["bash", "edit", "web_fetch", "write"]
    # A rule allows a tool, or (bash) the commands that start with its prefix.
    rules_ = (approvals.Rule("bash", "git "),)
    assert not approvals.needs_approval("ask_changes", get_tool("bash"), "bash", {"command": "git status"}, rules_)
    assert approvals.needs_approval("ask_changes", get_tool("bash"), "bash", {"command": "rm -rf x"}, rules_)


def test_a_call_waits_for_approval_and_deny_reaches_the_model(driver_for, django_user_model, workspace):
    user = django_user_model.objects.create_user("approver", password="pw")
    driver = driver_for(rules(TWO_COMMANDS), tool_policy=policy("ask_changes"))
    run = driver.prompt("please run two commands", actor=user)
    assert run.status == RunStatus.WAITING
    request = run.question
    assert request["kind"] == "approval" and request["toolCallId"] == "call_a" and request["tool"] == "bash"
    assert request["command"] == "echo first > first.txt && echo one" and request["cwd"].startswith(str(workspace))
    cwd = Path(request["cwd"])  # the session's own workspace
    assert results(driver.session_id) == {}  # neither call ran: the round waits in order
    assert not (cwd / "first.txt").exists()
    # An approval is decided, not answered; bad decisions write nothing.
    with pytest.raises(QuestionNotFound):
        answer_question(session_id=driver.session_id, tool_call_id="call_a", answer="yes", actor=user)
    with pytest.raises(RuntimeInputError, match="decision"):
        decide_approval(session_id=driver.session_id, tool_call_id="call_a", decision="maybe", actor=user)
    with pytest.raises(RuntimeInputError, match="prefix"):
        decide_approval(session_id=driver.session_id, tool_call_id="call_a", decision="allow", scope="session", prefix="rm ", actor=user)
    with pytest.raises(QuestionNotFound):
        decide_approval(session_id=driver.session_id, tool_call_id="call_zz", decision="deny", actor=user)
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING

    resumed = decide_approval(session_id=driver.session_id, tool_call_id="call_a", decision="deny", note="not in prod", actor=user, start=False)
    assert resumed.status == RunStatus.QUEUED
    with pytest.raises(QuestionNotFound):  # a second tab decides too late
        decide_approval(session_id=driver.session_id, tool_call_id="call_a", decision="allow", actor=user)
    done = execute_run(run.run_id, sink=driver.sink)
    assert done.status == RunStatus.COMPLETED
    got = results(driver.session_id)
    assert got["call_a"]["isError"] and "approver denied this call" in got["call_a"]["content"][0]["text"]
    assert "not in prod" in got["call_a"]["content"][0]["text"]
    assert not got["call_b"]["isError"]  # ls only reads: it ran after the decision
    assert not (cwd / "first.txt").exists()
    (decision,) = decisions(driver.session_id)
    assert decision["decision"] == "deny" and decision["by"] == "approver" and decision["tool"] == "bash" and decision["note"] == "not in prod"
    # The decision is in the tree, never in the model's context.
    context = provider_for_session(driver.session_id).build_context(driver.session_id)
    assert all(m.get("role") in ("user", "assistant", "toolResult") for m in context.messages)
    assert "approver denied" in str(context.messages)  # the denial reached the model as the call's result


def test_allow_for_the_session_holds_after_a_restart_and_in_a_fork_not_in_a_new_session(driver_for, workspace):
    driver = driver_for(rules(TWO_COMMANDS, ECHO), tool_policy=policy("ask_changes"))
    run = driver.prompt("please run two commands")
    cwd = Path(run.question["cwd"])
    decide_approval(session_id=driver.session_id, tool_call_id="call_a", decision="allow", scope="session", prefix="echo", start=False)
    assert execute_run(run.run_id, sink=driver.sink).status == RunStatus.COMPLETED
    assert (cwd / "first.txt").read_text() == "first\n"
    assert results(driver.session_id)["call_a"]["content"][0]["text"].strip() == "one"
    # A later run (a new process would read the same tree): "echo again" runs without asking.
    again = driver.prompt("echo again")
    assert again.status == RunStatus.COMPLETED and results(driver.session_id)["call_e"]["content"][0]["text"].strip() == "again"
    assert session_approvals(AgentSession.objects.get(session_id=driver.session_id))["rules"] == [{"tool": "bash", "prefix": "echo"}]
    # A fork copies the path, and with it the rule.
    leaf = AgentSession.objects.get(session_id=driver.session_id).leaf_entry_id
    fork = session_fork(session_id=driver.session_id, entry_id=leaf, actor=None)
    driver.session_id = fork.session_id
    assert driver.prompt("echo again").status == RunStatus.COMPLETED
    # A new session starts without it.
    driver.session_id = session_start(agent=driver.agent).session_id
    assert driver.prompt("echo again").status == RunStatus.WAITING


def test_plan_only_refuses_and_hides_the_changing_tools(driver_for, workspace):
    driver = driver_for(rules(TWO_COMMANDS), tool_policy=policy("plan_only"))
    run = driver.prompt("please run two commands")
    assert run.status == RunStatus.COMPLETED
    got = results(driver.session_id)
    assert got["call_a"]["isError"] and got["call_a"]["content"][0]["text"] == PLAN_ONLY_TEXT
    assert not got["call_b"]["isError"]
    assert not any(workspace.rglob("first.txt"))
    assert decisions(driver.session_id) == []


def test_a_session_tightens_the_agents_mode_and_never_loosens_it(driver_for):
    driver = driver_for(rules(ECHO), tool_policy=policy("ask_changes"))
    meta = AgentSession.objects.get(session_id=driver.session_id)
    session_set_permission_mode(meta=meta, mode="auto", actor=None)
    state = session_approvals(AgentSession.objects.get(session_id=driver.session_id))
    assert (state["agentMode"], state["sessionMode"], state["mode"]) == ("ask_changes", "auto", "ask_changes")
    assert driver.prompt("echo again").status == RunStatus.WAITING
    with pytest.raises(RuntimeInputError, match="mode"):
        session_set_permission_mode(meta=meta, mode="yolo", actor=None)

    loose = driver_for(rules(ECHO), name="loose")
    session_set_permission_mode(meta=AgentSession.objects.get(session_id=loose.session_id), mode="plan_only", actor=None)
    run = loose.prompt("echo again")
    assert run.status == RunStatus.COMPLETED and results(loose.session_id)["call_e"]["content"][0]["text"] == PLAN_ONLY_TEXT


def test_an_unanswered_request_expires_as_a_denial(driver_for):
    driver = driver_for(rules(ECHO), tool_policy=policy("ask_all"))
    run = driver.prompt("echo again")
    AgentRun.objects.filter(pk=run.pk).update(question={**run.question, "expiresAt": run.question["askedAt"]})
    (expired,) = expire_questions(session_id=driver.session_id, start=False)
    assert execute_run(expired.run_id, sink=driver.sink).status == RunStatus.COMPLETED
    result = results(driver.session_id)["call_e"]
    assert result["isError"] and "nobody approved this call" in result["content"][0]["text"]
    (decision,) = decisions(driver.session_id)
    assert decision["decision"] == "deny" and decision["expired"] is True


def test_the_api_decides_and_a_read_only_token_cannot(driver_for, django_user_model):
    owner = django_user_model.objects.create_user("owner", password="pw")
    driver = driver_for(rules(ECHO), tool_policy=policy("ask_changes"))
    AgentSession.objects.filter(session_id=driver.session_id).update(user=owner)
    run = driver.prompt("echo again", actor=owner)
    assert run.status == RunStatus.WAITING
    url = f"/api/sessions/{driver.session_id}/approve/"
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION="Token " + api_token_create(user=owner, read_only=True).secret)
    assert reader.post(url, {"toolCallId": "call_e", "decision": "allow"}, format="json").status_code == 403
    client = APIClient()
    client.force_authenticate(owner)
    bad = client.post(url, {"toolCallId": "call_e", "decision": "perhaps"}, format="json")
    assert bad.status_code == 400 and "decision" in bad.json()["error"]["fields"]
    assert client.get(f"/api/sessions/{driver.session_id}/permission-mode/").json()["mode"] == "ask_changes"
    answer = client.post(url, {"toolCallId": "call_e", "decision": "allow"}, format="json")
    assert answer.status_code == 200 and answer.json()["run"]["status"] in ("queued", "running", "completed")
    assert AgentRun.objects.get(pk=run.pk).question["decidedBy"] == "owner"




def test_the_consoles_session_page_lists_every_decision_and_staff_decisions_are_audited(driver_for, django_user_model, admin_client):
    owner = django_user_model.objects.create_user("owner", password="pw")
    operator = django_user_model.objects.create_user("operator", password="pw", is_staff=True)
    driver = driver_for(rules(TWO_COMMANDS, ECHO), tool_policy=policy("ask_changes"))
    AgentSession.objects.filter(session_id=driver.session_id).update(user=owner)
    session_set_permission_mode(meta=AgentSession.objects.get(session_id=driver.session_id), mode="ask_all", actor=owner)
    first = driver.prompt("please run two commands", actor=owner)
    client = APIClient()  # the owner decides in the page's way; as a plain user, unaudited
    client.force_authenticate(owner)
    url = f"/api/sessions/{driver.session_id}/approve/"
    assert client.post(url, {"toolCallId": "call_a", "decision": "deny", "note": "<b>not</b> now"}, format="json").status_code == 200
    # ask_all asks for ls too (the run goes on in the inline pool to that call): the operator allows it for the session.
    waiting = wait_until(lambda: AgentRun.objects.filter(pk=first.pk, status=RunStatus.WAITING, question__toolCallId="call_b").first())
    decide_approval(session_id=driver.session_id, tool_call_id="call_b", decision="allow", scope="session", actor=operator)  # as a command would: audited
    wait_status(waiting, RunStatus.COMPLETED)
    branch_point = AgentSession.objects.get(session_id=driver.session_id).leaf_entry_id
    second = driver.prompt("echo again", actor=owner)
    body = {"toolCallId": "call_e", "decision": "allow", "scope": "session", "prefix": "echo"}
    assert client.post(url, body, format="json").status_code == 200
    wait_status(second, RunStatus.COMPLETED)
    # Back to before the second prompt: its decision stays in the tree, on another branch.
    provider_for_session(driver.session_id).switch_leaf(driver.session_id, branch_point)

    page = admin_client.get(f"/admin/sessions_tree/agentsession/{driver.session_id}/change/").content.decode()
    section = page[page.index('id="session-decisions"'):]
    section = section[: section.index("</table>")]
    rows = section.split("<tr class=")[1:]
    assert [r.split('"')[1] for r in rows] == ["decision-decision", "decision-decision", "decision-decision", "decision-mode"]  # newest first
    newest, allowed, denied, mode = rows
    assert "allowed for the session" in newest and "<code>echo</code>" in newest and "no (another branch)" in newest
    assert "operator" in allowed and "allowed for the session" in allowed and "<code>ls</code>" in allowed and ">yes<" in allowed
    assert "owner" in denied and "denied" in denied and "echo first &gt; first.txt" in denied and "&lt;b&gt;not&lt;/b&gt; now" in denied
    assert "<code>ask_all</code>" in mode
    assert f"?target_id={driver.session_id}" in section  # the audit log of the session, for who may read it
    # The audit log holds the staff member's decision; the owner's are their tree's entries.
    audited = AuditEntry.objects.filter(action="approval.decide", target_id=driver.session_id)
    assert [(a.actor_name, a.after["decision"], a.after["tool"], a.after["scope"]) for a in audited] == [("operator", "allow", "ls", "session")]


EDITS = {
    "match": {"contains": "edit the notes"},
    "replies": [
        [{"tool_call": {"name": "write", "id": "call_w", "arguments": {"path": "notes.md", "content": "alpha\nbeta\ngamma\n"}}}],
        [{"tool_call": {"name": "edit", "id": "call_x", "arguments": {"path": "notes.md", "edits": [{"oldText": "beta", "newText": "BETA"}]}}}],
        [{"tool_call": {"name": "edit", "id": "call_y", "arguments": {"path": "notes.md", "edits": [{"oldText": "delta", "newText": "DELTA"}]}}}],
        [{"text": "Left as it was."}],
    ],
}  # fmt: skip


def test_an_edit_waits_with_its_diff_against_the_file_and_one_that_cannot_apply_says_why(driver_for, workspace):
    driver = driver_for(rules(EDITS), tool_policy=policy("ask_changes"))
    run = driver.prompt("please edit the notes")
    # A write to a new file: its whole content as added lines.
    assert run.question["tool"] == "write" and run.question["diffOf"] == "file" and run.question["created"] is True
    assert [line for line in run.question["diff"].splitlines() if line.startswith("+") and not line.startswith("+++")] == ["+alpha", "+beta", "+gamma"]
    decide_approval(session_id=driver.session_id, tool_call_id="call_w", decision="allow", start=False)
    waiting = execute_run(run.run_id, sink=driver.sink)
    request = waiting.question
    assert waiting.status == RunStatus.WAITING and request["toolCallId"] == "call_x"
    # The diff is of the file as it is now: its lines around the change too, nothing written yet.
    assert request["diffOf"] == "file" and "previewError" not in request
    lines = request["diff"].splitlines()
    assert lines[0].startswith("--- a/") and "-beta" in lines and "+BETA" in lines and " alpha" in lines and " gamma" in lines
    [notes] = workspace.rglob("notes.md")
    assert notes.read_text() == "alpha\nbeta\ngamma\n"
    decide_approval(session_id=driver.session_id, tool_call_id="call_x", decision="deny", start=False)
    again = execute_run(run.run_id, sink=driver.sink)
    request = again.question
    # Text the file does not hold: the request says the edit would fail, and shows the replacements.
    assert request["toolCallId"] == "call_y" and request["diffOf"] == "replacements"
    assert request["previewError"].startswith("Could not find edits[0].oldText in notes.md")
    assert request["diff"].splitlines()[-2:] == ["-delta", "+DELTA"]
    decide_approval(session_id=driver.session_id, tool_call_id="call_y", decision="deny", start=False)
    assert execute_run(run.run_id, sink=driver.sink).status == RunStatus.COMPLETED
    assert notes.read_text() == "alpha\nbeta\ngamma\n"


def test_a_waiting_approval_holds_no_thread_of_the_inline_pool(driver_for, settings, monkeypatch):
    """One pool thread: while a call waits for approval, another session's run goes through
    that thread, and the decision resumes the waiting run on it too."""
    settings.NETA_TASK_BACKEND = "inline"
    settings.NETA_INLINE_WORKERS = 1
    monkeypatch.setattr(backends, "_executor", None)  # this test's own pool of one thread
    driver = driver_for(rules(ECHO), tool_policy=policy("ask_changes"))
    asked = session_prompt(session_id=driver.session_id, text="echo again", actor=None).run
    waiting = wait_status(asked, RunStatus.WAITING)
    pool = backends._executor
    try:
        other = session_start(agent=driver.agent).session_id
        second = session_prompt(session_id=other, text="hello", actor=None).run
        assert wait_status(second, RunStatus.COMPLETED).prompt == "hello"
        assert AgentRun.objects.get(pk=asked.pk).status == RunStatus.WAITING  # still waiting, on no thread
        decide_approval(session_id=driver.session_id, tool_call_id=waiting.question["toolCallId"], decision="allow")
        wait_status(asked, RunStatus.COMPLETED)
        assert results(driver.session_id)["call_e"]["content"][0]["text"].strip() == "again"
        assert len(pool._threads) == 1
    finally:
        pool.shutdown(wait=True)
