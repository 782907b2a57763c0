"""Subagents on the distributed backend with real parts: a Celery worker for runs, another
for ``NETA_SUBAGENT_QUEUE`` (prefork, prefetch 1), Redis, MariaDB — separate processes.

The shared ``distributed`` deployment (eight subagent slots) runs the tests that kill no
process, each with an agent of its own; a test that kills a worker, or needs a pool of
one slot, has a deployment of its own."""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from tests.subagents.celery_helpers import (
    children,
    delegating_rules,
    group_members,
    new_agent,
    own_deployment,
    terminal_events,
    wait_running_children,
)

pytestmark = pytest.mark.slow

HOLD = {"reply": [{"pause_ms": 120000}, {"text": "never"}]}  # a child that runs until it is stopped


def test_children_run_on_their_own_queue_and_worker(distributed):
    agent = new_agent(distributed, delegating_rules)
    session_id, run_id = distributed.prompt("please delegate", agent=agent)
    row = distributed.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=120)
    assert row["status"] == "completed", (row, distributed.log("subagents")[-3000:])
    rows = children(distributed, session_id, "status, backend, worker_pid, pid, final_text, event_count")
    assert [c[0] for c in rows] == ["completed", "completed"]
    assert {c[1] for c in rows} == {"celery"}
    # Supervised by the subagent worker's pool processes, not by the runs worker; each child its own process.
    subagent_pool = set(group_members(distributed.processes["subagents"].pid))
    assert all(c[2] in subagent_pool and c[2] != distributed.processes["runs"].pid for c in rows)
    assert rows[0][3] != rows[1][3]
    assert [c[4] for c in rows] == ["Child done: first look", "Child done: second look"]
    lines = distributed.export(session_id)
    kinds = [line["type"] if line["type"] != "message" else line["message"]["role"] for line in lines[1:]]
    kinds = [k for k in kinds if k not in ("model_change", "thinking_level_change")]
    # ..., then the title the session gives itself after its first answer (runs/titles.py).
    assert kinds == ["user", "assistant", "subagent_batch", "subagent_result", "subagent_result", "toolResult", "assistant", "session_info"]
    result = next(line["message"] for line in lines if line["type"] == "message" and line["message"]["role"] == "toolResult")
    assert "Child done: first look" in result["content"][0]["text"] and "Child done: second look" in result["content"][0]["text"]


def test_a_child_answering_2_mib_of_chinese_completes_with_its_text_and_usage(distributed):
    """The child's answer is longer than one protocol line may be: it still completes (not
    ``child_crash``), the run keeps the whole text and the usage, the tree gets its result."""

    def rules_for(agent: str) -> dict:
        one = {"tasks": [{"agent": agent, "task": "write the long report"}]}
        return {
            "version": 1,
            "rules": [{"match": "delegate", "replies": [[{"tool_call": {"name": "delegate_parallel", "arguments": one}}], [{"text": "Read it."}]]}],
            "default": {"reply": [{"text": "placeholder"}]},
        }

    agent = new_agent(distributed, rules_for)
    # The long answer is made where it is stored (an environment variable could not carry 2 MiB).
    distributed.python(
        "from runtime.models import ModelConfig\n"
        f"model = ModelConfig.objects.get(name={agent + '-model'!r})\n"
        "rules = model.options['rules']\n"
        "rules['default'] = {'replies': [{'chunk_size': 0, 'steps': [{'text': '这是一个很长的回答。' * 70000}], 'usage': {'input': 1000, 'output': 377000}}]}\n"
        "model.options = {**model.options, 'rules': rules}\n"
        "model.save()\n"
    )
    session_id, run_id = distributed.prompt("please delegate", agent=agent)
    row = distributed.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=120)
    assert row["status"] == "completed", (row.get("error"), distributed.log("runs")[-3000:])
    [(status, code, length, usage)] = children(distributed, session_id, "status, error_code, CHAR_LENGTH(final_text), `usage`")
    assert (status, code, length) == ("completed", "", 700_000)
    assert json.loads(usage)["output"] == 377_000
    result = next(line for line in distributed.export(session_id) if line["type"] == "subagent_result")
    [entry] = result["content"]["results"]
    assert (entry["status"], entry["finalTextChars"], entry["usage"]["output"]) == ("completed", 700_000, 377_000)


