"""Model failover and thinking by capability, through the turn loop with the official SDKs
talking to local wire servers (docs/llm.md, "Failover" and "Thinking by capability").

The primary is an Anthropic model on one wire server, the fallbacks OpenAI models on
another; each server records every request it got, so "each model at most once" and
"no fallback asked after output began" are counted, not assumed.
"""

from __future__ import annotations

import json
import socket
import subprocess

import pytest
from django.urls import reverse

from runtime.models import Agent, AgentRun, ModelConfig, RunStatus
from sessions_tree.pi_view import session_view
from sessions_tree.providers import get_provider
from tests.support.driver import Driver
from tests.support.rules import rules
from tests.support.wire_servers import Reply, Status, serve

pytestmark = pytest.mark.django_db(transaction=True)

anthropic_server, _clean_anthropic = serve("anthropic", "anthropic_server")
openai_server, _clean_openai = serve("openai", "openai_server")

KEY = "FAILOVER_TEST_KEY"
FAST = {"max_retries": 1, "retry_base_delay": 0.01, "timeout": 10}
ANSWER = "The backup model answers."


def text_reply(text: str, **kwargs) -> Reply:
    return Reply(content=[{"type": "text", "text": text}], **kwargs)


@pytest.fixture
def models(monkeypatch, anthropic_server, openai_server):
    def make(name, kind, base_url, model_id, **fields):
        options = {**FAST, **fields.pop("options", {})}
        key = fields.pop("api_key_env", None)
        if key is None:  # a key variable per model: one key variable goes to one endpoint only
            key = f"{KEY}_{name.upper().replace('-', '_')}"
            monkeypatch.setenv(key, "sk-test")
        return ModelConfig.objects.create(
            name=name, provider_kind=kind, provider_name=fields.pop("provider_name", kind), model_id=model_id, base_url=base_url,
            api_key_env=key, options=options, **fields,
        )  # fmt: skip

    primary = make("primary", "anthropic", anthropic_server.base_url, "claude-primary")
    backup = make("backup", "openai", openai_server.base_url, "gpt-backup")
    return primary, backup, make


@pytest.fixture
def agent_with(workspace, models):
    def make(*fallbacks, model=None, **fields) -> Agent:
        primary = model or models[0]
        agent = Agent.objects.create(name="failing", model=primary, cwd=str(workspace), fallback_models=list(fallbacks), **fields)
        agent.full_clean()
        return agent

    return make


def assistant_messages(driver: Driver) -> list[dict]:
    return [m for m in get_provider("file").build_context(driver.session_id).messages if m["role"] == "assistant"]


def entry_types(driver: Driver) -> list[str]:
    return [e["type"] for e in get_provider("file").get_active_path(driver.session_id)]


def streamed_text(driver: Driver) -> str:
    return "".join(e["delta"] for e in driver.sink.of_type("assistant_stream_delta") if e["kind"] == "text")


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------- failing over


def test_overloaded_primary_hands_the_call_to_the_fallback(agent_with, anthropic_server, openai_server):
    driver = Driver(agent_with("backup"))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))  # the call and its one retry
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error
    assert len(anthropic_server.requests) == 2 and len(openai_server.requests) == 1
    (reply,) = assistant_messages(driver)
    assert reply["content"] == [{"type": "text", "text": ANSWER}]
    # The message records who answered (Pi's fields), not the model the run started with.
    assert (reply["provider"], reply["model"], reply["api"]) == ("openai", "gpt-backup", "openai-completions")
    assert reply["stopReason"] == "stop" and "errorMessage" not in reply
    assert streamed_text(driver) == ANSWER  # nothing of the failed attempt, nothing twice
    assert openai_server.requests[0].body["prompt_cache_key"] == driver.session_id  # as Pi sends its session id
    # The session's model did not change: the only model_change is the session's first one.
    assert entry_types(driver).count("model_change") == 1
    # The run record says what happened, and the page was told.
    run = AgentRun.objects.get(pk=run.pk)
    failover_notes = [n for n in run.notes if n["kind"] == "failover"]
    assert failover_notes[-1]["text"] == "answered by backup after primary failed: 529 overloaded_error: Overloaded"
    assert failover_notes[-1]["model"] == "backup" and failover_notes[-1]["failed"] == ["primary"]
    live = [e["text"] for e in driver.sink.of_type("run_note")]
    assert live == ["primary failed: 529 overloaded_error: Overloaded; trying backup", failover_notes[-1]["text"]]
    stats = driver.sink.of_type("session_context_stats")[-1]
    assert stats["model"] == "gpt-backup"


