"""Branch switches (with and without Pi's branch summary), manual compaction, the
reaper, the chat command, the bootstrap — and Pi reading back every tree the
runtime wrote (oracle)."""

from __future__ import annotations

import datetime as dt
import io
import json
import subprocess

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from runtime.agents.bootstrap import runtime_bootstrap
from runtime.models import Agent, AgentRun, ModelConfig, RunStatus
from runtime.runs.prompts import session_prompt
from runtime.runs.reaper import reap_stale_runs
from runtime.sessions.services import session_compact, session_switch_leaf
from sessions_tree.pi_view import session_view
from sessions_tree.providers import get_provider
from tests.support.rules import WRITE_THEN_READ, rules, summary_rule

pytestmark = pytest.mark.django_db(transaction=True)


def path_of(driver):
    return get_provider(driver.agent.session_provider).get_active_path(driver.session_id)


def test_switch_without_summary_just_moves_the_leaf(driver_for):
    driver = driver_for(rules())
    driver.prompt("one")
    driver.prompt("two")
    first_reply = path_of(driver)[3]
    assert first_reply["message"]["role"] == "assistant"
    result = session_switch_leaf(actor=None, session_id=driver.session_id, entry_id=first_reply["id"])
    assert result == {"leafId": first_reply["id"], "editorText": None, "summaryEntry": None}
    assert path_of(driver)[-1]["id"] == first_reply["id"]
    # A user message as target: its parent becomes the leaf, its text comes back.
    second_user = [e for e in get_provider("file").list_entries(driver.session_id) if e.get("message", {}).get("content") == [{"type": "text", "text": "two"}]][0]
    result = session_switch_leaf(actor=None, session_id=driver.session_id, entry_id=second_user["id"])
    assert result["leafId"] == second_user["parentId"] and result["editorText"] == "two"


def test_switch_with_summary_writes_pis_branch_summary(driver_for):
    driver = driver_for(rules(summary_rule("## Goal\nExplored writing a file."), WRITE_THEN_READ))
    driver.prompt("hello")
    anchor = path_of(driver)[-1]
    driver.prompt("make a file")
    result = session_switch_leaf(actor=None, session_id=driver.session_id, entry_id=anchor["id"], summarize=True)
    summary = result["summaryEntry"]
    assert summary["type"] == "branch_summary" and summary["parentId"] == anchor["id"] and summary["fromId"] == anchor["id"]
    assert summary["summary"].startswith(
        "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n## Goal\nExplored writing a file."
    )
    assert summary["details"] == {"readFiles": [], "modifiedFiles": ["notes/a.txt"]}
    assert summary["summary"].endswith("<modified-files>\nnotes/a.txt\n</modified-files>")
    assert summary["fromHook"] is False
    ctx = get_provider("file").build_context(driver.session_id)
    assert ctx.messages[-1]["role"] == "branchSummary"


def test_manual_compaction(driver_for):
    driver = driver_for(rules(summary_rule("## Goal\nCompacted by hand.")))
    for text in ("a", "b", "c"):
        driver.prompt(text)
    entry = session_compact(actor=None, session_id=driver.session_id, instructions="focus on b")
    assert entry["type"] == "compaction" and entry["summary"].startswith("## Goal\nCompacted by hand.")
    assert entry["fromHook"] is False and isinstance(entry["tokensBefore"], int)
    from runtime.runs.summaries import NothingToCompact

    with pytest.raises(NothingToCompact, match="Already compacted"):
        session_compact(actor=None, session_id=driver.session_id)


