"""A run's trace to OpenTelemetry (``runtime/runs/telemetry.py``): with the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` set, the official SDK sends a local OTLP/HTTP collector an
``invoke_agent`` span per run with ``chat`` and ``execute_tool`` children carrying the GenAI
semantic conventions' attributes; prompts only when content capture is on; a collector that is
down changes nothing for the run."""

from __future__ import annotations

import pytest

from runtime.models import RunStatus
from runtime.runs import telemetry
from tests.support.otel import Collector, attributes
from tests.support.rules import rules

pytestmark = pytest.mark.django_db(transaction=True)

LIST_THEN_ANSWER = rules(default={"replies": [[{"tool_call": {"name": "ls", "arguments": {"path": "."}}}], [{"text": "done"}]]})


@pytest.fixture
def collector(monkeypatch, settings):
    server = Collector()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.url)
    settings.NETA_OTEL_ENABLED = True
    telemetry.reset()
    yield server
    telemetry.reset()
    server.close()


def test_a_run_becomes_an_agent_span_with_chat_and_tool_children(collector, driver_for):
    run = driver_for(LIST_THEN_ANSWER).prompt("list the workspace")
    assert run.status == RunStatus.COMPLETED
    telemetry.flush()
    by_name = {span.name: span for span in collector.spans}
    assert sorted(by_name) == ["chat scripted-test", "execute_tool ls", "invoke_agent tester"]
    assert len([s for s in collector.spans if s.name == "chat scripted-test"]) == 2
    root = by_name["invoke_agent tester"]
    root_attributes = attributes(root)
    assert root_attributes["gen_ai.operation.name"] == "invoke_agent" and root_attributes["gen_ai.agent.name"] == "tester"
    assert root_attributes["gen_ai.conversation.id"] == run.session_id and root_attributes["neta.run.id"] == str(run.run_id)
    assert "gen_ai.input.messages" not in root_attributes  # no content unless asked
    for span in collector.spans:
        if span is not root:
            assert span.parent_span_id == root.span_id and span.trace_id == root.trace_id
    chat = attributes(by_name["chat scripted-test"])
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.provider.name"] == "neta.scripted"
    assert chat["gen_ai.request.model"] == "scripted-test" and chat["gen_ai.usage.input_tokens"] > 0
    tool = attributes(by_name["execute_tool ls"])
    assert tool["gen_ai.tool.name"] == "ls" and tool["neta.tool.outcome"] == "ok"
    assert root.start_time_unix_nano <= by_name["execute_tool ls"].start_time_unix_nano <= root.end_time_unix_nano


def test_prompts_go_along_only_when_content_capture_is_on(collector, driver_for, settings):
    settings.NETA_OTEL_CAPTURE_CONTENT = True
    driver_for(rules()).prompt("a secret plan")
    telemetry.flush()
    (root,) = [s for s in collector.spans if s.name.startswith("invoke_agent")]
    assert "a secret plan" in attributes(root)["gen_ai.input.messages"]


def test_a_collector_that_is_down_changes_nothing_for_the_run(monkeypatch, settings, driver_for):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    settings.NETA_OTEL_ENABLED = True
    telemetry.reset()
    try:
        run = driver_for(LIST_THEN_ANSWER).prompt("list the workspace")
        assert run.status == RunStatus.COMPLETED and run.error == ""
        telemetry.flush(timeout_ms=3000)  # the export fails in the SDK's thread and is logged
    finally:
        telemetry.reset()