def test_the_run_record_carries_the_failover_note(agent_with, anthropic_server, openai_server, client, staff):
    """Browser-free: what the page and the console read — the REST runs list the chat page
    asks after a reload, and the console's run page."""
    driver = Driver(agent_with("backup"))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("hello")
    client.force_login(staff)
    listed = client.get(f"/api/runs/?session={driver.session_id}&limit=1").json()["results"][0]
    expected = "answered by backup after primary failed: 529 overloaded_error: Overloaded"
    assert listed["runId"] == str(run.run_id) and listed["status"] == "completed"
    assert [(n["kind"], n["text"]) for n in listed["notes"]] == [("failover", expected)]
    page = client.get(reverse("admin:runtime_agentrun_change", args=[run.pk])).content.decode()
    assert f"failover: {expected}" in page and "primary (answered by backup after a failover)" in page


def test_a_429_asking_for_a_long_wait_fails_over_at_once(agent_with, anthropic_server, openai_server):
    """The primary's retry policy does not wait 120 s (over retry_max_wait): the call fails
    with the 429 at once, and the fallback takes it."""
    driver = Driver(agent_with("backup"))
    anthropic_server.script(Status(429, "Number of requests exceeded", headers={"retry-after": "120"}))
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error
    assert len(anthropic_server.requests) == 1 and len(openai_server.requests) == 1
    assert AgentRun.objects.get(pk=run.pk).notes[-1]["text"] == (
        "answered by backup after primary failed: 429 rate_limit_error: Number of requests exceeded"
    )


def test_connection_refused_fails_over(agent_with, models, openai_server):
    primary = models[0]
    primary.base_url = f"http://127.0.0.1:{closed_port()}"
    primary.save()
    driver = Driver(agent_with("backup"))
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error
    assert assistant_messages(driver)[0]["model"] == "gpt-backup"
    note = AgentRun.objects.get(pk=run.pk).notes[-1]["text"]
    assert note.startswith("answered by backup after primary failed: Connection error")


def test_a_silent_primary_times_out_and_fails_over(agent_with, models, anthropic_server, openai_server):
    primary = models[0]
    primary.options = {**FAST, "max_retries": 0, "timeout": 0.5}
    primary.save()
    driver = Driver(agent_with("backup"))
    anthropic_server.script(text_reply("too late", hold_headers=True))
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error
    assert assistant_messages(driver)[0]["content"][0]["text"] == ANSWER
    assert "primary failed: Request timed out" in AgentRun.objects.get(pk=run.pk).notes[-1]["text"]


@pytest.fixture(autouse=True)
def _quick_retries(settings):
    """Mid-stream retries wait 1, 2, 4 ms here (2, 4, 8 s in a deployment)."""
    settings.NETA_LLM_RETRY_BASE_MS = 1
    settings.NETA_LLM_RETRIES = 3


LONG_TEXT = "Partial answer that is streamed in many small pieces before the failure."


def broken_reply(broken: str) -> Reply:
    how = {"error_after": 6} if broken == "error_event" else {"cut_after": 6}
    return text_reply(LONG_TEXT, chunk=3, **how)


def path_messages(driver: Driver) -> list[dict]:
    """The assistant messages on the active path (what the file keeps, errored ones too)."""
    path = get_provider("file").get_active_path(driver.session_id)
    return [e["message"] for e in path if e["type"] == "message" and e["message"]["role"] == "assistant"]


