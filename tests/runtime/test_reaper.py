"""The reaper in one process, against the state a killed worker leaves behind (the crash
suite, test_crash_recovery.py, kills real servers and workers).

Dead processes are real: a child that was started and killed, or this process's pid with
another start time (a reused pid).
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import time

import pytest
from django.utils import timezone

from runtime.apps import serves_asgi
from runtime.models import AgentRun, RunInput, RunStatus
from runtime.runs.process import HOST, process_gone, process_start_time, this_process
from runtime.runs.prompts import run_abort, session_prompt
from runtime.runs.reaper import MAX_SUBMISSIONS, reap_session, reap_stale_runs
from runtime.runs.turn import llm_messages
from sessions_tree.providers import provider_for_session
from tests.support.rules import rules, summary_rule

pytestmark = pytest.mark.django_db(transaction=True)


def dead_process() -> dict:
    """The identity of a process of this host that has exited."""
    child = subprocess.Popen(["sleep", "30"])
    identity = {"host": HOST, "pid": child.pid, "process_started": process_start_time(child.pid)}
    child.kill()
    child.wait()
    return identity


def crashed_run(driver, text: str = "doomed", *, owner: dict | None = None, stale: bool = False, delivered: bool = True) -> AgentRun:
    """A run as a killed worker leaves it: running, its prompt in the tree (or not)."""
    run = session_prompt(actor=None, session_id=driver.session_id, text=text, dispatch=False).run
    fields = {"status": RunStatus.RUNNING, "heartbeat_at": timezone.now() - dt.timedelta(seconds=300 if stale else 0), "worker": "w"}
    if delivered:
        entry = provider_for_session(driver.session_id).append_message(
            driver.session_id, {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}
        )
        fields["prompt_entry_id"] = entry["id"]
    fields.update(owner or {"host": "another-host", "pid": 4242, "process_started": 1})
    AgentRun.objects.filter(pk=run.pk).update(**fields)
    run.refresh_from_db()
    return run


def user_texts(session_id: str) -> list[str]:
    messages = provider_for_session(session_id).build_context(session_id).messages
    return [m["content"][0]["text"] for m in messages if m["role"] == "user"]


def wait_terminal(run_id, timeout: float = 20) -> AgentRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = AgentRun.objects.get(run_id=run_id)
        if not run.is_active:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} still {run.status}")


# --------------------------------------------------------------------------- process identity


def test_process_identity_tells_dead_live_and_reused_pids_apart():
    me = this_process()
    assert me["host"] == HOST and me["pid"] == os.getpid() and me["process_started"] > 0
    assert not process_gone(me["host"], me["pid"], me["process_started"])
    dead = dead_process()
    assert process_gone(dead["host"], dead["pid"], dead["process_started"])
    assert process_gone(HOST, os.getpid(), me["process_started"] - 1)  # the pid now runs another process
    assert not process_gone("another-host", 1, 1)  # other hosts: nothing can be known


def test_start_up_reaping_runs_in_server_processes_only():
    assert serves_asgi(["/venv/bin/daphne", "-p", "8000", "neta.asgi:application"])
    assert serves_asgi(["/usr/lib/python3/site-packages/uvicorn/__main__.py", "neta.asgi:application"])
    assert serves_asgi(["/srv/neta/neta/serve.py", "-b", "127.0.0.1", "neta.asgi:application"])  # make run
    assert not serves_asgi(["manage.py", "migrate"])
    assert not serves_asgi(["manage.py", "runtime_reap"])
    assert not serves_asgi(["/venv/bin/pytest", "tests"])
    assert not serves_asgi(["/venv/bin/celery", "-A", "neta", "worker"])
    assert not serves_asgi()  # this test run


# --------------------------------------------------------------------------- running runs


def test_a_run_whose_process_is_gone_is_reaped_at_once(driver_for):
    from runtime.realtime.sinks import InMemorySink, default_sink, set_default_sink

    driver = driver_for(rules())
    run = crashed_run(driver, owner=dead_process())  # heartbeat fresh: not stale for 30 s
    sink, previous = InMemorySink(), default_sink()
    set_default_sink(sink)
    try:
        assert [r.pk for r in reap_session(driver.session_id)] == [run.pk]
    finally:
        set_default_sink(previous)
    run.refresh_from_db()
    assert run.status == RunStatus.LOST and "is gone" in run.error
    # Open tabs hear it: the same run_state event the turn loop sends.
    assert sink.events == [(driver.session_id, {"type": "run_state", "runId": str(run.run_id), "state": "lost", "error": run.error})]
    assert driver.prompt("next").status == RunStatus.COMPLETED


def test_a_lost_run_keeps_the_usage_its_replies_in_the_tree_hold(driver_for):
    """Killed during a tool: its reply was in the tree, its usage not yet on its row."""
    driver = driver_for(rules())
    earlier = driver.prompt("an earlier turn")  # its reply's usage is the earlier run's, not this one's
    assert earlier.status == RunStatus.COMPLETED
    run = crashed_run(driver, owner=dead_process())
    usage = {"input": 1200, "output": 80, "cacheRead": 300, "cacheWrite": 0, "totalTokens": 1580, "cost": {"total": 0.0123}}
    reply = {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "sleep 60"}}],
             "usage": usage, "stopReason": "toolUse", "timestamp": 2}  # fmt: skip
    provider_for_session(driver.session_id).append_message(driver.session_id, reply)
    AgentRun.objects.filter(pk=run.pk).update(output_tokens=500)  # what the row holds beyond the tree stays
    reap_session(driver.session_id)
    run.refresh_from_db()
    assert run.status == RunStatus.LOST
    assert (run.input_tokens, run.output_tokens, run.cache_read_tokens, float(run.cost)) == (1200, 500, 300, 0.0123)


def test_a_run_of_a_live_process_is_left_alone(driver_for):
    driver = driver_for(rules())
    run = crashed_run(driver, owner=this_process())
    other = driver_for(rules(), name="other")
    remote = crashed_run(other)  # another host, fresh heartbeat
    assert reap_stale_runs() == []
    assert AgentRun.objects.get(pk=run.pk).status == AgentRun.objects.get(pk=remote.pk).status == RunStatus.RUNNING


def test_a_round_reads_a_nodes_running_turns_by_key_and_reaps_only_the_dead_ones(driver_for, monkeypatch):
    """A node running hundreds of turns: a round looks at each process once and reads the whole
    rows of the runs it reaps only, so its statements do not grow with the turns in flight."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import runtime.runs.reaper as reaper

    looked_at = []
    monkeypatch.setattr(reaper, "process_gone", lambda *process: looked_at.append(process) or process_gone(*process))
    sessions = [driver_for(rules(), name=f"s{i}") for i in range(12)]
    live = [crashed_run(driver, owner=this_process()) for driver in sessions[:10]]
    dead_owner = dead_process()
    dead = [crashed_run(driver, owner=dead_owner) for driver in sessions[10:]]

    def round_statements() -> int:
        with CaptureQueriesContext(connection) as queries:
            changed = reap_stale_runs()
        return changed, len(queries)

    changed, statements = round_statements()
    assert sorted(r.pk for r in changed) == sorted(r.pk for r in dead)
    assert sorted(set(looked_at)) == sorted({tuple(this_process().values()), tuple(dead_owner.values())})
    assert len(looked_at) <= 2 + len(dead)  # each process once, then the reaped runs' own check
    assert all(AgentRun.objects.get(pk=r.pk).status == RunStatus.RUNNING for r in live)
    looked_at.clear()
    _, quiet = round_statements()  # nothing to reap: one read of the running runs, and the rooms' rounds
    assert len(looked_at) == 1
    for driver in sessions[:5]:
        crashed_run(driver, "more", owner=this_process())
    assert round_statements()[1] == quiet  # 15 live runs cost what 10 did
    assert statements > quiet


