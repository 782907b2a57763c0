"""A run's trace (``runtime/runs/traces.py``, ``GET /api/runs/{id}/trace/``): every model call
recorded as it happened — a failover's attempts each — with its exact request stored by
reference, rebuilt byte for byte equal to the body a local wire server received (Anthropic,
OpenAI chat, OpenAI Responses, through the official SDKs); tool calls with their outcome; a
subagent child's calls under its span; the trace for the run's readers only; old records
pruned; the session's "context at an entry" page shows the request that produced the entry."""

from __future__ import annotations

import datetime as dt
import html
import json
import re

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from runtime.models import Agent, Blob, ModelCall, ModelConfig, ToolCallRecord
from runtime.api.views.traces import rebuilt_body
from runtime.runs import traces
from tests.subagents import host_helpers
from tests.support.driver import Driver
from tests.support.rules import rules
from tests.support.wire_servers import Reply, Status, serve

pytestmark = pytest.mark.django_db(transaction=True)

anthropic_server, _clean_anthropic = serve("anthropic", "anthropic_server")
openai_server, _clean_openai = serve("openai", "openai_server")
responses_server, _clean_responses = serve("openai-responses", "responses_server")

FAST = {"max_retries": 1, "retry_base_delay": 0.01, "timeout": 10}


@pytest.fixture(autouse=True)
def _forget_stored_blobs():
    """Each test starts from an empty database: this process's memory of stored blobs goes too."""
    traces._stored.clear()


def model(monkeypatch, name: str, kind: str, server, **fields) -> ModelConfig:
    key = f"TRACE_TEST_KEY_{name.upper().replace('-', '_')}"
    monkeypatch.setenv(key, "sk-test")
    return ModelConfig.objects.create(
        name=name, provider_kind=kind, provider_name=kind, model_id=f"{name}-id", base_url=server.base_url, api_key_env=key,
        options=FAST, supports_thinking=fields.pop("supports_thinking", False), **fields,
    )  # fmt: skip


def text(value: str) -> Reply:
    return Reply(content=[{"type": "text", "text": value}])


def trace(client, run) -> list[dict]:
    response = client.get(f"/api/runs/{run.run_id}/trace/", {"include": "request"})
    assert response.status_code == 200, response.content
    return response.json()["spans"]


@pytest.mark.parametrize("kind, server_name", [("anthropic", "anthropic_server"), ("openai", "openai_server"), ("openai-responses", "responses_server")])
def test_each_calls_request_is_rebuilt_as_the_wire_received_it(request, monkeypatch, workspace, admin_user, kind, server_name):
    server = request.getfixturevalue(server_name)
    agent = Agent.objects.create(name=f"traced-{kind}", model=model(monkeypatch, f"m-{kind}", kind, server), cwd=str(workspace), system_prompt="Be brief.")
    driver = Driver(agent)
    server.script(text("First answer."), text("Second answer."))
    driver.prompt("hello there")
    second = driver.prompt("and again, with 中文 text")
    client = APIClient()
    client.force_authenticate(admin_user)
    first_calls = [s for s in trace(client, ModelCall.objects.order_by("pk").first().run) if s["kind"] == "model_call"]
    second_calls = [s for s in trace(client, second) if s["kind"] == "model_call"]
    assert len(first_calls) == len(second_calls) == 1 and len(server.requests) == 2
    for span, received in zip(first_calls + second_calls, server.requests):
        assert span["attributes"]["request"] == received.body
        assert span["attributes"]["model"] == f"m-{kind}" and span["attributes"]["endpoint"] == "127.0.0.1"
        assert span["attributes"]["stopReason"] == "stop" and span["attributes"]["timeToFirstTokenMs"] is not None
    # The system prompt, the tools and the model's spec are stored once, however many calls send them.
    assert Blob.objects.count() == 3
    # The model's row changes afterwards: the requests still rebuild as they were sent.
    ModelConfig.objects.filter(name=f"m-{kind}").update(model_id="renamed-id", max_output_tokens=77, supports_thinking=True)
    for span, received in zip(first_calls + second_calls, server.requests):
        rebuilt = rebuilt_body(ModelCall.objects.get(pk=int(span["id"].split(":")[1])))
        assert rebuilt == received.body and "renamed-id" not in json.dumps(rebuilt)
    assert "sk-test" not in "".join(Blob.objects.values_list("text", flat=True))  # the key is never kept


