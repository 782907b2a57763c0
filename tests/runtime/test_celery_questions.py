"""A question (``ask_user``) on the celery backend with real parts: the shared
``distributed`` deployment's runs worker with one slot (``-P solo``), Redis, MariaDB,
every step in its own process, an agent of the test's own.

While the run waits for the answer its task has returned: the worker's one slot runs
another session's prompt to the end. The answer, given in yet another process (as the
REST view or the socket would), queues the run again and the same worker finishes it with
the answer as the tool's result.
"""

from __future__ import annotations

import json
import uuid

import pytest

pytestmark = pytest.mark.slow

RULES = {
    "version": 1,
    "rules": [
        {"match": "ask me", "replies": [
            [{"text": "One question first."}, {"tool_call": {"name": "ask_user", "id": "call_celery", "arguments": {
                "question": "Which colour?", "options": ["red", "blue"], "allow_free_text": False}}}],
            [{"text": "You said: {{result}}"}],
        ]},
    ],
    "default": {"reply": [{"text": "Done: {{user}}"}]},
}


def test_a_waiting_run_holds_no_celery_slot_and_the_answer_resumes_it(distributed):
    deployment = distributed
    agent = deployment.add_agent(f"asker-{uuid.uuid4().hex[:6]}", RULES)
    log_start = len(deployment.log("runs"))
    asked_session, asked = deployment.prompt("please ask me", agent=agent)
    deployment.wait_run(asked, lambda r: r["status"] == "waiting")
    # The one slot is free: another session's prompt runs to the end while the question waits.
    _, other = deployment.prompt("hello there", agent=agent)
    assert deployment.wait_run(other, lambda r: r["status"] not in ("queued", "running"))["status"] == "completed"
    assert deployment.run_row(asked)["status"] == "waiting"
    log = deployment.log("runs")[log_start:]
    assert log.count("succeeded") >= 2, log[-3000:]  # the asking task returned, then the other one

    out = deployment.python(
        "from runtime.runs.questions import answer_question;"
        f"run = answer_question(session_id={asked_session!r}, tool_call_id='call_celery', answer='blue');"
        "print(run.status, run.backend)"
    )
    status, backend = out.split()[-2:]
    # Queued for the worker again; a fast worker may already have claimed it when the row is read back.
    assert (status in ("queued", "running"), backend) == (True, "celery"), out
    row = deployment.wait_run(asked, lambda r: r["status"] not in ("queued", "running", "waiting"))
    assert row["status"] == "completed", row
    messages = [line["message"] for line in deployment.export(asked_session) if line["type"] == "message"]
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert messages[2]["toolCallId"] == "call_celery" and messages[2]["content"][0]["text"] == "The user answered: blue"
    assert messages[3]["content"][0]["text"] == "You said: The user answered: blue"


APPROVAL_RULES = {
    "version": 1,
    "rules": [
        {"match": "clean up", "replies": [
            [{"text": "Cleaning."}, {"tool_call": {"name": "bash", "arguments": {"command": "echo cleaned"}}}],
            [{"text": "Result: {{result}}"}],
        ]},
    ],
    "default": {"reply": [{"text": "Done: {{user}}"}]},
}


def test_an_approval_waits_on_no_celery_slot_and_its_session_rule_holds_in_the_worker(distributed):
    """An agent that asks for changes: the bash call waits (its task returned, the one slot runs
    another prompt), the decision is taken in another process, the worker runs the call; the
    "allow for this session" rule, read back from the tree by the worker, lets the session's next
    bash call run without asking."""
    deployment = distributed
    agent = deployment.add_agent(f"careful-{uuid.uuid4().hex[:6]}", APPROVAL_RULES, tool_policy={"approval": "ask_changes"})
    session, asked = deployment.prompt("please clean up", agent=agent)
    deployment.wait_run(asked, lambda r: r["status"] == "waiting")
    question = json.loads(deployment.python(f"import json; from runtime.models import AgentRun; print(json.dumps(AgentRun.objects.get(run_id={asked!r}).question))").splitlines()[-1])
    assert question["kind"] == "approval" and question["command"] == "echo cleaned"
    _, other = deployment.prompt("hello there", agent=agent)
    assert deployment.wait_run(other, lambda r: r["status"] not in ("queued", "running"))["status"] == "completed"
    deployment.python(
        "from runtime.runs.questions import decide_approval;"
        f"decide_approval(session_id={session!r}, tool_call_id={question['toolCallId']!r}, decision='allow', scope='session', prefix='echo')"
    )
    assert deployment.wait_run(asked, lambda r: r["status"] not in ("queued", "running", "waiting"))["status"] == "completed"
    _, again = deployment.prompt("please clean up", agent=agent, session_id=session)
    assert deployment.wait_run(again, lambda r: r["status"] not in ("queued", "running", "waiting"))["status"] == "completed"
    lines = deployment.export(session)
    results = [line["message"]["content"][0]["text"].strip() for line in lines if line["type"] == "message" and line["message"]["role"] == "toolResult"]
    assert results == ["cleaned", "cleaned"]
    decisions = [line["data"] for line in lines if line["type"] == "custom" and line["customType"] == "neta.approval"]
    assert [(d["decision"], d["scope"], d["prefix"]) for d in decisions] == [("allow", "session", "echo")]
