"""The subagent host end to end: a parent run delegates, real child processes run, the
records, the tree entries and the tool result come back (inline backend, real database)."""

from __future__ import annotations

import hashlib
import os
from types import SimpleNamespace

import pytest

from runtime.models import (
    AgentRun,
    RunStatus,
    SubprocessEvent,
    SubprocessRun,
    SubprocessStatus,
)
from runtime.realtime.sinks import Coalescer, InMemorySink
from runtime.runs.prompts import run_abort
from runtime.sessions.services import session_start
from runtime.subagents import services
from runtime.subagents.host import Task, cap_text, delegate
from tests.subagents.host_helpers import (
    OWN_PID,
    Parent,
    alive,
    delegating,
    environ_of,
    ls_then,
    make_agent,
    policy,
    script,
    wait_for,
)
from toolcatalog.protocol import ToolContext

pytestmark = pytest.mark.django_db(transaction=True)

TWO = {"tasks": [{"agent": "helper", "task": "look at the files"}, {"agent": "helper", "task": "describe the folder"}]}
ANSWER = "The workspace holds notes.txt — and nothing else. ✓"



def parent_with(workspace, parent_rules, child_rules, *, provider="file", **policy_extra) -> Parent:
    make_agent("helper", child_rules, workspace=workspace)
    agent = make_agent("boss", parent_rules, workspace=workspace, provider=provider, subagent_policy=policy("helper", **policy_extra))
    return Parent(agent)


def tool_result(parent: Parent) -> dict:
    return next(e["message"] for e in parent.path() if e["type"] == "message" and e["message"]["role"] == "toolResult")


@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_parallel_delegation_end_to_end(workspace, provider):
    parent = parent_with(workspace, delegating("delegate_parallel", TWO), ls_then(ANSWER), provider=provider)
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED, run.error
    # The tree: the call, the batch (finalized), one result per task, the tool result, the answer.
    assert parent.types() == ["user", "assistant", "subagent_batch", "subagent_result", "subagent_result", "toolResult", "assistant"]
    rows = list(SubprocessRun.objects.filter(parent_run=run).order_by("task_index"))
    assert [r.status for r in rows] == ["completed", "completed"]
    assert all(r.pid and r.pid != OWN_PID for r in rows) and rows[0].pid != rows[1].pid
    assert all(r.final_text == ANSWER for r in rows)
    # Every event recorded once, in order, from run_start to exactly one terminal.
    for row in rows:
        events = list(SubprocessEvent.objects.filter(run=row).order_by("seq"))
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert events[0].type == "run_start" and events[-1].type == "run_end"
        assert [e.type for e in events].count("run_end") == 1 and row.event_count == len(events)
        assert "tool_call" in [e.type for e in events]
    path = parent.path()
    batch = path[2]
    assert batch["mode"] == "parallel" and batch["metadata"]["state"] == "finished"
    assert [r["status"] for r in batch["metadata"]["runs"]] == ["completed", "completed"]
    digest = hashlib.sha256(ANSWER.encode()).hexdigest()
    assert [f["sha256"] for f in batch["metadata"]["finalResults"]] == [digest, digest]
    assert batch["metadata"]["events"]["total"] == sum(r.event_count for r in rows)
    results = path[3:5]
    assert [r["runId"] for r in results] == [str(r.run_id) for r in rows]
    assert results[0]["content"]["results"][0]["finalText"] == ANSWER and results[0]["isError"] is False
    assert any(e["type"] == "tool_call" for e in results[0]["metadata"]["processEvents"])
    # The tool result holds every child's full final text, and is not an error.
    result = tool_result(parent)
    text = result["content"][0]["text"]
    assert result["isError"] is False and text.count(ANSWER) == 2 and "2/2 completed" in text
    # What the model sees next: Pi's context ignores the two Neta entries.
    ctx = parent.provider.build_context(parent.session_id)
    assert [m["role"] for m in ctx.messages] == ["user", "assistant", "toolResult", "assistant"]
    # Live: started and completed for each child, child events coalesced in between.
    started = parent.sink.of_type("subagent_run_started")
    completed = parent.sink.of_type("subagent_run_completed")
    assert sorted(e["subagentRunId"] for e in started) == sorted(e["subagentRunId"] for e in completed) == sorted(str(r.run_id) for r in rows)
    assert {e["runId"] for e in started} == {str(run.run_id)}
    assert {e["status"] for e in completed} == {"completed"}
    assert parent.sink.of_type("subagent_event")
    from runtime.realtime.stream_events import shape_errors

    assert [err for _, e in parent.sink.events for err in shape_errors(e)] == []
    # The socket's child events cover each child's log without a gap (merged deltas as ranges).
    for row in rows:
        covered = [(e["firstSeq"], e["seq"]) for e in parent.sink.of_type("subagent_event") if e["subagentRunId"] == str(row.run_id)]
        assert covered[0][0] == 1 and all(b[0] == a[1] + 1 for a, b in zip(covered, covered[1:]))
        assert covered[-1][1] == row.event_count
    # Child usage rolls up into the parent run.
    child_out = sum(int((r.usage or {}).get("output") or 0) for r in rows)
    assert child_out > 0
    parent_only = sum(int(e["message"]["usage"]["output"]) for e in path if e["type"] == "message" and e["message"]["role"] == "assistant")
    assert AgentRun.objects.get(pk=run.pk).output_tokens == parent_only + child_out