def test_a_failover_records_each_attempt_and_tool_calls_their_outcome(monkeypatch, workspace, anthropic_server, openai_server, admin_user):
    primary = model(monkeypatch, "primary", "anthropic", anthropic_server)
    backup = model(monkeypatch, "backup", "openai", openai_server)
    agent = Agent.objects.create(name="traced", model=primary, fallback_models=["backup"], cwd=str(workspace))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    openai_server.script(
        Reply(content=[{"type": "toolCall", "id": "call_ls", "name": "ls", "arguments": {}}], stop_reason="toolUse"),
        text("Listed."),
    )
    run = Driver(agent).prompt("list please")
    client = APIClient()
    client.force_authenticate(admin_user)
    spans = trace(client, run)
    calls = [s for s in spans if s["kind"] == "model_call"]
    assert [(c["name"], c["attributes"]["stopReason"]) for c in calls] == [("primary", "error"), ("backup", "toolUse"), ("backup", "stop")]
    assert "another model took the call" in calls[0]["attributes"]["error"]
    assert calls[1]["attributes"]["request"] == openai_server.requests[0].body
    (tool,) = [s for s in spans if s["kind"] == "tool_call"]
    assert tool["name"] == "ls" and tool["attributes"]["outcome"] == "ok" and tool["parent"] == str(run.run_id)
    (turn,) = [s for s in spans if s["kind"] == "turn"]
    assert turn["attributes"]["model"] == "backup" and turn["attributes"]["status"] == "completed"
    assert backup.name == "backup"


def test_the_trace_is_for_the_runs_readers_only(driver_for, django_user_model):
    driver = driver_for(rules())
    run = driver.prompt("hello")
    outsider = django_user_model.objects.create_user("outsider", password="pw")
    client = APIClient()
    client.force_authenticate(outsider)
    assert client.get(f"/api/runs/{run.run_id}/trace/").status_code == 404
    assert client.get("/api/runs/not-a-run/trace/").status_code == 404


def test_old_records_are_pruned(driver_for, settings):
    driver = driver_for(rules())
    driver.prompt("hello")
    assert ModelCall.objects.count() == 1
    settings.NETA_TRACE_RETENTION_DAYS = 0
    assert traces.prune() == 0
    settings.NETA_TRACE_RETENTION_DAYS = 30
    assert traces.prune(now=timezone.now() + dt.timedelta(days=31)) == 1
    assert ModelCall.objects.count() == 0 and ToolCallRecord.objects.count() == 0