@pytest.mark.parametrize("broken", ["error_event", "dropped_connection", "529_on_the_retry"])
def test_a_call_broken_after_its_output_began_is_retried_and_the_run_completes(agent_with, anthropic_server, openai_server, broken):
    # A fallback is there to be passed over (a 529 before any output would rightly go to it).
    driver = Driver(agent_with() if broken == "529_on_the_retry" else agent_with("backup"))
    if broken == "529_on_the_retry":  # broken mid-stream, then the retry meets 529 twice (the call and its own retry)
        anthropic_server.script(broken_reply("error_event"), Status(529, "Overloaded"), Status(529, "Overloaded"), text_reply(ANSWER))
    else:
        anthropic_server.script(broken_reply(broken), text_reply(ANSWER))
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error
    assert len(openai_server.requests) == 0  # retried on its own model, no failover
    # The broken reply stays in the file with its error; the answer follows it.
    broken_msg, *_, answer = path_messages(driver)
    assert broken_msg["stopReason"] == "error" and broken_msg["errorMessage"]
    assert LONG_TEXT.startswith(broken_msg["content"][0]["text"]) and broken_msg["content"][0]["text"]
    assert answer["stopReason"] == "stop" and answer["content"] == [{"type": "text", "text": ANSWER}]
    # ... but not in the context: the retry was sent the prompt alone, as the next prompt will be.
    retried = anthropic_server.requests[-1].body["messages"]
    assert [m["role"] for m in retried] == ["user"]
    # Each retry is in the run's record and was sent to the page.
    notes = [n for n in AgentRun.objects.get(pk=run.pk).notes if n["kind"] == "retry"]
    attempts = 2 if broken == "529_on_the_retry" else 1
    assert [n["attempt"] for n in notes] == [*range(1, attempts + 1), attempts]
    assert notes[0]["text"].startswith("primary failed: ") and notes[0]["text"].endswith("; retry 1/3 in 0.001 s")
    assert notes[-1]["text"] == f"primary answered after {attempts} retries"
    assert [e["text"] for e in driver.sink.of_type("run_note") if e["kind"] == "retry"] == [n["text"] for n in notes]


def test_three_failed_retries_hand_the_call_to_the_next_model(agent_with, anthropic_server, openai_server):
    driver = Driver(agent_with("backup"))
    anthropic_server.script(*[broken_reply("error_event") for _ in range(4)])  # the call and its three retries
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error
    assert len(anthropic_server.requests) == 4 and len(openai_server.requests) == 1
    messages = path_messages(driver)
    assert [m["stopReason"] for m in messages] == ["error"] * 4 + ["stop"]
    assert messages[-1]["model"] == "gpt-backup" and messages[-1]["content"][0]["text"] == ANSWER
    assert [m["role"] for m in openai_server.requests[0].body["messages"] if m["role"] != "system"] == ["user"]
    notes = AgentRun.objects.get(pk=run.pk).notes
    assert [n["kind"] for n in notes] == ["retry", "retry", "retry", "failover"]
    assert notes[-1]["text"].startswith("primary failed after 3 retries: ") and notes[-1]["text"].endswith("; backup takes over")


def test_a_broken_call_without_a_fallback_fails_after_its_retries(agent_with, anthropic_server):
    driver = Driver(agent_with())
    anthropic_server.script(*[broken_reply("dropped_connection") for _ in range(4)])
    run = driver.prompt("hello")
    assert run.status == RunStatus.FAILED
    assert len(anthropic_server.requests) == 4
    assert [m["stopReason"] for m in path_messages(driver)] == ["error"] * 4
    assert AgentRun.objects.get(pk=run.pk).notes[-1]["text"].startswith("primary failed after 3 retries: ")


def test_no_retry_when_retries_are_off_and_no_failover_once_output_was_streamed(agent_with, anthropic_server, openai_server, settings):
    settings.NETA_LLM_RETRIES = 0
    driver = Driver(agent_with())
    anthropic_server.script(broken_reply("error_event"))
    run = driver.prompt("hello")
    assert run.status == RunStatus.FAILED
    assert len(anthropic_server.requests) == 1
    (reply,) = assistant_messages(driver)
    assert reply["stopReason"] == "error" and reply["model"] == "claude-primary"
    kept = reply["content"][0]["text"]
    assert kept and LONG_TEXT.startswith(kept) and streamed_text(driver) == kept  # what was shown, once


