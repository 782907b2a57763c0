"""Every streaming event the runtime sends has exactly the keys its declaration names
(``runtime/realtime/stream_events.py``): a real turn with the scripted model — thinking,
text, tool calls whose arguments stream, a tool whose output streams past the tail
limit, an aborted run — and a run the reaper finds lost."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.utils import timezone

from runtime.models import AgentRun, ModelConfig, RunStatus
from runtime.realtime import stream_events
from runtime.realtime.sinks import InMemorySink, set_default_sink
from runtime.runs.prompts import session_prompt
from runtime.runs.reaper import reap_stale_runs
from tests.support.rules import rules

pytestmark = pytest.mark.django_db(transaction=True)

LONG_OUTPUT = "python3 -c \"import sys, time; sys.stdout.write('x' * 9000 + chr(10)); sys.stdout.flush(); time.sleep(0.5); print('done')\""

SCRIPT = rules(
    {
        "match": {"contains": "work"},
        "replies": [
            [
                {"thinking": "First the files."},
                {"text": "Let me look."},
                {"tool_call": {"name": "write", "arguments": {"path": "a.txt", "content": "hi\n"}}},
                {"tool_call": {"name": "bash", "arguments": {"command": LONG_OUTPUT}}},
                {"tool_call": {"name": "no_such_tool", "arguments": {}}},
            ],
            [{"text": "All **done**."}],
        ],
    },
    default={"reply": [{"text": "ok"}]},
)


def misfits(events) -> list[str]:
    return [error for event in events for error in stream_events.shape_errors(event)]


def test_a_turn_sends_only_declared_shapes(driver_for):
    driver = driver_for(SCRIPT, thinking_level="high")
    # A model that does not think: the level is clamped to off, which the run notes (run_note).
    ModelConfig.objects.filter(pk=driver.agent.model_id).update(supports_thinking=False)
    run = driver.prompt("work please")
    assert run.status == RunStatus.COMPLETED, run.error
    events = [e for _, e in driver.sink.events]
    assert misfits(events) == []
    # Every type the turn loop makes was seen (the reserved subagent ones are not sent yet).
    assert {e["type"] for e in events} == stream_events.STREAM_EVENT_TYPES - stream_events.RESERVED_STREAM_EVENT_TYPES
    progress = [e for e in driver.sink.of_type("tool_result_streamed") if not e.get("final")]
    assert any(e["truncated"] for e in progress), "the long output never streamed as a cut tail"
    assert all(len(e["text"]) <= stream_events.TOOL_OUTPUT_TAIL_CHARS for e in driver.sink.of_type("tool_result_streamed"))
    finals = [e for e in driver.sink.of_type("tool_result_streamed") if e.get("final")]
    assert [e["isError"] for e in finals] == [False, False, True]
    states = driver.sink.of_type("run_state")
    assert [s["state"] for s in states] == ["running", "completed"] and states[-1]["error"] is None
    assert all(s["runId"] == str(run.run_id) for s in states)


def test_an_aborted_run_says_why_in_its_declared_shape(driver_for):
    driver = driver_for(rules(default={"reply": [{"text": "never"}]}))
    cancel = threading.Event()
    cancel.set()
    run = driver.prompt("hello", cancel=cancel)
    assert run.status == RunStatus.ABORTED
    events = [e for _, e in driver.sink.events]
    assert misfits(events) == []
    assert driver.sink.of_type("run_state")[-1] == {"type": "run_state", "runId": str(run.run_id), "state": "aborted", "error": run.error}
    assert run.error


def test_the_reapers_run_state_has_the_declared_shape(driver_for, settings):
    driver = driver_for(rules(default={"reply": [{"text": "x"}]}))
    outcome = session_prompt(session_id=driver.session_id, text="hello", actor=None, dispatch=False)
    long_ago = timezone.now() - dt.timedelta(hours=1)
    AgentRun.objects.filter(pk=outcome.run.pk).update(
        status=RunStatus.RUNNING, heartbeat_at=long_ago, started_at=long_ago, host="elsewhere", pid=1
    )
    sink = InMemorySink()
    previous = set_default_sink(sink)
    try:
        reaped = reap_stale_runs(stale_seconds=1, start=False)
    finally:
        set_default_sink(previous)
    assert [r.run_id for r in reaped] == [outcome.run.run_id]
    states = sink.of_type("run_state")
    assert states and misfits(states) == []
    lost = [s for s in states if s["runId"] == str(outcome.run.run_id)]
    assert [s["state"] for s in lost] == [RunStatus.LOST] and lost[0]["error"]


def test_a_renamed_or_missing_field_is_reported():
    event = stream_events.tool_result_final(tool_call_id="c1", text="out", is_error=False)
    assert stream_events.shape_errors(event) == []
    renamed = {**{k: v for k, v in event.items() if k != "toolCallId"}, "toolCallID": "c1"}
    assert stream_events.shape_errors(renamed) == [
        "tool_result_streamed: missing 'toolCallId'",
        "tool_result_streamed: undeclared 'toolCallID'",
    ]
    # A field the channel layer left out (named in ``omitted``) is not missing.
    cut = {k: v for k, v in stream_events.tool_call_completed(entry_id="e", content_index=0, tool_call={}).items() if k != "toolCall"}
    assert stream_events.shape_errors({**cut, "omitted": ["toolCall"]}) == []
    assert stream_events.shape_errors({"type": "no_such_event"}) == ["unknown type 'no_such_event'"]


def test_the_constructors_keep_the_wires_key_order():
    """Frames and the event log are JSON of these dicts: the keys go out in the order
    they always had (the order the dict literals at the call sites used to have)."""
    se = stream_events
    built = [
        se.assistant_stream_start(entry_id="e", run_id="r"),
        se.assistant_stream_delta(entry_id="e", content_index=0, kind="text", offset=0, delta="d"),
        se.assistant_stream_end(entry_id="e", stop_reason="stop", run_id="r"),
        se.tool_call_started(entry_id="e", content_index=1, tool_call_id="c", name="ls"),
        se.tool_call_delta(entry_id="e", content_index=1, delta="{"),
        se.tool_call_completed(entry_id="e", content_index=1, tool_call={}),
        se.tool_result_progress(tool_call_id="c", text="x"),
        se.tool_result_final(tool_call_id="c", text="x", is_error=False),
        se.session_context_stats(tokens=1, context_window=2, model="m"),
        se.run_state(run_id="r", state="running", error=""),
    ]
    assert [list(e) for e in built] == [
        ["type", "entryId", "runId"],
        ["type", "entryId", "contentIndex", "kind", "offset", "delta"],
        ["type", "entryId", "stopReason", "runId"],
        ["type", "entryId", "contentIndex", "toolCallId", "name"],
        ["type", "entryId", "contentIndex", "delta"],
        ["type", "entryId", "contentIndex", "toolCall"],
        ["type", "toolCallId", "text", "truncated"],
        ["type", "toolCallId", "text", "final", "isError"],
        ["type", "tokens", "contextWindow", "model"],
        ["type", "runId", "state", "error"],
    ]
    assert built[-1]["error"] is None  # an empty error travels as null