def test_prompts_acked_on_a_dead_run_are_carried_in_order_into_a_new_run(driver_for):
    driver = driver_for(rules())
    dead = crashed_run(driver)  # its process is on another host: only the heartbeat tells
    acked = [session_prompt(actor=None, session_id=driver.session_id, text=t, mode=m) for t, m in (("first", "follow_up"), ("second", "steer"), ("third", "follow_up"))]
    assert [o.queued_as for o in acked] == ["follow_up", "steer", "follow_up"] and {o.run.pk for o in acked} == {dead.pk}
    AgentRun.objects.filter(pk=dead.pk).update(heartbeat_at=timezone.now() - dt.timedelta(seconds=300))
    reaped = reap_stale_runs()
    assert [r.pk for r in reaped] == [dead.pk]
    assert reaped[0].status == RunStatus.LOST and "3 accepted prompt(s) carried into run" in reaped[0].error
    carried = AgentRun.objects.exclude(pk=dead.pk).get(session_id=driver.session_id)
    assert carried.prompt == "first" and carried.run_id.hex in reaped[0].error.replace("-", "")
    finished = wait_terminal(carried.run_id)  # submitted on the inline pool of this process
    assert finished.status == RunStatus.COMPLETED, finished.error
    assert user_texts(driver.session_id) == ["doomed", "first", "second", "third"]
    messages = provider_for_session(driver.session_id).build_context(driver.session_id).messages
    assert [m["content"][0]["text"] for m in messages if m["role"] == "assistant"] == ["echo: first", "echo: second", "echo: third"]