def test_each_model_is_asked_once_per_call(agent_with, models, anthropic_server, openai_server):
    _, _, make = models
    make("backup-2", "openai", openai_server.base_url, "gpt-backup-2")
    driver = Driver(agent_with("backup", "backup-2"))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    openai_server.script(Status(503, "busy"), Status(503, "busy"), Status(500, "down"), Status(500, "down"))
    run = driver.prompt("hello")
    assert run.status == RunStatus.FAILED
    assert len(anthropic_server.requests) == 2  # the call + its retry, never again after the fallbacks
    asked = [r.body["model"] for r in openai_server.requests]
    assert asked == ["gpt-backup", "gpt-backup", "gpt-backup-2", "gpt-backup-2"]
    (reply,) = assistant_messages(driver)
    assert reply["model"] == "gpt-backup-2" and reply["stopReason"] == "error"
    assert run.error == reply["errorMessage"] == "500 down"
    note = AgentRun.objects.get(pk=run.pk).notes[-1]["text"]
    assert note == "no model answered: primary failed: 529 overloaded_error: Overloaded; backup failed: 503 busy; backup-2 failed: 500 down"


def test_a_fallback_failing_after_its_output_began_is_the_calls_error(agent_with, anthropic_server, openai_server, settings):
    settings.NETA_LLM_RETRIES = 0  # with retries, the backup would be asked again (the tests above)
    driver = Driver(agent_with("backup"))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    openai_server.script(text_reply("Half an answer from the backup, then", chunk=3, error_after=4))
    run = driver.prompt("hello")
    assert run.status == RunStatus.FAILED
    assert len(anthropic_server.requests) == 2 and len(openai_server.requests) == 1  # the primary is not asked again
    (reply,) = assistant_messages(driver)
    assert reply["model"] == "gpt-backup" and reply["content"][0]["text"] == streamed_text(driver)
    note = AgentRun.objects.get(pk=run.pk).notes[-1]["text"]
    assert note.startswith("backup took over after primary failed: 529 overloaded_error: Overloaded, then failed: ")


def test_an_abort_while_the_fallback_streams(agent_with, anthropic_server, openai_server):
    from runtime.runs.prompts import run_abort
    from tests.support.services import wait_until as wait_for

    driver = Driver(agent_with("backup"))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    held = text_reply("Streaming slowly from the backup", chunk=3, hold_after=4)
    openai_server.script(held)
    thread, holder, _ = driver.start("hello")
    wait_for(lambda: streamed_text(driver) != "" or len(driver.sink.of_type("assistant_stream_delta")) > 0)
    run_abort(actor=None, session_id=driver.session_id)
    thread.join(timeout=20)
    held.release.set()
    (run,) = holder
    assert run.status == RunStatus.ABORTED
    (reply,) = assistant_messages(driver)
    assert reply["stopReason"] == "aborted" and reply["model"] == "gpt-backup"
    assert AgentRun.objects.get(pk=run.pk).notes[-1]["text"] == (
        "aborted while backup answered after primary failed: 529 overloaded_error: Overloaded"
    )


def test_a_client_error_does_not_fail_over(agent_with, anthropic_server, openai_server):
    driver = Driver(agent_with("backup"))
    anthropic_server.script(Status(401, "invalid x-api-key", error_type="authentication_error"))
    run = driver.prompt("hello")
    assert run.status == RunStatus.FAILED and "invalid x-api-key" in run.error
    assert len(openai_server.requests) == 0


def test_an_overflow_moves_to_a_fallback_with_a_larger_window(agent_with, models, anthropic_server, openai_server):
    primary, backup, make = models
    backup.context_window = 64000  # smaller than the primary's: skipped for an overflow
    backup.save()
    make("big", "openai", openai_server.base_url, "gpt-big", context_window=1_000_000)
    driver = Driver(agent_with("backup", "big"))
    anthropic_server.script(Status(400, "prompt is too long: 200500 tokens > 200000 maximum", error_type="invalid_request_error"))
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error
    assert [r.body["model"] for r in openai_server.requests] == ["gpt-big"]
    assert assistant_messages(driver)[0]["model"] == "gpt-big"
    note = AgentRun.objects.get(pk=run.pk).notes[-1]["text"]
    assert note.startswith("answered by big after primary failed: context overflow (400 invalid_request_error: prompt is too long")