def test_both_providers_store_the_entries_alike(workspace):
    shapes = {}
    for provider in ("file", "mysql"):
        from runtime.models import Agent, ModelConfig

        AgentRun.objects.all().delete()
        Agent.objects.filter(name__in=("boss", "helper")).delete()
        ModelConfig.objects.filter(name__in=("boss-model", "helper-model")).delete()
        parent = parent_with(workspace, delegating("delegate_parallel", TWO), ls_then(ANSWER), provider=provider)
        assert parent.prompt().status == RunStatus.COMPLETED
        entries = [e for e in parent.path() if e["type"] in ("subagent_batch", "subagent_result")]
        shapes[provider] = [_shape(e) for e in entries]
    assert shapes["file"] == shapes["mysql"]


def _shape(value):
    """The structure and the stable values (ids, times, pids, runs, counts vary run to run)."""
    varying = {"id", "parentId", "timestamp", "runId", "batchId", "pid", "startedAt", "endedAt", "ts", "parentRunId", "toolCallId", "workerHost", "usage", "perRun", "eventCount", "total", "byType", "processEvents", "seq", "counts"}
    if isinstance(value, dict):
        return {k: ("*" if k in varying else _shape(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return value


def test_a_failed_child_flags_the_tool_result_and_the_others_still_report(workspace):
    make_agent("broken", script(default={"reply": {"error": "the model fell over", "steps": []}}), workspace=workspace)
    tasks = {"tasks": [{"agent": "helper", "task": "look"}, {"agent": "broken", "task": "fail"}]}
    parent = parent_with(workspace, delegating("delegate_parallel", tasks), ls_then(ANSWER))
    parent.agent.subagent_policy = policy("helper", "broken")
    parent.agent.save()
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED, run.error  # the parent turn goes on with the failure in its result
    rows = list(SubprocessRun.objects.filter(parent_run=run).order_by("task_index"))
    assert [r.status for r in rows] == ["completed", "failed"] and rows[1].error_code == "llm_error"
    result = tool_result(parent)
    assert result["isError"] is True and ANSWER in result["content"][0]["text"] and "llm_error" in result["content"][0]["text"]
    assert result["content"][0]["text"].startswith("Subagents: 1/2 completed, 1 failed.")
    results = [e for e in parent.path() if e["type"] == "subagent_result"]
    assert [r["isError"] for r in results] == [False, True]


def test_a_budget_stop_is_partial_never_completed(workspace):
    parent = parent_with(
        workspace, delegating("delegate_task", {"agent": "helper", "task": "look"}), ls_then(ANSWER), child_budget={"max_turns": 1}
    )
    run = parent.prompt()
    row = SubprocessRun.objects.get(parent_run=run)
    assert row.status == SubprocessStatus.PARTIAL
    terminal = SubprocessEvent.objects.filter(run=row).order_by("-seq").first()
    assert terminal.type == "run_end" and terminal.payload["stopReason"] == "budget_turns"
    assert "partial" in tool_result(parent)["content"][0]["text"]


@pytest.mark.parametrize(
    "extra, arguments, expected",
    [
        ({"max_tasks_per_call": 1}, TWO, "at most 1 per call"),
        ({}, {"tasks": [{"agent": "stranger", "task": "x"}]}, "may not delegate to"),
    ],
)
def test_the_host_refuses_what_the_policy_forbids_whatever_the_model_asks(workspace, extra, arguments, expected):
    parent = parent_with(workspace, delegating("delegate_parallel", arguments), ls_then(ANSWER), **extra)
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED
    result = tool_result(parent)
    assert result["isError"] is True and expected in result["content"][0]["text"]
    assert not SubprocessRun.objects.exists()
    assert "subagent_batch" not in parent.types()


def test_without_an_enabled_policy_the_delegate_tools_are_not_offered(workspace):
    make_agent("helper", ls_then(ANSWER), workspace=workspace)
    agent = make_agent("boss", delegating("delegate_task", {"agent": "helper", "task": "x"}), workspace=workspace)
    parent = Parent(agent)
    parent.prompt()
    result = tool_result(parent)
    assert result["isError"] is True and "not available" in result["content"][0]["text"] and "delegation is off" in result["content"][0]["text"]
    assert not SubprocessRun.objects.exists()


def test_concurrency_per_run_is_held(workspace):
    three = {"tasks": [{"agent": "helper", "task": f"task {i}"} for i in range(3)]}
    parent = parent_with(workspace, delegating("delegate_parallel", three), ls_then(ANSWER), max_concurrency=1)
    run = parent.prompt()
    rows = list(SubprocessRun.objects.filter(parent_run=run).order_by("started_at"))
    assert [r.status for r in rows] == ["completed"] * 3
    for before, after in zip(rows, rows[1:]):
        assert after.started_at >= before.ended_at  # one at a time


def test_chain_passes_the_previous_answer_on(workspace):
    steps = {"steps": [{"agent": "helper", "task": "first"}, {"agent": "helper", "task": "second, after: {previous}"}]}
    parent = parent_with(workspace, delegating("delegate_chain", steps), ls_then(ANSWER))
    run = parent.prompt()
    rows = list(SubprocessRun.objects.filter(parent_run=run).order_by("task_index"))
    assert [r.status for r in rows] == ["completed", "completed"]
    assert rows[1].envelope["task"] == f"second, after: {ANSWER}"


def test_the_child_tools_are_the_intersection_and_deny_wins(workspace):
    parent = parent_with(
        workspace, delegating("delegate_task", {"agent": "helper", "task": "x"}), ls_then(ANSWER), tools={"deny": ["bash"]}
    )
    from runtime.models import Agent

    Agent.objects.filter(name="helper").update(tool_policy={"disabled": ["write"]})
    Agent.objects.filter(name="boss").update(tool_policy={"disabled": ["grep"]})  # what the parent was denied
    run = parent.prompt()
    row = SubprocessRun.objects.get(parent_run=run)
    granted = {t["name"] for t in row.envelope["toolPolicy"]["tools"]}
    denied = {d["name"]: d["reason"] for d in row.denied_tools}
    assert "ls" in granted and "bash" not in granted and "write" not in granted and "grep" not in granted
    assert "subagent_policy.tools.deny" in denied["bash"] and "write" in denied
    assert "parent run does not have it" in denied["grep"]
    assert not granted & {"delegate_task", "delegate_parallel", "delegate_chain", "read_skill", "read_skill_file"}


def test_the_child_is_isolated_and_its_environment_scrubbed(workspace, monkeypatch):
    monkeypatch.setenv("NETA_TEST_CANARY_SECRET", "canary-7f3e")
    slow = script(default={"replies": [[{"pause_ms": 20000}, {"text": "late"}]]})
    parent = parent_with(workspace, delegating("delegate_task", {"agent": "helper", "task": "x"}), slow)
    thread, holder, run = parent.start()
    try:
        row = wait_for(lambda: SubprocessRun.objects.filter(parent_run=run, status="running", pid__isnull=False).first(), what="a running child")
        env = environ_of(row.pid)
        assert "canary-7f3e" not in "".join(env.values()) and not any(k.startswith(("NETA_", "DJANGO_")) for k in env)
        assert os.getpgid(row.pid) == row.pid != os.getpgid(0)  # its own process group
        # The parent's workspace (here: its per-session folder) is the child's cwd.
        cwd = row.envelope["runtimeConfig"]["cwd"]
        assert os.path.realpath(f"/proc/{row.pid}/cwd") == os.path.realpath(cwd) and cwd.startswith(str(workspace))
    finally:
        run_abort(session_id=parent.session_id)
        thread.join(60)


def test_parent_abort_cascades_to_every_child(workspace):
    slow = script(default={"replies": [[{"pause_ms": 60000}, {"text": "never"}]]})
    four = {"tasks": [{"agent": "helper", "task": f"t{i}"} for i in range(4)]}
    parent = parent_with(workspace, delegating("delegate_parallel", four), slow)
    thread, holder, run = parent.start()
    rows = wait_for(lambda: list(SubprocessRun.objects.filter(parent_run=run, status="running", pid__isnull=False)) if SubprocessRun.objects.filter(parent_run=run, status="running", pid__isnull=False).count() == 4 else None, what="four running children")
    run_abort(session_id=parent.session_id)
    thread.join(60)
    assert not thread.is_alive()
    assert holder[0].status == RunStatus.ABORTED
    rows = list(SubprocessRun.objects.filter(parent_run=run))
    assert {r.status for r in rows} == {"cancelled"} and all("aborted" in r.cancelled_by for r in rows)
    assert not any(alive(r.pid) for r in rows)
    # The batch and its results are written even so, and the call has its result.
    types = parent.types()
    assert types[2] == "subagent_batch" and types.count("subagent_result") == 4 and "toolResult" in types
    batch = parent.path()[2]
    assert batch["metadata"]["state"] == "cancelled"


def test_a_replayed_call_never_spawns_twice(workspace):
    parent = parent_with(workspace, delegating("delegate_task", {"agent": "helper", "task": "look"}), ls_then(ANSWER))
    run = parent.prompt()
    row = SubprocessRun.objects.get(parent_run=run)
    events = row.event_count
    call_id = row.tool_call_id
    # The same call again (a retried tool call) through the host's own entry point.
    from runtime.agents.tools import agent_tools
    from runtime.models import Agent

    agent = Agent.objects.get(name="boss")
    turn = SimpleNamespace(
        run=run, agent=agent, provider=parent.provider, session_id=parent.session_id,
        tools=agent_tools(agent), cwd=str(workspace), roots=[str(workspace)],
        sink=Coalescer(InMemorySink(), parent.session_id),
    )  # fmt: skip
    ctx = ToolContext(roots=(workspace,), extras={"turn": turn, "tool_call_id": call_id})
    result = delegate(ctx, mode="single", tasks=[Task(agent="helper", task="look")])
    assert ANSWER in result.text_output() and "earlier dispatch" in result.text_output()
    assert SubprocessRun.objects.filter(parent_run=run).count() == 1
    row.refresh_from_db()
    assert row.event_count == events


def test_cap_text_keeps_head_tail_and_a_reference():
    text = "".join(chr(65 + i % 26) for i in range(10_000))
    capped, cut = cap_text(text, 1000, "run-1")
    assert cut and capped.startswith(text[:666]) and capped.endswith(text[-334:]) and "GET /api/subagent-runs/run-1/" in capped
    assert cap_text("short", 1000, "r") == ("short", False)


def test_the_session_limit_holds_at_the_claim(workspace):
    parent = parent_with(workspace, delegating("delegate_task", {"agent": "helper", "task": "look"}), ls_then(ANSWER))
    run = parent.prompt()
    rows = services.subprocess_runs_create(
        parent_run=run, batch_id="b2", tool_call_id="call-x", mode="parallel", parent_entry_id="", depth=1,
        tasks=[{"agent": "helper", "task": "a"}, {"agent": "helper", "task": "b"}],
    )  # fmt: skip
    first = services.subprocess_run_claim(rows[0].run_id, max_per_session=1)
    assert first and first.status == "starting"
    assert services.subprocess_run_claim(rows[1].run_id, max_per_session=1) is False  # the session is full
    assert services.subprocess_run_claim(rows[0].run_id, max_per_session=1) is None  # taken: a redelivery is a no-op
    # Idempotency key: the same call makes no new rows.
    again = services.subprocess_runs_create(
        parent_run=run, batch_id="b3", tool_call_id="call-x", mode="parallel", parent_entry_id="", depth=1,
        tasks=[{"agent": "helper", "task": "a"}, {"agent": "helper", "task": "b"}],
    )  # fmt: skip
    assert [r.pk for r in again] == [r.pk for r in rows]


def test_the_reaper_finds_children_of_a_lost_supervisor(workspace):
    parent = parent_with(workspace, delegating("delegate_task", {"agent": "helper", "task": "look"}), ls_then(ANSWER))
    run = parent.prompt()
    rows = services.subprocess_runs_create(
        parent_run=run, batch_id="b9", tool_call_id="call-lost", mode="single", parent_entry_id="", depth=1,
        tasks=[{"agent": "helper", "task": "a"}],
    )  # fmt: skip
    from runtime.runs.process import HOST

    dead = 2**22 - 7  # no such pid
    SubprocessRun.objects.filter(pk=rows[0].pk).update(status="running", worker_host=HOST, worker_pid=dead, worker_started=1)
    streamed = [{"v": 1, "runId": rows[0].run_id.hex, "seq": i + 1, "ts": 1, "type": "assistant_delta", "turn": 1, "kind": "text", "delta": d}
                for i, d in enumerate(["Half of ", "an answer"])]  # fmt: skip
    services.subprocess_events_record(rows[0], streamed)
    lost = services.subprocess_runs_reap()
    assert [r.pk for r in lost] == [rows[0].pk]
    row = SubprocessRun.objects.get(pk=rows[0].pk)
    assert row.status == "lost" and row.ended_at is not None
    assert SubprocessEvent.objects.filter(run=row, type="run_error").count() == 1
    # Its result keeps what it had streamed; the error says why once ("lost" is its code).
    assert row.final_text == "Half of an answer"
    assert (row.error_code, row.error) == ("lost", "its supervising process is gone")


@pytest.mark.oracle
@pytest.mark.parametrize("provider", ["file", "mysql"])
def test_pi_reads_an_exported_session_with_a_finished_batch_as_neta_does(workspace, provider, oracle, tmp_path):
    import subprocess

    from sessions_tree.pi_files import export_session
    from sessions_tree.pi_view import DEFAULT
    from tests.support.entries import pi_view_of_file as _ours_from_file

    parent = parent_with(workspace, delegating("delegate_parallel", TWO), ls_then(ANSWER), provider=provider)
    assert parent.prompt().status == RunStatus.COMPLETED
    path = export_session(parent.session_id, tmp_path / "exported.jsonl")
    done = subprocess.run([str(oracle), "context", str(path)], capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout == _ours_from_file(path, DEFAULT, False)
    import json

    pi = json.loads(done.stdout)
    assert [m["role"] for m in pi["messages"]] == ["user", "assistant", "toolResult", "assistant"]
    assert pi["messages"][2]["content"][0]["text"].count(ANSWER) == 2


def test_the_batch_token_budget_stops_every_child_partial(workspace):
    # Each child lists the workspace (one model turn, with usage), then would think for a minute.
    slow_second = script(default={"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"pause_ms": 60000}, {"text": "late"}]]})
    parent = parent_with(workspace, delegating("delegate_parallel", TWO), slow_second, batch_budget={"max_tokens": 1})
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED, run.error
    rows = list(SubprocessRun.objects.filter(parent_run=run))
    assert {r.status for r in rows} == {"partial"} and all(r.cancelled_by.startswith("batch budget: budget_tokens") for r in rows)
    for row in rows:
        end = SubprocessEvent.objects.filter(run=row).order_by("-seq").first()
        assert end.type == "run_end" and end.payload["stopReason"] == "budget_tokens"
    batch = next(e for e in parent.path() if e["type"] == "subagent_batch")
    assert batch["metadata"]["state"] == "budget_stopped"
    assert not any(alive(r.pid) for r in rows)


def test_kill_9_of_the_child_at_random_points_always_ends_recorded(workspace):
    import random
    import signal
    import time

    rng = random.Random(14)
    streaming = script(default={"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], {"delay_ms": 10, "chunk_size": 3, "steps": [{"text": "slow words " * 60}]}]})
    parent = parent_with(workspace, delegating("delegate_task", {"agent": "helper", "task": "look"}), streaming)
    seen = set()
    for _ in range(20):
        parent.session_id = session_start(agent=parent.agent).session_id  # a fresh parent session each round
        thread, holder, run = parent.start()
        row = wait_for(lambda: SubprocessRun.objects.filter(parent_run=run, pid__isnull=False).first(), what="a child pid")
        time.sleep(rng.uniform(0, 1.5))
        try:
            os.kill(row.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it had finished already: that is one of the random points too
        thread.join(60)
        assert not thread.is_alive() and holder[0].status == RunStatus.COMPLETED, holder and holder[0].error
        row.refresh_from_db()
        seen.add(row.status)
        assert row.status in ("completed", "failed") and not alive(row.pid)
        ends = SubprocessEvent.objects.filter(run=row, type__in=("run_end", "run_error"))
        assert ends.count() == 1
        if row.status == "failed":
            assert row.error_code == "child_crash" and row.exit_signal == "SIGKILL" and tool_result(parent)["isError"] is True
        assert "subagent_result" in parent.types() and parent.provider.get_session(parent.session_id).in_flight_entry_id is None
    assert "failed" in seen


def test_skills_reach_a_child_only_through_the_allowlist_and_the_host(workspace, tmp_path, settings):
    from skills_registry.models import SkillResource
    from skills_registry.services import skills_set_privilege, skills_sync
    from tests.support.skills import write_skill

    roots = tmp_path / "skills"
    settings.NETA_SKILLS_DIRS = [str(roots)]
    settings.NETA_SKILLS_PROJECT_DIR = str(tmp_path / "no-project")
    settings.NETA_SKILLS_HOME = str(tmp_path / "no-home")
    write_skill(roots, "lint", body="Run the linter like this.")
    write_skill(roots, "secret", body="Privileged steps.")
    write_skill(roots, "manual", body="Only a person starts me.", extra="disable-model-invocation: true")
    write_skill(roots, "unlisted", body="Not on the allowlist.")
    skills_sync()
    skills_set_privilege(skills=SkillResource.objects.filter(name="secret"), requires_privilege=True, actor=None)
    calls = [{"tool_call": {"name": "read_skill", "arguments": {"name": n}}} for n in ("lint", "secret", "unlisted")]
    child = script(default={"replies": [calls, [{"text": "read what I could"}]]})
    parent = parent_with(
        workspace, delegating("delegate_task", {"agent": "helper", "task": "use skills"}), child, skills=["lint", "secret", "manual"]
    )
    run = parent.prompt()
    row = SubprocessRun.objects.get(parent_run=run)
    assert row.status == "completed", row.error
    assert row.envelope["allowedSkills"] == ["lint"]
    assert {t["name"]: t["route"] for t in row.envelope["toolPolicy"]["tools"]}["read_skill"] == "main-process-proxy"
    results = {e.payload["toolCallId"]: e.payload for e in SubprocessEvent.objects.filter(run=row, type="tool_result")}
    by_call = {e.payload["toolCallId"]: e.payload["arguments"]["name"] for e in SubprocessEvent.objects.filter(run=row, type="tool_call")}
    outcome = {by_call[cid]: (r["isError"], r["preview"]) for cid, r in results.items()}
    assert outcome["lint"][0] is False and "Run the linter" in outcome["lint"][1]
    assert outcome["secret"][0] is True and outcome["unlisted"][0] is True
    assert "Privileged" not in outcome["secret"][1]
    assert SubprocessEvent.objects.filter(run=row, type="proxy_request").count() == 3  # all three went to the host
    # A skill the parent agent itself may not use never reaches its child, whatever the allowlist says.
    from runtime.models import Agent

    Agent.objects.filter(name="boss").update(skill_policy={"allowed": ["secret", "manual"]})
    again = parent.prompt("delegate again")
    row = SubprocessRun.objects.get(parent_run=again)
    assert row.envelope["allowedSkills"] == []
    assert "read_skill" not in {t["name"] for t in row.envelope["toolPolicy"]["tools"]}


def long_text(i: int, chars: int) -> str:
    """A distinct text for task ``i``: numbered lines, so a cut or a mix-up shows in its hash."""
    lines, n = [], 0
    while sum(map(len, lines)) < chars:
        lines.append(f"task {i} line {n}: {hashlib.sha256(f'{i}/{n}'.encode()).hexdigest()} ✓\n")
        n += 1
    return "".join(lines)[:chars]


def test_eight_parallel_children_deliver_their_full_distinct_texts_to_the_parent(workspace):
    texts = {i: long_text(i, 20_000 + 601 * i) for i in range(8)}  # 20–24.2 k each: under the cap of 200 000 / 8
    rules = [{"match": {"contains": f"job-{i}."}, "replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": texts[i]}]]} for i in range(8)]
    eight = {"tasks": [{"agent": "helper", "task": f"job-{i}. Write your report."} for i in range(8)]}
    parent = parent_with(workspace, delegating("delegate_parallel", eight), script(*rules), max_concurrency=8)
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED, run.error
    rows = list(SubprocessRun.objects.filter(parent_run=run).order_by("task_index"))
    assert [r.status for r in rows] == ["completed"] * 8
    assert [r.final_text for r in rows] == [texts[i] for i in range(8)]
    # What the parent model reads next: its context's tool result, each text whole, in task order.
    ctx = parent.provider.build_context(parent.session_id)
    result = next(m for m in ctx.messages if m["role"] == "toolResult")
    body = result["content"][0]["text"]
    sections = body.split("## Task ")[1:]
    assert len(sections) == 8
    for i, section in enumerate(sections):
        title, _, got = section.partition("\n\n")
        assert title == f"{i + 1} — helper: completed"
        got = got[:-2] if i < 7 else got  # the blank line between sections
        assert hashlib.sha256(got.encode()).hexdigest() == hashlib.sha256(texts[i].encode()).hexdigest(), (len(got), len(texts[i]), got[:80], got[-80:], texts[i][-80:])
    assert "characters omitted" not in body and result["isError"] is False
    assert [d["sha256"] for d in result["details"]["results"]] == [hashlib.sha256(texts[i].encode()).hexdigest() for i in range(8)]
    assert not any(d["truncated"] for d in result["details"]["results"])


def test_a_childs_page_reads_as_a_transcript_and_the_parents_trace_holds_its_children(workspace, admin_client):
    parent = parent_with(workspace, delegating("delegate_parallel", TWO), ls_then(ANSWER))
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED, run.error
    child = SubprocessRun.objects.filter(parent_run=run).order_by("task_index").first()
    page = admin_client.get(f"/admin/runtime/subprocessrun/{child.pk}/change/").content.decode()
    transcript = page[page.index("child-transcript") :]
    steps = [step for step in ("run start", "tool call", "tool result", "text", "end") if f"<td>{step}</td>" in transcript]
    assert steps == ["run start", "tool call", "tool result", "text", "end"], transcript[:3000]
    assert "ls " in transcript and "The workspace holds notes.txt" in transcript and "completed" in transcript
    assert "assistant_delta" not in transcript  # the deltas read as one passage
    parent_page = admin_client.get(f"/admin/runtime/agentrun/{run.pk}/change/").content.decode()
    assert parent_page.count('<tr data-kind="subagent">') == 2
    # The parent's two calls, then each child's two under its subagent row (indented, their request without its messages).
    assert parent_page.count('<tr data-kind="model_call">') == 6 and parent_page.count('<tr data-kind="model_call"><td data-depth="1"') == 4
    assert parent_page.count("request recorded, without its messages") == 4