def test_a_killed_subagent_worker_loses_its_children_and_the_next_batch_fails_at_once(tmp_path):
    deployment = own_deployment(tmp_path / "deployment", 2, delegating_rules("default", HOLD))
    try:
        session_id, run_id = deployment.prompt("please delegate")
        pids = wait_running_children(deployment, session_id, 2, timeout=60)
        deployment.kill("subagents")  # the worker and its pool; the children die with their supervisor
        row = deployment.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=90)
        assert row["status"] == "completed", row  # the parent turn finished, with the failures in its result
        assert [c[0] for c in children(deployment, session_id, "status, error_code")] == ["lost", "lost"]
        for pid in pids:
            assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        result = next(
            line["message"] for line in deployment.export(session_id) if line["type"] == "message" and line["message"]["role"] == "toolResult"
        )
        assert result["isError"] is True and "lost" in result["content"][0]["text"]
        # No worker consumes the subagent queue now: the next batch fails within seconds
        # (NETA_SUBAGENT_WORKER_CHECK_SECONDS, 3 s), not after the children's whole budget.
        started = time.monotonic()
        session_id, run_id = deployment.prompt("please delegate")
        row = deployment.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=60)
        print(f"time to fail with no subagent worker: {time.monotonic() - started:.1f} s")
        assert row["status"] == "completed", row
        rows = children(deployment, session_id, "status, error")
        assert [c[0] for c in rows] == ["failed", "failed"], rows
        assert all(c[1].startswith("no subagent worker") for c in rows), rows
        lines = deployment.export(session_id)
        batch = next(line for line in lines if line["type"] == "subagent_batch")
        assert all(r["error"].startswith("no subagent worker") for r in batch["metadata"]["runs"])
        result = next(line["message"] for line in lines if line["type"] == "message" and line["message"]["role"] == "toolResult")
        assert "no subagent worker" in result["content"][0]["text"]
        health = deployment.python("from runtime.runs.health import celery_status; print(celery_status()['detail'])")
        assert "no subagent worker" in health
    finally:
        deployment.close()


