"""A subagent child's model calls in its parent run's trace: the real child reports each call
it makes (``model_call``: who answered, when, how it ended, its request by reference, the
texts of its system prompt and tools once per run), the host stores them as ``ModelCall``
rows of the parent run linked to the child, and the texts as blobs under their own digest
only; the event table and the socket carry the event without the texts; the trace's
OpenTelemetry export puts the child's ``chat`` spans under its ``invoke_agent`` span."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal

import pytest

from runtime.models import (
    Blob,
    ModelCall,
    RunStatus,
    SubprocessEvent,
    SubprocessRun,
)
from runtime.runs import telemetry, traces
from runtime.subagents.protocol import ProtocolError, check_event
from runtime.subagents.supervisor import ChildSupervisor, Timings
from tests.subagents.helpers import Recorder, make_envelope
from tests.subagents.host_helpers import (
    Parent,
    delegating,
    ls_then,
    make_agent,
    policy,
)
from tests.support.otel import Collector, attributes

FAST = Timings(term_after=0.5, kill_after=1.5, exit_grace=2.0, wall_clock_grace=0.5)
TWO = {"tasks": [{"agent": "helper", "task": "look at the files"}, {"agent": "helper", "task": "describe the folder"}]}
ANSWER = "The workspace holds notes.txt."



def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- the child's side


def test_the_child_reports_each_call_after_its_answer_with_its_texts_once(workspace):
    recorder = Recorder()
    outcome = ChildSupervisor(make_envelope(workspace), on_event=recorder, timings=FAST).run()
    assert outcome.terminal["status"] == "completed"
    events = recorder.events
    calls = [e for e in events if e["type"] == "model_call"]
    answers = [e for e in events if e["type"] == "assistant_message"]
    assert len(calls) == len(answers) == 2
    for call, answer in zip(calls, answers):
        assert call["seq"] == answer["seq"] + 1 and call["turn"] == answer["turn"]  # right after the answer it produced
        c = call["call"]
        assert (c["model"], c["modelId"], c["provider"], c["api"], c["endpoint"]) == ("demo", "demo", "scripted", "scripted", "")
        assert c["stopReason"] == answer["stopReason"] and c["usage"] == answer["message"]["usage"] and c["error"] == ""
        assert c["startedAt"] <= c["firstTokenAt"] <= c["finishedAt"] <= call["ts"]
        assert c["settings"]["thinking_level"] == "off" and "messages" not in c["settings"] and "system_prompt" not in c["settings"]
    assert [c["call"]["stopReason"] for c in calls] == ["toolUse", "stop"]
    # Its context position: the last event before the call (run_start for the first; the tool's result for the second).
    by_seq = {e["seq"]: e for e in events}
    assert by_seq[calls[0]["call"]["contextSeq"]]["type"] == "run_start"
    assert by_seq[calls[1]["call"]["contextSeq"]]["type"] == "tool_result"
    # The texts travel once, under their own digest; the second call names the same ones.
    first, second = calls[0], calls[1]
    assert set(first["blobs"]) == {first["call"]["systemDigest"], first["call"]["toolsDigest"]} and second["blobs"] == {}
    assert (second["call"]["systemDigest"], second["call"]["toolsDigest"]) == (first["call"]["systemDigest"], first["call"]["toolsDigest"])
    assert all(sha(text) == key for key, text in first["blobs"].items())
    system = first["blobs"][first["call"]["systemDigest"]]
    tools = json.loads(first["blobs"][first["call"]["toolsDigest"]])
    assert system == "You are a subagent. Do the task and answer briefly." and [t["name"] for t in tools] == ["ls", "bash"]


def test_a_model_call_event_is_checked_like_any_other():
    base = {"v": 1, "runId": "r", "seq": 3, "ts": 1, "type": "model_call", "turn": 1}
    assert check_event({**base, "call": {}, "blobs": {}}, run_id="r", last_seq=2)["type"] == "model_call"
    with pytest.raises(ProtocolError, match="model_call.call must be a dict"):
        check_event({**base, "call": "gpt"}, run_id="r", last_seq=2)


# --------------------------------------------------------------------------- the host's side


def parent_with(workspace, parent_rules, child_rules) -> Parent:
    make_agent("helper", child_rules, workspace=workspace)
    return Parent(make_agent("boss", parent_rules, workspace=workspace, subagent_policy=policy("helper")))


@pytest.mark.django_db(transaction=True)
def test_each_childs_calls_are_model_calls_of_the_parent_run(workspace):
    parent = parent_with(workspace, delegating("delegate_parallel", TWO), ls_then(ANSWER))
    run = parent.prompt()
    assert run.status == RunStatus.COMPLETED, run.error
    own = list(ModelCall.objects.filter(run=run, subprocess_run__isnull=True))
    assert len(own) == 2 and all(c.entry_id for c in own)  # the parent's own calls are as they were
    children = list(SubprocessRun.objects.filter(parent_run=run).order_by("task_index"))
    system_prompts = set()
    for child in children:
        calls = list(ModelCall.objects.filter(subprocess_run=child).order_by("started_at", "pk"))
        assert len(calls) == child.counts["turns"] == 2
        assert [c.stop_reason for c in calls] == ["toolUse", "stop"]
        for call in calls:
            assert call.run_id == run.pk and call.session_id == run.session_id and call.entry_id == "" and call.context_leaf_id == ""
            assert (call.model, call.model_id, call.provider, call.api) == ("helper-model", "helper-model-id", "scripted", "scripted")
            assert call.started_at <= call.first_token_at <= call.finished_at and call.error == ""
            assert call.cost == Decimal(str(call.usage["cost"]["total"])).quantize(Decimal("0.000001")) and call.cost > 0
            assert call.settings["thinking_level"] == "off"
        # What the calls used adds up to what the child reported at its end.
        assert sum(c.usage["output"] for c in calls) == child.usage["output"]
        assert sum(c.usage["input"] for c in calls) == child.usage["input"]
        # The context position names the child's own events: the first call saw only its start.
        events = {e.seq: e.type for e in SubprocessEvent.objects.filter(run=child)}
        assert events[calls[0].context_seq] == "run_start" and events[calls[1].context_seq] == "tool_result"
        # The system prompt and the tools are blobs (the child's restricted prompt names its task's agent).
        system = Blob.objects.get(digest=calls[0].system_digest).text
        tools = json.loads(Blob.objects.get(digest=calls[0].tools_digest).text)
        assert "subagent" in system.lower() and "ls" in [t["name"] for t in tools]
        system_prompts.add(system)
        # The table (and so the replay and the socket) holds the events without the texts.
        stored = [e.payload for e in SubprocessEvent.objects.filter(run=child, type="model_call").order_by("seq")]
        assert len(stored) == 2 and all("blobs" not in p and p["call"]["systemDigest"] == calls[0].system_digest for p in stored)
    live = [e["event"] for e in parent.sink.of_type("subagent_event") if e["event"]["type"] == "model_call"]
    assert len(live) == 4 and all("blobs" not in e for e in live)
    assert len(system_prompts) == 1  # two children of one agent: one text, stored once


@pytest.mark.django_db(transaction=True)
def test_a_childs_report_is_stored_only_as_far_as_it_is_sound(workspace):
    """What a child says is checked: a text stored under another text's digest is refused (the
    blobs are shared with every run's records), fields of the wrong type are left empty, and
    nothing raises."""
    parent = parent_with(workspace, delegating("delegate_task", {"agent": "helper", "task": "look"}), ls_then(ANSWER))
    run = parent.prompt()
    child = SubprocessRun.objects.get(parent_run=run)
    before = ModelCall.objects.count()
    honest = "an honest text"
    genuine_system = ModelCall.objects.filter(subprocess_run=child).first().system_digest
    events = [
        {"seq": 900, "ts": 1_700_000_000_000, "type": "model_call", "call": {
            "model": ["not", "text"], "modelId": "x" * 500, "startedAt": "yesterday", "finishedAt": True, "stopReason": "a" * 40,
            "usage": "lots", "settings": [1], "systemDigest": genuine_system, "toolsDigest": "../../etc", "contextSeq": -4, "error": 7,
        }},  # fmt: skip
        {"seq": 901, "ts": 1_700_000_000_500, "type": "model_call", "call": "not an object"},
    ]
    forged = sha("a text this child never sent")
    traces.record_child_calls(child, events, {genuine_system: "a lie", forged: "a lie", sha(honest): honest, "f" * 64: 12})
    rows = list(ModelCall.objects.filter(subprocess_run=child).order_by("-pk")[:2])
    assert ModelCall.objects.count() == before + 2
    odd = next(r for r in rows if r.model_id)
    assert odd.model == "" and odd.model_id == "x" * 200 and odd.stop_reason == "a" * 16 and odd.usage == {} and odd.settings == {}
    assert odd.started_at.timestamp() == 1_700_000_000 and odd.finished_at.timestamp() == 1_700_000_000 and odd.context_seq is None
    assert odd.tools_digest == "" and odd.cost == 0 and odd.error == ""
    assert Blob.objects.get(digest=genuine_system).text != "a lie" and not Blob.objects.filter(digest=forged).exists()
    assert Blob.objects.filter(digest=sha(honest), text=honest).exists() and not Blob.objects.filter(digest="f" * 64).exists()


@pytest.mark.django_db(transaction=True)
def test_the_export_puts_a_childs_chat_spans_under_its_agent_span(workspace, monkeypatch, settings):
    server = Collector()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.url)
    settings.NETA_OTEL_ENABLED = True
    telemetry.reset()
    try:
        parent = parent_with(workspace, delegating("delegate_task", {"agent": "helper", "task": "look"}), ls_then(ANSWER))
        assert parent.prompt().status == RunStatus.COMPLETED
        telemetry.flush()
        spans = list(server.spans)
    finally:
        telemetry.reset()
        server.close()
    (child,) = [s for s in spans if s.name == "invoke_agent helper"]
    (root,) = [s for s in spans if s.name == "invoke_agent boss"]
    under_child = [s for s in spans if s.parent_span_id == child.span_id]
    assert child.parent_span_id == root.span_id
    assert [s.name for s in under_child] == ["chat helper-model-id", "chat helper-model-id"]
    assert all(attributes(s)["gen_ai.usage.output_tokens"] > 0 and attributes(s)["neta.model"] == "helper-model" for s in under_child)
    assert len([s for s in spans if s.name == "chat boss-model-id" and s.parent_span_id == root.span_id]) == 2