def test_a_trace_is_written_as_its_inserts_alone_and_a_blob_stored_already_is_kept(driver_for):
    """Blobs first, then the calls, each INSERT committing on its own (no transaction around
    them); a blob another process stored already is left as it is, not an error."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    driver = driver_for(rules())
    driver.prompt("hello")
    (call,) = ModelCall.objects.all()
    stored = Blob.objects.get(digest=call.system_digest)
    traces._stored.clear()  # as a process that has not stored anything yet
    again = ModelCall.objects.get(pk=call.pk)
    again.pk = None
    pending = traces.Pending(calls=[again], blobs={call.system_digest: "not the stored text", "f" * 64: "a new text"})
    with CaptureQueriesContext(connection) as captured:
        traces.write(pending)
    sql = [q["sql"].split(" (")[0] for q in captured.captured_queries]
    assert sql == [f"INSERT OR IGNORE INTO {connection.ops.quote_name(Blob._meta.db_table)}",
                   f"INSERT INTO {connection.ops.quote_name(ModelCall._meta.db_table)}"]  # fmt: skip
    assert Blob.objects.get(digest=call.system_digest).text == stored.text
    assert Blob.objects.get(digest="f" * 64).text == "a new text"
    assert ModelCall.objects.count() == 2
    assert pending.calls == [] and pending.blobs == {}


def test_the_run_page_draws_the_waterfall_and_the_requests(monkeypatch, workspace, anthropic_server, openai_server, admin_client):
    primary = model(monkeypatch, "primary", "anthropic", anthropic_server)
    model(monkeypatch, "backup", "openai", openai_server)
    agent = Agent.objects.create(name="traced", model=primary, fallback_models=["backup"], cwd=str(workspace))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    openai_server.script(
        Reply(content=[{"type": "toolCall", "id": "call_ls", "name": "ls", "arguments": {}}], stop_reason="toolUse"),
        text("Listed."),
    )
    run = Driver(agent).prompt("list please")
    page = admin_client.get(f"/admin/runtime/agentrun/{run.pk}/change/").content.decode()
    assert page.count('<tr data-kind="model_call">') == 3 and page.count('<tr data-kind="tool_call">') == 1
    assert page.count("request sent") == 3 and "another model took the call" in page
    assert "list please" in page  # the rebuilt messages hold the prompt


def test_a_compactions_summary_call_is_recorded_and_rebuilt(monkeypatch, workspace, anthropic_server):
    from runtime.runs.summaries import compact_session

    agent = Agent.objects.create(
        name="compacted", model=model(monkeypatch, "m-compact", "anthropic", anthropic_server), cwd=str(workspace),
        compaction_keep_recent_tokens=10,
    )  # fmt: skip
    driver = Driver(agent)
    anthropic_server.script(*(text(f"Answer number {i}. " * 20) for i in range(3)))
    for i in range(3):
        driver.prompt(f"question number {i} " * 20)
    anthropic_server.script(*(text("## Goal\nSummarized.") for _ in range(2)))
    compact_session(driver.session_id, agent=agent)
    summaries = list(ModelCall.objects.filter(purpose="compaction").order_by("pk"))
    assert summaries and len(anthropic_server.requests) == 3 + len(summaries)
    received = sorted((r.body for r in anthropic_server.requests[3:]), key=lambda b: json.dumps(b, sort_keys=True))
    rebuilt = sorted((rebuilt_body(call) for call in summaries), key=lambda b: json.dumps(b, sort_keys=True))
    assert rebuilt == received
    assert all(call.run is None and call.session_id == driver.session_id and call.messages_digest for call in summaries)


def test_a_childs_calls_are_model_call_spans_under_its_subagent_span(workspace, settings, admin_user):
    settings.NETA_SANDBOX = "none"
    h = host_helpers
    h.make_agent("helper", h.ls_then("Seen it."), workspace=workspace)
    boss = h.make_agent("boss", h.delegating("delegate_task", {"agent": "helper", "task": "look"}), workspace=workspace, subagent_policy=h.policy("helper"))
    run = h.Parent(boss).prompt()
    assert run.status == "completed", run.error
    client = APIClient()
    client.force_authenticate(admin_user)
    spans = trace(client, run)
    (child,) = [s for s in spans if s["kind"] == "subagent"]
    assert child["parent"] == str(run.run_id)
    own = [s for s in spans if s["kind"] == "model_call" and s["parent"] == str(run.run_id)]
    under = [s for s in spans if s["parent"] == child["id"]]
    assert len(own) == 2 and all(s["attributes"]["request"] is not None and s["attributes"]["model"] == "boss-model" for s in own)
    assert [s["kind"] for s in under] == ["model_call", "model_call"] and spans.index(child) < spans.index(under[0])
    assert [s["attributes"]["stopReason"] for s in under] == ["toolUse", "stop"]
    for span in under:
        a = span["attributes"]
        assert span["name"] == a["model"] == "helper-model" and a["subagentRunId"] == child["id"] and a["contextSeq"] >= 1
        assert a["usage"]["output"] > 0 and float(a["cost"]) > 0 and a["timeToFirstTokenMs"] is not None and a["error"] == ""
        assert a["request"] is None and "lived in its process" in a["requestUnavailable"]
        assert "subagent" in a["recorded"]["system"].lower() and "ls" in [t["name"] for t in a["recorded"]["tools"]]
        assert a["recorded"]["settings"]["thinking_level"] == "off"
        assert child["start"] <= span["start"] <= span["end"] <= child["end"]
    # Without ?include=request: no request, as for the parent's own calls.
    plain = client.get(f"/api/runs/{run.run_id}/trace/").json()["spans"]
    assert all("request" not in s["attributes"] and "recorded" not in s["attributes"] for s in plain if s["kind"] == "model_call")


def _details(page: str, css_class: str) -> str:
    match = re.search(rf'<details class="{css_class}"><summary>[^<]*</summary><pre>(.*?)</pre></details>', page, re.S)
    assert match, page[:3000]
    return html.unescape(match.group(1))


def test_the_context_page_shows_the_recorded_request_that_produced_the_entry(monkeypatch, workspace, anthropic_server, admin_client):
    agent = Agent.objects.create(
        name="ctx", model=model(monkeypatch, "m-ctx", "anthropic", anthropic_server), cwd=str(workspace), system_prompt="Answer in one line.",
    )  # fmt: skip
    driver = Driver(agent)
    anthropic_server.script(text("First answer."), text("Second answer."))
    driver.prompt("hello there")
    driver.prompt("and then?")
    call = ModelCall.objects.order_by("pk").last()
    url = f"/admin/sessions_tree/agentsession/{driver.session_id}/context/"
    page = admin_client.get(url, {"at": call.entry_id}).content.decode()
    assert "The recorded request that produced this entry" in page and "No model call is recorded" not in page
    assert "Model <code>m-ctx</code>" in page and "<code>stop</code>" in page
    # The body it sent, rebuilt: equal to what the wire server received for that second call.
    assert json.loads(_details(page, "trace-request")) == anthropic_server.requests[1].body
    assert "Answer in one line." in page and "3 messages sent" in page  # hello, the first answer, and then?
    # The leaf is that entry: the page without ?at= shows the same request.
    assert "The recorded request that produced this entry" in admin_client.get(url).content.decode()
    # A user's entry was produced by no model call: today's reconstruction, with a note.
    fallback = admin_client.get(url, {"at": call.context_leaf_id}).content.decode()
    assert "No model call is recorded for this entry" in fallback and "The recorded request" not in fallback
    assert "and then?" in fallback  # the context rebuilt from the tree still shows
    # Pruned records: the note again.
    ModelCall.objects.all().delete()
    assert "No model call is recorded for this entry" in admin_client.get(url, {"at": call.entry_id}).content.decode()
