"""The ``todo`` and ``ask_user`` tools in the turn loop: a plan is an ordinary
tool call; a question parks the run in the persisted ``waiting`` state (no thread left
running), the answer (service, REST) or the expiry resumes it through the backend, abort
works while it waits, bad answers are refused without a write. Scripted model, real stores."""

from __future__ import annotations

import threading

import pytest
from rest_framework.test import APIClient

from runtime.agents.tools import agent_tools
from runtime.errors import RuntimeInputError
from runtime.models import AgentRun, RunStatus
from runtime.runs import backends
from runtime.runs.prompts import run_abort, session_prompt
from runtime.runs.questions import QuestionNotFound, answer_question, expire_questions
from runtime.runs.reaper import reap_stale_runs
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start
from sessions_tree.providers import provider_for_session
from tests.support.driver import wait_status
from tests.support.rules import rules

pytestmark = pytest.mark.django_db(transaction=True)

PLAN = [
    {"content": "Look around", "status": "in_progress"},
    {"content": "Answer", "status": "pending"},
]
ASK = {
    "match": {"contains": "ask me"},
    "replies": [
        [{"text": "One question first."}, {"tool_call": {"name": "ask_user", "id": "call_q1", "arguments": {"question": "Which colour?", "options": ["red", "blue"], "allow_free_text": False}}}],
        [{"text": "You said: {{result}}"}],
    ],
}
TODO = {
    "match": {"contains": "plan"},
    "replies": [
        [{"tool_call": {"name": "todo", "arguments": {"todos": PLAN}}}],
        [{"tool_call": {"name": "todo", "arguments": {"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]}}}],
        [{"text": "planned"}],
    ],
}


def path_messages(session_id: str) -> list[dict]:
    provider = provider_for_session(session_id)
    return [e["message"] for e in provider.get_active_path(session_id) if e.get("type") == "message"]


def tool_results(session_id: str) -> list[dict]:
    return [m for m in path_messages(session_id) if m["role"] == "toolResult"]


def states(driver, run_id) -> list[str]:
    return [e["state"] for _, e in driver.sink.events if e.get("type") == "run_state" and e.get("runId") == str(run_id)]


def test_todo_is_an_ordinary_tool_call_and_refuses_two_items_in_progress(driver_for):
    driver = driver_for(rules(TODO))
    run = driver.prompt("make a plan")
    assert run.status == RunStatus.COMPLETED
    first, second = tool_results(driver.session_id)
    assert first["toolName"] == "todo" and not first["isError"]
    assert first["details"] == {"todos": PLAN, "completed": 0, "total": 2}
    assert first["content"][0]["text"].startswith("Plan updated: 0 of 2 done.\n[~] Look around\n[ ] Answer")
    assert second["isError"] and "at most one item may be in_progress" in second["content"][0]["text"]


def test_todo_and_ask_user_are_on_by_default_and_ask_user_never_for_subagents(make_agent):
    agent = make_agent(rules())
    names = {d["name"] for d in agent_tools(agent).projection.tool_definitions()}
    assert {"todo", "ask_user"} <= names
    child = agent_tools(agent, for_subagent=True).projection
    assert "ask_user" not in {d["name"] for d in child.tool_definitions()}
    assert "todo" in {d["name"] for d in child.tool_definitions()}


def test_a_question_parks_the_run_and_the_answer_resumes_it(driver_for, django_user_model):
    user = django_user_model.objects.create_user("asker", password="pw")
    driver = driver_for(rules(ASK))
    run = driver.prompt("please ask me something", actor=user)
    # The loop returned (execute_run came back to this thread): the run waits, persisted.
    assert run.status == RunStatus.WAITING
    assert run.question["toolCallId"] == "call_q1"
    assert run.question["options"] == ["red", "blue"] and run.question["allowFreeText"] is False
    assert run.question["expiresAt"] - run.question["askedAt"] == 3600 * 1000
    assert states(driver, run.run_id)[-1] == "waiting"
    assert tool_results(driver.session_id) == []  # the call is open until answered
    assert provider_for_session(driver.session_id).get_in_flight(driver.session_id) is None

    # Bad answers: refused, nothing written.
    with pytest.raises(QuestionNotFound):
        answer_question(session_id=driver.session_id, tool_call_id="call_other", answer="red", actor=user)
    with pytest.raises(RuntimeInputError, match="not one of the options"):
        answer_question(session_id=driver.session_id, tool_call_id="call_q1", answer="green", actor=user)
    with pytest.raises(RuntimeInputError, match="one answer, not a list"):
        answer_question(session_id=driver.session_id, tool_call_id="call_q1", answer=["red"], actor=user)
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.WAITING

    resumed = answer_question(session_id=driver.session_id, tool_call_id="call_q1", answer="blue", actor=user, start=False)
    assert resumed.status == RunStatus.QUEUED and resumed.question["outcome"] == "answered"
    with pytest.raises(QuestionNotFound):  # a second tab's answer comes too late
        answer_question(session_id=driver.session_id, tool_call_id="call_q1", answer="red", actor=user)
    done = execute_run(run.run_id, sink=driver.sink)
    assert done.status == RunStatus.COMPLETED
    (result,) = tool_results(driver.session_id)
    assert result["toolCallId"] == "call_q1" and not result["isError"]
    assert result["content"][0]["text"] == "The user answered: blue"
    assert result["details"]["answeredBy"] == "asker"
    assert path_messages(driver.session_id)[-1]["content"][0]["text"] == "You said: The user answered: blue"
    assert states(driver, run.run_id)[-3:] == ["waiting", "running", "completed"]  # "queued" went to the default sink




def test_a_waiting_run_holds_no_thread_of_the_inline_pool(driver_for, settings, monkeypatch):
    """One pool thread: while a question waits, another session's run goes through that
    thread, and the answer resumes the waiting run on it too."""
    settings.NETA_TASK_BACKEND = "inline"
    settings.NETA_INLINE_WORKERS = 1
    monkeypatch.setattr(backends, "_executor", None)  # this test's own pool of one thread
    driver = driver_for(rules(ASK))
    asked = session_prompt(session_id=driver.session_id, text="ask me", actor=None).run
    assert asked.backend == "inline"
    waiting = wait_status(asked, RunStatus.WAITING)
    pool = backends._executor
    try:
        assert pool._max_workers == 1
        other = session_start(agent=driver.agent).session_id
        second = session_prompt(session_id=other, text="hello", actor=None).run
        assert wait_status(second, RunStatus.COMPLETED).prompt == "hello"
        assert AgentRun.objects.get(pk=asked.pk).status == RunStatus.WAITING  # still waiting, on no thread
        answer_question(session_id=driver.session_id, tool_call_id=waiting.question["toolCallId"], answer="red")
        wait_status(asked, RunStatus.COMPLETED)
        assert tool_results(driver.session_id)[0]["content"][0]["text"] == "The user answered: red"
        assert len(pool._threads) == 1  # both runs and the resumed one went through the one thread
    finally:
        pool.shutdown(wait=True)


def test_an_unanswered_question_expires_through_the_reaper(driver_for, settings):
    settings.NETA_ASK_USER_TIMEOUT_SECONDS = 1
    driver = driver_for(rules(ASK))
    run = driver.prompt("ask me")
    assert run.status == RunStatus.WAITING
    AgentRun.objects.filter(pk=run.pk).update(question={**run.question, "expiresAt": run.question["askedAt"] - 1})
    assert expire_questions(session_id="nope") == []
    changed = reap_stale_runs(start=False)
    assert [r.pk for r in changed] == [run.pk]
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.QUEUED
    done = execute_run(run.run_id, sink=driver.sink)
    assert done.status == RunStatus.COMPLETED
    (result,) = tool_results(driver.session_id)
    assert result["isError"] and result["details"] == {"expired": True}
    assert "did not answer within 1 minute(s); the question expired" in result["content"][0]["text"]


def test_abort_while_waiting_closes_the_question(driver_for):
    driver = driver_for(rules(ASK))
    run = driver.prompt("ask me")
    assert run.status == RunStatus.WAITING
    aborted = run_abort(session_id=driver.session_id)
    assert aborted.status == RunStatus.ABORTED and "while it waited for an answer" in aborted.error
    (result,) = tool_results(driver.session_id)
    assert result["isError"] and "aborted while this question waited" in result["content"][0]["text"]
    with pytest.raises(QuestionNotFound):
        answer_question(session_id=driver.session_id, tool_call_id="call_q1", answer="red")
    # The session is free: the next prompt runs.
    assert driver.prompt("hello").status == RunStatus.COMPLETED


def test_the_rest_answer_validates_and_resumes(driver_for, django_user_model, settings):
    settings.NETA_TASK_BACKEND = "inline"
    user = django_user_model.objects.create_user("rest-asker", password="pw")
    driver = driver_for(rules(ASK))
    run = driver.prompt("ask me", actor=user)
    from sessions_tree.models import AgentSession

    AgentSession.objects.filter(session_id=driver.session_id).update(user=user)
    client = APIClient()
    client.force_login(user)
    url = f"/api/sessions/{driver.session_id}/answer/"
    state = client.get(f"/api/runs/{run.run_id}/").json()
    assert state["status"] == "waiting" and state["question"]["question"] == "Which colour?"
    bad = client.post(url, {"toolCallId": "call_q1", "answer": "green"}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["fields"]["answer"]
    unknown = client.post(url, {"toolCallId": "nope", "answer": "red"}, format="json")
    assert unknown.status_code == 400 and "toolCallId" in unknown.json()["error"]["fields"]
    missing = client.post(url, {"answer": "red"}, format="json")
    assert missing.status_code == 400
    ok = client.post(url, {"toolCallId": "call_q1", "answer": "red"}, format="json")
    assert ok.status_code == 200, ok.content
    assert ok.json()["run"]["status"] in ("queued", "running", "completed")
    # The inline backend resumes it on its pool.
    for _ in range(200):
        if AgentRun.objects.get(pk=run.pk).status == RunStatus.COMPLETED:
            break
        threading.Event().wait(0.05)
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.COMPLETED
    assert tool_results(driver.session_id)[0]["content"][0]["text"] == "The user answered: red"


def test_the_subagent_host_never_grants_ask_user(make_agent):
    from runtime.agents.subagent_policy import SubagentPolicy
    from runtime.agents.tools import agent_tool_projection
    from runtime.subagents.host import child_tools

    agent = make_agent(rules(), subagent_policy={"enabled": True, "agents": ["tester"]})
    parent = agent_tool_projection(agent)
    assert "ask_user" in parent.effective_names()
    grants, denied = child_tools(parent, agent, SubagentPolicy.from_dict(agent.subagent_policy), allowed_skills=[])
    names = {g["name"] for g in grants}
    assert "ask_user" not in names and "todo" in names
    assert {"name": "ask_user", "reason": "never offered to subagents"} in denied


def test_the_scripted_demo_plans_for_plan_and_asks_for_ask_me(driver_for):
    """The demo model (runtime/llm/scripted_demo.yaml) shows both panels: "plan" walks a
    three-step todo list to the end, "ask me" waits on a question with three options."""
    driver = driver_for("runtime/llm/scripted_demo.yaml")
    run = driver.prompt("Make a plan and look at my workspace")
    assert run.status == RunStatus.COMPLETED, run.error
    plans = [m["details"]["todos"] for m in tool_results(driver.session_id) if m["toolName"] == "todo"]
    assert [sum(t["status"] == "completed" for t in plan) for plan in plans] == [0, 2, 3]
    assert [t["content"] for t in plans[-1]] == ["Look at the workspace", "Pick what matters", "Write the answer"]
    assert any(m["toolName"] == "ls" and not m["isError"] for m in tool_results(driver.session_id))

    asked = driver.prompt("Please ask me which format I want")
    assert asked.status == RunStatus.WAITING
    assert asked.question["options"] == ["A short paragraph", "A bullet list", "A table"] and asked.question["allowFreeText"]
    answer_question(session_id=driver.session_id, tool_call_id=asked.question["toolCallId"], answer="A table", start=False)
    assert execute_run(asked.run_id, sink=driver.sink).status == RunStatus.COMPLETED
    assert path_messages(driver.session_id)[-1]["content"][0]["text"].startswith("Thanks. The user answered: A table")