def test_a_run_killed_before_its_prompt_reached_the_tree_is_carried(driver_for):
    driver = driver_for(rules())
    dead = crashed_run(driver, "never written", owner=dead_process(), delivered=False)
    reap_session(driver.session_id)
    dead.refresh_from_db()
    assert dead.status == RunStatus.LOST and "1 accepted prompt(s) carried" in dead.error
    carried = AgentRun.objects.exclude(pk=dead.pk).get(session_id=driver.session_id)
    assert wait_terminal(carried.run_id).status == RunStatus.COMPLETED
    assert user_texts(driver.session_id) == ["never written"]


def test_a_prompt_for_a_deleted_session_is_recorded_as_not_run(driver_for):
    driver = driver_for(rules())
    dead = crashed_run(driver)
    assert session_prompt(actor=None, session_id=driver.session_id, text="too late").queued_as == "follow_up"
    provider_for_session(driver.session_id).delete_session(driver.session_id)
    AgentRun.objects.filter(pk=dead.pk).update(heartbeat_at=timezone.now() - dt.timedelta(seconds=300))
    reap_stale_runs()
    dead.refresh_from_db()
    assert dead.status == RunStatus.LOST and "1 accepted prompt(s) not run: the session no longer exists" in dead.error
    assert not RunInput.objects.filter(run=dead, consumed=False).exists()