def test_the_run_keeps_the_fallback_that_answered_for_its_next_calls(agent_with, anthropic_server, openai_server):
    """A tool round: the second call goes to the fallback that answered the first, not back
    to the primary that was failing (the next run starts from the primary again)."""
    driver = Driver(agent_with("backup"))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    call = {"type": "toolCall", "id": "call_1", "name": "ls", "arguments": {"path": "."}}
    openai_server.script(Reply(content=[call], stop_reason="toolUse"), text_reply(ANSWER))
    run = driver.prompt("list files")
    assert run.status == RunStatus.COMPLETED, run.error
    assert len(anthropic_server.requests) == 2 and len(openai_server.requests) == 2
    assert [m["model"] for m in assistant_messages(driver)] == ["gpt-backup", "gpt-backup"]
    anthropic_server.script(text_reply("The primary is back."))
    run = driver.prompt("again")
    assert run.status == RunStatus.COMPLETED, run.error
    assert assistant_messages(driver)[-1]["model"] == "claude-primary"
    assert not AgentRun.objects.get(pk=run.pk).notes


def test_the_title_is_written_by_the_model_that_answered(agent_with, anthropic_server, openai_server, settings):
    settings.NETA_TITLE_MODEL = ""  # titles by the agent's model (tests turn them off by default)
    driver = Driver(agent_with("backup"))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    openai_server.script(text_reply(ANSWER), text_reply("Greeting the backup"))
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error
    assert len(anthropic_server.requests) == 2  # the failing primary is not asked for the title
    assert [r.body["model"] for r in openai_server.requests] == ["gpt-backup", "gpt-backup"]
    assert get_provider("file").get_session(driver.session_id).title == "Greeting the backup"


def test_unusable_fallbacks_are_skipped_and_named(agent_with, models, anthropic_server, openai_server, monkeypatch):
    _, _, make = models
    make("keyless", "openai", openai_server.base_url, "gpt-keyless", api_key_env="FAILOVER_UNSET_KEY")
    monkeypatch.delenv("FAILOVER_UNSET_KEY", raising=False)
    driver = Driver(agent_with("keyless", "backup"))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error
    assert [r.body["model"] for r in openai_server.requests] == ["gpt-backup"]
    note = AgentRun.objects.get(pk=run.pk).notes[-1]["text"]
    assert "answered by backup after primary failed" in note and "keyless skipped: model 'keyless' needs an API key" in note


def test_a_chain_with_nothing_left_to_ask_names_why(agent_with, models, anthropic_server, openai_server):
    driver = Driver(agent_with("backup"))
    ModelConfig.objects.filter(name="backup").update(enabled=False)  # disabled after it was chosen
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    run = driver.prompt("hello")
    assert run.status == RunStatus.FAILED and len(openai_server.requests) == 0
    note = AgentRun.objects.get(pk=run.pk).notes[-1]["text"]
    assert note == "no model answered: primary failed: 529 overloaded_error: Overloaded (backup skipped: model 'backup' is disabled)"