def test_a_lost_parent_keeps_its_finished_childs_work_for_the_next_prompt(tmp_path):
    """kill -9 of the worker running the parent turn, one child finished and one running:
    the batch is closed ``lost``, the finished child's answer is a ``subagent_result`` and
    the delegate call's tool result, the running child is cancelled (recorded with what it
    had streamed), and the next prompt's context holds the finished child's answer."""
    rules = {
        "version": 1,
        "rules": [
            {"match": "please delegate", "replies": [[{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                {"agent": "default", "task": "quick look"}, {"agent": "default", "task": "slow look"}]}}}], [{"text": "never"}]]},
            {"match": "quick look", "reply": [{"text": "Quick child found the answer: 42."}]},
            {"match": "slow look", "reply": [{"text": "Slow child started."}, {"pause_ms": 120000}, {"text": "never"}]},
            {"match": "what did they find", "reply": [{"text": "Saw: {{result}}"}]},
        ],
    }  # fmt: skip
    policy = {"enabled": True, "agents": ["default"]}
    deployment = own_deployment(tmp_path / "deployment", 2, rules, subagent_policy=policy, env={"NETA_REAPER_INTERVAL_SECONDS": "1"})
    try:
        session_id, run_id = deployment.prompt("please delegate")
        deadline = time.monotonic() + 60
        while [c[0] for c in children(deployment, session_id, "status")] != ["completed", "running"]:
            assert time.monotonic() < deadline, children(deployment, session_id, "status, error")
            time.sleep(0.1)
        deployment.kill("runs")
        row = deployment.wait_run(run_id, lambda r: r["status"] != "running", timeout=60)
        assert row["status"] == "lost", row
        lines = deployment.export(session_id)
        batch = next(line for line in lines if line["type"] == "subagent_batch")
        assert batch["metadata"]["state"] == "lost"
        assert [r["status"] for r in batch["metadata"]["runs"]] == ["completed", "cancelled"]
        results = [line for line in lines if line["type"] == "subagent_result"]
        assert [r["content"]["results"][0]["status"] for r in results] == ["completed", "cancelled"]
        assert results[0]["content"]["results"][0]["finalText"] == "Quick child found the answer: 42."
        assert results[1]["content"]["results"][0]["finalText"] == "Slow child started."  # what it had streamed
        tool_result = next(line["message"] for line in lines if line["type"] == "message" and line["message"]["role"] == "toolResult")
        text = tool_result["content"][0]["text"]
        assert text.startswith("Subagents: 1/2 completed, 1 cancelled (stopped: parent run ") and "Quick child found the answer: 42." in text
        # The lost run's usage holds its own model call (the reply that delegated) besides the finished child's.
        own = next(line["message"]["usage"] for line in lines if line["type"] == "message" and line["message"]["role"] == "assistant")
        [(quick_usage,)] = deployment.sql("SELECT `usage` FROM runtime_subprocessrun WHERE session_id = %s AND task_index = 0", session_id)
        [(output_tokens,)] = deployment.sql("SELECT output_tokens FROM runtime_agentrun WHERE session_id = %s", session_id)
        assert own["output"] > 0 and output_tokens >= own["output"] + json.loads(quick_usage)["output"]
        # The running child is stopped, not left spending.
        deadline = time.monotonic() + 30
        while children(deployment, session_id, "status")[1][0] != "cancelled":
            assert time.monotonic() < deadline, children(deployment, session_id, "status, error")
            time.sleep(0.1)
        # The next prompt's context holds the finished child's answer.
        start_runs_and_subagents_again = {"name": "runs-again", "queues": deployment.queue, "pool": "solo"}
        deployment.start_workers(start_runs_and_subagents_again)
        _, next_run = deployment.prompt("what did they find", session_id=session_id)
        row = deployment.wait_run(next_run, lambda r: r["status"] not in ("queued", "running"), timeout=60)
        assert row["status"] == "completed", row
        answer = [line for line in deployment.export(session_id) if line["type"] == "message" and line["message"]["role"] == "assistant"][-1]
        assert "Quick child found the answer: 42." in answer["message"]["content"][0]["text"]
    finally:
        deployment.close()


def test_a_parent_abort_with_8_running_children_ends_all_recorded_and_leaves_no_process(distributed):
    """Celery hosting: eight children on the subagent worker's pool, the parent aborted → all
    eight ``cancelled`` (who cancelled recorded), one terminal event each, no process of any
    child's group left, the batch finalized as cancelled and the parent run aborted."""

    def rules_for(agent: str) -> dict:
        eight = {"tasks": [{"agent": agent, "task": f"hold {i}"} for i in range(8)]}
        return {
            "version": 1,
            "rules": [{"match": "delegate", "replies": [[{"tool_call": {"name": "delegate_parallel", "arguments": eight}}], [{"text": "never"}]]}],
            "default": HOLD,
        }

    agent = new_agent(distributed, rules_for, max_concurrency=8)
    session_id, run_id = distributed.prompt("please delegate", agent=agent)
    pids = wait_running_children(distributed, session_id, 8, timeout=120)
    assert all(group_members(pid) for pid in pids)  # each child leads its own process group
    distributed.python(f"from runtime.runs.prompts import run_abort; run_abort(session_id={session_id!r})")
    row = distributed.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=90)
    assert row["status"] == "aborted", row
    rows = children(distributed, session_id, "id, status, cancelled_by, ended_at")
    assert len(rows) == 8 and {c[1] for c in rows} == {"cancelled"}, rows
    assert all("aborted" in c[2] for c in rows) and all(c[3] is not None for c in rows)
    assert terminal_events(distributed, session_id) == [1] * 8
    assert not [pid for pid in pids if group_members(pid)]  # 0 orphans: no process of any child's group
    lines = distributed.export(session_id)
    batch = next(line for line in lines if line["type"] == "subagent_batch")
    assert batch["metadata"]["state"] == "cancelled" and len(batch["metadata"]["runs"]) == 8
    assert sum(1 for line in lines if line["type"] == "subagent_result") == 8