def test_a_tool_running_at_the_crash_gets_an_aborted_result(driver_for):
    driver = driver_for(rules())
    run = crashed_run(driver, "use tools", stale=True)
    provider = provider_for_session(driver.session_id)
    calls = [{"type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {"command": "sleep 30"}} for i in (1, 2)]
    provider.append_message(driver.session_id, {"role": "assistant", "content": calls, "stopReason": "toolUse", "timestamp": 2})
    provider.append_message(
        driver.session_id,
        {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": [{"type": "text", "text": "done"}], "isError": False, "timestamp": 3},
    )  # c2 was running when the worker died
    reap_stale_runs()
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.LOST
    path = provider.get_active_path(driver.session_id)
    last = path[-1]["message"]
    assert last["role"] == "toolResult" and last["toolCallId"] == "c2" and last["isError"]
    assert "aborted" in last["content"][0]["text"]
    sent = llm_messages(provider.build_context(driver.session_id).messages)
    assert [m.get("toolCallId") for m in sent if m["role"] == "toolResult"] == ["c1", "c2"]  # every call answered
    assert driver.prompt("next").status == RunStatus.COMPLETED


# --------------------------------------------------------------------------- queued runs


def queued_run(driver, text: str, **fields) -> AgentRun:
    run = session_prompt(actor=None, session_id=driver.session_id, text=text, dispatch=False).run
    AgentRun.objects.filter(pk=run.pk).update(**fields)
    run.refresh_from_db()
    return run


def test_a_queued_run_of_a_dead_process_is_submitted_again(driver_for):
    driver = driver_for(rules())
    run = queued_run(driver, "waiting", backend="inline", submitted_at=timezone.now(), submissions=1, **dead_process())
    changed = reap_session(driver.session_id)
    assert [r.pk for r in changed] == [run.pk]
    assert wait_terminal(run.run_id).status == RunStatus.COMPLETED
    run.refresh_from_db()
    assert run.submissions == 2 and run.pid == os.getpid()
    assert user_texts(driver.session_id) == ["waiting"]


def test_a_queued_run_nobody_claims_is_submitted_again_then_failed(driver_for, settings):
    driver = driver_for(rules())
    old = timezone.now() - dt.timedelta(seconds=settings.NETA_RUN_CLAIM_SECONDS + 5)
    # A Celery task lost with its worker: no process to ask, only the time since submission.
    run = queued_run(driver, "lost task", backend="celery", submitted_at=old, submissions=1)
    reap_stale_runs()
    assert wait_terminal(run.run_id).status == RunStatus.COMPLETED  # re-submitted (here: the inline backend)
    other = driver_for(rules(), name="other")
    hopeless = queued_run(other, "never taken", backend="celery", submitted_at=old, submissions=MAX_SUBMISSIONS)
    reap_stale_runs()
    hopeless.refresh_from_db()
    assert hopeless.status == RunStatus.FAILED and "never started: no process claimed it" in hopeless.error


def test_a_queued_run_of_a_live_process_waits(driver_for, settings):
    driver = driver_for(rules())
    old = timezone.now() - dt.timedelta(seconds=settings.NETA_RUN_CLAIM_SECONDS + 5)
    run = queued_run(driver, "in my pool", backend="inline", submitted_at=old, submissions=1, **this_process())
    assert reap_stale_runs() == []
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.QUEUED


# --------------------------------------------------------------------------- compaction aborts


def test_aborting_a_compaction_records_the_run_as_aborted(driver_for):
    slow_summary = summary_rule("## Goal\n" + "slowly " * 200)
    slow_summary["reply"][0].update(delay_ms=50, chunk_size=2)
    big = {"reply": {"steps": [{"text": "a long answer"}], "usage": {"input": 99000, "output": 10}}}
    driver = driver_for(rules(slow_summary, default=big), compaction_keep_recent_tokens=1)
    # After the turn: Pi's threshold check compacts; the abort lands during the summary.
    thread, holder, run = driver.start("hello")
    deadline = time.monotonic() + 10
    while not driver.sink.of_type("assistant_stream_end") and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    assert AgentRun.objects.get(pk=run.pk).status == RunStatus.RUNNING  # still running while it compacts
    run_abort(actor=None, session_id=driver.session_id)
    thread.join(timeout=20)
    assert holder[0].status == RunStatus.ABORTED and "compaction" in holder[0].error
    # Before the next prompt: the threshold check compacts again, and is aborted again.
    thread, holder, run = driver.start("again")
    time.sleep(0.5)
    run_abort(actor=None, session_id=driver.session_id)
    thread.join(timeout=20)
    assert holder[0].status == RunStatus.ABORTED, holder[0].error
    kinds = [e["type"] for e in provider_for_session(driver.session_id).get_active_path(driver.session_id)]
    assert "compaction" not in kinds


def test_prompts_queued_on_a_run_that_fails_are_refused_with_the_reason(driver_for):
    slow_error = {"reply": {"steps": [{"text": "x " * 100, "delay_ms": 10, "chunk_size": 2}], "error": "upstream exploded"}}
    driver = driver_for(rules(default=slow_error))
    thread, holder, run = driver.start("doomed")
    deadline = time.monotonic() + 10
    while not driver.sink.of_type("assistant_stream_delta") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert session_prompt(actor=None, session_id=driver.session_id, text="queued behind it").queued_as == "follow_up"
    thread.join(timeout=20)
    finished = AgentRun.objects.get(pk=run.pk)
    assert finished.status == RunStatus.FAILED
    assert "upstream exploded" in finished.error and "1 queued prompt(s) not run: the run ended failed" in finished.error


def test_a_summarizer_failure_after_the_turn_leaves_the_run_completed(driver_for):
    failing_summary = {"match": {"system": "context summarization assistant"}, "reply": {"steps": [], "error": "summarizer down"}}
    big = {"reply": {"steps": [{"text": "a long answer"}], "usage": {"input": 99000, "output": 10}}}
    driver = driver_for(rules(failing_summary, default=big), compaction_keep_recent_tokens=1)
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error  # the compaction after it is retried by the next prompt