def test_reaper_finalizes_a_run_whose_worker_died(driver_for):
    driver = driver_for(rules())
    provider = get_provider("file")
    outcome = session_prompt(actor=None, session_id=driver.session_id, text="doomed", dispatch=False)
    run = outcome.run
    # What a worker leaves behind when it is killed mid-stream: a running run with a
    # stale heartbeat and an in-flight entry with a checkpoint.
    user_entry = provider.append_message(driver.session_id, {"role": "user", "content": [{"type": "text", "text": "doomed"}], "timestamp": 1})
    entry = provider.begin_in_flight(driver.session_id, {"role": "assistant", "content": [], "stopReason": "stop", "timestamp": 2})
    partial = {
        "role": "assistant",
        "content": [{"type": "text", "text": "half an ans"}, {"type": "toolCall", "id": "c1", "name": "ls", "arguments": {}}],
        "stopReason": "stop",
        "timestamp": 2,
    }
    provider.update_in_flight_entry(driver.session_id, entry["id"], partial)
    AgentRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, heartbeat_at=timezone.now() - dt.timedelta(seconds=120), worker="dead:1", prompt_entry_id=user_entry["id"]
    )
    reaped = reap_stale_runs(stale_seconds=30)
    assert [r.pk for r in reaped] == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.LOST and "stopped responding" in run.error
    path = provider.get_active_path(driver.session_id)
    assert path[-2]["id"] == entry["id"] and path[-2]["message"]["stopReason"] == "aborted"
    assert path[-2]["message"]["content"][0]["text"] == "half an ans"
    assert path[-1]["message"]["role"] == "toolResult" and path[-1]["message"]["isError"]
    assert provider.get_session(driver.session_id).in_flight_entry_id is None
    assert reap_stale_runs(stale_seconds=30) == []
    # The session takes the next prompt.
    assert driver.prompt("again").status == RunStatus.COMPLETED


def test_bootstrap_and_chat_command(workspace):
    created = runtime_bootstrap()
    assert "model scripted-demo" in created and any(c.startswith("agent default") for c in created)
    assert runtime_bootstrap() == []
    assert not ModelConfig.objects.get(name="claude-sonnet").enabled  # no key in the environment
    assert Agent.objects.get(name="default").model.name == "scripted-demo"
    out = io.StringIO()
    ModelConfig.objects.filter(name="scripted-demo").update(options={"rules": "runtime/llm/scripted_demo.yaml", "delay_ms": 0})
    call_command("chat", "--no-color", "what is here?", stdout=out)
    text = out.getvalue()
    assert "→ ls" in text and "← ok:" in text
    assert "## What just happened" in text
    assert "Let me look at the workspace first." in text  # streamed in chunks, printed unbroken
    assert "completed ·" in text and "session " in text
    with pytest.raises(CommandError):
        call_command("chat", "--agent", "nobody", "x", stdout=io.StringIO())


def test_chat_exits_non_zero_when_the_model_fails(make_agent):
    make_agent(rules(default={"reply": {"steps": [], "error": "the model is down"}}), name="broken")
    with pytest.raises(CommandError, match="the model is down"):
        call_command("chat", "--agent", "broken", "--no-color", "hi", stdout=io.StringIO())


@pytest.mark.oracle
def test_pi_reads_back_what_the_runtime_wrote(driver_for, oracle, tmp_path):
    driver = driver_for(rules(summary_rule(), WRITE_THEN_READ, {"match": "slow", "reply": [{"text": "x " * 300, "delay_ms": 3, "chunk_size": 3}]}))
    driver.prompt("hello")
    anchor = path_of(driver)[-1]["id"]
    driver.prompt("make a file")
    session_switch_leaf(actor=None, session_id=driver.session_id, entry_id=anchor, summarize=True)
    driver.prompt("after the summary")
    session_compact(actor=None, session_id=driver.session_id)
    seen = len(driver.sink.of_type("assistant_stream_delta"))
    thread, holder, _ = driver.start("slow one")
    import time

    while len(driver.sink.of_type("assistant_stream_delta")) <= seen:
        time.sleep(0.01)
    from runtime.runs.prompts import run_abort

    run_abort(actor=None, session_id=driver.session_id)
    thread.join(timeout=20)
    provider = get_provider("file")
    header, entries, leaf = provider.session_source(driver.session_id)
    exported = tmp_path / "runtime.jsonl"
    exported.write_text("".join(provider.export_lines(driver.session_id)))
    result = subprocess.run([str(oracle), "context", str(exported)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    pi = json.loads(result.stdout)
    assert pi["leafId"] == leaf
    assert session_view(header, entries, leaf, file_version=3) == pi
    assert [m["role"] for m in pi["messages"]][0] == "compactionSummary"
    assert pi["messages"][-1]["stopReason"] == "aborted"