def test_a_one_slot_subagent_pool_runs_a_depth_2_tree_with_a_session_limit_of_1(tmp_path):
    """One prefork process for the whole subagent queue and one session slot: the child's
    grandchildren are supervised by threads of the pool process that supervises the child
    (never a second task waiting for a slot it holds), and the waiting child lends its
    session slot to them. Everything completes; nothing waits on itself."""
    rules = {
        "version": 1,
        "rules": [
            {"match": "please delegate", "replies": [[{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                {"agent": "default", "task": "middle one"}, {"agent": "default", "task": "middle two"}]}}}], [{"text": "Summarized."}]]},
            {"match": "middle", "replies": [[{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [
                {"agent": "default", "task": "leaf a"}, {"agent": "default", "task": "leaf b"}]}}}], [{"text": "Middle done: {{user}}"}]]},
        ],
        "default": {"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "Leaf done: {{user}}"}]]},
    }  # fmt: skip
    policy = {"enabled": True, "agents": ["default"], "max_depth": 2, "max_concurrency_per_session": 1, "child_budget": {"wall_clock_seconds": 150}}
    deployment = own_deployment(tmp_path / "deployment", 1, rules, subagent_policy=policy)  # a pool of one slot
    try:
        session_id, run_id = deployment.prompt("please delegate")
        row = deployment.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=240)
        log = deployment.log("subagents")[-3000:]
        assert row["status"] == "completed", (row, log)
        rows = children(deployment, session_id, "id, depth, status, error_code, worker_pid, parent_subprocess_id, final_text, backend")
        assert len(rows) == 6 and {c[2] for c in rows} == {"completed"}, (rows, log)
        middles = [c for c in rows if c[1] == 1]
        leaves = [c for c in rows if c[1] == 2]
        assert len(middles) == 2 and len(leaves) == 4
        subs = deployment.processes["subagents"].pid
        pool = set(group_members(subs)) - {subs}
        assert len(pool) == 1 and {c[4] for c in rows} == pool  # one pool process supervised all six
        assert {c[7] for c in middles} == {"celery"} and {c[7] for c in leaves} == {"inline"}  # grandchildren: threads, not tasks
        for middle in middles:
            mine = sorted(c[6] for c in leaves if c[5] == middle[0])
            assert mine == ["Leaf done: leaf a", "Leaf done: leaf b"]
        assert sorted(c[6] for c in middles) == ["Middle done: middle one", "Middle done: middle two"]
    finally:
        deployment.close()


def run_id_of(row: dict) -> str:
    """The run's id as the records spell it (with dashes)."""
    return str(uuid.UUID(row["run_id"]))