@pytest.mark.oracle
def test_pi_reads_a_session_answered_by_a_fallback(agent_with, anthropic_server, openai_server, oracle, tmp_path):
    driver = Driver(agent_with("backup"))
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    openai_server.script(text_reply(ANSWER))
    assert driver.prompt("hello").status == RunStatus.COMPLETED
    # Pi's rule (pi-session-format.md §8): the context's model follows the last assistant
    # message, so the session shows the fallback as the model that answered last — without a
    # model_change entry, which records a selection (the next run still starts from the primary).
    assert get_provider("file").build_context(driver.session_id).model == {"provider": "openai", "modelId": "gpt-backup"}
    assert entry_types(driver).count("model_change") == 1
    anthropic_server.script(text_reply("The primary is back."))
    assert driver.prompt("and now?").status == RunStatus.COMPLETED
    provider = get_provider("file")
    header, entries, leaf = provider.session_source(driver.session_id)
    exported = tmp_path / "failover.jsonl"
    exported.write_text("".join(provider.export_lines(driver.session_id)))
    result = subprocess.run([str(oracle), "context", str(exported)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    pi = json.loads(result.stdout)
    assert session_view(header, entries, leaf, file_version=3) == pi
    replies = [m for m in pi["messages"] if m["role"] == "assistant"]
    assert [(m["provider"], m["model"], m["api"]) for m in replies] == [
        ("openai", "gpt-backup", "openai-completions"),
        ("anthropic", "claude-primary", "anthropic-messages"),
    ]
    # The next run went back to the primary: Pi's model follows it, with one model_change in the file.
    assert pi["model"] == {"provider": "anthropic", "modelId": "claude-primary"}
    assert entry_types(driver).count("model_change") == 1


def test_pi_reads_a_session_with_a_retried_reply_as_neta_does(agent_with, anthropic_server, oracle, tmp_path):
    """The broken reply is in the file (Pi's context has it, with its error) and the retry's
    reply follows it; what a model is sent leaves it out (``llm_messages``, Pi's
    ``transformMessages``: errored and aborted assistant messages are skipped)."""
    from runtime.runs.turn import llm_messages

    driver = Driver(agent_with())
    anthropic_server.script(broken_reply("error_event"), text_reply(ANSWER))
    assert driver.prompt("hello").status == RunStatus.COMPLETED
    provider = get_provider("file")
    header, entries, leaf = provider.session_source(driver.session_id)
    exported = tmp_path / "retried.jsonl"
    exported.write_text("".join(provider.export_lines(driver.session_id)))
    result = subprocess.run([str(oracle), "context", str(exported)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    pi = json.loads(result.stdout)
    assert session_view(header, entries, leaf, file_version=3) == pi
    assert [(m["role"], m.get("stopReason")) for m in pi["messages"]] == [("user", None), ("assistant", "error"), ("assistant", "stop")]
    sent = llm_messages(provider.build_context(driver.session_id).messages)
    assert [(m["role"], m.get("stopReason")) for m in sent] == [("user", None), ("assistant", "stop")]


# --------------------------------------------------------------------------- thinking by capability


def test_thinking_is_clamped_to_what_the_model_accepts(agent_with, models, openai_server):
    _, backup, _ = models
    backup.supports_thinking = True
    backup.save()
    driver = Driver(agent_with(model=backup, thinking_level="xhigh"))
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("think hard")
    assert run.status == RunStatus.COMPLETED, run.error
    assert openai_server.requests[0].body["reasoning_effort"] == "high"
    (note,) = AgentRun.objects.get(pk=run.pk).notes
    assert note["kind"] == "thinking" and note["text"] == "thinking xhigh → high: model backup accepts off, minimal, low, medium, high"
    assert [e["text"] for e in driver.sink.of_type("run_note")] == [note["text"]]


def test_a_declared_level_list_is_honoured(agent_with, models, openai_server):
    _, backup, _ = models
    backup.supports_thinking = True
    backup.options = {**FAST, "thinking_levels": ["low", "medium", "high"]}  # e.g. a model refusing "minimal"
    backup.full_clean()
    backup.save()
    driver = Driver(agent_with(model=backup, thinking_level="minimal"))
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("think a little")
    assert run.status == RunStatus.COMPLETED, run.error
    assert openai_server.requests[0].body["reasoning_effort"] == "low"  # up: thinking was asked for
    assert AgentRun.objects.get(pk=run.pk).notes[0]["text"] == "thinking minimal → low: model backup accepts off, low, medium, high"


def test_a_model_without_thinking_gets_off_and_the_run_says_so(make_agent):
    agent = make_agent(rules(default={"reply": [{"text": "plain"}]}), thinking_level="high")
    ModelConfig.objects.filter(pk=agent.model_id).update(supports_thinking=False)
    driver = Driver(Agent.objects.get(pk=agent.pk))
    run = driver.prompt("hi")
    assert run.status == RunStatus.COMPLETED, run.error
    assert AgentRun.objects.get(pk=run.pk).notes == [
        {"kind": "thinking", "text": "thinking high → off: model tester-model does not think", "at": run.notes[0]["at"],
         "model": "tester-model", "requested": "high", "level": "off"},
    ]  # fmt: skip


def test_a_fallback_gets_the_level_it_accepts(agent_with, models, anthropic_server, openai_server):
    primary, backup, _ = models
    primary.supports_thinking = True
    primary.save()
    driver = Driver(agent_with("backup", thinking_level="medium"))  # the backup does not think
    anthropic_server.script(Status(529, "Overloaded"), Status(529, "Overloaded"))
    openai_server.script(text_reply(ANSWER))
    run = driver.prompt("hello")
    assert run.status == RunStatus.COMPLETED, run.error
    assert anthropic_server.requests[0].body["thinking"]["type"] == "enabled"
    assert "reasoning_effort" not in openai_server.requests[0].body
    texts = [n["text"] for n in AgentRun.objects.get(pk=run.pk).notes]
    assert "thinking medium → off: model backup does not think" in texts
    assert texts[-1].startswith("answered by backup after primary failed")