def test_a_killed_runs_worker_mid_batch_ends_the_run_recorded_and_its_children_too(tmp_path):
    """The worker running the parent turn is SIGKILLed while its children run: the reaper
    records the run ``lost`` (never left running), its batch entry is closed as aborted, the
    children are cancelled by their supervisors (one terminal event each) and no process of
    any child's group is left."""
    deployment = own_deployment(tmp_path / "deployment", 2, delegating_rules("default", HOLD))
    try:
        session_id, run_id = deployment.prompt("please delegate")
        pids = wait_running_children(deployment, session_id, 2, timeout=90)
        deployment.kill("runs")  # the parent's worker: its turn (and its host loop) die mid-batch
        assert deployment.run_row(run_id)["status"] == "running"  # until a reaper round finds it
        deadline = time.monotonic() + 120
        rows = []
        while time.monotonic() < deadline:
            deployment.manage("runtime_reap")  # what the periodic reaper does
            rows = children(deployment, session_id, "status, cancelled_by, ended_at")
            if deployment.run_row(run_id)["status"] != "running" and all(c[2] is not None for c in rows):
                break
            time.sleep(0.5)
        row = deployment.run_row(run_id)
        assert row["status"] == "lost" and row["in_flight"] == "", row
        assert [c[0] for c in rows] == ["cancelled", "cancelled"], rows
        assert all(c[1] == f"parent run {run_id_of(row)} was lost" for c in rows), rows
        assert terminal_events(deployment, session_id) == [1, 1]
        assert not [pid for pid in pids if group_members(pid)]  # 0 orphans
        lines = deployment.export(session_id)
        batch = next(line for line in lines if line["type"] == "subagent_batch")
        assert batch["metadata"]["state"] == "lost" and batch["metadata"]["cancelledBy"] == f"parent run {run_id_of(row)} was lost"
        result = next(line["message"] for line in lines if line["type"] == "message" and line["message"]["role"] == "toolResult")
        assert result["isError"] is True  # the open delegate call got its aborted result: the tree stays valid for Pi
    finally:
        deployment.close()


def test_a_childs_request_on_the_subagent_worker_survives_a_web_restart_and_is_decided_there(distributed):
    """A careful child supervised by the subagent worker: its bash call waits in the parent
    session; another web process lists it with the child named, that process is killed and
    started again, the request is still there, and the Allow given there reaches the child."""
    child = f"careful-{uuid.uuid4().hex[:6]}"
    distributed.add_agent(
        child, {"version": 1, "rules": [], "default": {"replies": [
            [{"tool_call": {"name": "bash", "id": "call_make", "arguments": {"command": "echo made"}}}], [{"text": "Child says: {{result}}"}]]}},
        tool_policy={"approval": "ask_changes"},
    )  # fmt: skip
    parent = f"boss-{uuid.uuid4().hex[:6]}"
    distributed.add_agent(
        parent, {"version": 1, "rules": [{"match": "delegate", "replies": [
            [{"tool_call": {"name": "delegate_parallel", "arguments": {"tasks": [{"agent": child, "task": "make it"}]}}}], [{"text": "Boss done."}]]}]},
        subagent_policy={"enabled": True, "agents": [child]},
    )  # fmt: skip
    session_id, run_id = distributed.prompt("please delegate", agent=parent)
    other = distributed.server_names[1]

    def waiting() -> list[dict]:
        status, body = distributed.http(other, "get", f"/api/sessions/{session_id}/approvals/")
        assert status == 200, body
        return body["approvals"]

    deadline = time.monotonic() + 120
    while not waiting():
        assert time.monotonic() < deadline, distributed.log("subagents")[-3000:]
        time.sleep(0.2)
    [item] = waiting()
    assert item["tool"] == "bash" and item["command"] == "echo made" and item["subagent"]["agent"] == child
    distributed.kill(other)
    distributed.start_server(other)
    assert waiting() == [item]  # the request is the table's, not a process's
    status, body = distributed.http(
        other, "post", f"/api/sessions/{session_id}/approve/",
        {"toolCallId": item["toolCallId"], "decision": "allow", "subagentRunId": item["subagent"]["runId"]},
    )  # fmt: skip
    assert status == 200 and body["approval"]["status"] == "allowed", body
    row = distributed.wait_run(run_id, lambda r: r["status"] not in ("queued", "running"), timeout=120)
    assert row["status"] == "completed", (row, distributed.log("subagents")[-3000:])
    assert children(distributed, session_id, "status, backend, final_text") == [("completed", "celery", "Child says: made\n")]
